// Micro-batches where no finer schedule applies.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force micro-batches=3" --canonicalize | FileCheck %s --check-prefix=THREE

shard.grid @tp(shape = 4)

// No dimension of the 6x6 result divides by 4: no ring. The rows split into
// 2 micro-batches: compute half 0, start its all-reduce, compute half 1,
// start its all-reduce, then wait both.
// CHECK-LABEL: func.func @norm_after_all_reduce
// CHECK: %[[M0:.*]] = linalg.matmul {{.*}} -> tensor<3x6xf32>
// CHECK: %[[T0:.*]], %[[F0:.*]] = dist.all_reduce_start %[[M0]] on @tp axes = [0] reduce = sum : tensor<3x6xf32> -> tensor<3x6xf32>
// CHECK: %[[M1:.*]] = linalg.matmul {{.*}} -> tensor<3x6xf32>
// CHECK: %[[T1:.*]], %[[F1:.*]] = dist.all_reduce_start %[[M1]]
// CHECK: dist.wait %[[T0]], %[[F0]]
// CHECK: dist.wait %[[T1]], %[[F1]]
// THREE-LABEL: func.func @norm_after_all_reduce
// THREE-COUNT-3: dist.all_reduce_start %{{.*}} : tensor<2x6xf32>
func.func @norm_after_all_reduce(%a: tensor<6x8xf32>, %b: tensor<8x6xf32>) -> tensor<6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x6xf32>) -> tensor<6x6xf32>
  %y = linalg.matmul ins(%a, %b : tensor<6x8xf32>, tensor<8x6xf32>) outs(%f : tensor<6x6xf32>) -> tensor<6x6xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as micro_batch (2 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<6x6xf32> -> tensor<6x6xf32>
  %e1 = tensor.empty() : tensor<6xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<6xf32>) -> tensor<6xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<6x6xf32>) outs(%z : tensor<6xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<6xf32>
  return %n : tensor<6xf32>
}

// -----

shard.grid @tp(shape = 4)

// An all-gather along the rows splits along the columns, the dimension it
// leaves alone; the producer here is elementwise, not a contraction.
// CHECK-LABEL: func.func @gather_columns_split
// CHECK: dist.all_gather_start %{{.*}} on @tp axes = [0] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
// CHECK: dist.all_gather_start %{{.*}} on @tp axes = [0] dim = 0 : tensor<2x4xf32> -> tensor<8x4xf32>
func.func @gather_columns_split(%x: tensor<2x8xf32>) -> tensor<8x8xf32> {
  %e = tensor.empty() : tensor<2x8xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x8xf32>) outs(%e : tensor<2x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %s = math.exp %v : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  // expected-remark @+1 {{all_gather fused with 'linalg.generic' as micro_batch (2 chunks)}}
  %g = dist.all_gather %t on @tp axes = [0] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  return %g : tensor<8x8xf32>
}
