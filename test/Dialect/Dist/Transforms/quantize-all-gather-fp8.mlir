// quantize-all-gather=fp8 (opt-in): each rank's chunk is scaled so that its
// largest magnitude is 448, encoded as e4m3fn codes (i8), gathered with the
// per-rank scales (one f32 each), and decoded with the scale of the chunk
// each element came in; f32, bf16 and f16 qualify. The bound is a remark
// and a report entry.
// RUN: braid-opt %s --braid-quantize-all-gather=format=fp8 --braid-overlap="mode=off report=%t.json" 2>/dev/null | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: braid-opt %s --braid-quantize-all-gather=format=fp8 --braid-overlap="mode=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

// CHECK-DAG: #[[CHUNK:.*]] = affine_map<(d0, d1) -> (d1 floordiv 16)>
// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<8x16xbf16>
// The chunk's largest magnitude: a reduction over every element.
// CHECK: %[[AMAX:.*]] = linalg.generic {{.*}}iterator_types = ["reduction", "reduction"]{{.*}} ins(%[[X]] : tensor<8x16xbf16>) outs(%{{.*}} : tensor<f32>)
// CHECK: math.absf
// CHECK: arith.maximumf
// The codes.
// CHECK: %[[CODES:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[AMAX]] : tensor<8x16xbf16>, tensor<f32>) outs(%{{.*}} : tensor<8x16xi8>)
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK: arith.trunci %{{.*}} : i32 to i8
// CHECK: %[[SENT:.*]] = dist.all_gather %[[CODES]] on @g axes = [0] dim = 1 : tensor<8x16xi8> -> tensor<8x64xi8>
// CHECK: %[[ONE:.*]] = tensor.expand_shape %[[AMAX]] [] output_shape [1] : tensor<f32> into tensor<1xf32>
// CHECK: %[[SCALES:.*]] = dist.all_gather %[[ONE]] on @g axes = [0] dim = 0 : tensor<1xf32> -> tensor<4xf32>
// CHECK: %[[DECODED:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #[[CHUNK]], #{{.*}}]{{.*}} ins(%[[SENT]], %[[SCALES]] : tensor<8x64xi8>, tensor<4xf32>) outs(%{{.*}} : tensor<8x64xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: return %[[DECODED]]

// An integer all-gather is left alone, with a remark.
// CHECK-LABEL: func.func @integers(
// CHECK: dist.all_gather %{{.*}} : tensor<4xi32> -> tensor<16xi32>

// REPORT: "quantized": {
// REPORT-NEXT: "format": "fp8-e4m3",
// REPORT-NEXT: "max_relative_error": 0.0625,
// REPORT-NEXT: "max_absolute_error_over_chunk_amax": 2.17982

// REMARK: remark: all_gather sends fp8 (e4m3) with one scale per rank's chunk instead of 'bf16' (quantize-all-gather=fp8): each element within 2^-4 relative, or 2^-10/448 of its chunk's largest magnitude
// REMARK: remark: all_gather not quantized: fp8 needs a statically shaped f32, bf16 or f16 tensor
shard.grid @g(shape = 4)
func.func @main(%x: tensor<8x16xbf16>) -> tensor<8x64xbf16> {
  %all = dist.all_gather %x on @g axes = [0] dim = 1 : tensor<8x16xbf16> -> tensor<8x64xbf16>
  return %all : tensor<8x64xbf16>
}

func.func @integers(%x: tensor<4xi32>) -> tensor<16xi32> {
  %all = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<4xi32> -> tensor<16xi32>
  return %all : tensor<16xi32>
}
