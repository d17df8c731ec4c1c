// The balanced ring over a linalg.softmax: its decomposition reduces the
// row max with maxnumf from that reduction's identity, NaN. The rows a rank
// scores for the owner of the block it holds start from nothing scored,
// which the online softmax's rescale reads as a max of -inf (exp(-inf - m)
// = 0 scales the zero sum and output away), not from the max's init:
// exp(NaN - m) made every partial, and so every merged row, NaN (the E2E
// `ring_attention --variant softmax` with balance-attention=on, in
// test/E2E/ring-attention.test). The rank's own rows still start from the
// max's init, which maxnumf reduces away.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=dist overlap=force balance-attention=on" 2>/dev/null | FileCheck %s
// Under a causal mask with two pieces per block, the helper's first piece
// may be skipped: the rows then stay as nothing was scored, -inf again.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=dist overlap=force sub-chunks=2" 2>/dev/null | FileCheck %s --check-prefix=SKIP
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=dist overlap=force balance-attention=on" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// The whole pipeline accepts it, the schedule checker included.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer check-schedule=1 overlap=force balance-attention=on sub-chunks=2" -o /dev/null

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>

// CHECK-LABEL: func.func @softmax(
// CHECK-DAG: %[[NONE:.*]] = arith.constant 0xFF800000 : f32
// CHECK-DAG: %[[IDENTITY:.*]] = arith.constant 0xFFC00000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[IDENTITY]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// Step 0: the rank's own rows, their max from the max's init.
// CHECK: outs(%[[INIT]] : tensor<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.maxnumf
// Step 1: after its own rows, the rows of rank r - 1 against its own keys,
// from a max of -inf, rescaled by exp(-inf - max).
// CHECK: dist.step = 1
// CHECK: %[[EMPTY:.*]] = linalg.fill ins(%[[NONE]] : f32) outs(%{{.*}} : tensor<2x4xf32>)
// CHECK: %[[PMAX:.*]] = linalg.generic {{.*}} outs(%[[EMPTY]] : tensor<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.maxnumf
// CHECK: %[[PSAFE:.*]] = linalg.generic {{.*}} ins(%[[PMAX]] : tensor<2x4xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[EMPTY]], %[[PSAFE]] : tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.subf
// CHECK-NEXT: math.exp
// CHECK: dist.shift_start %[[PMAX]] on @cp axes = [0] offset = 3 {dist.step = 1
// CHECK: arith.maximumf
// CHECK: arith.divf
// CHECK: return
// REMARK: as ring_attention (4 chunks)
// REMARK-SAME: balanced: each rank also scores the rows of the block it holds
func.func @softmax(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 0.353553385 : f32
  %kg = shard.all_gather %k on @cp grid_axes = [0] gather_axis = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = shard.all_gather %v on @cp grid_axes = [0] gather_axis = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%se : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<2x4x16xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x4x16xf32>) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %oe = tensor.empty() : tensor<2x4x8xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.generic {indexing_maps = [#pv, #vv, #ov], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%oz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}

// -----

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>

// SKIP-LABEL: func.func @causal(
// SKIP-DAG: %[[NONE:.*]] = arith.constant 0xFF800000 : f32
// SKIP: dist.step = 1
// SKIP: %[[EMPTY:.*]] = linalg.fill ins(%[[NONE]] : f32) outs(%{{.*}} : tensor<2x8xf32>)
// SKIP: scf.if
// SKIP-NEXT: scf.yield %[[EMPTY]], %{{.*}}, %{{.*}} : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8x8xf32>
// SKIP-NEXT: } else {
// SKIP: outs(%[[EMPTY]] : tensor<2x8xf32>)
// SKIP-NEXT: ^bb0
// SKIP-NEXT: arith.maxnumf
// SKIP: offset = 3 {dist.step = 1
// SKIP: return
// REMARK: as ring_attention (4 chunks)
// REMARK-SAME: skips the pieces its mask fills whole; balanced: each rank also scores the rows of the block it holds
func.func @causal(%q: tensor<2x8x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %neg = arith.constant 0xFF800000 : f32
  %scale = arith.constant 0.353553385 : f32
  %c8 = arith.constant 8 : index
  %kg = shard.all_gather %k on @cp grid_axes = [0] gather_axis = 1 : tensor<2x8x8xf32> -> tensor<2x32x8xf32>
  %vg = shard.all_gather %v on @cp grid_axes = [0] gather_axis = 1 : tensor<2x8x8xf32> -> tensor<2x32x8xf32>
  %se = tensor.empty() : tensor<2x8x32xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x8x8xf32>, tensor<2x32x8xf32>) outs(%sz : tensor<2x8x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c8 : index
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x8x32xf32>) outs(%se : tensor<2x8x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x8x32xf32>
  %p = linalg.softmax dimension(2) ins(%sm : tensor<2x8x32xf32>) outs(%se : tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %oe = tensor.empty() : tensor<2x8x8xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %out = linalg.generic {indexing_maps = [#pv, #vv, #ov], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<2x8x32xf32>, tensor<2x32x8xf32>) outs(%oz : tensor<2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  return %out : tensor<2x8x8xf32>
}
