shard.grid @tp(shape = 4)
func.func @f(%x: tensor<128x64xf32>) -> tensor<500x64xf32> {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0 : tensor<128x64xf32> -> tensor<500x64xf32>
  return %g : tensor<500x64xf32>
}
