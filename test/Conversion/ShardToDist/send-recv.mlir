// Upstream's point-to-point ops: a send to this rank's position plus k
// along one grid axis, with the first receive after it from the position
// minus k, is a shift by k (pipeline stages pass activations this way);
// the send's result is its input. The position may be wrapped modulo the
// group size. A receive from the position itself is the input.
// RUN: braid-opt %s -split-input-file --braid-import-shard | FileCheck %s

shard.grid @g(shape = 4x2)

// CHECK-LABEL: func.func @next_stage
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x8xf32>
// CHECK-NOT: shard.send
// CHECK-NOT: shard.recv
// CHECK: %[[Y:.*]] = dist.shift %[[X]] on @g axes = [0] offset = 1 : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[Y]], %[[X]]
func.func @next_stage(%x: tensor<4x8xf32>, %buf: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %pos = shard.process_multi_index on @g axes = [0] : index
  %c1 = arith.constant 1 : index
  %next = arith.addi %pos, %c1 : index
  %prev = arith.subi %pos, %c1 : index
  %sent = shard.send %x on @g grid_axes = [0] destination = [%next] : (tensor<4x8xf32>, index) -> tensor<4x8xf32>
  %got = shard.recv %buf on @g grid_axes = [0] source = [%prev] : (tensor<4x8xf32>, index) -> tensor<4x8xf32>
  return %got, %sent : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

shard.grid @g(shape = 4x2)

// Backwards by one along axis 1, wrapped with remainders; the position of
// both axes from one op.
// CHECK-LABEL: func.func @previous_wrapped
// CHECK: dist.shift %{{.*}} on @g axes = [1] offset = 1 :
func.func @previous_wrapped(%x: tensor<8xf32>) -> tensor<8xf32> {
  %pos:2 = shard.process_multi_index on @g : index, index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %plus = arith.addi %pos#1, %c1 : index
  %next = arith.remui %plus, %c2 : index
  %back = arith.addi %pos#1, %c1 : index
  %prev = arith.remui %back, %c2 : index
  %s = shard.send %x on @g grid_axes = [1] destination = [%next] : (tensor<8xf32>, index) -> tensor<8xf32>
  %r = shard.recv %x on @g grid_axes = [1] source = [%prev] : (tensor<8xf32>, index) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)

// Two stages ahead, and a receive from oneself.
// CHECK-LABEL: func.func @two_ahead
// CHECK-SAME: %[[X:[^:]*]]: tensor<8xf32>
// CHECK: dist.shift %[[X]] on @g axes = [0] offset = 2 :
// CHECK-NOT: dist.shift
// CHECK: return
func.func @two_ahead(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %pos = shard.process_linear_index on @g : index
  %c2 = arith.constant 2 : index
  %to = arith.addi %c2, %pos : index
  %from = arith.subi %pos, %c2 : index
  %s = shard.send %x on @g grid_axes = [0] destination = [%to] : (tensor<8xf32>, index) -> tensor<8xf32>
  %r = shard.recv %x on @g grid_axes = [0] source = [%from] : (tensor<8xf32>, index) -> tensor<8xf32>
  %s0 = shard.send %x on @g grid_axes = [0] destination = [%pos] : (tensor<8xf32>, index) -> tensor<8xf32>
  %r0 = shard.recv %x on @g grid_axes = [0] source = [%pos] : (tensor<8xf32>, index) -> tensor<8xf32>
  return %r, %r0 : tensor<8xf32>, tensor<8xf32>
}

// -----

shard.grid @g(shape = 2)

// Upstream's collectives over no grid axes are each rank on its own.
// CHECK-LABEL: func.func @no_axes
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32>
// CHECK-NOT: shard.process_multi_index
// CHECK: return %[[X]],
func.func @no_axes(%x: tensor<4xf32>, %root: index) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = shard.all_slice %x on @g grid_axes = [] slice_axis = 0 : tensor<4xf32> -> tensor<4xf32>
  %b = shard.broadcast %x on @g grid_axes = [] root = [] : (tensor<4xf32>) -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)

// A sharding with an empty entry for a rank-0 tensor splits nothing (as
// upstream's propagation writes it), and get_sharding of an annotated
// value is its annotation's sharding.
// CHECK-LABEL: func.func @scalar_sharding
// CHECK-NOT: shard.get_sharding
// CHECK: return
func.func @scalar_sharding(%x: tensor<4xf32>) -> (tensor<f32>, !shard.sharding) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %r = linalg.reduce ins(%x : tensor<4xf32>) outs(%f : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %sh = shard.sharding @g split_axes = [[]] : !shard.sharding
  %a = shard.shard %r to %sh : tensor<f32>
  %g = shard.get_sharding %a : tensor<f32> -> !shard.sharding
  return %a, %g : tensor<f32>, !shard.sharding
}
