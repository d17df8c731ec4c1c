//===- ImportPatterns.h - Shared by the import passes ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H
#define BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H

#include "mlir/IR/Operation.h"

namespace braid {

/// A function attribute braid-apply-parallel-plan sets and
/// braid-import-shard reads (and removes): propagate the annotations
/// forward first, so that the inputs' shardings decide what the plan
/// leaves open. A training step on a data axis needs it: its gradients and
/// loss are returned replicated over the data axis, which, propagated
/// backward first, floods back and gathers the batch instead of summing
/// each rank's share (the weight gradients' contractions split along their
/// batch reduction, then all-reduced).
inline constexpr llvm::StringLiteral kForwardFirstAttr =
    "braid.propagate_forward_first";

/// Turns the contractions braid-prepare-import made of collapsed batch
/// matmuls (marked braid.batch_matmul) back into collapse_shape +
/// linalg.batch_matmul + expand_shape, on whatever shapes they have now
/// (after partitioning: the local ones).
mlir::LogicalResult foldBatchMatmuls(mlir::Operation *root);

} // namespace braid

#endif // BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H
