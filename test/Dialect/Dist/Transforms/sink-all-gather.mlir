// Row-local work after an all-gather moves before it, when it reads only
// replicated values besides the gathered ones and leaves one value for
// what follows: a norm's weight multiply and the reshape before a matmul,
// under sequence parallelism. The gather then feeds the matmul (a ring),
// whose weight is split by the plan (a column-parallel projection).
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=force 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=force -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// REMARK: sink-all-gather.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 2 row-local ops that followed it
// REMARK: sink-all-gather.mlir:{{[0-9]+}}:8: remark: all_gather fused with 'linalg.matmul' as ring_ag_matmul


#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>
shard.grid @tp(shape = 4)
// CHECK-LABEL: func.func @weight_then_reshape
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<1x4x64xf32>)
// CHECK: tensor.collapse_shape %{{.*}} : tensor<1x4x64xf32> into tensor<4x64xf32>
// CHECK-NOT: dist.all_gather
// CHECK: dist.shift
func.func @weight_then_reshape(
    %x: tensor<1x4x64xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>},
    %w: tensor<64xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
    %wq: tensor<64x32xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>})
    -> tensor<16x32xf32> {
  %g = dist.all_gather %x on @tp axes = [0] dim = 1 : tensor<1x4x64xf32> -> tensor<1x16x64xf32>
  %e = tensor.empty() : tensor<1x16x64xf32>
  %s = linalg.generic {indexing_maps = [#col, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w, %g : tensor<64xf32>, tensor<1x16x64xf32>) outs(%e : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x16x64xf32>
  %c = tensor.collapse_shape %s [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%c, %wq : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#col = affine_map<(d0, d1, d2) -> (d2)>
shard.grid @tp(shape = 4)
// A weight not known to be replicated keeps the multiply after the gather.
// CHECK-LABEL: func.func @unknown_weight
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %[[G]] : tensor<64xf32>, tensor<1x16x64xf32>)
func.func @unknown_weight(%x: tensor<1x4x64xf32>, %w: tensor<64xf32>) -> tensor<1x16x64xf32> {
  %g = dist.all_gather %x on @tp axes = [0] dim = 1 : tensor<1x4x64xf32> -> tensor<1x16x64xf32>
  %e = tensor.empty() : tensor<1x16x64xf32>
  %s = linalg.generic {indexing_maps = [#col, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w, %g : tensor<64xf32>, tensor<1x16x64xf32>) outs(%e : tensor<1x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x16x64xf32>
  return %s : tensor<1x16x64xf32>
}

// -----

#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
shard.grid @tp(shape = 4)
// The gathered value and the op's result are both used afterwards: moving
// the op would gather twice, so nothing moves.
// CHECK-LABEL: func.func @two_outputs
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : tensor<1x16x64xf32>)
func.func @two_outputs(%x: tensor<1x4x64xf32>) -> (tensor<1x16x64xf32>, tensor<1x16x64xf32>) {
  %g = dist.all_gather %x on @tp axes = [0] dim = 1 : tensor<1x4x64xf32> -> tensor<1x16x64xf32>
  %e = tensor.empty() : tensor<1x16x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x16x64xf32>) outs(%e : tensor<1x16x64xf32>) {
  ^bb0(%b: f32, %o: f32):
    %m = arith.mulf %b, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x16x64xf32>
  return %g, %s : tensor<1x16x64xf32>, tensor<1x16x64xf32>
}

// -----

shard.grid @tp(shape = 4)
// A broadcast (GQA's repeat of the kv heads) would put more bytes on the
// wire for nothing: it stays after the gather. A widening cast moves only
// when the cost model finds the work saved worth the extra bytes, as the
// cpu preset does here (two f32 halves gathered instead of the bf16; the
// h200 preset keeps it after, sink-all-gather-rows.mlir).
// CHECK-LABEL: func.func @more_bytes
// CHECK: %[[G:.*]] = dist.all_gather %{{.*}} : tensor<1x4x8xbf16> -> tensor<1x16x8xbf16>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : tensor<1x16x8xbf16>)
// CHECK: arith.extf
// CHECK: dist.all_gather_start %{{.*}} : tensor<4x4xf32> -> tensor<16x4xf32>
func.func @more_bytes(%k: tensor<1x4x8xbf16>, %x: tensor<4x8xbf16>) -> (tensor<1x2x16x8xbf16>, tensor<16x8xf32>) {
  %g = dist.all_gather %k on @tp axes = [0] dim = 1 : tensor<1x4x8xbf16> -> tensor<1x16x8xbf16>
  %e = tensor.empty() : tensor<1x2x16x8xbf16>
  %b = linalg.generic {indexing_maps = [affine_map<(a, r, t, d) -> (a, t, d)>, affine_map<(a, r, t, d) -> (a, r, t, d)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%g : tensor<1x16x8xbf16>) outs(%e : tensor<1x2x16x8xbf16>) {
  ^bb0(%v: bf16, %o: bf16):
    linalg.yield %v : bf16
  } -> tensor<1x2x16x8xbf16>
  %w = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<4x8xbf16> -> tensor<16x8xbf16>
  %we = tensor.empty() : tensor<16x8xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<16x8xbf16>) outs(%we : tensor<16x8xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<16x8xf32>
  return %b, %c : tensor<1x2x16x8xbf16>, tensor<16x8xf32>
}
