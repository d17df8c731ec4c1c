// Ring reduce-scatter fused with the contraction producing its input.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force --canonicalize -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// Scatter along the rows of a row-parallel matmul (f32): at each step the
// partial block for the next peer is computed, the arrived partial sum is
// added, and the sum goes on. Four partial matmuls on 8-row blocks, three
// transfers, no reduce_scatter left.
// CHECK-LABEL: func.func @rows
// CHECK: %[[POS:.*]] = shard.process_multi_index on @tp axes = [0] : index
// CHECK: %[[P0:.*]] = linalg.matmul {{.*}} -> tensor<8x16xf32>
// CHECK: %[[T0:.*]], %[[F0:.*]] = dist.shift_start %[[P0]] on @tp axes = [0] offset = 1
// CHECK: %[[P1:.*]] = linalg.matmul {{.*}} -> tensor<8x16xf32>
// CHECK: %[[R1:.*]] = dist.wait %[[T0]], %[[F0]]
// CHECK: %[[S1:.*]] = linalg.add ins(%[[R1]], %[[P1]] : tensor<8x16xf32>, tensor<8x16xf32>) outs(%[[R1]] : tensor<8x16xf32>)
// CHECK: dist.shift_start %[[S1]]
// CHECK-COUNT-2: linalg.add
// CHECK-NOT: dist.reduce_scatter
// CHECK: return
func.func @rows(%a: tensor<32x64xf32>, %b: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x16xf32>) -> tensor<32x16xf32>
  %y = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x16xf32>) outs(%f : tensor<32x16xf32>) -> tensor<32x16xf32>
  // expected-remark @+1 {{reduce_scatter fused with 'linalg.matmul' as ring_matmul_rs (4 chunks)}}
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<32x16xf32> -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// -----

shard.grid @g2(shape = 2x2)

// Scatter along the columns, on axis 1 of a 2-D grid, bf16 operands with an
// f32 result; a max reduction combines with linalg.max.
// CHECK-LABEL: func.func @columns_max
// CHECK: shard.process_multi_index on @g2 axes = [1] : index
// CHECK: linalg.matmul {{.*}} -> tensor<16x4xf32>
// CHECK: dist.shift_start %{{.*}} on @g2 axes = [1] offset = 1 {{.*}}: tensor<16x4xf32>
// CHECK: linalg.max
func.func @columns_max(%a: tensor<16x32xbf16>, %b: tensor<32x8xbf16>) -> tensor<16x4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul ins(%a, %b : tensor<16x32xbf16>, tensor<32x8xbf16>) outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  // expected-remark @+1 {{reduce_scatter fused with 'linalg.matmul' as ring_matmul_rs (2 chunks)}}
  %s = dist.reduce_scatter %y on @g2 axes = [1] dim = 1 reduce = max : tensor<16x8xf32> -> tensor<16x4xf32>
  return %s : tensor<16x4xf32>
}

// -----

shard.grid @tp(shape = 4)

// The matmul result has another use: the ring cannot consume it alone.
// CHECK-LABEL: func.func @other_use
// CHECK: dist.reduce_scatter_start
func.func @other_use(%a: tensor<32x64xf32>, %b: tensor<64x16xf32>) -> (tensor<8x16xf32>, tensor<32x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x16xf32>) -> tensor<32x16xf32>
  %y = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x16xf32>) outs(%f : tensor<32x16xf32>) -> tensor<32x16xf32>
  // expected-remark @+1 {{reduce_scatter made asynchronous}}
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<32x16xf32> -> tensor<8x16xf32>
  %z = linalg.matmul ins(%a, %b : tensor<32x64xf32>, tensor<64x16xf32>) outs(%y : tensor<32x16xf32>) -> tensor<32x16xf32>
  return %s, %z : tensor<8x16xf32>, tensor<32x16xf32>
}
