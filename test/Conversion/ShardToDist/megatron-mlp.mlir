// Megatron tensor-parallel MLP in SPMD form: column-parallel W1, GELU,
// row-parallel W2, all-reduce of the partial sums; f32 and f16.
// RUN: braid-opt %s -split-input-file --braid-import-shard | FileCheck %s

shard.grid @tp(shape = 8)

// CHECK-LABEL: func.func @mlp_f32
// CHECK-SAME: (%[[X:.*]]: tensor<2048x8192xf32>, %[[W1:.*]]: tensor<8192x3584xf32>, %[[W2:.*]]: tensor<3584x8192xf32>)
// CHECK: %[[H:.*]] = linalg.matmul ins(%[[X]], %[[W1]]
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[G]], %[[W2]]
// CHECK: %[[R:.*]] = dist.all_reduce %[[Y]] on @tp axes = [0] reduce = sum : tensor<2048x8192xf32> -> tensor<2048x8192xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[R]]
func.func @mlp_f32(%x: tensor<2048x8192xf32>, %w1: tensor<8192x3584xf32>, %w2: tensor<3584x8192xf32>) -> tensor<2048x8192xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<2048x3584xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2048x3584xf32>) -> tensor<2048x3584xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<2048x8192xf32>, tensor<8192x3584xf32>) outs(%f1 : tensor<2048x3584xf32>) -> tensor<2048x3584xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<2048x3584xf32>) outs(%e1 : tensor<2048x3584xf32>) {
  ^bb0(%v: f32, %o: f32):
    %c = arith.constant 1.702 : f32
    %m = arith.mulf %v, %c : f32
    %n = arith.negf %m : f32
    %ex = math.exp %n : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %ex, %one : f32
    %s = arith.divf %v, %d : f32
    linalg.yield %s : f32
  } -> tensor<2048x3584xf32>
  %e2 = tensor.empty() : tensor<2048x8192xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2048x8192xf32>) -> tensor<2048x8192xf32>
  %y = linalg.matmul ins(%g, %w2 : tensor<2048x3584xf32>, tensor<3584x8192xf32>) outs(%f2 : tensor<2048x8192xf32>) -> tensor<2048x8192xf32>
  %r = shard.all_reduce %y on @tp grid_axes = [0] reduction = sum : tensor<2048x8192xf32> -> tensor<2048x8192xf32>
  return %r : tensor<2048x8192xf32>
}

// -----

shard.grid @tp(shape = 4)

// f16 operands accumulating in f32; the all-reduce accumulates in f32 too,
// so the f16 partial sums are widened first.
// CHECK-LABEL: func.func @mlp_f16
// CHECK: %[[Y:.*]] = linalg.matmul
// CHECK-SAME: -> tensor<512x1024xf16>
// CHECK: %[[W:.*]] = arith.extf %[[Y]] : tensor<512x1024xf16> to tensor<512x1024xf32>
// CHECK: %[[R:.*]] = dist.all_reduce %[[W]] on @tp axes = [0] reduce = sum : tensor<512x1024xf32> -> tensor<512x1024xf32>
// CHECK: return %[[R]]
func.func @mlp_f16(%h: tensor<512x1024xf16>, %w2: tensor<1024x1024xf16>) -> tensor<512x1024xf32> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<512x1024xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<512x1024xf16>) -> tensor<512x1024xf16>
  %y = linalg.matmul ins(%h, %w2 : tensor<512x1024xf16>, tensor<1024x1024xf16>) outs(%f : tensor<512x1024xf16>) -> tensor<512x1024xf16>
  %r = shard.all_reduce %y on @tp grid_axes = [0] reduction = sum : tensor<512x1024xf16> -> tensor<512x1024xf32>
  return %r : tensor<512x1024xf32>
}
