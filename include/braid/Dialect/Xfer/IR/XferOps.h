//===- XferOps.h - Xfer dialect ---------------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_IR_XFEROPS_H
#define BRAID_DIALECT_XFER_IR_XFEROPS_H

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "braid/Dialect/Xfer/IR/XferOpsDialect.h.inc"

namespace braid::xfer {
/// The side-effect resource of in-flight transfers.
struct CommResource : public mlir::SideEffects::Resource::Base<CommResource> {
  llvm::StringRef getName() final { return "xfer.comm"; }
};

/// True if buffers of `type` are row-major contiguous (any offset), as the
/// runtime needs: transfers hand it raw byte ranges.
bool isContiguous(mlir::MemRefType type);
} // namespace braid::xfer

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Xfer/IR/XferOpsTypes.h.inc"

#define GET_OP_CLASSES
#include "braid/Dialect/Xfer/IR/XferOps.h.inc"

namespace braid::xfer {
/// The attribute braid-plan-memory puts on the `memref.get_global` of a
/// function's arena.
inline constexpr llvm::StringLiteral kArenaAttrName = "braid.arena";
/// The attribute that numbers each buffer (`memref.view` of an arena) of a
/// function's plan, which keeps CSE from merging two of them.
inline constexpr llvm::StringLiteral kPlannedBufferAttrName = "braid.buffer";
/// The module attribute in which braid-plan-memory describes its plan: per
/// function, the buffers planned, their bytes, the arena's and those left
/// to the heap (read into the report by the compiler).
inline constexpr llvm::StringLiteral kMemoryPlanAttrName = "braid.memory_plan";
/// The attribute on a kernel call of a cpu program (an outlined kernel, a
/// GEMM) that braid-kernel-events turns into trace events around it: a
/// dictionary of its `name`, the `bytes` it moves and the `flops` it
/// computes (0: not known).
inline constexpr llvm::StringLiteral kTraceEventAttrName = "braid.trace";
/// Describes the kernel `call` is for braid-kernel-events.
void setTraceEvent(mlir::Operation *call, llvm::StringRef name, int64_t bytes,
                   int64_t flops);
/// The bytes of a static memref of int, index or float elements.
std::optional<int64_t> getStaticBytes(mlir::MemRefType type);
/// The bytes [first, second) of a planned arena that `buffer` occupies, if
/// it is a `memref.view` of one at a constant offset.
std::optional<std::pair<int64_t, int64_t>> getArenaBytes(mlir::Value buffer);
/// Whether `a` and `b` are buffers of one planned arena whose bytes overlap.
bool arenaBytesOverlap(mlir::Value a, mlir::Value b);
/// The allocation (or argument) `buffer` is a view of, through view-like
/// ops and casts; a planned buffer (a view of an arena, getArenaBytes) is
/// its own root: buffers of one arena are only ever live together at
/// disjoint bytes.
mlir::Value getRootBuffer(mlir::Value buffer);
/// The symmetric allocation `buffer` is (a view of), or null.
SymmetricAllocOp getSymmetricAlloc(mlir::Value buffer);
} // namespace braid::xfer

#endif // BRAID_DIALECT_XFER_IR_XFEROPS_H
