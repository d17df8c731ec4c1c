// A whole model's causal mask under context parallelism, as the front door
// gives it for HF's LlamaModel: each rank computes its positions (an iota
// offset by its block, 4 * p), partitioning gathers them, and the mask
// compares positions read from the gathered tensor, some through a
// function the layers call (the import outlines what the layers share).
// An all-gather of a * (l + 4 * p) + c over blocks of 4 is a * g + c at
// every g of the whole, so the mask reads as the comparison kv <= q + 4 * p
// and the ring skips the pieces it fills whole; the gathered positions are
// the same on every rank, so a rank may compute its owner's mask rows
// again: the ring is balanced. Gathering positions without the block's
// offset (every rank's 0..3) is no iota of the whole: nothing is skipped.
// The numbers are test_hf.py::test_llama_model_context_parallel's.
// RUN: braid-opt %s --braid-overlap 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: sed -e 's/%at = arith.addi %l, %base : index/%at = arith.addi %l, %c0i : index/' %s | braid-opt --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=KEEPS
// Positions offset by twice the block are not an iota either.
// RUN: sed -e 's/%base = arith.muli %rank, %c4 : index/%base = arith.muli %rank, %c8 : index/' %s | braid-opt --braid-overlap -o /dev/null 2>&1 | FileCheck %s --check-prefix=KEEPS
// The whole pipeline accepts it, the schedule checker included.
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer check-schedule=1" -o /dev/null

// CHECK-LABEL: func.func @main(
// CHECK: dist.shift_start
// CHECK: arith.cmpi sge
// CHECK: scf.if
// CHECK: return
// REMARK: as ring_attention (4 chunks)
// REMARK-SAME: skips the pieces its mask fills whole; balanced: each rank also scores the rows of the block it holds
// KEEPS: as ring_attention (4 chunks)
// KEEPS-NOT: skips
shard.grid @cp(shape = 4)
func.func private @positions(%p: tensor<4xi64>) -> tensor<16xi64> {
  %g = dist.all_gather %p on @cp axes = [0] dim = 0 : tensor<4xi64> -> tensor<16xi64>
  return %g : tensor<16xi64>
}
func.func @main(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %v: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %low = arith.constant -3.0e+38 : f32
  %c0i = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %kg = dist.all_gather %k on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %vg = dist.all_gather %v on @cp axes = [0] dim = 1 : tensor<2x4x8xf32> -> tensor<2x16x8xf32>
  %se = tensor.empty() : tensor<2x4x16xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, i, j, c) -> (h, i, c)>, affine_map<(h, i, j, c) -> (h, j, c)>, affine_map<(h, i, j, c) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %kg : tensor<2x4x8xf32>, tensor<2x16x8xf32>) outs(%sz : tensor<2x4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x16xf32>
  // This rank's positions, gathered directly and through a call.
  %rank = shard.process_multi_index on @cp axes = [0] : index
  %base = arith.muli %rank, %c4 : index
  %le = tensor.empty() : tensor<4xi64>
  %local = linalg.generic {indexing_maps = [affine_map<(a) -> (a)>], iterator_types = ["parallel"]} outs(%le : tensor<4xi64>) {
  ^bb0(%o: i64):
    %l = linalg.index 0 : index
    %at = arith.addi %l, %base : index
    %c = arith.index_cast %at : index to i64
    linalg.yield %c : i64
  } -> tensor<4xi64>
  %all = dist.all_gather %local on @cp axes = [0] dim = 0 : tensor<4xi64> -> tensor<16xi64>
  %called = call @positions(%local) : (tensor<4xi64>) -> tensor<16xi64>
  // keep = positions[kv] <= positions[q], the indices wrapped as torch
  // wraps negative ones.
  %c0 = arith.constant 0 : i64
  %c16 = arith.constant 16 : i64
  %mz = arith.constant dense<0.0> : tensor<f32>
  %mi = arith.constant dense<0xFF800000> : tensor<f32>
  %mke = tensor.empty() : tensor<4x16xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a)>, affine_map<(a, b) -> (b)>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> (a, b)>], iterator_types = ["parallel", "parallel"]} ins(%local, %all, %mz, %mi : tensor<4xi64>, tensor<16xi64>, tensor<f32>, tensor<f32>) outs(%mke : tensor<4x16xf32>) {
  ^bb0(%qi: i64, %kvi: i64, %z: f32, %ni: f32, %o: f32):
    %qn = arith.cmpi slt, %qi, %c0 : i64
    %qw = arith.addi %qi, %c16 : i64
    %qs = arith.select %qn, %qw, %qi : i64
    %qx = arith.index_cast %qs : i64 to index
    %kn = arith.cmpi slt, %kvi, %c0 : i64
    %kw = arith.addi %kvi, %c16 : i64
    %ks = arith.select %kn, %kw, %kvi : i64
    %kx = arith.index_cast %ks : i64 to index
    %qp = tensor.extract %called[%qx] : tensor<16xi64>
    %kp = tensor.extract %called[%kx] : tensor<16xi64>
    %ok = arith.cmpi sle, %kp, %qp : i64
    %r = arith.select %ok, %z, %ni : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %scale = arith.constant 0.35355339059327373 : f32
  %me = tensor.empty() : tensor<2x4x16xf32>
  %sm = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (i, j)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s, %mask : tensor<2x4x16xf32>, tensor<4x16xf32>) outs(%me : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %mk: f32, %o: f32):
    %y = arith.mulf %x, %scale : f32
    %r = arith.addf %y, %mk : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %mx0 = tensor.empty() : tensor<2x4xf32>
  %mx1 = linalg.fill ins(%low : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %mx = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%sm : tensor<2x4x16xf32>) outs(%mx1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.maximumf %acc, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %ee = tensor.empty() : tensor<2x4x16xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%sm, %mx : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%ee : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %y = arith.subf %x, %m : f32
    %r = math.exp %y : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %sum1 = linalg.fill ins(%zero : f32) outs(%mx0 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%e : tensor<2x4x16xf32>) outs(%sum1 : tensor<2x4xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %r = arith.addf %x, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4xf32>
  %pe = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(h, i, j) -> (h, i, j)>, affine_map<(h, i, j) -> (h, i)>, affine_map<(h, i, j) -> (h, i, j)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%e, %sum : tensor<2x4x16xf32>, tensor<2x4xf32>) outs(%pe : tensor<2x4x16xf32>) {
  ^bb0(%x: f32, %zz: f32, %o: f32):
    %r = arith.divf %x, %zz : f32
    linalg.yield %r : f32
  } -> tensor<2x4x16xf32>
  %oute = tensor.empty() : tensor<2x4x8xf32>
  %outz = linalg.fill ins(%zero : f32) outs(%oute : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(h, i, c, j) -> (h, i, j)>, affine_map<(h, i, c, j) -> (h, j, c)>, affine_map<(h, i, c, j) -> (h, i, c)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%p, %vg : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%outz : tensor<2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %mul = arith.mulf %a, %b : f32
    %add = arith.addf %acc, %mul : f32
    linalg.yield %add : f32
  } -> tensor<2x4x8xf32>
  return %out : tensor<2x4x8xf32>
}
