// braid-kernel-signals with gemm-waits: a run of alike contractions (the
// chunks of a pushed all-gather), each with the flag waits right before it
// and its zero fill, becomes one kernel of GEMM segments: an scf.forall
// over them marked braid.gemm_segments (the most blocks: max-tiles) whose
// body switches to each segment's polls, fill and contraction. Each wait's
// epoch is counted where the wait was; the credits raised between the
// contractions move after the kernel, in order, where nothing in the call
// waits for them (every wait on their flag has a slack). Left alone: a run
// none of whose contractions waits, contractions the generated GEMM does
// not take (f32 without gemm-tf32), and without gemm-waits everything.
// RUN: braid-opt %s -split-input-file --braid-kernel-signals="gemm-waits=1" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-kernel-signals="gemm-waits=1" -mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-kernel-signals="gemm-waits=1 gemm-tf32=1 max-tiles=8" | FileCheck %s --check-prefix=TF32
// RUN: braid-opt %s -split-input-file --braid-kernel-signals | FileCheck %s --check-prefix=OFF

shard.grid @tp(shape = 4)

// REMARK: kernel-signals-gemm.mlir:[[# @LINE + 75]]:3: remark: 3 contraction(s) that wait for flags run as one kernel whose tiles poll them (a persistent generated GEMM of at most 96 blocks)
// REMARK: remark: 2 contraction(s)
// REMARK: remark: 1 contraction(s)
// REMARK: remark: 2 contraction(s)
// REMARK: remark: 2 contraction(s)
// REMARK: remark: 1 contraction(s)
// REMARK: remark: 1 contraction(s)
// REMARK: remark: 1 contraction(s)
// REMARK: remark: 1 contraction(s)
// REMARK-NOT: remark
// CHECK-LABEL: func.func @pushed_chunks
// CHECK: xfer.signal_wait %[[F:.*]][%{{.*}}] slack = 1 step = 0
// CHECK-NEXT: xfer.put
// CHECK: %[[E1:.*]] = xfer.flag_epoch %[[F]][%[[C0:.*]]] slack = 0 step = 1 : memref<4xi32>
// CHECK: %[[E2:.*]] = xfer.flag_epoch %[[F]][%[[C1:.*]]] slack = 0 step = 2 : memref<4xi32>
// CHECK: scf.forall (%[[S:.*]]) in (3) {
// CHECK-NEXT: scf.index_switch %[[S]]
// CHECK-NEXT: case 0 {
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul ins(%arg0, %arg1
// CHECK: case 1 {
// CHECK-NEXT: xfer.kernel_wait %[[F]][%[[C0]]] until %[[E1]] step = 1 : memref<4xi32>
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul
// Each chunk's tiles poll their own chunk's flag only (the puts name the
// slot each flag announces).
// CHECK: case 2 {
// CHECK-NEXT: xfer.kernel_wait %[[F]][%[[C1]]] until %[[E2]] step = 2 : memref<4xi32>
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul
// CHECK: } {braid.gemm_segments = 96 : i64, braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// What was between the chunk GEMMs follows the kernel, in its order: the
// put's wait, the copy of the first received chunk into the gathered
// buffer and its credit; the last chunk's copy and credit were after it.
// CHECK-NEXT: xfer.wait
// CHECK-NEXT: memref.copy %{{.*}}, %[[G1:.*]] :
// CHECK-NEXT: xfer.signal %[[F]][%{{.*}}] on @tp axes = [0] offset = -1 step = 1
// CHECK: memref.copy
// CHECK-NEXT: xfer.signal %[[F]][%{{.*}}] on @tp axes = [0] offset = -2 step = 2
// CHECK-NEXT: return
// OFF-LABEL: func.func @pushed_chunks
// OFF-NOT: xfer.kernel_wait
// OFF-NOT: braid.gemm_segments
// OFF: return
func.func @pushed_chunks(%a: memref<64x32xbf16>, %b: memref<32x48xbf16>) -> (memref<192x48xf32>, memref<192x32xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %out = memref.alloc() : memref<192x48xf32>
  %gathered = memref.alloc() : memref<192x32xbf16>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %slot1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xbf16>
  %slot2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<64x32xbf16>
  // The credits the puts wait for: the previous call's (slack 1).
  xfer.signal_wait %flags[%c2] slack = 1 step = 0 : memref<4xi32>
  %r1 = xfer.put %a, %slot1 on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<4xi32>
  xfer.signal_wait %flags[%c3] slack = 1 step = 0 : memref<4xi32>
  %r2 = xfer.put %a, %slot2 on @tp axes = [0] offset = 2 signal %flags[%c1] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<4xi32>
  %o0 = memref.subview %out[0, 0] [64, 48] [1, 1] : memref<192x48xf32> to memref<64x48xf32, strided<[48, 1]>>
  linalg.fill ins(%zero : f32) outs(%o0 : memref<64x48xf32, strided<[48, 1]>>)
  linalg.matmul ins(%a, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%o0 : memref<64x48xf32, strided<[48, 1]>>)
  memref.copy %o0, %o0 : memref<64x48xf32, strided<[48, 1]>> to memref<64x48xf32, strided<[48, 1]>>
  xfer.wait %r1, %r2 : !xfer.request, !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<4xi32>
  %o1 = memref.subview %out[64, 0] [64, 48] [1, 1] : memref<192x48xf32> to memref<64x48xf32, strided<[48, 1], offset: 3072>>
  linalg.fill ins(%zero : f32) outs(%o1 : memref<64x48xf32, strided<[48, 1], offset: 3072>>)
  linalg.matmul ins(%slot1, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%o1 : memref<64x48xf32, strided<[48, 1], offset: 3072>>)
  %g1 = memref.subview %gathered[64, 0] [64, 32] [1, 1] : memref<192x32xbf16> to memref<64x32xbf16, strided<[32, 1], offset: 2048>>
  memref.copy %slot1, %g1 : memref<64x32xbf16> to memref<64x32xbf16, strided<[32, 1], offset: 2048>>
  xfer.signal %flags[%c2] on @tp axes = [0] offset = -1 step = 1 : memref<4xi32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 2 : memref<4xi32>
  %o2 = memref.subview %out[128, 0] [64, 48] [1, 1] : memref<192x48xf32> to memref<64x48xf32, strided<[48, 1], offset: 6144>>
  linalg.fill ins(%zero : f32) outs(%o2 : memref<64x48xf32, strided<[48, 1], offset: 6144>>)
  linalg.matmul ins(%slot2, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%o2 : memref<64x48xf32, strided<[48, 1], offset: 6144>>)
  %g2 = memref.subview %gathered[128, 0] [64, 32] [1, 1] : memref<192x32xbf16> to memref<64x32xbf16, strided<[32, 1], offset: 4096>>
  memref.copy %slot2, %g2 : memref<64x32xbf16> to memref<64x32xbf16, strided<[32, 1], offset: 4096>>
  xfer.signal %flags[%c3] on @tp axes = [0] offset = -2 step = 2 : memref<4xi32>
  return %out, %gathered : memref<192x48xf32>, memref<192x32xbf16>
}

// -----

shard.grid @tp(shape = 4)

// A raise that something in the same call waits for (slack 0) ends the
// run: it cannot move after the later contractions' polls. The run before
// it and the one after it are kernels of their own.
// CHECK-LABEL: func.func @credit_waited_in_call
// CHECK: scf.forall (%{{.*}}) in (2) {
// CHECK: } {braid.gemm_segments = 96 : i64
// CHECK-NEXT: xfer.signal %{{.*}}[%{{.*}}] on @tp axes = [0] offset = -1 step = 1
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: xfer.kernel_wait
// CHECK: } {braid.gemm_segments = 96 : i64
// CHECK: xfer.signal_wait %{{.*}}[%{{.*}}] slack = 0 step = 3
func.func @credit_waited_in_call(%a: memref<64x32xf16>, %b: memref<32x48xf16>) -> (memref<64x48xf16>, memref<64x48xf16>, memref<64x48xf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %out0 = memref.alloc() : memref<64x48xf16>
  %out1 = memref.alloc() : memref<64x48xf16>
  %out2 = memref.alloc() : memref<64x48xf16>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %slot1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xf16>
  %slot2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<64x32xf16>
  %r1 = xfer.put %a, %slot1 on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xf16>, memref<64x32xf16>, memref<4xi32>
  %r2 = xfer.put %a, %slot2 on @tp axes = [0] offset = 2 signal %flags[%c1] step = 0 : memref<64x32xf16>, memref<64x32xf16>, memref<4xi32>
  xfer.wait %r1, %r2 : !xfer.request, !xfer.request
  linalg.matmul ins(%a, %b : memref<64x32xf16>, memref<32x48xf16>) outs(%out0 : memref<64x48xf16>)
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<4xi32>
  linalg.matmul ins(%slot1, %b : memref<64x32xf16>, memref<32x48xf16>) outs(%out1 : memref<64x48xf16>)
  xfer.signal %flags[%c2] on @tp axes = [0] offset = -1 step = 1 : memref<4xi32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 2 : memref<4xi32>
  linalg.matmul ins(%slot2, %b : memref<64x32xf16>, memref<32x48xf16>) outs(%out2 : memref<64x48xf16>)
  xfer.signal_wait %flags[%c2] slack = 0 step = 3 : memref<4xi32>
  return %out0, %out1, %out2 : memref<64x48xf16>, memref<64x48xf16>, memref<64x48xf16>
}

// -----

shard.grid @tp(shape = 2)

// f32 operands: only with gemm-tf32 (the generated GEMM runs them as tf32),
// then with max-tiles as the kernel's most blocks.
// CHECK-LABEL: func.func @f32_chunks
// CHECK-NOT: braid.gemm_segments
// CHECK: xfer.signal_wait
// CHECK: return
// TF32-LABEL: func.func @f32_chunks
// TF32: scf.forall (%{{.*}}) in (2) {
// TF32: } {braid.gemm_segments = 8 : i64
func.func @f32_chunks(%a: memref<64x32xf32>, %b: memref<32x48xf32>) -> (memref<64x48xf32>, memref<64x48xf32>) {
  %c0 = arith.constant 0 : index
  %out0 = memref.alloc() : memref<64x48xf32>
  %out1 = memref.alloc() : memref<64x48xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xf32>
  %r = xfer.put %a, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xf32>, memref<64x32xf32>, memref<2xi32>
  xfer.wait %r : !xfer.request
  linalg.matmul ins(%a, %b : memref<64x32xf32>, memref<32x48xf32>) outs(%out0 : memref<64x48xf32>)
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<2xi32>
  linalg.matmul ins(%slot, %b : memref<64x32xf32>, memref<32x48xf32>) outs(%out1 : memref<64x48xf32>)
  return %out0, %out1 : memref<64x48xf32>, memref<64x48xf32>
}

// -----

shard.grid @tp(shape = 2)

// Two kinds of contraction interleaved (two projections of each chunk):
// a kernel per kind, in the order of their first contraction; the second
// projection of the received chunk polls the flag that the first one's
// wait stood for.
// CHECK-LABEL: func.func @two_kinds
// CHECK: %[[E:.*]] = xfer.flag_epoch
// CHECK: scf.forall (%{{.*}}) in (2) {
// CHECK: case 1 {
// CHECK-NEXT: xfer.kernel_wait %{{.*}} until %[[E]]
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %arg1 : memref<64x32xbf16>, memref<32x48xbf16>)
// CHECK: } {braid.gemm_segments
// CHECK: scf.forall (%{{.*}}) in (2) {
// CHECK: case 1 {
// CHECK-NEXT: xfer.kernel_wait %{{.*}} until %[[E]]
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %arg2 : memref<64x32xbf16>, memref<32x16xbf16>)
// CHECK: } {braid.gemm_segments
func.func @two_kinds(%a: memref<64x32xbf16>, %wq: memref<32x48xbf16>, %wk: memref<32x16xbf16>) -> (memref<128x48xf32>, memref<128x16xf32>) {
  %c0 = arith.constant 0 : index
  %q = memref.alloc() : memref<128x48xf32>
  %k = memref.alloc() : memref<128x16xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xbf16>
  %r = xfer.put %a, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<2xi32>
  xfer.wait %r : !xfer.request
  %q0 = memref.subview %q[0, 0] [64, 48] [1, 1] : memref<128x48xf32> to memref<64x48xf32, strided<[48, 1]>>
  linalg.matmul ins(%a, %wq : memref<64x32xbf16>, memref<32x48xbf16>) outs(%q0 : memref<64x48xf32, strided<[48, 1]>>)
  %k0 = memref.subview %k[0, 0] [64, 16] [1, 1] : memref<128x16xf32> to memref<64x16xf32, strided<[16, 1]>>
  linalg.matmul ins(%a, %wk : memref<64x32xbf16>, memref<32x16xbf16>) outs(%k0 : memref<64x16xf32, strided<[16, 1]>>)
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<2xi32>
  %q1 = memref.subview %q[64, 0] [64, 48] [1, 1] : memref<128x48xf32> to memref<64x48xf32, strided<[48, 1], offset: 3072>>
  linalg.matmul ins(%slot, %wq : memref<64x32xbf16>, memref<32x48xbf16>) outs(%q1 : memref<64x48xf32, strided<[48, 1], offset: 3072>>)
  %k1 = memref.subview %k[64, 0] [64, 16] [1, 1] : memref<128x16xf32> to memref<64x16xf32, strided<[16, 1], offset: 1024>>
  linalg.matmul ins(%slot, %wk : memref<64x32xbf16>, memref<32x16xbf16>) outs(%k1 : memref<64x16xf32, strided<[16, 1], offset: 1024>>)
  return %q, %k : memref<128x48xf32>, memref<128x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// Contractions that accumulate into one buffer must not run at once: the
// second, which waits, is a kernel of its own after the first.
// CHECK-LABEL: func.func @dependent
// CHECK: linalg.matmul ins(%arg0, %arg1
// CHECK-NEXT: flag_epoch
// CHECK-NEXT: scf.forall (%{{.*}}) in (1) {
func.func @dependent(%a: memref<64x32xbf16>, %b: memref<32x48xbf16>) -> memref<64x48xf32> {
  %c0 = arith.constant 0 : index
  %acc = memref.alloc() : memref<64x48xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xbf16>
  %r = xfer.put %a, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<2xi32>
  linalg.matmul ins(%a, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%acc : memref<64x48xf32>)
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<2xi32>
  linalg.matmul ins(%slot, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%acc : memref<64x48xf32>)
  xfer.wait %r : !xfer.request
  return %acc : memref<64x48xf32>
}

// -----

shard.grid @tp(shape = 2)

// What ends a run: a fill of a buffer the next contraction does not
// write (the contraction before it must not move past it), a copy that
// reads what a contraction of the run wrote, a raise of a flag that
// another op raises too. Each contraction that waits is a kernel of its
// own.
// CHECK-LABEL: func.func @run_enders
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.matmul ins(%{{.*}}, %arg1 : {{.*}}) outs(%{{.*}} : memref<64x48xf32>)
// CHECK: } {braid.gemm_segments
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul ins(%arg0, %arg1
// CHECK-NEXT: memref.copy
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: } {braid.gemm_segments
// CHECK-NEXT: xfer.signal {{.*}} step = 2
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: } {braid.gemm_segments
// CHECK-NEXT: xfer.signal {{.*}} step = 3
func.func @run_enders(%a: memref<64x32xbf16>, %b: memref<32x48xbf16>) -> (memref<64x48xf32>, memref<64x48xf32>, memref<64x48xf32>, memref<64x48xf32>, memref<64x32xbf16>, memref<64x48xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : bf16
  %out0 = memref.alloc() : memref<64x48xf32>
  %out1 = memref.alloc() : memref<64x48xf32>
  %out2 = memref.alloc() : memref<64x48xf32>
  %out3 = memref.alloc() : memref<64x48xf32>
  %z = memref.alloc() : memref<64x32xbf16>
  %copied = memref.alloc() : memref<64x48xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %slot0 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xbf16>
  %slot1 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<64x32xbf16>
  %slot3 = xfer.symmetric_alloc on @tp axes = [0] site = 3 : memref<64x32xbf16>
  %r0 = xfer.put %a, %slot0 on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<4xi32>
  %r1 = xfer.put %a, %slot1 on @tp axes = [0] offset = 1 signal %flags[%c1] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<4xi32>
  %r3 = xfer.put %a, %slot3 on @tp axes = [0] offset = 1 signal %flags[%c3] step = 0 : memref<64x32xbf16>, memref<64x32xbf16>, memref<4xi32>
  xfer.wait %r0, %r1, %r3 : !xfer.request, !xfer.request, !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<4xi32>
  linalg.matmul ins(%slot0, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out0 : memref<64x48xf32>)
  linalg.fill ins(%zero : bf16) outs(%z : memref<64x32xbf16>)
  linalg.matmul ins(%a, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out1 : memref<64x48xf32>)
  memref.copy %out1, %copied : memref<64x48xf32> to memref<64x48xf32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 2 : memref<4xi32>
  linalg.matmul ins(%slot1, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out2 : memref<64x48xf32>)
  xfer.signal %flags[%c2] on @tp axes = [0] offset = -1 step = 2 : memref<4xi32>
  xfer.signal_wait %flags[%c3] slack = 0 step = 3 : memref<4xi32>
  linalg.matmul ins(%slot3, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out3 : memref<64x48xf32>)
  xfer.signal %flags[%c2] on @tp axes = [0] offset = -1 step = 3 : memref<4xi32>
  xfer.signal_wait %flags[%c2] slack = 1 step = 4 : memref<4xi32>
  return %out0, %out1, %out2, %out3, %z, %copied : memref<64x48xf32>, memref<64x48xf32>, memref<64x48xf32>, memref<64x48xf32>, memref<64x32xbf16>, memref<64x48xf32>
}

// -----

shard.grid @tp(shape = 2)

// No contraction of the run waits: nothing to poll.
// CHECK-LABEL: func.func @no_waits
// CHECK-NOT: scf.forall
// CHECK: return
func.func @no_waits(%a: memref<64x32xbf16>, %b: memref<32x48xbf16>, %out0: memref<64x48xf32>, %out1: memref<64x48xf32>) {
  linalg.matmul ins(%a, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out0 : memref<64x48xf32>)
  linalg.matmul ins(%a, %b : memref<64x32xbf16>, memref<32x48xbf16>) outs(%out1 : memref<64x48xf32>)
  return
}
