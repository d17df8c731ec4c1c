// Ops without a dist counterpart, and forms the import cannot take, get a
// located error naming them.
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-import-shard

shard.grid @g(shape = 4)
func.func @reduce_generic(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.reduce': reduction 'generic' has no dist counterpart}}
  %0 = shard.reduce %x on @g grid_axes = [0] reduction = generic root = [0] : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @generic_reduction(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.all_reduce': reduction 'generic' has no dist counterpart}}
  %0 = shard.all_reduce %x on @g grid_axes = [0] reduction = generic : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @memref_all_reduce(%x: memref<8xf32>) -> memref<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.all_reduce' on 'memref<8xf32>': dist collectives take ranked tensors}}
  %0 = shard.all_reduce %x on @g grid_axes = [0] : memref<8xf32> -> memref<8xf32>
  return %0 : memref<8xf32>
}

// -----

shard.grid @g(shape = ?)
func.func @dynamic_average(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert an average over a group of dynamic size}}
  %0 = shard.all_reduce %x on @g grid_axes = [0] reduction = average : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @dynamic_root_dynamic_shape(%x: tensor<?xf32>, %r: index) -> tensor<?xf32> {
  // expected-error @+1 {{cannot convert 'shard.broadcast' with a dynamic root on 'tensor<?xf32>': it needs a statically shaped tensor of integers or floats}}
  %0 = shard.broadcast %x on @g grid_axes = [0] root = [%r] : (tensor<?xf32>, index) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}

// -----

// A shard op the import has no conversion for is an error at the op (the
// pass's conversion target), not left for a later pass to trip over.
shard.grid @g(shape = 4)

func.func @neighbors(%i: index) -> (index, index) {
  // expected-error @+1 {{failed to legalize operation 'shard.neighbors_linear_indices' that was explicitly marked illegal}}
  %down, %up = shard.neighbors_linear_indices on @g[%i] split_axes = [0] : index, index
  return %down, %up : index, index
}
