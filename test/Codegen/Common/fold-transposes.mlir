// RUN: braid-opt %s --braid-fold-transposes | FileCheck %s

// nn.Linear as frontends spell it (x @ W^T): the matmul reads W through
// the transposed map (k, n) -> (n, k), and the transpose is gone.
// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[QB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[KT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[SB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @linear(
// CHECK-SAME: %[[X:[^:]*]]: tensor<16x32xf32>, %[[W:[^:]*]]: tensor<64x32xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[A]], #[[BT]], #[[C]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : tensor<16x32xf32>, tensor<64x32xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
func.func @linear(%x: tensor<16x32xf32>, %w: tensor<64x32xf32>) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %wt = linalg.transpose ins(%w : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  %o = tensor.empty() : tensor<16x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%x, %wt : tensor<16x32xf32>, tensor<32x64xf32>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// A transpose with another user stays for it; the matmul still reads W.
// CHECK-LABEL: func.func @shared(
// CHECK-SAME: %{{[^:]*}}: tensor<16x32xf32>, %[[W:[^:]*]]: tensor<64x32xf32>)
// CHECK: %[[WT:.*]] = linalg.transpose ins(%[[W]]
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[W]] : tensor<16x32xf32>, tensor<64x32xf32>)
// CHECK: return %{{.*}}, %[[WT]]
func.func @shared(%x: tensor<16x32xf32>, %w: tensor<64x32xf32>) -> (tensor<16x64xf32>, tensor<32x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %wt = linalg.transpose ins(%w : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  %o = tensor.empty() : tensor<16x64xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%x, %wt : tensor<16x32xf32>, tensor<32x64xf32>) outs(%z : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y, %wt : tensor<16x64xf32>, tensor<32x64xf32>
}

// Attention's scores, Q K^T, with bf16 operands widened in the payload: the
// batch stays first, K is read as [b, n, k].
// CHECK-LABEL: func.func @keys(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<4x8x16xbf16>, %[[K:[^:]*]]: tensor<4x8x16xbf16>)
// CHECK-NOT: linalg.transpose
// CHECK: linalg.generic {indexing_maps = [#[[QB]], #[[KT]], #[[SB]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] :
// CHECK: arith.extf
func.func @keys(%q: tensor<4x8x16xbf16>, %k: tensor<4x8x16xbf16>) -> tensor<4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16x8xbf16>
  %kt = linalg.transpose ins(%k : tensor<4x8x16xbf16>) outs(%e : tensor<4x16x8xbf16>) permutation = [0, 2, 1]
  %o = tensor.empty() : tensor<4x8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul ins(%q, %kt : tensor<4x8x16xbf16>, tensor<4x16x8xbf16>) outs(%z : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return %s : tensor<4x8x8xf32>
}

// A chunk of the transposed weight (a column block, as a chunked schedule
// takes it) is the transpose of the weight's row block, which folds.
// CHECK-LABEL: func.func @chunk(
// CHECK-SAME: %{{[^:]*}}: tensor<16x32xf32>, %[[W:[^:]*]]: tensor<64x32xf32>, %[[I:[^:]*]]: index)
// CHECK-NOT: linalg.transpose
// CHECK: %[[ROWS:.*]] = tensor.extract_slice %[[W]][%[[I]], 0] [16, 32] [1, 1] : tensor<64x32xf32> to tensor<16x32xf32>
// CHECK: linalg.generic {indexing_maps = [#[[A]], #[[BT]], #[[C]]], {{.*}} ins(%{{.*}}, %[[ROWS]] : tensor<16x32xf32>, tensor<16x32xf32>)
func.func @chunk(%x: tensor<16x32xf32>, %w: tensor<64x32xf32>, %i: index) -> tensor<16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x64xf32>
  %wt = linalg.transpose ins(%w : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  %part = tensor.extract_slice %wt[0, %i] [32, 16] [1, 1] : tensor<32x64xf32> to tensor<32x16xf32>
  %o = tensor.empty() : tensor<16x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = linalg.matmul ins(%x, %part : tensor<16x32xf32>, tensor<32x16xf32>) outs(%z : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %y : tensor<16x16xf32>
}

// Only contractions read transposes in place.
// CHECK-LABEL: func.func @not_a_contraction(
// CHECK: linalg.transpose
func.func @not_a_contraction(%w: tensor<64x32xf32>) -> tensor<32x64xf32> {
  %e = tensor.empty() : tensor<32x64xf32>
  %wt = linalg.transpose ins(%w : tensor<64x32xf32>) outs(%e : tensor<32x64xf32>) permutation = [1, 0]
  %d = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%wt : tensor<32x64xf32>) outs(%e : tensor<32x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<32x64xf32>
  return %d : tensor<32x64xf32>
}

// A permutation that moves the batch (attention's [s, h, d] -> [h, s, d])
// would leave a layout no GEMM library reads: the transpose stays.
// CHECK-LABEL: func.func @heads(
// CHECK: linalg.transpose
// CHECK: linalg.batch_matmul
func.func @heads(%q: tensor<4x8x16xf32>, %k: tensor<8x16x4xf32>) -> tensor<8x4x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4x16xf32>
  %qt = linalg.transpose ins(%q : tensor<4x8x16xf32>) outs(%e : tensor<8x4x16xf32>) permutation = [1, 0, 2]
  %o = tensor.empty() : tensor<8x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  %s = linalg.batch_matmul ins(%qt, %k : tensor<8x4x16xf32>, tensor<8x16x4xf32>) outs(%z : tensor<8x4x4xf32>) -> tensor<8x4x4xf32>
  return %s : tensor<8x4x4xf32>
}

// A packed expert weight's part ([experts, 1, out, in], gate or up of
// gate_up) transposed, then collapsed into a batch matmul's [experts, in,
// out] operand: the collapse moves before the transpose, which folds.
// CHECK-LABEL: func.func @expert_part(
// CHECK-SAME: %{{.*}}: tensor<2x4x8xf32>, %[[W:.*]]: tensor<2x1x16x8xf32>)
// CHECK-NOT: linalg.transpose
// CHECK: %[[M:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1], [2], [3]] : tensor<2x1x16x8xf32> into tensor<2x16x8xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[M]] : tensor<2x4x8xf32>, tensor<2x16x8xf32>)
// CHECK-NOT: linalg.transpose
func.func @expert_part(%x: tensor<2x4x8xf32>, %w: tensor<2x1x16x8xf32>) -> tensor<2x4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x1x8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<2x1x16x8xf32>) outs(%e : tensor<2x1x8x16xf32>) permutation = [0, 1, 3, 2]
  %c = tensor.collapse_shape %wt [[0, 1], [2], [3]] : tensor<2x1x8x16xf32> into tensor<2x8x16xf32>
  %o = tensor.empty() : tensor<2x4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %y = linalg.batch_matmul ins(%x, %c : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%z : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %y : tensor<2x4x16xf32>
}

// A collapse that merges one of the transposed dimensions keeps the
// transpose.
// CHECK-LABEL: func.func @merges_transposed(
// CHECK: linalg.transpose
func.func @merges_transposed(%w: tensor<2x16x8xf32>, %x: tensor<4x16xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x16xf32>
  %wt = linalg.transpose ins(%w : tensor<2x16x8xf32>) outs(%e : tensor<2x8x16xf32>) permutation = [0, 2, 1]
  %c = tensor.collapse_shape %wt [[0, 1], [2]] : tensor<2x8x16xf32> into tensor<16x16xf32>
  %o = tensor.empty() : tensor<4x16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%o : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %c : tensor<4x16xf32>, tensor<16x16xf32>) outs(%z : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = tensor.extract_slice %y[0, 0] [4, 8] [1, 1] : tensor<4x16xf32> to tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
