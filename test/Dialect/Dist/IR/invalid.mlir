// One case per verifier rule of the dist dialect.
// RUN: braid-opt %s -split-input-file -verify-diagnostics

shard.grid @g(shape = 2x4)
func.func @elem_type(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{result element type 'f16' differs from input element type 'f32'}}
  %0 = dist.all_gather %x on @g axes = [1] dim = 0 : tensor<8x4xf32> -> tensor<32x4xf16>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @rank(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{result rank 3 differs from input rank 2}}
  %0 = dist.all_gather %x on @g axes = [1] dim = 0 : tensor<8x4xf32> -> tensor<32x4x1xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @dim_range(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{gather dimension 2 is out of range for a rank-2 tensor}}
  %0 = dist.all_gather %x on @g axes = [1] dim = 2 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @other_dims(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{result dimension 1 has size 5 but the input's has size 4}}
  %0 = dist.all_gather %x on @g axes = [1] dim = 0 : tensor<8x4xf32> -> tensor<32x5xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @gathered_size(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{gathered dimension 0 has size 16, expected 32}}
  %0 = dist.all_gather %x on @g axes = [1] dim = 0 : tensor<8x4xf32> -> tensor<16x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @negative_axis(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{grid axis -1 is negative}}
  %0 = dist.all_reduce %x on @g axes = [-1] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @duplicate_axis(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{grid axis 1 is listed twice}}
  %0 = dist.all_reduce %x on @g axes = [1, 1] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @missing_axis(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{grid axis 2 does not exist: grid @g has 2 axes}}
  %0 = dist.all_reduce %x on @g axes = [2] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// A grid axis without ranks (the group size divided by once crashed the
// verifier with SIGFPE).
shard.grid @g(shape = 2x0)
func.func @empty_grid_axis(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{grid @g: axis 1 has size 0; every grid axis needs at least one rank}}
  %0 = dist.reduce_scatter %x on @g axes = [1] dim = 0 reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

// More ranks than Braid compiles for (kMaxGridRanks), counting every axis,
// not only those of the group.
shard.grid @g(shape = 2x1048576)
func.func @too_many_ranks(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{grid @g: spans 2097152 ranks; Braid compiles for grids of at most 1048576 ranks}}
  %0 = dist.all_reduce %x on @g axes = [0] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

func.func @unknown_grid(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{refers to @nowhere, which is not a 'shard.grid'}}
  %0 = dist.all_reduce %x on @nowhere axes = [0] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @all_reduce_types(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{all of {input, result} have same type}}
  %0 = dist.all_reduce %x on @g axes = [0] reduce = sum : tensor<8x4xf32> -> tensor<8x4xf64>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @reduction_type(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{reduction 'bitand' is not defined for element type 'f32'}}
  %0 = dist.all_reduce %x on @g axes = [0] reduce = bitand : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @unknown_reduction(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{unknown reduction 'mean', expected sum, max, min, product, bitand, bitor or bitxor}}
  %0 = dist.all_reduce %x on @g axes = [0] reduce = mean : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @scatter_divisible(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{scattered dimension 0 has size 6, which is not divisible by the group size 4}}
  %0 = dist.reduce_scatter %x on @g axes = [1] dim = 0 reduce = sum : tensor<6x4xf32> -> tensor<1x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @scatter_size(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{scattered dimension 0 has size 4, expected 2}}
  %0 = dist.reduce_scatter %x on @g axes = [1] dim = 0 reduce = sum : tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @scatter_dim_range(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{scatter dimension -1 is out of range for a rank-2 tensor}}
  %0 = dist.reduce_scatter %x on @g axes = [1] dim = -1 reduce = sum : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @a2a_divisible(%x: tensor<6x4xf32>) {
  // expected-error @+1 {{split dimension 0 has size 6, which is not divisible by the group size 4}}
  %0 = dist.all_to_all %x on @g axes = [1] split_dim = 0 concat_dim = 1 : tensor<6x4xf32> -> tensor<1x16xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @a2a_split_size(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{split dimension 0 has size 8, expected 2}}
  %0 = dist.all_to_all %x on @g axes = [1] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @a2a_concat_size(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{concatenated dimension 1 has size 4, expected 16}}
  %0 = dist.all_to_all %x on @g axes = [1] split_dim = 0 concat_dim = 1 : tensor<8x4xf32> -> tensor<2x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @a2a_same_dim(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{result dimension 0 has size 16, expected 8}}
  %0 = dist.all_to_all %x on @g axes = [1] split_dim = 0 concat_dim = 0 : tensor<8x4xf32> -> tensor<16x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @a2a_concat_range(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{concat dimension 3 is out of range for a rank-2 tensor}}
  %0 = dist.all_to_all %x on @g axes = [1] split_dim = 0 concat_dim = 3 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @shift_axes(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{shifts along exactly one grid axis, got 2}}
  %0 = dist.shift %x on @g axes = [0, 1] offset = 1 : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @shift_type(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{all of {input, result} have same type}}
  %0 = dist.shift %x on @g axes = [0] offset = 1 : tensor<8x4xf32> -> tensor<4x8xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @root_count(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{root has 1 coordinates but the group spans 2 axes}}
  %0 = dist.broadcast %x on @g axes = [0, 1] root = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @root_range(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{root coordinate 4 is out of range for grid axis 1 of size 4}}
  %0 = dist.broadcast %x on @g axes = [1] root = [4] : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 2x4)
func.func @root_negative(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{root coordinate -1 is negative}}
  %0 = dist.broadcast %x on @g axes = [1] root = [-1] : tensor<8x4xf32> -> tensor<8x4xf32>
  return
}

// -----

shard.grid @g(shape = 4)
func.func @never_waited(%x: tensor<8xf32>) {
  // expected-error @+1 {{token is never waited}}
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

shard.grid @g(shape = 4)
func.func @waited_twice(%x: tensor<8xf32>) {
  // expected-error @+1 {{token is waited more than once (2 uses)}}
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %a = dist.wait %t, %f : tensor<8xf32>
  %b = dist.wait %t, %f : tensor<8xf32>
  return
}

// -----

shard.grid @g(shape = 4)
func.func @not_a_wait(%x: tensor<8xf32>) -> !dist.token {
  // expected-error @+1 {{token must be consumed by 'dist.wait', not by 'func.return'}}
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  return %t : !dist.token
}

// -----

shard.grid @g(shape = 4)
func.func @other_block(%x: tensor<8xf32>, %c: i1) -> tensor<8xf32> {
  // expected-error @+1 {{token must be waited in the block of its start}}
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %r = scf.if %c -> tensor<8xf32> {
    %w = dist.wait %t, %f : tensor<8xf32>
    scf.yield %w : tensor<8xf32>
  } else {
    scf.yield %x : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @future_used_early(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{future is used by 'arith.addf'; only its 'dist.wait' may use it}}
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  %early = arith.addf %f, %x : tensor<8xf32>
  %w = dist.wait %t, %f : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @wrong_future(%x: tensor<8xf32>) -> tensor<8xf32> {
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{future must be the second result of the start op that produced the token}}
  %w = dist.wait %t, %x : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

func.func @token_argument(%t: !dist.token, %x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{token must come directly from a 'dist.*_start' op}}
  %w = dist.wait %t, %x : tensor<8xf32>
  return %w : tensor<8xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @wait_type(%x: tensor<8xf32>) -> tensor<4xf32> {
  %t, %f = dist.all_reduce_start %x on @g axes = [0] reduce = sum : tensor<8xf32> -> tensor<8xf32>
  // expected-error @+1 {{all of {future, result} have same type}}
  %w = "dist.wait"(%t, %f) : (!dist.token, tensor<8xf32>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @start_rules(%x: tensor<6xf32>) -> tensor<1xf32> {
  // expected-error @+1 {{scattered dimension 0 has size 6, which is not divisible by the group size 4}}
  %t, %f = dist.reduce_scatter_start %x on @g axes = [0] dim = 0 reduce = sum : tensor<6xf32> -> tensor<1xf32>
  %w = dist.wait %t, %f : tensor<1xf32>
  return %w : tensor<1xf32>
}

// -----

// expected-error @+1 {{'dist.topology' may only be attached to a 'shard.grid'}}
func.func @topology_on_func() attributes {dist.topology = []} {
  return
}

// -----

// expected-error @+1 {{'dist.topology' has 1 links but the grid has 2 axes}}
shard.grid @g(shape = 2x4) {dist.topology = [#dist.link<nvlink, bandwidth = 450.0, latency = 1.0>]}

// -----

// expected-error @+1 {{'dist.topology' entry 3 : i64 is not a #dist.link}}
shard.grid @g(shape = 4) {dist.topology = [3]}

// -----

// expected-error @+1 {{'dist.topology' must be an array of #dist.link}}
shard.grid @g(shape = 4) {dist.topology = #dist.link<nvlink, bandwidth = 450.0, latency = 1.0>}

// -----

// expected-error @+1 {{link bandwidth must be positive (GB/s), got 0}}
shard.grid @g(shape = 4) {dist.topology = [#dist.link<nvlink, bandwidth = 0.0, latency = 1.0>]}

// -----

// expected-error @+1 {{link latency must be non-negative (us), got -1}}
shard.grid @g(shape = 4) {dist.topology = [#dist.link<nvlink, bandwidth = 10.0, latency = -1.0>]}

// -----

// expected-error @+1 {{unknown link class 'infiniband', expected one of nvlink, pcie, network, shm}}
shard.grid @g(shape = 4) {dist.topology = [#dist.link<infiniband, bandwidth = 10.0, latency = 1.0>]}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{'dist.placement' belongs on function arguments and results; use 'dist.annotate' to place a value}}
func.func @placement_on_op() attributes {dist.placement = #dist.placement<@g, [replicate]>} {
  return
}

// -----

shard.grid @g(shape = 4)
func.func @symmetric_on_gather(%x: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'dist.symmetric' must be a unit attribute on a ring shift (dist.shift, dist.shift_start) or its transfers (xfer.send, xfer.recv)}}
  %0 = dist.all_gather %x on @g axes = [0] dim = 0 {dist.symmetric} : tensor<4xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @quantized_on_reduce(%x: tensor<16xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'dist.quantized' must be "bf16" or "fp8-e4m3" on an all-gather}}
  %0 = dist.reduce_scatter %x on @g axes = [0] dim = 0 reduce = sum {dist.quantized = "bf16"} : tensor<16xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

shard.grid @g(shape = 4)
func.func @quantized_format(%x: tensor<4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{'dist.quantized' must be "bf16" or "fp8-e4m3" on an all-gather}}
  %0 = dist.all_gather %x on @g axes = [0] dim = 0 {dist.quantized = "int4"} : tensor<4xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

// expected-error @+1 {{unknown dist attribute 'dist.color'}}
shard.grid @g(shape = 4) {dist.color = 1}

// -----

shard.grid @g(shape = 2x4)
// expected-error @+1 {{placement on argument #0: placement has 1 entries but grid @g has 2 axes}}
func.func @placement_count(%x: tensor<8xf32> {dist.placement = #dist.placement<@g, [replicate]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{placement on argument #0: grid axis 0 shards dimension 1 of a rank-1 tensor}}
func.func @placement_dim(%x: tensor<8xf32> {dist.placement = #dist.placement<@g, [shard<1>]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{placement on result #0: partial<bitor> along grid axis 0 is not defined for 'f32'}}
func.func @placement_partial(%x: tensor<8xf32>) -> (tensor<8xf32> {dist.placement = #dist.placement<@g, [partial<bitor>]>}) {
  return %x : tensor<8xf32>
}

// -----

// expected-error @+1 {{placement on argument #0: unknown grid @missing}}
func.func @placement_grid(%x: tensor<8xf32> {dist.placement = #dist.placement<@missing, [replicate]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{placement on argument #0: a placement needs a ranked tensor or memref, got 'f32'}}
func.func @placement_scalar(%x: f32 {dist.placement = #dist.placement<@g, [replicate]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{unknown dist attribute 'dist.layout' on argument #0}}
func.func @arg_attr(%x: tensor<8xf32> {dist.layout = 1}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{placement of grid axis 0 shards negative dimension -1}}
func.func @negative_shard(%x: tensor<8xf32> {dist.placement = #dist.placement<@g, [shard<-1>]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
// expected-error @+1 {{expected 'replicate', 'shard<dim>' or 'partial<kind>', got 'split'}}
func.func @bad_entry(%x: tensor<8xf32> {dist.placement = #dist.placement<@g, [split]>}) {
  return
}

// -----

shard.grid @g(shape = 4)
func.func @annotate_dim(%x: tensor<8xf32>) {
  // expected-error @+1 {{grid axis 0 shards dimension 2 of a rank-1 tensor}}
  %0 = dist.annotate %x as <@g, [shard<2>]> : tensor<8xf32>
  return
}

// -----

shard.grid @g(shape = 4)
func.func @annotate_partial(%x: tensor<8xbf16>) {
  // expected-error @+1 {{partial<bitxor> is not defined for 'bf16'}}
  %0 = dist.annotate %x as <@g, [partial<bitxor>]> : tensor<8xbf16>
  return
}

// -----

func.func @annotate_grid(%x: tensor<8xf32>) {
  // expected-error @+1 {{placement refers to @g, which is not a 'shard.grid'}}
  %0 = dist.annotate %x as <@g, [replicate]> : tensor<8xf32>
  return
}

// -----

shard.grid @g(shape = 2x2)
func.func @annotate_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{placement has 1 entries but grid @g has 2 axes}}
  %0 = dist.annotate %x as <@g, [replicate]> : tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{'dist.quantization_bound' must be an f64 in (0, 1) on a module}}
module attributes {dist.quantization_bound = 2.0 : f64} {
}

// -----

module {
  // expected-error @+1 {{'dist.quantization_bound' must be an f64 in (0, 1) on a module}}
  func.func @bound_on_function() attributes {dist.quantization_bound = 0.5 : f64} {
    return
  }
}
