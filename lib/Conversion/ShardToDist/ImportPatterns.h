//===- ImportPatterns.h - Shared by the import passes ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H
#define BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H

#include "mlir/IR/Operation.h"

namespace braid {

/// Turns the contractions braid-prepare-import made of collapsed batch
/// matmuls (marked braid.batch_matmul) back into collapse_shape +
/// linalg.batch_matmul + expand_shape, on whatever shapes they have now
/// (after partitioning: the local ones).
mlir::LogicalResult foldBatchMatmuls(mlir::Operation *root);

} // namespace braid

#endif // BRAID_LIB_CONVERSION_SHARDTODIST_IMPORTPATTERNS_H
