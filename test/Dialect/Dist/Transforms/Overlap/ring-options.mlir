// Sub-chunks and bidirectional rings.
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=2 bidirectional=off" | FileCheck %s --check-prefix=SUB
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=2 bidirectional=off" | grep -c "linalg.matmul ins(%.*tensor<4x16xf32>, tensor<16x12xf32>)" | FileCheck %s --check-prefix=EIGHT
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=1 bidirectional=on" | FileCheck %s --check-prefix=BIDIR
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=1 bidirectional=on" | grep -c "linalg.matmul ins(%.*tensor<4x16xf32>, tensor<16x12xf32>)" | FileCheck %s --check-prefix=EIGHT
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=2 bidirectional=on" | grep -c "linalg.matmul ins(%.*tensor<2x16xf32>, tensor<16x12xf32>)" | FileCheck %s --check-prefix=SIXTEEN
// RUN: braid-opt %s --braid-overlap="mode=force sub-chunks=3" -o /dev/null --mlir-print-op-on-diagnostic=false 2>&1 | FileCheck %s --check-prefix=NOFIT

shard.grid @tp(shape = 4)

// Two pieces per chunk: 3 forwarding steps of 2 pieces each.
// SUB-LABEL: func.func @ag
// SUB-COUNT-6: dist.shift_start %{{.*}} on @tp axes = [0] offset = 1 {{.*}}: tensor<4x16xf32> -> tensor<4x16xf32>
// SUB-NOT: dist.shift_start
// EIGHT: 8
// SIXTEEN: 16

// Two rings, each carrying half of every chunk.
// BIDIR-LABEL: func.func @ag
// BIDIR: dist.shift_start %{{.*}} on @tp axes = [0] offset = 1 {{.*}}: tensor<4x16xf32>
// BIDIR: dist.shift_start %{{.*}} on @tp axes = [0] offset = -1 {{.*}}: tensor<4x16xf32>

// A local chunk of 8 rows does not split into 3 pieces: no fused layout
// fits, the collective is made asynchronous instead.
// NOFIT: remark: all_gather made asynchronous
// NOFIT-SAME: not fused: the local chunk of 8 rows does not split into the requested pieces
func.func @ag(%x: tensor<8x16xf32>, %w: tensor<16x12xf32>, %v: tensor<16x16xf32>) -> (tensor<32x12xf32>, tensor<16x16xf32>) {
  %g = dist.all_gather %x on @tp axes = [0] dim = 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<16x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %u = linalg.matmul ins(%v, %v : tensor<16x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<16x16xf32>) -> tensor<16x16xf32>
  %e = tensor.empty() : tensor<32x12xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<32x12xf32>) -> tensor<32x12xf32>
  %y = linalg.matmul ins(%g, %w : tensor<32x16xf32>, tensor<16x12xf32>) outs(%f : tensor<32x12xf32>) -> tensor<32x12xf32>
  return %y, %u : tensor<32x12xf32>, tensor<16x16xf32>
}
