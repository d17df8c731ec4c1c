// Ring attention: k and v gathered along the sequence feeding
// softmax(q k^T * scale + causal mask) v become one ring of k and v blocks
// with an online softmax: per step the block's scores, the running row
// max, exp against it, the rescaled sum and output, and one division at
// the end. The gathers go; each rank holds one block of scores per step.
// RUN: braid-opt %s -split-input-file --braid-overlap="balance-attention=off" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-overlap="balance-attention=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-overlap="mode=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// The whole pipeline accepts it, the schedule checker included.
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer check-schedule=1" -o /dev/null

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>

// CHECK-LABEL: func.func @causal(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x4x8xf32>, %[[K:[^:]*]]: tensor<2x4x8xf32>, %[[V:[^:]*]]: tensor<2x4x8xf32>
// CHECK-NOT: dist.all_gather
// Step 0: the local blocks travel while their scores are computed.
// CHECK: %[[KT0:.*]], %[[KF0:.*]] = dist.shift_start %[[K]] on @cp axes = [0] offset = 1 {dist.step = 0 : i64
// CHECK: %[[VT0:.*]], %[[VF0:.*]] = dist.shift_start %[[V]] on @cp axes = [0] offset = 1 {dist.step = 0 : i64
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[K]] : tensor<2x4x8xf32>, tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x4xf32>)
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[V]] : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x8xf32>)
// Step 1: the next blocks, rescaling by exp(max_old - max_new).
// CHECK: %[[K1:.*]] = dist.wait %[[KT0]], %[[KF0]]
// CHECK: %[[V1:.*]] = dist.wait %[[VT0]], %[[VF0]]
// CHECK: dist.shift_start %[[K1]] {{.*}}dist.step = 1
// CHECK: dist.shift_start %[[V1]] {{.*}}dist.step = 1
// CHECK: ins(%{{.*}}, %[[K1]] : tensor<2x4x8xf32>, tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x4xf32>)
// CHECK: ins(%{{.*}}, %[[V1]] : tensor<2x4x4xf32>, tensor<2x4x8xf32>)
// CHECK: dist.step = 2
// CHECK: dist.step = 2
// CHECK-NOT: dist.step = 3
// The last blocks arrive; then the one division, of the output by the row
// sums.
// CHECK: dist.wait
// CHECK: dist.wait
// CHECK-NOT: dist.
// CHECK: arith.divf
// CHECK-NEXT: linalg.yield
// CHECK: return
// REMARK: remark: all_gather fused with 'linalg.generic' as ring_attention (4 chunks): predicted {{.*}} with the all_gather at {{.*}}ring-attention.mlir:{{[0-9]+}}:{{[0-9]+}} in the same ring; a rank holds 128.0 B of scores per step instead of 512.0 B
// OFF: remark: all_gather kept whole: overlap=off
// OFF: remark: all_gather kept whole: overlap=off
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

// The probabilities are returned: they must exist whole. The gathers then
// go as any other (at these sizes, whole and asynchronous: a ring's chunks
// would each read all of q).
// REMARK: not ring attention: the probabilities are used besides their product with v
// REMARK: all_gather made asynchronous
func.func @probs_returned(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x16xf32>) {
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
  return %out, %p : tensor<2x4x8xf32>, tensor<2x4x16xf32>
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

// REMARK: not ring attention: the row sum does not start from zero
func.func @sum_from_one(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
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
  %one = arith.constant 1.0 : f32
  %z0 = linalg.fill ins(%one : f32) outs(%ze : tensor<2x4xf32>) -> tensor<2x4xf32>
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

// REMARK: not ring attention: the row max is used besides the exponentials
func.func @max_returned(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>) {
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
  return %out, %mx : tensor<2x4x8xf32>, tensor<2x4xf32>
}


// -----

shard.grid @cp(shape = 2x2)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>

// v gathered along the other axis of a 2-D grid.
// REMARK: not ring attention: k and v are gathered over different groups or blocks
func.func @two_axes(%q: tensor<2x4x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x8x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [1] dim = 1 : tensor<2x8x8xf32> -> tensor<2x16x8xf32>
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

shard.grid @cp(shape = 3x2)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>

// cp along the second axis of a 2-D (tp x cp) grid: a ring of 2 steps.
// CHECK-LABEL: func.func @cp_axis_1(
// CHECK-NOT: dist.all_gather
// CHECK: dist.shift_start {{.*}} on @cp axes = [1] offset = 1 {dist.step = 0 : i64
// CHECK: dist.shift_start {{.*}} on @cp axes = [1] offset = 1 {dist.step = 0 : i64
// CHECK-NOT: dist.step = 1
// CHECK: return
// REMARK: as ring_attention (2 chunks)
// REMARK-SAME: a rank holds 256.0 B of scores per step instead of 512.0 B
func.func @cp_axis_1(%q: tensor<2x4x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 8 : index
  %kg = dist.all_gather %k on @cp axes = [1] dim = 1 : tensor<2x8x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [1] dim = 1 : tensor<2x8x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %pos = shard.process_multi_index on @cp axes = [1] : index
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

// GQA: one kv head for two q heads, repeated after the gathers (a
// broadcast and a reshape, which the gathers keep after them: sinking
// them would carry the repeated heads). The ring carries the kv head
// and repeats each block.
// CHECK-LABEL: func.func @gqa(
// CHECK: dist.shift_start %{{.*}} on @g axes = [0] offset = 1 {dist.step = 0 : i64{{.*}} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
// CHECK: dist.shift_start %{{.*}} on @g axes = [0] offset = 1 {dist.step = 0 : i64{{.*}} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
// CHECK-NOT: dist.all_gather
// CHECK: return
// REMARK: as ring_attention (4 chunks)
#gqa = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
#gqa1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#gqa2 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#gqa3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#gqa4 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#gqa5 = affine_map<(d0, d1, d2) -> (d0, d1)>
#gqa6 = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
shard.grid @g(shape = 4)
func.func @gqa(%arg0: tensor<2x4x8xf32>, %arg1: tensor<1x4x8xf32>, %arg2: tensor<1x4x8xf32>) -> tensor<2x4x8xf32> {
  %cst = arith.constant -1.000000e+30 : f32
  %c4 = arith.constant 4 : index
  %cst_0 = arith.constant 0.353553385 : f32
  %cst_1 = arith.constant 0.000000e+00 : f32
  %cst_2 = arith.constant -3.000000e+38 : f32
  %0 = dist.all_gather %arg1 on @g axes = [0] dim = 1 : tensor<1x4x8xf32> -> tensor<1x16x8xf32>
  %1 = dist.all_gather %arg2 on @g axes = [0] dim = 1 : tensor<1x4x8xf32> -> tensor<1x16x8xf32>
  %2 = tensor.empty() : tensor<1x2x16x8xf32>
  %3 = linalg.generic {indexing_maps = [#gqa, #gqa1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%0 : tensor<1x16x8xf32>) outs(%2 : tensor<1x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x16x8xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %4 = tensor.empty() : tensor<1x2x16x8xf32>
  %5 = linalg.generic {indexing_maps = [#gqa, #gqa1], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%1 : tensor<1x16x8xf32>) outs(%4 : tensor<1x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x2x16x8xf32>
  %collapsed_3 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %6 = tensor.empty() : tensor<2x4x16xf32>
  %7 = linalg.fill ins(%cst_1 : f32) outs(%6 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %8 = linalg.generic {indexing_maps = [#gqa2, #gqa, #gqa3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%arg0, %collapsed : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%7 : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %25 = arith.mulf %in, %in_4 : f32
    %26 = arith.addf %out, %25 : f32
    linalg.yield %26 : f32
  } -> tensor<2x4x16xf32>
  %9 = tensor.empty() : tensor<2x4x16xf32>
  %proc_linear_idx = shard.process_multi_index on @g axes = [0] : index
  %10 = arith.muli %proc_linear_idx, %c4 : index
  %11 = linalg.generic {indexing_maps = [#gqa4, #gqa4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%8 : tensor<2x4x16xf32>) outs(%9 : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %25 = linalg.index 1 : index
    %26 = linalg.index 2 : index
    %27 = arith.addi %10, %25 : index
    %28 = arith.cmpi ugt, %26, %27 : index
    %29 = arith.mulf %in, %cst_0 : f32
    %30 = arith.select %28, %cst, %29 : f32
    linalg.yield %30 : f32
  } -> tensor<2x4x16xf32>
  %12 = tensor.empty() : tensor<2x4xf32>
  %13 = tensor.empty() : tensor<2x4xf32>
  %14 = linalg.fill ins(%cst_2 : f32) outs(%13 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %15 = linalg.generic {indexing_maps = [#gqa4, #gqa5], iterator_types = ["parallel", "parallel", "reduction"]} ins(%11 : tensor<2x4x16xf32>) outs(%14 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %25 = arith.maximumf %out, %in : f32
    linalg.yield %25 : f32
  } -> tensor<2x4xf32>
  %16 = tensor.empty() : tensor<2x4x16xf32>
  %17 = linalg.generic {indexing_maps = [#gqa4, #gqa5, #gqa4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%11, %15 : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%16 : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %25 = arith.subf %in, %in_4 : f32
    %26 = math.exp %25 : f32
    linalg.yield %26 : f32
  } -> tensor<2x4x16xf32>
  %18 = linalg.fill ins(%cst_1 : f32) outs(%12 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %19 = linalg.generic {indexing_maps = [#gqa4, #gqa5], iterator_types = ["parallel", "parallel", "reduction"]} ins(%17 : tensor<2x4x16xf32>) outs(%18 : tensor<2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %25 = arith.addf %in, %out : f32
    linalg.yield %25 : f32
  } -> tensor<2x4xf32>
  %20 = tensor.empty() : tensor<2x4x16xf32>
  %21 = linalg.generic {indexing_maps = [#gqa4, #gqa5, #gqa4], iterator_types = ["parallel", "parallel", "parallel"]} ins(%17, %19 : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%20 : tensor<2x4x16xf32>) {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %25 = arith.divf %in, %in_4 : f32
    linalg.yield %25 : f32
  } -> tensor<2x4x16xf32>
  %22 = tensor.empty() : tensor<2x4x8xf32>
  %23 = linalg.fill ins(%cst_1 : f32) outs(%22 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %24 = linalg.generic {indexing_maps = [#gqa2, #gqa6, #gqa3], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%21, %collapsed_3 : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%23 : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %in_4: f32, %out: f32):
    %25 = arith.mulf %in, %in_4 : f32
    %26 = arith.addf %out, %25 : f32
    linalg.yield %26 : f32
  } -> tensor<2x4x8xf32>
  return %24 : tensor<2x4x8xf32>
}
