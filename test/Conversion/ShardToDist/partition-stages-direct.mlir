// The stages around upstream partitioning on IR written as each receives
// it: braid-prepare-partition on propagated IR with an op propagation left
// bare, braid-offset-global-indices on partitioned IR with its marks.
// RUN: braid-opt %s -split-input-file --braid-prepare-partition | FileCheck %s --check-prefix=PREPARE
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-offset-global-indices | FileCheck %s --check-prefix=OFFSET

shard.grid @tp(shape = 4)

// A fill propagation left without annotations: its result gets what its
// user asks for, and its init the result's sharding.
// PREPARE-LABEL: func.func @bare_fill
// PREPARE: %[[S:.*]] = shard.sharding @tp split_axes = {{\[\[}}0]]
// PREPARE: %[[INIT:.*]] = shard.shard %{{.*}} to %[[S]] annotate_for_users
// PREPARE: %[[F:.*]] = linalg.fill ins(%{{.*}}) outs(%[[INIT]]
// PREPARE: shard.shard %[[F]] to %[[S]] : tensor<8x4xf32>
func.func @bare_fill(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  %fs = shard.shard %f to %s annotate_for_users : tensor<8x4xf32>
  return %fs : tensor<8x4xf32>
}

// -----

shard.grid @tp(shape = 4)

// After partitioning: loop 0 was 8 iterations, split over axis 0 into
// blocks of 2; loop 1 was not split. Index 0 counts from the rank's block;
// an index marked local (a read of a captured tensor's own block) stays.
// OFFSET-LABEL: func.func @offsets
// OFFSET: %[[P:.*]] = shard.process_multi_index on @tp axes = [0] : index
// OFFSET: %[[OFF:.*]] = arith.muli %[[P]], %c2
// OFFSET: linalg.generic
// OFFSET-NOT: braid.index
// OFFSET: %[[I:.*]] = linalg.index 0 : index
// OFFSET-NEXT: %[[G:.*]] = arith.addi %[[I]], %[[OFF]] : index
// OFFSET: %[[J:.*]] = linalg.index 1 : index
// OFFSET-NOT: arith.addi %[[J]]
// OFFSET: %[[LOCAL:.*]] = linalg.index 0 : index
// OFFSET-NOT: braid.local_index
// OFFSET: arith.index_cast %[[G]]
// OFFSET: tensor.extract %{{.*}}[%[[LOCAL]], %[[J]]]
func.func @offsets(%t: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<2x3xf32>) attrs = {braid.index_axes = [array<i16: 0>, array<i16>], braid.index_extents = array<i64: 8, 3>, braid.index_grid = @tp} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %l = linalg.index 0 {braid.local_index} : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %v = tensor.extract %t[%l, %j] : tensor<2x3xf32>
    %r = arith.addf %v, %f : f32
    linalg.yield %r : f32
  } -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

shard.grid @tp(shape = 4)

// Partitioning split 6 iterations into blocks of 4: which global indices
// a rank's block starts at cannot be told.
func.func @uneven(%t: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  // expected-error @+1 {{loop 0 reads its index (linalg.index) and is split unevenly by partitioning (6 iterations into blocks of 4): its indices on each rank cannot be told}}
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]} outs(%e : tensor<4xf32>) attrs = {braid.index_axes = [array<i16: 0>], braid.index_extents = array<i64: 6>, braid.index_grid = @tp} {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    linalg.yield %f : f32
  } -> tensor<4xf32>
  return %y : tensor<4xf32>
}
