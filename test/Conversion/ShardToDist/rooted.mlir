// Upstream's rooted collectives with static roots: a gather becomes an
// all-gather and a reduce an all-reduce (upstream leaves their results off
// the root undefined, so every rank getting the root's is a refinement; a
// reduce converts its elements to the result's type first); a scatter is
// the root's broadcast, of which each rank keeps its block.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @rooted
// CHECK: %[[G:.*]] = dist.all_gather %arg0 on @g axes = [1] dim = 1 : tensor<8x3xbf16> -> tensor<8x12xbf16>
// CHECK: %[[W:.*]] = arith.extf %arg0 : tensor<8x3xbf16> to tensor<8x3xf32>
// CHECK: %[[R:.*]] = dist.all_reduce %[[W]] on @g axes = [1] reduce = max : tensor<8x3xf32> -> tensor<8x3xf32>
// CHECK: %[[B:.*]] = dist.broadcast %arg0 on @g axes = [1] root = [2] : tensor<8x3xbf16> -> tensor<8x3xbf16>
// CHECK: %[[P:.*]] = shard.process_multi_index on @g axes = [1] : index
// CHECK: %[[Q:.*]] = arith.addi %{{.*}}, %[[P]] : index
// CHECK: %[[O:.*]] = arith.muli %[[Q]], %c2 : index
// CHECK: %[[S:.*]] = tensor.extract_slice %[[B]][%[[O]], 0] [2, 3] [1, 1] : tensor<8x3xbf16> to tensor<2x3xbf16>
// CHECK: return %[[G]], %[[R]], %[[S]]
func.func @rooted(%x: tensor<8x3xbf16>) -> (tensor<8x12xbf16>, tensor<8x3xf32>, tensor<2x3xbf16>) {
  %g = shard.gather %x on @g grid_axes = [1] gather_axis = 1 root = [3] : (tensor<8x3xbf16>) -> tensor<8x12xbf16>
  %r = shard.reduce %x on @g grid_axes = [1] reduction = max root = [0] : (tensor<8x3xbf16>) -> tensor<8x3xf32>
  %s = shard.scatter %x on @g grid_axes = [1] scatter_axis = 0 root = [2] : (tensor<8x3xbf16>) -> tensor<2x3xbf16>
  return %g, %r, %s : tensor<8x12xbf16>, tensor<8x3xf32>, tensor<2x3xbf16>
}
