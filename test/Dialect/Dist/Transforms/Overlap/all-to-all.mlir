// Expert-parallel all-to-all pipelined per peer with the expert matmul.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s

shard.grid @ep(shape = 4)

// Dispatch: all three exchanges are posted first, the block this rank
// keeps is computed at once, then each arriving block in turn.
// CHECK-LABEL: func.func @dispatch
// CHECK: %[[POS:.*]] = shard.process_multi_index on @ep axes = [0] : index
// CHECK: %[[T1:.*]], %[[F1:.*]] = dist.shift_start %{{.*}} on @ep axes = [0] offset = 1 {dist.step = 1 : i64{{.*}}} : tensor<2x16xbf16>
// CHECK: %[[T2:.*]], %[[F2:.*]] = dist.shift_start %{{.*}} on @ep axes = [0] offset = 2 {{.*}}: tensor<2x16xbf16>
// CHECK: %[[T3:.*]], %[[F3:.*]] = dist.shift_start %{{.*}} on @ep axes = [0] offset = 3 {{.*}}: tensor<2x16xbf16>
// CHECK: linalg.matmul
// CHECK: %[[B1:.*]] = dist.wait %[[T1]], %[[F1]]
// CHECK: linalg.matmul ins(%[[B1]],
// CHECK: %[[B2:.*]] = dist.wait %[[T2]], %[[F2]]
// CHECK: linalg.matmul ins(%[[B2]],
// CHECK: %[[B3:.*]] = dist.wait %[[T3]], %[[F3]]
// CHECK: linalg.matmul ins(%[[B3]],
// CHECK-NOT: dist.all_to_all
func.func @dispatch(%x: tensor<8x16xbf16>, %w: tensor<16x8xbf16>) -> tensor<8x8xf32> {
  // expected-remark @+1 {{all_to_all fused with 'linalg.matmul' as a2a_dispatch (4 chunks)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x16xbf16> -> tensor<8x16xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = linalg.matmul ins(%d, %w : tensor<8x16xbf16>, tensor<16x8xbf16>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

shard.grid @ep(shape = 2x4)

// Combine on axis 1 of a 2-D grid: each peer's block leaves as soon as it
// is computed, the own block last.
// CHECK-LABEL: func.func @combine
// CHECK: linalg.matmul
// CHECK: dist.shift_start %{{.*}} on @ep axes = [1] offset = 1 {{.*}}: tensor<2x8xf16>
// CHECK: linalg.matmul
// CHECK: dist.shift_start %{{.*}} on @ep axes = [1] offset = 2
// CHECK: linalg.matmul
// CHECK: dist.shift_start %{{.*}} on @ep axes = [1] offset = 3
// CHECK: linalg.matmul
// CHECK-COUNT-3: dist.wait
func.func @combine(%x: tensor<8x16xf16>, %w: tensor<16x8xf16>) -> tensor<8x8xf16> {
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<8x8xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<8x8xf16>) -> tensor<8x8xf16>
  %y = linalg.matmul ins(%x, %w : tensor<8x16xf16>, tensor<16x8xf16>) outs(%f : tensor<8x8xf16>) -> tensor<8x8xf16>
  // expected-remark @+1 {{all_to_all fused with 'linalg.matmul' as a2a_combine (4 chunks)}}
  %c = dist.all_to_all %y on @ep axes = [1] split_dim = 0 concat_dim = 0 : tensor<8x8xf16> -> tensor<8x8xf16>
  return %c : tensor<8x8xf16>
}

// -----

shard.grid @ep(shape = 4)

// The batch of a batch_matmul indexes the experts.
// CHECK-LABEL: func.func @batched
// CHECK-COUNT-4: linalg.batch_matmul
func.func @batched(%x: tensor<4x2x8xf32>, %w: tensor<4x8x8xf32>) -> tensor<4x2x8xf32> {
  // expected-remark @+1 {{all_to_all fused with 'linalg.batch_matmul' as a2a_dispatch (4 chunks)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 0 concat_dim = 0 : tensor<4x2x8xf32> -> tensor<4x2x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  %y = linalg.batch_matmul ins(%d, %w : tensor<4x2x8xf32>, tensor<4x8x8xf32>) outs(%f : tensor<4x2x8xf32>) -> tensor<4x2x8xf32>
  return %y : tensor<4x2x8xf32>
}
