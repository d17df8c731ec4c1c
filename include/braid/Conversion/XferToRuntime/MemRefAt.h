//===- MemRefAt.h - A memref over an address the runtime gave ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Runtime calls return buffers as integer addresses (a symmetric site, a
// peer's view of it, the device arena of the memory plan); the program
// uses them as memrefs.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CONVERSION_XFERTORUNTIME_MEMREFAT_H
#define BRAID_CONVERSION_XFERTORUNTIME_MEMREFAT_H

namespace mlir {
class Location;
class MemRefType;
class OpBuilder;
class Value;
} // namespace mlir

namespace braid {

/// A memref of `type` (static, identity layout) whose data is at the i64
/// address `address`: an LLVM memref descriptor cast to the memref, which
/// the conversion to LLVM folds into its uses.
mlir::Value memrefAt(mlir::OpBuilder &b, mlir::Location loc,
                     mlir::Value address, mlir::MemRefType type);

} // namespace braid

#endif // BRAID_CONVERSION_XFERTORUNTIME_MEMREFAT_H
