// Under context parallelism upstream gathers the rows before the k and v
// projections, whose weights are replicated: the projections and what
// follows them per row move before the gather too, and each value used
// afterwards is gathered instead, when that moves no more bytes or the
// work saved outweighs the extra bytes.
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=auto 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather --braid-overlap=mode=auto -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s -split-input-file --braid-sink-all-gather=target-preset=h200 --braid-overlap="mode=auto target-preset=h200" 2>/dev/null | FileCheck %s --check-prefix=H200

#rows = affine_map<(i, j) -> (i, j)>
shard.grid @cp(shape = 4)
// Context parallelism: the rows gathered before the k and v projections
// (replicated weights). The projections, the rotary embedding (its table
// read at each row's position, so sliced to this rank's block; the halves
// rotated by a slice and a concat) move before the gather, and k and v
// are gathered instead: as many bytes, 1/4 of the projections' work.
// CHECK-LABEL: func.func @kv_projections
// CHECK-NOT: dist.all_gather
// CHECK: %[[K:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x64xf32>, tensor<64x32xf32>)
// CHECK: %[[POS:.*]] = shard.process_multi_index on @cp axes = [0]
// CHECK: %[[OFF:.*]] = arith.muli %[[POS]], %c4
// CHECK: %[[COS:.*]] = tensor.extract_slice %{{.*}}[%[[OFF]], 0] [4, 32] [1, 1] : tensor<16x32xf32> to tensor<4x32xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[K]], %[[COS]] : tensor<4x32xf32>, tensor<4x32xf32>)
// CHECK: tensor.extract_slice %[[K]][0, 16] [4, 16] [1, 1] : tensor<4x32xf32> to tensor<4x16xf32>
// CHECK: tensor.concat dim(1) %{{.*}}, %{{.*}} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x32xf32>
// CHECK: tensor.extract_slice %{{.*}}[%{{.*}}, 0] [4, 32] [1, 1] : tensor<16x32xf32> to tensor<4x32xf32>
// CHECK: dist.all_gather{{(_start)?}} %{{.*}} : tensor<4x32xf32> -> tensor<16x32xf32>
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x64xf32>, tensor<64x32xf32>)
// CHECK: dist.all_gather{{(_start)?}} %{{.*}} : tensor<4x32xf32> -> tensor<16x32xf32>
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 8 row-local ops that followed it (their other operands are replicated): they run on 1/4 of the rows; 2 values are gathered after them instead of one (4.0 KiB instead of 4.0 KiB)
func.func @kv_projections(
    %x: tensor<4x64xf32> {dist.placement = #dist.placement<@cp, [shard<0>]>},
    %wk: tensor<64x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>},
    %wv: tensor<64x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>},
    %cos: tensor<16x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>},
    %sin: tensor<16x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>})
    -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %g = dist.all_gather %x on @cp axes = [0] dim = 0 : tensor<4x64xf32> -> tensor<16x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x32xf32>) -> tensor<16x32xf32>
  %k = linalg.matmul ins(%g, %wk : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  %kc = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%k, %cos : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %lo = tensor.extract_slice %k[0, 0] [16, 16] [1, 1] : tensor<16x32xf32> to tensor<16x16xf32>
  %hi = tensor.extract_slice %k[0, 16] [16, 16] [1, 1] : tensor<16x32xf32> to tensor<16x16xf32>
  %rot = tensor.concat dim(1) %hi, %lo : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x32xf32>
  %ks = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%rot, %sin : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %kr = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%kc, %ks : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %v = linalg.matmul ins(%g, %wv : tensor<16x64xf32>, tensor<64x32xf32>) outs(%f : tensor<16x32xf32>) -> tensor<16x32xf32>
  return %kr, %v : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
shard.grid @cp(shape = 4)
// An op reading its row's index would count from 0 on every rank before
// the gather, and a table computed after the gather cannot be sliced
// before it: both stay after the gather.
// CHECK-LABEL: func.func @row_dependent
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK: linalg.generic {{.*}} ins(%[[G]] : tensor<16x32xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[G]], %{{.*}} : tensor<16x32xf32>, tensor<16x32xf32>)
func.func @row_dependent(
    %x: tensor<4x32xf32> {dist.placement = #dist.placement<@cp, [shard<0>]>},
    %t: tensor<16x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>})
    -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %g = dist.all_gather %x on @cp axes = [0] dim = 0 : tensor<4x32xf32> -> tensor<16x32xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %p = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %m = arith.addf %a, %fi : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %late = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %q = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g, %late : tensor<16x32xf32>, tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  return %p, %q : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
shard.grid @cp(shape = 4)
// Two values of elementwise work gathered instead of one: twice the bytes
// on the wire, for 3/4 of the work's memory traffic. On the cpu preset
// (2.3 GB/s of memory per rank, 0.6 GB/s of link) that pays and the work
// moves; on an H200 (4.8 TB/s of HBM, 450 GB/s of NVLink) it does not.
// CHECK-LABEL: func.func @two_values_more_bytes
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<4x32xf32>)
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{.*}} : tensor<4x32xf32>)
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 2 row-local ops {{.*}}; 2 values are gathered after them instead of one (4.0 KiB instead of 2.0 KiB)
// H200-LABEL: func.func @two_values_more_bytes
// H200: %[[G:.*]] = dist.all_gather
// H200: linalg.generic
// H200-SAME: ins(%[[G]] : tensor<16x32xf32>)
// H200: linalg.generic
// H200-SAME: ins(%[[G]] : tensor<16x32xf32>)
func.func @two_values_more_bytes(
    %x: tensor<4x32xf32> {dist.placement = #dist.placement<@cp, [shard<0>]>})
    -> (tensor<16x32xf32>, tensor<16x32xf32>) {
  %g = dist.all_gather %x on @cp axes = [0] dim = 0 : tensor<4x32xf32> -> tensor<16x32xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %a = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %v : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %b = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.negf %v : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  return %a, %b : tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

#id3 = affine_map<(b, s, h) -> (b, s, h)>
#col3 = affine_map<(b, s, h) -> (h)>
shard.grid @cp(shape = 4)
// A batch of two: the projection reads [batch * seq, hidden], whose rows
// fold the gathered sequence inside the batch. The local rows are no
// block of the whole, but the projection treats rows alike, and the
// expand that separates the sequence again gives k gathered along it.
// CHECK-LABEL: func.func @batch_folded
// CHECK-NOT: dist.all_gather
// CHECK: tensor.collapse_shape %{{.*}} : tensor<2x4x64xf32> into tensor<8x64xf32>
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x64xf32>, tensor<64x32xf32>)
// CHECK: tensor.expand_shape %{{.*}} output_shape [2, 4, 2, 16] : tensor<8x32xf32> into tensor<2x4x2x16xf32>
// CHECK: linalg.transpose ins(%{{.*}} : tensor<2x4x2x16xf32>) outs(%{{.*}} : tensor<2x2x4x16xf32>)
// CHECK: dist.all_gather{{(_start)?}} %{{.*}} dim = 2 : tensor<2x2x4x16xf32> -> tensor<2x2x16x16xf32>
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 4 row-local ops
func.func @batch_folded(
    %x: tensor<2x4x64xf32> {dist.placement = #dist.placement<@cp, [shard<1>]>},
    %wk: tensor<64x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>})
    -> tensor<2x2x16x16xf32> {
  %g = dist.all_gather %x on @cp axes = [0] dim = 1 : tensor<2x4x64xf32> -> tensor<2x16x64xf32>
  %c = tensor.collapse_shape %g [[0, 1], [2]] : tensor<2x16x64xf32> into tensor<32x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %k = linalg.matmul ins(%c, %wk : tensor<32x64xf32>, tensor<64x32xf32>) outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %kx = tensor.expand_shape %k [[0, 1], [2, 3]] output_shape [2, 16, 2, 16] : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %et = tensor.empty() : tensor<2x2x16x16xf32>
  %kt = linalg.transpose ins(%kx : tensor<2x16x2x16xf32>) outs(%et : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  return %kt : tensor<2x2x16x16xf32>
}

// -----

#id2 = affine_map<(r, h) -> (r, h)>
#bias = affine_map<(r, h) -> (h)>
shard.grid @cp(shape = 4)
// A projection bias broadcast over the folded rows (Qwen2's q, k and v
// with two sequences): the same along the rows, so the add reads its
// first 8 rows before the gather, folded or not.
// CHECK-LABEL: func.func @batch_folded_bias
// CHECK-NOT: dist.all_gather
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x64xf32>, tensor<64x32xf32>)
// CHECK: %[[B:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<32xf32>) outs(%{{.*}} : tensor<32x32xf32>)
// CHECK: %[[FIRST:.*]] = tensor.extract_slice %[[B]][0, 0] [8, 32] [1, 1] : tensor<32x32xf32> to tensor<8x32xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[FIRST]] : tensor<8x32xf32>, tensor<8x32xf32>)
// CHECK: dist.all_gather{{(_start)?}} %{{.*}} dim = 2 : tensor<2x2x4x16xf32> -> tensor<2x2x16x16xf32>
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 5 row-local ops
func.func @batch_folded_bias(
    %x: tensor<2x4x64xf32> {dist.placement = #dist.placement<@cp, [shard<1>]>},
    %wk: tensor<64x32xf32> {dist.placement = #dist.placement<@cp, [replicate]>},
    %bk: tensor<32xf32> {dist.placement = #dist.placement<@cp, [replicate]>})
    -> tensor<2x2x16x16xf32> {
  %g = dist.all_gather %x on @cp axes = [0] dim = 1 : tensor<2x4x64xf32> -> tensor<2x16x64xf32>
  %c = tensor.collapse_shape %g [[0, 1], [2]] : tensor<2x16x64xf32> into tensor<32x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %k = linalg.matmul ins(%c, %wk : tensor<32x64xf32>, tensor<64x32xf32>) outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  %b = linalg.generic {indexing_maps = [#bias, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%bk : tensor<32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<32x32xf32>
  %kb = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%k, %b : tensor<32x32xf32>, tensor<32x32xf32>) outs(%e : tensor<32x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %s = arith.addf %p, %q : f32
    linalg.yield %s : f32
  } -> tensor<32x32xf32>
  %kx = tensor.expand_shape %kb [[0, 1], [2, 3]] output_shape [2, 16, 2, 16] : tensor<32x32xf32> into tensor<2x16x2x16xf32>
  %et = tensor.empty() : tensor<2x2x16x16xf32>
  %kt = linalg.transpose ins(%kx : tensor<2x16x2x16xf32>) outs(%et : tensor<2x2x16x16xf32>) permutation = [0, 2, 1, 3]
  return %kt : tensor<2x2x16x16xf32>
}

// -----

#id3 = affine_map<(b, s, h) -> (b, s, h)>
#col3 = affine_map<(b, s, h) -> (h)>
shard.grid @cp(shape = 4)
// The folded rows used as they are (a matmul whose weight may differ per
// rank reads them): no gather could assemble them, so the collapse stays
// after the gather and the norm weight's multiply alone moves.
// CHECK-LABEL: func.func @batch_folded_used
// CHECK: %[[W:.*]] = linalg.generic
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<64xf32>, tensor<2x4x64xf32>)
// CHECK: %[[G:.*]] = dist.all_gather{{(_start)?}} %[[W]] {{.*}}dim = 1 : tensor<2x4x64xf32> -> tensor<2x16x64xf32>
// CHECK: tensor.collapse_shape %{{.*}} : tensor<2x16x64xf32> into tensor<32x64xf32>
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather moved after the 1 row-local ops
func.func @batch_folded_used(
    %x: tensor<2x4x64xf32> {dist.placement = #dist.placement<@cp, [shard<1>]>},
    %w: tensor<64xf32> {dist.placement = #dist.placement<@cp, [replicate]>},
    %wq: tensor<64x32xf32>) -> tensor<32x32xf32> {
  %g = dist.all_gather %x on @cp axes = [0] dim = 1 : tensor<2x4x64xf32> -> tensor<2x16x64xf32>
  %e3 = tensor.empty() : tensor<2x16x64xf32>
  %n = linalg.generic {indexing_maps = [#col3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w, %g : tensor<64xf32>, tensor<2x16x64xf32>) outs(%e3 : tensor<2x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<2x16x64xf32>
  %c = tensor.collapse_shape %n [[0, 1], [2]] : tensor<2x16x64xf32> into tensor<32x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<32x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x32xf32>) -> tensor<32x32xf32>
  %q = linalg.matmul ins(%c, %wq : tensor<32x64xf32>, tensor<64x32xf32>) outs(%f : tensor<32x32xf32>) -> tensor<32x32xf32>
  return %q : tensor<32x32xf32>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
shard.grid @cp(shape = 4)
// Partitioning computed the work on every row and took this rank's block
// back afterwards (an MLP between two sequence-split residual adds): once
// the work moves before the gather, the slice reads the local value and
// the gather is gone.
// CHECK-LABEL: func.func @own_block
// CHECK-NOT: dist.all_gather
// CHECK: %[[Y:.*]] = linalg.generic
// CHECK-SAME: ins(%arg0 : tensor<4x32xf32>)
// CHECK-NOT: dist.all_gather
// CHECK: return %[[Y]] : tensor<4x32xf32>
// REMARK: sink-all-gather-rows.mlir:{{[0-9]+}}:8: remark: all_gather removed: the 1 row-local ops after it moved before it, and what followed them read only this rank's block
func.func @own_block(
    %x: tensor<4x32xf32> {dist.placement = #dist.placement<@cp, [shard<0>]>})
    -> tensor<4x32xf32> {
  %g = dist.all_gather %x on @cp axes = [0] dim = 0 : tensor<4x32xf32> -> tensor<16x32xf32>
  %e = tensor.empty() : tensor<16x32xf32>
  %y = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x32xf32>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %v : f32
    linalg.yield %m : f32
  } -> tensor<16x32xf32>
  %p = shard.process_multi_index on @cp axes = [0] : index
  %c4 = arith.constant 4 : index
  %off = arith.muli %p, %c4 : index
  %s = tensor.extract_slice %y[%off, 0] [4, 32] [1, 1] : tensor<16x32xf32> to tensor<4x32xf32>
  return %s : tensor<4x32xf32>
}

// -----

#rows = affine_map<(i, j) -> (i, j)>
shard.grid @cp(shape = 4)
// A widening cast alone: on an H200 the extra bytes cost more than the
// cast saves, and it stays after the gather.
// H200-LABEL: func.func @widening_cast
// H200: %[[G:.*]] = dist.all_gather %{{.*}} : tensor<4x32xbf16> -> tensor<16x32xbf16>
// H200: linalg.generic
// H200-SAME: ins(%[[G]] : tensor<16x32xbf16>)
func.func @widening_cast(
    %x: tensor<4x32xbf16> {dist.placement = #dist.placement<@cp, [shard<0>]>})
    -> tensor<16x32xf32> {
  %g = dist.all_gather %x on @cp axes = [0] dim = 0 : tensor<4x32xbf16> -> tensor<16x32xbf16>
  %e = tensor.empty() : tensor<16x32xf32>
  %c = linalg.generic {indexing_maps = [#rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%g : tensor<16x32xbf16>) outs(%e : tensor<16x32xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %f = arith.extf %v : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<16x32xf32>
  return %c : tensor<16x32xf32>
}
