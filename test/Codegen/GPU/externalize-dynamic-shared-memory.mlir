// RUN: braid-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(convert-gpu-to-nvvm,braid-externalize-dynamic-shared-memory))' | FileCheck %s

// The dynamic shared memory of a kernel that also reduces with
// gpu.all_reduce: after the conversion the dynamic region is an external
// declaration (NVPTX: `.extern .shared .align 16 .b8 __dynamic_shmem__0[]`),
// the reduction's buffer stays a static, internal variable.
// CHECK-LABEL: gpu.module @kernels
// CHECK-DAG: llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global internal @__wg_{{.*}}() {addr_space = 3 : i32{{.*}}} : !llvm.array<32 x f32>
gpu.module @kernels {
  gpu.func @row(%out: memref<256xf32>) kernel {
    %c0 = arith.constant 0 : index
    %tid = gpu.thread_id x
    %base = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
    %row = memref.view %base[%c0][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<256xf32, #gpu.address_space<workgroup>>
    %x = memref.load %row[%tid] : memref<256xf32, #gpu.address_space<workgroup>>
    %sum = gpu.all_reduce add %x uniform {} : (f32) -> f32
    memref.store %sum, %out[%tid] : memref<256xf32>
    gpu.return
  }
}

// -----

// Only zero-sized, uninitialized shared globals name the dynamic region;
// other globals keep their linkage.
// CHECK-LABEL: gpu.module @others
// CHECK-DAG: llvm.mlir.global internal @static_shared() {addr_space = 3 : i32} : !llvm.array<4 x f32>
// CHECK-DAG: llvm.mlir.global internal @global_empty() {addr_space = 1 : i32} : !llvm.array<0 x i8>
// CHECK-DAG: llvm.mlir.global private @initialized(dense<0> : tensor<0xi8>) {addr_space = 3 : i32} : !llvm.array<0 x i8>
gpu.module @others {
  llvm.mlir.global internal @static_shared() {addr_space = 3 : i32} : !llvm.array<4 x f32>
  llvm.mlir.global internal @global_empty() {addr_space = 1 : i32} : !llvm.array<0 x i8>
  llvm.mlir.global private @initialized(dense<0> : tensor<0xi8>) {addr_space = 3 : i32} : !llvm.array<0 x i8>
}
