// Upstream shard-partition crashes on a sequence-parallel MLP whose
// activation is a linalg.generic; the import reports it instead of
// crashing, and exits with 1.
// RUN: not braid-opt %s --braid-import-shard 2>&1 | FileCheck %s

// CHECK: upstream-crash.mlir:[[@LINE+3]]:1: error: upstream sharding propagation/partitioning crashed on function 'sp_mlp' (an upstream shard bug)
// CHECK-NOT: PLEASE submit a bug report
shard.grid @tp(shape = 4)
func.func @sp_mlp(%x: tensor<512x256xf32>, %w1: tensor<256x1024xf32>, %w2: tensor<1024x256xf32>) -> tensor<512x256xf32> {
  %s_seq = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %s_col = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %s_rep = shard.sharding @tp split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %s_seq : tensor<512x256xf32>
  %xr = shard.shard %xs to %s_rep annotate_for_users : tensor<512x256xf32>
  %w1s = shard.shard %w1 to %s_col annotate_for_users : tensor<256x1024xf32>
  %w2s = shard.shard %w2 to %s_seq annotate_for_users : tensor<1024x256xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x1024xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %h = linalg.matmul ins(%xr, %w1s : tensor<512x256xf32>, tensor<256x1024xf32>) outs(%f : tensor<512x1024xf32>) -> tensor<512x1024xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<512x1024xf32>) outs(%e : tensor<512x1024xf32>) {
  ^bb0(%v: f32, %o: f32):
    %t = math.tanh %v : f32
    linalg.yield %t : f32
  } -> tensor<512x1024xf32>
  %e2 = tensor.empty() : tensor<512x256xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<512x256xf32>) -> tensor<512x256xf32>
  %y = linalg.matmul ins(%a, %w2s : tensor<512x1024xf32>, tensor<1024x256xf32>) outs(%f2 : tensor<512x256xf32>) -> tensor<512x256xf32>
  %ys = shard.shard %y to %s_seq : tensor<512x256xf32>
  return %ys : tensor<512x256xf32>
}
