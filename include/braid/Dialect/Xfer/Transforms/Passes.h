//===- Passes.h - Xfer passes -----------------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_TRANSFORMS_PASSES_H
#define BRAID_DIALECT_XFER_TRANSFORMS_PASSES_H

#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Schedule.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace braid::xfer {

#define GEN_PASS_DECL
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"

} // namespace braid::xfer

#endif // BRAID_DIALECT_XFER_TRANSFORMS_PASSES_H
