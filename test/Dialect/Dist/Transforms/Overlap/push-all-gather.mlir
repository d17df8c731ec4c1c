// fuse-collectives: an all-gather whose input a memory-bound chain
// computes (sequence parallelism's residual add and norm) and whose result
// feeds a contraction becomes push_ag_matmul: the local chunk goes to
// every peer at once (one marked shift per peer offset) and the
// contraction takes each chunk as it lands, nearest first; the chain's
// kernel stores its rows into the peers' slots itself (braid-fuse-puts,
// XFER below).
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Every pinned form keeps the all-gather's one form.
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=two-shot comm=symmetric" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// Declined, with the reason: fuse-collectives=off (overlap forced: the
// ring) and comm=two-sided.
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force fuse-collectives=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s -split-input-file --braid-overlap="fuse-collectives=force comm=two-sided" -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWOSIDED
// Auto on the cpu preset: a decode step's gather is pushed.
// RUN: braid-opt %s -split-input-file --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=AUTO
// The report's record (the first function alone).
// RUN: sed -n '1,/^\/\/ -----/p' %s > %t.norm.mlir
// RUN: braid-opt %t.norm.mlir --braid-overlap="fuse-collectives=force report=%t.json" -o /dev/null 2>/dev/null
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// The whole pipeline: the norm in the kernel writes its row into the
// three peers' slots too, each put is a signal for its slot, and the schedule
// checker accepts the protocol; fuse-puts=false keeps the puts.
// RUN: braid-opt %t.norm.mlir --braid-pipeline="stop-after=xfer fuse-collectives=force check-schedule=1" 2>/dev/null | FileCheck %s --check-prefix=XFER
// RUN: braid-opt %t.norm.mlir --braid-pipeline="stop-after=xfer fuse-collectives=force fuse-puts=false check-schedule=1" 2>/dev/null | FileCheck %s --check-prefix=PUTS

shard.grid @tp(shape = 4)

// Decode: a token per rank, RMSNorm, then the gathered rows against a
// column-parallel weight.
// CHECK-LABEL: func.func @norm
// CHECK: %[[N:.*]] = linalg.generic {{.*}} ins(%arg0, %{{.*}}, %arg1 :
// CHECK: %[[T1:.*]], %[[F1:.*]] = dist.shift_start %[[N]] on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric}
// CHECK: %[[T2:.*]], %[[F2:.*]] = dist.shift_start %[[N]] on @tp axes = [0] offset = 2 {dist.step = 1 : i64, dist.symmetric}
// CHECK: %[[T3:.*]], %[[F3:.*]] = dist.shift_start %[[N]] on @tp axes = [0] offset = 3 {dist.step = 2 : i64, dist.symmetric}
// CHECK: linalg.matmul
// CHECK: %[[C1:.*]] = dist.wait %[[T1]], %[[F1]]
// CHECK: linalg.matmul ins(%[[C1]],
// CHECK: %[[C2:.*]] = dist.wait %[[T2]], %[[F2]]
// CHECK: linalg.matmul ins(%[[C2]],
// CHECK: %[[C3:.*]] = dist.wait %[[T3]], %[[F3]]
// CHECK: linalg.matmul ins(%[[C3]],
// CHECK-NOT: dist.all_gather
// REMARK: push-all-gather.mlir:{{[0-9]+}}:8: remark: all_gather written into every peer's buffer by the kernel of 'linalg.generic' at {{.*}}push-all-gather.mlir:{{[0-9]+}}:8 as push_ag_matmul (3 puts): predicted {{.*}}; stores 768.0 B per rank straight into the peers' gather buffers in one round (a ring forwards the same bytes in 3 steps, copying what it received); transfers symmetric (the kernel stores its rows into the peers' symmetric slots)
// OFF: remark: all_gather fused with 'linalg.matmul' as ring_ag_matmul{{.*}}; not in a kernel: fuse-collectives=off
// TWOSIDED: remark: all_gather {{.*}}; not in a kernel: the kernel stores into the peers' symmetric memory, and comm=two-sided
// AUTO: remark: all_gather written into every peer's buffer by the kernel of 'linalg.generic' at {{.*}} as push_ag_matmul (3 puts)
// REPORT: "kind": "all_gather",
// REPORT: "strategy": "push_ag_matmul",
// REPORT-NEXT: "chunks": 3,
// REPORT-NEXT: "transport": "symmetric",
// REPORT-NEXT: "in_kernel": true,
// REPORT-NEXT: "kernel": "the kernel of 'linalg.generic' at {{.*}}.mlir:{{[0-9]+}}:8",
// XFER-LABEL: func.func @norm
// XFER: %[[P1:.*]] = xfer.peer_view
// XFER: %[[P2:.*]] = xfer.peer_view
// XFER: %[[P3:.*]] = xfer.peer_view
// XFER: scf.forall
// XFER: linalg.generic {{.*}} outs(%{{.*}}, %[[P1]], %[[P2]], %[[P3]] : memref<1x64xf32>, memref<1x64xf32>, memref<1x64xf32>, memref<1x64xf32>)
// XFER: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// XFER-NOT: xfer.put
// XFER: xfer.signal {{.*}} offset = 1 for
// XFER: xfer.signal {{.*}} offset = 2 for
// XFER: xfer.signal {{.*}} offset = 3 for
// XFER-NOT: xfer.put
// XFER: return
// PUTS-COUNT-3: xfer.put
// PUTS-NOT: xfer.peer_view
func.func @norm(%x: tensor<1x64xf32>, %gamma: tensor<64xf32>, %w: tensor<64x48xf32>) -> tensor<4x48xf32> {
  %zero = arith.constant 0.0 : f32
  %se = tensor.empty() : tensor<1xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1xf32>) -> tensor<1xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<1x64xf32>) outs(%sz : tensor<1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<1xf32>
  %ne = tensor.empty() : tensor<1x64xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %ss, %gamma : tensor<1x64xf32>, tensor<1xf32>, tensor<64xf32>) outs(%ne : tensor<1x64xf32>) {
  ^bb0(%a: f32, %s: f32, %g: f32, %o: f32):
    %inv = arith.constant 1.5625e-02 : f32
    %eps = arith.constant 1.0e-5 : f32
    %m = arith.mulf %s, %inv : f32
    %v = arith.addf %m, %eps : f32
    %rs = math.rsqrt %v : f32
    %t = arith.mulf %a, %rs : f32
    %u = arith.mulf %t, %g : f32
    linalg.yield %u : f32
  } -> tensor<1x64xf32>
  %g = dist.all_gather %n on @tp axes = [0] dim = 0 : tensor<1x64xf32> -> tensor<4x64xf32>
  %ye = tensor.empty() : tensor<4x48xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<4x48xf32>) -> tensor<4x48xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x64xf32>, tensor<64x48xf32>) outs(%yz : tensor<4x48xf32>) -> tensor<4x48xf32>
  return %y : tensor<4x48xf32>
}

// -----

shard.grid @tp(shape = 4)

// The gathered value is an argument: no kernel computes it, so it is not
// pushed (it goes whole and asynchronous here), with the reason.
// CHECK-LABEL: func.func @argument
// CHECK: linalg.matmul
// CHECK-NOT: linalg.matmul
// CHECK: return
// REMARK: remark: all_gather made asynchronous: {{.*}}; not in a kernel: its input is not computed by a memory-bound linalg op in its block, whose kernel could store it into the peers' buffers
func.func @argument(%x: tensor<2x64xf32>, %w: tensor<64x48xf32>) -> tensor<8x48xf32> {
  %zero = arith.constant 0.0 : f32
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<2x64xf32> -> tensor<8x64xf32>
  %ye = tensor.empty() : tensor<8x48xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<8x48xf32>) -> tensor<8x48xf32>
  %y = linalg.matmul ins(%g, %w : tensor<8x64xf32>, tensor<64x48xf32>) outs(%yz : tensor<8x48xf32>) -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

shard.grid @tp(shape = 2x2)

// A 2-D grid, gathered along axis 1, the gathered dimension the
// contraction's reduction (each chunk adds a partial product).
// CHECK-LABEL: func.func @reduction
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%arg0 :
// CHECK: dist.shift_start %[[E]] on @tp axes = [1] offset = 1 {dist.step = 0 : i64, dist.symmetric}
// CHECK-NOT: offset = 2
// CHECK-COUNT-2: linalg.matmul
// REMARK: remark: all_gather written into every peer's buffer by the kernel of 'linalg.generic' at {{.*}} as push_ag_matmul (1 puts)
func.func @reduction(%x: tensor<8x32xbf16>, %w: tensor<64x16xbf16>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ee = tensor.empty() : tensor<8x32xbf16>
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<8x32xbf16>) outs(%ee : tensor<8x32xbf16>) {
  ^bb0(%a: bf16, %o: bf16):
    %m = arith.mulf %a, %a : bf16
    linalg.yield %m : bf16
  } -> tensor<8x32xbf16>
  %g = dist.all_gather %e on @tp axes = [1] dim = 1 : tensor<8x32xbf16> -> tensor<8x64xbf16>
  %ye = tensor.empty() : tensor<8x16xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%g, %w : tensor<8x64xbf16>, tensor<64x16xbf16>) outs(%yz : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

shard.grid @tp(shape = 2)

// torch-mlir's 3-D activations: the kernel's [1, 2, 64] rows are
// collapsed to [2, 64] before the gather; the push looks through it.
// CHECK-LABEL: func.func @collapsed
// CHECK: dist.shift_start %{{.*}} on @tp axes = [0] offset = 1 {dist.step = 0 : i64, dist.symmetric} : tensor<2x64xf32>
// REMARK: remark: all_gather written into every peer's buffer by the kernel of 'linalg.generic' at {{.*}} as push_ag_matmul (1 puts)
func.func @collapsed(%x: tensor<1x2x64xf32>, %w: tensor<64x16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ee = tensor.empty() : tensor<1x2x64xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>, affine_map<(b, i, j) -> (b, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<1x2x64xf32>) outs(%ee : tensor<1x2x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<1x2x64xf32>
  %flat = tensor.collapse_shape %e [[0, 1], [2]] : tensor<1x2x64xf32> into tensor<2x64xf32>
  %g = dist.all_gather %flat on @tp axes = [0] dim = 0 : tensor<2x64xf32> -> tensor<4x64xf32>
  %ye = tensor.empty() : tensor<4x16xf32>
  %yz = linalg.fill ins(%zero : f32) outs(%ye : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%g, %w : tensor<4x64xf32>, tensor<64x16xf32>) outs(%yz : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}
