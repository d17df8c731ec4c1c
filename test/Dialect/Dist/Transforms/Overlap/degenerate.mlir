// Collectives and compute on no elements, and groups too large to unroll:
// each schedule declines with a remark saying why. Zero-sized chunks once
// crashed the tiling (SIGSEGV in linalg::computeTileSizes), a zero-row
// all-reduce summed in a kernel got a symmetric buffer of 0 bytes that the
// runtime refused, and a group of 2^20 ranks unrolled a put per peer until
// memory ran out.
// RUN: braid-opt %s -split-input-file --braid-overlap=mode=force -verify-diagnostics -o /dev/null
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force sub-chunks=2 bidirectional=on" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RING
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer overlap=force fuse-collectives=force comm=symmetric" 2>/dev/null | FileCheck %s --check-prefix=XFER

// No ring, and no symmetric buffer or put of no elements.
// RING-NOT: fused with
// XFER-NOT: xfer.symmetric_alloc {{.*}}: memref<{{([0-9]+x)*}}0x
// XFER-NOT: xfer.put {{.*}}: memref<{{([0-9]+x)*}}0x

shard.grid @tp(shape = 4)

// The gathered dimension is empty.
func.func @gather_nothing(%x: tensor<0x16xf32>, %w: tensor<16x8xf32>) -> tensor<0x8xf32> {
  // expected-remark @+1 {{not fused: it moves no elements (tensor<0x16xf32>)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<0x16xf32> -> tensor<0x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<0x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<0x8xf32>) -> tensor<0x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<0x16xf32>, tensor<16x8xf32>) outs(%f : tensor<0x8xf32>) -> tensor<0x8xf32>
  return %y : tensor<0x8xf32>
}

// -----

shard.grid @tp(shape = 4)

// The gathered rows are there, the product has no columns.
func.func @gather_into_nothing(%x: tensor<4x16xf32>, %w: tensor<16x0xf32>) -> tensor<16x0xf32> {
  // expected-remark @+1 {{not fused: 'linalg.matmul' computes no elements (loop 1 has extent 0)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x0xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x0xf32>) -> tensor<16x0xf32>
  %y = linalg.matmul ins(%g, %w : tensor<16x16xf32>, tensor<16x0xf32>) outs(%f : tensor<16x0xf32>) -> tensor<16x0xf32>
  return %y : tensor<16x0xf32>
}

// -----

shard.grid @tp(shape = 4)

// A product over an empty reduction (its result is its fill), then
// scattered.
func.func @scatter_empty_sum(%a: tensor<16x0xf32>, %b: tensor<0x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul ins(%a, %b : tensor<16x0xf32>, tensor<0x8xf32>) outs(%f : tensor<16x8xf32>) -> tensor<16x8xf32>
  // expected-remark @+1 {{reduce_scatter kept whole: 'linalg.matmul' computes no elements (loop 2 has extent 0)}}
  %r = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

shard.grid @tp(shape = 4)

// No rows to reduce, and none to add.
func.func @reduce_no_rows(%x: tensor<0x16xf32>, %b: tensor<0x16xf32>) -> tensor<0x16xf32> {
  // expected-remark @+1 {{all_reduce kept whole: it moves no elements (tensor<0x16xf32>)}}
  %r = dist.all_reduce %x on @tp axes = [0] reduce = sum : tensor<0x16xf32> -> tensor<0x16xf32>
  %e = tensor.empty() : tensor<0x16xf32>
  %y = linalg.add ins(%r, %b : tensor<0x16xf32>, tensor<0x16xf32>) outs(%e : tensor<0x16xf32>) -> tensor<0x16xf32>
  return %y : tensor<0x16xf32>
}

// -----

shard.grid @ep(shape = 4)

// An all-to-all of no tokens (a capacity of 0).
func.func @exchange_nothing(%x: tensor<0x16xbf16>, %w: tensor<16x8xbf16>) -> tensor<0x8xf32> {
  // expected-remark @+1 {{not fused: it moves no elements (tensor<0x16xbf16>)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 0 concat_dim = 0 : tensor<0x16xbf16> -> tensor<0x16xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<0x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<0x8xf32>) -> tensor<0x8xf32>
  %y = linalg.matmul ins(%d, %w : tensor<0x16xbf16>, tensor<16x8xbf16>) outs(%f : tensor<0x8xf32>) -> tensor<0x8xf32>
  return %y : tensor<0x8xf32>
}

// -----

shard.grid @ep(shape = 4)

// Tokens arrive for an expert with no columns.
func.func @exchange_into_nothing(%x: tensor<8x16xbf16>, %w: tensor<16x0xbf16>) -> tensor<8x0xf32> {
  // expected-remark @+1 {{not fused: 'linalg.matmul' computes no elements (loop 1 has extent 0)}}
  %d = dist.all_to_all %x on @ep axes = [0] split_dim = 0 concat_dim = 0 : tensor<8x16xbf16> -> tensor<8x16xbf16>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x0xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x0xf32>) -> tensor<8x0xf32>
  %y = linalg.matmul ins(%d, %w : tensor<8x16xbf16>, tensor<16x0xbf16>) outs(%f : tensor<8x0xf32>) -> tensor<8x0xf32>
  return %y : tensor<8x0xf32>
}

// -----

shard.grid @tp(shape = 256)

// A ring would unroll 256 steps: more than kMaxScheduleRanks.
func.func @large_ring(%x: tensor<1x16xf32>, %w: tensor<16x8xf32>) -> tensor<256x8xf32> {
  // expected-remark @+1 {{not fused: the group has 256 ranks; schedules take a step or a transfer per rank, and are built for groups of at most 128}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<1x16xf32> -> tensor<256x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<256x8xf32>) -> tensor<256x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<256x16xf32>, tensor<16x8xf32>) outs(%f : tensor<256x8xf32>) -> tensor<256x8xf32>
  return %y : tensor<256x8xf32>
}

// -----

shard.grid @tp(shape = 1024x1024)

// The largest grid Braid compiles for: a direct exchange would post a put
// to each of 2^20 - 1 peers.
func.func @largest_grid(%x: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-remark @+1 {{all_reduce kept whole: ring schedules run along one grid axis, this group spans 2}}
  %r = dist.all_reduce %x on @tp axes = [0, 1] reduce = sum : tensor<64x32xf32> -> tensor<64x32xf32>
  %e = tensor.empty() : tensor<64x32xf32>
  %y = linalg.add ins(%r, %b : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}

// -----

shard.grid @tp(shape = 1048576)

func.func @largest_axis(%x: tensor<64x32xf32>, %b: tensor<64x32xf32>) -> tensor<64x32xf32> {
  // expected-remark @+1 {{all_reduce kept whole: the group has 1048576 ranks}}
  %r = dist.all_reduce %x on @tp axes = [0] reduce = sum : tensor<64x32xf32> -> tensor<64x32xf32>
  %e = tensor.empty() : tensor<64x32xf32>
  %y = linalg.add ins(%r, %b : tensor<64x32xf32>, tensor<64x32xf32>) outs(%e : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %y : tensor<64x32xf32>
}
