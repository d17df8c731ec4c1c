// Ops without a dist counterpart get an error naming them.
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-import-shard

shard.grid @g(shape = 4)
func.func @gather_dynamic_root(%x: tensor<8xf32>, %r: index) -> tensor<32xf32> {
  // expected-error @+1 {{cannot convert 'shard.gather' with a dynamic root}}
  %0 = shard.gather %x on @g grid_axes = [0] gather_axis = 0 root = [%r] : (tensor<8xf32>, index) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @reduce_dynamic_root(%x: tensor<8xf32>, %r: index) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.reduce' with a dynamic root}}
  %0 = shard.reduce %x on @g grid_axes = [0] root = [%r] : (tensor<8xf32>, index) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @scatter_dynamic_root(%x: tensor<8xf32>, %r: index) -> tensor<2xf32> {
  // expected-error @+1 {{cannot convert 'shard.scatter' with a dynamic root}}
  %0 = shard.scatter %x on @g grid_axes = [0] scatter_axis = 0 root = [%r] : (tensor<8xf32>, index) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @reduce_generic(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.reduce': reduction 'generic' has no dist counterpart}}
  %0 = shard.reduce %x on @g grid_axes = [0] reduction = generic root = [0] : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @send(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.send' to dist: it has no dist counterpart}}
  %0 = shard.send %x on @g grid_axes = [0] destination = [1] : (tensor<8xf32>) -> tensor<8xf32>
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
func.func @dynamic_root(%x: tensor<8xf32>, %r: index) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.broadcast' with a dynamic root}}
  %0 = shard.broadcast %x on @g grid_axes = [0] root = [%r] : (tensor<8xf32>, index) -> tensor<8xf32>
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
