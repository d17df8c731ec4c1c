// torch 2.x's scaled_dot_product_attention as torch-mlir exports it and
// the import makes it (python/tests/test_pytorch.py builds the same from
// the export): q and k scaled by the square root of the scale each, k
// transposed, each product a batch matmul between a collapse of batch and
// heads and an expand, exp(s - max) as a difference and its exponential,
// and the safe softmax: a test of each score against -inf, its
// and-reduction over the keys, and a select of 0 for those rows after the
// division. With k and v gathered along the sequence it is ring
// attention: the expand applied to each piece's scores, the
// probabilities and the rows' max and sum collapsed like them before the
// product with v, the flag folded into the final division (a row of -inf
// scores has a sum of 0).
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=force 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=force -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-pipeline="stop-after=xfer check-schedule=1 overlap=force" -o /dev/null

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
shard.grid @g(shape = 4)

// k transposed, scaled and collapsed once, on this rank's block, before
// the ring (the gather's row-local work moved before it); v collapsed.
// CHECK-LABEL: func.func @sdpa(
// CHECK-NOT: dist.all_gather
// CHECK: linalg.transpose ins(%arg1 : tensor<1x2x4x8xf32>)
// CHECK: %[[K:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<1x2x8x4xf32> into tensor<2x8x4xf32>
// CHECK: %[[V:.*]] = tensor.collapse_shape %arg2 {{\[\[}}0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
// CHECK: dist.shift_start %[[K]] {{.*}}dist.step = 0
// CHECK: dist.shift_start %[[V]] {{.*}}dist.step = 0
// Each piece: its scores a batch matmul, expanded back for the softmax.
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%{{.*}} : tensor<2x4x4xf32>)
// CHECK: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] output_shape [1, 2, 4, 4]
// CHECK: math.exp
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2], [3]] : tensor<1x2x4x4xf32> into tensor<2x4x4xf32>
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<2x4x8xf32>) outs(%{{.*}} : tensor<2x4x8xf32>)
// CHECK: dist.step = 1
// Rescaling the output: the rows' factor collapsed like the probabilities.
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<1x2x4xf32> into tensor<2x4xf32>
// CHECK: dist.step = 2
// CHECK-NOT: dist.step = 3
// The one division, 0 where the sum is 0; the flag and the select are gone.
// CHECK: tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<1x2x4xf32> into tensor<2x4xf32>
// CHECK: arith.divf
// CHECK-NEXT: arith.constant 0.000000e+00
// CHECK-NEXT: arith.cmpf oeq
// CHECK-NEXT: arith.select
// CHECK-NOT: arith.andi
// CHECK: tensor.expand_shape
// CHECK-NEXT: return
// REMARK: all_gather fused with 'linalg.batch_matmul' as ring_attention (4 chunks)
func.func @sdpa(%arg0: tensor<1x2x4x8xf32>, %arg1: tensor<1x2x4x8xf32>, %arg2: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x4x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %0 = dist.all_gather %arg1 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %1 = dist.all_gather %arg2 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %2 = tensor.empty() : tensor<1x2x4x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x4x8xf32>) outs(%2 : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x4x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%0 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x4x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  %9 = tensor.empty() : tensor<1x2x4xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%10 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %12 = tensor.empty() : tensor<1x2x4x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %15 = tensor.empty() : tensor<1x2x4x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x4x16xf32>) outs(%16 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %19 = tensor.empty() : tensor<1x2x4x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%19 : tensor<1x2x4x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x4x16xi1>
  %21 = tensor.empty() : tensor<1x2x4x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x4x1xi1> into tensor<1x2x4xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x4xi1>) -> tensor<1x2x4xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x4x16xi1>) outs(%22 : tensor<1x2x4xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x4xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x4xi1>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %25 = tensor.empty() : tensor<2x4x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %collapsed_8 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x4x8xf32> into tensor<1x2x4x8xf32>
  return %expanded_9 : tensor<1x2x4x8xf32>
}

// -----

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
shard.grid @g(shape = 4)

// The flag is returned: it must exist whole.
// REMARK: not ring attention: the rows' flag of scores all -inf is used besides the select of 0
// REMARK-NOT: as ring_attention
func.func @flag_returned(%arg0: tensor<1x2x4x8xf32>, %arg1: tensor<1x2x4x8xf32>, %arg2: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xi1>) {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x4x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %0 = dist.all_gather %arg1 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %1 = dist.all_gather %arg2 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %2 = tensor.empty() : tensor<1x2x4x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x4x8xf32>) outs(%2 : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x4x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%0 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x4x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  %9 = tensor.empty() : tensor<1x2x4xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%10 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %12 = tensor.empty() : tensor<1x2x4x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %15 = tensor.empty() : tensor<1x2x4x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x4x16xf32>) outs(%16 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %19 = tensor.empty() : tensor<1x2x4x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%19 : tensor<1x2x4x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x4x16xi1>
  %21 = tensor.empty() : tensor<1x2x4x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x4x1xi1> into tensor<1x2x4xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x4xi1>) -> tensor<1x2x4xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x4x16xi1>) outs(%22 : tensor<1x2x4xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x4xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x4xi1>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %25 = tensor.empty() : tensor<2x4x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %collapsed_8 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x4x8xf32> into tensor<1x2x4x8xf32>
  return %expanded_9, %23 : tensor<1x2x4x8xf32>, tensor<1x2x4xi1>
}

// -----

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
shard.grid @g(shape = 4)

// The rows masked whole get 1, not 0.
// REMARK: not ring attention: the rows whose scores are all -inf are not given 0 after the division
// REMARK-NOT: as ring_attention
func.func @select_one(%arg0: tensor<1x2x4x8xf32>, %arg1: tensor<1x2x4x8xf32>, %arg2: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<1.000000e+00> : tensor<1x2x4x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %0 = dist.all_gather %arg1 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %1 = dist.all_gather %arg2 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %2 = tensor.empty() : tensor<1x2x4x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x4x8xf32>) outs(%2 : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x4x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%0 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x4x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  %9 = tensor.empty() : tensor<1x2x4xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%10 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %12 = tensor.empty() : tensor<1x2x4x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %15 = tensor.empty() : tensor<1x2x4x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x4x16xf32>) outs(%16 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %19 = tensor.empty() : tensor<1x2x4x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%19 : tensor<1x2x4x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x4x16xi1>
  %21 = tensor.empty() : tensor<1x2x4x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x4x1xi1> into tensor<1x2x4xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x4xi1>) -> tensor<1x2x4xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x4x16xi1>) outs(%22 : tensor<1x2x4xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x4xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x4xi1>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %25 = tensor.empty() : tensor<2x4x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %collapsed_7 = tensor.collapse_shape %24 [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %collapsed_8 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x4x8xf32> into tensor<1x2x4x8xf32>
  return %expanded_9 : tensor<1x2x4x8xf32>
}

// -----

#map = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map1 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
shard.grid @g(shape = 4)

// The probabilities rounded to bf16 and widened back before their product
// (braid.pytorch's export of bf16 attention, as torch's CPU kernel
// computes it): the ring rounds each piece's exponentials alike, so the
// product still reads widened bf16 values.
// CHECK-LABEL: func.func @rounded_probs(
// CHECK: math.exp
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<2x4x4xf32>, tensor<2x4x8xf32>)
// CHECK: dist.step = 1
// REMARK: all_gather fused with 'linalg.batch_matmul' as ring_attention (4 chunks)
func.func @rounded_probs(%arg0: tensor<1x2x4x8xf32>, %arg1: tensor<1x2x4x8xf32>, %arg2: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %cst = arith.constant 0.59460355750136051 : f64
  %cst_0 = arith.constant 0xFFF0000000000000 : f64
  %cst_1 = arith.constant dense<0.000000e+00> : tensor<1x2x4x16xf32>
  %true = arith.constant true
  %cst_2 = arith.constant 0xFF800000 : f32
  %cst_3 = arith.constant 0.000000e+00 : f32
  %0 = dist.all_gather %arg1 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %1 = dist.all_gather %arg2 on @g axes = [0] dim = 2 : tensor<1x2x4x8xf32> -> tensor<1x2x16x8xf32>
  %2 = tensor.empty() : tensor<1x2x4x8xf32>
  %3 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x2x4x8xf32>) outs(%2 : tensor<1x2x4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x4x8xf32>
  %4 = tensor.empty() : tensor<1x2x8x16xf32>
  %transposed = linalg.transpose ins(%0 : tensor<1x2x16x8xf32>) outs(%4 : tensor<1x2x8x16xf32>) permutation = [0, 1, 3, 2] 
  %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed : tensor<1x2x8x16xf32>) outs(%4 : tensor<1x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.truncf %cst : f64 to f32
    %29 = arith.mulf %in, %28 : f32
    linalg.yield %29 : f32
  } -> tensor<1x2x8x16xf32>
  %6 = tensor.empty() : tensor<2x4x16xf32>
  %7 = linalg.fill ins(%cst_3 : f32) outs(%6 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %collapsed = tensor.collapse_shape %3 [[0, 1], [2], [3]] : tensor<1x2x4x8xf32> into tensor<2x4x8xf32>
  %collapsed_4 = tensor.collapse_shape %5 [[0, 1], [2], [3]] : tensor<1x2x8x16xf32> into tensor<2x8x16xf32>
  %8 = linalg.batch_matmul ins(%collapsed, %collapsed_4 : tensor<2x4x8xf32>, tensor<2x8x16xf32>) outs(%7 : tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %expanded = tensor.expand_shape %8 [[0, 1], [2], [3]] output_shape [1, 2, 4, 16] : tensor<2x4x16xf32> into tensor<1x2x4x16xf32>
  %9 = tensor.empty() : tensor<1x2x4xf32>
  %10 = linalg.fill ins(%cst_2 : f32) outs(%9 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %11 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%10 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.maximumf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %12 = tensor.empty() : tensor<1x2x4x16xf32>
  %13 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded, %11 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.subf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %14 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%13 : tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = math.exp %in : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %15 = tensor.empty() : tensor<1x2x4x1xf32>
  %collapsed_5 = tensor.collapse_shape %15 [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %16 = linalg.fill ins(%cst_3 : f32) outs(%collapsed_5 : tensor<1x2x4xf32>) -> tensor<1x2x4xf32>
  %17 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%14 : tensor<1x2x4x16xf32>) outs(%16 : tensor<1x2x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %28 = arith.addf %in, %out : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4xf32>
  %18 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%14, %17 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: f32, %in_10: f32, %out: f32):
    %28 = arith.divf %in, %in_10 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %19 = tensor.empty() : tensor<1x2x4x16xi1>
  %20 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded : tensor<1x2x4x16xf32>) outs(%19 : tensor<1x2x4x16xi1>) {
  ^bb0(%in: f32, %out: i1):
    %28 = arith.extf %in : f32 to f64
    %29 = arith.cmpf oeq, %28, %cst_0 : f64
    linalg.yield %29 : i1
  } -> tensor<1x2x4x16xi1>
  %21 = tensor.empty() : tensor<1x2x4x1xi1>
  %collapsed_6 = tensor.collapse_shape %21 [[0], [1], [2, 3]] : tensor<1x2x4x1xi1> into tensor<1x2x4xi1>
  %22 = linalg.fill ins(%true : i1) outs(%collapsed_6 : tensor<1x2x4xi1>) -> tensor<1x2x4xi1>
  %23 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%20 : tensor<1x2x4x16xi1>) outs(%22 : tensor<1x2x4xi1>) {
  ^bb0(%in: i1, %out: i1):
    %28 = arith.andi %in, %out : i1
    linalg.yield %28 : i1
  } -> tensor<1x2x4xi1>
  %24 = linalg.generic {indexing_maps = [#map1, #map, #map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%23, %cst_1, %18 : tensor<1x2x4xi1>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: i1, %in_10: f32, %in_11: f32, %out: f32):
    %28 = arith.select %in, %in_10, %in_11 : f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %r16 = tensor.empty() : tensor<1x2x4x16xbf16>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%24 : tensor<1x2x4x16xf32>) outs(%r16 : tensor<1x2x4x16xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %28 = arith.truncf %in : f32 to bf16
    linalg.yield %28 : bf16
  } -> tensor<1x2x4x16xbf16>
  %w = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%r : tensor<1x2x4x16xbf16>) outs(%12 : tensor<1x2x4x16xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %28 = arith.extf %in : bf16 to f32
    linalg.yield %28 : f32
  } -> tensor<1x2x4x16xf32>
  %25 = tensor.empty() : tensor<2x4x8xf32>
  %26 = linalg.fill ins(%cst_3 : f32) outs(%25 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %collapsed_7 = tensor.collapse_shape %w [[0, 1], [2], [3]] : tensor<1x2x4x16xf32> into tensor<2x4x16xf32>
  %collapsed_8 = tensor.collapse_shape %1 [[0, 1], [2], [3]] : tensor<1x2x16x8xf32> into tensor<2x16x8xf32>
  %27 = linalg.batch_matmul ins(%collapsed_7, %collapsed_8 : tensor<2x4x16xf32>, tensor<2x16x8xf32>) outs(%26 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %expanded_9 = tensor.expand_shape %27 [[0, 1], [2], [3]] output_shape [1, 2, 4, 8] : tensor<2x4x8xf32> into tensor<1x2x4x8xf32>
  return %expanded_9 : tensor<1x2x4x8xf32>
}
