// A sum all-reduce moves after the linear work on its sum that shrinks it:
// the combine of a tensor-parallel MoE block (each expert's output weighed
// by its routing weight and summed over the experts). Work that is not
// linear in the sum, or reads a value not proven alike across the group,
// keeps it in place; two sums over different axes of one grid that meet
// become one.
// RUN: braid-opt %s -split-input-file --braid-sink-all-reduce 2>/dev/null | FileCheck %s
// RUN: braid-opt %s -split-input-file --braid-sink-all-reduce -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @tp(shape = 4)
// The partial sums of [experts, tokens, hidden], weighed and summed over
// the experts: the sum of [tokens, hidden] moves instead, through the
// reshape after it (as many bytes: the first point with the fewest).
// CHECK-LABEL: func.func @moe_combine
// CHECK-SAME: (%[[P:.*]]: tensor<8x16x64xf32>
// CHECK-NOT: dist.all_reduce
// CHECK: %[[W:.*]] = linalg.generic
// CHECK-SAME: ins(%[[P]], %{{.*}} : tensor<8x16x64xf32>, tensor<8x16xf32>)
// CHECK: %[[C:.*]] = linalg.generic
// CHECK-SAME: ins(%[[W]] : tensor<8x16x64xf32>)
// CHECK: } -> tensor<16x64xf32>
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[C]] on @tp axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
// CHECK-NEXT: tensor.expand_shape %[[R]]
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 4.0 KiB instead of 32.0 KiB
func.func @moe_combine(
    %p: tensor<8x16x64xf32>,
    %weights: tensor<8x16xf32> {dist.placement = #dist.placement<@tp, [replicate]>})
    -> tensor<1x16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16x64xf32>
  %o = tensor.empty() : tensor<16x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %w = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %weights : tensor<8x16x64xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<8x16x64xf32>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w : tensor<8x16x64xf32>) outs(%init : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %x = tensor.expand_shape %c [[0, 1], [2]] output_shape [1, 16, 64] : tensor<16x64xf32> into tensor<1x16x64xf32>
  return %x : tensor<1x16x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
// Experts split over axis 0 and their features over axis 1 (EP x TP):
// the sum over axis 1 moves after the combine, where the sum over axis 0
// of the experts' partial sums follows, and the two become one. The
// routing weights of this rank's experts are sliced at its position along
// axis 0, which is the same along axis 1; the combine's init is chosen by
// rank, zeros either way. bf16 products through f32 and back count as
// linear.
// CHECK-LABEL: func.func @experts_and_features
// CHECK-NOT: dist.all_reduce
// CHECK: %[[C:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK-NOT: dist.all_reduce
// CHECK: %[[R:.*]] = dist.all_reduce %[[C]] on @g axes = [0, 1] reduce = sum : tensor<16x64xbf16> -> tensor<16x64xbf16>
// CHECK-NOT: dist.all_reduce
// CHECK: return %[[R]]
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 2.0 KiB instead of 8.0 KiB
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:10: remark: all_reduce merged with the all_reduce of its input: one sum over grid axes [0, 1]
func.func @experts_and_features(
    %p: tensor<4x16x64xbf16>,
    %weights: tensor<8x16xbf16> {dist.placement = #dist.placement<@g, [replicate, replicate]>})
    -> tensor<16x64xbf16> {
  %zero = arith.constant 0.0 : bf16
  %c4 = arith.constant 4 : index
  %c0 = arith.constant 0 : index
  %pos:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
  %off = arith.muli %pos#0, %c4 : index
  %mine = tensor.extract_slice %weights[%off, 0] [4, 16] [1, 1] : tensor<8x16xbf16> to tensor<4x16xbf16>
  %e = tensor.empty() : tensor<4x16x64xbf16>
  %o = tensor.empty() : tensor<16x64xbf16>
  %zeros = linalg.fill ins(%zero : bf16) outs(%o : tensor<16x64xbf16>) -> tensor<16x64xbf16>
  %first = arith.cmpi eq, %pos#1, %c0 : index
  %init = scf.if %first -> (tensor<16x64xbf16>) {
    scf.yield %zeros : tensor<16x64xbf16>
  } else {
    scf.yield %zeros : tensor<16x64xbf16>
  }
  %r = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<4x16x64xbf16> -> tensor<4x16x64xbf16>
  %w = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %mine : tensor<4x16x64xbf16>, tensor<4x16xbf16>) outs(%e : tensor<4x16x64xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %out: bf16):
    %a32 = arith.extf %a : bf16 to f32
    %b32 = arith.extf %b : bf16 to f32
    %m = arith.mulf %a32, %b32 : f32
    %t = arith.truncf %m : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x16x64xbf16>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w : tensor<4x16x64xbf16>) outs(%init : tensor<16x64xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %s = arith.addf %a, %out : bf16
    linalg.yield %s : bf16
  } -> tensor<16x64xbf16>
  %all = dist.all_reduce %c on @g axes = [0] reduce = sum : tensor<16x64xbf16> -> tensor<16x64xbf16>
  return %all : tensor<16x64xbf16>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
// Weights sliced at this rank's position along the reduced axis differ
// across the group: sum_r (x_r * w_r) is not (sum_r x_r) * w. Kept, with
// a remark that says why.
// CHECK-LABEL: func.func @weights_differ
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<4x16x64xf32>
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce not moved past the linear work on its sum: the result of 'shard.process_multi_index' is this rank's position along grid axis 1
func.func @weights_differ(
    %p: tensor<4x16x64xf32>,
    %weights: tensor<8x16xf32> {dist.placement = #dist.placement<@g, [replicate, replicate]>})
    -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c4 = arith.constant 4 : index
  %pos:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
  %off = arith.muli %pos#1, %c4 : index
  %mine = tensor.extract_slice %weights[%off, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %e = tensor.empty() : tensor<4x16x64xf32>
  %o = tensor.empty() : tensor<16x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<4x16x64xf32> -> tensor<4x16x64xf32>
  %w = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %mine : tensor<4x16x64xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x16x64xf32>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w : tensor<4x16x64xf32>) outs(%init : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %c : tensor<16x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#sum = affine_map<(e, t, h) -> (t, h)>
#id = affine_map<(t, h) -> (t, h)>
shard.grid @tp(shape = 4)
// Work that is not linear in the sum keeps it in place: a residual add (it
// would be added once per rank), a reduction into a bias instead of zeros,
// a square; so does a sum another op also reads, and a max all-reduce.
// CHECK-LABEL: func.func @not_linear
// CHECK: dist.all_reduce %{{.*}} : tensor<8x16x64xf32>
// CHECK: dist.all_reduce %{{.*}} : tensor<8x16x64xf32>
// CHECK: dist.all_reduce %{{.*}} : tensor<16x64xf32>
// CHECK: dist.all_reduce %{{.*}} : tensor<8x16x64xf32>
// CHECK: dist.all_reduce %{{.*}} reduce = max : tensor<8x16x64xf32>
// REMARK-NOT: remark
func.func @not_linear(
    %p: tensor<8x16x64xf32>,
    %bias: tensor<16x64xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
    %residual: tensor<16x64xf32> {dist.placement = #dist.placement<@tp, [replicate]>})
    -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<8x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<16x64xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  // Into a bias.
  %r0 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %c0 = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%r0 : tensor<8x16x64xf32>) outs(%bias : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  // A square, summed.
  %r1 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %c1 = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%r1 : tensor<8x16x64xf32>) outs(%zeros : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %q = arith.mulf %a, %a : f32
    %s = arith.addf %q, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  // A residual add after a sum of [tokens, hidden].
  %small = tensor.extract_slice %p[0, 0, 0] [1, 16, 64] [1, 1, 1] : tensor<8x16x64xf32> to tensor<16x64xf32>
  %r2 = dist.all_reduce %small on @tp axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %c2 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r2, %residual : tensor<16x64xf32>, tensor<16x64xf32>) outs(%o : tensor<16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  // A sum read twice.
  %r3 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %c3 = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%r3 : tensor<8x16x64xf32>) outs(%zeros : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  // A max.
  %r4 = dist.all_reduce %p on @tp axes = [0] reduce = max : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %c4 = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%r4 : tensor<8x16x64xf32>) outs(%zeros : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %c0, %c1, %r3, %c3, %c4 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<8x16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#b3 = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
// Linear work that grows the tensor (a broadcast) leaves the sum where it
// is; two sums over the same axis do not merge (that would sum twice).
// CHECK-LABEL: func.func @grows_and_same_axis
// CHECK: %[[A:.*]] = dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<16x64xf32>
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[A]] : tensor<16x64xf32>)
// CHECK: %[[B:.*]] = dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<16x64xf32>
// CHECK: dist.all_reduce %[[B]] on @g axes = [1] reduce = sum : tensor<16x64xf32>
func.func @grows_and_same_axis(%p: tensor<16x64xf32>, %q: tensor<16x64xf32>)
    -> (tensor<4x16x64xf32>, tensor<16x64xf32>) {
  %e = tensor.empty() : tensor<4x16x64xf32>
  %r = dist.all_reduce %p on @g axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %b = linalg.generic {indexing_maps = [#b3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r : tensor<16x64xf32>) outs(%e : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<4x16x64xf32>
  %s1 = dist.all_reduce %q on @g axes = [1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %s2 = dist.all_reduce %s1 on @g axes = [1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  return %b, %s2 : tensor<4x16x64xf32>, tensor<16x64xf32>
}

// -----

shard.grid @g(shape = 2x2)
// A slice of the sum at an offset that differs across the group (this
// rank's position along the reduced axis) keeps the sum in place: moved,
// each rank would add its peers' rows at its own offset. At a position
// along the other axis it moves.
// CHECK-LABEL: func.func @slice_at_position
// CHECK: %[[A:.*]] = dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<8x64xf32>
// CHECK: tensor.extract_slice %[[A]]
// CHECK: %[[S:.*]] = tensor.extract_slice %{{.*}} : tensor<8x64xf32> to tensor<2x64xf32>
// CHECK: dist.all_reduce %[[S]] on @g axes = [1] reduce = sum : tensor<2x64xf32>
// REMARK: remark: all_reduce not moved past the linear work on its sum: the result of 'shard.process_multi_index' is this rank's position along grid axis 1
// REMARK: remark: all_reduce moved after the 1 ops of linear work on its sum: sums 512.0 B instead of 2.0 KiB
func.func @slice_at_position(%p: tensor<8x64xf32>, %q: tensor<8x64xf32>)
    -> (tensor<2x64xf32>, tensor<2x64xf32>) {
  %c2 = arith.constant 2 : index
  %pos:2 = shard.process_multi_index on @g axes = [0, 1] : index, index
  %along = arith.muli %pos#1, %c2 : index
  %other = arith.muli %pos#0, %c2 : index
  %r = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<8x64xf32> -> tensor<8x64xf32>
  %s = tensor.extract_slice %r[%along, 0] [2, 64] [1, 1] : tensor<8x64xf32> to tensor<2x64xf32>
  %r2 = dist.all_reduce %q on @g axes = [1] reduce = sum : tensor<8x64xf32> -> tensor<8x64xf32>
  %s2 = tensor.extract_slice %r2[%other, 0] [2, 64] [1, 1] : tensor<8x64xf32> to tensor<2x64xf32>
  return %s, %s2 : tensor<2x64xf32>, tensor<2x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
#id = affine_map<(t, h) -> (t, h)>
shard.grid @tp(shape = 4)
// Payloads that are not linear in the sum although each op looks so from
// its operands: the sum as a divisor, the sum read inside a region (an
// scf.if choosing it or a weight, then multiplied by it: a square). A
// parallel generic that adds its zero init is linear, and moves along. A
// cast to bf16 after an f32 sum halves the bytes, but the sum stays in
// f32 (every bf16 tensor-parallel projection is so).
// CHECK-LABEL: func.func @payloads
// CHECK: dist.all_reduce %{{.*}} : tensor<8x16x64xf32>
// CHECK: dist.all_reduce %{{.*}} : tensor<8x16x64xf32>
// CHECK: dist.all_reduce %{{.*}} : tensor<16x64xf32>
// CHECK-NEXT: %[[S:.*]] = dist.all_reduce %{{.*}} : tensor<16x64xf32> -> tensor<16x64xf32>
// CHECK: ins(%[[S]] : tensor<16x64xf32>)
// CHECK: arith.truncf
// CHECK: return
// REMARK: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 4.0 KiB instead of 32.0 KiB
// REMARK-NOT: remark
func.func @payloads(
    %p: tensor<8x16x64xf32>, %small: tensor<16x64xf32>, %flag: i1,
    %weights: tensor<8x16xf32> {dist.placement = #dist.placement<@tp, [replicate]>})
    -> (tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<16x64xf32>, tensor<16x64xbf16>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16x64xf32>
  %ze = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
  %o = tensor.empty() : tensor<16x64xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r0 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %d = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r0, %weights : tensor<8x16x64xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %q = arith.divf %b, %a : f32
    linalg.yield %q : f32
  } -> tensor<8x16x64xf32>
  %r1 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %s = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r1, %weights : tensor<8x16x64xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %v = scf.if %flag -> f32 {
      scf.yield %a : f32
    } else {
      scf.yield %b : f32
    }
    %m = arith.mulf %a, %v : f32
    linalg.yield %m : f32
  } -> tensor<8x16x64xf32>
  %r2 = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %plus = linalg.generic {indexing_maps = [#e3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r2 : tensor<8x16x64xf32>) outs(%ze : tensor<8x16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.addf %a, %out : f32
    linalg.yield %n : f32
  } -> tensor<8x16x64xf32>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%plus : tensor<8x16x64xf32>) outs(%zeros : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %n = arith.addf %a, %out : f32
    linalg.yield %n : f32
  } -> tensor<16x64xf32>
  %r3 = dist.all_reduce %small on @tp axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %ob = tensor.empty() : tensor<16x64xbf16>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r3 : tensor<16x64xf32>) outs(%ob : tensor<16x64xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %n = arith.truncf %a : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<16x64xbf16>
  return %d, %s, %c, %t : tensor<8x16x64xf32>, tensor<8x16x64xf32>, tensor<16x64xf32>, tensor<16x64xbf16>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
shard.grid @h(shape = 2x2)
// The sum stays out of a branch (it would run on the ranks that take it);
// a dynamic shape is not weighed. Merges need one grid, disjoint axes, an
// inner sum read only by the outer one, in one block.
// CHECK-LABEL: func.func @blocks_and_merges
// CHECK: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<8x16x64xf32>
// CHECK: scf.if
// CHECK: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<?x64xf32>
// CHECK: %[[A:.*]] = dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<16x64xf32>
// CHECK: dist.all_reduce %[[A]] on @g axes = [0, 1] reduce = sum
// CHECK: %[[B:.*]] = dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<16x64xf32>
// CHECK: dist.all_reduce %[[B]] on @h axes = [1] reduce = sum
// CHECK: %[[C:.*]] = dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<16x64xf32>
// CHECK: dist.all_reduce %[[C]] on @g axes = [1] reduce = sum
// CHECK: %[[D:.*]] = dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<16x64xf32>
// CHECK: scf.if
// CHECK: dist.all_reduce %[[D]] on @g axes = [1] reduce = sum
// REMARK-NOT: remark
func.func @blocks_and_merges(%p: tensor<8x16x64xf32>, %q: tensor<16x64xf32>,
                             %dyn: tensor<?x64xf32>, %flag: i1)
    -> (tensor<16x64xf32>, tensor<?x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %o = tensor.empty() : tensor<16x64xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.all_reduce %p on @g axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %c = scf.if %flag -> tensor<16x64xf32> {
    %s = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
        ins(%r : tensor<8x16x64xf32>) outs(%zeros : tensor<16x64xf32>) {
    ^bb0(%a: f32, %out: f32):
      %n = arith.addf %a, %out : f32
      linalg.yield %n : f32
    } -> tensor<16x64xf32>
    scf.yield %s : tensor<16x64xf32>
  } else {
    scf.yield %zeros : tensor<16x64xf32>
  }
  %rd = dist.all_reduce %dyn on @g axes = [0] reduce = sum : tensor<?x64xf32> -> tensor<?x64xf32>
  %a1 = dist.all_reduce %q on @g axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %a2 = dist.all_reduce %a1 on @g axes = [0, 1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %b1 = dist.all_reduce %q on @g axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %b2 = dist.all_reduce %b1 on @h axes = [1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %c1 = dist.all_reduce %q on @g axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %c2 = dist.all_reduce %c1 on @g axes = [1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %d1 = dist.all_reduce %q on @g axes = [0] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
  %d2 = scf.if %flag -> tensor<16x64xf32> {
    %x = dist.all_reduce %d1 on @g axes = [1] reduce = sum : tensor<16x64xf32> -> tensor<16x64xf32>
    scf.yield %x : tensor<16x64xf32>
  } else {
    scf.yield %zeros : tensor<16x64xf32>
  }
  return %c, %rd, %a2, %b2, %c1, %c2, %d2 : tensor<16x64xf32>, tensor<?x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
// A process index query without axes gives every axis's position: the
// one along axis 0 is the same along axis 1.
// CHECK-LABEL: func.func @all_positions
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<16x64xf32>
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 4.0 KiB instead of 16.0 KiB
func.func @all_positions(
    %p: tensor<4x16x64xf32>,
    %weights: tensor<8x16xf32> {dist.placement = #dist.placement<@g, [replicate, replicate]>})
    -> tensor<16x64xf32> {
  %zero = arith.constant 0.0 : f32
  %c4 = arith.constant 4 : index
  %pos:2 = shard.process_multi_index on @g : index, index
  %off = arith.muli %pos#0, %c4 : index
  %mine = tensor.extract_slice %weights[%off, 0] [4, 16] [1, 1] : tensor<8x16xf32> to tensor<4x16xf32>
  %e = tensor.empty() : tensor<4x16x64xf32>
  %o = tensor.empty() : tensor<16x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<4x16x64xf32> -> tensor<4x16x64xf32>
  %w = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %mine : tensor<4x16x64xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x16x64xf32>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w : tensor<4x16x64xf32>) outs(%init : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %c : tensor<16x64xf32>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @tp(shape = 4)
// An f32 sum cast to bf16 and then summed over the experts: the narrower
// point sums away elements too, so the sum moves there (in bf16, as the
// module's own tensor parallelism sums a bf16 combine), not to the cast.
// CHECK-LABEL: func.func @narrower_and_fewer
// CHECK: arith.truncf
// CHECK: %[[C:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<16x64xbf16>)
// CHECK: dist.all_reduce %[[C]] on @tp axes = [0] reduce = sum : tensor<16x64xbf16>
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 2.0 KiB instead of 32.0 KiB
func.func @narrower_and_fewer(%p: tensor<8x16x64xf32>) -> tensor<16x64xbf16> {
  %zero = arith.constant 0.0 : bf16
  %e = tensor.empty() : tensor<8x16x64xbf16>
  %o = tensor.empty() : tensor<16x64xbf16>
  %zeros = linalg.fill ins(%zero : bf16) outs(%o : tensor<16x64xbf16>) -> tensor<16x64xbf16>
  %r = dist.all_reduce %p on @tp axes = [0] reduce = sum : tensor<8x16x64xf32> -> tensor<8x16x64xf32>
  %t = linalg.generic {indexing_maps = [#e3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r : tensor<8x16x64xf32>) outs(%e : tensor<8x16x64xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %n = arith.truncf %a : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<8x16x64xbf16>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%t : tensor<8x16x64xbf16>) outs(%zeros : tensor<16x64xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %n = arith.addf %a, %out : bf16
    linalg.yield %n : bf16
  } -> tensor<16x64xbf16>
  return %c : tensor<16x64xbf16>
}

// -----

#e3 = affine_map<(e, t, h) -> (e, t, h)>
#w3 = affine_map<(e, t, h) -> (e, t)>
#sum = affine_map<(e, t, h) -> (t, h)>
shard.grid @g(shape = 2x2)
// Routing weights computed from a sum over the other axis (a second
// layer's router reads the first layer's output, summed over the expert
// axis) are alike along the reduced axis when what was summed is; from a
// value that differs along it (an argument without a placement) they are
// not.
// CHECK-LABEL: func.func @weights_after_a_sum
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<16x64xf32>
// CHECK: dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<4x16x64xf32>
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:8: remark: all_reduce moved after the 2 ops of linear work on its sum: sums 4.0 KiB instead of 16.0 KiB
// REMARK: sink-all-reduce.mlir:{{[0-9]+}}:9: remark: all_reduce not moved past the linear work on its sum: argument #2 has no placement 'replicate' along grid axis 1
func.func @weights_after_a_sum(
    %p: tensor<4x16x64xf32>,
    %weights: tensor<4x16xf32> {dist.placement = #dist.placement<@g, [replicate, replicate]>},
    %other: tensor<4x16xf32>)
    -> (tensor<16x64xf32>, tensor<16x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %summed = dist.all_reduce %weights on @g axes = [0] reduce = sum : tensor<4x16xf32> -> tensor<4x16xf32>
  %unknown = dist.all_reduce %other on @g axes = [0] reduce = sum : tensor<4x16xf32> -> tensor<4x16xf32>
  %e = tensor.empty() : tensor<4x16x64xf32>
  %o = tensor.empty() : tensor<16x64xf32>
  %init = linalg.fill ins(%zero : f32) outs(%o : tensor<16x64xf32>) -> tensor<16x64xf32>
  %r = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<4x16x64xf32> -> tensor<4x16x64xf32>
  %w = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %summed : tensor<4x16x64xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x16x64xf32>
  %c = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w : tensor<4x16x64xf32>) outs(%init : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  %r2 = dist.all_reduce %p on @g axes = [1] reduce = sum : tensor<4x16x64xf32> -> tensor<4x16x64xf32>
  %w2 = linalg.generic {indexing_maps = [#e3, #w3, #e3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r2, %unknown : tensor<4x16x64xf32>, tensor<4x16xf32>) outs(%e : tensor<4x16x64xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4x16x64xf32>
  %c2 = linalg.generic {indexing_maps = [#e3, #sum], iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%w2 : tensor<4x16x64xf32>) outs(%init : tensor<16x64xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<16x64xf32>
  return %c, %c2 : tensor<16x64xf32>, tensor<16x64xf32>
}
