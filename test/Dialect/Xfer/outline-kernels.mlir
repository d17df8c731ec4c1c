// Each computation on buffers moves into a private function of its own.
// RUN: braid-opt %s --split-input-file --braid-outline-kernels | FileCheck %s

// CHECK: func.func private @main_kernel_0(%{{.*}}: f32, %[[B:.*]]: memref<8x8xf32>)
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[B]] : memref<8x8xf32>)
// CHECK-NEXT: return
// CHECK: func.func private @main_kernel_1(%[[A:.*]]: memref<8x8xf32>, %[[C:.*]]: memref<8x8xf32>, %[[S:.*]]: f32)
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[S]]
// CHECK-LABEL: func.func @main
// CHECK: call @main_kernel_0(%{{.*}}, %{{.*}}) : (f32, memref<8x8xf32>) -> ()
// CHECK: xfer.send
// CHECK: call @main_kernel_1(
// CHECK: xfer.wait
shard.grid @tp(shape = 2)
func.func @main(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 2.0 : f32
  linalg.fill ins(%zero : f32) outs(%b : memref<8x8xf32>)
  %r = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8x8xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %scale : f32
    linalg.yield %m : f32
  }
  xfer.wait %r : !xfer.request
  return
}

// -----

// A loop nest braid-fuse-memory-bound marked is one kernel, whatever it
// holds; the linalg ops in it are not outlined again.
// CHECK-LABEL: func.func private @fused_kernel_0(
// CHECK: scf.forall
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK: } {braid.kernel}
// CHECK-NEXT: return
// CHECK-NOT: func.func private @fused_kernel_1
// CHECK-LABEL: func.func @fused(
// CHECK: call @fused_kernel_0(
// CHECK-NEXT: return
func.func @fused(%x: memref<8x16xf32>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) = (0) to (8) step (4) {
    %xs = memref.subview %x[%i, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
    %ys = memref.subview %y[%i] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%ys : memref<4xf32, strided<[1], offset: ?>>)
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
        ins(%xs : memref<4x16xf32, strided<[16, 1], offset: ?>>) outs(%ys : memref<4xf32, strided<[1], offset: ?>>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
    }
  } {braid.kernel}
  return
}
