// all_gather along the columns of A (the reduction dimension) on 4 ranks,
// bf16 (test/lib/e2e.py ag_matmul --variant reduction).
shard.grid @g(shape = 4)
func.func @main(%x: tensor<4x16xbf16>, %w: tensor<64x12xbf16>) -> tensor<4x12xf32> {
  %zero = arith.constant 0.0 : f32
  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 1 : tensor<4x16xbf16> -> tensor<4x64xbf16>
  %y_e = tensor.empty() : tensor<4x12xf32>
  %y_z = linalg.fill ins(%zero : f32) outs(%y_e : tensor<4x12xf32>) -> tensor<4x12xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x64xbf16>, tensor<64x12xbf16>) outs(%y_z : tensor<4x12xf32>) -> tensor<4x12xf32>
  return %y : tensor<4x12xf32>
}
