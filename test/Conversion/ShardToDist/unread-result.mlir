// An op whose results are only partly read: propagation annotates the read
// result (the indices of a row max, as DeepSeek-V3's `topk(...)[1]`
// exports) and leaves the unread one (the max values) bare, on which
// upstream partitioning crashed. The bare result gets its sibling's
// sharding, so the rows stay split and no collective is needed.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s
// The upstream passes alone on the same input crash (the bug worked around).
// RUN: not --crash braid-opt %s --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' -o /dev/null

shard.grid @tp(shape = 2)

// CHECK-LABEL: func.func @argmax_rows
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>}
// CHECK-SAME: -> (tensor<8xi64> {dist.placement = #dist.placement<@tp, [shard<0>]>})
// CHECK: %[[R:.*]]:2 = linalg.generic {{.*}} ins(%[[X]] : tensor<8x16xf32>) outs({{.*}} : tensor<8xf32>, tensor<8xi64>)
// CHECK: return %[[R]]#1
// CHECK-NOT: dist.
// CHECK-NOT: shard.
#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @argmax_rows(%x: tensor<16x16xf32>) -> tensor<16xi64> {
  %split = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xa = shard.shard %x to %split : tensor<16x16xf32>
  %low = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0 : i64
  %e0 = tensor.empty() : tensor<16xf32>
  %e1 = tensor.empty() : tensor<16xi64>
  %m0 = linalg.fill ins(%low : f32) outs(%e0 : tensor<16xf32>) -> tensor<16xf32>
  %i0 = linalg.fill ins(%zero : i64) outs(%e1 : tensor<16xi64>) -> tensor<16xi64>
  %r:2 = linalg.generic {indexing_maps = [#rows, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%xa : tensor<16x16xf32>) outs(%m0, %i0 : tensor<16xf32>, tensor<16xi64>) {
  ^bb0(%in: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %max = arith.maximumf %in, %m : f32
    %gt = arith.cmpf ogt, %in, %m : f32
    %idx = arith.select %gt, %ji, %i : i64
    linalg.yield %max, %idx : f32, i64
  } -> (tensor<16xf32>, tensor<16xi64>)
  %ra = shard.shard %r#1 to %split : tensor<16xi64>
  return %ra : tensor<16xi64>
}
