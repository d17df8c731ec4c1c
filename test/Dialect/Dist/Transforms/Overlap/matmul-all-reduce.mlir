// All-reduce after a row-parallel matmul: reduce-scatter ring, elementwise
// work on 1/n of the data when its other operands are proven replicated,
// all-gather.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// Bias (replicated by placement), GELU-like activation and residual add
// (replicated: the result of an all-gather) all move; the all-gather moves
// the bf16 result of the final cast.
// CHECK-LABEL: func.func @bias_act_residual
// CHECK-COUNT-4: linalg.matmul {{.*}} -> tensor<4x32xf32>
// CHECK: %[[POS:.*]] = shard.process_multi_index
// CHECK: %[[BIAS:.*]] = linalg.generic
// CHECK: math.tanh
// CHECK: } -> tensor<4x32xf32>
// CHECK: %[[RES:.*]] = linalg.generic
// CHECK: arith.truncf
// CHECK: } -> tensor<4x32xbf16>
// Nothing follows to overlap the final all-gather with: it stays whole.
// CHECK: %[[G:.*]] = dist.all_gather %[[RES]] on @tp axes = [0] dim = 0 : tensor<4x32xbf16> -> tensor<16x32xbf16>
// CHECK: return %[[G]]
func.func @bias_act_residual(%h: tensor<16x64xf32>, %w: tensor<64x32xf32>,
                             %bias: tensor<32xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
                             %xs: tensor<4x32xf32>) -> tensor<16x32xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+1 {{all_gather made asynchronous: predicted}}
  %x = dist.all_gather %xs on @tp axes = [0] dim = 0 : tensor<4x32xf32> -> tensor<16x32xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ew_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias : tensor<16x32xf32>, tensor<32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    %t = math.tanh %s : f32
    linalg.yield %t : f32
  } -> tensor<16x32xf32>
  %eb = tensor.empty() : tensor<16x32xbf16>
  %o = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%b, %x : tensor<16x32xf32>, tensor<16x32xf32>) outs(%eb : tensor<16x32xbf16>) {
  ^bb0(%v: f32, %res: f32, %out: bf16):
    %s = arith.addf %v, %res : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<16x32xbf16>
  return %o : tensor<16x32xbf16>
}

// -----

shard.grid @tp(shape = 4)

// Soundness: a bias with no placement may differ across ranks; adding it
// on 1/n of the data would change the result. It stays after the all-gather.
// CHECK-LABEL: func.func @unproven_bias
// CHECK: dist.all_gather
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %arg2 : tensor<16x32xf32>, tensor<32xf32>)
func.func @unproven_bias(%h: tensor<16x64xf32>, %w: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+2 {{elementwise work stays after the all-reduce: operand #1 of 'linalg.generic' is not proven replicated along grid axis 0: argument #2 has no placement 'replicate' along grid axis 0}}
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias : tensor<16x32xf32>, tensor<32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    linalg.yield %s : f32
  } -> tensor<16x32xf32>
  return %b : tensor<16x32xf32>
}

// -----

shard.grid @g2(shape = 2x2)

// Replicated along axis 1 is not replicated along axis 0: the placement
// names the axis, and the all-reduce runs on axis 0.
// CHECK-LABEL: func.func @wrong_axis
func.func @wrong_axis(%h: tensor<8x16xf16>, %w: tensor<16x8xf16>,
                      %bias: tensor<8xf16> {dist.placement = #dist.placement<@g2, [shard<0>, replicate]>}) -> tensor<8x8xf16> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x8xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<8x8xf16>) -> tensor<8x8xf16>
  %y = linalg.matmul ins(%h, %w : tensor<8x16xf16>, tensor<16x8xf16>) outs(%f : tensor<8x8xf16>) -> tensor<8x8xf16>
  // expected-remark @+2 {{elementwise work stays after the all-reduce: operand #1 of 'linalg.generic' is not proven replicated along grid axis 0}}
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag (2 chunks)}}
  %r = dist.all_reduce %y on @g2 axes = [0] reduce = sum : tensor<8x8xf16> -> tensor<8x8xf16>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias : tensor<8x8xf16>, tensor<8xf16>) outs(%e : tensor<8x8xf16>) {
  ^bb0(%v: f16, %c: f16, %o: f16):
    %s = arith.addf %v, %c : f16
    linalg.yield %s : f16
  } -> tensor<8x8xf16>
  return %b : tensor<8x8xf16>
}

// -----

shard.grid @tp(shape = 4)

// A norm reduces each row over the hidden dimension, which the scatter of
// the rows (the leading dimension, when divisible) does not touch: it
// moves between the reduce-scatter and the all-gather, on this rank's
// rows, and the gather brings back its result.
// CHECK-LABEL: func.func @norm_follows
// CHECK: %[[POS:.*]] = shard.process_multi_index on @tp axes = [0] : index
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}} : tensor<4x32xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: dist.all_gather %{{.*}} on @tp axes = [0] dim = 0 : tensor<4xf32> -> tensor<16xf32>
func.func @norm_follows(%h: tensor<16x64xf32>, %w: tensor<64x32xf32>) -> tensor<16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ew_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %e1 = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<16x32xf32>) outs(%z : tensor<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  return %n : tensor<16xf32>
}

// -----

shard.grid @tp(shape = 4)

// RMSNorm, the DAG frontends emit (the row is read by the sum of squares
// and by the scaling): it moves onto this rank's rows when its weight is
// proven replicated, and stays after the all-gather when the weight may
// differ per rank (no placement), with the operand named.
// CHECK-LABEL: func.func @rms_norm
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<4x32xf32>)
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %arg2 : tensor<4x32xf32>, tensor<4xf32>, tensor<32xf32>)
// CHECK: dist.all_gather %{{.*}} on @tp axes = [0] dim = 0 : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK-LABEL: func.func @rms_norm_own_weight
// CHECK: dist.all_gather_start %{{.*}} : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<16x32xf32>)
func.func @rms_norm(%h: tensor<16x64xf32>, %w: tensor<64x32xf32>, %gamma: tensor<32xf32> {dist.placement = #dist.placement<@tp, [replicate]>}) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ew_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %e1 = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<16x32xf32>) outs(%z : tensor<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%r, %ss, %gamma : tensor<16x32xf32>, tensor<16xf32>, tensor<32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %s: f32, %g: f32, %o: f32):
    %rs = math.rsqrt %s : f32
    %t = arith.mulf %v, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<16x32xf32>
  return %n : tensor<16x32xf32>
}

func.func @rms_norm_own_weight(%h: tensor<16x64xf32>, %w: tensor<64x32xf32>, %gamma: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%h, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+2 {{elementwise work stays after the all-reduce: operand #2 of 'linalg.generic' is not proven replicated along grid axis 0: argument #2 has no placement 'replicate' along grid axis 0}}
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %e1 = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16xf32>) -> tensor<16xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
      ins(%r : tensor<16x32xf32>) outs(%z : tensor<16xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %sq = arith.mulf %v, %v : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<16xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%r, %ss, %gamma : tensor<16x32xf32>, tensor<16xf32>, tensor<32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %s: f32, %g: f32, %o: f32):
    %rs = math.rsqrt %s : f32
    %t = arith.mulf %v, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<16x32xf32>
  return %n : tensor<16x32xf32>
}
