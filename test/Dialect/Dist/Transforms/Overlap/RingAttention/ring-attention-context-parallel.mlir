// A HuggingFace LlamaDecoderLayer (hidden 64, 8 heads, 4 kv heads, 16
// tokens) as the PyTorch front door exports it for context parallelism on
// 4 ranks: an empty plan and the input split along the sequence
// (python/tests/test_hf.py's test_context_parallel, printed without
// locations). Upstream propagation gathers the normed rows before the k
// and v projections; braid-overlap moves the projections and k's rotary
// embedding (its cos and sin tables sliced to this rank's rows) before the
// gather, gathers k and v instead (as many bytes with this GQA), and makes
// one ring of attention of them: the k and v blocks travel with their kv
// heads (GQA's repeat stays per block) and no rank holds its whole rows of
// scores.
// RUN: braid-opt %s --braid-pipeline="stop-after=dist overlap=auto" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --braid-pipeline="stop-after=dist overlap=auto" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer overlap=auto check-schedule=1" -o /dev/null

// CHECK-LABEL: func.func @main
// CHECK-NOT: dist.all_gather
// The three projections on this rank's 4 rows.
// CHECK-COUNT-3: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x64xf32>, tensor<64x{{64|32}}xf32>)
// CHECK: %[[POS:.*]] = shard.process_multi_index on @braid_tp axes = [0]
// CHECK: %[[OFF:.*]] = arith.muli %[[POS]], %c4
// CHECK: tensor.extract_slice %arg1[0, %[[OFF]], 0] [1, 4, 8] [1, 1, 1] : tensor<1x16x8xf32> to tensor<1x4x8xf32>
// CHECK: tensor.extract_slice %arg2[0, %[[OFF]], 0] [1, 4, 8] [1, 1, 1] : tensor<1x16x8xf32> to tensor<1x4x8xf32>
// CHECK-NOT: dist.all_gather
// k (after its rotary embedding) and v, 4 kv heads of this rank's 4 rows,
// travel with q (8 heads). HF's causal mask, built from iotas that count
// from each rank's block, reads as a comparison of the scores' indices, so
// the ring is balanced: 3 steps; at step 1 a rank scores its own rows
// (skipped where masked whole) and those of the rank the blocks came from
// (their mask rows computed again for it), returned by a shift of -1.
// CHECK: dist.shift_start %{{.*}} {dist.step = 0 : i64, dist.symmetric} : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>
// CHECK-NEXT: dist.shift_start %{{.*}} {dist.step = 0 : i64, dist.symmetric} : tensor<1x4x4x8xf32> -> tensor<1x4x4x8xf32>
// CHECK-NEXT: dist.shift_start %{{.*}} {dist.step = 0 : i64, dist.symmetric} : tensor<8x4x8xf32> -> tensor<8x4x8xf32>
// CHECK: dist.step = 1
// CHECK: scf.if
// CHECK: scf.if
// CHECK-COUNT-3: offset = 3 {dist.step = 1
// CHECK: scf.if
// CHECK-NOT: dist.step = 2
// CHECK-NOT: dist.all_gather
// CHECK: return
// REMARK: remark: all_gather moved after the 13 row-local ops that followed it (their other operands are replicated): they run on 1/4 of the rows; 2 values are gathered after them instead of one (4.0 KiB instead of 4.0 KiB)
// REMARK: remark: all_gather fused with 'linalg.batch_matmul' as ring_attention (4 chunks)
// REMARK-SAME: skips the pieces its mask fills whole; balanced: each rank also scores the rows of the block it holds
// REMARK-NOT: all_gather fused

#map = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, 0)>
#map2 = affine_map<(d0, d1, d2) -> (d2)>
#map3 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
#map5 = affine_map<(d0) -> (d0)>
#map6 = affine_map<(d0, d1) -> (0, d1)>
#map7 = affine_map<(d0, d1) -> (d0, 0)>
#map8 = affine_map<(d0, d1) -> (d0, d1)>
#map9 = affine_map<(d0, d1) -> ()>
#map10 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
#map11 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#map12 = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#map13 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#map14 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>
module {
  shard.grid @braid_tp(shape = 4)
  func.func @main(%arg0: tensor<1x16x64xf32> {braid.parallel = "sequence"}, %arg1: tensor<1x16x8xf32> {braid.parallel = "replicate"}, %arg2: tensor<1x16x8xf32> {braid.parallel = "replicate"}, %arg3: tensor<64x64xf32> {braid.parallel = "replicate"}, %arg4: tensor<32x64xf32> {braid.parallel = "replicate"}, %arg5: tensor<32x64xf32> {braid.parallel = "replicate"}, %arg6: tensor<64x64xf32> {braid.parallel = "replicate"}, %arg7: tensor<128x64xf32> {braid.parallel = "replicate"}, %arg8: tensor<128x64xf32> {braid.parallel = "replicate"}, %arg9: tensor<64x128xf32> {braid.parallel = "replicate"}, %arg10: tensor<64xf32> {braid.parallel = "replicate"}, %arg11: tensor<64xf32> {braid.parallel = "replicate"}) -> (tensor<1x16x64xf32> {braid.parallel = "sequence"}) attributes {braid.grid = @braid_tp} {
    %c2_i64 = arith.constant 2 : i64
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant 0.000000e+00 : f32
    %cst_0 = arith.constant 0xFF800000 : f32
    %true = arith.constant true
    %cst_1 = arith.constant 1.000000e+00 : f32
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<1x8x16x16xf32>
    %cst_3 = arith.constant dense<0.000000e+00> : tensor<f32>
    %cst_4 = arith.constant dense<0xFF800000> : tensor<f32>
    %cst_5 = arith.constant dense<true> : tensor<16x16xi1>
    %cst_6 = arith.constant 0xFFF0000000000000 : f64
    %cst_7 = arith.constant 0.59460355750136051 : f64
    %cst_8 = arith.constant 9.9999999999999995E-7 : f64
    %cst_9 = arith.constant 6.400000e+01 : f32
    %0 = tensor.empty() : tensor<1x16x64xf32>
    %1 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0 : tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %2 = tensor.empty() : tensor<1x16x1xf32>
    %3 = linalg.fill ins(%cst : f32) outs(%2 : tensor<1x16x1xf32>) -> tensor<1x16x1xf32>
    %4 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%1 : tensor<1x16x64xf32>) outs(%3 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.addf %in, %out : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %5 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%4 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.divf %in, %cst_9 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %6 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.truncf %cst_8 : f64 to f32
      %94 = arith.addf %in, %93 : f32
      linalg.yield %94 : f32
    } -> tensor<1x16x1xf32>
    %7 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%6 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = math.rsqrt %in : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %8 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %7 : tensor<1x16x64xf32>, tensor<1x16x1xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %9 = linalg.generic {indexing_maps = [#map2, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg10, %8 : tensor<64xf32>, tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %10 = tensor.empty() : tensor<64x64xf32>
    %transposed = linalg.transpose ins(%arg3 : tensor<64x64xf32>) outs(%10 : tensor<64x64xf32>) permutation = [1, 0] 
    %collapsed = tensor.collapse_shape %9 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
    %11 = tensor.empty() : tensor<16x64xf32>
    %12 = linalg.fill ins(%cst : f32) outs(%11 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %13 = linalg.matmul ins(%collapsed, %transposed : tensor<16x64xf32>, tensor<64x64xf32>) outs(%12 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %expanded = tensor.expand_shape %13 [[0, 1], [2, 3]] output_shape [1, 16, 8, 8] : tensor<16x64xf32> into tensor<1x16x8x8xf32>
    %14 = tensor.empty() : tensor<1x8x16x8xf32>
    %transposed_10 = linalg.transpose ins(%expanded : tensor<1x16x8x8xf32>) outs(%14 : tensor<1x8x16x8xf32>) permutation = [0, 2, 1, 3] 
    %15 = tensor.empty() : tensor<64x32xf32>
    %transposed_11 = linalg.transpose ins(%arg4 : tensor<32x64xf32>) outs(%15 : tensor<64x32xf32>) permutation = [1, 0] 
    %16 = tensor.empty() : tensor<16x32xf32>
    %17 = linalg.fill ins(%cst : f32) outs(%16 : tensor<16x32xf32>) -> tensor<16x32xf32>
    %18 = linalg.matmul ins(%collapsed, %transposed_11 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%17 : tensor<16x32xf32>) -> tensor<16x32xf32>
    %expanded_12 = tensor.expand_shape %18 [[0, 1], [2, 3]] output_shape [1, 16, 4, 8] : tensor<16x32xf32> into tensor<1x16x4x8xf32>
    %19 = tensor.empty() : tensor<1x4x16x8xf32>
    %transposed_13 = linalg.transpose ins(%expanded_12 : tensor<1x16x4x8xf32>) outs(%19 : tensor<1x4x16x8xf32>) permutation = [0, 2, 1, 3] 
    %transposed_14 = linalg.transpose ins(%arg5 : tensor<32x64xf32>) outs(%15 : tensor<64x32xf32>) permutation = [1, 0] 
    %20 = linalg.matmul ins(%collapsed, %transposed_14 : tensor<16x64xf32>, tensor<64x32xf32>) outs(%17 : tensor<16x32xf32>) -> tensor<16x32xf32>
    %expanded_15 = tensor.expand_shape %20 [[0, 1], [2, 3]] output_shape [1, 16, 4, 8] : tensor<16x32xf32> into tensor<1x16x4x8xf32>
    %transposed_16 = linalg.transpose ins(%expanded_15 : tensor<1x16x4x8xf32>) outs(%19 : tensor<1x4x16x8xf32>) permutation = [0, 2, 1, 3] 
    %expanded_17 = tensor.expand_shape %arg1 [[0], [1, 2], [3]] output_shape [1, 1, 16, 8] : tensor<1x16x8xf32> into tensor<1x1x16x8xf32>
    %expanded_18 = tensor.expand_shape %arg2 [[0], [1, 2], [3]] output_shape [1, 1, 16, 8] : tensor<1x16x8xf32> into tensor<1x1x16x8xf32>
    %21 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed_10, %expanded_17 : tensor<1x8x16x8xf32>, tensor<1x1x16x8xf32>) outs(%14 : tensor<1x8x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x8xf32>
    %extracted_slice = tensor.extract_slice %transposed_10[0, 0, 0, 0] [1, 8, 16, 4] [1, 1, 1, 1] : tensor<1x8x16x8xf32> to tensor<1x8x16x4xf32>
    %extracted_slice_19 = tensor.extract_slice %transposed_10[0, 0, 0, 4] [1, 8, 16, 4] [1, 1, 1, 1] : tensor<1x8x16x8xf32> to tensor<1x8x16x4xf32>
    %22 = tensor.empty() : tensor<1x8x16x4xf32>
    %23 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%extracted_slice_19 : tensor<1x8x16x4xf32>) outs(%22 : tensor<1x8x16x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.negf %in : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x4xf32>
    %concat = tensor.concat dim(3) %23, %extracted_slice : (tensor<1x8x16x4xf32>, tensor<1x8x16x4xf32>) -> tensor<1x8x16x8xf32>
    %24 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%concat, %expanded_18 : tensor<1x8x16x8xf32>, tensor<1x1x16x8xf32>) outs(%14 : tensor<1x8x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x8xf32>
    %25 = linalg.generic {indexing_maps = [#map3, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%21, %24 : tensor<1x8x16x8xf32>, tensor<1x8x16x8xf32>) outs(%14 : tensor<1x8x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.addf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x8xf32>
    %26 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed_13, %expanded_17 : tensor<1x4x16x8xf32>, tensor<1x1x16x8xf32>) outs(%19 : tensor<1x4x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x4x16x8xf32>
    %extracted_slice_20 = tensor.extract_slice %transposed_13[0, 0, 0, 0] [1, 4, 16, 4] [1, 1, 1, 1] : tensor<1x4x16x8xf32> to tensor<1x4x16x4xf32>
    %extracted_slice_21 = tensor.extract_slice %transposed_13[0, 0, 0, 4] [1, 4, 16, 4] [1, 1, 1, 1] : tensor<1x4x16x8xf32> to tensor<1x4x16x4xf32>
    %27 = tensor.empty() : tensor<1x4x16x4xf32>
    %28 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%extracted_slice_21 : tensor<1x4x16x4xf32>) outs(%27 : tensor<1x4x16x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.negf %in : f32
      linalg.yield %93 : f32
    } -> tensor<1x4x16x4xf32>
    %concat_22 = tensor.concat dim(3) %28, %extracted_slice_20 : (tensor<1x4x16x4xf32>, tensor<1x4x16x4xf32>) -> tensor<1x4x16x8xf32>
    %29 = linalg.generic {indexing_maps = [#map3, #map4, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%concat_22, %expanded_18 : tensor<1x4x16x8xf32>, tensor<1x1x16x8xf32>) outs(%19 : tensor<1x4x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x4x16x8xf32>
    %30 = linalg.generic {indexing_maps = [#map3, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%26, %29 : tensor<1x4x16x8xf32>, tensor<1x4x16x8xf32>) outs(%19 : tensor<1x4x16x8xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.addf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x4x16x8xf32>
    %31 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%25 : tensor<1x8x16x8xf32>) outs(%14 : tensor<1x8x16x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.truncf %cst_7 : f64 to f32
      %94 = arith.mulf %in, %93 : f32
      linalg.yield %94 : f32
    } -> tensor<1x8x16x8xf32>
    %32 = tensor.empty() : tensor<16xi64>
    %33 = linalg.generic {indexing_maps = [#map5], iterator_types = ["parallel"]} outs(%32 : tensor<16xi64>) {
    ^bb0(%out: i64):
      %93 = linalg.index 0 : index
      %94 = arith.index_cast %93 : index to i64
      linalg.yield %94 : i64
    } -> tensor<16xi64>
    %expanded_23 = tensor.expand_shape %33 [[0, 1]] output_shape [1, 16] : tensor<16xi64> into tensor<1x16xi64>
    %expanded_24 = tensor.expand_shape %33 [[0, 1]] output_shape [16, 1] : tensor<16xi64> into tensor<16x1xi64>
    %34 = tensor.empty() : tensor<16x16xi64>
    %35 = linalg.generic {indexing_maps = [#map6, #map7, #map8], iterator_types = ["parallel", "parallel"]} ins(%expanded_23, %expanded_24 : tensor<1x16xi64>, tensor<16x1xi64>) outs(%34 : tensor<16x16xi64>) {
    ^bb0(%in: i64, %in_46: i64, %out: i64):
      %93 = arith.subi %in, %in_46 : i64
      linalg.yield %93 : i64
    } -> tensor<16x16xi64>
    %36 = tensor.empty() : tensor<16x16xi1>
    %37 = linalg.generic {indexing_maps = [#map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%35 : tensor<16x16xi64>) outs(%36 : tensor<16x16xi1>) {
    ^bb0(%in: i64, %out: i1):
      %93 = arith.cmpi sle, %in, %c0_i64 : i64
      linalg.yield %93 : i1
    } -> tensor<16x16xi1>
    %38 = linalg.generic {indexing_maps = [#map8, #map8, #map8], iterator_types = ["parallel", "parallel"]} ins(%37, %cst_5 : tensor<16x16xi1>, tensor<16x16xi1>) outs(%36 : tensor<16x16xi1>) {
    ^bb0(%in: i1, %in_46: i1, %out: i1):
      %93 = arith.andi %in, %in_46 : i1
      linalg.yield %93 : i1
    } -> tensor<16x16xi1>
    %39 = tensor.empty() : tensor<16x16xf32>
    %40 = linalg.generic {indexing_maps = [#map8, #map9, #map9, #map8], iterator_types = ["parallel", "parallel"]} ins(%38, %cst_3, %cst_4 : tensor<16x16xi1>, tensor<f32>, tensor<f32>) outs(%39 : tensor<16x16xf32>) {
    ^bb0(%in: i1, %in_46: f32, %in_47: f32, %out: f32):
      %93 = arith.select %in, %in_46, %in_47 : f32
      linalg.yield %93 : f32
    } -> tensor<16x16xf32>
    %41 = tensor.empty() : tensor<1x4x2x16x8xf32>
    %42 = linalg.generic {indexing_maps = [#map10, #map11], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%30 : tensor<1x4x16x8xf32>) outs(%41 : tensor<1x4x2x16x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x4x2x16x8xf32>
    %collapsed_25 = tensor.collapse_shape %42 [[0], [1, 2], [3], [4]] : tensor<1x4x2x16x8xf32> into tensor<1x8x16x8xf32>
    %43 = linalg.generic {indexing_maps = [#map10, #map11], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%transposed_16 : tensor<1x4x16x8xf32>) outs(%41 : tensor<1x4x2x16x8xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<1x4x2x16x8xf32>
    %44 = tensor.empty() : tensor<1x8x8x16xf32>
    %transposed_26 = linalg.transpose ins(%collapsed_25 : tensor<1x8x16x8xf32>) outs(%44 : tensor<1x8x8x16xf32>) permutation = [0, 1, 3, 2] 
    %45 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%transposed_26 : tensor<1x8x8x16xf32>) outs(%44 : tensor<1x8x8x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.truncf %cst_7 : f64 to f32
      %94 = arith.mulf %in, %93 : f32
      linalg.yield %94 : f32
    } -> tensor<1x8x8x16xf32>
    %collapsed_27 = tensor.collapse_shape %31 [[0, 1], [2], [3]] : tensor<1x8x16x8xf32> into tensor<8x16x8xf32>
    %collapsed_28 = tensor.collapse_shape %45 [[0, 1], [2], [3]] : tensor<1x8x8x16xf32> into tensor<8x8x16xf32>
    %46 = tensor.empty() : tensor<8x16x16xf32>
    %47 = linalg.fill ins(%cst : f32) outs(%46 : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %48 = linalg.batch_matmul ins(%collapsed_27, %collapsed_28 : tensor<8x16x8xf32>, tensor<8x8x16xf32>) outs(%47 : tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %expanded_29 = tensor.expand_shape %48 [[0, 1], [2], [3]] output_shape [1, 8, 16, 16] : tensor<8x16x16xf32> into tensor<1x8x16x16xf32>
    %49 = tensor.empty() : tensor<1x8x16x16xf32>
    %50 = linalg.generic {indexing_maps = [#map3, #map12, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%expanded_29, %40 : tensor<1x8x16x16xf32>, tensor<16x16xf32>) outs(%49 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.addf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x16xf32>
    %51 = tensor.empty() : tensor<1x8x16xi64>
    %52 = linalg.fill ins(%c0_i64 : i64) outs(%51 : tensor<1x8x16xi64>) -> tensor<1x8x16xi64>
    %53 = tensor.empty() : tensor<1x8x16xf32>
    %54 = linalg.fill ins(%cst_0 : f32) outs(%53 : tensor<1x8x16xf32>) -> tensor<1x8x16xf32>
    %55:2 = linalg.generic {indexing_maps = [#map3, #map13, #map13], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%50 : tensor<1x8x16x16xf32>) outs(%54, %52 : tensor<1x8x16xf32>, tensor<1x8x16xi64>) {
    ^bb0(%in: f32, %out: f32, %out_46: i64):
      %93 = linalg.index 3 : index
      %94 = arith.index_cast %93 : index to i64
      %95 = arith.maximumf %in, %out : f32
      %96 = arith.cmpf ogt, %in, %out : f32
      %97 = arith.select %96, %94, %out_46 : i64
      linalg.yield %95, %97 : f32, i64
    } -> (tensor<1x8x16xf32>, tensor<1x8x16xi64>)
    %expanded_30 = tensor.expand_shape %55#0 [[0], [1], [2, 3]] output_shape [1, 8, 16, 1] : tensor<1x8x16xf32> into tensor<1x8x16x1xf32>
    %56 = linalg.generic {indexing_maps = [#map3, #map14, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%50, %expanded_30 : tensor<1x8x16x16xf32>, tensor<1x8x16x1xf32>) outs(%49 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.subf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x16xf32>
    %57 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%56 : tensor<1x8x16x16xf32>) outs(%49 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = math.exp %in : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x16xf32>
    %58 = tensor.empty() : tensor<1x8x16x1xf32>
    %59 = linalg.fill ins(%cst : f32) outs(%58 : tensor<1x8x16x1xf32>) -> tensor<1x8x16x1xf32>
    %60 = linalg.generic {indexing_maps = [#map3, #map14], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%57 : tensor<1x8x16x16xf32>) outs(%59 : tensor<1x8x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.addf %in, %out : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x1xf32>
    %61 = linalg.generic {indexing_maps = [#map3, #map14, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%57, %60 : tensor<1x8x16x16xf32>, tensor<1x8x16x1xf32>) outs(%49 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.divf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x16xf32>
    %62 = tensor.empty() : tensor<1x8x16x16xi1>
    %63 = linalg.generic {indexing_maps = [#map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%50 : tensor<1x8x16x16xf32>) outs(%62 : tensor<1x8x16x16xi1>) {
    ^bb0(%in: f32, %out: i1):
      %93 = arith.extf %in : f32 to f64
      %94 = arith.cmpf oeq, %93, %cst_6 : f64
      linalg.yield %94 : i1
    } -> tensor<1x8x16x16xi1>
    %64 = tensor.empty() : tensor<1x8x16x1xi1>
    %65 = linalg.fill ins(%true : i1) outs(%64 : tensor<1x8x16x1xi1>) -> tensor<1x8x16x1xi1>
    %66 = linalg.generic {indexing_maps = [#map3, #map14], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%63 : tensor<1x8x16x16xi1>) outs(%65 : tensor<1x8x16x1xi1>) {
    ^bb0(%in: i1, %out: i1):
      %93 = arith.andi %in, %out : i1
      linalg.yield %93 : i1
    } -> tensor<1x8x16x1xi1>
    %67 = linalg.generic {indexing_maps = [#map14, #map3, #map3, #map3], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%66, %cst_2, %61 : tensor<1x8x16x1xi1>, tensor<1x8x16x16xf32>, tensor<1x8x16x16xf32>) outs(%49 : tensor<1x8x16x16xf32>) {
    ^bb0(%in: i1, %in_46: f32, %in_47: f32, %out: f32):
      %93 = arith.select %in, %in_46, %in_47 : f32
      linalg.yield %93 : f32
    } -> tensor<1x8x16x16xf32>
    %collapsed_31 = tensor.collapse_shape %67 [[0, 1], [2], [3]] : tensor<1x8x16x16xf32> into tensor<8x16x16xf32>
    %collapsed_32 = tensor.collapse_shape %43 [[0, 1, 2], [3], [4]] : tensor<1x4x2x16x8xf32> into tensor<8x16x8xf32>
    %68 = tensor.empty() : tensor<8x16x8xf32>
    %69 = linalg.fill ins(%cst : f32) outs(%68 : tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %70 = linalg.batch_matmul ins(%collapsed_31, %collapsed_32 : tensor<8x16x16xf32>, tensor<8x16x8xf32>) outs(%69 : tensor<8x16x8xf32>) -> tensor<8x16x8xf32>
    %expanded_33 = tensor.expand_shape %70 [[0, 1], [2], [3]] output_shape [1, 8, 16, 8] : tensor<8x16x8xf32> into tensor<1x8x16x8xf32>
    %71 = tensor.empty() : tensor<1x16x8x8xf32>
    %transposed_34 = linalg.transpose ins(%expanded_33 : tensor<1x8x16x8xf32>) outs(%71 : tensor<1x16x8x8xf32>) permutation = [0, 2, 1, 3] 
    %transposed_35 = linalg.transpose ins(%arg6 : tensor<64x64xf32>) outs(%10 : tensor<64x64xf32>) permutation = [1, 0] 
    %collapsed_36 = tensor.collapse_shape %transposed_34 [[0, 1], [2, 3]] : tensor<1x16x8x8xf32> into tensor<16x64xf32>
    %72 = linalg.matmul ins(%collapsed_36, %transposed_35 : tensor<16x64xf32>, tensor<64x64xf32>) outs(%12 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %expanded_37 = tensor.expand_shape %72 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
    %73 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg0, %expanded_37 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.addf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %74 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%73 : tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = math.fpowi %in, %c2_i64 : f32, i64
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %75 = linalg.generic {indexing_maps = [#map, #map1], iterator_types = ["parallel", "parallel", "reduction"]} ins(%74 : tensor<1x16x64xf32>) outs(%3 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.addf %in, %out : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %76 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%75 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.divf %in, %cst_9 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %77 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%76 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.truncf %cst_8 : f64 to f32
      %94 = arith.addf %in, %93 : f32
      linalg.yield %94 : f32
    } -> tensor<1x16x1xf32>
    %78 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%77 : tensor<1x16x1xf32>) outs(%2 : tensor<1x16x1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = math.rsqrt %in : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x1xf32>
    %79 = linalg.generic {indexing_maps = [#map, #map1, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%73, %78 : tensor<1x16x64xf32>, tensor<1x16x1xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %80 = linalg.generic {indexing_maps = [#map2, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%arg11, %79 : tensor<64xf32>, tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    %81 = tensor.empty() : tensor<64x128xf32>
    %transposed_38 = linalg.transpose ins(%arg7 : tensor<128x64xf32>) outs(%81 : tensor<64x128xf32>) permutation = [1, 0] 
    %collapsed_39 = tensor.collapse_shape %80 [[0, 1], [2]] : tensor<1x16x64xf32> into tensor<16x64xf32>
    %82 = tensor.empty() : tensor<16x128xf32>
    %83 = linalg.fill ins(%cst : f32) outs(%82 : tensor<16x128xf32>) -> tensor<16x128xf32>
    %84 = linalg.matmul ins(%collapsed_39, %transposed_38 : tensor<16x64xf32>, tensor<64x128xf32>) outs(%83 : tensor<16x128xf32>) -> tensor<16x128xf32>
    %expanded_40 = tensor.expand_shape %84 [[0, 1], [2]] output_shape [1, 16, 128] : tensor<16x128xf32> into tensor<1x16x128xf32>
    %85 = tensor.empty() : tensor<1x16x128xf32>
    %86 = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_40 : tensor<1x16x128xf32>) outs(%85 : tensor<1x16x128xf32>) {
    ^bb0(%in: f32, %out: f32):
      %93 = arith.negf %in : f32
      %94 = math.exp %93 : f32
      %95 = arith.addf %94, %cst_1 : f32
      %96 = arith.divf %cst_1, %95 : f32
      linalg.yield %96 : f32
    } -> tensor<1x16x128xf32>
    %87 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expanded_40, %86 : tensor<1x16x128xf32>, tensor<1x16x128xf32>) outs(%85 : tensor<1x16x128xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x128xf32>
    %transposed_41 = linalg.transpose ins(%arg8 : tensor<128x64xf32>) outs(%81 : tensor<64x128xf32>) permutation = [1, 0] 
    %88 = linalg.matmul ins(%collapsed_39, %transposed_41 : tensor<16x64xf32>, tensor<64x128xf32>) outs(%83 : tensor<16x128xf32>) -> tensor<16x128xf32>
    %expanded_42 = tensor.expand_shape %88 [[0, 1], [2]] output_shape [1, 16, 128] : tensor<16x128xf32> into tensor<1x16x128xf32>
    %89 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%87, %expanded_42 : tensor<1x16x128xf32>, tensor<1x16x128xf32>) outs(%85 : tensor<1x16x128xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.mulf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x128xf32>
    %90 = tensor.empty() : tensor<128x64xf32>
    %transposed_43 = linalg.transpose ins(%arg9 : tensor<64x128xf32>) outs(%90 : tensor<128x64xf32>) permutation = [1, 0] 
    %collapsed_44 = tensor.collapse_shape %89 [[0, 1], [2]] : tensor<1x16x128xf32> into tensor<16x128xf32>
    %91 = linalg.matmul ins(%collapsed_44, %transposed_43 : tensor<16x128xf32>, tensor<128x64xf32>) outs(%12 : tensor<16x64xf32>) -> tensor<16x64xf32>
    %expanded_45 = tensor.expand_shape %91 [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
    %92 = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel", "parallel"]} ins(%73, %expanded_45 : tensor<1x16x64xf32>, tensor<1x16x64xf32>) outs(%0 : tensor<1x16x64xf32>) {
    ^bb0(%in: f32, %in_46: f32, %out: f32):
      %93 = arith.addf %in, %in_46 : f32
      linalg.yield %93 : f32
    } -> tensor<1x16x64xf32>
    return %92 : tensor<1x16x64xf32>
  }
}

