// Replication proofs look through calls (braid-outline-layers makes a
// layer function called once per layer): an argument of a private function
// is replicated when every call's operand is, a call's result when the
// callee's returned value is. The residual stream (layer k reads layer
// k-1's result) is proven by induction over the calls.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// Bias and residual replicated at every call (the first residual by
// placement, the next ones as the previous layer's result): both move onto
// 1/n of the rows, between the rings.
// CHECK-LABEL: func.func private @layer(
// CHECK: dist.shift_start
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}}, %arg3, %{{.*}} : tensor<4x32xf32>, tensor<32xf32>, tensor<4x32xf32>)
// CHECK-NEXT: ^bb0
// CHECK: dist.all_gather {{.*}} : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT: return
func.func @main(%h: tensor<16x32xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
                %a: tensor<16x64xf32>, %w0: tensor<64x32xf32>, %w1: tensor<64x32xf32>,
                %bias: tensor<32xf32> {dist.placement = #dist.placement<@tp, [replicate]>}) -> tensor<16x32xf32> {
  %0 = func.call @layer(%h, %a, %w0, %bias) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %1 = func.call @layer(%0, %a, %w1, %bias) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
func.func private @layer(%h: tensor<16x32xf32>, %a: tensor<16x64xf32>, %w: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%a, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ew_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias, %h : tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %c: f32, %res: f32, %out: f32):
    %s = arith.addf %v, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<16x32xf32>
  return %o : tensor<16x32xf32>
}

// -----

shard.grid @tp(shape = 4)

// Soundness: the second call passes a bias with no placement, which may
// differ across ranks: the work stays after the all-gather, and the remark
// names the call's operand.
// CHECK-LABEL: func.func private @layer(
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK-NEXT: linalg.generic
// CHECK-SAME: ins(%[[G]], %arg3, %arg0 : tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>)
func.func @main(%h: tensor<16x32xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
                %a: tensor<16x64xf32>, %w0: tensor<64x32xf32>, %w1: tensor<64x32xf32>,
                %bias: tensor<32xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
                %other: tensor<32xf32>) -> tensor<16x32xf32> {
  %0 = func.call @layer(%h, %a, %w0, %bias) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %1 = func.call @layer(%0, %a, %w1, %other) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
func.func private @layer(%h: tensor<16x32xf32>, %a: tensor<16x64xf32>, %w: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%a, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+2 {{elementwise work stays after the all-reduce: operand #1 of 'linalg.generic' is not proven replicated along grid axis 0: argument #3 of a call: argument #5 has no placement 'replicate' along grid axis 0}}
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias, %h : tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %c: f32, %res: f32, %out: f32):
    %s = arith.addf %v, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<16x32xf32>
  return %o : tensor<16x32xf32>
}

// -----

shard.grid @tp(shape = 4)

// The residual of the first call is not proven replicated: neither is the
// result of that call, the next call's residual.
// CHECK-LABEL: func.func private @layer(
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK-NEXT: linalg.generic
// CHECK-SAME: ins(%[[G]], %arg3, %arg0 : tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>)
func.func @main(%h: tensor<16x32xf32>,
                %a: tensor<16x64xf32>, %w0: tensor<64x32xf32>, %w1: tensor<64x32xf32>,
                %bias: tensor<32xf32> {dist.placement = #dist.placement<@tp, [replicate]>}) -> tensor<16x32xf32> {
  %0 = func.call @layer(%h, %a, %w0, %bias) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  %1 = func.call @layer(%0, %a, %w1, %bias) : (tensor<16x32xf32>, tensor<16x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<16x32xf32>
  return %1 : tensor<16x32xf32>
}
func.func private @layer(%h: tensor<16x32xf32>, %a: tensor<16x64xf32>, %w: tensor<64x32xf32>, %bias: tensor<32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %y = linalg.matmul ins(%a, %w : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  // expected-remark @+2 {{elementwise work stays after the all-reduce: operand #2 of 'linalg.generic' is not proven replicated along grid axis 0: argument #0 of a call: argument #0 has no placement 'replicate' along grid axis 0}}
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag (4 chunks)}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<16x32xf32> -> tensor<16x32xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%r, %bias, %h : tensor<16x32xf32>, tensor<32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %c: f32, %res: f32, %out: f32):
    %s = arith.addf %v, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<16x32xf32>
  return %o : tensor<16x32xf32>
}
