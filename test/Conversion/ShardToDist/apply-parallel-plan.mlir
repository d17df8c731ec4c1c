// A per-weight plan (PyTorch's colwise/rowwise, DTensor layouts) becomes
// shard annotations; import then partitions as Megatron-LM would.
// RUN: braid-opt %s --split-input-file --braid-apply-parallel-plan | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-apply-parallel-plan --braid-import-shard | FileCheck %s --check-prefix=DIST

shard.grid @tp(shape = 4)

// Torch's [out, in] weights reach the matmuls through linalg.transpose.
// CHECK-LABEL: func.func @mlp(
// CHECK-SAME: %[[X:[^:]*]]: tensor<16x64xf32>, %[[UP:[^:]*]]: tensor<256x64xf32>, %[[BIAS:[^:]*]]: tensor<256xf32>, %[[DOWN:[^:]*]]: tensor<64x256xf32>)
// CHECK-NOT: braid.parallel
// The split dimensions show in the partitioned shapes (DIST below).
// CHECK-DAG: shard.shard %[[DOWN]] to %{{.*}} annotate_for_users : tensor<64x256xf32>
// CHECK-DAG: shard.shard %[[UP]] to %{{.*}} annotate_for_users : tensor<256x64xf32>
// CHECK-DAG: shard.shard %[[BIAS]] to %{{.*}} annotate_for_users : tensor<256xf32>
// An activation's layout is how it arrives, not what its users must take.
// CHECK-DAG: shard.shard %[[X]] to %{{.*}} : tensor<16x64xf32>
// CHECK: %[[H:.*]] = linalg.matmul
// CHECK: %[[COLS:.*]] = shard.sharding @tp split_axes = {{\[}}[], [0]] : !shard.sharding
// CHECK: shard.shard %[[H]] to %[[COLS]] : tensor<16x256xf32>
// CHECK: %[[Y:.*]] = linalg.matmul
// CHECK: %[[REP:.*]] = shard.sharding @tp split_axes = {{\[}}[]] : !shard.sharding
// CHECK: shard.shard %[[Y]] to %[[REP]] : tensor<16x64xf32>

// DIST-LABEL: func.func @mlp(
// The plan's layouts become the partitioned arguments' placements.
// DIST-SAME: tensor<16x64xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
// DIST-SAME: %{{.*}}: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>},
// DIST-SAME: %{{.*}}: tensor<64xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>},
// DIST-SAME: %{{.*}}: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>})
// DIST-NOT: dist.all_gather
// DIST: dist.all_reduce
// DIST-NOT: dist.all_gather
// DIST: return
#bias = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @mlp(%x: tensor<16x64xf32> {braid.parallel = "replicate"},
               %up: tensor<256x64xf32> {braid.parallel = "colwise"},
               %b: tensor<256xf32> {braid.parallel = "colwise"},
               %down: tensor<64x256xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x256xf32>
  %upt = linalg.transpose ins(%up : tensor<256x64xf32>) outs(%e0 : tensor<64x256xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<16x256xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %upt : tensor<16x64xf32>, tensor<64x256xf32>) outs(%f1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %hb = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%h, %b : tensor<16x256xf32>, tensor<256xf32>) outs(%e1 : tensor<16x256xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<256x64xf32>
  %downt = linalg.transpose ins(%down : tensor<64x256xf32>) outs(%e2 : tensor<256x64xf32>) permutation = [1, 0]
  %e3 = tensor.empty() : tensor<16x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%hb, %downt : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Sequence parallelism, [in, out] weights, the grid named by braid.grid and
// the second axis of a 2-D grid: all-gather before, reduce-scatter after.
shard.grid @other(shape = 3)
shard.grid @g2(shape = 2x4)

// CHECK-LABEL: func.func @sp(
// CHECK-NOT: braid.grid
// CHECK: shard.sharding @g2 split_axes = {{\[}}[1]] : !shard.sharding
// DIST-LABEL: func.func @sp(
// DIST-SAME: %{{.*}}: tensor<4x64xf32> {dist.placement = #dist.placement<@g2, [replicate, shard<0>]>},
// DIST-SAME: %{{.*}}: tensor<64x32xf32> {dist.placement = #dist.placement<@g2, [replicate, shard<1>]>},
// DIST-SAME: %{{.*}}: tensor<32x64xf32> {dist.placement = #dist.placement<@g2, [replicate, shard<0>]>})
// DIST-SAME: -> (tensor<4x64xf32> {dist.placement = #dist.placement<@g2, [replicate, shard<0>]>})
// DIST: dist.all_gather %{{.*}} on @g2 axes = [1] dim = 0 : tensor<4x64xf32> -> tensor<16x64xf32>
// DIST: linalg.matmul
// DIST: linalg.matmul
// DIST: dist.reduce_scatter %{{.*}} on @g2 axes = [1] dim = 0 reduce = sum : tensor<16x64xf32> -> tensor<4x64xf32>
// DIST-NOT: dist.all_reduce
func.func @sp(%x: tensor<16x64xf32> {braid.parallel = "sequence"},
              %w1: tensor<64x128xf32> {braid.parallel = "colwise"},
              %w2: tensor<128x64xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "sequence"})
    attributes {braid.grid = @g2, braid.grid_axis = 1 : i64} {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x128xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Without a plan nothing changes.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @untouched(
// CHECK-NOT: shard.shard
func.func @untouched(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// colwise_gather (HuggingFace's colwise_gather_output): split by output
// features, then the output gathered for what follows.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @gather_output(
// DIST-LABEL: func.func @gather_output(
// DIST: %[[H:.*]] = linalg.matmul {{.*}} -> tensor<8x32xf32>
// DIST: dist.all_gather %[[H]] on @g axes = [0] dim = 1 : tensor<8x32xf32> -> tensor<8x64xf32>
func.func @gather_output(%x: tensor<8x16xf32> {braid.parallel = "replicate"},
                         %w: tensor<16x64xf32> {braid.parallel = "colwise_gather"})
    -> (tensor<8x64xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  %h = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %h : tensor<8x64xf32>
}

// -----

// Experts (HuggingFace's grouped_gemm): [experts, out, in] weights split by
// experts; the batch matmul over experts computes each rank's, and the sum
// over experts that follows is a partial sum, all-reduced.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @experts(
// CHECK: linalg.batch_matmul
// CHECK: shard.sharding @g split_axes = {{\[}}[0]] : !shard.sharding
// DIST-LABEL: func.func @experts(
// DIST-SAME: tensor<2x8x16xf32> {dist.placement = #dist.placement<@g, [shard<0>]>}
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x8x8xf32>
// DIST: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
func.func @experts(%x: tensor<4x8x16xf32> {braid.parallel = "replicate"},
                   %w: tensor<4x8x16xf32> {braid.parallel = "experts"})
    -> (tensor<8x8xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<4x16x8xf32>
  %wt = linalg.transpose ins(%w : tensor<4x8x16xf32>) outs(%et : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %y = linalg.batch_matmul ins(%x, %wt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t, h)>, affine_map<(e, t, h) -> (t, h)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%y : tensor<4x8x8xf32>) outs(%f2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// The capacity export's combine: each token's row gathered within each
// expert (a generic whose body reads the experts' outputs at its own loop
// index along the experts, and a row from an index tensor), weighed and
// summed over the experts. The gather is annotated split along that loop;
// the import keeps it reading the rank's own block of the outputs at a
// local index (no gather of the outputs, no offset), and the sum over the
// experts is a partial sum, all-reduced.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @gather_in_experts(
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: tensor.extract
// CHECK: shard.shard %[[G]] to %{{.*}} : tensor<4x8x8xf32>
// DIST-LABEL: func.func @gather_in_experts(
// DIST-NOT: dist.all_gather
// DIST: %[[Y:.*]] = linalg.batch_matmul {{.*}} -> tensor<2x6x8xf32>
// DIST: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x8x8xf32>)
// DIST-NOT: shard.process_multi_index
// DIST: %[[E:.*]] = linalg.index 0 : index
// DIST-NOT: braid.local_index
// DIST: tensor.extract %[[Y]][%[[E]], %{{.*}}, %{{.*}}] : tensor<2x6x8xf32>
// DIST: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
func.func @gather_in_experts(%x: tensor<4x6x16xf32> {braid.parallel = "replicate"},
                             %w: tensor<4x8x16xf32> {braid.parallel = "experts"},
                             %rows: tensor<4x8xindex> {braid.parallel = "replicate"},
                             %weights: tensor<4x8xf32> {braid.parallel = "replicate"})
    -> (tensor<8x8xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<4x16x8xf32>
  %wt = linalg.transpose ins(%w : tensor<4x8x16xf32>) outs(%et : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x6x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  %y = linalg.batch_matmul ins(%x, %wt : tensor<4x6x16xf32>, tensor<4x16x8xf32>) outs(%f : tensor<4x6x8xf32>) -> tensor<4x6x8xf32>
  %eg = tensor.empty() : tensor<4x8x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t)>, affine_map<(e, t, h) -> (e, t, h)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%rows : tensor<4x8xindex>) outs(%eg : tensor<4x8x8xf32>) {
  ^bb0(%row: index, %o: f32):
    %ie = linalg.index 0 : index
    %ih = linalg.index 2 : index
    %v = tensor.extract %y[%ie, %row, %ih] : tensor<4x6x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t, h)>, affine_map<(e, t, h) -> (e, t)>, affine_map<(e, t, h) -> (t, h)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%g, %weights : tensor<4x8x8xf32>, tensor<4x8xf32>) outs(%f2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %r = arith.addf %m, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// An expert bias (gpt-oss: [experts, out], added to each expert's product,
// its unsqueeze folded into the add's map by braid-prepare-import) reaches
// no contraction itself: the elementwise add that keeps its expert
// dimension holds this rank's experts, like the product it adds to.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @expert_bias(
// DIST-LABEL: func.func @expert_bias(
// DIST-SAME: tensor<2x8x16xf32> {dist.placement = #dist.placement<@g, [shard<0>]>}
// DIST-SAME: tensor<2x8xf32> {dist.placement = #dist.placement<@g, [shard<0>]>}
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x8x8xf32>
// DIST: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<2x8x8xf32>, tensor<2x8xf32>)
// DIST: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<8x8xf32> -> tensor<8x8xf32>
func.func @expert_bias(%x: tensor<4x8x16xf32> {braid.parallel = "replicate"},
                       %w: tensor<4x8x16xf32> {braid.parallel = "experts"},
                       %b: tensor<4x8xf32> {braid.parallel = "experts"})
    -> (tensor<8x8xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<4x16x8xf32>
  %wt = linalg.transpose ins(%w : tensor<4x8x16xf32>) outs(%et : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %y = linalg.batch_matmul ins(%x, %wt : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %yb = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t, h)>, affine_map<(e, t, h) -> (e, h)>, affine_map<(e, t, h) -> (e, t, h)>],
                        iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%y, %b : tensor<4x8x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %r = arith.addf %a, %c : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t, h)>, affine_map<(e, t, h) -> (t, h)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%yb : tensor<4x8x8xf32>) outs(%f2 : tensor<8x8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}

// -----

// packed_colwise (HuggingFace's [gate; up] layout): each part split
// separately. The parts are taken apart by an expand_shape, which the plan
// marks braid.packed: its sharding model splits each part's features.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @packed(
// CHECK: tensor.expand_shape {{.*}} {braid.packed}
// DIST-LABEL: func.func @packed(
// DIST-SAME: tensor<32x16xf32> {dist.placement = #dist.placement<@g, [shard<0>]>}
// DIST-NOT: = dist.
// DIST: tensor.expand_shape %{{.*}} {{\[}}[0, 1], [2]] output_shape [2, 16, 16] : tensor<32x16xf32> into tensor<2x16x16xf32>
// DIST: tensor.extract_slice %{{.*}}[0, 0, 0] [1, 16, 16] [1, 1, 1] : tensor<2x16x16xf32> to tensor<16x16xf32>
// DIST: tensor.extract_slice %{{.*}}[1, 0, 0] [1, 16, 16] [1, 1, 1] : tensor<2x16x16xf32> to tensor<16x16xf32>
// DIST-NOT: = dist.
// DIST: return
func.func @packed(%w: tensor<64x16xf32> {braid.parallel = "packed_colwise"})
    -> (tensor<32x16xf32> {braid.parallel = "sequence"}, tensor<32x16xf32> {braid.parallel = "sequence"}) {
  %parts = tensor.expand_shape %w [[0, 1], [2]] output_shape [2, 32, 16] : tensor<64x16xf32> into tensor<2x32x16xf32>
  %gate = tensor.extract_slice %parts[0, 0, 0] [1, 32, 16] [1, 1, 1] : tensor<2x32x16xf32> to tensor<32x16xf32>
  %up = tensor.extract_slice %parts[1, 0, 0] [1, 32, 16] [1, 1, 1] : tensor<2x32x16xf32> to tensor<32x16xf32>
  return %gate, %up : tensor<32x16xf32>, tensor<32x16xf32>
}

// -----

// Sequence parallelism over one sequence: the rowwise result is split along
// its tokens (the reduction a reduce-scatter whatever follows) and so is
// the residual add it reaches through the reshape, so that the replicated
// activation of a later colwise layer does not pull the residual stream
// whole (upstream's propagation runs backward first).
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @residual(
// CHECK: %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<8x32xf32>, tensor<32x16xf32>)
// CHECK: %[[REP:.*]] = shard.sharding @g split_axes = {{\[}}[]] : !shard.sharding
// CHECK: %[[R:.*]] = shard.shard %[[Y]] to %[[REP]] : tensor<8x16xf32>
// CHECK: %[[TOK:.*]] = shard.sharding @g split_axes = {{\[}}[0]] : !shard.sharding
// CHECK: %[[T:.*]] = shard.shard %[[R]] to %[[TOK]] annotate_for_users : tensor<8x16xf32>
// CHECK: %[[U:.*]] = tensor.expand_shape %[[T]]
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[U]] :
// CHECK: %[[SEQ:.*]] = shard.sharding @g split_axes = {{\[}}[], [0]] : !shard.sharding
// CHECK: shard.shard %[[SUM]] to %[[SEQ]] : tensor<1x8x16xf32>
// DIST-LABEL: func.func @residual(
// DIST: dist.all_gather %{{.*}} dim = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
// DIST: dist.reduce_scatter %{{.*}} dim = 0 reduce = sum : tensor<8x16xf32> -> tensor<4x16xf32>
// DIST: %[[SUM:.*]] = linalg.generic
// DIST: } -> tensor<1x4x16xf32>
// DIST-NEXT: dist.all_gather %[[SUM]] {{.*}} dim = 1 : tensor<1x4x16xf32> -> tensor<1x8x16xf32>
// DIST-NEXT: return
func.func @residual(%x: tensor<1x8x16xf32> {braid.parallel = "sequence"},
                    %up: tensor<16x32xf32> {braid.parallel = "colwise"},
                    %down: tensor<32x16xf32> {braid.parallel = "rowwise"})
    -> (tensor<1x8x16xf32> {braid.parallel = "replicate"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<1x8x16xf32> into tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %h = linalg.matmul ins(%c, %up : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f1 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %y = linalg.matmul ins(%h, %down : tensor<8x32xf32>, tensor<32x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %u = tensor.expand_shape %y [[0, 1], [2]] output_shape [1, 8, 16] : tensor<8x16xf32> into tensor<1x8x16xf32>
  %e3 = tensor.empty() : tensor<1x8x16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %u : tensor<1x8x16xf32>, tensor<1x8x16xf32>) outs(%e3 : tensor<1x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x8x16xf32>
  return %sum : tensor<1x8x16xf32>
}

// -----

// With a batch of two the tokens are not the sequence: the rowwise result
// is only reduced (docs/rationale/import.md,
// "Sequence parallelism keeps the residual stream split").
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @batch_two(
// CHECK: %[[Y:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<16x32xf32>, tensor<32x16xf32>)
// CHECK: %[[R:.*]] = shard.shard %[[Y]] to %{{.*}} : tensor<16x16xf32>
// CHECK-NEXT: tensor.expand_shape %[[R]]
func.func @batch_two(%x: tensor<2x8x16xf32> {braid.parallel = "sequence"},
                     %up: tensor<16x32xf32> {braid.parallel = "colwise"},
                     %down: tensor<32x16xf32> {braid.parallel = "rowwise"})
    -> (tensor<2x8x16xf32> {braid.parallel = "sequence"}) {
  %zero = arith.constant 0.0 : f32
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x8x16xf32> into tensor<16x16xf32>
  %e1 = tensor.empty() : tensor<16x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %h = linalg.matmul ins(%c, %up : tensor<16x16xf32>, tensor<16x32xf32>) outs(%f1 : tensor<16x32xf32>) -> tensor<16x32xf32>
  %e2 = tensor.empty() : tensor<16x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %y = linalg.matmul ins(%h, %down : tensor<16x32xf32>, tensor<32x16xf32>) outs(%f2 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %u = tensor.expand_shape %y [[0, 1], [2]] output_shape [2, 8, 16] : tensor<16x16xf32> into tensor<2x8x16xf32>
  return %u : tensor<2x8x16xf32>
}

// -----

// Token ids, masks and positions ([batch, seq], integers or booleans) split
// along their last dimension, the sequence; activations along the second to
// last, and an integer activation of rank 3 too (a quantized [batch, seq,
// hidden]). One sequence: the tokens are the sequence.
shard.grid @g(shape = 2)
// CHECK-LABEL: func.func @token_ids(
// CHECK: shard.sharding @g split_axes = {{\[\[\], \[0\]\]}}
// CHECK-NEXT: shard.shard %arg3 to
// CHECK: shard.sharding @g split_axes = {{\[\[0\]\]}}
// CHECK-NEXT: shard.shard %arg2 to
// CHECK: shard.sharding @g split_axes = {{\[\[\], \[0\]\]}}
// CHECK-NEXT: shard.shard %arg1 to
// CHECK: shard.sharding @g split_axes = {{\[\[\], \[0\]\]}}
// CHECK-NEXT: shard.shard %arg0 to
// DIST-LABEL: func.func @token_ids(
// DIST-SAME: tensor<1x4xi64> {dist.placement = #dist.placement<@g, [shard<1>]>}
// DIST-SAME: tensor<1x4xi1> {dist.placement = #dist.placement<@g, [shard<1>]>}
// DIST-SAME: tensor<4xi32> {dist.placement = #dist.placement<@g, [shard<0>]>}
// DIST-SAME: tensor<1x4x4xi8> {dist.placement = #dist.placement<@g, [shard<1>]>}
func.func @token_ids(%ids: tensor<1x8xi64> {braid.parallel = "sequence"},
                     %mask: tensor<1x8xi1> {braid.parallel = "sequence"},
                     %positions: tensor<8xi32> {braid.parallel = "sequence"},
                     %q: tensor<1x8x4xi8> {braid.parallel = "sequence"})
    -> (tensor<1x8xi64> {braid.parallel = "sequence"}) {
  return %ids : tensor<1x8xi64>
}

// -----

// A training step (braid.backward): the forward's contractions take the
// plan; each weight's later contractions along another dimension are its
// gradient's, split by the role the plan's dimension has there (up's split
// features are the input gradient's reduction: partial sums, all-reduced;
// down's split inputs are an output feature of its own). Each gradient is
// laid out like its weight (braid.sharded_like).
shard.grid @tp(shape = 4)

// CHECK-LABEL: func.func @mlp_step(
// CHECK-NOT: braid.backward
// CHECK-NOT: braid.sharded_like
// DIST-LABEL: func.func @mlp_step(
// DIST-SAME: %{{.*}}: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>},
// DIST-SAME: %{{.*}}: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>})
// DIST-SAME: -> (tensor<16x64xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
// DIST-SAME: tensor<16x64xf32> {dist.placement = #dist.placement<@tp, [replicate]>},
// DIST-SAME: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<0>]>},
// DIST-SAME: tensor<64x64xf32> {dist.placement = #dist.placement<@tp, [shard<1>]>})
// DIST-NOT: dist.all_gather
// DIST: dist.all_reduce
// DIST-NOT: dist.all_gather
// DIST: dist.all_reduce
// DIST-NOT: dist.all_gather
// DIST-NOT: dist.all_reduce
// DIST: return
func.func @mlp_step(%x: tensor<16x64xf32> {braid.parallel = "replicate"},
                    %dy: tensor<16x64xf32> {braid.parallel = "replicate"},
                    %up: tensor<256x64xf32> {braid.parallel = "colwise"},
                    %down: tensor<64x256xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "replicate"},
        tensor<16x64xf32> {braid.parallel = "replicate"},
        tensor<256x64xf32> {braid.sharded_like = 2 : i64},
        tensor<64x256xf32> {braid.sharded_like = 3 : i64})
    attributes {braid.backward} {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x256xf32>
  %upt = linalg.transpose ins(%up : tensor<256x64xf32>) outs(%e0 : tensor<64x256xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<16x256xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %h = linalg.matmul ins(%x, %upt : tensor<16x64xf32>, tensor<64x256xf32>) outs(%f1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e2 = tensor.empty() : tensor<256x64xf32>
  %downt = linalg.transpose ins(%down : tensor<64x256xf32>) outs(%e2 : tensor<256x64xf32>) permutation = [1, 0]
  %e3 = tensor.empty() : tensor<16x64xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %downt : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  // Backward: dh = dy down, d(down) = dy^T h, dx = dh up, d(up) = dh^T x.
  %f4 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %dh = linalg.matmul ins(%dy, %down : tensor<16x64xf32>, tensor<64x256xf32>) outs(%f4 : tensor<16x256xf32>) -> tensor<16x256xf32>
  %e5 = tensor.empty() : tensor<64x16xf32>
  %dyt = linalg.transpose ins(%dy : tensor<16x64xf32>) outs(%e5 : tensor<64x16xf32>) permutation = [1, 0]
  %e6 = tensor.empty() : tensor<64x256xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %ddown = linalg.matmul ins(%dyt, %h : tensor<64x16xf32>, tensor<16x256xf32>) outs(%f6 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %f7 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %dx = linalg.matmul ins(%dh, %up : tensor<16x256xf32>, tensor<256x64xf32>) outs(%f7 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %e8 = tensor.empty() : tensor<256x16xf32>
  %dht = linalg.transpose ins(%dh : tensor<16x256xf32>) outs(%e8 : tensor<256x16xf32>) permutation = [1, 0]
  %e9 = tensor.empty() : tensor<256x64xf32>
  %f9 = linalg.fill ins(%zero : f32) outs(%e9 : tensor<256x64xf32>) -> tensor<256x64xf32>
  %dup = linalg.matmul ins(%dht, %x : tensor<256x16xf32>, tensor<16x64xf32>) outs(%f9 : tensor<256x64xf32>) -> tensor<256x64xf32>
  return %y, %dx, %dup, %ddown : tensor<16x64xf32>, tensor<16x64xf32>, tensor<256x64xf32>, tensor<64x256xf32>
}

// -----

// Data parallelism: braid.data_axis splits the batch (the leading
// dimension) of the activations on its axis, outermost, and the plan runs
// on braid.grid_axis; weights stay replicated over the data axis. Marked
// arguments and results (braid.batch) arrive and leave batch-split; each
// row of ranks all-reduces within itself, and nothing crosses the data
// axis.
shard.grid @dp(shape = 2x2)

// CHECK-LABEL: func.func @data_parallel(
// CHECK-NOT: braid.batch
// CHECK-NOT: braid.data_axis
// CHECK: shard.sharding @dp split_axes = {{\[}}[1]] : !shard.sharding
// CHECK: shard.sharding @dp split_axes = {{\[}}[], [1]] : !shard.sharding
// CHECK: shard.sharding @dp split_axes = {{\[}}[0]] : !shard.sharding
// CHECK: shard.sharding @dp split_axes = {{\[}}[0], [1]] : !shard.sharding
// DIST-LABEL: func.func @data_parallel(
// DIST-SAME: tensor<8x64xf32> {dist.placement = #dist.placement<@dp, [shard<0>, replicate]>}
// DIST-SAME: tensor<64x64xf32> {dist.placement = #dist.placement<@dp, [replicate, shard<1>]>}
// DIST-SAME: tensor<64x64xf32> {dist.placement = #dist.placement<@dp, [replicate, shard<0>]>}
// DIST-SAME: -> (tensor<8x64xf32> {dist.placement = #dist.placement<@dp, [shard<0>, replicate]>})
// DIST-NOT: axes = [0]
// DIST: dist.all_reduce %{{.*}} on @dp axes = [1] reduce = sum : tensor<8x64xf32>
// DIST-NOT: axes = [0]
// DIST: return
func.func @data_parallel(%x: tensor<16x64xf32> {braid.parallel = "replicate", braid.batch},
                         %w1: tensor<64x128xf32> {braid.parallel = "colwise"},
                         %w2: tensor<128x64xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "replicate", braid.batch})
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64} {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x128xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// Sequence parallel rows: the tokens (dimension 0) split over the data
// axis, then within each row over the plan's, the data axis outermost
// ([[0, 1]]): each rank holds 4 of the 16 tokens, its row's 8 gathered
// before the colwise matmul and reduce-scattered after the rowwise one.
shard.grid @dp(shape = 2x2)

// CHECK-LABEL: func.func @data_sequence(
// CHECK: shard.sharding @dp split_axes = {{\[}}[0, 1]] : !shard.sharding
// DIST-LABEL: func.func @data_sequence(
// DIST-SAME: tensor<4x64xf32> {dist.placement = #dist.placement<@dp, [shard<0>, shard<0>]>}
// DIST: dist.all_gather %{{.*}} on @dp axes = [1] dim = 0 : tensor<4x64xf32> -> tensor<8x64xf32>
// DIST: dist.reduce_scatter %{{.*}} on @dp axes = [1] dim = 0 reduce = sum : tensor<8x64xf32> -> tensor<4x64xf32>
func.func @data_sequence(%x: tensor<16x64xf32> {braid.parallel = "sequence", braid.batch},
                         %w1: tensor<64x128xf32> {braid.parallel = "colwise"},
                         %w2: tensor<128x64xf32> {braid.parallel = "rowwise"})
    -> (tensor<16x64xf32> {braid.parallel = "sequence", braid.batch})
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64} {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<16x128xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<16x64xf32>, tensor<64x128xf32>) outs(%f1 : tensor<16x128xf32>) -> tensor<16x128xf32>
  %e2 = tensor.empty() : tensor<16x64xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%h, %w2 : tensor<16x128xf32>, tensor<128x64xf32>) outs(%f2 : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}

// -----

// A training step on a data axis (braid.backward): propagation runs
// forward first there (braid.propagate_forward_first, which the import
// reads and drops), so that the batch split of the inputs reaches the
// reductions over the batch, whose partial sums are all-reduced over the
// data axis (here with the plan's axis: each row's ranks hold a part of
// the features), instead of the replicated results flooding back and
// gathering the batch.
shard.grid @dp(shape = 2x2)

// CHECK-LABEL: func.func @data_parallel_step(
// CHECK-SAME: attributes {braid.propagate_forward_first}
// DIST-LABEL: func.func @data_parallel_step(
// DIST-NOT: braid.propagate_forward_first
// DIST-NOT: dist.all_gather
// DIST: dist.all_reduce %{{.*}} on @dp axes = [0, 1] reduce = sum : tensor<f32>
func.func @data_parallel_step(%x: tensor<16x64xf32> {braid.parallel = "replicate", braid.batch},
                              %w: tensor<64x64xf32> {braid.parallel = "colwise"})
    -> (tensor<f32> {braid.parallel = "replicate"})
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64, braid.backward} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %h = linalg.matmul ins(%x, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s1 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %sum = linalg.reduce ins(%h : tensor<16x64xf32>) outs(%s1 : tensor<f32>) dimensions = [0, 1]
    (%a: f32, %b: f32) {
      %r = arith.addf %a, %b : f32
      linalg.yield %r : f32
    }
  return %sum : tensor<f32>
}

// -----

// Expert parallelism beside tensor parallelism (braid.expert_axis): the
// experts of the weights marked braid.experts split over axis 0, each
// expert's features over the plan's axis 1 (a colwise up projection and a
// rowwise down projection); the batch matmuls' activations and results
// are split along the experts too, the down projection's partial sums are
// reduced over axis 1, and the sum over the experts that follows leaves
// partial sums over axis 0.
shard.grid @g(shape = 2x2)
// CHECK-LABEL: func.func @experts_and_features(
// CHECK-NOT: braid.expert_axis
// CHECK-NOT: braid.experts
// CHECK: shard.sharding @g split_axes = {{\[}}[0], [], [1]] : !shard.sharding
// CHECK: shard.sharding @g split_axes = {{\[}}[0], [1]] : !shard.sharding
// DIST-LABEL: func.func @experts_and_features(
// DIST-SAME: %{{.*}}: tensor<2x16x16xf32> {dist.placement = #dist.placement<@g, [shard<0>, shard<1>]>}
// DIST-SAME: %{{.*}}: tensor<2x16x16xf32> {dist.placement = #dist.placement<@g, [shard<0>, shard<2>]>}
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x8x16xf32>
// DIST: linalg.batch_matmul {{.*}} -> tensor<2x8x16xf32>
// DIST: dist.all_reduce %{{.*}} on @g axes = [1] reduce = sum : tensor<2x8x16xf32>
// DIST: dist.all_reduce %{{.*}} on @g axes = [0] reduce = sum : tensor<8x16xf32>
// DIST-NOT: dist.all_gather
func.func @experts_and_features(
    %x: tensor<4x8x16xf32> {braid.parallel = "replicate"},
    %up: tensor<4x32x16xf32> {braid.parallel = "colwise", braid.experts},
    %down: tensor<4x16x32xf32> {braid.parallel = "rowwise", braid.experts})
    -> (tensor<8x16xf32> {braid.parallel = "replicate"})
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64} {
  %zero = arith.constant 0.0 : f32
  %et = tensor.empty() : tensor<4x16x32xf32>
  %upt = linalg.transpose ins(%up : tensor<4x32x16xf32>) outs(%et : tensor<4x16x32xf32>) permutation = [0, 2, 1]
  %e = tensor.empty() : tensor<4x8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %h = linalg.batch_matmul ins(%x, %upt : tensor<4x8x16xf32>, tensor<4x16x32xf32>) outs(%f : tensor<4x8x32xf32>) -> tensor<4x8x32xf32>
  %edt = tensor.empty() : tensor<4x32x16xf32>
  %downt = linalg.transpose ins(%down : tensor<4x16x32xf32>) outs(%edt : tensor<4x32x16xf32>) permutation = [0, 2, 1]
  %eo = tensor.empty() : tensor<4x8x16xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %y = linalg.batch_matmul ins(%h, %downt : tensor<4x8x32xf32>, tensor<4x32x16xf32>) outs(%fo : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(e, t, h) -> (e, t, h)>, affine_map<(e, t, h) -> (t, h)>],
                       iterator_types = ["reduction", "parallel", "parallel"]}
      ins(%y : tensor<4x8x16xf32>) outs(%f2 : tensor<8x16xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}
