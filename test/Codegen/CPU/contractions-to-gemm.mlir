// RUN: braid-opt %s --split-input-file --braid-contractions-to-gemm 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-contractions-to-gemm 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// The cpu target sends the contractions cuBLASLt would take to oneDNN,
// through the same braid_rt_gemm call. A bf16 ring chunk accumulating into
// f32: the chunk's address and leading dimension come from its metadata.
// CHECK-LABEL: func.func @chunk
// REMARK: remark: runs on oneDNN: 4x12x16, beta = 1 (accumulating into its output)
// CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %subview : memref<16x12xbf16, strided<[12, 1], offset: ?>>
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFF]], %c2
// CHECK: %[[ADDR:.*]] = arith.addi %[[BASE]], %[[BYTES]]
// CHECK: %[[ADDR64:.*]] = arith.index_cast %[[ADDR]]
// CHECK: %[[LD:.*]] = arith.index_cast %[[STRIDES]]#0
// CHECK: call @braid_rt_gemm(%c4_i64{{[_0-9]*}}, %c12_i64{{[_0-9]*}}, %c16_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %[[ADDR64]], %[[LD]], %{{[^,]*}}, %c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c0_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64{{[_0-9]*}})
// CHECK-NOT: linalg.matmul
// CHECK: func.func private @braid_rt_gemm(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
func.func @chunk(%a: memref<4x16xbf16>, %b: memref<32x12xbf16>, %c: memref<4x12xf32>, %i: index) {
  %sub = memref.subview %b[%i, 0] [16, 12] [1, 1] : memref<32x12xbf16> to memref<16x12xbf16, strided<[12, 1], offset: ?>>
  linalg.matmul ins(%a, %sub : memref<4x16xbf16>, memref<16x12xbf16, strided<[12, 1], offset: ?>>) outs(%c : memref<4x12xf32>)
  return
}

// -----

// x @ w^T (B transposed, its flag the 14th argument) in f16, a zero fill
// folded into beta = 0 (the 19th), and a batch_matmul as one batched call.
// CHECK-LABEL: func.func @layouts
// REMARK: remark: runs on oneDNN: 8x32x64, reading B transposed, beta = 0 (its zero fill folded)
// REMARK: remark: runs on oneDNN: 16x8x4 in 3 batches, beta = 1 (accumulating into its output)
// CHECK-NOT: linalg.fill
// CHECK: call @braid_rt_gemm(%c8_i64{{[_0-9]*}}, %c32_i64{{[_0-9]*}}, %c64_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}},
// CHECK: call @braid_rt_gemm(%c16_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %c3_i64{{[_0-9]*}}
// CHECK-NOT: linalg.
func.func @layouts(%x: memref<8x64xf16>, %w: memref<32x64xf16>, %y: memref<8x32xf16>,
                   %p: memref<3x16x4xf32>, %q: memref<3x4x8xf32>, %r: memref<3x16x8xf32>) {
  %zero = arith.constant 0.0 : f16
  linalg.fill ins(%zero : f16) outs(%y : memref<8x32xf16>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%x, %w : memref<8x64xf16>, memref<32x64xf16>) outs(%y : memref<8x32xf16>)
  linalg.batch_matmul ins(%p, %q : memref<3x16x4xf32>, memref<3x4x8xf32>) outs(%r : memref<3x16x8xf32>)
  return
}

// -----

// A bias + GELU (tanh form) epilogue after a zero-filled product becomes
// the call's epilogue (code 2) writing the epilogue's bf16 output.
// CHECK-LABEL: func.func @epilogue
// REMARK: remark: runs on oneDNN: 64x32x16, with the bias + GELU after it as its epilogue, writing 'bf16', beta = 0 (its zero fill folded)
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c2_i64{{[_0-9]*}}, %{{[0-9]+}}, %c-1_i64
// CHECK-NOT: linalg.
func.func @epilogue(%a: memref<64x16xbf16>, %b: memref<16x32xbf16>, %bias: memref<32xbf16>, %out: memref<64x32xbf16>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %c0447 = arith.constant 0.044715 : f32
  %s2pi = arith.constant 0.7978845608 : f32
  %acc = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc : memref<64x32xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%acc, %bias : memref<64x32xf32>, memref<32xbf16>) outs(%out : memref<64x32xbf16>) {
  ^bb0(%x: f32, %bv: bf16, %o: bf16):
    %bf = arith.extf %bv : bf16 to f32
    %y = arith.addf %x, %bf : f32
    %y2 = arith.mulf %y, %y : f32
    %y3 = arith.mulf %y2, %y : f32
    %in = arith.mulf %y3, %c0447 : f32
    %in2 = arith.addf %y, %in : f32
    %in3 = arith.mulf %in2, %s2pi : f32
    %t = math.tanh %in3 : f32
    %t1 = arith.addf %t, %one : f32
    %hy = arith.mulf %y, %half : f32
    %r = arith.mulf %hy, %t1 : f32
    %rt = arith.truncf %r : f32 to bf16
    linalg.yield %rt : bf16
  }
  memref.dealloc %acc : memref<64x32xf32>
  return
}

// -----

// What oneDNN cannot take stays a loop nest, and says why: a strided inner
// dimension, integers (whose payload is not a float multiply-add).
// CHECK-LABEL: func.func @generated
// REMARK: remark: runs as a generated kernel, not on oneDNN: an operand's innermost stride is not 1
// REMARK: remark: runs as a generated kernel, not on oneDNN: its payload does more than accumulate a product of the (extended) operands
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK-NOT: braid_rt_gemm
func.func @generated(%a: memref<4x32xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>,
                     %i: memref<4x8xi32>, %j: memref<8x4xi32>, %k: memref<4x4xi32>) {
  %sub = memref.subview %a[0, 0] [4, 8] [1, 4] : memref<4x32xf32> to memref<4x8xf32, strided<[32, 4]>>
  linalg.matmul ins(%sub, %b : memref<4x8xf32, strided<[32, 4]>>, memref<8x4xf32>) outs(%c : memref<4x4xf32>)
  linalg.matmul ins(%i, %j : memref<4x8xi32>, memref<8x4xi32>) outs(%k : memref<4x4xi32>)
  return
}
