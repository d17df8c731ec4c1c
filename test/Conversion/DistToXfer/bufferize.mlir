// dist collectives bufferize to xfer transfers (One-Shot Bufferize is the
// dist-to-xfer conversion).
// RUN: braid-opt %s -split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 4)

// A synchronous collective: a fresh buffer, the transfer, its wait.
// CHECK-LABEL: func.func @sync
// CHECK-SAME: (%[[X:.*]]: memref<8x16xf32>)
// CHECK: %[[D:.*]] = memref.alloc() {{.*}} : memref<32x16xf32>
// CHECK: %[[R:.*]] = xfer.all_gather %[[X]], %[[D]] on @tp axes = [0] step = 0 : memref<8x16xf32>, memref<32x16xf32>
// CHECK: xfer.wait %[[R]] : !xfer.request
// CHECK: return %[[D]]
func.func @sync(%x: tensor<8x16xf32>) -> tensor<32x16xf32> {
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  return %g : tensor<32x16xf32>
}

// A shift is a send and a receive; the start and the wait keep their
// places, so the compute between them overlaps the transfer.
// CHECK-LABEL: func.func @async_shift
// CHECK: %[[D:.*]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK: %[[S:.*]] = xfer.send %{{.*}} on @tp axes = [0] offset = 1 step = 0
// CHECK: %[[R:.*]] = xfer.recv %[[D]] on @tp axes = [0] offset = -1 step = 0
// CHECK: linalg.generic
// CHECK: xfer.wait %[[S]], %[[R]] : !xfer.request, !xfer.request
// CHECK: return %[[D]],
func.func @async_shift(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %t, %f = dist.shift_start %x on @tp axes = [0] offset = 1 : tensor<8xf32> -> tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%y : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %r = dist.wait %t, %f : tensor<8xf32>
  return %r, %z : tensor<8xf32>, tensor<8xf32>
}

// An op in the window that would write the input in place: the transfer
// sends a private copy instead (One-Shot Bufferize alone cannot see that
// the send still reads the buffer).
// CHECK-LABEL: func.func @private_copy
// CHECK: memref.copy %[[Y:.*]], %[[C:.*]] : memref<8xf32> to memref<8xf32>
// CHECK: xfer.all_reduce %[[C]],
// CHECK: linalg.generic {{.*}} outs(%[[Y]] : memref<8xf32>)
func.func @private_copy(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %t, %f = dist.all_reduce_start %y on @tp axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%y : tensor<8xf32>) {
  ^bb0(%o: f32):
    %n = arith.negf %o : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %r = dist.wait %t, %f : tensor<8xf32>
  return %r, %w : tensor<8xf32>, tensor<8xf32>
}

// -----

shard.grid @tp(shape = 4)

// The same through a view bufferized before the start (a reshape of an
// argument), with the write into a slice of that argument: the input is
// then a conversion of a buffer, and only the storage roots show the
// hazard (this raced before: found by the schedule checker on a masked
// broadcast that an async all-gather of the same argument overlapped).
// CHECK-LABEL: func.func @private_copy_through_view
// CHECK: %[[V:.*]] = memref.expand_shape %arg0
// CHECK: memref.copy %[[V]], %[[C:.*]] :
// CHECK: xfer.all_gather %[[C]],
// CHECK: %[[S:.*]] = memref.subview %arg0[4]
// CHECK: linalg.generic {{.*}} outs(%[[S]] :
func.func @private_copy_through_view(%x: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %v = tensor.expand_shape %x [[0, 1]] output_shape [1, 8] : tensor<8xf32> into tensor<1x8xf32>
  %t, %f = dist.all_gather_start %v on @tp axes = [0] dim = 0 : tensor<1x8xf32> -> tensor<4x8xf32>
  %s = tensor.extract_slice %x[4] [4] [1] : tensor<8xf32> to tensor<4xf32>
  %w = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%s : tensor<4xf32>) {
  ^bb0(%o: f32):
    %n = arith.negf %o : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %r = dist.wait %t, %f : tensor<4x8xf32>
  return %r, %w : tensor<4x8xf32>, tensor<4xf32>
}

// -----

shard.grid @tp(shape = 4)

func.func @not_linearized(%x: tensor<8x16xf32>) -> tensor<8x64xf32> {
  // expected-error @+2 {{cannot lower 'dist.all_gather': its blocks are not contiguous; run braid-linearize-collectives first}}
  // expected-error @+1 {{failed to bufferize op}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  return %g : tensor<8x64xf32>
}

// -----

shard.grid @tp(shape = 4)

func.func @dynamic(%x: tensor<?x16xf32>) -> tensor<?x16xf32> {
  // expected-error @+2 {{cannot lower 'dist.all_reduce' with dynamic shapes or group size}}
  // expected-error @+1 {{failed to bufferize op}}
  %g = dist.all_reduce %x on @tp axes = [0] reduce = sum : tensor<?x16xf32> -> tensor<?x16xf32>
  return %g : tensor<?x16xf32>
}
