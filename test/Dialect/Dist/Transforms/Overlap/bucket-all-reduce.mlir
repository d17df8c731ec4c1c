// Small all-reduces of one group travel as one bucket (bucket_ar): the
// gradients of a data-parallel step.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force -verify-diagnostics | FileCheck %s
// The model prefers the bucket under auto too.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=auto 2>/dev/null | FileCheck %s --check-prefix=AUTO
// RUN: braid-opt %s --braid-overlap="mode=force report=%t.json" -split-input-file -o /dev/null 2>/dev/null
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// bucket-bytes=-1: no buckets; bucket-bytes=300: the 256 + 4 bytes of the
// first and third, the other two alone (each would overflow it).
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force bucket-bytes=-1" 2>/dev/null | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force bucket-bytes=300" 2>/dev/null | FileCheck %s --check-prefix=CAP
// The rewritten program passes the schedule checker through to xfer.
// RUN: braid-opt %s -split-input-file --braid-pipeline="skip-import=1 stop-after=xfer overlap=force check-schedule=1" -o /dev/null 2>/dev/null

shard.grid @dp(shape = 2)

// Gradients of every rank (1-D, 2-D, 0-D, 3-D) in one flat buffer, started
// after the last of them, waited after the independent matmul, read back in
// their shapes.
// CHECK-LABEL: func.func @gradients
// CHECK-SAME: (%[[G0:[^:]*]]: tensor<64xf32>, %[[G1:[^:]*]]: tensor<8x8xf32>, %[[G2:[^:]*]]: tensor<f32>, %[[G3:[^:]*]]: tensor<2x3x4xf32>
// CHECK: %[[E:.*]] = tensor.empty() : tensor<153xf32>
// AUTO-LABEL: func.func @gradients
// OFF-LABEL: func.func @gradients
// OFF-COUNT-4: dist.all_reduce_start %arg
// OFF-NOT: tensor.empty() : tensor<153xf32>
// CAP-LABEL: func.func @gradients
// CAP: dist.all_reduce_start %arg1 {{.*}} : tensor<8x8xf32>
// CAP: tensor.empty() : tensor<65xf32>
// CAP: dist.all_reduce_start %{{.*}} : tensor<65xf32>
// CAP: dist.all_reduce_start %arg3 {{.*}} : tensor<2x3x4xf32>
// AUTO: dist.all_reduce_start %{{.*}} : tensor<153xf32>
// CHECK: %[[B0:.*]] = tensor.insert_slice %[[G0]] into %[[E]][0] [64] [1]
// CHECK: %[[F1:.*]] = tensor.collapse_shape %[[G1]] {{\[\[}}0, 1]]
// CHECK: %[[B1:.*]] = tensor.insert_slice %[[F1]] into %[[B0]][64] [64] [1]
// CHECK: %[[F2:.*]] = tensor.expand_shape %[[G2]] [] output_shape [1]
// CHECK: %[[B2:.*]] = tensor.insert_slice %[[F2]] into %[[B1]][128] [1] [1]
// CHECK: %[[F3:.*]] = tensor.collapse_shape %[[G3]] {{\[\[}}0, 1, 2]]
// CHECK: %[[B3:.*]] = tensor.insert_slice %[[F3]] into %[[B2]][129] [24] [1]
// CHECK: %[[T:.*]], %[[F:.*]] = dist.all_reduce_start %[[B3]] on @dp axes = [0] reduce = sum : tensor<153xf32>
// CHECK: %[[M:.*]] = linalg.matmul
// CHECK: %[[R:.*]] = dist.wait %[[T]], %[[F]] : tensor<153xf32>
// CHECK: %[[R0:.*]] = tensor.extract_slice %[[R]][0] [64] [1]
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[R]][64] [64] [1]
// CHECK: %[[R1:.*]] = tensor.expand_shape %[[S1]] {{\[\[}}0, 1]] output_shape [8, 8]
// CHECK: %[[S2:.*]] = tensor.extract_slice %[[R]][128] [1] [1]
// CHECK: %[[R2:.*]] = tensor.collapse_shape %[[S2]] []
// CHECK: %[[S3:.*]] = tensor.extract_slice %[[R]][129] [24] [1]
// CHECK: %[[R3:.*]] = tensor.expand_shape %[[S3]] {{\[\[}}0, 1, 2]] output_shape [2, 3, 4]
// CHECK: return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[M]]
// CHECK-NOT: dist.all_reduce
func.func @gradients(%g0: tensor<64xf32>, %g1: tensor<8x8xf32>, %g2: tensor<f32>, %g3: tensor<2x3x4xf32>, %a: tensor<64x64xf32>) -> (tensor<64xf32>, tensor<8x8xf32>, tensor<f32>, tensor<2x3x4xf32>, tensor<64x64xf32>) {
  // expected-remark @+1 {{all_reduce made asynchronous: predicted}}
  %r0 = dist.all_reduce %g0 on @dp axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r1 = dist.all_reduce %g1 on @dp axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r2 = dist.all_reduce %g2 on @dp axes = [0] reduce = sum : tensor<f32> -> tensor<f32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r3 = dist.all_reduce %g3 on @dp axes = [0] reduce = sum : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = linalg.matmul ins(%a, %a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r0, %r1, %r2, %r3, %m : tensor<64xf32>, tensor<8x8xf32>, tensor<f32>, tensor<2x3x4xf32>, tensor<64x64xf32>
}

// -----

shard.grid @g(shape = 2x2)

// Only all-reduces that reduce alike share a bucket: the same axes,
// reduction and element type. The max, the f16 one and the one over the
// other axis are each made asynchronous alone.
// CHECK-LABEL: func.func @alike
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @g axes = [1] reduce = max : tensor<16xf32>
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @g axes = [1] reduce = sum : tensor<16xf16>
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @g axes = [0] reduce = sum : tensor<16xf32>
// CHECK-DAG: dist.all_reduce_start %{{.*}} on @g axes = [1] reduce = sum : tensor<160xf32>
// AUTO-LABEL: func.func @alike
// AUTO: dist.all_reduce_start %{{.*}} : tensor<160xf32>
func.func @alike(%a: tensor<16xf32>, %b: tensor<16xf32>, %c: tensor<16xf16>, %d: tensor<16xf32>, %e: tensor<8x16xf32>, %x: tensor<32x32xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<32x32xf32>) {
  // expected-remark @+1 {{3 all_reduces in one bucket of 640 bytes}}
  %r0 = dist.all_reduce %a on @g axes = [1] reduce = sum : tensor<16xf32> -> tensor<16xf32>
  // expected-remark @+1 {{all_reduce made asynchronous}}
  %r1 = dist.all_reduce %b on @g axes = [1] reduce = max : tensor<16xf32> -> tensor<16xf32>
  // expected-remark @+1 {{all_reduce made asynchronous}}
  %r2 = dist.all_reduce %c on @g axes = [1] reduce = sum : tensor<16xf16> -> tensor<16xf16>
  // expected-remark @+1 {{all_reduce made asynchronous}}
  %r3 = dist.all_reduce %d on @g axes = [0] reduce = sum : tensor<16xf32> -> tensor<16xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r4 = dist.all_reduce %e on @g axes = [1] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r5 = dist.all_reduce %d on @g axes = [1] reduce = sum : tensor<16xf32> -> tensor<16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%empty : tensor<32x32xf32>) -> tensor<32x32xf32>
  %m = linalg.matmul ins(%x, %x : tensor<32x32xf32>, tensor<32x32xf32>) outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %r0, %r1, %r2, %r3, %r4, %r5, %m : tensor<16xf32>, tensor<16xf32>, tensor<16xf16>, tensor<16xf32>, tensor<8x16xf32>, tensor<16xf32>, tensor<32x32xf32>
}

// -----

shard.grid @tp(shape = 4)

// The second all-reduce reduces the first's result, so the two cannot
// travel together; each says why.
// CHECK-LABEL: func.func @chained
// CHECK-COUNT-2: dist.all_reduce %
func.func @chained(%g: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-remark @+1 {{all_reduce kept whole: its input is not computed by a linalg op; bucket: no later all_reduce of its group, reduction and element type that fits its bucket and takes no schedule of its own has its input ready before this result is used}}
  %r = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-remark @+1 {{bucket: no later all_reduce of its group}}
  %s = dist.all_reduce %r on @tp axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

shard.grid @tp(shape = 4)

// A later all-reduce with a schedule of its own (under force, the ring
// fused with the matmul that computes it) is decided alone; the one after
// it still joins the bucket.
// CHECK-LABEL: func.func @own_schedule
// CHECK: dist.shift_start
// CHECK: %[[B:.*]] = dist.all_reduce %{{.*}} : tensor<128xf32>
// CHECK: tensor.extract_slice %[[B]][0] [64] [1]
// CHECK: tensor.extract_slice %[[B]][64] [64] [1]
func.func @own_schedule(%g: tensor<64xf32>, %x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %h: tensor<64xf32>) -> (tensor<64xf32>, tensor<8x16xf32>, tensor<64xf32>) {
  // expected-remark @+1 {{2 all_reduces in one bucket of 512 bytes}}
  %r0 = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %p = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as rs_ring_ag}}
  %r1 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r2 = dist.all_reduce %h on @tp axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
  return %r0, %r1, %r2 : tensor<64xf32>, tensor<8x16xf32>, tensor<64xf32>
}

// -----

shard.grid @dp(shape = 4)

// A bandwidth-bound all-reduce (a large weight's gradient) goes alone,
// made asynchronous by itself; the two small ones around it still share a
// bucket.
// CHECK-LABEL: func.func @large
// CHECK: dist.all_reduce_start %{{.*}} : tensor<1024x1024xf32>
// CHECK: dist.all_reduce_start %{{.*}} : tensor<2048xf32>
// The report (of the last function: each split overwrites it) lists the
// bucket under its first all-reduce and the others as travelling in it.
// REPORT: "loc": "{{.*}}bucket-all-reduce.mlir:[[@LINE+12]]:9"
// REPORT: "with": "linalg.matmul"
// REPORT: "strategy": "bucket_ar"
// REPORT: "reason": "overlap=force; predicted
// REPORT: "loc": "{{.*}}bucket-all-reduce.mlir:[[@LINE+12]]:9"
// REPORT: "strategy": "bucket_ar"
// REPORT: "reason": "travels in the bucket_ar of the all_reduce at {{.*}}bucket-all-reduce.mlir:[[@LINE+6]]:9"
// REPORT: "loc": "{{.*}}bucket-all-reduce.mlir:[[@LINE+7]]:9"
// REPORT: "with": "linalg.matmul"
// REPORT: "strategy": "async"
func.func @large(%big: tensor<1024x1024xf32>, %b0: tensor<1024xf32>, %b1: tensor<1024xf32>, %x: tensor<64x64xf32>) -> (tensor<1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>, tensor<64x64xf32>) {
  // expected-remark @+1 {{2 all_reduces in one bucket of 8192 bytes}}
  %r0 = dist.all_reduce %b0 on @dp axes = [0] reduce = sum : tensor<1024xf32> -> tensor<1024xf32>
  // expected-remark @+1 {{all_reduce made asynchronous}}
  %r1 = dist.all_reduce %big on @dp axes = [0] reduce = sum : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  // expected-remark @+1 {{all_reduce travels in the bucket_ar of the all_reduce at}}
  %r2 = dist.all_reduce %b1 on @dp axes = [0] reduce = sum : tensor<1024xf32> -> tensor<1024xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r0, %r1, %r2, %m : tensor<1024xf32>, tensor<1024x1024xf32>, tensor<1024xf32>, tensor<64x64xf32>
}

