func.func @f(%x: tensor<16xf32>) -> tensor<16xf32> {
  %s = shard.sharding @missing split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<16xf32>
  return %a : tensor<16xf32>
}
