// braid-check-schedule proves good schedules and catches planted bad ones.
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(braid-check-schedule))' -verify-diagnostics -o /dev/null

shard.grid @tp(shape = 4)

// A ring step: send to the right, receive from the left, compute on what
// is here meanwhile, wait both. Passes.
func.func @ring_step(%cur: memref<8xf32>, %next: memref<8xf32>, %other: memref<8xf32>) {
  %s = xfer.send %cur on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  %r = xfer.recv %next on @tp axes = [0] offset = -1 step = 0 : memref<8xf32>
  linalg.copy ins(%cur : memref<8xf32>) outs(%other : memref<8xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// The receive is waited before the send is posted: every rank blocks.
func.func @deadlock(%a: memref<8xf32>, %b: memref<8xf32>) {
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 1 : memref<8xf32>
  // expected-error @+1 {{deadlock: rank r waits at step 1 for the receive from rank r-1 along axis 0 of @tp before the matching send is posted; rank r-1 runs the same program and waits here too}}
  xfer.wait %r : !xfer.request
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 1 : memref<8xf32>
  xfer.wait %s : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// A send waited before the receive is posted may never complete.
func.func @send_deadlock(%a: memref<8xf32>, %b: memref<8xf32>) {
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 2 : memref<8xf32>
  // expected-error @+1 {{deadlock: rank r waits at step 2 for its send to rank r+1 along axis 0 of @tp to complete before posting the matching receive}}
  xfer.wait %s : !xfer.request
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 2 : memref<8xf32>
  xfer.wait %r : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// Two sends to the right, one receive from the left: the second send waits
// forever.
func.func @unmatched(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %s0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  %r0 = xfer.recv %b on @tp axes = [0] offset = -1 step = 0 : memref<8xf32>
  xfer.wait %s0, %r0 : !xfer.request, !xfer.request
  %s1 = xfer.send %c on @tp axes = [0] offset = 1 step = 1 : memref<8xf32>
  // expected-error @+1 {{unmatched: the send of step 1 to rank r+1 along axis 0 of @tp has no matching receive in this block: 2 send(s), 1 receive(s); it never completes}}
  xfer.wait %s1 : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// Sizes of a matched pair differ.
func.func @size_mismatch(%a: memref<8xf32>, %b: memref<4xf32>) {
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 3 : memref<8xf32>
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 3 : memref<4xf32>
  // expected-error @+1 {{step 3: rank r-1 sends 32 bytes along axis 0 of @tp but rank r receives 16 into}}
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// The source is overwritten while it is still being sent.
func.func @overwrite_source(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 4 : memref<8xf32>
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 4 : memref<8xf32>
  // expected-error @+1 {{race: 'linalg.copy' writes}}
  linalg.copy ins(%c : memref<8xf32>) outs(%a : memref<8xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// The destination is read before the data has arrived.
func.func @read_early(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 5 : memref<8xf32>
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 5 : memref<8xf32>
  // expected-error @+1 {{race: 'linalg.copy' accesses}}
  linalg.copy ins(%b : memref<8xf32>) outs(%c : memref<8xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// A view of the receive buffer counts; a disjoint static subview does not.
func.func @views(%a: memref<8xf32>, %b: memref<16xf32>, %c: memref<8xf32>) {
  %lo = memref.subview %b[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  %hi = memref.subview %b[8] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: 8>>
  %s = xfer.send %a on @tp axes = [0] offset = 1 step = 6 : memref<8xf32>
  %r = xfer.recv %lo on @tp axes = [0] offset = -1 step = 6 : memref<8xf32, strided<[1]>>
  linalg.copy ins(%c : memref<8xf32>) outs(%hi : memref<8xf32, strided<[1], offset: 8>>)
  // expected-error @+1 {{race: 'linalg.copy' accesses}}
  linalg.copy ins(%b : memref<16xf32>) outs(%b : memref<16xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// Freeing the destination of a transfer in flight.
func.func @freed_early(%a: memref<8xf32>) {
  %b = memref.alloc() : memref<32xf32>
  %g = xfer.all_gather %a, %b on @tp axes = [0] step = 7 : memref<8xf32>, memref<32xf32>
  // expected-error @+1 {{race: 'memref.dealloc' accesses}}
  memref.dealloc %b : memref<32xf32>
  xfer.wait %g : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

func.func @other_block(%a: memref<8xf32>, %c: i1) {
  %s = xfer.send %a on @tp axes = [0] offset = 0 step = 8 : memref<8xf32>
  scf.if %c {
    // expected-error @+1 {{waits for a request posted in another block; the schedule cannot be checked}}
    xfer.wait %s : !xfer.request
  }
  return
}

// -----

shard.grid @tp(shape = 4)

// Buffers of a memory plan (views of a braid.arena global) alias where
// their bytes overlap: writing bytes 32-63 of the arena while the send
// still reads bytes 0-63 is a race; bytes 64-95 are another buffer.
memref.global "private" @arena : memref<128xi8> = uninitialized {alignment = 64 : i64}
func.func @planned(%b: memref<8xf32>, %c: memref<8xf32>) {
  %arena = memref.get_global @arena : memref<128xi8> {braid.arena}
  %c0 = arith.constant 0 : index
  %c32 = arith.constant 32 : index
  %c64 = arith.constant 64 : index
  %sent = memref.view %arena[%c0][] : memref<128xi8> to memref<16xf32>
  %reuse = memref.view %arena[%c32][] : memref<128xi8> to memref<8xf32>
  %apart = memref.view %arena[%c64][] : memref<128xi8> to memref<8xf32>
  %s = xfer.send %sent on @tp axes = [0] offset = 1 step = 6 : memref<16xf32>
  %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 6 : memref<8xf32>
  linalg.copy ins(%c : memref<8xf32>) outs(%apart : memref<8xf32>)
  // expected-error @+1 {{race: 'linalg.copy' writes}}
  linalg.copy ins(%c : memref<8xf32>) outs(%reuse : memref<8xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  return
}
