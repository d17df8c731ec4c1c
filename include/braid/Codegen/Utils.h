//===- Utils.h - Small helpers shared by the code generation passes -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CODEGEN_UTILS_H
#define BRAID_CODEGEN_UTILS_H

#include "mlir/IR/Block.h"
#include "mlir/IR/Operation.h"

namespace braid {

/// Whether `op` ends its block as its terminator. Not
/// `op->hasTrait<OpTrait::IsTerminator>()`: under the C API, whose library
/// links MLIR's shared libMLIR (built by another compiler), Braid's
/// instantiation of that trait's TypeID differs from the one the ops were
/// registered with, so the check said no for every terminator and the
/// memory plan put buffers that a yield or a return carries out into the
/// arena (wrong results, found through braid.compile). The block's own
/// query runs inside libMLIR.
inline bool isTerminator(mlir::Operation *op) {
  mlir::Block *block = op->getBlock();
  return block && &block->back() == op && block->mightHaveTerminator();
}

} // namespace braid

#endif // BRAID_CODEGEN_UTILS_H
