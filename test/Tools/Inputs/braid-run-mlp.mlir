// A tensor-parallel MLP on 4 ranks with two results of different shapes:
// all-gather -> column-parallel matmul (h) -> row-parallel matmul ->
// reduce-scatter (y). With --overlap=force both collectives become ring
// schedules fused with their matmuls.
shard.grid @tp(shape = 4)

func.func @mlp(%x: tensor<4x16xf32>, %w1: tensor<16x8xf32>, %w2: tensor<8x16xf32>)
    -> (tensor<4x16xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %xg = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0
      : tensor<4x16xf32> -> tensor<16x16xf32>
  %e1 = tensor.empty() : tensor<16x8xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %h = linalg.matmul ins(%xg, %w1 : tensor<16x16xf32>, tensor<16x8xf32>)
                     outs(%z1 : tensor<16x8xf32>) -> tensor<16x8xf32>
  %e2 = tensor.empty() : tensor<16x16xf32>
  %z2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x8xf32>, tensor<8x16xf32>)
                     outs(%z2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %ys = shard.reduce_scatter %y on @tp grid_axes = [0] scatter_axis = 0
      : tensor<16x16xf32> -> tensor<4x16xf32>
  return %ys, %h : tensor<4x16xf32>, tensor<16x8xf32>
}
