shard.grid @tp(shape = 4)
func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %s = shard.sharding @tp split_axes = [[3]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<16xf32>
  return %a : tensor<16xf32>
}
