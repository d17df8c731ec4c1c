// Grids Braid cannot compile for get a located error on the grid before
// anything reads its sizes: an axis without ranks (each group over it would
// divide by zero) and more ranks than kMaxGridRanks (schedules and tables
// sized by the rank count).
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-import-shard

// The global view: checking that dimensions divide over the split axes once
// crashed here with SIGFPE.
// expected-error @+1 {{'shard.grid' op axis 0 has size 0; every grid axis needs at least one rank}}
shard.grid @g(shape = 0)
func.func @global_view(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %y = shard.shard %x to %s : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// The SPMD form, the empty axis on a grid of two.
// expected-error @+1 {{'shard.grid' op axis 1 has size 0; every grid axis needs at least one rank}}
shard.grid @g(shape = 2x0)
func.func @spmd(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<8x16xf32> -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// -----

// One put per peer: a grid of 2^40 ranks once ran the direct exchange out
// of memory ("LLVM ERROR: out of memory").
// expected-error @+1 {{'shard.grid' op spans 1099511627776 ranks; Braid compiles for grids of at most 1048576 ranks}}
shard.grid @g(shape = 1099511627776)
func.func @huge(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<64x32xf32> -> tensor<64x32xf32>
  return %r : tensor<64x32xf32>
}

// -----

// The product of the axes, even where it overflows int64_t.
// expected-error @+1 {{'shard.grid' op spans more than 18446744073709551615 ranks; Braid compiles for grids of at most 1048576 ranks}}
shard.grid @g(shape = 4294967296x4294967296x4294967296)
func.func @overflow(%x: tensor<64x32xf32>) -> tensor<64x32xf32> {
  return %x : tensor<64x32xf32>
}

// -----

// A grid no op uses is checked too; dynamic axes pass (the runnable
// stages reject them), and so does a grid of exactly 2^20 ranks.
shard.grid @dynamic(shape = ?x4)
shard.grid @largest(shape = 1024x1024)
// expected-error @+1 {{'shard.grid' op spans 2097152 ranks; Braid compiles for grids of at most 1048576 ranks}}
shard.grid @unused(shape = 2048x1024)
func.func @several(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
