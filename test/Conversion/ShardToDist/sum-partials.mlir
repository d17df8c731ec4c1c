// Two partial sums reduced over the same group and then added are added
// first and reduced once: reduce(a) + reduce(b) = reduce(a + b). A
// backward gives them wherever an activation fed several split
// contractions (q, k and v; gate and up); Megatron reduces once.
// RUN: braid-opt %s --split-input-file --braid-apply-parallel-plan --braid-import-shard | FileCheck %s

shard.grid @tp(shape = 4)

// Two rowwise projections of split activations, summed: one all-reduce,
// of the local sum, through the reshapes between the products and the add.
// CHECK-LABEL: func.func @two_rowwise
// CHECK: %[[A:.*]] = linalg.matmul
// CHECK: %[[B:.*]] = linalg.matmul
// CHECK-NOT: dist.all_reduce
// CHECK: %[[EA:.*]] = tensor.expand_shape %[[A]]
// CHECK: %[[EB:.*]] = tensor.expand_shape %[[B]]
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[EA]], %[[EB]] : tensor<1x16x64xf32>, tensor<1x16x64xf32>)
// CHECK: %[[R:.*]] = dist.all_reduce %[[S]] on @tp axes = [0] reduce = sum : tensor<1x16x64xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: return %[[R]]
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @two_rowwise(%x: tensor<16x256xf32> {braid.parallel = "replicate"},
                       %y: tensor<16x256xf32> {braid.parallel = "replicate"},
                       %w1: tensor<64x256xf32> {braid.parallel = "rowwise"},
                       %w2: tensor<64x256xf32> {braid.parallel = "rowwise"})
    -> (tensor<1x16x64xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<256x64xf32>
  %t1 = linalg.transpose ins(%w1 : tensor<64x256xf32>) outs(%e0 : tensor<256x64xf32>) permutation = [1, 0]
  %t2 = linalg.transpose ins(%w2 : tensor<64x256xf32>) outs(%e0 : tensor<256x64xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<16x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %a = linalg.matmul ins(%x, %t1 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %b = linalg.matmul ins(%y, %t2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %ea = tensor.expand_shape %a [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %eb = tensor.expand_shape %b [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  %e2 = tensor.empty() : tensor<1x16x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%ea, %eb : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%e2 : tensor<1x16x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.addf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<1x16x64xf32>
  return %s : tensor<1x16x64xf32>
}

// -----

shard.grid @tp(shape = 4)

// A product of the two sums is no sum: both stay reduced.
// CHECK-LABEL: func.func @product_stays
// CHECK-COUNT-2: dist.all_reduce
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @product_stays(%x: tensor<16x256xf32> {braid.parallel = "replicate"},
                         %w1: tensor<64x256xf32> {braid.parallel = "rowwise"},
                         %w2: tensor<64x256xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<256x64xf32>
  %t1 = linalg.transpose ins(%w1 : tensor<64x256xf32>) outs(%e0 : tensor<256x64xf32>) permutation = [1, 0]
  %t2 = linalg.transpose ins(%w2 : tensor<64x256xf32>) outs(%e0 : tensor<256x64xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<16x64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %a = linalg.matmul ins(%x, %t1 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %b = linalg.matmul ins(%x, %t2 : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f1 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %s = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<16x64xf32>, tensor<16x64xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %r = arith.mulf %p, %q : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  return %s : tensor<16x64xf32>
}
