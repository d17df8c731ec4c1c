// RUN: braid-opt %s --braid-map-to-gpu="gemm-kernels=1 allow-tf32=1" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --braid-map-to-gpu="gemm-kernels=1 allow-tf32=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s --braid-map-to-gpu="gemm-kernels=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=OFF

// allow-tf32: an f32 product on the tensor cores. Its tiles are f32 rows
// padded by 16 bytes (64x36 and 32x68, two cp.async stages when aligned:
// 35840 bytes, 4 elements a piece); each lane loads its fragments'
// elements from them and rounds them to tf32 (cvt.rna), 4 steps of
// mma.sync m16n8k8 per K tile of 32.
// CHECK-LABEL: func.func @tf32
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k8 on tf32, 64x64x32 tiles): 64x64x64, from zero (its zero fill folded)
// OFF: remark: not a generated tensor-core kernel: its operands are f32, which the tensor cores multiply as tf32 only (10 bits of mantissa): allow-tf32 allows it
// OFF: remark: runs on cuBLASLt: 64x64x64, beta = 0 (its zero fill folded)
// CHECK-DAG: %[[BYTES:.*]] = arith.constant 35840 : i32
// CHECK: gpu.launch {{.*}} dynamic_shared_memory_size %[[BYTES]]
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 4, %{{.*}} {bypassL1} : memref<64x64xf32> to memref<64x36xf32, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 4, %{{.*}} {bypassL1} : memref<64x64xf32> to memref<32x68xf32, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x36xf32, #gpu.address_space<workgroup>>
// CHECK: llvm.inline_asm "cvt.rna.tf32.f32 $0, $1;", "=r,f"
// CHECK: llvm.inline_asm has_side_effects "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// CHECK-NOT: nvgpu.ldmatrix
// CHECK: gpu.terminator
func.func @tf32(%a: memref<64x64xf32>, %b: memref<64x64xf32>, %c: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<64x64xf32>)
  linalg.matmul ins(%a, %b : memref<64x64xf32>, memref<64x64xf32>) outs(%c : memref<64x64xf32>)
  return
}
