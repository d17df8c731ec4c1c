// Memory-bound chains become one row-tiled kernel each (scf.forall marked
// braid.kernel), with exact kernel counts, no recomputation, and remarks.
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound))" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound))" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound{mode=off}))" | FileCheck %s --check-prefix=OFF
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound{row-tile=4}))" | FileCheck %s --check-prefix=TILE
// RUN: not braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound{mode=sometimes}))" 2>&1 | FileCheck %s --check-prefix=MODE
// A kernel of one tile survives the canonicalizer (its loop is mapped).
// RUN: braid-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(braid-fuse-memory-bound,canonicalize))" 2>/dev/null | FileCheck %s --check-prefix=ONE

// MODE: for the --mode option: Cannot find option named 'sometimes'

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// Softmax: max, exp(x - max), sum, divide: one kernel; the exponential,
// read by the sum and the divide, is computed once per tile.
// REMARK: remark: fused 6 ops into one kernel with 2 row reductions: moves 65536 bytes instead of 264704
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: linalg
// CHECK: scf.forall (%{{.*}}) = (0) to (64) step (32)
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// CHECK-NEXT: return
// OFF-LABEL: func.func @softmax
// OFF-NOT: scf.forall
// TILE-LABEL: func.func @softmax
// TILE: scf.forall (%{{.*}}) = (0) to (64) step (4)
func.func @softmax(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %ninf = arith.constant -3.0e38 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<64xf32>) -> tensor<64xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<64x128xf32>) outs(%m0 : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %e1 = tensor.empty() : tensor<64x128xf32>
  %e = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<64x128xf32>, tensor<64xf32>) outs(%e1 : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<64x128xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64xf32>) -> tensor<64xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%e : tensor<64x128xf32>) outs(%s0 : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<64xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e, %s : tensor<64x128xf32>, tensor<64xf32>) outs(%e1 : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<64x128xf32>
  return %y : tensor<64x128xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// Bias + residual + layernorm, the sum also returned (the next residual):
// one kernel with two outputs; the sum and the mean computed once.
// REMARK: remark: fused 6 ops into one kernel writing 2 outputs with 2 row reductions
// CHECK-LABEL: func.func @addnorm
// CHECK: %[[K:.*]]:2 = scf.forall
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: tensor.parallel_insert_slice
// CHECK: tensor.parallel_insert_slice
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// CHECK-NEXT: return %[[K]]#0, %[[K]]#1
func.func @addnorm(%x: tensor<16x64xf32>, %y: tensor<16x64xf32>, %b: tensor<64xf32>, %g: tensor<64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 64.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  %e1 = tensor.empty() : tensor<16x64xf32>
  %h = linalg.generic {indexing_maps = [#id, #id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y, %b : tensor<16x64xf32>, tensor<16x64xf32>, tensor<64xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %c: f32, %d: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %t = arith.addf %s, %d : f32
    linalg.yield %t : f32
  } -> tensor<16x64xf32>
  %e0 = tensor.empty() : tensor<16xf32>
  %z0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16xf32>) -> tensor<16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h : tensor<16x64xf32>) outs(%z0 : tensor<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %sq = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%h, %sum : tensor<16x64xf32>, tensor<16xf32>) outs(%z0 : tensor<16xf32>) {
  ^bb0(%a: f32, %s: f32, %acc: f32):
    %mean = arith.divf %s, %n : f32
    %d = arith.subf %a, %mean : f32
    %d2 = arith.mulf %d, %d : f32
    %r = arith.addf %acc, %d2 : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %out = linalg.generic {indexing_maps = [#id, #row, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %sum, %sq, %g : tensor<16x64xf32>, tensor<16xf32>, tensor<16xf32>, tensor<64xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %s: f32, %v: f32, %gg: f32, %o: f32):
    %mean = arith.divf %s, %n : f32
    %var = arith.divf %v, %n : f32
    %ve = arith.addf %var, %eps : f32
    %rs = math.rsqrt %ve : f32
    %d = arith.subf %a, %mean : f32
    %nrm = arith.mulf %d, %rs : f32
    %r = arith.mulf %nrm, %gg : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  return %out, %h : tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// RMSNorm in f16 storage, f32 math: one kernel.
// REMARK: remark: fused 3 ops into one kernel with 1 row reduction
// CHECK-LABEL: func.func @rmsnorm
// CHECK: scf.forall (%{{.*}}) = (0) to (32) step (16)
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
func.func @rmsnorm(%x: tensor<32x1024xf16>, %g: tensor<1024xf16>) -> tensor<32x1024xf16> {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 1024.0 : f32
  %eps = arith.constant 1.0e-6 : f32
  %e0 = tensor.empty() : tensor<32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<32xf32>) -> tensor<32xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<32x1024xf16>) outs(%z : tensor<32xf32>) {
  ^bb0(%a: f16, %acc: f32):
    %f = arith.extf %a : f16 to f32
    %q = arith.mulf %f, %f : f32
    %r = arith.addf %acc, %q : f32
    linalg.yield %r : f32
  } -> tensor<32xf32>
  %e1 = tensor.empty() : tensor<32x1024xf16>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %g : tensor<32x1024xf16>, tensor<32xf32>, tensor<1024xf16>) outs(%e1 : tensor<32x1024xf16>) {
  ^bb0(%a: f16, %s: f32, %gg: f16, %o: f16):
    %f = arith.extf %a : f16 to f32
    %gf = arith.extf %gg : f16 to f32
    %m = arith.divf %s, %n : f32
    %me = arith.addf %m, %eps : f32
    %rs = math.rsqrt %me : f32
    %t = arith.mulf %f, %rs : f32
    %u = arith.mulf %t, %gf : f32
    %h = arith.truncf %u : f32 to f16
    linalg.yield %h : f16
  } -> tensor<32x1024xf16>
  return %y : tensor<32x1024xf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A reduction two separate results need is computed once and materialized
// (one kernel with the fill of its accumulator): fusing it into both
// consumers would compute it twice.
// REMARK: remark: fused 2 ops into one kernel with 1 row reduction
// CHECK-LABEL: func.func @shared_reduction
// CHECK: scf.forall
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// CHECK-NOT: iterator_types = ["parallel", "reduction"]
// CHECK-NOT: scf.forall
// CHECK: return
func.func @shared_reduction(%x: tensor<16x64xf32>) -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16xf32>) -> tensor<16xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x64xf32>) outs(%z : tensor<16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %e1 = tensor.empty() : tensor<16x64xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<16x64xf32>, tensor<16xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<16x64xf32>, tensor<16xf32>) outs(%e1 : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<16x64xf32>
  return %y1, %y2 : tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// GEMM epilogue: matmul, bias + GELU-like activation + residual, in bf16
// with f32 accumulation: one kernel over rows of the product.
// REMARK: remark: fused 3 ops into one kernel (GEMM epilogue) with 0 row reductions
// CHECK-LABEL: func.func @epilogue
// CHECK: scf.forall
// CHECK: linalg.fill
// CHECK: linalg.matmul
// CHECK: linalg.generic
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// The epilogue stops at a transpose.
// CHECK: linalg.transpose
// OFF-LABEL: func.func @epilogue
// OFF-NOT: scf.forall
// OFF: linalg.matmul
func.func @epilogue(%a: tensor<64x128xbf16>, %w: tensor<128x256xbf16>, %b: tensor<256xf32>, %res: tensor<64x256xbf16>) -> tensor<256x64xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x256xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64x256xf32>) -> tensor<64x256xf32>
  %mm = linalg.matmul ins(%a, %w : tensor<64x128xbf16>, tensor<128x256xbf16>) outs(%z : tensor<64x256xf32>) -> tensor<64x256xf32>
  %e1 = tensor.empty() : tensor<64x256xbf16>
  %y = linalg.generic {indexing_maps = [#id, #col, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%mm, %b, %res : tensor<64x256xf32>, tensor<256xf32>, tensor<64x256xbf16>) outs(%e1 : tensor<64x256xbf16>) {
  ^bb0(%v: f32, %c: f32, %r: bf16, %o: bf16):
    %s = arith.addf %v, %c : f32
    %t = math.tanh %s : f32
    %act = arith.mulf %s, %t : f32
    %rf = arith.extf %r : bf16 to f32
    %sum = arith.addf %act, %rf : f32
    %h = arith.truncf %sum : f32 to bf16
    linalg.yield %h : bf16
  } -> tensor<64x256xbf16>
  %e2 = tensor.empty() : tensor<256x64xbf16>
  %t = linalg.transpose ins(%y : tensor<64x256xbf16>) outs(%e2 : tensor<256x64xbf16>) permutation = [1, 0]
  return %t : tensor<256x64xbf16>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Dynamic shapes are left alone.
// CHECK-LABEL: func.func @dynamic
// CHECK-NOT: scf.forall
func.func @dynamic(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%d) : tensor<?x64xf32>
  %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %a : f32
    linalg.yield %r : f32
  } -> tensor<?x64xf32>
  return %z : tensor<?x64xf32>
}

// -----

// Two reductions that frontends start from one shared zero fill (torch-mlir
// CSEs it): each kernel fills its own accumulator, and neither yields the
// fill for the other (it would reduce into it in place first).
// CHECK-LABEL: func.func @shared_fill
// CHECK: scf.forall {{.*}} shared_outs(%{{.*}} = %{{[^)]*}}) -> (tensor<8xf32>)
// CHECK: linalg.fill
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// CHECK: scf.forall {{.*}} shared_outs(%{{.*}} = %{{[^)]*}}) -> (tensor<8xf32>)
// CHECK: linalg.fill
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @shared_fill(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>)
    -> (tensor<8xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %e8 = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e8 : tensor<8xf32>) -> tensor<8xf32>
  %xx = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<8x64xf32>
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%xx : tensor<8x64xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  %yy = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x64xf32>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<8x64xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%yy : tensor<8x64xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<8xf32>
  return %s1, %s2 : tensor<8xf32>, tensor<8xf32>
}

// -----

// A chain inside host control flow (ring attention's skipped pieces put a
// piece's chain in an scf.if) is fused there.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @in_branch
// CHECK: scf.if
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NOT: linalg.generic
// CHECK: scf.forall
// CHECK-COUNT-2: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// CHECK-NEXT: scf.yield
// REMARK: remark: fused 3 ops into one kernel with 1 row reduction: moves 33024 bytes instead of 132096
func.func @in_branch(%skip: i1, %x: tensor<64x128xf32>, %old: tensor<64xf32>) -> tensor<64xf32> {
  %r = scf.if %skip -> tensor<64xf32> {
    scf.yield %old : tensor<64xf32>
  } else {
    %zero = arith.constant 0.0 : f32
    %e1 = tensor.empty() : tensor<64x128xf32>
    %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
        ins(%x : tensor<64x128xf32>) outs(%e1 : tensor<64x128xf32>) {
    ^bb0(%a: f32, %o: f32):
      %y = math.exp %a : f32
      linalg.yield %y : f32
    } -> tensor<64x128xf32>
    %e0 = tensor.empty() : tensor<64xf32>
    %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64xf32>) -> tensor<64xf32>
    %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
        ins(%e : tensor<64x128xf32>) outs(%s0 : tensor<64xf32>) {
    ^bb0(%a: f32, %acc: f32):
      %y = arith.addf %acc, %a : f32
      linalg.yield %y : f32
    } -> tensor<64xf32>
    scf.yield %s : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}

// -----

// A decode step's single row: residual add and RMSNorm in one kernel of
// one block, which the canonicalizer keeps.
// ONE-LABEL: func.func @one_row
// ONE: scf.forall (%{{.*}}) in (1) shared_outs
// ONE-COUNT-3: linalg.generic
// ONE: } {braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
// ONE-NOT: linalg.generic
// ONE: return
func.func @one_row(%x: tensor<1x64xf32>, %res: tensor<1x64xf32>, %gamma: tensor<64xf32>) -> tensor<1x64xf32> {
  %zero = arith.constant 0.0 : f32
  %he = tensor.empty() : tensor<1x64xf32>
  %h = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x, %res : tensor<1x64xf32>, tensor<1x64xf32>) outs(%he : tensor<1x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x64xf32>
  %se = tensor.empty() : tensor<1xf32>
  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<1xf32>) -> tensor<1xf32>
  %ss = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]} ins(%h : tensor<1x64xf32>) outs(%sz : tensor<1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = arith.mulf %a, %a : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<1xf32>
  %ne = tensor.empty() : tensor<1x64xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%h, %ss, %gamma : tensor<1x64xf32>, tensor<1xf32>, tensor<64xf32>) outs(%ne : tensor<1x64xf32>) {
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
  return %n : tensor<1x64xf32>
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>

// A splat constant an op reads (here through the slice that cut it for a
// block of rows) is its one value in the payload, with fusion off too:
// materialized it is a read-only global, which x86 read with AVX-512 masked
// loads where a select picks it for some rows only (a microcode assist per
// load on pages never faulted in). A constant whose map alone gives a loop
// its extent stays an operand.
// CHECK-LABEL: func.func @splat_inputs
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8x16xf32>)
// CHECK-NEXT: ^bb0(%{{.*}}: i1, %{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: arith.select %{{.*}}, %[[ZERO]], %{{.*}} : f32
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xf32>)
// OFF-LABEL: func.func @splat_inputs
// OFF: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8x16xf32>)
// OFF-NEXT: ^bb0(%{{.*}}: i1, %{{.*}}: f32, %{{.*}}: f32):
// OFF-NEXT: arith.constant 0.000000e+00 : f32
func.func @splat_inputs(%x: tensor<8x16xf32>, %rows: tensor<8xi1>) -> (tensor<8x16xf32>, tensor<f32>) {
  %zeros = arith.constant dense<0.0> : tensor<64x16xf32>
  %block = tensor.extract_slice %zeros[8, 0] [8, 16] [1, 1] : tensor<64x16xf32> to tensor<8x16xf32>
  %e = tensor.empty() : tensor<8x16xf32>
  %r = linalg.generic {indexing_maps = [#row, #id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%rows, %block, %x : tensor<8xi1>, tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%m: i1, %z: f32, %v: f32, %o: f32):
    %s = arith.select %m, %z, %v : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %ones = arith.constant dense<1.0> : tensor<4xf32>
  %init = tensor.empty() : tensor<f32>
  %sum = linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction"]} ins(%ones : tensor<4xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %t = arith.addf %a, %acc : f32
    linalg.yield %t : f32
  } -> tensor<f32>
  return %r, %sum : tensor<8x16xf32>, tensor<f32>
}

// -----

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d0)>

// Two splat constants that alone give the row loop its extent: one is
// folded, the other stays to give the extent.
// CHECK-LABEL: func.func @splat_extents
// CHECK: linalg.generic {{.*}} ins(%{{[^,]*}} : tensor<4x8xf32>) outs(
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.constant 1.000000e+00 : f32
func.func @splat_extents() -> tensor<4xf32> {
  %ones = arith.constant dense<1.0> : tensor<4x8xf32>
  %twos = arith.constant dense<2.0> : tensor<4x8xf32>
  %init = tensor.empty() : tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #id2, #row2], iterator_types = ["parallel", "reduction"]} ins(%ones, %twos : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %t = arith.addf %p, %acc : f32
    linalg.yield %t : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}
