// Round trip of every xfer op in custom form, generic form and bytecode.
// RUN: braid-opt %s | braid-opt | FileCheck %s
// RUN: braid-opt %s --mlir-print-op-generic | braid-opt | FileCheck %s
// RUN: braid-opt %s --emit-bytecode | braid-opt | FileCheck %s

shard.grid @tp(shape = 2x4)

// CHECK-LABEL: func.func @transfers
func.func @transfers(%a: memref<8x16xf32>, %b: memref<8x16xf32>, %g: memref<64x16xf32>,
                     %s: memref<1x16xf32>, %h: memref<4x2x16xbf16>, %i: memref<4x2x16xbf16>,
                     %v: memref<8x16xf32, strided<[16, 1], offset: ?>>) {
  // CHECK: %[[S:.*]] = xfer.send %{{.*}} on @tp axes = [1] offset = 1 step = 3 : memref<8x16xf32>
  // CHECK: %[[R:.*]] = xfer.recv %{{.*}} on @tp axes = [1] offset = -1 step = 3 : memref<8x16xf32, strided<[16, 1], offset: ?>>
  %0 = xfer.send %a on @tp axes = [1] offset = 1 step = 3 : memref<8x16xf32>
  %1 = xfer.recv %v on @tp axes = [1] offset = -1 step = 3 : memref<8x16xf32, strided<[16, 1], offset: ?>>
  // CHECK: xfer.all_gather %{{.*}}, %{{.*}} on @tp axes = [0, 1] step = 4 : memref<8x16xf32>, memref<64x16xf32>
  %2 = xfer.all_gather %a, %g on @tp axes = [0, 1] step = 4 : memref<8x16xf32>, memref<64x16xf32>
  // CHECK: xfer.reduce_scatter %{{.*}}, %{{.*}} on @tp axes = [0] reduce = sum step = 5 : memref<8x16xf32>, memref<4x16xf32>
  %t = memref.alloc() : memref<4x16xf32>
  %3 = xfer.reduce_scatter %b, %t on @tp axes = [0] reduce = sum step = 5 : memref<8x16xf32>, memref<4x16xf32>
  // CHECK: xfer.all_reduce %{{.*}}, %{{.*}} on @tp axes = [1] reduce = max step = 6 : memref<1x16xf32>, memref<1x16xf32>
  %4 = xfer.all_reduce %s, %s on @tp axes = [1] reduce = max step = 6 : memref<1x16xf32>, memref<1x16xf32>
  // CHECK: xfer.all_to_all %{{.*}}, %{{.*}} on @tp axes = [1] step = 7 : memref<4x2x16xbf16>, memref<4x2x16xbf16>
  %5 = xfer.all_to_all %h, %i on @tp axes = [1] step = 7 : memref<4x2x16xbf16>, memref<4x2x16xbf16>
  // CHECK: xfer.broadcast %{{.*}}, %{{.*}} on @tp axes = [0] root = [1] step = 8 : memref<1x16xf32>, memref<1x16xf32>
  %6 = xfer.broadcast %s, %s on @tp axes = [0] root = [1] step = 8 : memref<1x16xf32>, memref<1x16xf32>
  // CHECK: xfer.wait %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request
  xfer.wait %0, %1, %2, %3, %4, %5, %6 : !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request, !xfer.request
  return
}

// CHECK-LABEL: func.func @symmetric
func.func @symmetric(%a: memref<8x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: %[[SLOT:.*]] = xfer.symmetric_alloc on @tp axes = [1] site = 0 : memref<8x16xf32>
  // CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [1] site = 1 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [1] site = 0 : memref<8x16xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [1] site = 1 : memref<2xi32>
  // CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 1 step = 2 : memref<2xi32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 2 : memref<2xi32>
  // CHECK: xfer.put %{{.*}}, %[[SLOT]] on @tp axes = [1] offset = 1 signal %[[FLAGS]][%{{.*}}] step = 2 : memref<8x16xf32>, memref<8x16xf32>, memref<2xi32>
  %0 = xfer.put %a, %slot on @tp axes = [1] offset = 1 signal %flags[%c0] step = 2 : memref<8x16xf32>, memref<8x16xf32>, memref<2xi32>
  // CHECK: xfer.put %{{.*}}, %{{.*}} on @tp axes = [1] offset = -1 step = 3 : memref<4x16xf32>, memref<4x16xf32, strided<[16, 1]>>
  %half = memref.subview %a[0, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1]>>
  %top = memref.subview %slot[0, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1]>>
  %h = memref.alloc() : memref<4x16xf32>
  %1 = xfer.put %h, %top on @tp axes = [1] offset = -1 step = 3 : memref<4x16xf32>, memref<4x16xf32, strided<[16, 1]>>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  // CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 0 step = 2 : memref<2xi32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 2 : memref<2xi32>
  // CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [1] offset = -1 step = 2 : memref<2xi32>
  // CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [1] offset = 0 add = 3 step = 2 : memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [1] offset = -1 step = 2 : memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [1] offset = 0 add = 3 step = 2 : memref<2xi32>
  // CHECK: xfer.peer_view %[[SLOT]] on @tp axes = [1] offset = 2 : memref<8x16xf32>
  %peer = xfer.peer_view %slot on @tp axes = [1] offset = 2 : memref<8x16xf32>
  memref.copy %peer, %a : memref<8x16xf32> to memref<8x16xf32>
  memref.dealloc %h : memref<4x16xf32>
  return
}

// Flags touched by kernels (braid-kernel-signals).
// CHECK-LABEL: func.func @kernel_flags
func.func @kernel_flags(%a: memref<4x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [1] site = 0 : memref<2xi32>
  // CHECK: %[[COUNT:.*]] = xfer.symmetric_alloc on @tp axes = [1] site = 1 : memref<1xi32>
  // CHECK: %[[SLOT:.*]] = xfer.symmetric_alloc on @tp axes = [1] site = 2 : memref<4x16xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [1] site = 0 : memref<2xi32>
  %count = xfer.symmetric_alloc on @tp axes = [1] site = 1 : memref<1xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [1] site = 2 : memref<4x16xf32>
  // CHECK: %[[E:.*]] = xfer.flag_epoch %[[FLAGS]][%{{.*}}] slack = 1 step = 4 : memref<2xi32>
  %e = xfer.flag_epoch %flags[%c0] slack = 1 step = 4 : memref<2xi32>
  // CHECK: %[[PEER:.*]] = xfer.peer_view %[[FLAGS]] on @tp axes = [1] offset = 1 : memref<2xi32>
  %peer = xfer.peer_view %flags on @tp axes = [1] offset = 1 : memref<2xi32>
  scf.forall (%i) in (4) {
    // CHECK: xfer.kernel_wait %[[FLAGS]][%{{.*}}] until %[[E]] step = 4 : memref<2xi32>
    xfer.kernel_wait %flags[%c0] until %e step = 4 : memref<2xi32>
    // CHECK: xfer.kernel_signal %[[PEER]][%{{.*}}] arrivals %[[COUNT]][%{{.*}}] for %[[SLOT]] step = 4 : memref<2xi32>, memref<1xi32>, memref<4x16xf32>
    // CHECK: xfer.kernel_signal %[[PEER]][%{{.*}}] arrivals %[[COUNT]][%{{.*}}] add = 2 step = 5 : memref<2xi32>, memref<1xi32>
    xfer.kernel_signal %peer[%c1] arrivals %count[%c0] for %slot step = 4 : memref<2xi32>, memref<1xi32>, memref<4x16xf32>
    xfer.kernel_signal %peer[%c0] arrivals %count[%c0] add = 2 step = 5 : memref<2xi32>, memref<1xi32>
  } {braid.kernel}
  // A kernel of GEMM segments polls in a case of its switch.
  // CHECK: scf.index_switch
  // CHECK: case 1 {
  // CHECK-NEXT: xfer.kernel_wait %[[FLAGS]][%{{.*}}] until %[[E]] step = 6 : memref<2xi32>
  scf.forall (%s) in (2) {
    scf.index_switch %s
    case 1 {
      xfer.kernel_wait %flags[%c0] until %e step = 6 : memref<2xi32>
      scf.yield
    }
    default {
    }
  } {braid.kernel, braid.gemm_segments = 96 : i64}
  return
}
