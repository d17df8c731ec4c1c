//===- DistDialect.cpp - Dist dialect ---------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace braid::dist;

#include "braid/Dialect/Dist/IR/DistOpsDialect.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "braid/Dialect/Dist/IR/DistOps.cpp.inc"
      >();
  registerAttributes();
  registerTypes();
}

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() == getTopologyAttrName()) {
    auto grid = dyn_cast<shard::GridOp>(op);
    if (!grid)
      return op->emitError() << "'" << getTopologyAttrName()
                             << "' may only be attached to a 'shard.grid'";
    auto links = dyn_cast<ArrayAttr>(attr.getValue());
    if (!links)
      return op->emitError() << "'" << getTopologyAttrName()
                             << "' must be an array of #dist.link";
    if (static_cast<int64_t>(links.size()) != grid.getRank())
      return op->emitError()
             << "'" << getTopologyAttrName() << "' has " << links.size()
             << " links but the grid has " << grid.getRank() << " axes";
    for (Attribute link : links)
      if (!isa<LinkAttr>(link))
        return op->emitError() << "'" << getTopologyAttrName() << "' entry "
                               << link << " is not a #dist.link";
    return success();
  }
  if (attr.getName() == getStepAttrName()) {
    if (!isa<CollectiveOpInterface>(op) || !isa<IntegerAttr>(attr.getValue()))
      return op->emitError() << "'" << getStepAttrName()
                             << "' must be an integer on a dist collective";
    return success();
  }
  if (attr.getName() == getSymmetricAttrName()) {
    // Ring shifts, and the transfers they bufferize to (by name: xfer
    // depends on dist, not the other way round).
    StringRef name = op->getName().getStringRef();
    if (!isa<UnitAttr>(attr.getValue()) ||
        !llvm::is_contained(
            {"dist.shift", "dist.shift_start", "xfer.send", "xfer.recv"}, name))
      return op->emitError()
             << "'" << getSymmetricAttrName()
             << "' must be a unit attribute on a ring shift (dist.shift, "
                "dist.shift_start) or its transfers (xfer.send, xfer.recv)";
    return success();
  }
  if (attr.getName() == getQuantizationBoundAttrName()) {
    auto bound = dyn_cast<FloatAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !bound || !bound.getType().isF64() ||
        !(bound.getValueAsDouble() > 0 && bound.getValueAsDouble() < 1))
      return op->emitError() << "'" << getQuantizationBoundAttrName()
                             << "' must be an f64 in (0, 1) on a module";
    return success();
  }
  if (attr.getName() == getQuantizedAttrName()) {
    auto format = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<AllGatherOp, AllGatherStartOp>(op) || !format ||
        !llvm::is_contained({"bf16", "fp8-e4m3"}, format.getValue()))
      return op->emitError()
             << "'" << getQuantizedAttrName()
             << "' must be \"bf16\" or \"fp8-e4m3\" on an all-gather";
    return success();
  }
  if (attr.getName() == getPlacementAttrName())
    return op->emitError() << "'" << getPlacementAttrName()
                           << "' belongs on function arguments and results; "
                              "use 'dist.annotate' to place a value";
  return op->emitError() << "unknown dist attribute '"
                         << attr.getName().getValue() << "'";
}

/// Checks a placement attached to a function argument or result of `type`.
static LogicalResult verifyPlacementOn(Operation *op, NamedAttribute attr,
                                       Type type, StringRef what,
                                       unsigned index) {
  if (attr.getName() != DistDialect::getPlacementAttrName())
    return op->emitError() << "unknown dist attribute '"
                           << attr.getName().getValue() << "' on " << what
                           << " #" << index;
  auto placement = dyn_cast<PlacementAttr>(attr.getValue());
  if (!placement)
    return op->emitError() << "'" << attr.getName() << "' on " << what << " #"
                           << index << " must be a #dist.placement";
  shard::GridOp grid = lookupGrid(op, placement.getGrid());
  return verifyPlacement(placement, type, grid, [&] {
    return op->emitError() << "placement on " << what << " #" << index << ": ";
  });
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  Region &region = op->getRegion(regionIndex);
  if (region.empty() || argIndex >= region.getNumArguments())
    return success();
  return verifyPlacementOn(op, attr, region.getArgument(argIndex).getType(),
                           "argument", argIndex);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned regionIndex,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (!func || resultIndex >= func.getNumResults())
    return op->emitError() << "'" << attr.getName()
                           << "' result attribute needs a function";
  return verifyPlacementOn(op, attr, func.getResultTypes()[resultIndex],
                           "result", resultIndex);
}
