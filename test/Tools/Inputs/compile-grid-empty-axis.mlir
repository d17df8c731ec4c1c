// A grid axis of size 0 (issue 34: SIGFPE in the import).
shard.grid @g(shape = 0)
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %y = shard.shard %x to %s : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
