// fuse-collectives: an all-reduce (or reduce-scatter) whose result feeds
// a memory-bound chain is summed inside the chain's kernel (one_shot_ar,
// one_shot_rs): each rank's partial (or each peer's block of it) goes to
// every peer's symmetric slot (one marked shift per peer offset, whatever
// the size), and the sum of the slots is what memory-bound fusion puts
// into the kernel of the residual add and the norm.
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Auto: decode sizes sum in the kernel, prefill sizes keep the ring.
// RUN: braid-opt %s -split-input-file --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// One form only: one-shot and two-shot.
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=one-shot comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=two-shot comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWO
// The report's record (the first function alone).
// RUN: sed -n '1,/^\/\/ -----/p' %s > %t.rms.mlir
// RUN: braid-opt %t.rms.mlir --braid-overlap="report=%t.json" -o /dev/null 2>/dev/null
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// The whole pipeline: the sum lies inside the kernel loop, read from the
// symmetric slots, and the schedule checker accepts the protocol.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer fuse-collectives=force comm=symmetric check-schedule=1" 2>/dev/null | FileCheck %s --check-prefix=XFER
// Without memory-bound fusion there is no kernel to sum in.
// RUN: braid-opt %t.rms.mlir --braid-pipeline="stop-after=dist fuse=off fuse-collectives=force comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFUSE

shard.grid @tp(shape = 4)

// Decode: 4 tokens, residual add then RMSNorm, both returned.
// CHECK-LABEL: func.func @rms
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK: dist.shift_start %[[P]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<4x64xf32>
// CHECK: dist.shift_start %[[P]] on @tp axes = [0] offset = 2 {dist.step = 1 : i64, dist.symmetric}
// CHECK: dist.shift_start %[[P]] on @tp axes = [0] offset = 3 {dist.step = 2 : i64, dist.symmetric}
// CHECK-COUNT-3: dist.wait
// CHECK: %[[S1:.*]] = linalg.add ins(%[[P]], %{{.*}} :
// CHECK: %[[S2:.*]] = linalg.add ins(%[[S1]], %{{.*}} :
// CHECK: %[[S3:.*]] = linalg.add ins(%[[S2]], %{{.*}} :
// CHECK: linalg.add ins(%[[S3]], %arg2
// CHECK-NOT: dist.all_reduce
// REMARK: fuse-collectives.mlir:{{[0-9]+}}:8: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}}fuse-collectives.mlir:{{[0-9]+}}:8 as one_shot_ar (3 puts): predicted {{.*}}; moves 3.0 KiB per rank to the peers (a ring all-reduce: 1.5 KiB) and saves writing and reading back 1.0 KiB of the reduced tensor; transfers symmetric (the kernel sums the partials the peers put into this rank's symmetric slots)
// AUTO: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_ar (3 puts)
// OFF: remark: all_reduce {{.*}}; not in a kernel: fuse-collectives=off
// NOFUSE: remark: all_reduce {{.*}}; not in a kernel: fuse-collectives=off
// REPORT: "strategy": "one_shot_ar",
// REPORT-NEXT: "chunks": 3,
// REPORT-NEXT: "transport": "symmetric",
// REPORT-NEXT: "in_kernel": true,
// REPORT-NEXT: "kernel": "the kernel of 'linalg.add' at {{.*}}.mlir:{{[0-9]+}}:{{[0-9]+}}",
// XFER-LABEL: func.func @rms
// XFER-COUNT-3: xfer.symmetric_alloc on @tp axes = [0] site = {{[0-9]+}} : memref<4x64xf32>
// XFER: xfer.put
// The kernel reads the three slots themselves (zero-copy through its row
// tiles), and each credit goes back after the kernel.
// XFER-NOT: memref.copy %{{[0-9]+}},
// XFER: scf.forall
// XFER: memref.subview %{{[0-9]+}}[
// XFER-NEXT: memref.alloca
// XFER-NEXT: linalg.add
// XFER-NEXT: memref.subview %{{[0-9]+}}[
// XFER-NEXT: linalg.add
// XFER-NEXT: memref.subview %{{[0-9]+}}[
// XFER-NEXT: linalg.add
// XFER: math.rsqrt
// XFER: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// XFER-COUNT-3: xfer.signal %{{.*}} on @tp axes = [0] offset = -{{[123]}}
func.func @rms(%a: tensor<4x16xf32>, %w: tensor<16x64xf32>, %res: tensor<4x64xf32>, %gamma: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %y = linalg.matmul ins(%a, %w : tensor<4x16xf32>, tensor<16x64xf32>) outs(%f0 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<4x64xf32> -> tensor<4x64xf32>
  %h = linalg.add ins(%r, %res : tensor<4x64xf32>, tensor<4x64xf32>) outs(%e0 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%h : tensor<4x64xf32>) outs(%f1 : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h, %ss, %gamma : tensor<4x64xf32>, tensor<4xf32>, tensor<64xf32>) outs(%e0 : tensor<4x64xf32>) {
  ^bb0(%x: f32, %s: f32, %g: f32, %o: f32):
    %c = arith.constant 1.5625e-2 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.mulf %s, %c : f32
    %v = arith.addf %m, %eps : f32
    %rs = math.rsqrt %v : f32
    %t = arith.mulf %x, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<4x64xf32>
  return %h, %n : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

shard.grid @tp(shape = 4)

// 128 KiB, above the 64 KiB up to which a whole all-reduce goes in one
// shot: the in-kernel sum still sends the whole partial (no second round
// of shifts).
// REMARK: remark: all_reduce summed inside the kernel of 'linalg.generic' at {{.*}}: predicted {{.*}}; moves 384.0 KiB per rank
// CHECK-LABEL: func.func @large
// CHECK-COUNT-3: dist.shift_start {{.*}} : tensor<256x128xf32>
// CHECK-NOT: dist.shift_start
// CHECK: return
// AUTO: remark: all_reduce kept whole: no schedule is predicted faster: best is rs_ring_ag
func.func @large(%a: tensor<256x16xf32>, %w: tensor<16x128xf32>, %bias: tensor<128xf32>) -> tensor<256x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<256x128xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %y = linalg.matmul ins(%a, %w : tensor<256x16xf32>, tensor<16x128xf32>) outs(%f0 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<256x128xf32> -> tensor<256x128xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%r, %bias : tensor<256x128xf32>, tensor<128xf32>) outs(%e0 : tensor<256x128xf32>) {
  ^bb0(%x: f32, %bb: f32, %o: f32):
    %s = arith.addf %x, %bb : f32
    linalg.yield %s : f32
  } -> tensor<256x128xf32>
  return %b : tensor<256x128xf32>
}

// -----

shard.grid @tp(shape = 4)

// Sequence parallelism: a reduce-scatter of the rows, then the residual
// add and the norm on this rank's rows. Each peer gets its block (as in
// the ring), and the kernel sums this rank's block and the three slots.
// REMARK: remark: reduce_scatter summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_rs (3 puts): predicted {{.*}}; moves 3.0 KiB per rank to the peers (a ring reduce-scatter: 3.0 KiB) and saves writing and reading back 1.0 KiB of the reduced tensor
// AUTO: remark: reduce_scatter summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_rs (3 puts)
// CHECK-LABEL: func.func @sp
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK: %[[B1:.*]] = tensor.extract_slice %[[P]]
// CHECK: dist.shift_start %[[B1]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<4x64xf32>
// CHECK: dist.shift_start {{.*}} offset = 2
// CHECK: dist.shift_start {{.*}} offset = 3
// CHECK-COUNT-3: dist.wait
// CHECK: %[[OWN:.*]] = tensor.extract_slice %[[P]]
// CHECK: %[[S1:.*]] = linalg.add ins(%[[OWN]], %{{.*}} :
// CHECK: %[[S2:.*]] = linalg.add ins(%[[S1]], %{{.*}} :
// CHECK: %[[S3:.*]] = linalg.add ins(%[[S2]], %{{.*}} :
// CHECK: linalg.add ins(%[[S3]], %arg2
// CHECK-NOT: dist.reduce_scatter
func.func @sp(%a: tensor<16x16xf32>, %w: tensor<16x64xf32>, %res: tensor<4x64xf32>, %gamma: tensor<64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%a, %w : tensor<16x16xf32>, tensor<16x64xf32>) outs(%f0 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x64xf32> -> tensor<4x64xf32>
  %e1 = tensor.empty() : tensor<4x64xf32>
  %h = linalg.add ins(%r, %res : tensor<4x64xf32>, tensor<4x64xf32>) outs(%e1 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%h : tensor<4x64xf32>) outs(%f2 : tensor<4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h, %ss, %gamma : tensor<4x64xf32>, tensor<4xf32>, tensor<64xf32>) outs(%e1 : tensor<4x64xf32>) {
  ^bb0(%x: f32, %s: f32, %g: f32, %o: f32):
    %rs = math.rsqrt %s : f32
    %t = arith.mulf %x, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<4x64xf32>
  return %h, %n : tensor<4x64xf32>, tensor<4x64xf32>
}

// -----

shard.grid @tp(shape = 4)

// What frontends emit: the 2-D product reshaped back to 3-D activations
// before the residual. The reshape moves above the collective (which
// commutes with it), so the sum still meets the residual's kernel; a
// reduce-scatter of the rows then scatters the sequence dimension.
// REMARK: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_ar
// REMARK: remark: reduce_scatter summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_rs
// CHECK-LABEL: func.func @reshaped
// CHECK: %[[X3:.*]] = tensor.expand_shape %arg0 {{\[\[}}0, 1], [2]] output_shape [2, 4, 32] : tensor<8x32xf32> into tensor<2x4x32xf32>
// CHECK: dist.shift_start %[[X3]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<2x4x32xf32>
// CHECK: %[[Y3:.*]] = tensor.expand_shape %arg2 {{\[\[}}0, 1], [2]] output_shape [1, 16, 32] : tensor<16x32xf32> into tensor<1x16x32xf32>
// CHECK: tensor.extract_slice %[[Y3]][0, %{{.*}}, 0] [1, 4, 32] [1, 1, 1]
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.reduce_scatter
// CHECK: return
func.func @reshaped(%x: tensor<8x32xf32>, %res: tensor<2x4x32xf32>, %y: tensor<16x32xf32>, %res2: tensor<1x4x32xf32>) -> (tensor<2x4x32xf32>, tensor<1x4x32xf32>) {
  %r = dist.all_reduce %x on @tp axes = [0] reduce = sum : tensor<8x32xf32> -> tensor<8x32xf32>
  %r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [2, 4, 32] : tensor<8x32xf32> into tensor<2x4x32xf32>
  %e = tensor.empty() : tensor<2x4x32xf32>
  %h = linalg.add ins(%r3, %res : tensor<2x4x32xf32>, tensor<2x4x32xf32>) outs(%e : tensor<2x4x32xf32>) -> tensor<2x4x32xf32>
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x32xf32> -> tensor<4x32xf32>
  %s3 = tensor.expand_shape %s [[0, 1], [2]] output_shape [1, 4, 32] : tensor<4x32xf32> into tensor<1x4x32xf32>
  %e2 = tensor.empty() : tensor<1x4x32xf32>
  %h2 = linalg.add ins(%s3, %res2 : tensor<1x4x32xf32>, tensor<1x4x32xf32>) outs(%e2 : tensor<1x4x32xf32>) -> tensor<1x4x32xf32>
  return %h, %h2 : tensor<2x4x32xf32>, tensor<1x4x32xf32>
}

// -----

shard.grid @tp(shape = 4)

// A reduce-scatter whose rows a reshape does not keep as blocks of one
// dimension stays out of the kernel.
// REMARK: remark: reduce_scatter {{.*}}not in a kernel: push: its input is not computed by a linalg op; one shot: the reshape after the reduce-scatter ('tensor.collapse_shape') does not keep its rows as blocks of one dimension
// CHECK-LABEL: func.func @collapsed
func.func @collapsed(%y: tensor<16x2x8xf32>, %res: tensor<64xf32>) -> tensor<64xf32> {
  %s = dist.reduce_scatter %y on @tp axes = [0] dim = 0 reduce = sum : tensor<16x2x8xf32> -> tensor<4x2x8xf32>
  %c = tensor.collapse_shape %s [[0, 1, 2]] : tensor<4x2x8xf32> into tensor<64xf32>
  %e = tensor.empty() : tensor<64xf32>
  %h = linalg.add ins(%c, %res : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  return %h : tensor<64xf32>
}

// -----

shard.grid @tp(shape = 4)

// Declined in one shot, with the reason: a result used twice (its sum
// would be a kernel of its own), and a contraction after the all-reduce.
// Two shot takes the first (both values come back whole), not the second
// (no row-wise work follows it).
// REMARK: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as two_shot_ar (9 puts)
// REMARK: remark: all_reduce kept whole: {{.*}}; not in a kernel: one shot: 'linalg.matmul' is not a memory-bound linalg op on static tensors that the sum could join; two shot: no row-wise work on its rows follows it ('linalg.matmul' is not a memory-bound linalg op on tensors)
// ONE: remark: all_reduce kept whole: {{.*}}; not in a kernel: one shot: its result has several uses, so its sum would be a kernel of its own; two shot: fuse-collectives=one-shot
// CHECK-LABEL: func.func @declined
func.func @declined(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %r = dist.all_reduce %x on @tp axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
  %e = tensor.empty() : tensor<8x8xf32>
  %s = linalg.add ins(%r, %r : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %r2 = dist.all_reduce %s on @tp axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
  %m = linalg.matmul ins(%r2, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r, %m : tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

shard.grid @tp(shape = 4)

// Two-shot (prefill: 128 KiB of partial, the 3-D activations frontends
// emit): with the residual and the norm weight replicated, each rank sums
// its block of the sequence (the peers' blocks arrive in its slots) in the
// kernel of the residual add and the norm on 1/4 of the rows, then puts
// both values the chain leaves to every peer.
// REMARK: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as two_shot_ar (9 puts): predicted {{.*}}; moves 288.0 KiB per rank to the peers (a ring all-reduce: 192.0 KiB), runs 3 ops of the chain on 1/4 of the rows and gathers back 2 of its values; transfers symmetric
// CHECK-LABEL: func.func @two_shot
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK: %[[P3:.*]] = tensor.expand_shape %[[P]] {{\[\[}}0, 1], [2]] output_shape [1, 256, 128]
// CHECK: %[[B1:.*]] = tensor.extract_slice %[[P3]][0, %{{.*}}, 0] [1, 64, 128] [1, 1, 1]
// CHECK: dist.shift_start %[[B1]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<1x64x128xf32>
// CHECK: dist.shift_start {{.*}} offset = 2
// CHECK: dist.shift_start {{.*}} offset = 3
// CHECK-COUNT-3: dist.wait
// CHECK: %[[OWN:.*]] = tensor.extract_slice %[[P3]]
// CHECK: %[[S1:.*]] = linalg.add ins(%[[OWN]], %{{.*}} :
// CHECK: %[[S2:.*]] = linalg.add ins(%[[S1]], %{{.*}} :
// CHECK: %[[S3:.*]] = linalg.add ins(%[[S2]], %{{.*}} :
// CHECK: %[[RES:.*]] = tensor.extract_slice %arg2[0, %{{.*}}, 0] [1, 64, 128] [1, 1, 1]
// CHECK: %[[H:.*]] = linalg.add ins(%[[S3]], %[[RES]] : tensor<1x64x128xf32>, tensor<1x64x128xf32>)
// CHECK: %[[G:.*]] = tensor.extract_slice %arg3[0] [128] [1]
// CHECK: %[[N:.*]] = linalg.generic {{.*}} ins(%[[H]], %{{.*}}, %[[G]] :
// CHECK: dist.shift_start %[[H]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<1x64x128xf32>
// CHECK: dist.shift_start %[[H]] on @tp axes = [0] offset = 3
// CHECK: dist.shift_start %[[N]] on @tp axes = [0] offset = 1
// CHECK: dist.shift_start %[[N]] on @tp axes = [0] offset = 3
// CHECK-NOT: dist.all_reduce
// CHECK-NOT: dist.all_gather
// CHECK: return
// AUTO: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as two_shot_ar (9 puts)
// ONE: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as one_shot_ar (3 puts): predicted {{.*}}; moves 384.0 KiB per rank
// TWO: remark: all_reduce summed inside the kernel of 'linalg.add' at {{.*}} as two_shot_ar (9 puts)
// The report says which form, and that it was forced.
// RUN: echo 'shard.grid @tp(shape = 4)' > %t.two.mlir
// RUN: sed -n '/^\/\/ Two-shot (prefill/,$p' %s >> %t.two.mlir
// RUN: braid-opt %t.two.mlir --braid-overlap="fuse-collectives=two-shot report=%t.two.json" -o /dev/null 2>/dev/null
// RUN: FileCheck %s --check-prefix=TWOREPORT < %t.two.json
// TWOREPORT: "strategy": "two_shot_ar",
// TWOREPORT-NEXT: "chunks": 9,
// TWOREPORT: "in_kernel": true,
// TWOREPORT: "reason": "fuse-collectives=two-shot; predicted
func.func @two_shot(%a: tensor<256x16xf32>, %w: tensor<16x128xf32>, %res: tensor<1x256x128xf32> {dist.placement = #dist.placement<@tp, [replicate]>}, %gamma: tensor<128xf32> {dist.placement = #dist.placement<@tp, [replicate]>}) -> (tensor<1x256x128xf32>, tensor<1x256x128xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<256x128xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %y = linalg.matmul ins(%a, %w : tensor<256x16xf32>, tensor<16x128xf32>) outs(%f0 : tensor<256x128xf32>) -> tensor<256x128xf32>
  %r = dist.all_reduce %y on @tp axes = [0] reduce = sum : tensor<256x128xf32> -> tensor<256x128xf32>
  %r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [1, 256, 128] : tensor<256x128xf32> into tensor<1x256x128xf32>
  %e3 = tensor.empty() : tensor<1x256x128xf32>
  %h = linalg.add ins(%r3, %res : tensor<1x256x128xf32>, tensor<1x256x128xf32>) outs(%e3 : tensor<1x256x128xf32>) -> tensor<1x256x128xf32>
  %e1 = tensor.empty() : tensor<1x256xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%h : tensor<1x256x128xf32>) outs(%f1 : tensor<1x256xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<1x256xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i)>, affine_map<(b, i, j) -> (j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%h, %ss, %gamma : tensor<1x256x128xf32>, tensor<1x256xf32>, tensor<128xf32>) outs(%e3 : tensor<1x256x128xf32>) {
  ^bb0(%x: f32, %s: f32, %g: f32, %o: f32):
    %c = arith.constant 7.8125e-3 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.mulf %s, %c : f32
    %v = arith.addf %m, %eps : f32
    %rs = math.rsqrt %v : f32
    %t = arith.mulf %x, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<1x256x128xf32>
  return %h, %n : tensor<1x256x128xf32>, tensor<1x256x128xf32>
}
