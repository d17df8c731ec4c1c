// fuse-collectives: a contraction whose result is reduce-scattered becomes
// push_matmul_rs: the partial of each peer's block is computed on its own
// (the nearest peer's first, this rank's own last) into a placeholder of
// its own, sent straight to its owner by a marked shift, and summed by the
// owner with its own partial. braid-fuse-puts then has each block's
// contraction write the owner's slot itself (XFER below).
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// The pinned forms name theirs: one-shot keeps the sum in the chain's
// kernel; fuse-collectives=off leaves the ring.
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=one-shot comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONESHOT
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force fuse-collectives=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// The whole pipeline: each block's contraction writes its owner's slot,
// whose put is only a signal now, and the schedule checker accepts it.
// RUN: sed -n '1,/^\/\/ -----/p' %s > %t.rows.mlir
// RUN: braid-opt %t.rows.mlir --braid-pipeline="stop-after=xfer fuse-collectives=force check-schedule=1" 2>/dev/null | FileCheck %s --check-prefix=XFER
// RUN: braid-opt %t.rows.mlir --braid-pipeline="stop-after=xfer fuse-collectives=force fuse-puts=false check-schedule=1" 2>/dev/null | FileCheck %s --check-prefix=PUTS

shard.grid @tp(shape = 4)

// A row-parallel projection: each rank's partial over its K shard, then
// each rank keeps a quarter of the rows, summed.
// CHECK-LABEL: func.func @rows
// CHECK: %[[P:.*]] = shard.process_multi_index on @tp axes = [0]
// CHECK: %[[E1:.*]] = tensor.empty() {braid.partial = 1 : i64} : tensor<16x64xf32>
// CHECK: %[[Z1:.*]] = linalg.fill ins(%{{.*}}) outs(%[[E1]] :
// CHECK: %[[M1:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<32x64xf32>) outs(%[[Z1]] :
// CHECK: %[[T1:.*]], %[[F1:.*]] = dist.shift_start %[[M1]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric}
// CHECK: tensor.empty() {braid.partial = 2 : i64}
// CHECK: %[[T2:.*]], %[[F2:.*]] = dist.shift_start %{{.*}} on @tp axes = [0] offset = 2 {dist.step = 1 : i64, dist.symmetric}
// CHECK: tensor.empty() {braid.partial = 3 : i64}
// CHECK: %[[T3:.*]], %[[F3:.*]] = dist.shift_start %{{.*}} on @tp axes = [0] offset = 3 {dist.step = 2 : i64, dist.symmetric}
// CHECK: tensor.empty() {braid.partial = 0 : i64}
// CHECK: %[[OWN:.*]] = linalg.matmul
// CHECK: %[[R1:.*]] = dist.wait %[[T1]], %[[F1]]
// CHECK: %[[S1:.*]] = linalg.add ins(%[[OWN]], %[[R1]] :
// CHECK: %[[R2:.*]] = dist.wait %[[T2]], %[[F2]]
// CHECK: %[[S2:.*]] = linalg.add ins(%[[S1]], %[[R2]] :
// CHECK: %[[R3:.*]] = dist.wait %[[T3]], %[[F3]]
// CHECK: %[[S3:.*]] = linalg.add ins(%[[S2]], %[[R3]] :
// CHECK: return %[[S3]]
// CHECK-NOT: dist.reduce_scatter
// REMARK: push-matmul-reduce-scatter.mlir:{{[0-9]+}}:8: remark: reduce_scatter sent block by block to its owners as computed by the block contractions of 'linalg.matmul' at {{.*}}push-matmul-reduce-scatter.mlir:{{[0-9]+}}:8 as push_matmul_rs (3 puts): predicted {{.*}}; stores each of the 3 peers' 4.0 KiB partial straight into its slot as it is computed, one hop (a ring forwards partial sums in 3 steps, adding each)
// ONESHOT: remark: reduce_scatter {{.*}}not in a kernel: push: fuse-collectives=one-shot
// OFF: remark: reduce_scatter fused with 'linalg.matmul' as ring_matmul_rs{{.*}}; not in a kernel: fuse-collectives=off
// XFER-LABEL: func.func @rows
// XFER: %[[PEER:.*]] = xfer.peer_view %[[SLOT:.*]] on @tp axes = [0] offset = 1 : memref<16x64xf32>
// XFER-NEXT: linalg.fill ins(%{{.*}}) outs(%[[PEER]] :
// XFER-NEXT: linalg.matmul ins(%{{.*}}) outs(%[[PEER]] :
// XFER: xfer.signal %{{.*}} on @tp axes = [0] offset = 1 for %[[SLOT]]
// XFER-NOT: xfer.put
// PUTS-LABEL: func.func @rows
// PUTS-COUNT-3: xfer.put
func.func @rows(%x: tensor<64x32xf32>, %w: tensor<32x64xf32>) -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x64xf32>) outs(%init : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<64x64xf32> -> tensor<16x64xf32>
  return %s : tensor<16x64xf32>
}

// -----

shard.grid @tp(shape = 2)

// A bias in the init is part of each rank's partial, as the collective
// sums it: each block's contraction starts from its slice.
// CHECK-LABEL: func.func @bias
// CHECK: %[[B:.*]] = tensor.extract_slice %arg2
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x16xf32>, tensor<16x32xf32>) outs(%[[B]] :
// CHECK: dist.shift_start
// REMARK: remark: reduce_scatter sent block by block to its owners as computed by the block contractions of 'linalg.matmul' {{.*}} as push_matmul_rs (1 puts)
func.func @bias(%x: tensor<16x16xf32>, %w: tensor<16x32xf32>, %bias: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %y = linalg.matmul ins(%x, %w : tensor<16x16xf32>, tensor<16x32xf32>) outs(%bias : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x32xf32> -> tensor<8x32xf32>
  return %s : tensor<8x32xf32>
}

// -----

shard.grid @tp(shape = 2)

// The import's init of a rowwise projection, chosen by rank (a bias on one
// rank), here the same zeros on both: each block still gets a placeholder
// of its own, filled right before its contraction.
// CHECK-LABEL: func.func @chosen_init
// CHECK: tensor.empty() {braid.partial = 1 : i64} : tensor<8x32xf32>
// CHECK: tensor.empty() {braid.partial = 0 : i64} : tensor<8x32xf32>
func.func @chosen_init(%x: tensor<16x16xf32>, %w: tensor<16x32xf32>, %first: i1) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %init = scf.if %first -> (tensor<16x32xf32>) {
    scf.yield %z : tensor<16x32xf32>
  } else {
    scf.yield %z : tensor<16x32xf32>
  }
  %y = linalg.matmul ins(%x, %w : tensor<16x16xf32>, tensor<16x32xf32>) outs(%init : tensor<16x32xf32>) -> tensor<16x32xf32>
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x32xf32> -> tensor<8x32xf32>
  return %s : tensor<8x32xf32>
}
