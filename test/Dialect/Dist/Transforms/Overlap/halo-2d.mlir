// A tile haloed along both dimensions, as braid-import-shard writes
// shard.update_halo: the columns first, then the rows in three pieces each
// way (their interior columns from the tile before any exchange, then the
// corners from the tile the column exchange filled). Both exchanges' bulk
// starts before the convolution's interior, which runs while they travel;
// only the corners wait for the column exchange, the two of each direction
// packed into one message.
// RUN: braid-opt %s --braid-pipeline="stop-after=dist overlap=force" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer overlap=force check-schedule=1" -o /dev/null 2>/dev/null

// CHECK-LABEL: func.func @main
// CHECK: dist.shift_start %{{.*}} on @g axes = [1] offset = -1 : tensor<8x1xf32>
// CHECK: dist.shift_start %{{.*}} on @g axes = [1] offset = 1 : tensor<8x1xf32>
// CHECK: dist.shift_start %{{.*}} on @g axes = [0] offset = -1 : tensor<1x6xf32>
// CHECK: dist.shift_start %{{.*}} on @g axes = [0] offset = 1 : tensor<1x6xf32>
// CHECK-NOT: dist.wait
// CHECK: linalg.conv_2d ins(%{{.*}}, %arg1 : tensor<8x6xf32>, tensor<3x3xf32>) outs(%{{.*}} : tensor<6x4xf32>)
// CHECK-COUNT-4: dist.wait
// CHECK-COUNT-2: dist.shift %{{.*}} on @g axes = [0] offset = {{-?}}1 : tensor<1x2xf32>
// CHECK-COUNT-4: linalg.conv_2d
shard.grid @g(shape = 2x2)
func.func @main(%x: tensor<8x6xf32>, %w: tensor<3x3xf32>) -> tensor<8x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<10x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<10x8xf32>) -> tensor<10x8xf32>
  %d = tensor.insert_slice %x into %f[1, 1] [8, 6] [1, 1] : tensor<8x6xf32> into tensor<10x8xf32>
  %h = shard.update_halo %d on @g split_axes = [[0], [1]] halo_sizes = [1, 1, 1, 1] : tensor<10x8xf32>
  %y0 = tensor.empty() : tensor<8x6xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%y0 : tensor<8x6xf32>) -> tensor<8x6xf32>
  %y = linalg.conv_2d ins(%h, %w : tensor<10x8xf32>, tensor<3x3xf32>) outs(%yz : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}
