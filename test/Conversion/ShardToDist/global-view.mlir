// Global view with shard.shard annotations: upstream propagation and
// partitioning run first; argument and result shardings become placements.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s
// RUN: not braid-opt %s --braid-import-shard=partition=never 2>&1 | FileCheck %s --check-prefix=NEVER
// RUN: not braid-opt %s --braid-import-shard=partition=sometimes 2>&1 | FileCheck %s --check-prefix=MODE

shard.grid @tp(shape = 4)

// CHECK-LABEL: func.func @megatron
// CHECK-SAME: %[[X:[^:]*]]: tensor<64x128xf32> {dist.placement = #dist.placement<@tp, [replicate]>}
// CHECK-SAME: %[[W1:[^:]*]]: tensor<128x128xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<128x128xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>}
// CHECK-SAME: -> (tensor<64x128xf32> {dist.placement = #dist.placement<@tp, [replicate]>})
// CHECK: %[[H:.*]] = linalg.matmul ins(%[[X]], %[[W1]]
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[H]], %[[W2]]
// CHECK: %[[R:.*]] = dist.all_reduce %[[Y]] on @tp axes = [0] reduce = sum : tensor<64x128xf32> -> tensor<64x128xf32>
// CHECK: return %[[R]]
// CHECK-NOT: shard.shard
// CHECK-NOT: shard.sharding
// NEVER: global-view.mlir:[[@LINE+6]]:9: error: 'shard.shard' is a global-view annotation: partition first (braid-import-shard=partition=auto or always)
// MODE: for the --partition option: Cannot find option named 'sometimes'
func.func @megatron(%x: tensor<64x128xf32>, %w1: tensor<128x512xf32>, %w2: tensor<512x128xf32>) -> tensor<64x128xf32> {
  %s_rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %s_col = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %s_row = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xa = shard.shard %x to %s_rep : tensor<64x128xf32>
  %w1a = shard.shard %w1 to %s_col : tensor<128x512xf32>
  %w2a = shard.shard %w2 to %s_row : tensor<512x128xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x512xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %h = linalg.matmul ins(%xa, %w1a : tensor<64x128xf32>, tensor<128x512xf32>) outs(%f1 : tensor<64x512xf32>) -> tensor<64x512xf32>
  %e2 = tensor.empty() : tensor<64x128xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %y = linalg.matmul ins(%h, %w2a : tensor<64x512xf32>, tensor<512x128xf32>) outs(%f2 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %ya = shard.shard %y to %s_rep : tensor<64x128xf32>
  return %ya : tensor<64x128xf32>
}

// -----

shard.grid @g(shape = 2x2)

// An op reading its loop indices on a tensor split over both axes at once:
// partitioning leaves it counting from 0, the import adds the rank's block
// (its position over axes 0 and 1, row-major, times the 2 rows of a block).
// CHECK-LABEL: func.func @iota
// CHECK: %[[P:.*]]:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
// CHECK: %[[R:.*]] = arith.muli %[[P]]#0, %c2
// CHECK: %[[L:.*]] = arith.addi %[[R]], %[[P]]#1
// CHECK: %[[OFF:.*]] = arith.muli %[[L]], %c2
// CHECK: linalg.generic
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK-NEXT: arith.addi %[[I]], %[[OFF]] : index
// CHECK-NOT: braid.index
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

// A body reading a tensor it captures at computed indices (tensor.extract:
// HF's causal-mask code reads positions so). Partitioning would clone the
// body onto the local block and read 2 rows at indices up to 7; the import
// asks for the captured tensor replicated, so it is gathered first.
// CHECK-LABEL: func.func @captured
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK: } -> tensor<2x3xf32>
// CHECK: %[[G:.*]] = dist.all_gather %[[Y]] on @tp axes = [0] dim = 0 : tensor<2x3xf32> -> tensor<8x3xf32>
// CHECK: linalg.generic
// CHECK: linalg.index 0
// CHECK: tensor.extract %[[G]][%{{.*}}, %{{.*}}] : tensor<8x3xf32>
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
