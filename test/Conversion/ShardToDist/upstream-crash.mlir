// Upstream shard-partition crashes on an op with a result it has no
// sharding for. An unread result beside a read one gets the read one's
// sharding (unread-result.mlir); here no result of the generic is read, so
// neither has one (the pipeline's braid-prepare-import erases such ops
// first): the import reports the crash instead of crashing, and exits
// with 1. Partitioning that writes invalid IR is a located failure too.
// RUN: not braid-opt %s -split-input-file --braid-import-shard 2>&1 | FileCheck %s

// CHECK: upstream-crash.mlir:[[@LINE+3]]:1: error: upstream sharding propagation/partitioning crashed on function 'unread_result' (an upstream shard bug)
// CHECK-NOT: PLEASE submit a bug report
shard.grid @tp(shape = 4)
func.func @unread_result(%x: tensor<16x8xf32>) -> tensor<16xf32> {
  %s = shard.sharding @tp split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<16x8xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i64
  %e = tensor.empty() : tensor<16xf32>
  %ei = tensor.empty() : tensor<16xi64>
  %m = linalg.fill ins(%ninf : f32) outs(%e : tensor<16xf32>) -> tensor<16xf32>
  %i = linalg.fill ins(%c0 : i64) outs(%ei : tensor<16xi64>) -> tensor<16xi64>
  %r:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%xs : tensor<16x8xf32>) outs(%m, %i : tensor<16xf32>, tensor<16xi64>) {
  ^bb0(%a: f32, %o: f32, %oi: i64):
    %idx = linalg.index 1 : index
    %ii = arith.index_cast %idx : index to i64
    %mx = arith.maximumf %a, %o : f32
    %gt = arith.cmpf ogt, %a, %o : f32
    %sel = arith.select %gt, %ii, %oi : i64
    linalg.yield %mx, %sel : f32, i64
  } -> (tensor<16xf32>, tensor<16xi64>)
  %rs = tensor.empty() : tensor<16xf32>
  return %rs : tensor<16xf32>
}

// -----

// CHECK: upstream-crash.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'linalg.matmul' op expected type of operand #2
// CHECK: upstream-crash.mlir:[[@LINE+2]]:1: error: upstream sharding propagation/partitioning failed on function 'sp_mlp'
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
