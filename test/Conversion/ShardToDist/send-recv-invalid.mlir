// Point-to-point ops Braid cannot pair, and get_sharding without an
// annotation: located errors.
// RUN: braid-opt %s -split-input-file -verify-diagnostics --braid-import-shard

shard.grid @g(shape = 4)

func.func @static_destination(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{cannot convert 'shard.send' to dist: its destination is not this rank's position along grid axis 0 plus a constant (every rank would send to the same device)}}
  %s = shard.send %x on @g grid_axes = [0] destination = [1] : (tensor<8xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)

func.func @lone_recv(%x: tensor<8xf32>) -> tensor<8xf32> {
  %pos = shard.process_linear_index on @g : index
  // expected-error @+1 {{cannot convert 'shard.recv' to dist: no 'shard.send' before it in its block sends to it}}
  %r = shard.recv %x on @g grid_axes = [0] source = [%pos] : (tensor<8xf32>, index) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)

// The receive comes from two back, the send goes one ahead.
func.func @unpaired(%x: tensor<8xf32>) -> tensor<8xf32> {
  %pos = shard.process_linear_index on @g : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %to = arith.addi %pos, %c1 : index
  %from = arith.subi %pos, %c2 : index
  // expected-error @+1 {{no 'shard.recv' after it in its block receives from this rank's position minus 1 along grid axis 0 with its type}}
  %s = shard.send %x on @g grid_axes = [0] destination = [%to] : (tensor<8xf32>, index) -> tensor<8xf32>
  // The conversion stops at the send: the receive gets no error of its own.
  %r = shard.recv %x on @g grid_axes = [0] source = [%from] : (tensor<8xf32>, index) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2x2)

func.func @two_axes(%x: tensor<8xf32>, %i: index) -> tensor<8xf32> {
  // expected-error @+1 {{it spans 2 grid axes; Braid pairs sends and receives along one}}
  %s = shard.send %x on @g grid_axes = [0, 1] destination = [%i, %i] : (tensor<8xf32>, index, index) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// -----

func.func @unannotated(%x: tensor<8xf32>) -> !shard.sharding {
  // expected-error @+1 {{cannot convert 'shard.get_sharding' in SPMD code: its tensor has no 'shard.shard' annotation to take the sharding from}}
  %s = shard.get_sharding %x : tensor<8xf32> -> !shard.sharding
  return %s : !shard.sharding
}
