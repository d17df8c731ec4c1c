// RUN: braid-opt %s -split-input-file --convert-xfer-to-runtime --cse -verify-diagnostics | FileCheck %s

// Every collective on buffers and both shard queries, on a 2-D grid: the
// group handle packs the axes (axes [0, 1] as 0 | 1 << 8), sizes are bytes
// except for the reductions' element counts, a reduction passes its dtype
// (f16 = 2) and kind (max = 1), the broadcast root is row-major over the
// axes ([1, 2] on 2x4 is 6), and an all-to-all moves bytes / group size
// per peer.

// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @collectives
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[BOTH:.*]] = call @braid_rt_group(%[[C2]], %[[C2]], %[[C4]], %[[C1]], %[[C1]], %[[C2]], %[[C256]])
// CHECK-DAG: %[[COLS:.*]] = call @braid_rt_group(%[[C2]], %[[C2]], %[[C4]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK: %[[AG:.*]] = call @braid_rt_all_gather(%[[COLS]], %{{.*}}, %{{.*}}, %[[C32]], %[[C3]])
// CHECK: %[[C8:.*]] = arith.constant 8 : i64
// CHECK: %[[AR:.*]] = call @braid_rt_all_reduce(%[[BOTH]], %{{.*}}, %{{.*}}, %[[C8]], %[[C2]], %[[C1]], %[[C4]])
// CHECK: %[[C5:.*]] = arith.constant 5 : i64
// CHECK: %[[A2A:.*]] = call @braid_rt_all_to_all(%[[COLS]], %{{.*}}, %{{.*}}, %[[C32]], %[[C5]])
// CHECK: %[[C6:.*]] = arith.constant 6 : i64
// CHECK: %[[BC:.*]] = call @braid_rt_broadcast(%[[BOTH]], %{{.*}}, %{{.*}}, %[[C32]], %[[C6]], %[[C6]])
// CHECK: call @braid_rt_wait(%[[AG]])
// CHECK: call @braid_rt_wait(%[[AR]])
// CHECK: call @braid_rt_wait(%[[A2A]])
// CHECK: call @braid_rt_wait(%[[BC]])
// CHECK: %[[ROW:.*]] = call @braid_rt_coord({{.*}}, %[[C1]], %[[C1]], %{{.*}})
// CHECK: %[[COL:.*]] = call @braid_rt_coord({{.*}}, %[[C1]], %[[C1]], %[[C1]])
// CHECK-NOT: xfer.
// CHECK-NOT: shard.
// CHECK: return %{{.*}}, %c2, %c4 : index, index, index
shard.grid @g(shape = 2x4)

func.func @collectives(%a: memref<8xf32>, %b: memref<32xf32>, %c: memref<8xf16>, %d: memref<8xf16>) -> (index, index, index) {
  %0 = xfer.all_gather %a, %b on @g axes = [1] step = 3 : memref<8xf32>, memref<32xf32>
  %1 = xfer.all_reduce %c, %d on @g axes = [0, 1] reduce = max step = 4 : memref<8xf16>, memref<8xf16>
  %2 = xfer.all_to_all %b, %b on @g axes = [1] step = 5 : memref<32xf32>, memref<32xf32>
  %3 = xfer.broadcast %a, %a on @g axes = [0, 1] root = [1, 2] step = 6 : memref<8xf32>, memref<8xf32>
  xfer.wait %0, %1, %2, %3 : !xfer.request, !xfer.request, !xfer.request, !xfer.request
  %l = shard.process_linear_index on @g : index
  %s:2 = shard.grid_shape @g : index, index
  return %l, %s#0, %s#1 : index, index, index
}

// -----

// Symmetric memory: the site's buffer and a peer's view become memrefs at
// the addresses the runtime returns (LLVM descriptors cast to the memref
// type), a put takes the address of its flag (4 bytes each), and so do
// signals and their waits.

// CHECK-LABEL: func.func @symmetric
// CHECK: %[[G:.*]] = call @braid_rt_group(
// CHECK: %[[SLOTADDR:.*]] = call @braid_rt_symmetric_site(%[[G]], %{{.*}}, %{{.*}})
// CHECK: llvm.inttoptr %[[SLOTADDR]]
// CHECK: %[[SLOT:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<8x16xf32>
// CHECK: %[[FLAGADDR:.*]] = call @braid_rt_symmetric_site(%[[G]], %{{.*}}, %{{.*}})
// CHECK: %[[FLAGS:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<2xi32>
// CHECK: memref.extract_aligned_pointer_as_index %[[FLAGS]]
// CHECK: call @braid_rt_signal_wait_next(
// CHECK: memref.extract_aligned_pointer_as_index %[[SLOT]]
// CHECK: %[[PUT:.*]] = call @braid_rt_put(%[[G]],
// CHECK: call @braid_rt_signal_add(%[[G]],
// CHECK: %[[PEER:.*]] = call @braid_rt_symmetric_peer(%[[G]],
// CHECK: call @braid_rt_wait(%[[PUT]])
// CHECK-NOT: xfer.
shard.grid @tp(shape = 4)

func.func @symmetric(%a: memref<8x16xf32>) -> memref<8x16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<8x16xf32>
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<2xi32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 2 : memref<2xi32>
  %0 = xfer.put %a, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 2 : memref<8x16xf32>, memref<8x16xf32>, memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 0 add = 3 step = 2 : memref<2xi32>
  %peer = xfer.peer_view %slot on @tp axes = [0] offset = 2 : memref<8x16xf32>
  xfer.wait %0 : !xfer.request
  return %peer : memref<8x16xf32>
}

// -----

// A request that is no transfer's result has no runtime handle: the wait
// cannot be lowered, and the conversion says so rather than leave it.
shard.grid @tp(shape = 4)

func.func @foreign(%r: !xfer.request) {
  // expected-error @+1 {{failed to legalize operation 'xfer.wait' that was explicitly marked illegal}}
  xfer.wait %r : !xfer.request
  return
}

// -----

// Buffers of dynamic shape have no byte count to hand to the runtime.
shard.grid @tp(shape = 4)

func.func @dynamic(%a: memref<?xf32>) {
  // expected-error @+1 {{the runtime lowering needs static buffer shapes, got 'memref<?xf32>'}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<?xf32>
  xfer.wait %0 : !xfer.request
  return
}
