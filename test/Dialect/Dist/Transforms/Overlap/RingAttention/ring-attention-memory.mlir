// The memory check of ring attention: at N = 16k tokens on 4 ranks (8
// heads, f32 scores), a rank that gathers k and v holds its 4k x 16k
// scores per head whole, 2 GiB. The ring scores its blocks' keys 512 at a
// time by default, 4k x 512 per head, 64 MiB (O(N/p x d)); with one piece
// per block (sub-chunks=1) a 4k x 4k block, 512 MiB. The report says both.
// RUN: braid-opt %s --braid-overlap="report=%t.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: FileCheck %s < %t.json
// RUN: braid-opt %s --braid-overlap="report=%t.whole.json sub-chunks=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHOLE-REMARK
// RUN: FileCheck %s --check-prefix=WHOLE < %t.whole.json
// At 4k tokens the whole scores (128 MiB) fit the 256 MiB a rank may hold
// and the cpu preset predicts the ring slower (so does the measurement,
// bench/cpu/ring_attention.py): auto keeps the gathers; force rings.
// RUN: sed -e 's/16384/X16/g' -e 's/4096/1024/g' -e 's/X16/4096/g' %s > %t.4k.mlir
// RUN: braid-opt %t.4k.mlir --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=FITS
// RUN: braid-opt %t.4k.mlir --braid-overlap=mode=force -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORCED
// FITS: remark: not ring attention: predicted {{.*}} for the gathers and the whole rows, and the 128.0 MiB of scores a rank holds fit the 256.0 MiB budget
// FITS-NOT: as ring_attention
// FORCED: as ring_attention
// An indivisible piece count is refused, with the reason.
// RUN: braid-opt %s --braid-overlap="sub-chunks=3" -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNEVEN
// CHECK: "strategy": "ring_attention"
// CHECK-NEXT: "chunks": 32,
// CHECK-NEXT: "scores": {
// CHECK-NEXT: "materialized_bytes": 2147483648,
// CHECK-NEXT: "per_step_bytes": 67108864
// CHECK: "strategy": "ring_attention"
// CHECK: "reason": "travels in the ring_attention of the all_gather at
// REMARK: as ring_attention (32 chunks)
// REMARK-SAME: a rank holds 64.0 MiB of scores per step instead of 2.0 GiB
// WHOLE: "chunks": 4,
// WHOLE-NEXT: "scores": {
// WHOLE-NEXT: "materialized_bytes": 2147483648,
// WHOLE-NEXT: "per_step_bytes": 536870912
// WHOLE-REMARK: a rank holds 512.0 MiB of scores per step instead of 2.0 GiB
// UNEVEN: not ring attention: its block of 4096 keys does not split into 3 pieces (sub-chunks)

shard.grid @cp(shape = 4)

#qk = affine_map<(h, i, j, c) -> (h, i, c)>
#kk = affine_map<(h, i, j, c) -> (h, j, c)>
#sk = affine_map<(h, i, j, c) -> (h, i, j)>
#pv = affine_map<(h, i, c, j) -> (h, i, j)>
#vv = affine_map<(h, i, c, j) -> (h, j, c)>
#ov = affine_map<(h, i, c, j) -> (h, i, c)>
#id = affine_map<(h, i, j) -> (h, i, j)>
#row = affine_map<(h, i, j) -> (h, i)>

func.func @long(%q: tensor<8x4096x128xf32>, %k: tensor<8x4096x128xf32>, %v: tensor<8x4096x128xf32>) -> tensor<8x4096x128xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %neg = arith.constant -1.0e+30 : f32
  %scale = arith.constant 0.353553385 : f32
  %c4 = arith.constant 4096 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<8x4096x128xf32> -> tensor<8x16384x128xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<8x4096x128xf32> -> tensor<8x16384x128xf32>
  %se = tensor.empty() : tensor<8x4096x16384xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<8x4096x16384xf32>) -> tensor<8x4096x16384xf32>
  %s = linalg.generic {indexing_maps = [#qk, #kk, #sk], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<8x4096x128xf32>, tensor<8x16384x128xf32>) outs(%sz : tensor<8x4096x16384xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x4096x16384xf32>
  %pos = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %pos, %c4 : index
  %me = tensor.empty() : tensor<8x4096x16384xf32>
  %sm = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<8x4096x16384xf32>) outs(%me : tensor<8x4096x16384xf32>) {
  ^bb0(%x: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %gi = arith.addi %base, %i : index
    %future = arith.cmpi ugt, %j, %gi : index
    %y = arith.mulf %x, %scale : f32
    %r = arith.select %future, %neg, %y : f32
    linalg.yield %r : f32
  } -> tensor<8x4096x16384xf32>
  %re = tensor.empty() : tensor<8x4096xf32>
  %mx0 = linalg.fill ins(%low : f32) outs(%re : tensor<8x4096xf32>) -> tensor<8x4096xf32>
  %mx = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<8x4096x16384xf32>) outs(%mx0 : tensor<8x4096xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<8x4096xf32>
  %ee = tensor.empty() : tensor<8x4096x16384xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<8x4096x16384xf32>, tensor<8x4096xf32>) outs(%ee : tensor<8x4096x16384xf32>) {
  ^bb0(%x: f32, %mm: f32, %o: f32):
    %d = arith.subf %x, %mm : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<8x4096x16384xf32>
  %ze = tensor.empty() : tensor<8x4096xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%ze : tensor<8x4096xf32>) -> tensor<8x4096xf32>
  %z = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<8x4096x16384xf32>) outs(%z0 : tensor<8x4096xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x4096xf32>
  %pe = tensor.empty() : tensor<8x4096x16384xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %z : tensor<8x4096x16384xf32>, tensor<8x4096xf32>) outs(%pe : tensor<8x4096x16384xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<8x4096x16384xf32>
  %oe = tensor.empty() : tensor<8x4096x128xf32>
  %oz = linalg.fill ins(%zero : f32) outs(%oe : tensor<8x4096x128xf32>) -> tensor<8x4096x128xf32>
  %out = linalg.generic {indexing_maps = [#pv, #vv, #ov], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<8x4096x16384xf32>, tensor<8x16384x128xf32>) outs(%oz : tensor<8x4096x128xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x4096x128xf32>
  return %out : tensor<8x4096x128xf32>
}


