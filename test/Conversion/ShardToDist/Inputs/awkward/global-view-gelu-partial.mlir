shard.grid @tp(shape = 2x2)
func.func @f(%x: tensor<64x32xbf16>, %w: tensor<32x64xbf16>) -> tensor<64x64xf32> {
  %s_row = shard.sharding @tp split_axes = [[0], [1]] : !shard.sharding
  %s_w = shard.sharding @tp split_axes = [[1]] : !shard.sharding
  %xa = shard.shard %x to %s_row : tensor<64x32xbf16>
  %wa = shard.shard %w to %s_w : tensor<32x64xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h = linalg.matmul ins(%xa, %wa : tensor<64x32xbf16>, tensor<32x64xbf16>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  } -> tensor<64x64xf32>
  return %g : tensor<64x64xf32>
}
