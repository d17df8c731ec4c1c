// braid-fuse-puts: a put whose source a fused kernel has just written,
// tile by tile, becomes stores of each tile into the peer's slot inside
// the kernel plus a signal for the slot; the credit wait moves before the
// kernel. The result passes braid-check-schedule (second RUN). Puts the
// pass must leave alone: a source written after the kernel, a kernel that
// writes only part of it, a source that is a view, a put without a flag.
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(braid-fuse-puts))' | FileCheck %s
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(braid-fuse-puts,braid-check-schedule))' -o /dev/null

shard.grid @tp(shape = 4)

// A direct all-gather of a kernel's rows: three puts, one per peer, all
// stored by the kernel; the consumer's zero-copy reads stay as they were.
// CHECK-LABEL: func.func @direct
// CHECK-SAME: (%[[X:.*]]: memref<4x64xf32>
// CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0
// CHECK: %[[S1:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1
// CHECK: %[[S2:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2
// CHECK: %[[S3:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 3
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x64xf32>
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 0
// CHECK: %[[P1:.*]] = xfer.peer_view %[[S1]] on @tp axes = [0] offset = 1
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 1
// CHECK: %[[P2:.*]] = xfer.peer_view %[[S2]] on @tp axes = [0] offset = 2
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 2
// CHECK: %[[P3:.*]] = xfer.peer_view %[[S3]] on @tp axes = [0] offset = 3
// The op that writes each tile writes the peers' tiles alongside.
// CHECK: scf.forall (%[[I:.*]]) in (4) {
// CHECK: %[[T:.*]] = memref.subview %[[OUT]][%[[I]], 0] [1, 64] [1, 1]
// CHECK: %[[T1:.*]] = memref.subview %[[P1]][%[[I]], 0] [1, 64] [1, 1]
// CHECK: %[[T2:.*]] = memref.subview %[[P2]][%[[I]], 0] [1, 64] [1, 1]
// CHECK: %[[T3:.*]] = memref.subview %[[P3]][%[[I]], 0] [1, 64] [1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[T]], %[[T1]], %[[T2]], %[[T3]] :
// CHECK: %[[V:.*]] = arith.mulf
// CHECK-NEXT: linalg.yield %[[V]], %[[V]], %[[V]], %[[V]] : f32, f32, f32, f32
// CHECK-NOT: memref.copy
// CHECK: } {braid.kernel}
// CHECK-NOT: xfer.put
// CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = 1 for %[[S1]] step = 0
// CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = 2 for %[[S2]] step = 1
// CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = 3 for %[[S3]] step = 2
// CHECK: linalg.matmul ins(%[[OUT]]
// CHECK-NOT: xfer.wait
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 0 step = 0
// CHECK: linalg.matmul ins(%[[S1]]
// CHECK: return
func.func @direct(%x: memref<4x64xf32>, %w: memref<64x32xf32>, %y: memref<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<6xi32>
  %s1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x64xf32>
  %s2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<4x64xf32>
  %s3 = xfer.symmetric_alloc on @tp axes = [0] site = 3 : memref<4x64xf32>
  %out = memref.alloc() : memref<4x64xf32>
  scf.forall (%i) in (4) {
    %in = memref.subview %x[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %t = memref.subview %out[%i, 0] [1, 64] [1, 1] : memref<4x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%in : memref<1x64xf32, strided<[64, 1], offset: ?>>) outs(%t : memref<1x64xf32, strided<[64, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  } {braid.kernel}
  xfer.signal_wait %flags[%c3] slack = 1 step = 0 : memref<6xi32>
  %p1 = xfer.put %out, %s1 on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x64xf32>, memref<4x64xf32>, memref<6xi32>
  xfer.signal_wait %flags[%c4] slack = 1 step = 1 : memref<6xi32>
  %p2 = xfer.put %out, %s2 on @tp axes = [0] offset = 2 signal %flags[%c1] step = 1 : memref<4x64xf32>, memref<4x64xf32>, memref<6xi32>
  xfer.signal_wait %flags[%c5] slack = 1 step = 2 : memref<6xi32>
  %p3 = xfer.put %out, %s3 on @tp axes = [0] offset = 3 signal %flags[%c2] step = 2 : memref<4x64xf32>, memref<4x64xf32>, memref<6xi32>
  %y0 = memref.subview %y[0, 0] [4, 32] [1, 1] : memref<16x32xf32> to memref<4x32xf32, strided<[32, 1]>>
  linalg.matmul ins(%out, %w : memref<4x64xf32>, memref<64x32xf32>) outs(%y0 : memref<4x32xf32, strided<[32, 1]>>)
  xfer.wait %p1, %p2, %p3 : !xfer.request, !xfer.request, !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<6xi32>
  %y1 = memref.subview %y[4, 0] [4, 32] [1, 1] : memref<16x32xf32> to memref<4x32xf32, strided<[32, 1], offset: 128>>
  linalg.matmul ins(%s1, %w : memref<4x64xf32>, memref<64x32xf32>) outs(%y1 : memref<4x32xf32, strided<[32, 1], offset: 128>>)
  xfer.signal %flags[%c3] on @tp axes = [0] offset = -1 step = 0 : memref<6xi32>
  xfer.signal_wait %flags[%c1] slack = 0 step = 1 : memref<6xi32>
  %y2 = memref.subview %y[8, 0] [4, 32] [1, 1] : memref<16x32xf32> to memref<4x32xf32, strided<[32, 1], offset: 256>>
  linalg.matmul ins(%s2, %w : memref<4x64xf32>, memref<64x32xf32>) outs(%y2 : memref<4x32xf32, strided<[32, 1], offset: 256>>)
  xfer.signal %flags[%c4] on @tp axes = [0] offset = -2 step = 1 : memref<6xi32>
  xfer.signal_wait %flags[%c2] slack = 0 step = 2 : memref<6xi32>
  %y3 = memref.subview %y[12, 0] [4, 32] [1, 1] : memref<16x32xf32> to memref<4x32xf32, strided<[32, 1], offset: 384>>
  linalg.matmul ins(%s3, %w : memref<4x64xf32>, memref<64x32xf32>) outs(%y3 : memref<4x32xf32, strided<[32, 1], offset: 384>>)
  xfer.signal %flags[%c5] on @tp axes = [0] offset = -3 step = 2 : memref<6xi32>
  return
}

// -----

shard.grid @tp(shape = 2)

// Row tiles of two rows (the cpu target's), a tile that a copy completes
// (the kernel copies the tile into the peer's once complete), a copy onto
// itself (changes nothing), and an op that only reads the source between
// the kernel and the put (does not stop the fusion).
// CHECK-LABEL: func.func @row_tiles
// CHECK: %[[OUT:.*]] = memref.alloc()
// CHECK: xfer.peer_view
// CHECK: scf.forall (%[[I:.*]]) = (0) to (8) step (2) {
// CHECK: %[[T:.*]] = memref.subview %[[OUT]][%[[I]], 0] [2, 16] [1, 1]
// CHECK: %[[PT:.*]] = memref.subview %{{.*}}[%[[I]], 0] [2, 16] [1, 1]
// CHECK-NEXT: memref.copy %[[T]], %[[PT]]
// CHECK-NEXT: } {braid.kernel}
// CHECK: memref.copy %{{.*}}, %arg1
// CHECK: xfer.signal {{.*}} offset = 1 for
func.func @row_tiles(%x: memref<8x16xbf16>, %keep: memref<8x16xbf16>) -> memref<8x16xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x16xbf16>
  %out = memref.alloc() : memref<8x16xbf16>
  scf.forall (%i) = (0) to (8) step (2) {
    %in = memref.subview %x[%i, 0] [2, 16] [1, 1] : memref<8x16xbf16> to memref<2x16xbf16, strided<[16, 1], offset: ?>>
    %t = memref.subview %out[%i, 0] [2, 16] [1, 1] : memref<8x16xbf16> to memref<2x16xbf16, strided<[16, 1], offset: ?>>
    memref.copy %in, %t : memref<2x16xbf16, strided<[16, 1], offset: ?>> to memref<2x16xbf16, strided<[16, 1], offset: ?>>
    memref.copy %t, %t : memref<2x16xbf16, strided<[16, 1], offset: ?>> to memref<2x16xbf16, strided<[16, 1], offset: ?>>
  } {braid.kernel}
  memref.copy %out, %keep : memref<8x16xbf16> to memref<8x16xbf16>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x16xbf16>, memref<8x16xbf16>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<8x16xbf16>
  memref.copy %s, %r : memref<8x16xbf16> to memref<8x16xbf16>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<8x16xbf16>
}

// -----

shard.grid @tp(shape = 2)

// A kernel of one iteration writes the whole source directly (the
// canonicalizer folded its tile view): it stores the whole buffer.
// CHECK-LABEL: func.func @one_tile
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<1x16xf32>
// CHECK: %[[PEER:.*]] = xfer.peer_view
// CHECK: scf.forall (%{{.*}}) in (1) {
// CHECK: linalg.generic {{.*}} outs(%[[OUT]], %[[PEER]] : memref<1x16xf32>, memref<1x16xf32>)
// CHECK-NOT: memref.copy
// CHECK: } {braid.kernel
// CHECK: xfer.signal {{.*}} for
func.func @one_tile(%x: memref<1x16xf32>) -> memref<1x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<1x16xf32>
  %out = memref.alloc() : memref<1x16xf32>
  scf.forall (%i) in (1) {
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : memref<1x16xf32>) outs(%out : memref<1x16xf32>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<1x16xf32>, memref<1x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<1x16xf32>
  memref.copy %s, %r : memref<1x16xf32> to memref<1x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<1x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// An elementwise op outside any kernel (a lone residual add) writes the
// peer's slot alongside its result.
// CHECK-LABEL: func.func @lone
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x16xbf16>
// CHECK: xfer.signal_wait {{.*}} slack = 1
// CHECK-NEXT: %[[PEER:.*]] = xfer.peer_view
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[OUT]], %[[PEER]] : memref<4x16xbf16>, memref<4x16xbf16>)
// CHECK: xfer.signal {{.*}} for
func.func @lone(%x: memref<4x16xbf16>, %y: memref<4x16xbf16>) -> memref<4x16xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x16xbf16>
  %out = memref.alloc() : memref<4x16xbf16>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %y : memref<4x16xbf16>, memref<4x16xbf16>) outs(%out : memref<4x16xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %m = arith.addf %a, %b : bf16
    linalg.yield %m : bf16
  }
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x16xbf16>, memref<4x16xbf16>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<4x16xbf16>
  memref.copy %s, %r : memref<4x16xbf16> to memref<4x16xbf16>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<4x16xbf16>
}

// -----

shard.grid @tp(shape = 2)

// A kernel of two iterations writing the whole source in each (a race,
// or a reduction): the put stays.
// CHECK-LABEL: func.func @whole_each
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
func.func @whole_each(%x: memref<1x16xf32>) -> memref<1x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<1x16xf32>
  %out = memref.alloc() : memref<1x16xf32>
  scf.forall (%i) in (2) {
    memref.copy %x, %out : memref<1x16xf32> to memref<1x16xf32>
  } {braid.kernel}
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<1x16xf32>, memref<1x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<1x16xf32>
  memref.copy %s, %r : memref<1x16xf32> to memref<1x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<1x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// The source is this rank's block of a larger buffer (two_shot_ar's
// gathered result, written in place): the kernel writes the peer's slot
// through the same tiles.
// CHECK-LABEL: func.func @view_block
// CHECK: %[[BLOCK:.*]] = memref.subview %{{.*}}[%{{.*}}, 0] [4, 16] [1, 1]
// CHECK: %[[PEER:.*]] = xfer.peer_view
// CHECK: scf.forall (%[[I:.*]]) = (0) to (4) step (2) {
// CHECK: %[[T:.*]] = memref.subview %[[BLOCK]][%[[I]], 0] [2, 16] [1, 1]
// CHECK: %[[PT:.*]] = memref.subview %[[PEER]][%[[I]], 0] [2, 16] [1, 1] : memref<4x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
// CHECK: linalg.generic {{.*}} outs(%[[T]], %[[PT]] :
// CHECK: xfer.signal {{.*}} for
func.func @view_block(%x: memref<4x16xf32>, %pos: index) -> memref<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x16xf32>
  %whole = memref.alloc() : memref<8x16xf32>
  %off = arith.muli %pos, %c4 : index
  %block = memref.subview %whole[%off, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
  scf.forall (%i) = (0) to (4) step (2) {
    %in = memref.subview %x[%i, 0] [2, 16] [1, 1] : memref<4x16xf32> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    %t = memref.subview %block[%i, 0] [2, 16] [1, 1] : memref<4x16xf32, strided<[16, 1], offset: ?>> to memref<2x16xf32, strided<[16, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%in : memref<2x16xf32, strided<[16, 1], offset: ?>>) outs(%t : memref<2x16xf32, strided<[16, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  } {braid.kernel}
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %block, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x16xf32, strided<[16, 1], offset: ?>>, memref<4x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %other = arith.subi %c1, %pos : index
  %ooff = arith.muli %other, %c4 : index
  %oblock = memref.subview %whole[%ooff, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
  memref.copy %s, %oblock : memref<4x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %whole : memref<8x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// The put sends a reshape of what the kernel wrote (torch-mlir's 3-D
// activations flattened for the matmul): the peer's slot is reshaped back
// and the kernel writes it through the same tiles.
// CHECK-LABEL: func.func @reshaped
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<1x4x16xf32>
// CHECK: %[[PEER:.*]] = xfer.peer_view %{{.*}} : memref<4x16xf32>
// CHECK: %[[PEER3:.*]] = memref.expand_shape %[[PEER]] {{\[\[}}0, 1], [2]] output_shape [1, 4, 16] : memref<4x16xf32> into memref<1x4x16xf32>
// CHECK: scf.forall (%[[I:.*]]) in (4) {
// CHECK: %[[T:.*]] = memref.subview %[[OUT]][0, %[[I]], 0] [1, 1, 16] [1, 1, 1]
// CHECK: %[[PT:.*]] = memref.subview %[[PEER3]][0, %[[I]], 0] [1, 1, 16] [1, 1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[T]], %[[PT]] :
// CHECK: xfer.signal {{.*}} for
func.func @reshaped(%x: memref<1x4x16xf32>) -> memref<4x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x16xf32>
  %out = memref.alloc() : memref<1x4x16xf32>
  scf.forall (%i) in (4) {
    %in = memref.subview %x[0, %i, 0] [1, 1, 16] [1, 1, 1] : memref<1x4x16xf32> to memref<1x1x16xf32, strided<[64, 16, 1], offset: ?>>
    %t = memref.subview %out[0, %i, 0] [1, 1, 16] [1, 1, 1] : memref<1x4x16xf32> to memref<1x1x16xf32, strided<[64, 16, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%in : memref<1x1x16xf32, strided<[64, 16, 1], offset: ?>>) outs(%t : memref<1x1x16xf32, strided<[64, 16, 1], offset: ?>>) {
    ^bb0(%a: f32, %o: f32):
      %m = arith.mulf %a, %a : f32
      linalg.yield %m : f32
    }
  } {braid.kernel}
  %flat = memref.collapse_shape %out [[0, 1], [2]] : memref<1x4x16xf32> into memref<4x16xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %flat, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x16xf32>, memref<4x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<4x16xf32>
  memref.copy %s, %r : memref<4x16xf32> to memref<4x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<4x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// The source is written again after the kernel: the put stays.
// CHECK-LABEL: func.func @written_after
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
func.func @written_after(%x: memref<8x16xf32>, %z: memref<8x16xf32>) -> memref<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x16xf32>
  %out = memref.alloc() : memref<8x16xf32>
  scf.forall (%i) in (8) {
    %in = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %t = memref.subview %out[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    memref.copy %in, %t : memref<1x16xf32, strided<[16, 1], offset: ?>> to memref<1x16xf32, strided<[16, 1], offset: ?>>
  } {braid.kernel}
  memref.copy %z, %out : memref<8x16xf32> to memref<8x16xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x16xf32>, memref<8x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<8x16xf32>
  memref.copy %s, %r : memref<8x16xf32> to memref<8x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<8x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// The kernel writes only the first half of the source (its loop stops at
// 4 of 8 rows): the put stays.
// CHECK-LABEL: func.func @part
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
func.func @part(%x: memref<8x16xf32>) -> memref<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x16xf32>
  %out = memref.alloc() : memref<8x16xf32>
  scf.forall (%i) in (4) {
    %in = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %t = memref.subview %out[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    memref.copy %in, %t : memref<1x16xf32, strided<[16, 1], offset: ?>> to memref<1x16xf32, strided<[16, 1], offset: ?>>
  } {braid.kernel}
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %out, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x16xf32>, memref<8x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<8x16xf32>
  memref.copy %s, %r : memref<8x16xf32> to memref<8x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<8x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// The put sends a view of what the kernel wrote (half of it): it stays.
// CHECK-LABEL: func.func @view_source
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
func.func @view_source(%x: memref<8x16xf32>) -> memref<4x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<4x16xf32>
  %out = memref.alloc() : memref<8x16xf32>
  scf.forall (%i) in (8) {
    %in = memref.subview %x[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %t = memref.subview %out[%i, 0] [1, 16] [1, 1] : memref<8x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    memref.copy %in, %t : memref<1x16xf32, strided<[16, 1], offset: ?>> to memref<1x16xf32, strided<[16, 1], offset: ?>>
  } {braid.kernel}
  %half = memref.subview %out[0, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1]>>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %half, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<4x16xf32, strided<[16, 1]>>, memref<4x16xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %r = memref.alloc() : memref<4x16xf32>
  memref.copy %s, %r : memref<4x16xf32> to memref<4x16xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %r : memref<4x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// A block's partial of a pushed reduce-scatter (push_matmul_rs): nothing
// but its zero fill, the contraction and the put touch the buffer, so the
// fill and the contraction write the peer's slot instead, after the
// credit; the put only raises the data flag.
// CHECK-LABEL: func.func @contraction
// CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0
// CHECK: %[[S:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 0
// CHECK-NEXT: %[[P:.*]] = xfer.peer_view %[[S]] on @tp axes = [0] offset = 1
// CHECK-NEXT: linalg.fill ins(%{{.*}}) outs(%[[P]] :
// CHECK-NEXT: linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[P]] :
// CHECK-NEXT: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = 1 for %[[S]] step = 0
// CHECK-NOT: xfer.put
// CHECK: return
func.func @contraction(%x: memref<8x16xf32>, %w: memref<16x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x32xf32>
  %part = memref.alloc() : memref<8x32xf32>
  linalg.fill ins(%zero : f32) outs(%part : memref<8x32xf32>)
  linalg.matmul ins(%x, %w : memref<8x16xf32>, memref<16x32xf32>) outs(%part : memref<8x32xf32>)
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %part, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x32xf32>, memref<8x32xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %got = memref.alloc() : memref<8x32xf32>
  memref.copy %s, %got : memref<8x32xf32> to memref<8x32xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  memref.dealloc %part : memref<8x32xf32>
  return
}

// -----

shard.grid @tp(shape = 2)

// The partial is read after the put too (or accumulates into what was
// there without a fill): the put stays.
// CHECK-LABEL: func.func @contraction_read
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
// CHECK-LABEL: func.func @contraction_accumulates
// CHECK-NOT: xfer.peer_view
// CHECK: xfer.put
func.func @contraction_read(%x: memref<8x16xf32>, %w: memref<16x32xf32>) -> memref<8x32xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x32xf32>
  %part = memref.alloc() : memref<8x32xf32>
  linalg.fill ins(%zero : f32) outs(%part : memref<8x32xf32>)
  linalg.matmul ins(%x, %w : memref<8x16xf32>, memref<16x32xf32>) outs(%part : memref<8x32xf32>)
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %part, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x32xf32>, memref<8x32xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %got = memref.alloc() : memref<8x32xf32>
  memref.copy %s, %got : memref<8x32xf32> to memref<8x32xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return %part : memref<8x32xf32>
}
func.func @contraction_accumulates(%x: memref<8x16xf32>, %w: memref<16x32xf32>, %part: memref<8x32xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x32xf32>
  linalg.matmul ins(%x, %w : memref<8x16xf32>, memref<16x32xf32>) outs(%part : memref<8x32xf32>)
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p = xfer.put %part, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8x32xf32>, memref<8x32xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  %got = memref.alloc() : memref<8x32xf32>
  memref.copy %s, %got : memref<8x32xf32> to memref<8x32xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  return
}
