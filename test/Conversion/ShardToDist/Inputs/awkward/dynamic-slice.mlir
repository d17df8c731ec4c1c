shard.grid @tp(shape = ?)
func.func @f(%x: tensor<64xf32>) -> tensor<16xf32> {
  %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 0 : tensor<64xf32> -> tensor<16xf32>
  return %s : tensor<16xf32>
}
