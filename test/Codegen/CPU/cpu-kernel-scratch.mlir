// RUN: braid-opt %s --split-input-file --braid-cpu-kernel-scratch | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-cpu-kernel-scratch="stack-bytes=1024" | FileCheck %s --check-prefix=SMALL

// A fused kernel's static tile intermediates become allocas in place; a
// dynamically sized one, one inside a nested region, and allocations
// outside kernels stay heap buffers. With a 1 KiB budget the 1 KiB buffer
// fits and the next one does not.
// CHECK-LABEL: func.func @kernel
// CHECK: memref.alloc() : memref<8xf32>
// CHECK: scf.forall
// CHECK:   %[[BUF:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
// CHECK:   memref.alloca() : memref<4x64xf32>
// CHECK:   memref.alloc(%arg2) : memref<?xf32>
// CHECK:   scf.if
// CHECK:     memref.alloc() : memref<2xf32>
// CHECK:   linalg.copy ins(%{{.*}} : memref<4x64xf32, {{.*}}>) outs(%[[BUF]]
// CHECK: } {braid.kernel}
// CHECK: scf.forall
// CHECK:   memref.alloc() : memref<4xf32>
// SMALL-LABEL: func.func @kernel
// SMALL: memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
// SMALL: memref.alloc() : memref<4x64xf32>
func.func @kernel(%x: memref<16x64xf32>, %c: i1, %n: index) {
  %outside = memref.alloc() : memref<8xf32>
  scf.forall (%i) = (0) to (16) step (4) {
    %tile = memref.subview %x[%i, 0] [4, 64] [1, 1] : memref<16x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %buf = memref.alloc() {alignment = 64 : i64} : memref<4x64xf32>
    %second = memref.alloc() : memref<4x64xf32>
    %dyn = memref.alloc(%n) : memref<?xf32>
    scf.if %c {
      %nested = memref.alloc() : memref<2xf32>
    }
    linalg.copy ins(%tile : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%buf : memref<4x64xf32>)
    linalg.copy ins(%buf : memref<4x64xf32>) outs(%second : memref<4x64xf32>)
    linalg.copy ins(%second : memref<4x64xf32>) outs(%tile : memref<4x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  scf.forall (%i) = (0) to (16) step (4) {
    %plain = memref.alloc() : memref<4xf32>
  }
  return
}
