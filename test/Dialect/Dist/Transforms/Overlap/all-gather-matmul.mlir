// Ring all-gather fused with its consumer: every contraction form, every
// element type, gathered operand on either side, along a parallel or the
// reduction loop, on 1-D and 2-D grids.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// Sequence-parallel: A gathered along its rows (a parallel loop). Each of
// the 4 steps waits for the chunk, forwards it, and computes its rows. The
// accumulator's zero fill moves to the chunks: each fills its own rows
// right before its product (as the serial program does), never the whole
// result up front.
// CHECK-LABEL: func.func @rows_f32
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<16x12xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NOT: linalg.fill
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<32x12xf32>
// CHECK-NOT: linalg.fill
// CHECK: %[[POS:.*]] = shard.process_multi_index on @tp axes = [0] : index
// CHECK: %[[T0:.*]], %[[F0:.*]] = dist.shift_start %[[C0:.*]] on @tp axes = [0] offset = 1
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[EMPTY]]
// CHECK-NEXT: %[[Z0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[S0]] : tensor<8x12xf32>)
// CHECK-NEXT: %[[M0:.*]] = linalg.matmul ins(%[[C0]], %[[W]] : {{.*}}) outs(%[[Z0]] : tensor<8x12xf32>)
// CHECK: %[[A0:.*]] = tensor.insert_slice %[[M0]] into %[[EMPTY]]
// CHECK: %[[R1:.*]] = dist.wait %[[T0]], %[[F0]]
// CHECK: dist.shift_start %[[R1]] on @tp axes = [0] offset = 1
// CHECK: %[[S1:.*]] = tensor.extract_slice %[[A0]]
// CHECK-NEXT: %[[Z1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[S1]] : tensor<8x12xf32>)
// CHECK-NEXT: linalg.matmul ins(%[[R1]], %[[W]] : {{.*}}) outs(%[[Z1]] : tensor<8x12xf32>)
// CHECK-COUNT-2: dist.wait
// CHECK-NOT: dist.shift_start
// CHECK: linalg.matmul
// CHECK-NOT: dist.all_gather
// CHECK: return
func.func @rows_f32(%x: tensor<8x16xf32>, %w: tensor<16x12xf32>) -> tensor<32x12xf32> {
  // expected-remark @+1 {{all_gather fused with 'linalg.matmul' as ring_ag_matmul (4 chunks)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x12xf32>) -> tensor<32x12xf32>
  %y = linalg.matmul ins(%g, %w : tensor<32x16xf32>, tensor<16x12xf32>) outs(%f : tensor<32x12xf32>) -> tensor<32x12xf32>
  return %y : tensor<32x12xf32>
}

// -----

shard.grid @tp(shape = 4)

// Gathered along the reduction dimension (FSDP-style weight gather): each
// chunk adds a partial product into the same accumulator, which is filled
// right before the first chunk's product (after the first transfer).
// CHECK-LABEL: func.func @reduction_bf16
// CHECK: dist.shift_start
// CHECK: %[[FILL:.*]] = linalg.fill
// CHECK-NEXT: %[[P0:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x4xbf16>, tensor<4x24xbf16>) outs(%[[FILL]] : tensor<16x24xf32>)
// CHECK: %[[P1:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x4xbf16>, tensor<4x24xbf16>) outs(%[[P0]] : tensor<16x24xf32>)
// CHECK: %[[P2:.*]] = linalg.matmul {{.*}} outs(%[[P1]] : tensor<16x24xf32>)
// CHECK: %[[P3:.*]] = linalg.matmul {{.*}} outs(%[[P2]] : tensor<16x24xf32>)
// CHECK: return %[[P3]]
func.func @reduction_bf16(%x: tensor<16x4xbf16>, %w: tensor<16x24xbf16>) -> tensor<16x24xf32> {
  // expected-remark @+1 {{all_gather fused with 'linalg.matmul' as ring_ag_matmul (4 chunks)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 1 : tensor<16x4xbf16> -> tensor<16x16xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x24xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x24xf32>) -> tensor<16x24xf32>
  %y = linalg.matmul ins(%g, %w : tensor<16x16xbf16>, tensor<16x24xbf16>) outs(%f : tensor<16x24xf32>) -> tensor<16x24xf32>
  return %y : tensor<16x24xf32>
}

// -----

shard.grid @g2(shape = 2x4)

// The right-hand operand gathered along its columns, on axis 1 of a 2-D
// grid, through a transposed-B matmul (indexing maps) in f16.
// CHECK-LABEL: func.func @transposed_b_f16
// CHECK: shard.process_multi_index on @g2 axes = [1] : index
// CHECK-COUNT-3: dist.shift_start %{{.*}} on @g2 axes = [1] offset = 1 {{.*}}: tensor<6x32xf16> -> tensor<6x32xf16>
func.func @transposed_b_f16(%a: tensor<64x32xf16>, %bt: tensor<6x32xf16>) -> tensor<64x24xf16> {
  // expected-remark @+1 {{all_gather fused with 'linalg.matmul' as ring_ag_matmul (4 chunks)}}
  %g = dist.all_gather %bt on @g2 axes = [1] dim = 0 : tensor<6x32xf16> -> tensor<24x32xf16>
  %zero = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<64x24xf16>
  %f = linalg.fill ins(%zero : f16) outs(%e : tensor<64x24xf16>) -> tensor<64x24xf16>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%a, %g : tensor<64x32xf16>, tensor<24x32xf16>) outs(%f : tensor<64x24xf16>) -> tensor<64x24xf16>
  return %y : tensor<64x24xf16>
}

// -----

shard.grid @g2(shape = 2x4)

// Axis 0 of a 2-D grid: a 2-step ring; batch_matmul gathered along batch.
// CHECK-LABEL: func.func @batch_axis0
// CHECK: shard.process_multi_index on @g2 axes = [0] : index
// CHECK-COUNT-1: dist.shift_start %{{.*}} on @g2 axes = [0] offset = 1
// CHECK-COUNT-2: linalg.batch_matmul
func.func @batch_axis0(%x: tensor<2x8x16xf32>, %w: tensor<4x16x8xf32>) -> tensor<4x8x8xf32> {
  // expected-remark @+1 {{all_gather fused with 'linalg.batch_matmul' as ring_ag_matmul (2 chunks)}}
  %g = dist.all_gather %x on @g2 axes = [0] dim = 0 : tensor<2x8x16xf32> -> tensor<4x8x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %y = linalg.batch_matmul ins(%g, %w : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  return %y : tensor<4x8x8xf32>
}

// -----

shard.grid @tp(shape = 2)

// A matmul-shaped linalg.generic, and linalg.contract.
// CHECK-LABEL: func.func @generic_and_contract
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: linalg.contract
// CHECK: linalg.contract
func.func @generic_and_contract(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %y: tensor<4x8xf32>) -> (tensor<8x6xf32>, tensor<8x6xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x6xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x6xf32>) -> tensor<8x6xf32>
  // expected-remark @+1 {{all_gather fused with 'linalg.generic' as ring_ag_matmul (2 chunks)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%g, %w : tensor<8x8xf32>, tensor<8x6xf32>) outs(%f : tensor<8x6xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %c, %p : f32
    linalg.yield %s : f32
  } -> tensor<8x6xf32>
  // expected-remark @+1 {{all_gather fused with 'linalg.contract' as ring_ag_matmul (2 chunks)}}
  %g2 = dist.all_gather %y on @tp axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %c = linalg.contract indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%g2, %w : tensor<8x8xf32>, tensor<8x6xf32>) outs(%f : tensor<8x6xf32>) -> tensor<8x6xf32>
  return %r, %c : tensor<8x6xf32>, tensor<8x6xf32>
}
