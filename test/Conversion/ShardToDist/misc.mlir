// The remaining collectives and conversions: shift (rotating or not),
// broadcast, all_slice, average, dynamic shapes.
// RUN: braid-opt %s -split-input-file --braid-import-shard | FileCheck %s

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @shift
// CHECK: dist.shift %{{.*}} on @g axes = [1] offset = 1 : tensor<64xf32> -> tensor<64xf32>
// CHECK: dist.shift %{{.*}} on @g axes = [0] offset = -1 : tensor<64xf32> -> tensor<64xf32>
func.func @shift(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %0 = shard.shift %x on @g grid_axes = [1] shift_axis = 1 offset = 1 rotate : tensor<64xf32> -> tensor<64xf32>
  %1 = shard.shift %x on @g grid_axes = [0, 1] shift_axis = 0 offset = -1 : tensor<64xf32> -> tensor<64xf32>
  return %0, %1 : tensor<64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func.func @broadcast
// CHECK: dist.broadcast %{{.*}} on @g axes = [0, 1] root = [1, 2] : tensor<16x16xbf16> -> tensor<16x16xbf16>
func.func @broadcast(%x: tensor<16x16xbf16>) -> tensor<16x16xbf16> {
  %0 = shard.broadcast %x on @g grid_axes = [0, 1] root = [1, 2] : (tensor<16x16xbf16>) -> tensor<16x16xbf16>
  return %0 : tensor<16x16xbf16>
}

// all_slice moves nothing: a slice at this rank's row-major position in
// the group over axes [0, 1] (position = i0 * 4 + i1).
// CHECK-LABEL: func.func @all_slice
// CHECK-SAME: (%[[X:.*]]: tensor<64x8xf32>)
// CHECK: %[[I:.*]]:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
// CHECK: %[[P0:.*]] = arith.muli %{{.*}}, %{{.*}} : index
// CHECK: %[[P1:.*]] = arith.addi %[[P0]], %[[I]]#0
// CHECK: %[[C4:.*]] = arith.constant 4 : index
// CHECK: %[[P2:.*]] = arith.muli %[[P1]], %[[C4]] : index
// CHECK: %[[P3:.*]] = arith.addi %[[P2]], %[[I]]#1
// CHECK: %[[C8:.*]] = arith.constant 8 : index
// CHECK: %[[OFF:.*]] = arith.muli %[[P3]], %[[C8]] : index
// CHECK: tensor.extract_slice %[[X]][%[[OFF]], 0] [8, 8] [1, 1] : tensor<64x8xf32> to tensor<8x8xf32>
func.func @all_slice(%x: tensor<64x8xf32>) -> tensor<8x8xf32> {
  %0 = shard.all_slice %x on @g grid_axes = [0, 1] slice_axis = 0 : tensor<64x8xf32> -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// An average is a sum divided by the group size.
// CHECK-LABEL: func.func @average
// CHECK: %[[S:.*]] = dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum
// CHECK: %[[N:.*]] = arith.constant dense<4.000000e+00> : tensor<32xf32>
// CHECK: arith.divf %[[S]], %[[N]] : tensor<32xf32>
// CHECK: dist.reduce_scatter %{{.*}} on @g axes = [0] dim = 0 reduce = sum : tensor<32xi32> -> tensor<16xi32>
// CHECK: arith.constant dense<2> : tensor<16xi32>
// CHECK: arith.divsi
func.func @average(%x: tensor<32xf32>, %i: tensor<32xi32>) -> (tensor<32xf32>, tensor<16xi32>) {
  %0 = shard.all_reduce %x on @g grid_axes = [1] reduction = average : tensor<32xf32> -> tensor<32xf32>
  %1 = shard.reduce_scatter %i on @g grid_axes = [0] reduction = average scatter_axis = 0 : tensor<32xi32> -> tensor<16xi32>
  return %0, %1 : tensor<32xf32>, tensor<16xi32>
}

// Dynamic tensor dimensions pass through.
// CHECK-LABEL: func.func @dynamic
// CHECK: dist.all_gather %{{.*}} on @g axes = [1] dim = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
func.func @dynamic(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  %0 = shard.all_gather %x on @g grid_axes = [1] gather_axis = 0 : tensor<?x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// Bitwise reductions on integers.
// CHECK-LABEL: func.func @bitwise
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1] reduce = bitor : tensor<8xi32> -> tensor<8xi32>
func.func @bitwise(%x: tensor<8xi32>) -> tensor<8xi32> {
  %0 = shard.all_reduce %x on @g grid_axes = [1] reduction = bitwise_or : tensor<8xi32> -> tensor<8xi32>
  return %0 : tensor<8xi32>
}
