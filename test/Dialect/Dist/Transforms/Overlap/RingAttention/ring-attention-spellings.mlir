// Ring attention recognizes the softmax by what it computes, not by one
// spelling: the max as a select of the larger, exp2 or exp with the scale
// inside the exponential, a multiplication by the row sum's reciprocal
// (in the division's op or in an op of its own), and the division after
// the product with v (flash attention's order) all form the ring, whose
// rescaling of the running sums takes the scale along. What is not a
// softmax is declined with the part that did not match.
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force balance-attention=off" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=force balance-attention=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer check-schedule=1 overlap=force" -o /dev/null

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// The max as a select of the larger.
// CHECK-LABEL: func.func @select_max(
// CHECK-NOT: dist.all_gather
// CHECK: arith.cmpf ogt
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @select_max(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %c = arith.cmpf ogt, %x, %acc : f32
    %r = arith.select %c, %x, %acc : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// exp2 of the difference times scale * log2(e), the scores unscaled: the
// running sums rescale by exp(scale * (old max - new max)).
// CHECK-LABEL: func.func @exp2_scaled(
// CHECK-NOT: dist.all_gather
// CHECK: math.exp2
// CHECK: arith.constant 0.353553{{[0-9]*}} : f32
// CHECK-NEXT: arith.mulf
// CHECK-NEXT: math.exp
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @exp2_scaled(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %zero : f32
    linalg.yield %y : f32
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
    %c = arith.constant 0.510069728 : f32
    %t = arith.mulf %d, %c : f32
    %r = math.exp2 %t : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// exp(c s - c m), the scale applied to each side.
// CHECK-LABEL: func.func @scale_both_sides(
// CHECK-NOT: dist.all_gather
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @scale_both_sides(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.addf %x, %zero : f32
    linalg.yield %y : f32
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
    %a = arith.mulf %x, %scale : f32
    %b = arith.mulf %mm, %scale : f32
    %d = arith.subf %a, %b : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// The division as a product with 1 / sum, in one op.
// CHECK-LABEL: func.func @reciprocal_inline(
// CHECK-NOT: dist.all_gather
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @reciprocal_inline(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
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
    %i = arith.divf %one, %zz : f32
    %r = arith.mulf %i, %x : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// 1 / sum in an op of its own, the exponentials multiplied by it.
// CHECK-LABEL: func.func @reciprocal_op(
// CHECK-NOT: dist.all_gather
// CHECK-NOT: arith.divf %{{.*}}one
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @reciprocal_op(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
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
  %ie = tensor.empty() : tensor<2x4xf32>
  %inv = linalg.generic {indexing_maps = [#rid, #rid], iterator_types = ["parallel", "parallel"]} ins(%z : tensor<2x4xf32>) outs(%ie : tensor<2x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.divf %one, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %inv : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %w: f32, %o: f32):
    %r = arith.mulf %x, %w : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// The division after the product with v (flash attention's order): the
// ring's one division takes its place.
// CHECK-LABEL: func.func @flash_order(
// CHECK-NOT: dist.all_gather
// CHECK: arith.divf
// CHECK-NEXT: linalg.yield
// CHECK-NOT: arith.divf
// CHECK: return
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention
func.func @flash_order(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
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
  %oe = tensor.empty() : tensor<2x4x8xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.generic {indexing_maps = [#pv, #vv, #ov], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%e, %vg : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%oz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %fe = tensor.empty() : tensor<2x4x8xf32>
  %res = linalg.generic {indexing_maps = [#oid, #orow, #oid], iterator_types = ["parallel", "parallel", "parallel"]} ins(%out, %z : tensor<2x4x8xf32>, tensor<2x4xf32>) outs(%fe : tensor<2x4x8xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  return %res : tensor<2x4x8xf32>
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// A negative factor inside the exponential is not a softmax of the scores.
// CHECK-LABEL: func.func @negative_scale(
// REMARK: remark: not ring attention: no exp(s - max) over the scores follows their row max (an exponential, exp or exp2, of the difference or of a positive multiple of it)
func.func @negative_scale(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
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
    %c = arith.constant -0.5 : f32
    %t = arith.mulf %d, %c : f32
    %r = math.exp %t : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// A row min is not the softmax's max.
// CHECK-LABEL: func.func @min_not_max(
// REMARK: remark: not ring attention: the scores' reduction over the keys is not a row max (the larger of the score and the running value)
func.func @min_not_max(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
  } -> tensor<2x4x16xf32>
  %re = tensor.empty() : tensor<2x4xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx0 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.minimumf %acc, %x : f32
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
#oid = affine_map<(h, i, c) -> (h, i, c)>
#orow = affine_map<(h, i, c) -> (h, i)>
#rid = affine_map<(h, i) -> (h, i)>

// The exponentials' reduction must be their sum.
// CHECK-LABEL: func.func @sum_of_squares(
// REMARK: remark: not ring attention: the exponentials' reduction is not a row sum like the max
func.func @sum_of_squares(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %scale = arith.constant 0.353553385 : f32
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
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<2x4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    linalg.yield %y : f32
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
    %sq = arith.mulf %x, %x : f32
    %r = arith.addf %sq, %acc : f32
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
