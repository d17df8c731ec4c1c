// RUN: braid-opt %s --braid-tile-kernels | FileCheck %s

// An outlined kernel of one row-tile loop: a companion runs tiles
// [begin, end) (tile t is row lb + t * step), and the kernel calls it for
// its ceil((ub - lb) / step) tiles.
// CHECK-LABEL: func.func private @k_tiles(
// CHECK-SAME: %[[B:.*]]: index, %[[E:.*]]: index, %[[X2:.*]]: memref<10x64xf32>, %[[S2:.*]]: f32) attributes {braid.tiles}
// CHECK: scf.for %[[T:.*]] = %[[B]] to %[[E]] step %{{.*}} {
// CHECK:   %[[M:.*]] = arith.muli %[[T]], %{{.*}} : index
// CHECK:   %[[ROW:.*]] = arith.addi %{{.*}}, %[[M]] : index
// CHECK:   memref.subview %[[X2]][%[[ROW]], 0]
// CHECK:   linalg.fill ins(%[[S2]] : f32)
// CHECK-LABEL: func.func private @k(
// CHECK-SAME: %[[X:.*]]: memref<10x64xf32>, %[[S:.*]]: f32)
// CHECK: %[[N:.*]] = arith.ceildivsi %{{.*}}, %c4 : index
// CHECK: call @k_tiles(%{{.*}}, %[[N]], %[[X]], %[[S]])
// CHECK-NOT: scf.forall
// CHECK: return
func.func private @k(%x: memref<10x64xf32>, %s: f32) {
  scf.forall (%i) = (0) to (10) step (4) {
    %n = affine.min affine_map<(d0) -> (4, -d0 + 10)>(%i)
    %tile = memref.subview %x[%i, 0] [%n, 64] [1, 1] : memref<10x64xf32> to memref<?x64xf32, strided<[64, 1], offset: ?>>
    linalg.fill ins(%s : f32) outs(%tile : memref<?x64xf32, strided<[64, 1], offset: ?>>)
  } {braid.kernel}
  return
}

// Not a kernel loop (no braid.kernel), a 2-D loop and a schedule stay.
// CHECK-LABEL: func.func private @plain
// CHECK: scf.forall
// CHECK-LABEL: func.func private @two_d
// CHECK: scf.forall
// CHECK-NOT: _tiles
func.func private @plain(%x: memref<8xf32>, %s: f32) {
  scf.forall (%i) = (0) to (8) step (4) {
    %tile = memref.subview %x[%i] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.fill ins(%s : f32) outs(%tile : memref<4xf32, strided<[1], offset: ?>>)
  }
  return
}
func.func private @two_d(%x: memref<8x8xf32>, %s: f32) {
  scf.forall (%i, %j) = (0, 0) to (8, 8) step (4, 4) {
    %tile = memref.subview %x[%i, %j] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1], offset: ?>>
    linalg.fill ins(%s : f32) outs(%tile : memref<4x4xf32, strided<[8, 1], offset: ?>>)
  } {braid.kernel}
  return
}
