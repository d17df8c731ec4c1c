// A sum over a group that each rank then slices is one reduce-scatter.
// RUN: braid-opt %s --split-input-file --braid-import-shard | FileCheck %s

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @fused(
// CHECK-SAME: %[[X:.*]]: tensor<16x8xf32>
// CHECK-NEXT: %[[R:.*]] = dist.reduce_scatter %[[X]] on @g axes = [1] dim = 0 reduce = sum : tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]]
func.func @fused(%x: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %r = shard.all_reduce %x on @g grid_axes = [1] : tensor<16x8xf32> -> tensor<16x8xf32>
  %s = shard.all_slice %r on @g grid_axes = [1] slice_axis = 0 : tensor<16x8xf32> -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// The sum has another use: both stay.
// CHECK-LABEL: func.func @shared(
// CHECK: dist.all_reduce
// CHECK: tensor.extract_slice
// CHECK-NOT: dist.reduce_scatter
func.func @shared(%x: tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>) {
  %r = shard.all_reduce %x on @g grid_axes = [1] : tensor<16x8xf32> -> tensor<16x8xf32>
  %s = shard.all_slice %r on @g grid_axes = [1] slice_axis = 0 : tensor<16x8xf32> -> tensor<4x8xf32>
  return %s, %r : tensor<4x8xf32>, tensor<16x8xf32>
}

// A max, or a slice over other axes, is not a reduce-scatter of the sum.
// CHECK-LABEL: func.func @max(
// CHECK: dist.all_reduce %{{.*}} reduce = max
// CHECK: tensor.extract_slice
// CHECK-LABEL: func.func @other_axis(
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1]
// CHECK: shard.process_multi_index on @g axes = [0]
// CHECK: tensor.extract_slice
func.func @max(%x: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %r = shard.all_reduce %x on @g grid_axes = [1] reduction = max : tensor<16x8xf32> -> tensor<16x8xf32>
  %s = shard.all_slice %r on @g grid_axes = [1] slice_axis = 0 : tensor<16x8xf32> -> tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}
func.func @other_axis(%x: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %r = shard.all_reduce %x on @g grid_axes = [1] : tensor<16x8xf32> -> tensor<16x8xf32>
  %s = shard.all_slice %r on @g grid_axes = [0] slice_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}
