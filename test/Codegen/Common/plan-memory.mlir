// RUN: braid-opt %s --split-input-file --braid-plan-memory 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-plan-memory --verify-diagnostics -o /dev/null
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(braid-plan-memory,func.func(braid-check-schedule))" 2>/dev/null | FileCheck %s --check-prefix=CHECKED

// A chain: %a dies where %c is born, so they share bytes; %b lives across
// both and gets its own. The arena is the largest set live at once.
// CHECK-LABEL: module attributes {braid.memory_plan = [{arena_bytes = 2048 : i64, buffer_bytes = 3072 : i64, buffers = 3 : i64, function = "chain", heap_bytes = 0 : i64}]}
// CHECK: memref.global "private" @__braid_arena_chain : memref<2048xi8> = uninitialized {alignment = 64 : i64}
// CHECK-LABEL: func.func @chain
// CHECK: %[[ARENA:.*]] = memref.get_global @__braid_arena_chain : memref<2048xi8> {braid.arena}
// CHECK-NOT: memref.alloc
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[OA:.*]]][] {{.*}}: memref<2048xi8> to memref<256xf32>
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[OB:.*]]][] {{.*}}: memref<2048xi8> to memref<256xf32>
// CHECK: %[[C:.*]] = memref.view %[[ARENA]][%[[OA2:.*]]][] {{.*}}: memref<2048xi8> to memref<256xf32>
// CHECK: linalg.copy ins(%[[C]] : memref<256xf32>) outs(%arg1
func.func @chain(%x: memref<256xf32>, %y: memref<256xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  %b = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  linalg.copy ins(%x : memref<256xf32>) outs(%a : memref<256xf32>)
  linalg.copy ins(%a : memref<256xf32>) outs(%b : memref<256xf32>)
  %c = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  linalg.copy ins(%b : memref<256xf32>) outs(%c : memref<256xf32>)
  linalg.copy ins(%c : memref<256xf32>) outs(%y : memref<256xf32>)
  return
}

// -----

// A transfer reads its buffer until its wait: %sent lives to the wait, so
// %later, first written between the send and the wait, cannot take its
// bytes, although %sent has no use after the send itself. %after, used only
// after the wait, can. The schedule checker agrees (no race reported).
// CHECK-LABEL: func.func @transfer
// CHECK: %[[ARENA:.*]] = memref.get_global @__braid_arena_transfer : memref<128xi8>
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: %[[SENT:.*]] = memref.view %[[ARENA]][%[[ZERO]]][] {{.*}}: memref<128xi8> to memref<8xf32>
// CHECK: xfer.send %[[SENT]]
// CHECK: %[[HIGH:.*]] = arith.constant 64 : index
// CHECK: %[[LATER:.*]] = memref.view %[[ARENA]][%[[HIGH]]][] {{.*}}: memref<128xi8> to memref<8xf32>
// CHECK: xfer.wait
// CHECK: %[[LOW:.*]] = arith.constant 0 : index
// CHECK: %[[AFTER:.*]] = memref.view %[[ARENA]][%[[LOW]]][] {{.*}}: memref<128xi8> to memref<8xf32>
// CHECKED-LABEL: func.func @transfer
shard.grid @tp(shape = 2)
func.func @transfer(%x: memref<8xf32>, %y: memref<8xf32>, %z: memref<8xf32>) {
  %sent = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%sent : memref<8xf32>)
  %s = xfer.send %sent on @tp axes = [0] offset = 1 step = 0 : memref<8xf32>
  %r = xfer.recv %z on @tp axes = [0] offset = -1 step = 0 : memref<8xf32>
  %later = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%later : memref<8xf32>)
  linalg.copy ins(%later : memref<8xf32>) outs(%y : memref<8xf32>)
  xfer.wait %s, %r : !xfer.request, !xfer.request
  %after = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%after : memref<8xf32>)
  linalg.copy ins(%after : memref<8xf32>) outs(%y : memref<8xf32>)
  return
}

// -----

// Kept on the heap: a returned buffer and a buffer whose view is returned
// (the caller's, without a remark), a dynamically sized one, and one with
// a layout, one aligned beyond the arena's 64 bytes. A use inside a kernel's
// region counts at the kernel, so %tmp and %other overlap in time.
// CHECK: braid.memory_plan = [{arena_bytes = 128 : i64, buffer_bytes = 128 : i64, buffers = 2 : i64, function = "escapes", heap_bytes = 80 : i64}]
// CHECK-LABEL: func.func @escapes
// CHECK-DAG: memref.alloc() : memref<4xf32>
// CHECK-DAG: memref.alloc() : memref<16xf32>
// CHECK-DAG: memref.alloc(%arg1) : memref<?xf32>
// CHECK-DAG: memref.alloc() : memref<4x4xf32, strided<[1, 4]>>
// CHECK-DAG: memref.alloc() {alignment = 128 : i64} : memref<8xf32>
// CHECK: memref.view %{{.*}}[%{{.*}}][] {{.*}}: memref<128xi8> to memref<8xf32>
// CHECK: memref.view %{{.*}}[%{{.*}}][] {{.*}}: memref<128xi8> to memref<8xf32>
// CHECK: return
func.func @escapes(%x: memref<8xf32>, %n: index) -> (memref<4xf32>, memref<8xf32, strided<[1]>>) {
  %ret = memref.alloc() : memref<4xf32>
  %big = memref.alloc() : memref<16xf32>
  %view = memref.subview %big[0] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1]>>
  // expected-remark @+1 {{left out of the memory plan: its size is not static}}
  %dyn = memref.alloc(%n) : memref<?xf32>
  // expected-remark @+1 {{left out of the memory plan: it has a layout, a memory space or an alignment above 64 bytes}}
  %strided = memref.alloc() : memref<4x4xf32, strided<[1, 4]>>
  // expected-remark @+1 {{an alignment above 64 bytes}}
  %aligned = memref.alloc() {alignment = 128 : i64} : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%aligned : memref<8xf32>)
  %tmp = memref.alloc() : memref<8xf32>
  %other = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%tmp : memref<8xf32>)
  linalg.copy ins(%x : memref<8xf32>) outs(%other : memref<8xf32>)
  scf.forall (%i) in (8) {
    %v = memref.load %tmp[%i] : memref<8xf32>
    memref.store %v, %other[%i] : memref<8xf32>
  }
  return %ret, %view : memref<4xf32>, memref<8xf32, strided<[1]>>
}

// -----

// Nothing to plan: no arena, no plan attribute.
// CHECK-NOT: braid.memory_plan
// CHECK-LABEL: func.func @nothing
// CHECK-NOT: memref.global
// CHECK: memref.alloc(%arg0)
func.func @nothing(%n: index) -> memref<?xf32> {
  // expected-remark @+1 {{its size is not static}}
  %dyn = memref.alloc(%n) : memref<?xf32>
  return %dyn : memref<?xf32>
}

// -----

// Values read from a buffer carry no reference to it: a sum yielded by a
// loop does not make the buffer escape.
// CHECK-LABEL: func.func @reduce
// CHECK: memref.get_global @__braid_arena_reduce : memref<64xi8> {braid.arena}
// CHECK-NOT: memref.alloc
// CHECK: scf.for
func.func @reduce(%x: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %buf = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%buf : memref<8xf32>)
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
    %v = memref.load %buf[%i] : memref<8xf32>
    %next = arith.addf %acc, %v : f32
    scf.yield %next : f32
  }
  return %sum : f32
}

// -----

// A function of several blocks keeps its heap buffers.
// CHECK-LABEL: func.func @blocks
// CHECK: memref.alloc() : memref<8xf32>
// expected-remark @+1 {{no memory plan: the function has 2 blocks}}
func.func @blocks(%x: memref<8xf32>, %c: i1) {
  %buf = memref.alloc() : memref<8xf32>
  linalg.copy ins(%x : memref<8xf32>) outs(%buf : memref<8xf32>)
  cf.cond_br %c, ^bb1, ^bb1
^bb1:
  return
}

// -----

// A buffer yielded out of a region may outlive what the plan can see.
// CHECK-LABEL: func.func @yielded
// CHECK: memref.alloc() : memref<8xf32>
func.func @yielded(%x: memref<8xf32>, %c: i1) {
  // expected-remark @+1 {{left out of the memory plan: the buffer may leave the function (yielded, or held by an op's memref result)}}
  %buf = memref.alloc() : memref<8xf32>
  %r = scf.if %c -> memref<8xf32> {
    scf.yield %buf : memref<8xf32>
  } else {
    scf.yield %x : memref<8xf32>
  }
  linalg.copy ins(%x : memref<8xf32>) outs(%r : memref<8xf32>)
  return
}

// -----

// A buffer of an scf.for's iteration (braid-tile-attention's block of
// scores) lives while the loop runs: every iteration reuses its bytes, and
// %before, dead before the loop, shares them. One yielded to the next
// iteration leaves it and stays on the heap, with a remark.
// CHECK-LABEL: module attributes {braid.memory_plan = [{arena_bytes = 1024 : i64, buffer_bytes = 2048 : i64, buffers = 2 : i64, function = "loop", heap_bytes = 1024 : i64}]}
// CHECK-LABEL: func.func @loop
// CHECK: %[[ARENA:.*]] = memref.get_global @__braid_arena_loop
// CHECK: memref.view %[[ARENA]]
// CHECK: scf.for
// CHECK: memref.view %[[ARENA]]
// CHECK: memref.alloc
// CHECK: scf.yield
func.func @loop(%x: memref<256xf32>, %y: memref<256xf32>, %init: memref<256xf32>) -> memref<256xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %before = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
  linalg.copy ins(%x : memref<256xf32>) outs(%before : memref<256xf32>)
  linalg.copy ins(%before : memref<256xf32>) outs(%y : memref<256xf32>)
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (memref<256xf32>) {
    %block = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
    linalg.copy ins(%x : memref<256xf32>) outs(%block : memref<256xf32>)
    linalg.copy ins(%block : memref<256xf32>) outs(%y : memref<256xf32>)
    // expected-remark @below {{left out of the memory plan: the buffer may leave the function}}
    %next = memref.alloc() {alignment = 64 : i64} : memref<256xf32>
    linalg.copy ins(%acc : memref<256xf32>) outs(%next : memref<256xf32>)
    scf.yield %next : memref<256xf32>
  }
  return %r : memref<256xf32>
}
