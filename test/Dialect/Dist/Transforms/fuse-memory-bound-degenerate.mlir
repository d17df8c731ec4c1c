// Chains on no elements are no kernels, and rows too long to count in
// int64_t are one row per tile: rows per tile came from dividing by a row's
// bytes, which were 0 for both, and crashed the pass with SIGFPE.
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound))" -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @no_columns
// CHECK-NOT: scf.forall
// CHECK: linalg.add
// CHECK: linalg.mul
func.func @no_columns(%a: tensor<8x0xf32>, %b: tensor<8x0xf32>) -> tensor<8x0xf32> {
  %e = tensor.empty() : tensor<8x0xf32>
  // expected-remark @+1 {{not fused: it computes no elements (loop 1 has extent 0)}}
  %s = linalg.add ins(%a, %b : tensor<8x0xf32>, tensor<8x0xf32>) outs(%e : tensor<8x0xf32>) -> tensor<8x0xf32>
  // expected-remark @+1 {{not fused: it computes no elements (loop 1 has extent 0)}}
  %m = linalg.mul ins(%s, %b : tensor<8x0xf32>, tensor<8x0xf32>) outs(%e : tensor<8x0xf32>) -> tensor<8x0xf32>
  return %m : tensor<8x0xf32>
}

// -----

// A product over an empty reduction heads no epilogue; the bias add alone
// is no chain.
// CHECK-LABEL: func.func @empty_sum
// CHECK-NOT: scf.forall
// CHECK: linalg.matmul
// CHECK: linalg.add
func.func @empty_sum(%a: tensor<8x0xf32>, %b: tensor<0x16xf32>, %bias: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @+1 {{not fused: it computes no elements (loop 2 has extent 0)}}
  %p = linalg.matmul ins(%a, %b : tensor<8x0xf32>, tensor<0x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.add ins(%p, %bias : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// Rows of 2^62 f32: 2^64 bytes each, which wrapped to 0. The byte counts
// of the remark saturate.
// CHECK-LABEL: func.func @huge_rows
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [1, 4611686018427387904] [1, 1]
func.func @huge_rows(%a: tensor<2x4611686018427387904xf32>, %b: tensor<2x4611686018427387904xf32>) -> tensor<2x4611686018427387904xf32> {
  %e = tensor.empty() : tensor<2x4611686018427387904xf32>
  %s = linalg.add ins(%a, %b : tensor<2x4611686018427387904xf32>, tensor<2x4611686018427387904xf32>) outs(%e : tensor<2x4611686018427387904xf32>) -> tensor<2x4611686018427387904xf32>
  // expected-remark @+1 {{fused 2 ops into one kernel with 0 row reductions: moves 18446744073709551615 bytes instead of 18446744073709551615}}
  %m = linalg.mul ins(%s, %b : tensor<2x4611686018427387904xf32>, tensor<2x4611686018427387904xf32>) outs(%e : tensor<2x4611686018427387904xf32>) -> tensor<2x4611686018427387904xf32>
  return %m : tensor<2x4611686018427387904xf32>
}

// -----

// An empty row reduction (its result is its init) under a non-empty
// consumer.
// CHECK-LABEL: func.func @empty_rows_sum
func.func @empty_rows_sum(%x: tensor<8x0xf32>, %b: tensor<8xf32>) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  // expected-remark @+1 {{not fused: it computes no elements (loop 1 has extent 0)}}
  %s = linalg.reduce ins(%x : tensor<8x0xf32>) outs(%f : tensor<8xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %t = arith.addf %in, %acc : f32
      linalg.yield %t : f32
    }
  %y = linalg.add ins(%s, %b : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
