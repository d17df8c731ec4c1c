// braid-kernel-signals with gemm-waits: the block contractions of a
// pushed reduce-scatter (push_matmul_rs after braid-fuse-puts), each
// writing a peer's slot through a peer view and followed by the raise that
// announces it, become one kernel of GEMM segments whose case for each
// block ends with an xfer.kernel_signal on an arrival word of its own: the
// block's last tile raises the owner's flag. Left as stream raises: a
// raise for a slot another contraction of the run writes too (the raise
// would no longer follow it). A run that raises is one kernel: a
// contraction of another kind starts a run of its own.
// RUN: braid-opt %s -split-input-file --braid-kernel-signals="gemm-waits=1" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-kernel-signals="gemm-waits=1" -mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

shard.grid @tp(shape = 4)

// REMARK: remark: 3 contraction(s) that store into peers' copies run as one kernel whose tiles poll the flags they wait for and whose last tile of each contraction that stores into a peer raises that peer's flag (a persistent generated GEMM of at most 96 blocks)
// CHECK-LABEL: func.func @pushed_blocks
// CHECK: %[[F:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
// CHECK: %[[S1:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1
// CHECK: %[[S2:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2
// CHECK: %[[A:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 3 : memref<2xi32>
// CHECK: %[[E1:.*]] = xfer.flag_epoch %[[F]][%{{.*}}] slack = 1 step = 0
// CHECK: %[[P1:.*]] = xfer.peer_view %[[S1]] on @tp axes = [0] offset = 1
// CHECK: %[[E2:.*]] = xfer.flag_epoch %[[F]][%{{.*}}] slack = 1 step = 1
// CHECK: %[[P2:.*]] = xfer.peer_view %[[S2]] on @tp axes = [0] offset = 2
// CHECK: %[[Q1:.*]] = xfer.peer_view %[[F]] on @tp axes = [0] offset = 1
// CHECK: %[[Q2:.*]] = xfer.peer_view %[[F]] on @tp axes = [0] offset = 2
// CHECK: scf.forall (%[[I:.*]]) in (3) {
// CHECK-NEXT: scf.index_switch %[[I]]
// CHECK-NEXT: case 0 {
// CHECK-NEXT: xfer.kernel_wait %[[F]][%{{.*}}] until %[[E1]]
// CHECK-NEXT: linalg.fill ins(%{{.*}}) outs(%[[P1]] :
// CHECK-NEXT: linalg.matmul {{.*}} outs(%[[P1]] :
// CHECK-NEXT: xfer.kernel_signal %[[Q1]][%{{.*}}] arrivals %[[A]][%[[W0:.*]]] for %[[S1]] step = 0
// CHECK-NEXT: scf.yield
// CHECK: case 1 {
// CHECK: linalg.matmul {{.*}} outs(%[[P2]] :
// CHECK-NEXT: xfer.kernel_signal %[[Q2]][%{{.*}}] arrivals %[[A]][%[[W1:.*]]] for %[[S2]] step = 1
// CHECK-NEXT: scf.yield
// CHECK: case 2 {
// CHECK: linalg.matmul
// CHECK-NEXT: scf.yield
// CHECK: } {braid.gemm_segments = 96 : i64, braid.kernel
// CHECK-NOT: xfer.signal %
// CHECK: xfer.signal_wait %[[F]][%{{.*}}] slack = 0 step = 0
// CHECK: return
func.func @pushed_blocks(%x: memref<64x32xbf16>, %w: memref<32x48xbf16>) -> memref<16x48xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %s1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<16x48xf32>
  %s2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<16x48xf32>
  %own = memref.alloc() : memref<16x48xf32>
  %x1 = memref.subview %x[16, 0] [16, 32] [1, 1] : memref<64x32xbf16> to memref<16x32xbf16, strided<[32, 1], offset: 512>>
  xfer.signal_wait %flags[%c2] slack = 1 step = 0 : memref<4xi32>
  %p1 = xfer.peer_view %s1 on @tp axes = [0] offset = 1 : memref<16x48xf32>
  linalg.fill ins(%zero : f32) outs(%p1 : memref<16x48xf32>)
  linalg.matmul ins(%x1, %w : memref<16x32xbf16, strided<[32, 1], offset: 512>>, memref<32x48xbf16>) outs(%p1 : memref<16x48xf32>)
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s1 step = 0 : memref<4xi32>, memref<16x48xf32>
  %x2 = memref.subview %x[32, 0] [16, 32] [1, 1] : memref<64x32xbf16> to memref<16x32xbf16, strided<[32, 1], offset: 1024>>
  xfer.signal_wait %flags[%c3] slack = 1 step = 1 : memref<4xi32>
  %p2 = xfer.peer_view %s2 on @tp axes = [0] offset = 2 : memref<16x48xf32>
  linalg.fill ins(%zero : f32) outs(%p2 : memref<16x48xf32>)
  linalg.matmul ins(%x2, %w : memref<16x32xbf16, strided<[32, 1], offset: 1024>>, memref<32x48xbf16>) outs(%p2 : memref<16x48xf32>)
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 2 for %s2 step = 1 : memref<4xi32>, memref<16x48xf32>
  %x0 = memref.subview %x[0, 0] [16, 32] [1, 1] : memref<64x32xbf16> to memref<16x32xbf16, strided<[32, 1]>>
  linalg.fill ins(%zero : f32) outs(%own : memref<16x48xf32>)
  linalg.matmul ins(%x0, %w : memref<16x32xbf16, strided<[32, 1]>>, memref<32x48xbf16>) outs(%own : memref<16x48xf32>)
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<4xi32>
  return %own : memref<16x48xf32>
}

// -----

shard.grid @tp(shape = 4)

// Two contractions store into the same peer's slots: the second's raise
// would no longer follow the first's stores, so it stays on the stream
// (the run's kernel raises only the first's).
// REMARK: remark: 2 contraction(s) that store into peers' copies
// CHECK-LABEL: func.func @same_peer
// CHECK: scf.forall
// CHECK: case 0 {
// CHECK: xfer.kernel_signal
// CHECK: case 1 {
// CHECK: linalg.matmul
// CHECK-NEXT: scf.yield
// CHECK: } {braid.gemm_segments
// CHECK-NEXT: xfer.signal %{{.*}}[%{{.*}}] on @tp axes = [0] offset = 1 for %{{.*}} step = 1
func.func @same_peer(%x: memref<32x32xbf16>, %w: memref<32x48xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %s1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<16x48xf32>
  %s2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<16x48xf32>
  %x1 = memref.subview %x[0, 0] [16, 32] [1, 1] : memref<32x32xbf16> to memref<16x32xbf16, strided<[32, 1]>>
  %x2 = memref.subview %x[16, 0] [16, 32] [1, 1] : memref<32x32xbf16> to memref<16x32xbf16, strided<[32, 1], offset: 512>>
  xfer.signal_wait %flags[%c2] slack = 1 step = 0 : memref<4xi32>
  %p1 = xfer.peer_view %s1 on @tp axes = [0] offset = 1 : memref<16x48xf32>
  linalg.fill ins(%zero : f32) outs(%p1 : memref<16x48xf32>)
  linalg.matmul ins(%x1, %w : memref<16x32xbf16, strided<[32, 1]>>, memref<32x48xbf16>) outs(%p1 : memref<16x48xf32>)
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s1 step = 0 : memref<4xi32>, memref<16x48xf32>
  xfer.signal_wait %flags[%c3] slack = 1 step = 1 : memref<4xi32>
  %p2 = xfer.peer_view %s2 on @tp axes = [0] offset = 1 : memref<16x48xf32>
  linalg.fill ins(%zero : f32) outs(%p2 : memref<16x48xf32>)
  linalg.matmul ins(%x2, %w : memref<16x32xbf16, strided<[32, 1], offset: 512>>, memref<32x48xbf16>) outs(%p2 : memref<16x48xf32>)
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 1 for %s2 step = 1 : memref<4xi32>, memref<16x48xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<4xi32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 1 : memref<4xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// Blocks of two shapes: each its own run and kernel, each raising its
// owner's flag, so that no kernel waits behind another's raise.
// REMARK: remark: 1 contraction(s) that store into peers' copies
// REMARK: remark: 1 contraction(s) that store into peers' copies
// CHECK-LABEL: func.func @two_kinds
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : memref<16x48xf32>)
// CHECK-NOT: linalg.matmul
// CHECK: xfer.kernel_signal
// CHECK: } {braid.gemm_segments
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.matmul {{.*}} outs(%{{.*}} : memref<16x64xf32>)
// CHECK: xfer.kernel_signal
// CHECK: } {braid.gemm_segments
func.func @two_kinds(%x: memref<16x32xbf16>, %w1: memref<32x48xbf16>, %w2: memref<32x64xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %s1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<16x48xf32>
  %s2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<16x64xf32>
  xfer.signal_wait %flags[%c2] slack = 1 step = 0 : memref<4xi32>
  %p1 = xfer.peer_view %s1 on @tp axes = [0] offset = 1 : memref<16x48xf32>
  linalg.fill ins(%zero : f32) outs(%p1 : memref<16x48xf32>)
  linalg.matmul ins(%x, %w1 : memref<16x32xbf16>, memref<32x48xbf16>) outs(%p1 : memref<16x48xf32>)
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s1 step = 0 : memref<4xi32>, memref<16x48xf32>
  xfer.signal_wait %flags[%c3] slack = 1 step = 1 : memref<4xi32>
  %p2 = xfer.peer_view %s2 on @tp axes = [0] offset = 2 : memref<16x64xf32>
  linalg.fill ins(%zero : f32) outs(%p2 : memref<16x64xf32>)
  linalg.matmul ins(%x, %w2 : memref<16x32xbf16>, memref<32x64xbf16>) outs(%p2 : memref<16x64xf32>)
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 2 for %s2 step = 1 : memref<4xi32>, memref<16x64xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<4xi32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 1 : memref<4xi32>
  return
}
