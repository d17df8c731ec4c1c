// Ring attention skips the pieces of keys a mask fills whole: a causal
// mask (a select of a constant of at most -1e30 where an affine comparison
// of linalg.index and the rank's position holds) leaves out the pieces
// after every row of the rank's block, tested at run time per piece. Masks
// that are not such a bound, or a fill that leaves the masked keys weight,
// skip nothing. The numbers are test/E2E/ring-attention.test's.
// RUN: braid-opt %s -split-input-file --braid-overlap="sub-chunks=2" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="sub-chunks=2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// The whole pipeline accepts it, the schedule checker included.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer check-schedule=1 sub-chunks=2" -o /dev/null

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>

// The causal mask fills the pieces of keys after every row of this rank's
// block: each piece after the first is skipped when its least key comes
// after the last row (e = j - (base + i) - 1 >= 0 at its least point), once
// the first piece left every row a key (e < 0 at the largest row).
// CHECK-LABEL: func.func @causal(
// CHECK: dist.shift_start
// CHECK: %[[KT0:.*]], %{{.*}} = dist.shift_start
// The first piece: every row keeps a key.
// CHECK: %[[COVERED:.*]] = arith.cmpi slt
// CHECK: arith.maximumf
// CHECK: %[[O0:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2x4x8xf32>)
// Its second piece: keys 2..3 of this rank's block (the test is made at
// run time).
// CHECK: %[[FULL:.*]] = arith.cmpi sge
// CHECK: %[[SKIP:.*]] = arith.andi %[[COVERED]], %[[FULL]] : i1
// CHECK: %{{.*}}:3 = scf.if %[[SKIP]] -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4x8xf32>) {
// CHECK-NEXT: scf.yield %{{.*}}, %{{.*}}, %[[O0]] :
// CHECK-NEXT: } else {
// CHECK: arith.maximumf
// CHECK: scf.yield
// CHECK: dist.wait %[[KT0]]
// CHECK: scf.if
// CHECK: return
// REMARK: as ring_attention (8 chunks)
// REMARK-SAME: skips the pieces its mask fills whole
func.func @causal(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %ze = tensor.empty() : tensor<2x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
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
#row = affine_map<(h, i, j) -> (h, i)>

// The same mask written as a select of the kept scores (j <= base + i).
// CHECK-LABEL: func.func @keep_form(
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: scf.if
// REMARK: skips the pieces its mask fills whole
func.func @keep_form(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %past = arith.cmpi sle, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %past, %y, %neg : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %ze = tensor.empty() : tensor<2x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
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
#row = affine_map<(h, i, j) -> (h, i)>

// A fill of -1 leaves the masked keys weight: nothing is skipped.
// CHECK-LABEL: func.func @small_fill(
// CHECK-NOT: scf.if
// CHECK: return
// REMARK: as ring_attention
// REMARK-NOT: skips
func.func @small_fill(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %one = arith.constant -1.0 : f32
    %r = arith.select %future, %one, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %ze = tensor.empty() : tensor<2x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
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
#row = affine_map<(h, i, j) -> (h, i)>

// A mask of j != i is not a bound over a box: nothing is skipped.
// CHECK-LABEL: func.func @not_equal(
// CHECK-NOT: scf.if
// CHECK: return
// REMARK: as ring_attention
// REMARK-NOT: skips
func.func @not_equal(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ne, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %ze = tensor.empty() : tensor<2x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
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
#row = affine_map<(h, i, j) -> (h, i)>

// An unsigned comparison with a difference, which may wrap: nothing is
// skipped.
// CHECK-LABEL: func.func @unsigned_difference(
// CHECK-NOT: scf.if
// CHECK: return
// REMARK: as ring_attention
// REMARK-NOT: skips
func.func @unsigned_difference(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.subi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %ze = tensor.empty() : tensor<2x4xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%z0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
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
