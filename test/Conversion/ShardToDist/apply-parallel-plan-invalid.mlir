// Plans that cannot apply are located errors.
// RUN: braid-opt %s --split-input-file --verify-diagnostics --braid-apply-parallel-plan

shard.grid @g(shape = 2)
// expected-error @+1 {{braid.parallel must be a string: colwise, colwise_gather, packed_colwise, experts, rowwise, replicate or sequence, got "diagonal"}}
func.func @unknown(%x: tensor<4x4xf32> {braid.parallel = "diagonal"}) -> tensor<4x4xf32> {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{argument #0 is rowwise but reaches no contraction (linalg.matmul and the like, through linalg.transpose); a rowwise layer's bias is replicate}}
func.func @rowwise_bias(%b: tensor<4xf32> {braid.parallel = "rowwise"}) -> tensor<4xf32> {
  return %b : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{argument #0 is colwise but reaches no contraction}}
func.func @colwise_unused(%w: tensor<4x4xf32> {braid.parallel = "colwise"}) -> tensor<4x4xf32> {
  return %w : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{argument #0 is sequence-split but has rank 1; the sequence dimension is the second to last (the last of integer ids and masks of rank 1 or 2)}}
func.func @sequence_rank1(%x: tensor<4xf32> {braid.parallel = "sequence"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

shard.grid @a(shape = 2)
shard.grid @b(shape = 2)
// expected-error @+1 {{a parallel plan needs its grid: the module has 2 shard.grid ops; name one with braid.grid = @name}}
func.func @two_grids(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32> {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{braid.grid_axis = 1 is not an axis of @g (rank 1)}}
func.func @bad_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{braid.grid names @nowhere, which is not a shard.grid}}
func.func @bad_grid(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid = @nowhere} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{result #0 cannot be sequence}}
func.func @result_rank1(%x: tensor<4xf32>) -> (tensor<4xf32> {braid.parallel = "sequence"}) {
  return %x : tensor<4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{braid.parallel must be a string: replicate or sequence, got "colwise"}}
func.func @result_colwise(%x: tensor<4x4xf32>) -> (tensor<4x4xf32> {braid.parallel = "colwise"}) {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// A packed weight must be taken apart into its parts before it is used.
func.func @packed_whole(%x: tensor<8x16xf32> {braid.parallel = "replicate"},
                        %w: tensor<16x64xf32> {braid.parallel = "packed_colwise"}) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x64xf32>) -> tensor<8x64xf32>
  // expected-error @+1 {{argument #1 is packed_colwise but is used whole here: split the packed dimension into its parts first}}
  %h = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x64xf32>) outs(%f : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %h : tensor<8x64xf32>
}

// -----

shard.grid @g(shape = 2)
// Experts need a contraction that keeps the expert dimension.
// expected-error @+1 {{argument #0 is split by experts but reaches no contraction that keeps the expert dimension}}
func.func @experts_nowhere(%w: tensor<4x8xf32> {braid.parallel = "experts"}) -> tensor<4x8xf32> {
  return %w : tensor<4x8xf32>
}

// -----

// Integer ids have their sequence last, so a scalar id has none.
shard.grid @g(shape = 2)
// expected-error @+1 {{argument #0 is sequence-split but has rank 0}}
func.func @sequence_scalar_id(%x: tensor<i64> {braid.parallel = "sequence"}) -> tensor<i64> {
  return %x : tensor<i64>
}

// -----

shard.grid @g(shape = 2)
// A gradient is laid out like an argument, which must exist.
// expected-error @+1 {{braid.sharded_like of result #0 must be an argument's number, got 3 : i64}}
func.func @like_nothing(%w: tensor<4x8xf32> {braid.parallel = "replicate"})
    -> (tensor<4x8xf32> {braid.sharded_like = 3 : i64}) {
  return %w : tensor<4x8xf32>
}

// -----

shard.grid @g(shape = 2)
// ... and have a plan of its own.
// expected-error @+1 {{result #0 is sharded like argument #1, which has no plan}}
func.func @like_unplanned(%x: tensor<4x8xf32> {braid.parallel = "replicate"}, %w: tensor<4x8xf32>)
    -> (tensor<4x8xf32> {braid.sharded_like = 1 : i64}) {
  return %w : tensor<4x8xf32>
}

// -----

shard.grid @g(shape = 2)
// ... and the result's type.
// expected-error @+1 {{result #0 has type 'tensor<8xf32>' but is sharded like an argument of type 'tensor<4x8xf32>'}}
func.func @like_other_type(%w: tensor<4x8xf32> {braid.parallel = "replicate"}, %v: tensor<8xf32>)
    -> (tensor<8xf32> {braid.sharded_like = 0 : i64}) {
  return %v : tensor<8xf32>
}

// -----

shard.grid @g(shape = 2)
// Without braid.backward, a colwise weight read along its split dimension
// as a reduction is an error, not a gradient.
// expected-error @+3 {{argument #2 feeds contractions that split it along different dimensions (a function that holds its backward is marked braid.backward)}}
func.func @no_backward(%x: tensor<8x16xf32> {braid.parallel = "replicate"},
                       %dy: tensor<8x32xf32> {braid.parallel = "replicate"},
                       %w: tensor<16x32xf32> {braid.parallel = "colwise"}) -> (tensor<8x32xf32>, tensor<8x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %y = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %e2 = tensor.empty() : tensor<32x16xf32>
  %wt = linalg.transpose ins(%w : tensor<16x32xf32>) outs(%e2 : tensor<32x16xf32>) permutation = [1, 0]
  %e3 = tensor.empty() : tensor<8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %dx = linalg.matmul ins(%dy, %wt : tensor<8x32xf32>, tensor<32x16xf32>) outs(%f3 : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y, %dx : tensor<8x32xf32>, tensor<8x16xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+1 {{braid.data_axis = 1 : i64 is not an axis of @g (rank 2) other than the plan's (1)}}
func.func @data_axis_is_plan_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 1 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{braid.data_axis = 2 : i64 is not an axis of @g (rank 1) other than the plan's (0)}}
func.func @data_axis_out_of_grid(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.data_axis = 2 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{argument #0 is marked braid.batch but the function has no braid.data_axis}}
func.func @batch_without_data_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate", braid.batch}) -> tensor<4x4xf32> {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2)
// expected-error @+1 {{result #0 is marked braid.batch but the function has no braid.data_axis}}
func.func @batch_result_without_data_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> (tensor<4x4xf32> {braid.parallel = "replicate", braid.batch}) {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is marked braid.batch but is colwise; the batch of activations (replicate or sequence) is split, weights are replicated over the data axis}}
func.func @batch_weight(%x: tensor<4x4xf32> {braid.parallel = "replicate", braid.batch},
                        %w: tensor<4x4xf32> {braid.parallel = "colwise", braid.batch}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is split by experts on a grid with a data axis, which the plan does not support (the experts' tokens are not batch-major)}}
func.func @experts_on_data_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate", braid.batch},
                                %w: tensor<4x4x4xf32> {braid.parallel = "experts"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is marked braid.experts but the function has no braid.expert_axis}}
func.func @experts_without_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"},
                                %w: tensor<4x4x4xf32> {braid.parallel = "colwise", braid.experts}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is marked braid.experts but is replicate; on a grid with an expert axis the plan splits each expert's features (colwise, packed_colwise or rowwise) and the expert axis the experts}}
func.func @replicated_experts(%x: tensor<4x4xf32> {braid.parallel = "replicate"},
                              %w: tensor<4x4x4xf32> {braid.parallel = "replicate", braid.experts}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is split by experts along the plan's axis on a grid with an expert axis; give a tensor-parallel plan there, whose expert weights the expert axis splits}}
func.func @grouped_gemm_with_expert_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"},
                                         %w: tensor<4x4x4xf32> {braid.parallel = "experts"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+1 {{braid.expert_axis = 1 : i64 is not an axis of @g (rank 2) other than the plan's and the data axis}}
func.func @expert_axis_is_plan_axis(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 1 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+1 {{braid.expert_axis on a function that holds its backward: expert parallelism beside the plan is built for inference only}}
func.func @expert_axis_backward(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64, braid.backward} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
func.func @experts_in_plain_matmul(%x: tensor<8x4xf32> {braid.parallel = "replicate"},
                                   %w: tensor<4x4xf32> {braid.parallel = "colwise", braid.experts}) -> tensor<8x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64} {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  // expected-error @+1 {{argument #1 holds experts split along the expert axis, but this contraction does not keep the expert dimension of its operands and result (a batch matmul over experts)}}
  %y = linalg.matmul ins(%x, %w : tensor<8x4xf32>, tensor<4x4xf32>) outs(%f : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

shard.grid @g(shape = 2x2x2)
// expected-error @+1 {{braid.expert_axis and braid.data_axis together are not supported: the experts' tokens are not batch-major}}
func.func @experts_and_data_axes(%x: tensor<4x4xf32> {braid.parallel = "replicate"}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64, braid.expert_axis = 2 : i64} {
  return %x : tensor<4x4xf32>
}

// -----

shard.grid @g(shape = 2x2)
// expected-error @+2 {{argument #1 is marked braid.experts but has no braid.parallel (the style that splits each expert's features)}}
func.func @experts_without_style(%x: tensor<4x4xf32> {braid.parallel = "replicate"},
                                 %w: tensor<4x4x4xf32> {braid.experts}) -> tensor<4x4xf32>
    attributes {braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64} {
  return %x : tensor<4x4xf32>
}
