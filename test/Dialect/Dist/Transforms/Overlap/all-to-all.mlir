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

// -----

shard.grid @ep(shape = 4)

// The dispatch of HuggingFace experts with a capacity per rank's tokens:
// the blocks that arrive ([1, 2, 3, 8], one per peer along the
// concatenated dimension) go through the same transpose and collapse, and
// each computes its 3 rows of the experts' batch matmul.
// CHECK-LABEL: func.func @through_views
// CHECK-COUNT-3: dist.shift_start
// CHECK: %[[T0:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x2x3x8xf32>) outs(%{{.*}} : tensor<2x1x3x8xf32>) permutation = [1, 0, 2, 3]
// CHECK: %[[R0:.*]] = tensor.collapse_shape %[[T0]] {{\[}}[0], [1, 2], [3]] : tensor<2x1x3x8xf32> into tensor<2x3x8xf32>
// CHECK: linalg.batch_matmul ins(%[[R0]], %{{.*}} : tensor<2x3x8xf32>, tensor<2x8x6xf32>) outs(%{{.*}} : tensor<2x3x6xf32>)
// CHECK: %[[B1:.*]] = dist.wait
// CHECK: %[[T1:.*]] = linalg.transpose ins(%[[B1]] : tensor<1x2x3x8xf32>)
// CHECK: tensor.collapse_shape %[[T1]]
// CHECK: linalg.batch_matmul
// CHECK-COUNT-2: dist.wait
// CHECK-NOT: dist.all_to_all
func.func @through_views(%x: tensor<1x8x3x8xf32>, %w: tensor<2x8x6xf32>) -> tensor<2x12x6xf32> {
  // expected-remark @+1 {{all_to_all fused with 'linalg.batch_matmul' as a2a_dispatch (4 chunks)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 1 concat_dim = 0 : tensor<1x8x3x8xf32> -> tensor<4x2x3x8xf32>
  %te = tensor.empty() : tensor<2x4x3x8xf32>
  %t = linalg.transpose ins(%d : tensor<4x2x3x8xf32>) outs(%te : tensor<2x4x3x8xf32>) permutation = [1, 0, 2, 3]
  %r = tensor.collapse_shape %t [[0], [1, 2], [3]] : tensor<2x4x3x8xf32> into tensor<2x12x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x12x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x12x6xf32>) -> tensor<2x12x6xf32>
  %y = linalg.batch_matmul ins(%r, %w : tensor<2x12x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x12x6xf32>) -> tensor<2x12x6xf32>
  return %y : tensor<2x12x6xf32>
}

// -----

shard.grid @ep(shape = 2)

// A collapse that mixes the concatenated dimension under a larger one
// ([[0, 1], ...]: a peer's block is not contiguous in the rows): kept whole,
// and the remark says why.
// CHECK-LABEL: func.func @interleaved
// CHECK: dist.all_to_all
func.func @interleaved(%x: tensor<4x2x8xf32>, %w: tensor<8x6xf32>) -> tensor<8x6xf32> {
  // expected-remark-re @+1 {{all_to_all {{.*}}neither feeds nor is fed by a linalg computation per block{{.*}}}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 0 concat_dim = 1 : tensor<4x2x8xf32> -> tensor<2x4x8xf32>
  %r = tensor.collapse_shape %d [[0, 1], [2]] : tensor<2x4x8xf32> into tensor<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  %y = linalg.matmul ins(%r, %w : tensor<8x8xf32>, tensor<8x6xf32>) outs(%f : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %y : tensor<8x6xf32>
}

// -----

shard.grid @ep(shape = 2)

// Two contractions read the same arriving rows (HuggingFace's gate and up
// projections); the second's weight is transposed after the first. Both
// are computed on each block as it arrives, the weight's transpose moved
// before them.
// CHECK-LABEL: func.func @two_feeds
// CHECK: %[[W2T:.*]] = linalg.transpose ins(%arg2
// CHECK: dist.shift_start
// CHECK: linalg.batch_matmul ins(%{{.*}}, %arg1
// CHECK: linalg.batch_matmul ins(%{{.*}}, %[[W2T]]
// CHECK: dist.wait
// CHECK: linalg.batch_matmul ins(%{{.*}}, %arg1
// CHECK: linalg.batch_matmul ins(%{{.*}}, %[[W2T]]
// CHECK-NOT: dist.all_to_all
func.func @two_feeds(%x: tensor<1x4x3x8xf32>, %w1: tensor<2x8x6xf32>, %w2: tensor<2x6x8xf32>) -> (tensor<2x6x6xf32>, tensor<2x6x6xf32>) {
  // expected-remark @+1 {{all_to_all fused with 'linalg.batch_matmul' as a2a_dispatch (2 chunks)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 1 concat_dim = 0 : tensor<1x4x3x8xf32> -> tensor<2x2x3x8xf32>
  %te = tensor.empty() : tensor<2x2x3x8xf32>
  %t = linalg.transpose ins(%d : tensor<2x2x3x8xf32>) outs(%te : tensor<2x2x3x8xf32>) permutation = [1, 0, 2, 3]
  %r = tensor.collapse_shape %t [[0], [1, 2], [3]] : tensor<2x2x3x8xf32> into tensor<2x6x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  %y1 = linalg.batch_matmul ins(%r, %w1 : tensor<2x6x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  %we = tensor.empty() : tensor<2x8x6xf32>
  %w2t = linalg.transpose ins(%w2 : tensor<2x6x8xf32>) outs(%we : tensor<2x8x6xf32>) permutation = [0, 2, 1]
  %y2 = linalg.batch_matmul ins(%r, %w2t : tensor<2x6x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  return %y1, %y2 : tensor<2x6x6xf32>, tensor<2x6x6xf32>
}

// -----

shard.grid @ep(shape = 4)

// The combine of HuggingFace experts with a capacity per rank's tokens: the
// experts' outputs [2, 12, 6] (4 ranks x 3 rows each) expanded to
// [experts, ranks, capacity, features] and transposed to send each rank its
// rows. Each peer's 3 rows are computed, expanded and transposed as a block
// and leave at once.
// CHECK-LABEL: func.func @combine_through_views
// CHECK: %[[Y1:.*]] = linalg.batch_matmul {{.*}} -> tensor<2x3x6xf32>
// CHECK: %[[E1:.*]] = tensor.expand_shape %[[Y1]] {{\[}}[0], [1, 2], [3]] output_shape [2, 1, 3, 6] : tensor<2x3x6xf32> into tensor<2x1x3x6xf32>
// CHECK: %[[T1:.*]] = linalg.transpose ins(%[[E1]] : tensor<2x1x3x6xf32>) outs(%{{.*}} : tensor<1x2x3x6xf32>) permutation = [1, 0, 2, 3]
// CHECK: dist.shift_start %[[T1]] on @ep axes = [0] offset = 1
// CHECK-COUNT-2: dist.shift_start
// CHECK: linalg.batch_matmul
// CHECK-COUNT-3: dist.wait
// CHECK-NOT: dist.all_to_all
func.func @combine_through_views(%h: tensor<2x12x8xf32>, %w: tensor<2x8x6xf32>) -> tensor<1x8x3x6xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x12x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x12x6xf32>) -> tensor<2x12x6xf32>
  %y = linalg.batch_matmul ins(%h, %w : tensor<2x12x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x12x6xf32>) -> tensor<2x12x6xf32>
  %x = tensor.expand_shape %y [[0], [1, 2], [3]] output_shape [2, 4, 3, 6] : tensor<2x12x6xf32> into tensor<2x4x3x6xf32>
  %te = tensor.empty() : tensor<4x2x3x6xf32>
  %t = linalg.transpose ins(%x : tensor<2x4x3x6xf32>) outs(%te : tensor<4x2x3x6xf32>) permutation = [1, 0, 2, 3]
  // expected-remark @+1 {{all_to_all fused with 'linalg.batch_matmul' as a2a_combine (4 chunks)}}
  %c = dist.all_to_all %t on @ep axes = [0] split_dim = 0 concat_dim = 1 : tensor<4x2x3x6xf32> -> tensor<1x8x3x6xf32>
  return %c : tensor<1x8x3x6xf32>
}

// -----

shard.grid @ep(shape = 2)

func.func private @load_weight() -> tensor<2x8x6xf32>

// The second contraction's weight comes from a call after the first
// contraction: it cannot be moved before it, so the rows are not computed
// per peer, and the remark says why.
// CHECK-LABEL: func.func @weight_after
// CHECK: dist.all_to_all
func.func @weight_after(%x: tensor<1x4x3x8xf32>, %w1: tensor<2x8x6xf32>) -> (tensor<2x6x6xf32>, tensor<2x6x6xf32>) {
  // expected-remark-re @+1 {{all_to_all {{.*}}'linalg.batch_matmul' reads a value computed with side effects after 'linalg.batch_matmul'{{.*}}}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 1 concat_dim = 0 : tensor<1x4x3x8xf32> -> tensor<2x2x3x8xf32>
  %te = tensor.empty() : tensor<2x2x3x8xf32>
  %t = linalg.transpose ins(%d : tensor<2x2x3x8xf32>) outs(%te : tensor<2x2x3x8xf32>) permutation = [1, 0, 2, 3]
  %r = tensor.collapse_shape %t [[0], [1, 2], [3]] : tensor<2x2x3x8xf32> into tensor<2x6x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x6x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  %y1 = linalg.batch_matmul ins(%r, %w1 : tensor<2x6x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  %w2 = func.call @load_weight() : () -> tensor<2x8x6xf32>
  %y2 = linalg.batch_matmul ins(%r, %w2 : tensor<2x6x8xf32>, tensor<2x8x6xf32>) outs(%f : tensor<2x6x6xf32>) -> tensor<2x6x6xf32>
  return %y1, %y2 : tensor<2x6x6xf32>, tensor<2x6x6xf32>
}
