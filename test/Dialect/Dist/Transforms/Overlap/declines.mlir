// What the overlap pass declines, and the remarks that say why.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force -verify-diagnostics -o /dev/null

shard.grid @tp(shape = 4)

// Dynamic shapes: no ring, and nothing independent to overlap either.
func.func @dynamic(%x: tensor<?x16xf32>, %w: tensor<16x8xf32>) -> tensor<?x16xf32> {
  // expected-remark @+1 {{all_gather kept whole: dynamic shapes; no independent computation to overlap it with}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<?x16xf32> -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}

// -----

shard.grid @tp(shape = 4)

// The gathered value feeds an elementwise op, not a contraction (one that
// also reads a value not known to be replicated, so that it stays after
// the gather).
func.func @elementwise_consumer(%x: tensor<4x16xf32>, %y: tensor<16xf32>) -> tensor<16x16xf32> {
  // expected-remark @+1 {{all_gather kept whole: its consumer 'linalg.generic' is not a contraction}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %e = tensor.empty() : tensor<16x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%g, %y : tensor<16x16xf32>, tensor<16xf32>) outs(%e : tensor<16x16xf32>) {
  ^bb0(%v: f32, %w: f32, %o: f32):
    %s = arith.mulf %v, %w : f32
    linalg.yield %s : f32
  } -> tensor<16x16xf32>
  return %r : tensor<16x16xf32>
}

// -----

shard.grid @tp(shape = 4)

// Bitwise reductions are never decomposed.
func.func @bitwise(%a: tensor<8x8xi32>, %b: tensor<8x8xi32>) -> tensor<8x8xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<8x8xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<8x8xi32>) -> tensor<8x8xi32>
  %y = linalg.matmul ins(%a, %b : tensor<8x8xi32>, tensor<8x8xi32>) outs(%f : tensor<8x8xi32>) -> tensor<8x8xi32>
  // expected-remark @+1 {{all_reduce fused with 'linalg.matmul' as micro_batch}}
  %r = dist.all_reduce %y on @tp axes = [0] reduce = bitor : tensor<8x8xi32> -> tensor<8x8xi32>
  return %r : tensor<8x8xi32>
}
