// all_gather along the rows of A on 4 ranks, bf16, feeding a matmul into a
// zero-filled f32 accumulator (test/lib/e2e.py ag_matmul --variant rows).
shard.grid @g(shape = 4)
func.func @main(%x: tensor<4x16xbf16>, %w: tensor<16x12xbf16>) -> tensor<16x12xf32> {
  %zero = arith.constant 0.0 : f32
  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<4x16xbf16> -> tensor<16x16xbf16>
  %y_e = tensor.empty() : tensor<16x12xf32>
  %y_z = linalg.fill ins(%zero : f32) outs(%y_e : tensor<16x12xf32>) -> tensor<16x12xf32>
  %y = linalg.matmul ins(%g, %w : tensor<16x16xbf16>, tensor<16x12xbf16>) outs(%y_z : tensor<16x12xf32>) -> tensor<16x12xf32>
  return %y : tensor<16x12xf32>
}
