// Annotations that upstream partitioning would silently mistranslate are
// rejected before it runs.
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-import-shard

shard.grid @tp(shape = 4)
func.func @uneven(%x: tensor<10x8xf32>) -> tensor<10x8xf32> {
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{dimension 0 of size 10 does not divide evenly over the 4 ranks it is split over (give sharded_dims_offsets for uneven shards)}}
  %a = shard.shard %x to %s : tensor<10x8xf32>
  return %a : tensor<10x8xf32>
}

// -----

shard.grid @tp(shape = 4)
func.func @axis_range(%x: tensor<16xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{sharding splits dimension 0 over grid axis 3, but grid @tp has 1 axes}}
  %s = shard.sharding @tp split_axes = [[3]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<16xf32>
  return %a : tensor<16xf32>
}

// -----

shard.grid @tp(shape = 4)
func.func @rank(%x: tensor<16xf32>) -> tensor<16xf32> {
  %s = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  // expected-error @+1 {{sharding splits dimension 1 of a rank-1 tensor}}
  %a = shard.shard %x to %s : tensor<16xf32>
  return %a : tensor<16xf32>
}
