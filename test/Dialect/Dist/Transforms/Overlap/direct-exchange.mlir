// comm=symmetric: collectives that stay whole (kept, or made asynchronous)
// move by direct transfers, one shift per peer offset marked
// dist.symmetric (braid-symmetric-transfers turns each into a put), posted
// where the collective starts and waited where it is waited; the record
// and the remark say so, and why not where there is no such form.
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=off comm=symmetric" -verify-diagnostics | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force comm=symmetric" 2>&1 | FileCheck %s --check-prefix=ASYNC
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=RING

shard.grid @tp(shape = 4)

// An all-gather: the own block and what rank r-k sent, each at its place.
// CHECK-LABEL: func.func @gather
// CHECK: %[[POS:.*]] = shard.process_multi_index on @tp axes = [0] : index
// CHECK: %[[T1:.*]], %[[F1:.*]] = dist.shift_start %[[X:[^ ]*]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<2x8xf32>
// CHECK: %[[T2:.*]], %[[F2:.*]] = dist.shift_start %[[X]] on @tp axes = [0] offset = 2 {dist.step = 1 : i64, dist.symmetric}
// CHECK: %[[T3:.*]], %[[F3:.*]] = dist.shift_start %[[X]] on @tp axes = [0] offset = 3 {dist.step = 2 : i64, dist.symmetric}
// CHECK: %[[R1:.*]] = dist.wait %[[T1]], %[[F1]]
// CHECK: %[[R2:.*]] = dist.wait %[[T2]], %[[F2]]
// CHECK: %[[R3:.*]] = dist.wait %[[T3]], %[[F3]]
// CHECK: %[[E:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK: %[[O:.*]] = arith.muli %[[POS]], %{{.*}} : index
// CHECK: %[[I0:.*]] = tensor.insert_slice %[[X]] into %[[E]][%[[O]], 0] [2, 8] [1, 1]
// From r-1, at ((r + 3) mod 4) * 2.
// CHECK: %[[S1:.*]] = arith.addi %[[POS]], %c3
// CHECK: %[[M1:.*]] = arith.remui %[[S1]], %c4
// CHECK: %[[O1:.*]] = arith.muli %[[M1]], %c2
// CHECK: %[[I1:.*]] = tensor.insert_slice %[[R1]] into %[[I0]][%[[O1]], 0]
// CHECK: tensor.insert_slice %[[R2]]
// CHECK: tensor.insert_slice %[[R3]]
// CHECK-NOT: dist.all_gather
func.func @gather(%x: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-remark @+1 {{all_gather kept whole: overlap=off; transfers symmetric (comm=symmetric; direct puts to the 3 peers)}}
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  return %g : tensor<8x8xf32>
}

// -----

shard.grid @tp(shape = 2x4)

// A reduce-scatter on axis 1: block r+k of the input goes to r+k, the own
// block is reduced with what arrives.
// CHECK-LABEL: func.func @scatter
// CHECK: shard.process_multi_index on @tp axes = [1]
// CHECK: %[[B1:.*]] = tensor.extract_slice %[[IN:arg[0-9]+]][%{{.*}}, 0] [2, 4] [1, 1] : tensor<8x4xbf16> to tensor<2x4xbf16>
// CHECK: dist.shift_start %[[B1]] on @tp axes = [1] offset = 1 {{.*}}dist.symmetric
// CHECK: dist.shift_start %{{.*}} on @tp axes = [1] offset = 2 {{.*}}dist.symmetric
// CHECK: dist.shift_start %{{.*}} on @tp axes = [1] offset = 3 {{.*}}dist.symmetric
// CHECK-COUNT-3: dist.wait
// CHECK: %[[OWN:.*]] = tensor.extract_slice %[[IN]]
// CHECK: %[[A1:.*]] = linalg.max ins(%[[OWN]], %{{.*}} : tensor<2x4xbf16>, tensor<2x4xbf16>)
// CHECK: %[[A2:.*]] = linalg.max ins(%[[A1]],
// CHECK: %[[A3:.*]] = linalg.max ins(%[[A2]],
// CHECK: return %[[A3]]
func.func @scatter(%y: tensor<8x4xbf16>) -> tensor<2x4xbf16> {
  // expected-remark @+1 {{reduce_scatter kept whole: overlap=off; transfers symmetric (comm=symmetric; direct puts to the 3 peers)}}
  %s = dist.reduce_scatter %y on @tp axes = [1] dim = 0 reduce = max : tensor<8x4xbf16> -> tensor<2x4xbf16>
  return %s : tensor<2x4xbf16>
}

// -----

shard.grid @tp(shape = 2)

// A small all-reduce moves in one shot: the whole tensor to the peer.
// CHECK-LABEL: func.func @small_all_reduce
// CHECK: dist.shift_start %[[A:[^ ]*]] on @tp axes = [0] offset = 1 {{.*}}dist.symmetric{{.*}} : tensor<4x8xf16>
// CHECK: %[[R:.*]] = dist.wait
// CHECK: linalg.add ins(%[[A]], %[[R]] : tensor<4x8xf16>, tensor<4x8xf16>)
// CHECK-NOT: dist.all_reduce
func.func @small_all_reduce(%a: tensor<4x8xf16>) -> tensor<4x8xf16> {
  // expected-remark @+1 {{all_reduce kept whole: overlap=off; transfers symmetric (comm=symmetric; direct puts to the 1 peer)}}
  %r = dist.all_reduce %a on @tp axes = [0] reduce = sum : tensor<4x8xf16> -> tensor<4x8xf16>
  return %r : tensor<4x8xf16>
}

// -----

shard.grid @tp(shape = 4)

// A large one (256 KiB) is a reduce-scatter of its rows, then an
// all-gather of the reduced blocks: 2 (n-1)/n of it per rank.
// CHECK-LABEL: func.func @large_all_reduce
// CHECK-COUNT-3: dist.shift_start %{{.*}} {{.*}}dist.symmetric{{.*}} : tensor<64x256xf32>
// CHECK-COUNT-3: dist.wait
// CHECK-COUNT-3: linalg.add
// CHECK: dist.shift_start %[[MINE:[^ ]*]] on @tp axes = [0] offset = 1 {dist.step = 3 : i64, dist.symmetric}
// CHECK: dist.shift_start %[[MINE]] on @tp axes = [0] offset = 2 {dist.step = 4 : i64, dist.symmetric}
// CHECK: dist.shift_start %[[MINE]] on @tp axes = [0] offset = 3 {dist.step = 5 : i64, dist.symmetric}
// CHECK-COUNT-3: dist.wait
// CHECK: tensor.empty() : tensor<256x256xf32>
// CHECK-COUNT-4: tensor.insert_slice
func.func @large_all_reduce(%a: tensor<256x256xf32>) -> tensor<256x256xf32> {
  // expected-remark @+1 {{all_reduce kept whole: overlap=off; transfers symmetric (comm=symmetric; direct puts to the 3 peers)}}
  %r = dist.all_reduce %a on @tp axes = [0] reduce = sum : tensor<256x256xf32> -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}

// -----

shard.grid @ep(shape = 4)

// An all-to-all splitting rows and concatenating columns: block r+k of the
// rows to r+k; what r-k sent lands at column block r-k.
// CHECK-LABEL: func.func @exchange
// CHECK-COUNT-3: dist.shift_start %{{.*}} on @ep axes = [0] offset = {{[123]}} {{.*}}dist.symmetric{{.*}} : tensor<2x3xf32>
// CHECK-COUNT-3: dist.wait
// CHECK: tensor.empty() : tensor<2x12xf32>
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, %{{.*}}] [2, 3] [1, 1] : tensor<2x3xf32> into tensor<2x12xf32>
func.func @exchange(%t: tensor<8x3xf32>) -> tensor<2x12xf32> {
  // expected-remark @+1 {{all_to_all kept whole: overlap=off; transfers symmetric (comm=symmetric; direct puts to the 3 peers)}}
  %e = dist.all_to_all %t on @ep axes = [0] split_dim = 0 concat_dim = 1 : tensor<8x3xf32> -> tensor<2x12xf32>
  return %e : tensor<2x12xf32>
}

// -----

shard.grid @tp(shape = 4)

// A shift is one channel already: only marked.
// CHECK-LABEL: func.func @shift
// CHECK: dist.shift %{{.*}} on @tp axes = [0] offset = -1 {dist.symmetric}
func.func @shift(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-remark @+1 {{shift kept whole: overlap=off; transfers symmetric (comm=symmetric; a put to the peer)}}
  %s = dist.shift %x on @tp axes = [0] offset = -1 : tensor<4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

shard.grid @tp(shape = 2x2)

// No direct form: a broadcast (the root's offset depends on the rank), a
// bitwise reduction, a group over two axes. They stay the library's.
// CHECK-LABEL: func.func @declined
// CHECK: dist.broadcast
// CHECK: dist.all_reduce {{.*}} reduce = bitor
// CHECK: dist.all_gather %{{.*}} axes = [0, 1]
// CHECK-NOT: dist.shift
func.func @declined(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>, tensor<16xf32>) {
  // expected-remark @+1 {{broadcast kept whole: overlap=off; transfers two-sided (no symmetric form: a broadcast's peer is its root, at an offset that depends on the rank, which transfers of static offsets cannot express)}}
  %b = dist.broadcast %x on @tp axes = [0] root = [1] : tensor<4xf32> -> tensor<4xf32>
  // expected-remark @+1 {{all_reduce kept whole: overlap=off; transfers two-sided (no symmetric form: a bitwise reduction, which the direct form does not combine)}}
  %r = dist.all_reduce %i on @tp axes = [0] reduce = bitor : tensor<4xi32> -> tensor<4xi32>
  // expected-remark @+1 {{all_gather kept whole: overlap=off; transfers two-sided (no symmetric form:}}
  %g = dist.all_gather %x on @tp axes = [0, 1] dim = 0 : tensor<4xf32> -> tensor<16xf32>
  return %b, %r, %g : tensor<4xf32>, tensor<4xi32>, tensor<16xf32>
}

// -----

shard.grid @tp(shape = 4)

// Made asynchronous around independent compute: the shifts are posted where
// the collective would start, waited where its result is first needed.
// ASYNC: all_reduce made asynchronous: {{.*}}; transfers symmetric (comm=symmetric; direct puts to the 3 peers)
// ASYNC-LABEL: func.func @async
// ASYNC: %[[T:.*]], %{{.*}} = dist.shift_start %arg0 on @tp axes = [0] offset = 1
// ASYNC: linalg.matmul
// ASYNC: dist.wait %[[T]]
// CHECK-LABEL: func.func @async
func.func @async(%g: tensor<4x8xf32>, %p: tensor<64x64xf32>) -> (tensor<4x8xf32>, tensor<64x64xf32>) {
  // expected-remark @+1 {{all_reduce kept whole: overlap=off; transfers symmetric}}
  %r = dist.all_reduce %g on @tp axes = [0] reduce = sum : tensor<4x8xf32> -> tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = linalg.matmul ins(%p, %p : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %r, %m : tensor<4x8xf32>, tensor<64x64xf32>
}

// -----

// A group whose axis is a network link (it spans nodes) shares no memory:
// comm=symmetric falls back to two-sided there, with the reason, for whole
// collectives and ring schedules alike (RING).
shard.grid @nodes(shape = 2x4) {dist.topology = [#dist.link<network, bandwidth = 50.0, latency = 5.0>, #dist.link<shm, bandwidth = 20.0, latency = 1.0>]}

// CHECK-LABEL: func.func @across_nodes
// CHECK: dist.all_gather %{{.*}} on @nodes axes = [0]
// CHECK: dist.shift_start %{{.*}} on @nodes axes = [1] offset = 1 {{.*}}dist.symmetric
// RING: all_gather fused with 'linalg.matmul' as ring_ag_matmul (2 chunks): {{.*}}; transfers two-sided (grid axis 0 is a network link (dist.topology): the group spans nodes and shares no memory)
func.func @across_nodes(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<16x8xf32>) {
  // expected-remark @+1 {{all_gather kept whole: overlap=off; transfers two-sided (grid axis 0 is a network link (dist.topology): the group spans nodes and shares no memory)}}
  %g = dist.all_gather %x on @nodes axes = [0] dim = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  // expected-remark @+1 {{all_gather kept whole: overlap=off; transfers symmetric}}
  %h = dist.all_gather %x on @nodes axes = [1] dim = 0 : tensor<4x8xf32> -> tensor<16x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y, %h : tensor<8x8xf32>, tensor<16x8xf32>
}
