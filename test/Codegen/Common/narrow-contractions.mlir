// RUN: braid-opt %s --split-input-file --braid-narrow-contractions 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-narrow-contractions 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// PyTorch's math attention in bf16, as exported: q and k widened to f32,
// k repeated over the q heads (GQA: a broadcast) and transposed, each
// scaled by the root of the scale, then Q K^T in f32. The product reads
// the bf16 values instead, moved the same way (in bf16), from a zero fill
// of its own, and the scale's square multiplies the result after the
// reshape that alone reads it.
// CHECK-LABEL: func.func @sdpa_scores
// CHECK-SAME: (%[[Q:.*]]: tensor<1x2x8x4xbf16>, %[[K:.*]]: tensor<1x1x8x4xbf16>)
// CHECK: %[[Q3:.*]] = tensor.collapse_shape %[[Q]] {{.*}} into tensor<2x8x4xbf16>
// CHECK: %[[BK:.*]] = linalg.generic {{.*}} ins(%[[K]] : tensor<1x1x8x4xbf16>) outs(%{{.*}} : tensor<1x1x2x8x4xbf16>)
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[BK]] : tensor<1x1x2x8x4xbf16>) outs(%{{.*}} : tensor<1x1x2x4x8xbf16>) permutation = [0, 1, 2, 4, 3]
// CHECK: %[[K2:.*]] = tensor.collapse_shape %[[KT]] {{.*}} into tensor<1x2x4x8xbf16>
// CHECK: %[[K3:.*]] = tensor.collapse_shape %[[K2]] {{.*}} into tensor<2x4x8xbf16>
// CHECK: %[[ZERO:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2x8x8xf32>)
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[Q3]], %[[K3]] : tensor<2x8x4xbf16>, tensor<2x4x8xbf16>) outs(%[[ZERO]] : tensor<2x8x8xf32>)
// CHECK: ^bb0(%[[A:.*]]: bf16, %[[B:.*]]: bf16, %[[C:.*]]: f32):
// CHECK-NEXT: %[[WA:.*]] = arith.extf %[[A]] : bf16 to f32
// CHECK-NEXT: %[[WB:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT: %[[P:.*]] = arith.mulf %[[WA]], %[[WB]] : f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[C]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[SUM]] : f32
// CHECK: %[[E:.*]] = tensor.expand_shape %[[S]]
// CHECK: %[[SCALE:.*]] = arith.constant 0.124999993 : f32
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[E]] : tensor<1x2x8x8xf32>)
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: return %[[SCALED]]
// CHECK-NOT: arith.extf {{.*}} : bf16 to f32
// REMARK-NOT: remark
#id4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#bcast_in = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#id5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
func.func @sdpa_scores(%q: tensor<1x2x8x4xbf16>, %k: tensor<1x1x8x4xbf16>) -> tensor<1x2x8x8xf32> {
  %half = arith.constant 0.35355339059327379 : f64
  %zero = arith.constant 0.0 : f32
  %eq = tensor.empty() : tensor<1x2x8x4xf32>
  %qw = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<1x2x8x4xbf16>) outs(%eq : tensor<1x2x8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<1x2x8x4xf32>
  %qs = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%qw : tensor<1x2x8x4xf32>) outs(%eq : tensor<1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.truncf %half : f64 to f32
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<1x2x8x4xf32>
  %ek = tensor.empty() : tensor<1x1x8x4xf32>
  %kw = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<1x1x8x4xbf16>) outs(%ek : tensor<1x1x8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<1x1x8x4xf32>
  %eb = tensor.empty() : tensor<1x1x2x8x4xf32>
  %kb = linalg.generic {indexing_maps = [#bcast_in, #id5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%kw : tensor<1x1x8x4xf32>) outs(%eb : tensor<1x1x2x8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x1x2x8x4xf32>
  %et = tensor.empty() : tensor<1x1x2x4x8xf32>
  %kt = linalg.transpose ins(%kb : tensor<1x1x2x8x4xf32>) outs(%et : tensor<1x1x2x4x8xf32>) permutation = [0, 1, 2, 4, 3]
  %kc = tensor.collapse_shape %kt [[0], [1, 2], [3], [4]] : tensor<1x1x2x4x8xf32> into tensor<1x2x4x8xf32>
  %eks = tensor.empty() : tensor<1x2x4x8xf32>
  %ks = linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kc : tensor<1x2x4x8xf32>) outs(%eks : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.truncf %half : f64 to f32
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x8xf32>
  %es = tensor.empty() : tensor<2x8x8xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%es : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %a = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<1x2x8x4xf32> into tensor<2x8x4xf32>
  %b = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %s = linalg.batch_matmul ins(%a, %b : tensor<2x8x4xf32>, tensor<2x4x8xf32>) outs(%fill : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %e = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [1, 2, 8, 8] : tensor<2x8x8xf32> into tensor<1x2x8x8xf32>
  return %e : tensor<1x2x8x8xf32>
}

// -----

// Softmax's probabilities (f32, not widened) against a widened v: left in
// f32, and the remark says which operand is not a widened value.
// CHECK-LABEL: func.func @probabilities
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x8x8xf32>, tensor<2x8x4xf32>)
// REMARK: remark: contraction left in f32: operand 0 is not a widened bf16 or f16 value
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @probabilities(%p: tensor<2x8x8xf32>, %v: tensor<2x8x4xbf16>) -> tensor<2x8x4xf32> {
  %zero = arith.constant 0.0 : f32
  %ev = tensor.empty() : tensor<2x8x4xf32>
  %vw = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v : tensor<2x8x4xbf16>) outs(%ev : tensor<2x8x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<2x8x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%ev : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %o = linalg.batch_matmul ins(%p, %vw : tensor<2x8x8xf32>, tensor<2x8x4xf32>) outs(%fill : tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return %o : tensor<2x8x4xf32>
}

// -----

// A widening read elsewhere too (it would have to exist anyway), and
// operands widened from different types: left in f32, with the reason.
// CHECK-LABEL: func.func @declines
// CHECK-COUNT-2: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x4xf32>)
// REMARK: remark: contraction left in f32: an op between the operand and its widening has other uses
// REMARK: remark: contraction left in f32: its operands widen different types
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @declines(%a: tensor<4x4xbf16>, %b: tensor<4x4xbf16>, %h: tensor<4x4xf16>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %aw = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<4x4xbf16>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x4xf32>
  %bw = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4x4xbf16>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x4xf32>
  %hw = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<4x4xf16>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: f16, %out: f32):
    %w = arith.extf %in : f16 to f32
    linalg.yield %w : f32
  } -> tensor<4x4xf32>
  %bw2 = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%b : tensor<4x4xbf16>) outs(%e : tensor<4x4xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %w = arith.extf %in : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %shared = linalg.matmul ins(%aw, %bw : tensor<4x4xf32>, tensor<4x4xf32>) outs(%fill : tensor<4x4xf32>) -> tensor<4x4xf32>
  %mixed = linalg.matmul ins(%hw, %bw2 : tensor<4x4xf32>, tensor<4x4xf32>) outs(%fill : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %shared, %mixed, %aw : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
