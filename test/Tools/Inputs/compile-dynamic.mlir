shard.grid @tp(shape = 2)

func.func @f(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %r = shard.all_reduce %x on @tp grid_axes = [0] : tensor<?x8xf32> -> tensor<?x8xf32>
  return %r : tensor<?x8xf32>
}
