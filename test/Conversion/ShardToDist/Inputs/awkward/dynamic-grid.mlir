shard.grid @tp(shape = ?x4)
func.func @f(%x: tensor<?x64xf32>, %y: tensor<16xf32>) -> (tensor<?x64xf32>, tensor<16xf32>) {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0 : tensor<?x64xf32> -> tensor<?x64xf32>
  %r = shard.all_reduce %y on @tp grid_axes = [0, 1] reduction = sum : tensor<16xf32> -> tensor<16xf32>
  return %g, %r : tensor<?x64xf32>, tensor<16xf32>
}
