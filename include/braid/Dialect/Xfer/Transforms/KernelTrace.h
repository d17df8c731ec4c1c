//===- KernelTrace.h - What the trace says of a kernel ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The description a kernel's trace event carries (braid.trace), shared by
// the targets' kernel formation: braid-outline-kernels (cpu) and
// braid-map-to-gpu (cuda).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_TRANSFORMS_KERNELTRACE_H
#define BRAID_DIALECT_XFER_TRANSFORMS_KERNELTRACE_H

#include <cstdint>
#include <string>

namespace mlir {
class Operation;
} // namespace mlir

namespace braid::xfer {

/// What `op` (a fused loop nest or a linalg op) computes, in parentheses:
/// its named linalg ops, reductions and math functions in order of
/// appearance (the first five), else "elementwise" for a generic; empty
/// when it says nothing.
std::string describeComputation(mlir::Operation *op);

/// 2 * the product of a static contraction's loop ranges; 0 for any other
/// op.
int64_t contractionFlops(mlir::Operation *op);

} // namespace braid::xfer

#endif // BRAID_DIALECT_XFER_TRANSFORMS_KERNELTRACE_H
