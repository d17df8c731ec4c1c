// RUN: braid-opt %s --braid-cpu-kernel-scratch | FileCheck %s

// A fused kernel's tile intermediates are allocated once, before the
// kernel's loop; a dynamically sized one, one inside a nested region, and
// allocations outside kernels stay where they are.
// CHECK-LABEL: func.func @kernel
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: %[[STATIC:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x64xf32>
// CHECK-NEXT: scf.forall
// CHECK:   memref.alloc(%arg2) : memref<?xf32>
// CHECK:   scf.if
// CHECK:     memref.alloc() : memref<2xf32>
// CHECK:   linalg.copy ins(%{{.*}} : memref<4x64xf32, {{.*}}>) outs(%[[STATIC]]
// CHECK: } {braid.kernel}
// CHECK: scf.forall
// CHECK:   memref.alloc() : memref<4xf32>
func.func @kernel(%x: memref<16x64xf32>, %c: i1, %n: index) {
  %outside = memref.alloc() : memref<8xf32>
  scf.forall (%i) = (0) to (16) step (4) {
    %tile = memref.subview %x[%i, 0] [4, 64] [1, 1] : memref<16x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %buf = memref.alloc() {alignment = 64 : i64} : memref<4x64xf32>
    %dyn = memref.alloc(%n) : memref<?xf32>
    scf.if %c {
      %nested = memref.alloc() : memref<2xf32>
    }
    linalg.copy ins(%tile : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%buf : memref<4x64xf32>)
    linalg.copy ins(%buf : memref<4x64xf32>) outs(%tile : memref<4x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  scf.forall (%i) = (0) to (16) step (4) {
    %plain = memref.alloc() : memref<4xf32>
  }
  return
}

// CHECK-LABEL: func.func @not_kernel
// CHECK: scf.forall
// CHECK:   memref.alloc() : memref<4xf32>
func.func @not_kernel() {
  scf.forall (%i) = (0) to (16) step (4) {
    %plain = memref.alloc() : memref<4xf32>
  }
  return
}
