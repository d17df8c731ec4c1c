shard.grid @tp(shape = 4)
func.func @f(%x: tensor<10x8xf32>) -> tensor<10x8xf32> {
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %a = shard.shard %x to %s : tensor<10x8xf32>
  %e = tensor.empty() : tensor<10x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<10x8xf32>) outs(%e : tensor<10x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.exp %v : f32
    linalg.yield %t : f32
  } -> tensor<10x8xf32>
  %b = shard.shard %r to %s : tensor<10x8xf32>
  return %b : tensor<10x8xf32>
}
