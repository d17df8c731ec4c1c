// shard.shard_shape in SPMD code becomes index arithmetic (dim / n shards,
// one more on the last dim % n, as upstream splits unevenly); a sharding
// that only shard_shape reads does not make the function global-view.
// RUN: braid-opt %s -split-input-file --braid-import-shard -verify-diagnostics | FileCheck %s

shard.grid @g(shape = 2x3)

// CHECK-LABEL: func.func @shape
// CHECK-NOT: shard.sharding
// Dimension 0 over axis 0: 10 / 2.
// CHECK: %[[D0:.*]] = arith.divui %c10{{.*}}, %c2
// Dimension 2 over axis 1: 13 / 3, one more from position 2 on.
// CHECK: %[[B:.*]] = arith.divui %c13{{.*}}, %c3
// CHECK: %[[R:.*]] = arith.remui %c13{{.*}}, %c3
// CHECK: %[[F:.*]] = arith.subi %c3{{.*}}, %[[R]]
// CHECK: %[[L:.*]] = arith.cmpi uge, %{{.*}}, %[[F]] : index
// CHECK: %[[E:.*]] = arith.select %[[L]], %c1{{.*}}, %c0
// CHECK: %[[S2:.*]] = arith.addi %[[B]], %[[E]] : index
// CHECK: return %{{.*}}, %c7{{.*}}, %[[S2]] : index, index, index
// CHECK-NOT: shard.shard_shape
func.func @shape(%i: index, %j: index) -> (index, index, index) {
  %s = shard.sharding @g split_axes = [[0], [], [1]] : !shard.sharding
  %0:3 = shard.shard_shape dims = [10, 7, 13] sharding = %s device = [%i, %j] : index, index, index
  return %0#0, %0#1, %0#2 : index, index, index
}

// -----

shard.grid @g(shape = 4)
func.func @halos(%i: index) -> index {
  %s = shard.sharding @g split_axes = [[0]] halo_sizes = [1, 1] : !shard.sharding
  // expected-error @+1 {{cannot convert 'shard.shard_shape' of a sharding with halos or explicit offsets}}
  %0 = shard.shard_shape dims = [16] sharding = %s device = [%i] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 4)
func.func @argument_sharding(%s: !shard.sharding, %i: index) -> index {
  // expected-error @+1 {{cannot convert 'shard.shard_shape': its sharding must come from a 'shard.sharding' op}}
  %0 = shard.shard_shape dims = [16] sharding = %s device = [%i] : index
  return %0 : index
}

// -----

shard.grid @g(shape = 2x2)
func.func @device_rank(%i: index) -> index {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  // expected-error @+1 {{has a device index of 1 coordinates on a rank-2 grid}}
  %0 = shard.shard_shape dims = [16] sharding = %s device = [%i] : index
  return %0 : index
}
