// braid-prepare-import: keepdim reductions and their broadcast reads lose
// the unit dimension they address at a constant, batch matmuls over folded
// batch dimensions keep them apart, constant-exponent fpowi becomes
// multiplications, results nobody reads are erased, and linalg.softmax
// is decomposed.
// RUN: braid-opt %s -split-input-file --braid-prepare-import | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-prepare-import --braid-import-shard=partition=never | FileCheck %s --check-prefix=FOLD

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#keep = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#w = affine_map<(d0, d1, d2) -> (d2)>
// RMSNorm as torch-mlir writes it: x.pow(2).sum(-1, keepdim=True), then
// x * rsqrt(sum) * weight reading the [2, 8, 1] sum at (d0, d1, 0).
// CHECK-DAG: #[[ID:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @rmsnorm
// CHECK: %[[FILL:.*]] = linalg.fill {{.*}} -> tensor<2x8x1xf32>
// CHECK: %[[INIT:.*]] = tensor.collapse_shape %[[FILL]] {{\[}}[0], [1, 2]] : tensor<2x8x1xf32> into tensor<2x8xf32>
// CHECK: %[[SUM:.*]] = linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]]]
// CHECK-SAME: outs(%[[INIT]] : tensor<2x8xf32>)
// CHECK-NOT: math.fpowi
// CHECK: arith.mulf %[[A:.*]], %[[A]] : f32
// CHECK: } -> tensor<2x8xf32>
// CHECK-NOT: tensor.expand_shape
// CHECK: linalg.generic {indexing_maps = [#[[ID]], #[[ROWS]], {{.*}}, #[[ID]]]
// CHECK-SAME: ins(%{{.*}}, %[[SUM]], %{{.*}} : tensor<2x8x64xf32>, tensor<2x8xf32>, tensor<64xf32>)
func.func @rmsnorm(%x: tensor<2x8x64xf32>, %w: tensor<64xf32>) -> tensor<2x8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c2 = arith.constant 2 : i64
  %e1 = tensor.empty() : tensor<2x8x1xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x8x1xf32>) -> tensor<2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [#id3, #keep], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x : tensor<2x8x64xf32>) outs(%f : tensor<2x8x1xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %sq = math.fpowi %a, %c2 : f32, i64
    %s = arith.addf %sq, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x1xf32>
  %e = tensor.empty() : tensor<2x8x64xf32>
  %y = linalg.generic {indexing_maps = [#id3, #keep, #w, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %sum, %w : tensor<2x8x64xf32>, tensor<2x8x1xf32>, tensor<64xf32>) outs(%e : tensor<2x8x64xf32>) {
  ^bb0(%a: f32, %s: f32, %v: f32, %o: f32):
    %r = math.rsqrt %s : f32
    %m = arith.mulf %a, %r : f32
    %n = arith.mulf %m, %v : f32
    linalg.yield %n : f32
  } -> tensor<2x8x64xf32>
  return %y : tensor<2x8x64xf32>
}

// -----

// Every dimension addressed at a constant: a rank-0 read.
// CHECK: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @scalar_read
// CHECK: %[[S:.*]] = tensor.collapse_shape %{{.*}} [] : tensor<1x1xf32> into tensor<f32>
// CHECK: linalg.generic {indexing_maps = [#[[SCALAR]], #{{.*}}]
// CHECK-SAME: ins(%[[S]] : tensor<f32>)
func.func @scalar_read(%s: tensor<1x1xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<1x1xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A constant index into a dimension that is not a unit one stays (it is a
// gather of one row, not a keepdim read).
// CHECK: #[[ROW3:.*]] = affine_map<(d0, d1) -> (3, d1)>
// CHECK-LABEL: func.func @row_three
// CHECK: linalg.generic {indexing_maps = [#[[ROW3]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}} : tensor<8x8xf32>)
func.func @row_three(%s: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (3, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<8x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Attention's scores: batch (2) and heads (4) folded for a batch matmul.
// The contraction keeps them apart, marked; braid-import-shard folds them
// back (FOLD) on whatever shapes partitioning leaves.
// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
// CHECK-DAG: #[[C:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @scores
// CHECK-NOT: linalg.batch_matmul
// CHECK: %[[R:.*]] = linalg.generic {indexing_maps = [#[[A]], #[[B]], #[[C]]]
// CHECK-SAME: iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>)
// CHECK-SAME: {braid.batch_matmul}
// CHECK: } -> tensor<2x4x8x8xf32>
// CHECK: return %[[R]] : tensor<2x4x8x8xf32>
// FOLD-LABEL: func.func @scores
// FOLD: tensor.collapse_shape %{{.*}} {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// FOLD: linalg.batch_matmul
// FOLD: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2], [3]] {{.*}} : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
func.func @scores(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %a = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
  %e = tensor.empty() : tensor<8x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %s = linalg.batch_matmul ins(%a, %b : tensor<8x8x16xf32>, tensor<8x16x8xf32>) outs(%f : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %r = tensor.expand_shape %s [[0, 1], [2], [3]] output_shape [2, 4, 8, 8] : tensor<8x8x8xf32> into tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// -----

// Softmax's max comes with an argmax torch-mlir computes and nobody reads:
// the result goes (partitioning needs a sharding for every result).
// CHECK-LABEL: func.func @max_only
// CHECK: linalg.generic
// CHECK-NOT: i64
// CHECK: } -> tensor<4xf32>
func.func @max_only(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<4xf32>
  %ei = tensor.empty() : tensor<4xi64>
  %m = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %i = linalg.fill ins(%c0 : i64) outs(%ei : tensor<4xi64>) -> tensor<4xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%m, %i : tensor<4xf32>, tensor<4xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %idx = linalg.index 1 : index
    %ii = arith.index_cast %idx : index to i64
    %mx = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %sel = arith.select %gt, %ii, %oi : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<4xf32>, tensor<4xi64>)
  return %r#0 : tensor<4xf32>
}

// -----

// One placeholder per use: a zero fill two reductions share (torch-mlir
// CSEs it) and the empty it fills become one each.
// CHECK-LABEL: func.func @shared_fill
// CHECK-COUNT-2: tensor.empty() : tensor<4xf32>
// CHECK-COUNT-2: linalg.fill
// CHECK: linalg.generic {{.*}} outs(%[[A:[0-9]+]] : tensor<4xf32>)
// CHECK-NOT: outs(%[[A]] : tensor<4xf32>)
// CHECK: return
func.func @shared_fill(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
      ins(%y : tensor<4x8xf32>) outs(%f : tensor<4xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %v, %acc : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// linalg.softmax, which no lowering takes, becomes its max, exp, sum and
// divide generics, each reduction with its own init.
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: linalg.softmax
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// CHECK: arith.maxnumf
// CHECK: %[[EXP:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[MAX]] :
// CHECK: math.exp
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[EXP]] :
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}} ins(%[[EXP]], %[[SUM]] :
// CHECK: arith.divf
// CHECK-NOT: linalg.softmax
func.func @softmax(%x: tensor<2x4x16xf32>) -> tensor<2x4x16xf32> {
  %e = tensor.empty() : tensor<2x4x16xf32>
  %p = linalg.softmax dimension(2) ins(%x : tensor<2x4x16xf32>) outs(%e : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  return %p : tensor<2x4x16xf32>
}

// -----

// A causal mask compares an iota with itself transposed: one value read
// through two maps. The second read gets a copy of the generator, so that
// each can take its own sharding.
// CHECK-LABEL: func.func @mask
// CHECK: %[[IOTA:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16xi64>)
// CHECK: %[[COPY:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16xi64>)
// CHECK: linalg.generic {{.*}} ins(%[[IOTA]], %[[COPY]] : tensor<16xi64>, tensor<16xi64>)
func.func @mask() -> tensor<16x16xi1> {
  %e = tensor.empty() : tensor<16xi64>
  %iota = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]} outs(%e : tensor<16xi64>) {
  ^bb0(%o: i64):
    %i = linalg.index 0 : index
    %v = arith.index_cast %i : index to i64
    linalg.yield %v : i64
  } -> tensor<16xi64>
  %m = tensor.empty() : tensor<16x16xi1>
  %mask = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%iota, %iota : tensor<16xi64>, tensor<16xi64>) outs(%m : tensor<16x16xi1>) {
  ^bb0(%col: i64, %row: i64, %o: i1):
    %le = arith.cmpi sle, %col, %row : i64
    linalg.yield %le : i1
  } -> tensor<16x16xi1>
  return %mask : tensor<16x16xi1>
}

// -----

// A backward's batch matmul reads its folded operand transposed (the
// gradient of q k^T): the transpose moves before the collapse, each folded
// group as a block, and the batch dimensions stay apart.
// CHECK-LABEL: func.func @transposed_fold(
// CHECK-SAME: %[[S:[^:]*]]: tensor<2x4x8x8xf32>, %[[K:[^:]*]]: tensor<2x4x8x16xf32>)
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[S]] : tensor<2x4x8x8xf32>) outs(%{{.*}} : tensor<2x4x8x8xf32>) permutation = [0, 1, 3, 2]
// CHECK: linalg.generic {{.*}} ins(%[[T]], %[[K]] : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>)
// CHECK-NOT: linalg.batch_matmul
// FOLD-LABEL: func.func @transposed_fold
// FOLD: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<8x8x8xf32>, tensor<8x8x16xf32>)
func.func @transposed_fold(%s: tensor<2x4x8x8xf32>, %k: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %a = tensor.collapse_shape %s [[0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
  %b = tensor.collapse_shape %k [[0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
  %e = tensor.empty() : tensor<8x8x8xf32>
  %at = linalg.transpose ins(%a : tensor<8x8x8xf32>) outs(%e : tensor<8x8x8xf32>) permutation = [0, 2, 1]
  %e3 = tensor.empty() : tensor<8x8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x8x16xf32>) -> tensor<8x8x16xf32>
  %p = linalg.batch_matmul ins(%at, %b : tensor<8x8x8xf32>, tensor<8x8x16xf32>) outs(%f : tensor<8x8x16xf32>) -> tensor<8x8x16xf32>
  %r = tensor.expand_shape %p [[0, 1], [2], [3]] output_shape [2, 4, 8, 16] : tensor<8x8x16xf32> into tensor<2x4x8x16xf32>
  return %r : tensor<2x4x8x16xf32>
}

// -----

// The gradient of a slice is the slice written into zeros: each insert
// takes a fill of its own, which partitioning can split like the insert.
// CHECK-LABEL: func.func @slice_gradient
// CHECK-NOT: arith.constant dense
// CHECK: %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[F:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%{{.*}} : tensor<2x4x16xf32>)
// CHECK: tensor.insert_slice %{{.*}} into %[[F]][0, 0, 8]
// CHECK: linalg.fill
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0, 0]
func.func @slice_gradient(%g: tensor<2x4x8xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %zeros = arith.constant dense<0.0> : tensor<2x4x16xf32>
  %a = tensor.insert_slice %g into %zeros[0, 0, 8] [2, 4, 8] [1, 1, 1] : tensor<2x4x8xf32> into tensor<2x4x16xf32>
  %b = tensor.insert_slice %g into %zeros[0, 0, 0] [2, 4, 8] [1, 1, 1] : tensor<2x4x8xf32> into tensor<2x4x16xf32>
  return %a, %b : tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// A fill nothing reads (braid-prepare-import crashed on one while giving
// each read fill its own copy).
// CHECK-LABEL: func.func @unread_fill
// CHECK: return
func.func @unread_fill() -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %unread = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4xf32>
  %read = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4xf32>) -> tensor<4xf32>
  return %read : tensor<4xf32>
}
