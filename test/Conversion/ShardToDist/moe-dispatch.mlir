// Expert dispatch under sequence parallelism: rows computed per rank's
// tokens as [groups, experts, capacity, hidden], transposed to
// [experts, groups, capacity, hidden] and collapsed for the experts'
// batch matmul (Braid's export of HuggingFace experts with a capacity per
// rank's tokens). The plan annotates the transpose's input split along the
// groups and reads it split along the experts, and marks the function to
// propagate forward first: the reshard there is one all-to-all.
// RUN: braid-opt %s --split-input-file --braid-apply-parallel-plan | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-apply-parallel-plan --braid-import-shard | FileCheck %s --check-prefix=DIST

shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @dispatch(
// CHECK-SAME: attributes {braid.propagate_forward_first}
// CHECK: %[[B:.*]] = linalg.generic
// CHECK: %[[GROUPS:.*]] = shard.sharding @g split_axes = {{\[\[}}0]]
// CHECK: %[[MINE:.*]] = shard.shard %[[B]] to %[[GROUPS]] : tensor<2x4x4x16xf32>
// CHECK: %[[EXPERTS:.*]] = shard.sharding @g split_axes = {{\[\[}}], [0]]
// CHECK: %[[READ:.*]] = shard.shard %[[MINE]] to %[[EXPERTS]] annotate_for_users
// CHECK: linalg.transpose ins(%[[READ]]
// DIST-LABEL: func.func @dispatch(
// DIST: dist.all_to_all %{{.*}} on @g axes = [0] split_dim = 1 concat_dim = 0 : tensor<1x4x4x16xf32> -> tensor<2x2x4x16xf32>
// DIST-NOT: dist.all_gather
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x8x16xf32>
func.func @dispatch(%x: tensor<1x8x16xf32> {braid.parallel = "sequence"},
                    %w: tensor<4x16x16xf32> {braid.parallel = "experts"})
    -> (tensor<4x8x16xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x8x16xf32> into tensor<8x16xf32>
  %xg = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %eb = tensor.empty() : tensor<2x4x4x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(g, e, c, h) -> (g, c, h)>, affine_map<(g, e, c, h) -> (g, e, c, h)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%xg : tensor<2x4x16xf32>) outs(%eb : tensor<2x4x4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x4x4x16xf32>
  %et = tensor.empty() : tensor<4x2x4x16xf32>
  %t = linalg.transpose ins(%b : tensor<2x4x4x16xf32>) outs(%et : tensor<4x2x4x16xf32>) permutation = [1, 0, 2, 3]
  %rows = tensor.collapse_shape %t [[0], [1, 2], [3]] : tensor<4x2x4x16xf32> into tensor<4x8x16xf32>
  %ew = tensor.empty() : tensor<4x16x16xf32>
  %wt = linalg.transpose ins(%w : tensor<4x16x16xf32>) outs(%ew : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%rows, %wt : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}

// -----

// Replicated tokens: the rows are not per rank; nothing changes (the
// experts' rows are computed on every rank from the whole tokens).
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @replicated(
// CHECK-NOT: braid.propagate_forward_first
// CHECK: linalg.transpose ins(%{{[^ ]*}} : tensor<2x4x4x16xf32>)
// DIST-LABEL: func.func @replicated(
// DIST-NOT: dist.all_to_all
func.func @replicated(%x: tensor<1x8x16xf32> {braid.parallel = "replicate"},
                      %w: tensor<4x16x16xf32> {braid.parallel = "experts"})
    -> (tensor<4x8x16xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x8x16xf32> into tensor<8x16xf32>
  %xg = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 4, 16] : tensor<8x16xf32> into tensor<2x4x16xf32>
  %eb = tensor.empty() : tensor<2x4x4x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(g, e, c, h) -> (g, c, h)>, affine_map<(g, e, c, h) -> (g, e, c, h)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%xg : tensor<2x4x16xf32>) outs(%eb : tensor<2x4x4x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x4x4x16xf32>
  %et = tensor.empty() : tensor<4x2x4x16xf32>
  %t = linalg.transpose ins(%b : tensor<2x4x4x16xf32>) outs(%et : tensor<4x2x4x16xf32>) permutation = [1, 0, 2, 3]
  %rows = tensor.collapse_shape %t [[0], [1, 2], [3]] : tensor<4x2x4x16xf32> into tensor<4x8x16xf32>
  %ew = tensor.empty() : tensor<4x16x16xf32>
  %wt = linalg.transpose ins(%w : tensor<4x16x16xf32>) outs(%ew : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%rows, %wt : tensor<4x8x16xf32>, tensor<4x16x16xf32>) outs(%f : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %y : tensor<4x8x16xf32>
}

// -----

// A capacity of one row: the export's reshape collapses the unit capacity
// with the features ([[0], [1], [2, 3]]), and the rows are the groups
// alone; the same reshard.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @one_row(
// CHECK-SAME: attributes {braid.propagate_forward_first}
// DIST-LABEL: func.func @one_row(
// DIST: dist.all_to_all %{{.*}} on @g axes = [0] split_dim = 1 concat_dim = 0 : tensor<1x4x1x16xf32> -> tensor<2x2x1x16xf32>
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x2x16xf32>
func.func @one_row(%x: tensor<1x2x16xf32> {braid.parallel = "sequence"},
                   %w: tensor<4x16x16xf32> {braid.parallel = "experts"})
    -> (tensor<4x2x16xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x2x16xf32> into tensor<2x16xf32>
  %xg = tensor.expand_shape %c [[0, 1], [2]] output_shape [2, 1, 16] : tensor<2x16xf32> into tensor<2x1x16xf32>
  %eb = tensor.empty() : tensor<2x4x1x16xf32>
  %b = linalg.generic {indexing_maps = [affine_map<(g, e, c, h) -> (g, c, h)>, affine_map<(g, e, c, h) -> (g, e, c, h)>],
                       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%xg : tensor<2x1x16xf32>) outs(%eb : tensor<2x4x1x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x4x1x16xf32>
  %et = tensor.empty() : tensor<4x2x1x16xf32>
  %t = linalg.transpose ins(%b : tensor<2x4x1x16xf32>) outs(%et : tensor<4x2x1x16xf32>) permutation = [1, 0, 2, 3]
  %rows = tensor.collapse_shape %t [[0], [1], [2, 3]] : tensor<4x2x1x16xf32> into tensor<4x2x16xf32>
  %ew = tensor.empty() : tensor<4x16x16xf32>
  %wt = linalg.transpose ins(%w : tensor<4x16x16xf32>) outs(%ew : tensor<4x16x16xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x2x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  %y = linalg.batch_matmul ins(%rows, %wt : tensor<4x2x16xf32>, tensor<4x16x16xf32>) outs(%f : tensor<4x2x16xf32>) -> tensor<4x2x16xf32>
  return %y : tensor<4x2x16xf32>
}
