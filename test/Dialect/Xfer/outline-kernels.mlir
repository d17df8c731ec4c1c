// Each computation on buffers moves into a private function of its own.
// RUN: braid-opt %s --braid-outline-kernels | FileCheck %s

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
