// RUN: braid-opt %s --split-input-file --braid-merge-gpu-modules --verify-diagnostics | FileCheck %s

// Outlined kernels land in one module named braid_kernels; a kernel whose
// name another module already took is renamed, and every launch follows.
// CHECK-LABEL: gpu.module @braid_kernels
// CHECK-DAG: gpu.func @f_kernel() kernel
// CHECK-DAG: gpu.func @f_kernel_0() kernel
// CHECK-DAG: gpu.func @g_kernel() kernel
// CHECK-NOT: gpu.module
// CHECK: func.func @f
// CHECK: gpu.launch_func @braid_kernels::@f_kernel
// CHECK: gpu.launch_func @braid_kernels::@f_kernel_0
// CHECK: gpu.launch_func @braid_kernels::@g_kernel
module attributes {gpu.container_module} {
  gpu.module @f_kernel {
    gpu.func @f_kernel() kernel { gpu.return }
  }
  gpu.module @f_kernel_0 {
    gpu.func @f_kernel() kernel { gpu.return }
  }
  gpu.module @g_kernel {
    gpu.func @g_kernel() kernel { gpu.return }
  }
  func.func @f() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @f_kernel::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @f_kernel_0::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    gpu.launch_func @g_kernel::@g_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// The merged module's name must be free.
// expected-error @below {{braid-merge-gpu-modules: the program already defines 'braid_kernels'}}
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @k() kernel { gpu.return }
  }
  func.func @braid_kernels() {
    return
  }
}
