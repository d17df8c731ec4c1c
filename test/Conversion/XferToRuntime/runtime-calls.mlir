// xfer transfers and grid queries become calls to the runtime ABI.
// RUN: braid-opt %s -split-input-file --convert-xfer-to-runtime=entry=main --cse -verify-diagnostics | FileCheck %s

shard.grid @tp(shape = 2x4)

// CHECK-NOT: shard.grid
// CHECK-DAG: func.func private @braid_rt_group(i64, i64, i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @braid_rt_send(i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @braid_rt_recv(i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @braid_rt_reduce_scatter(i64, i64, i64, i64, i64, i64, i64) -> i64
// CHECK-DAG: func.func private @braid_rt_wait(i64)
// CHECK-DAG: func.func private @braid_rt_coord(i64, i64, i64, i64, i64, i64) -> i64
// CHECK-LABEL: func.func @main
// CHECK-SAME: attributes {llvm.emit_c_interface}
// One group handle for axis 1 of the 2x4 grid, made at entry:
// ndims 2, sizes 2 4 1 1, one axis, axis 1.
// CHECK: %[[C2:.*]] = arith.constant 2 : i64
// CHECK: %[[C4:.*]] = arith.constant 4 : i64
// CHECK: %[[C1:.*]] = arith.constant 1 : i64
// CHECK: %[[G:.*]] = call @braid_rt_group(%[[C2]], %[[C2]], %[[C4]], %[[C1]], %[[C1]], %[[C1]], %[[C1]])
// CHECK: %[[ADDR:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[SEND:.*]] = call @braid_rt_send(%[[G]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: %[[RECV:.*]] = call @braid_rt_recv(%[[G]],
// 16 elements per rank, bf16 (dtype 3), sum (reduction 0), step 1:
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// CHECK: %[[RS:.*]] = call @braid_rt_reduce_scatter(%[[G]], %{{.*}}, %{{.*}}, %[[C16]], %[[C3]], %{{.*}}, %[[C1]])
// CHECK: call @braid_rt_wait(%[[SEND]])
// CHECK: call @braid_rt_wait(%[[RECV]])
// CHECK: call @braid_rt_wait(%[[RS]])
// CHECK: %[[COORD:.*]] = call @braid_rt_coord(
// CHECK: arith.index_cast %[[COORD]] : i64 to index
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %p: memref<64xbf16>, %s: memref<16xbf16>) -> index {
  %0 = xfer.send %a on @tp axes = [1] offset = 1 step = 0 : memref<8xf32>
  %1 = xfer.recv %b on @tp axes = [1] offset = -1 step = 0 : memref<8xf32>
  %2 = xfer.reduce_scatter %p, %s on @tp axes = [1] reduce = sum step = 1 : memref<64xbf16>, memref<16xbf16>
  xfer.wait %0, %1, %2 : !xfer.request, !xfer.request, !xfer.request
  %i = shard.process_multi_index on @tp axes = [1] : index
  return %i : index
}

// -----

shard.grid @tp(shape = ?x4)

func.func @main(%a: memref<8xf32>) {
  // expected-error @+1 {{the runtime needs grids of at most 4 axes of static size; grid @tp does not qualify}}
  %0 = xfer.send %a on @tp axes = [1] offset = 1 step = 0 : memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

// expected-error @+1 {{entry function 'main' is not defined in the module}}
module {
}

// -----

shard.grid @tp(shape = 4)

func.func @main(%a: memref<8xi1>, %b: memref<8xi1>) {
  // expected-error @+1 {{the runtime cannot reduce elements of type 'i1'}}
  %0 = xfer.all_reduce %a, %b on @tp axes = [0] reduce = sum step = 0 : memref<8xi1>, memref<8xi1>
  xfer.wait %0 : !xfer.request
  return
}
