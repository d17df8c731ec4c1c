// RUN: braid-opt %s --split-input-file --braid-gpu-kernel-scratch | FileCheck %s

// Intermediates of a fused kernel become allocas (shared memory later);
// buffers outside kernels stay allocations.
// CHECK-LABEL: func.func @scratch
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: scf.forall
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<1x8xf32>
// CHECK-NOT: memref.alloc(
// CHECK: braid.kernel
func.func @scratch(%x: memref<4x8xf32>) -> memref<8xf32> {
  %keep = memref.alloc() : memref<8xf32>
  scf.forall (%r) = (0) to (4) step (1) {
    %t = memref.alloc() {alignment = 64 : i64} : memref<1x8xf32>
    %in = memref.subview %x[%r, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
    linalg.copy ins(%in : memref<1x8xf32, strided<[8, 1], offset: ?>>) outs(%t : memref<1x8xf32>)
  } {braid.kernel}
  return %keep : memref<8xf32>
}
