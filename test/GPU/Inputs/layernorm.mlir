// A layernorm over rows of 256 (bench/gpu/fusion.py's, at 16 x 256): one
// fused kernel that stages the centered row in shared memory and reduces
// twice.
shard.grid @g(shape = 1)
func.func @main(%x: tensor<16x256xbf16>, %w: tensor<256xbf16>, %b: tensor<256xbf16>) -> (tensor<16x256xbf16>) {
  %e1 = tensor.empty() : tensor<16x256xf32>
  %g2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<16x256xbf16>) outs(%e1 : tensor<16x256xf32>) {
    ^bb0(%a1: bf16, %o2: f32):
      %s3 = arith.extf %a1 : bf16 to f32
      linalg.yield %s3 : f32
    } -> tensor<16x256xf32>
  %c3 = arith.constant 0.0 : f32
  %e4 = tensor.empty() : tensor<16xf32>
  %f5 = linalg.fill ins(%c3 : f32) outs(%e4 : tensor<16xf32>) -> tensor<16xf32>
  %red6 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%g2 : tensor<16x256xf32>) outs(%f5 : tensor<16xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %r = arith.addf %acc, %in : f32
      linalg.yield %r : f32
  } -> tensor<16xf32>
  %e7 = tensor.empty() : tensor<16xf32>
  %g8 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%red6 : tensor<16xf32>) outs(%e7 : tensor<16xf32>) {
    ^bb0(%a1: f32, %o2: f32):
      %s3 = arith.constant 2.560000000e+02 : f32
      %s4 = arith.divf %a1, %s3 : f32
      linalg.yield %s4 : f32
    } -> tensor<16xf32>
  %e9 = tensor.empty() : tensor<16x256xf32>
  %g10 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%x, %g8 : tensor<16x256xbf16>, tensor<16xf32>) outs(%e9 : tensor<16x256xf32>) {
    ^bb0(%a1: bf16, %a2: f32, %o3: f32):
      %s4 = arith.extf %a1 : bf16 to f32
      %s5 = arith.subf %s4, %a2 : f32
      linalg.yield %s5 : f32
    } -> tensor<16x256xf32>
  %e11 = tensor.empty() : tensor<16x256xf32>
  %g12 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g10 : tensor<16x256xf32>) outs(%e11 : tensor<16x256xf32>) {
    ^bb0(%a1: f32, %o2: f32):
      %s3 = arith.mulf %a1, %a1 : f32
      linalg.yield %s3 : f32
    } -> tensor<16x256xf32>
  %c13 = arith.constant 0.0 : f32
  %e14 = tensor.empty() : tensor<16xf32>
  %f15 = linalg.fill ins(%c13 : f32) outs(%e14 : tensor<16xf32>) -> tensor<16xf32>
  %red16 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%g12 : tensor<16x256xf32>) outs(%f15 : tensor<16xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %r = arith.addf %acc, %in : f32
      linalg.yield %r : f32
  } -> tensor<16xf32>
  %e17 = tensor.empty() : tensor<16xf32>
  %g18 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]}
      ins(%red16 : tensor<16xf32>) outs(%e17 : tensor<16xf32>) {
    ^bb0(%a1: f32, %o2: f32):
      %s3 = arith.constant 2.560000000e+02 : f32
      %s4 = arith.divf %a1, %s3 : f32
      %s5 = arith.constant 1.000000000e-05 : f32
      %s6 = arith.addf %s4, %s5 : f32
      %s7 = math.rsqrt %s6 : f32
      linalg.yield %s7 : f32
    } -> tensor<16xf32>
  %e19 = tensor.empty() : tensor<16x256xbf16>
  %g20 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%g10, %g18, %w, %b : tensor<16x256xf32>, tensor<16xf32>, tensor<256xbf16>, tensor<256xbf16>) outs(%e19 : tensor<16x256xbf16>) {
    ^bb0(%a1: f32, %a2: f32, %a3: bf16, %a4: bf16, %o5: bf16):
      %s6 = arith.extf %a3 : bf16 to f32
      %s7 = arith.extf %a4 : bf16 to f32
      %s8 = arith.mulf %a1, %a2 : f32
      %s9 = arith.mulf %s8, %s6 : f32
      %s10 = arith.addf %s9, %s7 : f32
      %s11 = arith.truncf %s10 : f32 to bf16
      linalg.yield %s11 : bf16
    } -> tensor<16x256xbf16>
  return %g20 : tensor<16x256xbf16>
}
