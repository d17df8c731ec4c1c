// One case per verifier rule of the xfer dialect.
// RUN: braid-opt %s -split-input-file -verify-diagnostics

shard.grid @tp(shape = 4)
func.func @not_contiguous(%a: memref<8x16xf32, strided<[32, 1]>>) {
  // expected-error @+1 {{buffer 'memref<8x16xf32, strided<[32, 1]>>' is not contiguous; copy it into a contiguous buffer first}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8x16xf32, strided<[32, 1]>>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 2x2)
func.func @two_axes(%a: memref<8xf32>) {
  // expected-error @+1 {{addresses peers along exactly one grid axis, got 2}}
  %0 = xfer.recv %a on @tp axes = [0, 1] offset = 1 step = 0 : memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @never_waited(%a: memref<8xf32>) {
  // expected-error @+1 {{request is never waited}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @waited_twice(%a: memref<8xf32>) {
  // expected-error @+1 {{request is waited more than once}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  xfer.wait %0 : !xfer.request
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @same_wait_twice(%a: memref<8xf32>) {
  // expected-error @+1 {{request is waited more than once}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  xfer.wait %0, %0 : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @returned(%a: memref<8xf32>) -> !xfer.request {
  // expected-error @+1 {{request must be consumed by 'xfer.wait', not by 'func.return'}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  return %0 : !xfer.request
}

// -----

shard.grid @tp(shape = 4)
func.func @duplicate_axis(%a: memref<8xf32>, %b: memref<32xf32>) {
  // expected-error @+1 {{grid axis 0 is negative or listed twice}}
  %0 = xfer.all_gather %a, %b on @tp axes = [0, 0] step = 0 : memref<8xf32>, memref<32xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @element_types(%a: memref<8xf32>, %b: memref<32xf16>) {
  // expected-error @+1 {{destination element type 'f16' differs from source element type 'f32'}}
  %0 = xfer.all_gather %a, %b on @tp axes = [0] step = 0 : memref<8xf32>, memref<32xf16>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @gather_size(%a: memref<8xf32>, %b: memref<16xf32>) {
  // expected-error @+1 {{destination: 16 elements, expected 8 x 4 = 32}}
  %0 = xfer.all_gather %a, %b on @tp axes = [0] step = 0 : memref<8xf32>, memref<16xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @scatter_size(%a: memref<8xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{source: 8 elements, expected 4 x 4 = 16}}
  %0 = xfer.reduce_scatter %a, %b on @tp axes = [0] reduce = sum step = 0 : memref<8xf32>, memref<4xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @reduction_type(%a: memref<8xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{reduction 'bitor' is not defined for element type 'f32'}}
  %0 = xfer.all_reduce %a, %b on @tp axes = [0] reduce = bitor step = 0 : memref<8xf32>, memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @reduce_size(%a: memref<8xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{destination: 4 elements, expected 8 x 1 = 8}}
  %0 = xfer.all_reduce %a, %b on @tp axes = [0] reduce = sum step = 0 : memref<8xf32>, memref<4xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @a2a_divisible(%a: memref<6xf32>, %b: memref<6xf32>) {
  // expected-error @+1 {{source has 6 elements, not divisible by the group size 4}}
  %0 = xfer.all_to_all %a, %b on @tp axes = [0] step = 0 : memref<6xf32>, memref<6xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @root_count(%a: memref<6xf32>, %b: memref<6xf32>) {
  // expected-error @+1 {{root has 2 coordinates but the group spans 1 axes}}
  %0 = xfer.broadcast %a, %b on @tp axes = [0] root = [0, 1] step = 0 : memref<6xf32>, memref<6xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @root_range(%a: memref<6xf32>, %b: memref<6xf32>) {
  // expected-error @+1 {{root coordinate 4 is out of range for grid axis 0}}
  %0 = xfer.broadcast %a, %b on @tp axes = [0] root = [4] step = 0 : memref<6xf32>, memref<6xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

func.func @unknown_grid(%a: memref<6xf32>) {
  // expected-error @+1 {{refers to @nowhere, which is not a 'shard.grid'}}
  %0 = xfer.send %a on @nowhere axes = [0] offset = 1 step = 0 : memref<6xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @missing_axis(%a: memref<6xf32>) {
  // expected-error @+1 {{grid axis 1 does not exist: grid @tp has 1 axes}}
  %0 = xfer.send %a on @tp axes = [1] offset = 1 step = 0 : memref<6xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @peer_view_private(%a: memref<8xf32>) {
  // expected-error @+1 {{views a peer's copy of a buffer from 'xfer.symmetric_alloc'}}
  %v = xfer.peer_view %a on @tp axes = [0] offset = 1 : memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @put_private(%a: memref<8xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{destination must be a symmetric buffer (from 'xfer.symmetric_alloc', possibly through views)}}
  %0 = xfer.put %a, %b on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>, memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 2x2)
func.func @put_other_axis(%a: memref<8xf32>) {
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<8xf32>
  // expected-error @+1 {{addresses peers along grid axis 1, but its destination is symmetric over axes [0] only}}
  %0 = xfer.put %a, %s on @tp axes = [1] offset = 1 step = 0 : memref<8xf32>, memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
shard.grid @dp(shape = 4)
func.func @put_other_grid(%a: memref<8xf32>) {
  %s = xfer.symmetric_alloc on @dp axes = [0] site = 0 : memref<8xf32>
  // expected-error @+1 {{addresses peers on grid @tp, but its destination is symmetric over grid @dp}}
  %0 = xfer.put %a, %s on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>, memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @put_size(%a: memref<4xf32>) {
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<8xf32>
  // expected-error @+1 {{destination: 8 elements, expected 4 x 1 = 4}}
  %0 = xfer.put %a, %s on @tp axes = [0] offset = 1 step = 0 : memref<4xf32>, memref<8xf32>
  xfer.wait %0 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @signal_private(%f: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{flag buffer must be a symmetric buffer}}
  xfer.signal %f[%c0] on @tp axes = [0] offset = 1 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @signal_amount() {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  // expected-error @+1 {{raises flags by a positive amount, not 0}}
  xfer.signal %f[%c0] on @tp axes = [0] offset = 1 add = 0 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @signal_data_amount(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  // expected-error @+1 {{announces one delivery into its data buffer, so it raises its flag by 1, not 2}}
  xfer.signal %f[%c0] on @tp axes = [0] offset = 1 add = 2 for %s step = 0 : memref<2xi32>, memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @signal_data_private(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  // expected-error @+1 {{data buffer must be a symmetric buffer}}
  xfer.signal %f[%c0] on @tp axes = [0] offset = 1 for %x step = 0 : memref<2xi32>, memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @wait_never_raised() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  xfer.signal %f[%c1] on @tp axes = [0] offset = 1 step = 0 : memref<2xi32>
  // expected-error @+1 {{waits on a flag that no 'xfer.put' or 'xfer.signal' of the program raises}}
  xfer.signal_wait %f[%c0] slack = 0 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @wait_negative_slack() {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  // expected-error @+1 {{slack -1 is negative}}
  xfer.signal_wait %f[%c0] slack = -1 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @symmetric_layout() {
  // expected-error @+1 {{allocates row-major buffers with the identity layout}}
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<8xf32, strided<[2]>>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @symmetric_axis() {
  // expected-error @+1 {{grid axis 1 does not exist: grid @tp has 1 axes}}
  %s = xfer.symmetric_alloc on @tp axes = [1] site = 0 : memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @epoch_negative_slack() {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  // expected-error @+1 {{slack -1 is negative}}
  %e = xfer.flag_epoch %f[%c0] slack = -1 step = 0 : memref<2xi32>
  return
}

// -----

func.func @epoch_not_symmetric(%f: memref<2xi32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{flag buffer must be a symmetric buffer}}
  %e = xfer.flag_epoch %f[%c0] slack = 0 step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_wait_outside_kernel(%e: i32) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  // expected-error @+1 {{must be in the body of a fused kernel}}
  xfer.kernel_wait %f[%c0] until %e step = 0 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_wait_plain_forall(%e: i32) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  scf.forall (%i) in (4) {
    // expected-error @+1 {{must be in the body of a fused kernel (an 'scf.forall' marked 'braid.kernel')}}
    xfer.kernel_wait %f[%c0] until %e step = 0 : memref<2xi32>
  }
  return
}

// -----

// A case of a switch over GEMM segments holds polls only inside a kernel.
shard.grid @tp(shape = 4)
func.func @kernel_wait_switch_outside_kernel(%e: i32, %s: index) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  scf.index_switch %s
  case 0 {
    // expected-error @+1 {{must be in the body of a fused kernel}}
    xfer.kernel_wait %f[%c0] until %e step = 0 : memref<2xi32>
    scf.yield
  }
  default {
  }
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_signal_not_last(%a: memref<4xindex>) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %n = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<1xi32>
  %p = xfer.peer_view %f on @tp axes = [0] offset = 1 : memref<2xi32>
  scf.forall (%i) in (4) {
    // expected-error @+1 {{must be among the last ops of its kernel's body}}
    xfer.kernel_signal %p[%c0] arrivals %n[%c0] step = 0 : memref<2xi32>, memref<1xi32>
    memref.store %c0, %a[%i] : memref<4xindex>
  } {braid.kernel}
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_signal_own_flags() {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %n = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<1xi32>
  scf.forall (%i) in (4) {
    // expected-error @+1 {{its flag buffer must be an 'xfer.peer_view' of a symmetric buffer}}
    xfer.kernel_signal %f[%c0] arrivals %n[%c0] step = 0 : memref<2xi32>, memref<1xi32>
  } {braid.kernel}
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_signal_arrivals(%n: memref<1xi32>) {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %p = xfer.peer_view %f on @tp axes = [0] offset = 1 : memref<2xi32>
  scf.forall (%i) in (4) {
    // expected-error @+1 {{arrival buffer must be a symmetric buffer}}
    xfer.kernel_signal %p[%c0] arrivals %n[%c0] step = 0 : memref<2xi32>, memref<1xi32>
  } {braid.kernel}
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @kernel_signal_data_add() {
  %c0 = arith.constant 0 : index
  %f = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %n = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<1xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<4xf32>
  %p = xfer.peer_view %f on @tp axes = [0] offset = 1 : memref<2xi32>
  scf.forall (%i) in (4) {
    // expected-error @+1 {{announces one delivery into its data buffer, so it raises its flag by 1, not 2}}
    xfer.kernel_signal %p[%c0] arrivals %n[%c0] add = 2 for %s step = 0 : memref<2xi32>, memref<1xi32>, memref<4xf32>
  } {braid.kernel}
  return
}
