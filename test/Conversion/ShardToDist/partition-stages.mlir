// The stages braid-import-shard runs around upstream partitioning, each on
// its own: braid-prepare-partition after sharding-propagation, and
// braid-offset-global-indices after shard-partition.
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,braid-prepare-partition))' | FileCheck %s --check-prefix=PREPARE
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,braid-prepare-partition,shard-partition,braid-offset-global-indices))' | FileCheck %s --check-prefix=STAGES

shard.grid @g(shape = 2x2)

// An op reading its loop index, its loop split over both axes: prepare
// records the axes, the global extent and the grid; after partitioning the
// index counts from the rank's block (its position over axes 0 and 1,
// row-major, times the block's 2 rows), and the marks are gone.
// PREPARE-LABEL: func.func @iota
// PREPARE: linalg.generic
// PREPARE-SAME: braid.index_axes = [array<i16: 0, 1>], braid.index_extents = array<i64: 8>, braid.index_grid = @g
// STAGES-LABEL: func.func @iota
// STAGES: %[[P:.*]]:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
// STAGES: %[[R:.*]] = arith.muli %[[P]]#0, %c2
// STAGES: %[[L:.*]] = arith.addi %[[R]], %[[P]]#1
// STAGES: %[[OFF:.*]] = arith.muli %[[L]], %c2
// STAGES: linalg.generic
// STAGES-NOT: braid.index
// STAGES: %[[I:.*]] = linalg.index 0 : index
// STAGES-NEXT: arith.addi %[[I]], %[[OFF]] : index
func.func @iota(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @g split_axes = [[0, 1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]} ins(%xs : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %f = arith.sitofp %ii : i32 to f32
    %r = arith.addf %a, %f : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %ys = shard.shard %y to %s annotate_for_users : tensor<8xf32>
  return %ys : tensor<8xf32>
}

// -----

shard.grid @tp(shape = 4)

// A body reading a tensor it captures at computed indices: prepare asks for
// the tensor replicated where the body reads it, so partitioning gathers it.
// PREPARE-LABEL: func.func @captured
// PREPARE: %[[Y:.*]] = linalg.generic
// PREPARE: %[[YS:.*]] = shard.shard %[[Y]] to
// PREPARE: %[[REP:.*]] = shard.sharding @tp split_axes = {{\[\[\]\]}}
// PREPARE: %[[WHOLE:.*]] = shard.shard %[[YS]] to %[[REP]] annotate_for_users
// PREPARE: linalg.generic
// PREPARE-SAME: braid.index_axes = [array<i16: 0>, array<i16>], braid.index_extents = array<i64: 8, 3>
// PREPARE: tensor.extract %[[WHOLE]]
// STAGES-LABEL: func.func @captured
// STAGES: %[[G:[^ ]*]] = shard.all_gather %{{.*}} on @tp grid_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
// STAGES: %[[W:[^ ]*]] = tensor.cast %[[G]]
// STAGES: %[[P:[^ ]*]] = shard.process_multi_index on @tp axes = [0]
// STAGES: %[[OFF:[^ ]*]] = arith.muli %[[P]], %c2
// STAGES: linalg.generic
// STAGES: %[[I:.*]] = linalg.index 0 : index
// STAGES-NEXT: %[[GI:.*]] = arith.addi %[[I]], %[[OFF]]
// STAGES: %[[R:.*]] = arith.subi %c7, %[[GI]]
// STAGES: tensor.extract %[[W]][%[[R]], 
func.func @captured(%x: tensor<8x3xf32>) -> tensor<8x3xf32> {
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x3xf32>
  %e = tensor.empty() : tensor<8x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%xs : tensor<8x3xf32>) outs(%e : tensor<8x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<8x3xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%e : tensor<8x3xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %r = arith.subi %c7, %i : index
    %v = tensor.extract %y[%r, %j] : tensor<8x3xf32>
    linalg.yield %v : f32
  } -> tensor<8x3xf32>
  %zs = shard.shard %z to %s annotate_for_users : tensor<8x3xf32>
  return %zs : tensor<8x3xf32>
}

// -----

shard.grid @g(shape = 2)

// A body reading a captured tensor at its own split loop's index along
// dimension 0 and at computed indices along dimension 1, while the tensor
// is split along dimension 1: prepare asks for it split along dimension 0
// (the loop's axis), and partitioning moves the split by one all-to-all
// instead of gathering the tensor whole.
// PREPARE-LABEL: func.func @moved
// PREPARE: shard.shard %{{.*}} to %{{.*}} annotate_for_users : tensor<2x3xf32>
// PREPARE: %[[ROWS:[^ ]*]] = shard.sharding @g split_axes = {{\[\[}}0]] : !shard.sharding
// PREPARE-NEXT: %[[READ:[^ ]*]] = shard.shard %{{[^ ]*}} to %[[ROWS]] annotate_for_users : tensor<2x4xf32>
// PREPARE: linalg.generic
// PREPARE: %[[OWN:.*]] = linalg.index 0 {braid.local_index} : index
// PREPARE: tensor.extract %[[READ]][%[[OWN]], %{{.*}}] : tensor<2x4xf32>
// STAGES-LABEL: func.func @moved
// STAGES: %[[A2A:[^ ]*]] = shard.all_to_all %{{.*}} on @g grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<2x2xf32> -> tensor<1x4xf32>
// STAGES: %[[BLOCK:[^ ]*]] = tensor.cast %[[A2A]]
// STAGES-NOT: shard.all_gather
// STAGES: linalg.generic
// STAGES: %[[G:[^ ]*]] = linalg.index 0 : index
// STAGES-NEXT: arith.addi %[[G]]
// STAGES: %[[OWN:[^ ]*]] = linalg.index 0 : index
// STAGES-NEXT: tensor.extract %[[BLOCK]][%[[OWN]], %{{.*}}] : tensor<1x4xf32>
func.func @moved(%x: tensor<2x4xf32>, %p: tensor<2x3xi64>) -> tensor<2x3xf32> {
  %cols = shard.sharding @g split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %cols : tensor<2x4xf32>
  %rows = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %ps = shard.shard %p to %rows : tensor<2x3xi64>
  %e = tensor.empty() : tensor<2x3xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(g, t) -> (g, t)>, affine_map<(g, t) -> (g, t)>], iterator_types = ["parallel", "parallel"]} ins(%ps : tensor<2x3xi64>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%in: i64, %o: f32):
    %g = linalg.index 0 : index
    %c = arith.index_cast %in : i64 to index
    %v = tensor.extract %xs[%g, %c] : tensor<2x4xf32>
    linalg.yield %v : f32
  } -> tensor<2x3xf32>
  %ys = shard.shard %y to %rows annotate_for_users : tensor<2x3xf32>
  return %ys : tensor<2x3xf32>
}
