shard.grid @tp(shape = 4)
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %r = shard.all_reduce %x on @tp grid_axes = [0] reduction = sum : tensor<16xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
