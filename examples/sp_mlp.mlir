// A sequence-parallel transformer MLP block on a 4-way tensor-parallel grid,
// in upstream `shard` SPMD form, as a framework lowering to linalg hands it
// over (Megatron-LM sequence parallelism, Korthikanti et al. 2022):
//
//   x      : this rank's 256 of the 1024 tokens, hidden 512 (bf16)
//   gather : all ranks' tokens  -> [1024, 512]
//   h      : x @ W1 (column-parallel: this rank's 512 of 2048 FFN columns),
//            accumulated in f32, plus bias, GELU (tanh form), cast to bf16
//   y      : h @ W2 (row-parallel), partial sums in f32
//   scatter: reduce-scatter over the tokens -> this rank's [256, 512]
//   out    : y + x (residual), bf16
shard.grid @tp(shape = 4)

func.func @sp_mlp(%x: tensor<256x512xbf16>, %w1: tensor<512x512xbf16>,
                  %b1: tensor<512xf32>, %w2: tensor<512x512xbf16>)
    -> tensor<256x512xbf16> {
  %zero = arith.constant 0.0 : f32
  %xg = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0
      : tensor<256x512xbf16> -> tensor<1024x512xbf16>

  %e1 = tensor.empty() : tensor<1024x512xf32>
  %z1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1024x512xf32>) -> tensor<1024x512xf32>
  %h = linalg.matmul ins(%xg, %w1 : tensor<1024x512xbf16>, tensor<512x512xbf16>)
                     outs(%z1 : tensor<1024x512xf32>) -> tensor<1024x512xf32>

  // bias + GELU(tanh approximation), then back to bf16.
  %e2 = tensor.empty() : tensor<1024x512xbf16>
  %a = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>,
                       affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%h, %b1 : tensor<1024x512xf32>, tensor<512xf32>)
      outs(%e2 : tensor<1024x512xbf16>) {
  ^bb0(%v: f32, %b: f32, %out: bf16):
    %c05 = arith.constant 0.5 : f32
    %c1 = arith.constant 1.0 : f32
    %k0 = arith.constant 0.7978845608 : f32
    %k1 = arith.constant 0.044715 : f32
    %s = arith.addf %v, %b : f32
    %s3 = arith.mulf %s, %s : f32
    %s3b = arith.mulf %s3, %s : f32
    %inner0 = arith.mulf %s3b, %k1 : f32
    %inner1 = arith.addf %s, %inner0 : f32
    %inner = arith.mulf %inner1, %k0 : f32
    %t = math.tanh %inner : f32
    %onep = arith.addf %t, %c1 : f32
    %half = arith.mulf %s, %c05 : f32
    %g = arith.mulf %half, %onep : f32
    %r = arith.truncf %g : f32 to bf16
    linalg.yield %r : bf16
  } -> tensor<1024x512xbf16>

  %e3 = tensor.empty() : tensor<1024x512xf32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<1024x512xf32>) -> tensor<1024x512xf32>
  %y = linalg.matmul ins(%a, %w2 : tensor<1024x512xbf16>, tensor<512x512xbf16>)
                     outs(%z3 : tensor<1024x512xf32>) -> tensor<1024x512xf32>
  %ys = shard.reduce_scatter %y on @tp grid_axes = [0] scatter_axis = 0
      : tensor<1024x512xf32> -> tensor<256x512xf32>

  // Residual add in f32, result in bf16.
  %e4 = tensor.empty() : tensor<256x512xbf16>
  %out = linalg.generic {
      indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                       affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]}
      ins(%ys, %x : tensor<256x512xf32>, tensor<256x512xbf16>)
      outs(%e4 : tensor<256x512xbf16>) {
  ^bb0(%p: f32, %r: bf16, %o: bf16):
    %rf = arith.extf %r : bf16 to f32
    %sum = arith.addf %p, %rf : f32
    %res = arith.truncf %sum : f32 to bf16
    linalg.yield %res : bf16
  } -> tensor<256x512xbf16>
  return %out : tensor<256x512xbf16>
}
