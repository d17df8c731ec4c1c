// A sequence-parallel matmul on 2 ranks, as the braid-run tests run it:
// each rank holds 4 of the 8 rows of x, gathers them all, and multiplies by
// its copy of w. test/lib/braid_run_check.py computes the same with numpy.
shard.grid @tp(shape = 2)

func.func @ag_matmul(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>) -> tensor<8x6xf32> {
  %zero = arith.constant 0.0 : f32
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0
      : tensor<4x8xf32> -> tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %y = linalg.matmul ins(%g, %w : tensor<8x8xf32>, tensor<8x6xf32>)
                     outs(%f : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}
