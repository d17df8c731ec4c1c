// A causal mask as HuggingFace builds it (create_causal_mask): a tensor
// over the whole sequence, 0 where the key's position is at most the
// row's and -inf elsewhere, computed from iotas of the positions (an iota
// expanded to a row and to a column, their difference compared with 0),
// sliced to this rank's rows and added to the scores. The ring reads its
// elements as a comparison of the scores' indices, through the generics,
// reshapes and the slice, and skips the pieces it fills whole. A fill
// above -1e30 (the masked keys keep weight) or an equality leave it alone.
// The numbers are test/E2E/ring-attention.test's (variant iota), and
// test_hf.py's context-parallel layers.
// RUN: braid-opt %s --braid-overlap 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: sed -e 's/dense<0xFF800000>/dense<-1.0e+04>/' %s | braid-opt --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=KEEPS
// RUN: sed -e 's/arith.cmpi sle, %d, %c0/arith.cmpi eq, %d, %c0/' %s | braid-opt --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=KEEPS
// The whole pipeline accepts it, the schedule checker included.
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer check-schedule=1" -o /dev/null

// CHECK-LABEL: func.func @main(
// CHECK: dist.shift_start
// Step 1: the other rank's keys, skipped when masked for every row.
// CHECK: dist.wait
// CHECK: arith.cmpi sge
// CHECK: scf.if
// CHECK: return
// REMARK: as ring_attention (2 chunks)
// REMARK-SAME: skips the pieces its mask fills whole; not balanced: on 2 ranks it saves no step
// KEEPS: as ring_attention (2 chunks)
// KEEPS-NOT: skips
shard.grid @g(shape = 2)
func.func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %kg = dist.all_gather %k on @g axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %vg = dist.all_gather %v on @g axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  %se = tensor.empty() : tensor<2x4x8xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x8x8xf32>) outs(%sz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x8xf32>
  %scale = arith.constant 0.35355339059327373 : f32
  %me = tensor.empty() : tensor<2x4x8xf32>
  %ie = tensor.empty() : tensor<8xi64>
  %iota = linalg.generic {indexing_maps = [affine_map<(a) -> (a)>], iterator_types = ["parallel"]} outs(%ie : tensor<8xi64>) {
  ^bb0(%o: i64):
    %a = linalg.index 0 : index
    %c = arith.index_cast %a : index to i64
    linalg.yield %c : i64
  } -> tensor<8xi64>
  %cols = tensor.expand_shape %iota [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %rows = tensor.expand_shape %iota [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %c0 = arith.constant 0 : i64
  %mz = arith.constant dense<0.0> : tensor<f32>
  %mi = arith.constant dense<0xFF800000> : tensor<f32>
  %mke = tensor.empty() : tensor<8x8xf32>
  %hf = linalg.generic {indexing_maps = [affine_map<(a, b) -> (0, b)>, affine_map<(a, b) -> (a, 0)>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%cols, %rows, %mz, %mi : tensor<1x8xi64>, tensor<8x1xi64>, tensor<f32>, tensor<f32>) outs(%mke : tensor<8x8xf32>) {
  ^bb0(%kv: i64, %qi: i64, %z: f32, %ni: f32, %o: f32):
    %d = arith.subi %kv, %qi : i64
    %ok = arith.cmpi sle, %d, %c0 : i64
    %r = arith.select %ok, %z, %ni : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  %pos = shard.process_multi_index on @g axes = [0] : index
  %tl = arith.constant 4 : index
  %base = arith.muli %pos, %tl : index
  %mine = tensor.extract_slice %hf[%base, 0] [4, 8] [1, 1] : tensor<8x8xf32> to tensor<4x8xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mine : tensor<2x4x8xf32>, tensor<4x8xf32>) outs(%me : tensor<2x4x8xf32>) {
  ^bb0(%x: f32, %mk: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    %r = arith.addf %y, %mk : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %mx0 = tensor.empty() : tensor<2x4xf32>
  %mx1 = linalg.fill ins(%low : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x8xf32>) outs(%mx1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x8xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x8xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x8xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    %r = math.exp %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %sum1 = linalg.fill ins(%zero : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x8xf32>) outs(%sum1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %sum : tensor<2x4x8xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x8xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %oute = tensor.empty() : tensor<2x4x8xf32>
  %outz = linalg.fill ins(%zero : f32) outs(%oute : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(h, i, c, j) -> (h, i, j)>, affine_map<(h, i, c, j) -> (h, j, c)>, affine_map<(h, i, c, j) -> (h, i, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<2x4x8xf32>, tensor<2x8x8xf32>) outs(%outz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}
