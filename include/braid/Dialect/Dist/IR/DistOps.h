//===- DistOps.h - Dist attributes, types and operations --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTOPS_H
#define BRAID_DIALECT_DIST_IR_DISTOPS_H

#include "braid/Dialect/Dist/IR/DistDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "braid/Dialect/Dist/IR/DistOpsEnums.h.inc"

namespace braid::dist {

/// Placement of a value along one grid axis; see `#dist.placement`.
struct AxisPlacement {
  PlacementKind kind = PlacementKind::Replicate;
  /// The sharded tensor dimension, for `shard`.
  int64_t dim = 0;
  /// The pending reduction, for `partial`.
  ReductionKind reduction = ReductionKind::Sum;

  static AxisPlacement replicate() { return {}; }
  static AxisPlacement shard(int64_t dim) {
    return {PlacementKind::Shard, dim, ReductionKind::Sum};
  }
  static AxisPlacement partial(ReductionKind kind) {
    return {PlacementKind::Partial, 0, kind};
  }
  bool operator==(const AxisPlacement &other) const {
    return kind == other.kind &&
           (kind != PlacementKind::Shard || dim == other.dim) &&
           (kind != PlacementKind::Partial || reduction == other.reduction);
  }
};

llvm::hash_code hash_value(const AxisPlacement &placement);

/// The side-effect resource of in-flight transfers.
struct CommResource : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "dist.comm"; }
};

/// True if `kind` can reduce elements of type `elementType`.
bool isReductionLegalFor(ReductionKind kind, mlir::Type elementType);

/// Number of ranks in a group over `axes` of `grid`, or ShapedType::kDynamic
/// if an axis has a dynamic size.
int64_t getGroupSize(mlir::shard::GridOp grid, llvm::ArrayRef<int16_t> axes);

/// The most ranks a grid may span: far more than any machine has, and few
/// enough that sizes times ranks stay well inside int64_t
/// (docs/rationale/limits-and-crashes.md, "Grid sizes").
constexpr int64_t kMaxGridRanks = int64_t(1) << 20;

/// Checks that Braid can compile for `grid`: each static axis has at least
/// one rank, and the static axes together span at most kMaxGridRanks.
/// Dynamic axes pass (the runnable stages reject them). The error is
/// appended to the diagnostic `emitError` starts.
mlir::LogicalResult
verifyGridShape(mlir::shard::GridOp grid,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError);

/// Resolves `gridAttr` from `op` and checks that `axes` exist on that grid;
/// and that Braid can compile for the grid (verifyGridShape); returns the
/// group size (possibly dynamic) through `groupSize`. Errors are emitted on
/// `op`. Shared by the dist and xfer verifiers.
mlir::LogicalResult verifyGridUse(mlir::Operation *op,
                                  mlir::FlatSymbolRefAttr gridAttr,
                                  llvm::ArrayRef<int16_t> axes,
                                  mlir::SymbolTableCollection &symbolTable,
                                  int64_t &groupSize);

/// The grid that `symbol` names from `from`, or null.
mlir::shard::GridOp lookupGrid(mlir::Operation *from,
                               mlir::FlatSymbolRefAttr symbol);

} // namespace braid::dist

#define GET_ATTRDEF_CLASSES
#include "braid/Dialect/Dist/IR/DistOpsAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Dist/IR/DistOpsTypes.h.inc"

namespace braid::dist {
/// Checks that `placement` describes a value of `type` on `grid`: one entry
/// per grid axis, sharded dimensions within the tensor's rank, partial
/// reductions defined for its element type.
mlir::LogicalResult
verifyPlacement(PlacementAttr placement, mlir::Type type,
                mlir::shard::GridOp grid,
                llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
} // namespace braid::dist

#include "braid/Dialect/Dist/IR/DistInterfaces.h.inc"

#define GET_OP_CLASSES
#include "braid/Dialect/Dist/IR/DistOps.h.inc"

#endif // BRAID_DIALECT_DIST_IR_DISTOPS_H
