// quantize-all-gather=bf16 (opt-in): f32 all-gathers send bf16; matmuls
// take the bf16 values, other users read them extended back; the error
// bound is a remark and a report entry. Other element types are untouched.
// RUN: braid-opt %s --braid-quantize-all-gather=format=bf16 --braid-overlap="mode=off report=%t.json" 2>/dev/null | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: braid-opt %s --braid-quantize-all-gather=format=bf16 --braid-overlap="mode=off" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s --braid-sink-all-gather --braid-quantize-all-gather=format=bf16 --braid-overlap="mode=force" 2>/dev/null | FileCheck %s --check-prefix=FORCE
// RUN: not braid-opt %s --braid-quantize-all-gather=format=fp4 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[X:.*]]: tensor<4x16xf32>, %[[W:.*]]: tensor<16x8xf32>
// CHECK: %[[Q:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x16xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: %[[G:.*]] = dist.all_gather %[[Q]] on @g axes = [0] dim = 0 : tensor<4x16xbf16> -> tensor<16x16xbf16>
// CHECK: %[[E:.*]] = linalg.generic {{.*}} ins(%[[G]] : tensor<16x16xbf16>)
// CHECK: arith.extf %{{.*}} : bf16 to f32
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[G]], %[[W]] : tensor<16x16xbf16>, tensor<16x8xf32>)
// CHECK: dist.all_gather %{{.*}} : tensor<2x16xf16> -> tensor<8x16xf16>
// CHECK: return %[[Y]], %[[E]]

// A matmul reading the gathered operand transposed keeps its indexing maps
// when rebuilt on the bf16 value (it lost them, and failed to verify).
// CHECK-LABEL: func.func @transposed(
// CHECK: %[[GT:.*]] = dist.all_gather %{{.*}} : tensor<2x16xbf16> -> tensor<8x16xbf16>
// CHECK: linalg.matmul indexing_maps = [#{{[a-z0-9]+}}, #{{[a-z0-9]+}}, #{{[a-z0-9]+}}] ins(%{{.*}}, %[[GT]] : tensor<16x16xf32>, tensor<8x16xbf16>) outs(%{{.*}} : tensor<16x8xf32>)

// REPORT: "kind": "all_gather"
// REPORT: "quantized": {
// REPORT-NEXT: "format": "bf16",
// REPORT-NEXT: "max_relative_error": 0.00390625
// REPORT: "kind": "all_gather"
// REPORT-NOT: "quantized"
// REPORT: "function": "ring"

// REMARK: remark: all_gather sends bf16 instead of f32 (quantize-all-gather=bf16): relative error of each element at most 2^-8

// The ring still fuses with the matmul, moving bf16 chunks.
// FORCE-LABEL: func.func @ring(
// FORCE: dist.shift_start %{{.*}} : tensor<4x16xbf16> -> tensor<4x16xbf16>
// FORCE: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x16xbf16>, tensor<16x8xf32>)

// BAD: for the --format option: Cannot find option named 'fp4'
shard.grid @g(shape = 4)
func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x16xf32>, tensor<8x16xf16>) {
  %all = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul ins(%all, %w : tensor<16x16xf32>, tensor<16x8xf32>) outs(%init : tensor<16x8xf32>) -> tensor<16x8xf32>
  %h = arith.constant dense<1.0> : tensor<2x16xf16>
  %hg = dist.all_gather %h on @g axes = [0] dim = 0 : tensor<2x16xf16> -> tensor<8x16xf16>
  return %y, %all, %hg : tensor<16x8xf32>, tensor<16x16xf32>, tensor<8x16xf16>
}

func.func @ring(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %all = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<4x16xf32> -> tensor<16x16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul ins(%all, %w : tensor<16x16xf32>, tensor<16x8xf32>) outs(%init : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}

func.func @transposed(%x: tensor<16x16xf32>, %wt: tensor<2x16xf32>) -> tensor<16x8xf32> {
  %all = dist.all_gather %wt on @g axes = [0] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<16x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<16x8xf32>) -> tensor<16x8xf32>
  %y = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
         ins(%x, %all : tensor<16x16xf32>, tensor<8x16xf32>) outs(%init : tensor<16x8xf32>) -> tensor<16x8xf32>
  return %y : tensor<16x8xf32>
}
