// braid-symmetric-transfers: marked send/receive pairs become credit wait +
// put with a data signal, and data wait + copy + credit; unmarked pairs stay
// (with zero-copy=false: the copies; symmetric-zero-copy.mlir elides them).
// RUN: braid-opt %s --braid-symmetric-transfers=zero-copy=false -split-input-file -verify-diagnostics | FileCheck %s
// Its output passes braid-check-schedule's signal rules, with and without
// copies (any error of the checker would be unexpected).
// RUN: braid-opt %s --pass-pipeline='builtin.module(braid-symmetric-transfers{zero-copy=false},func.func(braid-check-schedule))' -split-input-file -verify-diagnostics -o /dev/null
// RUN: braid-opt %s --pass-pipeline='builtin.module(braid-symmetric-transfers,func.func(braid-check-schedule))' -split-input-file -verify-diagnostics -o /dev/null

shard.grid @tp(shape = 4)

// CHECK-LABEL: func.func @ring_step
// CHECK-DAG: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
// CHECK-DAG: %[[SLOT0:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x4xf32>
// CHECK-DAG: %[[SLOT1:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<8x4xf32>
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : index
// First step: the credit of channel 0, then the put into the next rank.
// CHECK: xfer.signal_wait %[[FLAGS]][%[[C2]]] slack = 1 step = 0
// CHECK-NEXT: %[[P0:.*]] = xfer.put %{{.*}}, %[[SLOT0]] on @tp axes = [0] offset = 1 signal %[[FLAGS]][%[[C0]]] step = 0
// The unmarked pair stays two-sided.
// CHECK: xfer.send %{{.*}} offset = 1 step = 5
// CHECK: xfer.recv %{{.*}} offset = -1 step = 5
// CHECK: linalg.fill
// CHECK: xfer.wait %[[P0]], %{{.*}}, %{{.*}} :
// CHECK-NEXT: xfer.signal_wait %[[FLAGS]][%[[C0]]] slack = 0 step = 0
// CHECK-NEXT: memref.copy %[[SLOT0]], %[[B:.*]] :
// CHECK-NEXT: xfer.signal %[[FLAGS]][%[[C2]]] on @tp axes = [0] offset = -1 step = 0
// Second step forwards what arrived, on channel 1.
// CHECK: xfer.signal_wait %[[FLAGS]][%[[C3]]] slack = 1 step = 1
// CHECK-NEXT: %[[P1:.*]] = xfer.put %[[B]], %[[SLOT1]] on @tp axes = [0] offset = 1 signal %[[FLAGS]][%[[C1]]] step = 1
// CHECK-NEXT: xfer.wait %[[P1]] :
// CHECK-NEXT: xfer.signal_wait %[[FLAGS]][%[[C1]]] slack = 0 step = 1
// CHECK-NEXT: memref.copy %[[SLOT1]], %{{.*}} :
// CHECK-NEXT: xfer.signal %[[FLAGS]][%[[C3]]] on @tp axes = [0] offset = -1 step = 1
// CHECK-NOT: xfer.send
// CHECK: return
func.func @ring_step(%a: memref<8x4xf32>, %u: memref<8x4xf32>, %v: memref<8x4xf32>, %out: memref<8x4xf32>) {
  %cst = arith.constant 0.0 : f32
  %b = memref.alloc() : memref<8x4xf32>
  %c = memref.alloc() : memref<8x4xf32>
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 {dist.symmetric} : memref<8x4xf32>
  %1 = xfer.recv %b on @tp axes = [0] offset = -1 step = 0 {dist.symmetric} : memref<8x4xf32>
  %2 = xfer.send %u on @tp axes = [0] offset = 1 step = 5 : memref<8x4xf32>
  %3 = xfer.recv %v on @tp axes = [0] offset = -1 step = 5 : memref<8x4xf32>
  linalg.fill ins(%cst : f32) outs(%out : memref<8x4xf32>)
  xfer.wait %0, %1, %2, %3 : !xfer.request, !xfer.request, !xfer.request, !xfer.request
  %4 = xfer.send %b on @tp axes = [0] offset = 1 step = 1 {dist.symmetric} : memref<8x4xf32>
  %5 = xfer.recv %c on @tp axes = [0] offset = -1 step = 1 {dist.symmetric} : memref<8x4xf32>
  xfer.wait %4, %5 : !xfer.request, !xfer.request
  memref.copy %c, %out : memref<8x4xf32> to memref<8x4xf32>
  memref.dealloc %b : memref<8x4xf32>
  memref.dealloc %c : memref<8x4xf32>
  return
}

// -----

// Two rings in opposite directions on a 2x2 grid's axis 1: each direction is
// its own channel (in a group of two, +1 and -1 are the same peer).
shard.grid @g(shape = 2x2)

// CHECK-LABEL: func.func @bidirectional
// CHECK: %[[FLAGS:.*]] = xfer.symmetric_alloc on @g axes = [1] site = 0 : memref<4xi32>
// CHECK: xfer.put %{{.*}} offset = 1 signal %[[FLAGS]][%{{.*}}] step = 0 : memref<2x4xbf16>, memref<2x4xbf16>, memref<4xi32>
// CHECK: xfer.put %{{.*}} offset = -1 signal %[[FLAGS]][%{{.*}}] step = 0 : memref<2x4xbf16>, memref<2x4xbf16>, memref<4xi32>
// CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @g axes = [1] offset = -1 step = 0
// CHECK: xfer.signal %[[FLAGS]][%{{.*}}] on @g axes = [1] offset = 1 step = 0
func.func @bidirectional(%a: memref<2x4xbf16>, %b: memref<2x4xbf16>, %x: memref<2x4xbf16>, %y: memref<2x4xbf16>) {
  %0 = xfer.send %a on @g axes = [1] offset = 1 step = 0 {dist.symmetric} : memref<2x4xbf16>
  %1 = xfer.recv %x on @g axes = [1] offset = -1 step = 0 {dist.symmetric} : memref<2x4xbf16>
  %2 = xfer.send %b on @g axes = [1] offset = -1 step = 0 {dist.symmetric} : memref<2x4xbf16>
  %3 = xfer.recv %y on @g axes = [1] offset = 1 step = 0 {dist.symmetric} : memref<2x4xbf16>
  xfer.wait %0, %1, %2, %3 : !xfer.request, !xfer.request, !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @unmatched(%a: memref<8xf32>, %b: memref<8xf32>) {
  // expected-error @+1 {{this transfer at step 3 has no partner: the function has 1 marked sends with offset 1 and 0 marked receives with offset -1}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 3 {dist.symmetric} : memref<8xf32>
  %1 = xfer.recv %b on @tp axes = [0] offset = -1 step = 3 : memref<8xf32>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  return
}

// -----

shard.grid @tp(shape = 4)
func.func @sizes(%a: memref<8xf32>, %b: memref<4xf32>) {
  // expected-error @+1 {{the send ('memref<8xf32>') and the receive it meets ('memref<4xf32>') need static shapes and the same elements}}
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 3 {dist.symmetric} : memref<8xf32>
  %1 = xfer.recv %b on @tp axes = [0] offset = -1 step = 3 {dist.symmetric} : memref<4xf32>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  return
}
