// RUN: braid-opt %s -split-input-file -canonicalize | FileCheck %s

shard.grid @g(shape = 1x4)

// A group of one rank moves nothing.
// CHECK-LABEL: func.func @one_rank
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>)
// CHECK-NOT: dist.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @one_rank(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>) {
  %0 = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  %1 = dist.all_reduce %x on @g axes = [0] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  %2 = dist.reduce_scatter %x on @g axes = [0] dim = 1 reduce = max : tensor<8x4xf32> -> tensor<8x4xf32>
  %3 = dist.all_to_all %x on @g axes = [] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> tensor<8x4xf32>
  %4 = dist.broadcast %x on @g axes = [0] root = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  %5 = dist.shift %x on @g axes = [0] offset = 3 : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
}

// A shift by a multiple of the ring length is the identity; others stay.
// CHECK-LABEL: func.func @shift_full_turn
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>)
// CHECK: %[[S:.*]] = dist.shift %[[X]] on @g axes = [1] offset = 3
// CHECK: return %[[X]], %[[S]]
func.func @shift_full_turn(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = dist.shift %x on @g axes = [1] offset = -8 : tensor<8xf32> -> tensor<8xf32>
  %1 = dist.shift %x on @g axes = [1] offset = 3 : tensor<8xf32> -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// Collectives over a real group stay.
// CHECK-LABEL: func.func @real_group
// CHECK: dist.all_gather
// CHECK: dist.all_reduce
func.func @real_group(%x: tensor<8x4xf32>) -> (tensor<32x4xf32>, tensor<8x4xf32>) {
  %0 = dist.all_gather %x on @g axes = [1] dim = 0 : tensor<8x4xf32> -> tensor<32x4xf32>
  %1 = dist.all_reduce %x on @g axes = [0, 1] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0, %1 : tensor<32x4xf32>, tensor<8x4xf32>
}

// -----

shard.grid @g(shape = 4)

// A start immediately followed by its wait overlaps nothing.
// CHECK-LABEL: func.func @start_then_wait
// CHECK-NOT: dist.wait
// CHECK: %[[G:.*]] = dist.all_gather %{{.*}} on @g axes = [0] dim = 0 : tensor<8xf32> -> tensor<32xf32>
// CHECK: %[[R:.*]] = dist.reduce_scatter %{{.*}} on @g axes = [0] dim = 0 reduce = min : tensor<32xf32> -> tensor<8xf32>
// CHECK: return %[[G]], %[[R]]
func.func @start_then_wait(%x: tensor<8xf32>, %y: tensor<32xf32>) -> (tensor<32xf32>, tensor<8xf32>) {
  %t, %f = dist.all_gather_start %x on @g axes = [0] dim = 0 : tensor<8xf32> -> tensor<32xf32>
  %g = dist.wait %t, %f : tensor<32xf32>
  %t1, %f1 = dist.reduce_scatter_start %y on @g axes = [0] dim = 0 reduce = min : tensor<32xf32> -> tensor<8xf32>
  %r = dist.wait %t1, %f1 : tensor<8xf32>
  return %g, %r : tensor<32xf32>, tensor<8xf32>
}

// Work between start and wait keeps the asynchronous form.
// CHECK-LABEL: func.func @overlapped
// CHECK: %[[T:.*]], %[[F:.*]] = dist.all_reduce_start
// CHECK: arith.mulf
// CHECK: dist.wait %[[T]], %[[F]]
func.func @overlapped(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %m = arith.mulf %y, %y : tensor<8xf32>
  %r = dist.wait %t, %f : tensor<8xf32>
  return %r, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

shard.grid @g(shape = 4x1)

// A trivial start and its wait disappear even with work in between.
// CHECK-LABEL: func.func @trivial_start
// CHECK-SAME: (%[[X:.*]]: tensor<8xf32>, %[[Y:.*]]: tensor<8xf32>)
// CHECK-NOT: dist.
// CHECK: return %[[X]]
func.func @trivial_start(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %t, %f = dist.all_reduce_start %x on @g axes = [1] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %m = arith.mulf %y, %y : tensor<8xf32>
  %r = dist.wait %t, %f : tensor<8xf32>
  return %r, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)

// A collective of a tensor.empty moves undefined values (partitioning
// reshards placeholder inits): a tensor.empty of the result's shape.
// CHECK-LABEL: func.func @placeholder
// CHECK-NOT: dist.
// CHECK: %[[E:.*]] = tensor.empty() : tensor<16x4xf32>
// CHECK: %[[R:.*]] = tensor.empty() : tensor<8x4xf32>
// CHECK: return %[[E]], %[[R]]
func.func @placeholder() -> (tensor<16x4xf32>, tensor<8x4xf32>) {
  %e = tensor.empty() : tensor<4x4xf32>
  %0 = dist.all_gather %e on @g axes = [0] dim = 0 : tensor<4x4xf32> -> tensor<16x4xf32>
  %f = tensor.empty() : tensor<8x4xf32>
  %1 = dist.all_reduce %f on @g axes = [0] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return %0, %1 : tensor<16x4xf32>, tensor<8x4xf32>
}
