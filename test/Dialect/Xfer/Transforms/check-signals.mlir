// braid-check-schedule proves the signal protocol of one-sided transfers
// (puts, signals, signal waits on symmetric flags) and catches a planted
// bug for each of its rules: waits that no raise reaches, unbalanced
// flags, reads before the data flag, puts without a credit, raises that
// announce other data, and writes into a slot that peers put into; for
// stores through a peer view announced by a signal (braid-fuse-puts):
// stores with no credit, stores no signal announces, a signal announcing
// nothing, and loads through a peer view.
// RUN: braid-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(braid-check-schedule))' -verify-diagnostics -o /dev/null
// What braid-symmetric-transfers writes passes: symmetric-transfers.mlir.

shard.grid @tp(shape = 4)

// Two ring steps through one slot each: credit, put with its data flag;
// data wait, copy out, credit back. Passes.
func.func @ring(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %s0 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %s1 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<8xf32>
  xfer.signal_wait %flags[%c2] slack = 1 step = 0 : memref<4xi32>
  %p0 = xfer.put %a, %s0 on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8xf32>, memref<8xf32>, memref<4xi32>
  xfer.wait %p0 : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<4xi32>
  memref.copy %s0, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c2] on @tp axes = [0] offset = -1 step = 0 : memref<4xi32>
  xfer.signal_wait %flags[%c3] slack = 1 step = 1 : memref<4xi32>
  %p1 = xfer.put %b, %s1 on @tp axes = [0] offset = 1 signal %flags[%c1] step = 1 : memref<8xf32>, memref<8xf32>, memref<4xi32>
  xfer.wait %p1 : !xfer.request
  xfer.signal_wait %flags[%c1] slack = 0 step = 1 : memref<4xi32>
  memref.copy %s1, %c : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c3] on @tp axes = [0] offset = -1 step = 1 : memref<4xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// Two puts per call into one slot: each waits for the release of the one
// before (the first, for the previous call's second). Passes.
func.func @reused_slot(%a: memref<8xf32>, %b: memref<8xf32>, %x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
  %p0 = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p0 : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
  memref.copy %s, %x : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0 : memref<2xi32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 1 : memref<2xi32>
  %p1 = xfer.put %b, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 1 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p1 : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 1 : memref<2xi32>
  memref.copy %s, %y : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 1 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The credit wait has no slack: it waits for the release of the very data
// it is about to send, which the peer only raises after receiving it.
func.func @credit_deadlock(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  // expected-error @+1 {{deadlock: rank r waits at step 4 for flag 1 of symmetric buffer site 0 (memref<2xi32>) to reach epoch 1 of this call, but the program raises it only 0 time(s) before this point; the peers that raise it run the same program and wait here too}}
  xfer.signal_wait %flags[%c1] slack = 0 step = 4 : memref<2xi32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 4 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 4 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 4 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The credit goes back twice per call but is waited once: the next call's
// put would not wait for the release of this call's data.
func.func @unbalanced(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  // expected-error @+1 {{unbalanced: flag 1 of symmetric buffer site 0 (memref<2xi32>) is raised 2 time(s) per call (first at step 5) but waited 1 time(s) (first at step 5); the next call's waits would pass before their data}}
  xfer.signal_wait %flags[%c1] slack = 1 step = 5 : memref<2xi32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 5 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 5 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 add = 2 step = 5 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// A credit waited but never raised (crashed the checker once).
func.func @never_raised(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  // expected-error @+1 {{unbalanced: flag 1 of symmetric buffer site 0 (memref<2xi32>) is waited 1 time(s) per call (first at step 5) but never raised; a later call waits forever}}
  xfer.signal_wait %flags[%c1] slack = 1 step = 5 : memref<2xi32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 5 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 5 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The copy out of the slot comes before the wait on its data flag.
func.func @read_before_flag(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 6 : memref<2xi32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 6 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  // expected-error @+1 {{race: 'memref.copy' reads symmetric buffer site 1 (memref<8xf32>), which rank r-1 puts into at step 6, before waiting for flag 0 of symmetric buffer site 0 (memref<2xi32>) that announces the data}}
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 6 : memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 6 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The put raises no flag, so the reader has nothing to wait for.
func.func @unsignalled(%a: memref<8xf32>, %b: memref<8xf32>) {
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 step = 7 : memref<8xf32>, memref<8xf32>
  xfer.wait %p : !xfer.request
  // expected-error @+1 {{'linalg.copy' reads symmetric buffer site 1 (memref<8xf32>), but the put of step 7 from rank r-1 into it raises no flag: nothing tells rank r when the data has landed}}
  linalg.copy ins(%s : memref<8xf32>) outs(%b : memref<8xf32>)
  return
}

// -----

shard.grid @tp(shape = 4)

// No credit: the next call's put may land while the peer still copies out
// this call's data.
func.func @no_credit(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  // expected-error @+1 {{race: the put of step 8 into symmetric buffer site 1 (memref<8xf32>) of rank r+1 may land before rank r+1 has read what the previous put left there: no earlier signal_wait of rank r covers a flag that rank r+1 raises after that read (a credit)}}
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 8 : memref<8xf32>, memref<8xf32>, memref<1xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 8 : memref<1xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The credit goes back before the copy out: a fast writer's next put may
// overwrite the slot while it is read.
func.func @early_credit(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 9 : memref<2xi32>
  // expected-error @+1 {{race: the put of step 9 into symmetric buffer site 1 (memref<8xf32>) of rank r+1 may land before rank r+1 has read what the previous put left there}}
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 9 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 9 : memref<2xi32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 9 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The credit is raised on the wrong peer (the reader's other neighbour).
func.func @credit_to_wrong_peer(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 10 : memref<2xi32>
  // expected-error @+1 {{race: the put of step 10 into symmetric buffer site 1 (memref<8xf32>) of rank r+1 may land before}}
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 10 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 10 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = 1 step = 10 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// A second put per call into the slot, whose credit wait (slack 2) only
// covers the previous call's release of its second delivery, not this
// call's release of the first.
func.func @stale_credit(%a: memref<8xf32>, %x: memref<8xf32>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 11 : memref<2xi32>
  %p0 = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 11 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p0 : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 11 : memref<2xi32>
  memref.copy %s, %x : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 11 : memref<2xi32>
  xfer.signal_wait %flags[%c1] slack = 2 step = 12 : memref<2xi32>
  // expected-error @+1 {{race: the put of step 12 into symmetric buffer site 1 (memref<8xf32>) of rank r+1 may land before}}
  %p1 = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 12 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  xfer.wait %p1 : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 12 : memref<2xi32>
  memref.copy %s, %y : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 12 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// A signal raises the data flag of a slot: the reader would take it for
// data that has not landed.
func.func @forged_data_flag(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 13 : memref<8xf32>, memref<8xf32>, memref<1xi32>
  // expected-error @+1 {{step 13: flag 0 of symmetric buffer site 0 (memref<1xi32>) announces the puts into symmetric buffer site 1 (memref<8xf32>); raising it here tells a reader data has landed that has not}}
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 step = 13 : memref<1xi32>
  xfer.wait %p : !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)

// The reader writes the slot its peer puts into.
func.func @local_write(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %cst = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 14 : memref<8xf32>, memref<8xf32>, memref<1xi32>
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 14 : memref<1xi32>
  // expected-error @+1 {{race: 'linalg.fill' writes symmetric buffer site 1 (memref<8xf32>), which rank r-1 puts into at step 14; only puts may write it}}
  linalg.fill ins(%cst : f32) outs(%s : memref<8xf32>)
  return
}

// -----

shard.grid @tp(shape = 4)

// A flag index the checker cannot read.
func.func @dynamic_index(%a: memref<8xf32>, %i: index) {
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  // expected-error @+1 {{the signal protocol cannot be checked: the flag must be a constant index into an 'xfer.symmetric_alloc' (pass --check-schedule=false to skip the check)}}
  xfer.signal %flags[%i] on @tp axes = [0] offset = 1 step = 15 : memref<4xi32>
  xfer.signal_wait %flags[%i] slack = 0 step = 15 : memref<4xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// Signals in a loop.
func.func @in_loop(%n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<1xi32>
  scf.for %i = %c0 to %n step %c1 {
    // expected-error @+1 {{the signal protocol cannot be checked: signals and puts inside loops, branches or other blocks are not modeled (pass --check-schedule=false to skip the check)}}
    xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 step = 16 : memref<1xi32>
    xfer.signal_wait %flags[%c0] slack = 0 step = 16 : memref<1xi32>
  }
  return
}

// -----

shard.grid @tp(shape = 4)

// The put still reads its source when a fill overwrites it.
func.func @put_source_race(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 17 : memref<2xi32>
  %p = xfer.put %a, %s on @tp axes = [0] offset = 1 signal %flags[%c0] step = 17 : memref<8xf32>, memref<8xf32>, memref<2xi32>
  // expected-error @+1 {{race: 'linalg.fill' writes %arg0 (memref<8xf32>) while the xfer.put of step 17 still reads it (it is waited later)}}
  linalg.fill ins(%cst : f32) outs(%a : memref<8xf32>)
  xfer.wait %p : !xfer.request
  xfer.signal_wait %flags[%c0] slack = 0 step = 17 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 17 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// A kernel stores into the peer's slot and a signal for the slot announces
// it, as braid-fuse-puts writes; the credit comes before the kernel.
// Passes.
func.func @stores(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 18 : memref<2xi32>
  %peer = xfer.peer_view %s on @tp axes = [0] offset = 1 : memref<8xf32>
  scf.forall (%i) in (8) {
    %t = memref.subview %a[%i] [1] [1] : memref<8xf32> to memref<1xf32, strided<[1], offset: ?>>
    %pt = memref.subview %peer[%i] [1] [1] : memref<8xf32> to memref<1xf32, strided<[1], offset: ?>>
    memref.copy %t, %pt : memref<1xf32, strided<[1], offset: ?>> to memref<1xf32, strided<[1], offset: ?>>
  } {braid.kernel}
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s step = 18 : memref<2xi32>, memref<8xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 18 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 18 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// The credit is waited after the kernel has stored into the peer's slot.
func.func @stores_without_credit(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %peer = xfer.peer_view %s on @tp axes = [0] offset = 1 : memref<8xf32>
  // expected-error @+1 {{race: the stores of step 19 into symmetric buffer site 1 (memref<8xf32>) of rank r+1 may land before rank r+1 has read what the previous delivery left there: no earlier signal_wait of rank r covers a flag that rank r+1 raises after that read (a credit)}}
  scf.forall (%i) in (8) {
    %t = memref.subview %a[%i] [1] [1] : memref<8xf32> to memref<1xf32, strided<[1], offset: ?>>
    %pt = memref.subview %peer[%i] [1] [1] : memref<8xf32> to memref<1xf32, strided<[1], offset: ?>>
    memref.copy %t, %pt : memref<1xf32, strided<[1], offset: ?>> to memref<1xf32, strided<[1], offset: ?>>
  } {braid.kernel}
  xfer.signal_wait %flags[%c1] slack = 1 step = 19 : memref<2xi32>
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s step = 19 : memref<2xi32>, memref<8xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 19 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 19 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// Stores into the peer's slot that no signal announces.
func.func @stores_unannounced(%a: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 20 : memref<2xi32>
  %peer = xfer.peer_view %s on @tp axes = [0] offset = 1 : memref<8xf32>
  // expected-error @+1 {{stores into the copy of symmetric buffer site 1 (memref<8xf32>) that rank r+1 holds, but no 'xfer.signal' for it at that peer offset follows: nothing tells rank r+1 when the data has landed}}
  memref.copy %a, %peer : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 20 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// A signal for a slot that this rank stored nothing into.
func.func @announces_nothing(%b: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  xfer.signal_wait %flags[%c1] slack = 1 step = 21 : memref<2xi32>
  // expected-error @+1 {{step 21: announces data in symmetric buffer site 1 (memref<8xf32>) of rank r+1, but rank r stored nothing into that copy since the last announcement}}
  xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %s step = 21 : memref<2xi32>, memref<8xf32>
  xfer.signal_wait %flags[%c0] slack = 0 step = 21 : memref<2xi32>
  memref.copy %s, %b : memref<8xf32> to memref<8xf32>
  xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 21 : memref<2xi32>
  return
}

// -----

shard.grid @tp(shape = 4)

// Loads from a peer's copy (a pull) are not modeled.
func.func @peer_load(%b: memref<8xf32>) {
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %s = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
  %peer = xfer.peer_view %s on @tp axes = [0] offset = 1 : memref<8xf32>
  // expected-error @+1 {{the signal protocol cannot be checked: 'memref.copy' loads from a peer's copy of a buffer, which is modeled only for stores into a symmetric buffer that a signal announces (pass --check-schedule=false to skip the check)}}
  memref.copy %peer, %b : memref<8xf32> to memref<8xf32>
  return
}
