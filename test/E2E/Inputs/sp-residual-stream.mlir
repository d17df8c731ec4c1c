// Four sequence-parallel blocks in a residual stream (a negation standing in
// for the norm), under a per-weight plan: every block gets an all-gather and
// a reduce-scatter; the stream between blocks stays split.
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
shard.grid @sp(shape = 4)
func.func @residual_stream(%x: tensor<1x16x64xf32> {braid.parallel = "sequence"},
    %w0a: tensor<64x128xf32> {braid.parallel = "colwise"},
    %w0b: tensor<128x64xf32> {braid.parallel = "rowwise"},
    %w1a: tensor<64x128xf32> {braid.parallel = "colwise"},
    %w1b: tensor<128x64xf32> {braid.parallel = "rowwise"},
    %w2a: tensor<64x128xf32> {braid.parallel = "colwise"},
    %w2b: tensor<128x64xf32> {braid.parallel = "rowwise"},
    %w3a: tensor<64x128xf32> {braid.parallel = "colwise"},
    %w3b: tensor<128x64xf32> {braid.parallel = "rowwise"})
    -> (tensor<1x16x64xf32> {braid.parallel = "sequence"}) {
  %zero = arith.constant 0.0 : f32
  %e0n = tensor.empty() : tensor<1x16x64xf32>
  %n0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<1x16x64xf32>) outs(%e0n : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %c0 = tensor.collapse_shape %n0 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
  %e0a = tensor.empty() : tensor<16x128xf32>
  %f0a = linalg.fill ins(%zero : f32) outs(%e0a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h0 = linalg.matmul ins(%c0, %w0a : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f0a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e0b = tensor.empty() : tensor<16x64xf32>
  %f0b = linalg.fill ins(%zero : f32) outs(%e0b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y0 = linalg.matmul ins(%h0, %w0b : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f0b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %u0 = tensor.expand_shape %y0 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %e0r = tensor.empty() : tensor<1x16x64xf32>
  %r0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %u0 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%e0r : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %e1n = tensor.empty() : tensor<1x16x64xf32>
  %n1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r0 : tensor<1x16x64xf32>) outs(%e1n : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %c1 = tensor.collapse_shape %n1 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
  %e1a = tensor.empty() : tensor<16x128xf32>
  %f1a = linalg.fill ins(%zero : f32) outs(%e1a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h1 = linalg.matmul ins(%c1, %w1a : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f1a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e1b = tensor.empty() : tensor<16x64xf32>
  %f1b = linalg.fill ins(%zero : f32) outs(%e1b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y1 = linalg.matmul ins(%h1, %w1b : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f1b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %u1 = tensor.expand_shape %y1 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %e1r = tensor.empty() : tensor<1x16x64xf32>
  %r1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r0, %u1 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%e1r : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %e2n = tensor.empty() : tensor<1x16x64xf32>
  %n2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r1 : tensor<1x16x64xf32>) outs(%e2n : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %c2 = tensor.collapse_shape %n2 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
  %e2a = tensor.empty() : tensor<16x128xf32>
  %f2a = linalg.fill ins(%zero : f32) outs(%e2a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h2 = linalg.matmul ins(%c2, %w2a : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f2a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e2b = tensor.empty() : tensor<16x64xf32>
  %f2b = linalg.fill ins(%zero : f32) outs(%e2b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y2 = linalg.matmul ins(%h2, %w2b : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f2b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %u2 = tensor.expand_shape %y2 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %e2r = tensor.empty() : tensor<1x16x64xf32>
  %r2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r1, %u2 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%e2r : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %e3n = tensor.empty() : tensor<1x16x64xf32>
  %n3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r2 : tensor<1x16x64xf32>) outs(%e3n : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.negf %a : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  %c3 = tensor.collapse_shape %n3 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
  %e3a = tensor.empty() : tensor<16x128xf32>
  %f3a = linalg.fill ins(%zero : f32) outs(%e3a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h3 = linalg.matmul ins(%c3, %w3a : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f3a : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e3b = tensor.empty() : tensor<16x64xf32>
  %f3b = linalg.fill ins(%zero : f32) outs(%e3b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y3 = linalg.matmul ins(%h3, %w3b : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f3b : tensor<16x64xf32>) -> tensor<16x64xf32>
  %u3 = tensor.expand_shape %y3 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %e3r = tensor.empty() : tensor<1x16x64xf32>
  %r3 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%r2, %u3 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%e3r : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x16x64xf32>
  return %r3 : tensor<1x16x64xf32>
}
