// Latency hiding of collectives no schedule fuses with compute.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// The start moves up to just after its input, the wait down to just before
// the first use; the independent matmul runs in between.
// CHECK-LABEL: func.func @gradient_all_reduce
// CHECK-SAME: (%[[G:.*]]: tensor<64xf32>, %[[A:.*]]: tensor<8x8xf32>)
// CHECK-NEXT: %[[T:.*]], %[[F:.*]] = dist.all_reduce_start %[[G]] on @tp axes = [0] reduce = sum
// CHECK: linalg.matmul
// CHECK: %[[R:.*]] = dist.wait %[[T]], %[[F]]
// CHECK-NEXT: return %[[R]]
func.func @gradient_all_reduce(%g: tensor<64xf32>, %a: tensor<8x8xf32>) -> (tensor<64xf32>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%a, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  // expected-remark @+1 {{under 2 ops, the longest 'linalg.matmul' at}}
  %r = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
  return %r, %m : tensor<64xf32>, tensor<8x8xf32>
}

// -----

shard.grid @tp(shape = 4)

// Broadcast, shift and a 2-axis-free all-to-all, each overlapping the matmul.
// CHECK-LABEL: func.func @others
// CHECK: dist.broadcast_start
// CHECK: dist.shift_start
// CHECK: dist.all_to_all_start
// CHECK: linalg.matmul
// CHECK-COUNT-3: dist.wait
func.func @others(%v: tensor<8x4xf16>, %a: tensor<8x8xf16>) -> (tensor<8x4xf16>, tensor<8x4xf16>, tensor<8x4xf16>, tensor<8x8xf16>) {
  // expected-remark @+1 {{broadcast made asynchronous}}
  %b = dist.broadcast %v on @tp axes = [0] root = [2] : tensor<8x4xf16> -> tensor<8x4xf16>
  // expected-remark @+1 {{shift made asynchronous}}
  %s = dist.shift %v on @tp axes = [0] offset = 1 : tensor<8x4xf16> -> tensor<8x4xf16>
  // expected-remark @+1 {{all_to_all made asynchronous}}
  %t = dist.all_to_all %v on @tp axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x4xf16> -> tensor<8x4xf16>
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x8xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<8x8xf16>) -> tensor<8x8xf16>
  %m = linalg.matmul ins(%a, %a : tensor<8x8xf16>, tensor<8x8xf16>) outs(%f : tensor<8x8xf16>) -> tensor<8x8xf16>
  return %b, %s, %t, %m : tensor<8x4xf16>, tensor<8x4xf16>, tensor<8x4xf16>, tensor<8x8xf16>
}

// -----

shard.grid @g2(shape = 2x2)

// A collective over both axes cannot ring, but still overlaps.
// CHECK-LABEL: func.func @two_axis_group
// CHECK: dist.all_gather_start
// CHECK: linalg.matmul
// CHECK: dist.wait
func.func @two_axis_group(%x: tensor<2x8xf32>, %a: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  // expected-remark @+1 {{all_gather made asynchronous: predicted}}
  %g = dist.all_gather %x on @g2 axes = [0, 1] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = linalg.matmul ins(%a, %a : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %g, %m : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

shard.grid @tp(shape = 4)

// Nothing to overlap: the collective stays whole, and says why.
// CHECK-LABEL: func.func @nothing_to_overlap
// CHECK: dist.all_reduce %
func.func @nothing_to_overlap(%g: tensor<64xf32>) -> tensor<64xf32> {
  // expected-remark @+1 {{all_reduce kept whole: its input is not computed by a linalg op; bucket: no later all_reduce of its group, reduction and element type that fits its bucket and takes no schedule of its own has its input ready before this result is used; async: no independent computation to overlap it with}}
  %r = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
  return %r : tensor<64xf32>
}
