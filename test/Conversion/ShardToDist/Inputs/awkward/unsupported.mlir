shard.grid @tp(shape = 4)
func.func @f(%x: tensor<16xf32>) -> tensor<4xf32> {
  %s = shard.scatter %x on @tp grid_axes = [0] scatter_axis = 0 root = [0] : (tensor<16xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
