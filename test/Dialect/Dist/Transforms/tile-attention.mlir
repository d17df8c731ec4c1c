// braid-tile-attention: torch's sdpa as the import makes it (the same
// function as ring-attention-torch.mlir's, with k and v local: 40 query
// rows, 16 keys, 2 heads, 128 bytes of f32 scores per row). 2 KiB blocks
// hold 16 rows: a loop over two blocks and the 8 rows left after it, each
// the whole chain on a slice of q and all of k and v.
// RUN: braid-opt %s -split-input-file --braid-tile-attention=block-bytes=2048 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-tile-attention=block-bytes=2048 -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-tile-attention=block-bytes=0 2>&1 | FileCheck %s --check-prefix=OFF

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @sdpa(
// CHECK: %[[Q:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<1x2x40x8xf32> into tensor<2x40x8xf32>
// CHECK: %[[K:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
// CHECK: %[[V:.*]] = tensor.collapse_shape %arg2
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[C32:.*]] = arith.constant 32 : index
// CHECK: %[[C16:.*]] = arith.constant 16 : index
// CHECK: %[[LOOP:.*]] = scf.for %[[ROW:.*]] = %[[C0]] to %[[C32]] step %[[C16]] iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<2x40x8xf32>)
// CHECK: %[[QROWS:.*]] = tensor.extract_slice %[[Q]][0, %[[ROW]], 0] [2, 16, 8] [1, 1, 1]
// CHECK: %[[KALL:.*]] = tensor.extract_slice %[[K]][0, 0, 0] [2, 8, 16] [1, 1, 1]
// CHECK: linalg.batch_matmul ins(%[[QROWS]], %[[KALL]] : tensor<2x16x8xf32>, tensor<2x8x16xf32>) outs(%{{.*}} : tensor<2x16x16xf32>)
// CHECK: tensor.expand_shape %{{.*}} output_shape [1, 2, 16, 16]
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: arith.divf
// CHECK: arith.andi
// CHECK: arith.select
// CHECK: tensor.collapse_shape %{{.*}} : tensor<1x2x16x16xf32> into tensor<2x16x16xf32>
// CHECK: %[[OUT:.*]] = linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x16x16xf32>, tensor<2x16x8xf32>) outs(%{{.*}} : tensor<2x16x8xf32>)
// CHECK: %[[INS:.*]] = tensor.insert_slice %[[OUT]] into %[[ACC]][0, %[[ROW]], 0] [2, 16, 8] [1, 1, 1]
// CHECK: scf.yield %[[INS]]
// The 8 rows left.
// CHECK: tensor.extract_slice %[[Q]][0, 32, 0] [2, 8, 8] [1, 1, 1]
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x8x8xf32>, tensor<2x8x16xf32>)
// CHECK: %[[TAIL:.*]] = linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x8x16xf32>, tensor<2x16x8xf32>)
// CHECK: %[[ALL:.*]] = tensor.insert_slice %[[TAIL]] into %[[LOOP]][0, 32, 0] [2, 8, 8] [1, 1, 1]
// CHECK: tensor.expand_shape %[[ALL]]
// CHECK-NOT: linalg.batch_matmul
// CHECK: return
// REMARK: remark: attention computed in blocks of 16 query rows (3 blocks): 2.0 KiB of scores at a time instead of 5.0 KiB
// OFF-NOT: scf.for
// OFF-NOT: remark
func.func @sdpa(%arg0: tensor<1x2x40x8xf32>, %arg1: tensor<1x2x16x8xf32>, %arg2: tensor<1x2x16x8xf32>) -> tensor<1x2x40x8xf32> {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x40x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %2 = tensor.empty() : tensor<1x2x40x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x40x8xf32>) outs(%2 : tensor<1x2x40x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x40x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x40x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x40x8xf32> into tensor<2x40x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x40x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 40, 16] : tensor<2x40x16xf32> into tensor<1x2x40x16xf32>
  %9 = tensor.empty() : tensor<1x2x40xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%10 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %12 = tensor.empty() : tensor<1x2x40x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %15 = tensor.empty() : tensor<1x2x40x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x40x1xf32> into tensor<1x2x40xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x40x16xf32>) outs(%16 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %19 = tensor.empty() : tensor<1x2x40x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%19 : tensor<1x2x40x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x40x16xi1>
  %21 = tensor.empty() : tensor<1x2x40x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x40x1xi1> into tensor<1x2x40xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x40xi1>) -> tensor<1x2x40xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x40x16xi1>) outs(%22 : tensor<1x2x40xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x40xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x40xi1>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %25 = tensor.empty() : tensor<2x40x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x40x16xf32> into tensor<2x40x16xf32>
  %collapsed_8 = tensor.collapse_shape %arg2 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x40x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x40x8xf32> into tensor<1x2x40x8xf32>
  return %expanded_9 : tensor<1x2x40x8xf32>
}

// -----

// A softmax the matcher refuses is a remark with its reason; nothing moves.
// CHECK-LABEL: func.func @max_returned(
// CHECK-NOT: scf.for
// REMARK: remark: attention not computed in blocks of rows: the row max is used besides the exponentials
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
func.func @max_returned(%arg0: tensor<1x2x40x8xf32>, %arg1: tensor<1x2x16x8xf32>, %arg2: tensor<1x2x16x8xf32>) -> (tensor<1x2x40x8xf32>, tensor<1x2x40xf32>) {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x40x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %2 = tensor.empty() : tensor<1x2x40x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x40x8xf32>) outs(%2 : tensor<1x2x40x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x40x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x40x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x40x8xf32> into tensor<2x40x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x40x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 40, 16] : tensor<2x40x16xf32> into tensor<1x2x40x16xf32>
  %9 = tensor.empty() : tensor<1x2x40xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%10 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %12 = tensor.empty() : tensor<1x2x40x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %15 = tensor.empty() : tensor<1x2x40x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x40x1xf32> into tensor<1x2x40xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x40x16xf32>) outs(%16 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %19 = tensor.empty() : tensor<1x2x40x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%19 : tensor<1x2x40x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x40x16xi1>
  %21 = tensor.empty() : tensor<1x2x40x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x40x1xi1> into tensor<1x2x40xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x40xi1>) -> tensor<1x2x40xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x40x16xi1>) outs(%22 : tensor<1x2x40xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x40xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x40xi1>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %25 = tensor.empty() : tensor<2x40x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x40x16xf32> into tensor<2x40x16xf32>
  %collapsed_8 = tensor.collapse_shape %arg2 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x40x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x40x8xf32> into tensor<1x2x40x8xf32>
  return %expanded_9, %11 : tensor<1x2x40x8xf32>, tensor<1x2x40xf32>
}

// -----

// Scores that fit in a block stay whole (the default, 64 MiB).
// RUN: braid-opt %s -split-input-file --braid-tile-attention -o /dev/null 2>&1 | FileCheck %s --check-prefix=WHOLE
// WHOLE: remark: attention kept whole: its scores (5.0 KiB) fit in a block of 64.0 MiB
// CHECK-LABEL: func.func @whole(
#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
func.func @whole(%arg0: tensor<1x2x40x8xf32>, %arg1: tensor<1x2x16x8xf32>, %arg2: tensor<1x2x16x8xf32>) -> tensor<1x2x40x8xf32> {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x40x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %2 = tensor.empty() : tensor<1x2x40x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x40x8xf32>) outs(%2 : tensor<1x2x40x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x40x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%arg1 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x40x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x40x8xf32> into tensor<2x40x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x40x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x40x16xf32>) -> tensor<2x40x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 40, 16] : tensor<2x40x16xf32> into tensor<1x2x40x16xf32>
  %9 = tensor.empty() : tensor<1x2x40xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%10 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %12 = tensor.empty() : tensor<1x2x40x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %15 = tensor.empty() : tensor<1x2x40x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x40x1xf32> into tensor<1x2x40xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x40xf32>) -> tensor<1x2x40xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x40x16xf32>) outs(%16 : tensor<1x2x40xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x40x16xf32>, tensor<1x2x40xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %19 = tensor.empty() : tensor<1x2x40x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x40x16xf32>) outs(%19 : tensor<1x2x40x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x40x16xi1>
  %21 = tensor.empty() : tensor<1x2x40x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x40x1xi1> into tensor<1x2x40xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x40xi1>) -> tensor<1x2x40xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x40x16xi1>) outs(%22 : tensor<1x2x40xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x40xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x40xi1>, tensor<1x2x40x16xf32>, tensor<1x2x40x16xf32>) outs(%12 : tensor<1x2x40x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x40x16xf32>
  %25 = tensor.empty() : tensor<2x40x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x40x16xf32> into tensor<2x40x16xf32>
  %collapsed_8 = tensor.collapse_shape %arg2 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x40x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x40x8xf32>) -> tensor<2x40x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x40x8xf32> into tensor<1x2x40x8xf32>
  return %expanded_9 : tensor<1x2x40x8xf32>
}
