// braid-kernel-signals: the flag waits just before a fused kernel become an
// epoch counted on the host and a poll at the start of the kernel's body;
// the raises just after it become the kernel's last-block raise on the
// peer's view of the flags, counted in a word of a symmetric buffer the
// pass allocates per function. Left alone: a wait an op with effects
// separates from the kernel, and a kernel of more tiles than --max-tiles
// (a remark says why).
// RUN: braid-opt %s -split-input-file --braid-kernel-signals | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-kernel-signals=max-tiles=2 2>&1 | FileCheck %s --check-prefix=SMALL

shard.grid @tp(shape = 2)

// The consumer of a one-shot all-reduce: data wait, kernel, credit back.
// CHECK-LABEL: func.func @one_shot
// CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
// CHECK: %[[SLOT:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1
// CHECK: %[[COUNT:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<1xi32>
// The credit wait before the put stays: a put follows it.
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 3
// CHECK-NEXT: xfer.put
// CHECK-NOT: xfer.signal_wait
// CHECK: %[[E:.*]] = xfer.flag_epoch %[[FLAGS]][%[[C0:.*]]] slack = 0 step = 3 : memref<2xi32>
// CHECK: %[[PEER:.*]] = xfer.peer_view %[[FLAGS]] on @tp axes = [0] offset = -1 : memref<2xi32>
// CHECK: %[[W:.*]] = arith.constant 0 : index
// CHECK: scf.forall (%{{.*}}) in (4) {
// CHECK-NEXT: xfer.kernel_wait %[[FLAGS]][%[[C0]]] until %[[E]] step = 3 : memref<2xi32>
// CHECK: linalg.add
// CHECK-NEXT: xfer.kernel_signal %[[PEER]][%[[C1:.*]]] arrivals %[[COUNT]][%[[W]]] step = 3 : memref<2xi32>, memref<1xi32>
// CHECK-NEXT: } {braid.kernel}
// CHECK-NOT: xfer.signal
// CHECK: return
// SMALL: remark: keeps the flag waits and raises next to it on the stream: its 4 tiles exceed the 2 blocks that may poll and count arrivals (--max-tiles)
// The remarks come first; @cast_rows's, at the end of this file:
// SMALL: remark: keeps the flag waits and raises next to it on the stream: its 4 rows exceed the 2 blocks that may poll and count arrivals (--max-tiles)
// SMALL: func.func @one_shot
// SMALL: xfer.signal_wait %{{.*}} slack = 0 step = 3
// SMALL-NEXT: scf.forall
// SMALL-NOT: xfer.kernel_
// SMALL: xfer.signal %{{.*}} offset = -1 step = 3
func.func @one_shot(%partial: memref<4x64xf32>, %out: memref<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x64xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 3 : memref<2xi32>
  %r = xfer.put %partial, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 3 : memref<4x64xf32>, memref<4x64xf32>, memref<2xi32>
  xfer.wait %r : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 3 : memref<2xi32>
  scf.forall (%i) in (4) {
    %a = memref.subview %partial[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %b = memref.subview %slot[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %o = memref.subview %out[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.add ins(%a, %b : memref<1x64xf32, strided<[64, 1], offset: ?>>, memref<1x64xf32, strided<[64, 1], offset: ?>>) outs(%o : memref<1x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 3 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 2)

// A kernel that stores into the peer's slot (braid-fuse-puts): its credit
// wait (across the peer view and an allocation) moves in, and its data
// raise and a second raise after it share the kernel's arrival word.
// CHECK-LABEL: func.func @push
// CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<3xi32>
// CHECK: %[[SLOT:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1
// CHECK: %[[COUNT:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<1xi32>
// CHECK: %[[E:.*]] = xfer.flag_epoch %[[FLAGS]][%{{.*}}] slack = 1 step = 0
// CHECK: %[[W:.*]] = arith.constant 0 : index
// CHECK: scf.forall
// CHECK-NEXT: xfer.kernel_wait %[[FLAGS]][%{{.*}}] until %[[E]] step = 0
// CHECK: linalg.copy
// CHECK-NEXT: xfer.kernel_signal %{{.*}}[%{{.*}}] arrivals %[[COUNT]][%[[W]]] for %[[SLOT]] step = 0 : memref<3xi32>, memref<1xi32>, memref<4x64xf32>
// CHECK-NEXT: xfer.kernel_signal %{{.*}}[%{{.*}}] arrivals %[[COUNT]][%[[W]]] add = 2 step = 1 : memref<3xi32>, memref<1xi32>
// CHECK-NEXT: } {braid.kernel}
func.func @push(%x: memref<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<3xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x64xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<3xi32>
  %peer = xfer.peer_view %slot on @tp axes = [0] offset = 1 : memref<4x64xf32>
  %tmp = memref.alloc() : memref<4x64xf32>
  scf.forall (%i) in (4) {
    %a = memref.subview %x[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %p = memref.subview %peer[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.copy ins(%a : memref<1x64xf32, strided<[64, 1], offset: ?>>) outs(%p : memref<1x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  %v = memref.subview %tmp[0, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1]>>
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %slot step = 0 : memref<3xi32>, memref<4x64xf32>
  xfer.signal %flags[%c2] on @tp axes = [0] offset = 1 add = 2 step = 1 : memref<3xi32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<3xi32>
  xfer.signal_wait %flags[%c2] slack = 0 step = 1 : memref<3xi32>
  memref.dealloc %tmp : memref<4x64xf32>
  return
}

// -----

shard.grid @tp(shape = 2)

// A copy between the wait and the kernel keeps the wait on the stream
// (the copy must wait too); the kernel has no raise after it.
// CHECK-LABEL: func.func @separated
// CHECK: xfer.signal_wait
// CHECK-NEXT: memref.copy
// CHECK-NOT: xfer.kernel_wait
// CHECK-NOT: xfer.flag_epoch
func.func @separated(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  %c0 = arith.constant 0 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x64xf32>
  %r = xfer.put %x, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x64xf32>, memref<4x64xf32>, memref<1xi32>
  xfer.wait %r : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<1xi32>
  memref.copy %slot, %y : memref<4x64xf32> to memref<4x64xf32>
  scf.forall (%i) in (4) {
    %a = memref.subview %y[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.add ins(%a, %a : memref<1x64xf32, strided<[64, 1], offset: ?>>, memref<1x64xf32, strided<[64, 1], offset: ?>>) outs(%a : memref<1x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  return
}

// -----

shard.grid @tp(shape = 2)

// An elementwise op next to flag ops (a GEMM's f32 partial cast to bf16 and
// stored into the peer's slot, braid-fuse-puts) becomes a kernel of its
// rows, mapped like the fused kernels, and the flags move into it.
// CHECK-LABEL: func.func @cast_rows
// CHECK-SAME: (%[[P:.*]]: memref<4x64xf32>, %[[OUT:.*]]: memref<4x64xbf16>, %[[B:.*]]: memref<64xf32>)
// CHECK: %[[E:.*]] = xfer.flag_epoch %{{.*}} slack = 1 step = 0
// CHECK: %[[PEER:.*]] = xfer.peer_view %[[SLOT:.*]] on @tp axes = [0] offset = 1 : memref<4x64xbf16>
// CHECK: scf.forall (%[[I:.*]]) in (4) {
// CHECK-NEXT: xfer.kernel_wait %{{.*}} until %[[E]] step = 0
// CHECK-NEXT: %[[A:.*]] = memref.subview %[[P]][%[[I]], 0] [1, 64] [1, 1]
// CHECK-NEXT: %[[BB:.*]] = memref.subview %[[B]][0] [64] [1]
// CHECK-NEXT: %[[O:.*]] = memref.subview %[[OUT]][%[[I]], 0] [1, 64] [1, 1]
// CHECK-NEXT: %[[T:.*]] = memref.subview %[[PEER]][%[[I]], 0] [1, 64] [1, 1]
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[A]], %[[BB]] : {{.*}}) outs(%[[O]], %[[T]] :
// CHECK: xfer.kernel_signal %{{.*}} for %[[SLOT]] step = 0
// CHECK-NEXT: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// SMALL: func.func @cast_rows
// SMALL: xfer.signal_wait
// SMALL-NEXT: xfer.peer_view
// SMALL-NEXT: linalg.generic
func.func @cast_rows(%p: memref<4x64xf32>, %out: memref<4x64xbf16>, %bias: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x64xbf16>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %peer = xfer.peer_view %slot on @tp axes = [0] offset = 1 : memref<4x64xbf16>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%p, %bias : memref<4x64xf32>, memref<64xf32>) outs(%out, %peer : memref<4x64xbf16>, memref<4x64xbf16>) {
  ^bb0(%x: f32, %b: f32, %o: bf16, %q: bf16):
    %s = arith.addf %x, %b : f32
    %t = arith.truncf %s : f32 to bf16
    linalg.yield %t, %t : bf16, bf16
  }
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %slot step = 0 : memref<2xi32>, memref<4x64xbf16>
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 2)

// Elementwise ops that are no kernel of their rows stay: one that reads its
// loop indices (a tile's would start at 0), one whose output every row
// writes whole. Their flag ops stay on the stream.
// CHECK-LABEL: func.func @not_rows
// CHECK-NOT: scf.forall
// CHECK-NOT: xfer.kernel_
// CHECK: xfer.signal_wait
// CHECK-NEXT: linalg.generic
// CHECK: linalg.index
// CHECK: xfer.signal
// CHECK-NEXT: xfer.signal_wait
// CHECK-NEXT: linalg.generic
// CHECK: xfer.signal
// CHECK-NOT: xfer.kernel_
func.func @not_rows(%p: memref<4x64xf32>, %out: memref<4x64xf32>, %row: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%p : memref<4x64xf32>) outs(%out : memref<4x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 0 : index
    %n = arith.index_cast %i : index to i32
    %f = arith.sitofp %n : i32 to f32
    %s = arith.addf %x, %f : f32
    linalg.yield %s : f32
  }
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 1 step = 0 : memref<2xi32>
  xfer.signal_wait %flags[%c0] slack = 1 step = 1 : memref<2xi32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>], iterator_types = ["parallel", "parallel"]} ins(%p : memref<4x64xf32>) outs(%row : memref<64xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 step = 1 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 2)

// A scalar and a 0-d buffer are every row's: the kernel of rows takes them
// whole.
// CHECK-LABEL: func.func @scalars
// CHECK-SAME: (%[[P:.*]]: memref<2x8xf32>, %[[S:.*]]: f32, %[[Z:.*]]: memref<f32>, %[[OUT:.*]]: memref<2x8xf32>)
// CHECK: scf.forall (%[[I:.*]]) in (2) {
// CHECK-NEXT: xfer.kernel_wait
// CHECK-NEXT: %[[A:.*]] = memref.subview %[[P]][%[[I]], 0] [1, 8] [1, 1]
// CHECK-NEXT: %[[O:.*]] = memref.subview %[[OUT]][%[[I]], 0] [1, 8] [1, 1]
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[A]], %[[S]], %[[Z]] : memref<1x8xf32, strided<[8, 1], offset: ?>>, f32, memref<f32>) outs(%[[O]] :
func.func @scalars(%p: memref<2x8xf32>, %s: f32, %z: memref<f32>, %out: memref<2x8xf32>) {
  %c0 = arith.constant 0 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<2x8xf32>
  %r = xfer.put %p, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<2x8xf32>, memref<2x8xf32>, memref<1xi32>
  xfer.wait %r : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<1xi32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> ()>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%p, %s, %z : memref<2x8xf32>, f32, memref<f32>) outs(%out : memref<2x8xf32>) {
  ^bb0(%x: f32, %a: f32, %b: f32, %o: f32):
    %t = arith.addf %x, %a : f32
    %u = arith.addf %t, %b : f32
    linalg.yield %u : f32
  }
  return
}
