// Collectives along inner dimensions become collectives on contiguous
// blocks plus reshapes and transposes; those already contiguous stay.
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(braid-linearize-collectives))' -verify-diagnostics | FileCheck %s

shard.grid @g(shape = 4)

// CHECK-LABEL: func.func @gather_columns
// CHECK-SAME: (%[[X:.*]]: tensor<64x32xf32>)
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[}}[0, 1], [2]] output_shape [1, 64, 32]
// CHECK: %[[G:.*]] = dist.all_gather %[[E]] on @g axes = [0] dim = 0 {{.*}}: tensor<1x64x32xf32> -> tensor<4x64x32xf32>
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[G]] : tensor<4x64x32xf32>) outs(%{{.*}} : tensor<64x4x32xf32>) permutation = [1, 0, 2]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0], [1, 2]] : tensor<64x4x32xf32> into tensor<64x128xf32>
// CHECK: return %[[C]]
func.func @gather_columns(%x: tensor<64x32xf32>) -> tensor<64x128xf32> {
  %g = dist.all_gather %x on @g axes = [0] dim = 1 : tensor<64x32xf32> -> tensor<64x128xf32>
  return %g : tensor<64x128xf32>
}

// CHECK-LABEL: func.func @scatter_columns_async
// CHECK: tensor.expand_shape {{.*}} output_shape [64, 4, 32]
// CHECK: linalg.transpose {{.*}} permutation = [1, 0, 2]
// CHECK: %[[T:.*]], %[[F:.*]] = dist.reduce_scatter_start %{{.*}} dim = 0 reduce = sum {{.*}}: tensor<4x64x32xbf16> -> tensor<1x64x32xbf16>
// CHECK: %[[W:.*]] = dist.wait %[[T]], %[[F]] : tensor<1x64x32xbf16>
// CHECK: tensor.collapse_shape %[[W]] {{\[}}[0, 1], [2]] : tensor<1x64x32xbf16> into tensor<64x32xbf16>
func.func @scatter_columns_async(%y: tensor<64x128xbf16>) -> tensor<64x32xbf16> {
  %t, %f = dist.reduce_scatter_start %y on @g axes = [0] dim = 1 reduce = sum : tensor<64x128xbf16> -> tensor<64x32xbf16>
  %s = dist.wait %t, %f : tensor<64x32xbf16>
  return %s : tensor<64x32xbf16>
}

// Rows: contiguous already.
// CHECK-LABEL: func.func @rows_untouched
// CHECK-NEXT: dist.all_gather %{{.*}} dim = 0
// CHECK-NEXT: dist.reduce_scatter %{{.*}} dim = 1 reduce = sum {{.*}}: tensor<1x64xf16> -> tensor<1x16xf16>
func.func @rows_untouched(%x: tensor<8x16xf32>, %y: tensor<1x64xf16>) -> (tensor<32x16xf32>, tensor<1x16xf16>) {
  %g = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  %s = dist.reduce_scatter %y on @g axes = [0] dim = 1 reduce = sum : tensor<1x64xf16> -> tensor<1x16xf16>
  return %g, %s : tensor<32x16xf32>, tensor<1x16xf16>
}

// All-to-all splitting rows and concatenating columns.
// CHECK-LABEL: func.func @a2a_rows_to_columns
// CHECK: %[[A:.*]] = dist.all_to_all %{{.*}} split_dim = 0 concat_dim = 0 {{.*}}: tensor<4x2x16xf32> -> tensor<4x2x16xf32>
// CHECK: linalg.transpose ins(%[[A]] : tensor<4x2x16xf32>) outs(%{{.*}} : tensor<2x4x16xf32>) permutation = [1, 0, 2]
// CHECK: tensor.collapse_shape {{.*}} : tensor<2x4x16xf32> into tensor<2x64xf32>
func.func @a2a_rows_to_columns(%x: tensor<8x16xf32>) -> tensor<2x64xf32> {
  %a = dist.all_to_all %x on @g axes = [0] split_dim = 0 concat_dim = 1 : tensor<8x16xf32> -> tensor<2x64xf32>
  return %a : tensor<2x64xf32>
}

// -----

shard.grid @g(shape = 4)

func.func @dynamic(%x: tensor<?x32xf32>) -> tensor<?x128xf32> {
  // expected-error @+1 {{all_gather along a dimension with larger dimensions before it needs static shapes and group size to be lowered}}
  %g = dist.all_gather %x on @g axes = [0] dim = 1 : tensor<?x32xf32> -> tensor<?x128xf32>
  return %g : tensor<?x128xf32>
}
