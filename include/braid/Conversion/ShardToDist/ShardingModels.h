//===- ShardingModels.h - Sharding models for tensor reshapes & co -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// External ShardingInterface models, registered by Braid, for the tensor ops
// upstream `shard` has none for: expand_shape, collapse_shape, extract_slice,
// insert_slice, concat and pad (docs/rationale/import.md, "Sharding models
// for reshapes, slices, concat and pad").
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CONVERSION_SHARDTODIST_SHARDINGMODELS_H
#define BRAID_CONVERSION_SHARDTODIST_SHARDINGMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid {

/// Attaches Braid's sharding models to the tensor dialect's ops.
void registerShardingModels(mlir::DialectRegistry &registry);

} // namespace braid

#endif // BRAID_CONVERSION_SHARDTODIST_SHARDINGMODELS_H
