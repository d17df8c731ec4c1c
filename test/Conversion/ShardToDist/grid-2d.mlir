// A 2-D grid (data parallel x tensor parallel): collectives on either axis
// keep their axis.
// RUN: braid-opt %s --braid-import-shard | FileCheck %s

shard.grid @g(shape = 2x4)

// CHECK-LABEL: func.func @two_axes
// CHECK: dist.all_gather %{{.*}} on @g axes = [1] dim = 0 : tensor<128x1024xbf16> -> tensor<512x1024xbf16>
// CHECK: dist.reduce_scatter %{{.*}} on @g axes = [1] dim = 0 reduce = sum : tensor<512x1024xf32> -> tensor<128x1024xf32>
// CHECK: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
// CHECK: dist.all_reduce %{{.*}} on @g axes = [0, 1] reduce = max : tensor<1xf32> -> tensor<1xf32>
func.func @two_axes(%x: tensor<128x1024xbf16>, %p: tensor<512x1024xf32>, %grad: tensor<1024x1024xf32>, %norm: tensor<1xf32>)
    -> (tensor<512x1024xbf16>, tensor<128x1024xf32>, tensor<1024x1024xf32>, tensor<1xf32>) {
  %0 = shard.all_gather %x on @g grid_axes = [1] gather_axis = 0 : tensor<128x1024xbf16> -> tensor<512x1024xbf16>
  %1 = shard.reduce_scatter %p on @g grid_axes = [1] scatter_axis = 0 : tensor<512x1024xf32> -> tensor<128x1024xf32>
  %2 = shard.all_reduce %grad on @g grid_axes = [0] reduction = sum : tensor<1024x1024xf32> -> tensor<1024x1024xf32>
  %3 = shard.all_reduce %norm on @g grid_axes = [0, 1] reduction = max : tensor<1xf32> -> tensor<1xf32>
  return %0, %1, %2, %3 : tensor<512x1024xbf16>, tensor<128x1024xf32>, tensor<1024x1024xf32>, tensor<1xf32>
}
