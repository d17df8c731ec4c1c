// braid-symmetric-transfers without copies: where a receive buffer is an
// allocation only read after its receive, its readers read the slot and
// the credit goes back after the last of them; otherwise the copy stays.
// RUN: braid-opt %s --braid-symmetric-transfers -split-input-file -verify-diagnostics | FileCheck %s
// The checker proves the result (a late credit is still a credit).
// RUN: braid-opt %s --pass-pipeline='builtin.module(braid-symmetric-transfers,func.func(braid-check-schedule))' -split-input-file -verify-diagnostics -o /dev/null

shard.grid @tp(shape = 4)

// A ring: what arrives is consumed by a matmul and forwarded; the next
// step's arrival is copied to the result (a read too).
// CHECK-LABEL: func.func @ring
// CHECK-DAG: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
// CHECK-DAG: %[[S0:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x4xf32>
// CHECK-DAG: %[[S1:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<8x4xf32>
// CHECK: xfer.put %{{.*}}, %[[S0]]
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 0 step = 0
// CHECK-NOT: memref.copy %[[S0]]
// CHECK: %[[P1:.*]] = xfer.put %[[S0]], %[[S1]] on @tp axes = [0] offset = 1
// CHECK: linalg.matmul ins(%[[S0]], %{{.*}} : memref<8x4xf32>, memref<4x4xf32>)
// CHECK: xfer.wait %[[P1]]
// The credit of step 0 after both reads.
// CHECK-NEXT: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = -1 step = 0
// CHECK: xfer.signal_wait %[[FLAGS]][%{{.*}}] slack = 0 step = 1
// CHECK: memref.copy %[[S1]], %{{.*}} : memref<8x4xf32> to memref<8x4xf32>
// CHECK-NEXT: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = -1 step = 1
// CHECK-NEXT: memref.dealloc
func.func @ring(%a: memref<8x4xf32>, %w: memref<4x4xf32>, %y: memref<8x4xf32>, %out: memref<8x4xf32>) {
  %b = memref.alloc() : memref<8x4xf32>
  %c = memref.alloc() : memref<8x4xf32>
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 {dist.symmetric} : memref<8x4xf32>
  %1 = xfer.recv %b on @tp axes = [0] offset = -1 step = 0 {dist.symmetric} : memref<8x4xf32>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  %2 = xfer.send %b on @tp axes = [0] offset = 1 step = 1 {dist.symmetric} : memref<8x4xf32>
  %3 = xfer.recv %c on @tp axes = [0] offset = -1 step = 1 {dist.symmetric} : memref<8x4xf32>
  linalg.matmul ins(%b, %w : memref<8x4xf32>, memref<4x4xf32>) outs(%y : memref<8x4xf32>)
  xfer.wait %2, %3 : !xfer.request, !xfer.request
  memref.copy %c, %out : memref<8x4xf32> to memref<8x4xf32>
  memref.dealloc %b : memref<8x4xf32>
  memref.dealloc %c : memref<8x4xf32>
  return
}

// -----

shard.grid @tp(shape = 2)

// The copy stays where the receive buffer is written afterwards (an
// accumulator), is a function argument, or is a view of a larger buffer.
// CHECK-LABEL: func.func @kept
// CHECK: memref.copy %{{.*}}, %[[ACC:[^ ]*]] : memref<4xf32> to memref<4xf32>
// CHECK: linalg.add ins(%[[ACC]], %{{.*}} : memref<4xf32>, memref<4xf32>) outs(%[[ACC]] : memref<4xf32>)
// CHECK: memref.copy %{{.*}}, %arg1 : memref<4xf32> to memref<4xf32>
// CHECK: memref.copy %{{.*}}, %{{.*}} : memref<4xf32> to memref<4xf32, strided<[1], offset: 4>>
func.func @kept(%a: memref<4xf32>, %arg: memref<4xf32>, %big: memref<8xf32>) {
  %acc = memref.alloc() : memref<4xf32>
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 {dist.symmetric} : memref<4xf32>
  %1 = xfer.recv %acc on @tp axes = [0] offset = -1 step = 0 {dist.symmetric} : memref<4xf32>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  linalg.add ins(%acc, %a : memref<4xf32>, memref<4xf32>) outs(%acc : memref<4xf32>)
  %2 = xfer.send %a on @tp axes = [0] offset = 1 step = 1 {dist.symmetric} : memref<4xf32>
  %3 = xfer.recv %arg on @tp axes = [0] offset = -1 step = 1 {dist.symmetric} : memref<4xf32>
  xfer.wait %2, %3 : !xfer.request, !xfer.request
  %view = memref.subview %big[4] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: 4>>
  %4 = xfer.send %a on @tp axes = [0] offset = 1 step = 2 {dist.symmetric} : memref<4xf32>
  %5 = xfer.recv %view on @tp axes = [0] offset = -1 step = 2 {dist.symmetric} : memref<4xf32, strided<[1], offset: 4>>
  xfer.wait %4, %5 : !xfer.request, !xfer.request
  memref.dealloc %acc : memref<4xf32>
  return
}

// -----

shard.grid @tp(shape = 2)

// Read through views (ring attention scoring a block's keys in pieces):
// the credit goes back after the last reader of the last view, not after
// the view ops.
// CHECK-LABEL: func.func @pieces
// CHECK-DAG: %[[FLAGS:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
// CHECK-DAG: %[[S:.*]] = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8x4xf32>
// CHECK: %[[V0:.*]] = memref.subview %[[S]][0, 0] [4, 4] [1, 1]
// CHECK: %[[V1:.*]] = memref.subview %[[S]][4, 0] [4, 4] [1, 1]
// CHECK: linalg.matmul ins(%[[V0]], %{{.*}} :
// CHECK: linalg.matmul ins(%[[V1]], %{{.*}} :
// CHECK-NEXT: xfer.signal %[[FLAGS]][%{{.*}}] on @tp axes = [0] offset = -1 step = 0
// CHECK-NEXT: memref.dealloc
func.func @pieces(%a: memref<8x4xf32>, %w: memref<4x4xf32>, %y0: memref<4x4xf32>, %y1: memref<4x4xf32>) {
  %b = memref.alloc() : memref<8x4xf32>
  %0 = xfer.send %a on @tp axes = [0] offset = 1 step = 0 {dist.symmetric} : memref<8x4xf32>
  %1 = xfer.recv %b on @tp axes = [0] offset = -1 step = 0 {dist.symmetric} : memref<8x4xf32>
  xfer.wait %0, %1 : !xfer.request, !xfer.request
  %v0 = memref.subview %b[0, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1]>>
  %v1 = memref.subview %b[4, 0] [4, 4] [1, 1] : memref<8x4xf32> to memref<4x4xf32, strided<[4, 1], offset: 16>>
  linalg.matmul ins(%v0, %w : memref<4x4xf32, strided<[4, 1]>>, memref<4x4xf32>) outs(%y0 : memref<4x4xf32>)
  linalg.matmul ins(%v1, %w : memref<4x4xf32, strided<[4, 1], offset: 16>>, memref<4x4xf32>) outs(%y1 : memref<4x4xf32>)
  memref.dealloc %b : memref<8x4xf32>
  return
}
