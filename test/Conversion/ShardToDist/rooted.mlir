// Upstream's rooted collectives with static roots: a gather becomes an
// all-gather and a reduce an all-reduce (upstream leaves their results off
// the root undefined, so every rank getting the root's is a refinement; a
// reduce converts its elements to the result's type first); a scatter is
// the root's broadcast, of which each rank keeps its block.
// A root known only at run time: gather and reduce ignore it (their
// results are the same refinement), and a broadcast (so a scatter too) is
// a sum over the group to which only the root contributes its tensor.
// RUN: braid-opt %s -split-input-file --braid-import-shard | FileCheck %s

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

// -----

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @dynamic_roots
// CHECK: dist.all_gather %arg0 on @g axes = [1] dim = 0
// CHECK: dist.all_reduce %arg0 on @g axes = [1] reduce = sum : tensor<4x3xi32>
// CHECK: %[[IDX:.*]]:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
// CHECK: %[[A:.*]] = arith.cmpi eq, %[[IDX]]#0, %arg1 : index
// CHECK: %[[B:.*]] = arith.cmpi eq, %[[IDX]]#1, %arg2 : index
// CHECK: %[[BOTH:.*]] = arith.andi %{{.*}}, %[[B]] : i1
// CHECK: %[[M:.*]] = arith.select %[[BOTH]], %arg0, %{{.*}} : tensor<4x3xi32>
// CHECK: dist.all_reduce %[[M]] on @g axes = [0, 1] reduce = sum : tensor<4x3xi32> -> tensor<4x3xi32>
// CHECK-NOT: shard.
func.func @dynamic_roots(%x: tensor<4x3xi32>, %r0: index, %r1: index) -> (tensor<16x3xi32>, tensor<4x3xi32>, tensor<4x3xi32>) {
  %g = shard.gather %x on @g grid_axes = [1] gather_axis = 0 root = [%r1] : (tensor<4x3xi32>, index) -> tensor<16x3xi32>
  %r = shard.reduce %x on @g grid_axes = [1] root = [%r1] : (tensor<4x3xi32>, index) -> tensor<4x3xi32>
  %b = shard.broadcast %x on @g grid_axes = [0, 1] root = [%r0, %r1] : (tensor<4x3xi32>, index, index) -> tensor<4x3xi32>
  return %g, %r, %b : tensor<16x3xi32>, tensor<4x3xi32>, tensor<4x3xi32>
}
