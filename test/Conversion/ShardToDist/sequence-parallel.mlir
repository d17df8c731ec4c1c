// Sequence-parallel MLP (all-gather before the column-parallel matmul,
// reduce-scatter after the row-parallel one) in bf16 with f32 accumulation.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s

shard.grid @tp(shape = 4)

// CHECK-LABEL: func.func @sp_mlp
// CHECK-SAME: (%[[X:.*]]: tensor<2048x4096xbf16>
// CHECK: %[[G:.*]] = dist.all_gather %[[X]] on @tp axes = [0] dim = 0 : tensor<2048x4096xbf16> -> tensor<8192x4096xbf16>
// CHECK: linalg.matmul ins(%[[G]],
// CHECK: %[[Y:.*]] = linalg.matmul
// CHECK: %[[S:.*]] = dist.reduce_scatter %[[Y]] on @tp axes = [0] dim = 0 reduce = sum : tensor<8192x4096xf32> -> tensor<2048x4096xf32>
// CHECK: %[[B:.*]] = arith.truncf %[[S]]
// CHECK: return %[[B]]
// CHECK-NOT: shard.
func.func @sp_mlp(%x: tensor<2048x4096xbf16>, %w1: tensor<4096x2816xbf16>, %w2: tensor<2816x4096xbf16>) -> tensor<2048x4096xbf16> {
  %zero = arith.constant 0.0 : f32
  %xg = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0 : tensor<2048x4096xbf16> -> tensor<8192x4096xbf16>
  %e1 = tensor.empty() : tensor<8192x2816xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8192x2816xf32>) -> tensor<8192x2816xf32>
  %h = linalg.matmul ins(%xg, %w1 : tensor<8192x4096xbf16>, tensor<4096x2816xbf16>) outs(%f1 : tensor<8192x2816xf32>) -> tensor<8192x2816xf32>
  %hb = arith.truncf %h : tensor<8192x2816xf32> to tensor<8192x2816xbf16>
  %e2 = tensor.empty() : tensor<8192x4096xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8192x4096xf32>) -> tensor<8192x4096xf32>
  %y = linalg.matmul ins(%hb, %w2 : tensor<8192x2816xbf16>, tensor<2816x4096xbf16>) outs(%f2 : tensor<8192x4096xf32>) -> tensor<8192x4096xf32>
  %s = shard.reduce_scatter %y on @tp grid_axes = [0] scatter_axis = 0 : tensor<8192x4096xf32> -> tensor<2048x4096xf32>
  %b = arith.truncf %s : tensor<2048x4096xf32> to tensor<2048x4096xbf16>
  return %b : tensor<2048x4096xbf16>
}
