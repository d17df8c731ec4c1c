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
/// The allocation (or argument) `buffer` is a view of, through view-like
/// ops and casts.
mlir::Value getRootBuffer(mlir::Value buffer);
/// The symmetric allocation `buffer` is (a view of), or null.
SymmetricAllocOp getSymmetricAlloc(mlir::Value buffer);
} // namespace braid::xfer

#endif // BRAID_DIALECT_XFER_IR_XFEROPS_H
