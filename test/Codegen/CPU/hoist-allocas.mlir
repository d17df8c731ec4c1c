// RUN: braid-opt %s --braid-hoist-allocas | FileCheck %s

// An outlined kernel's scratch: the static alloca moves from the loop to the
// entry block (one frame slot for every iteration); a dynamic one stays.
// CHECK-LABEL: func.func @kernel
// CHECK-NEXT: %[[BUF:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
// CHECK: scf.for
// CHECK-NOT: memref.alloca() {alignment
// CHECK:   memref.alloca(%arg1) : memref<?xf32>
// CHECK:   linalg.copy ins(%{{.*}}) outs(%[[BUF]]
func.func @kernel(%x: memref<16x64xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c16 step %c4 {
    %buf = memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
    %dyn = memref.alloca(%n) : memref<?xf32>
    %tile = memref.subview %x[%i, 0] [4, 64] [1, 1] : memref<16x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    linalg.copy ins(%tile : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%buf : memref<4x64xf32>)
  }
  return
}
