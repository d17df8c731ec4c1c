// Expert-parallel MoE: all-to-all dispatch, per-expert matmuls, all-to-all
// combine, in f16.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s

shard.grid @ep(shape = 8)

// CHECK-LABEL: func.func @moe
// CHECK-SAME: (%[[T:.*]]: tensor<8x512x1024xf16>, %[[W:.*]]: tensor<8x1024x1024xf16>)
// CHECK: %[[D:.*]] = dist.all_to_all %[[T]] on @ep axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x512x1024xf16> -> tensor<8x512x1024xf16>
// CHECK: %[[E:.*]] = linalg.batch_matmul ins(%[[D]], %[[W]]
// CHECK: %[[C:.*]] = dist.all_to_all %[[E]] on @ep axes = [0] split_dim = 0 concat_dim = 0
// CHECK: return %[[C]]
func.func @moe(%tokens: tensor<8x512x1024xf16>, %w: tensor<8x1024x1024xf16>) -> tensor<8x512x1024xf16> {
  %d = shard.all_to_all %tokens on @ep grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x512x1024xf16> -> tensor<8x512x1024xf16>
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x512x1024xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<8x512x1024xf16>) -> tensor<8x512x1024xf16>
  %x = linalg.batch_matmul ins(%d, %w : tensor<8x512x1024xf16>, tensor<8x1024x1024xf16>) outs(%f : tensor<8x512x1024xf16>) -> tensor<8x512x1024xf16>
  %c = shard.all_to_all %x on @ep grid_axes = [0] split_axis = 0 concat_axis = 0 : tensor<8x512x1024xf16> -> tensor<8x512x1024xf16>
  return %c : tensor<8x512x1024xf16>
}
