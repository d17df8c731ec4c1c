// RUN: braid-opt %s --split-input-file --braid-merge-gpu-modules --verify-diagnostics | FileCheck %s

// Outlined kernels land in one module named braid_kernels; a kernel whose
// name another module already took is renamed, and every launch follows.
// CHECK-LABEL: gpu.module @braid_kernels
// CHECK-DAG: gpu.func @f_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK-DAG: gpu.func @f_kernel_0(%{{.*}}: memref<8xf32>) kernel
// CHECK-DAG: gpu.func @g_kernel(%{{.*}}: memref<4xi32>) kernel
// CHECK-NOT: gpu.module
// CHECK: func.func @f
// CHECK: gpu.launch_func @braid_kernels::@f_kernel
// CHECK: gpu.launch_func @braid_kernels::@f_kernel_0
// CHECK: gpu.launch_func @braid_kernels::@g_kernel
module attributes {gpu.container_module} {
  gpu.module @f_kernel {
    gpu.func @f_kernel(%m: memref<4xf32>) kernel { gpu.return }
  }
  gpu.module @f_kernel_0 {
    gpu.func @f_kernel(%m: memref<8xf32>) kernel { gpu.return }
  }
  gpu.module @g_kernel {
    gpu.func @g_kernel(%m: memref<4xi32>) kernel { gpu.return }
  }
  func.func @f(%a: memref<4xf32>, %b: memref<8xf32>, %c: memref<4xi32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @f_kernel::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%a : memref<4xf32>)
    gpu.launch_func @f_kernel_0::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%b : memref<8xf32>)
    gpu.launch_func @g_kernel::@g_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%c : memref<4xi32>)
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

// -----

// Identical kernels (the same body on the same types, whatever their names
// and locations) become one, and their launches launch it; kernels that
// differ in a constant, a type or a shape stay apart.
// CHECK-LABEL: gpu.module @braid_kernels
// CHECK: gpu.func @layer0_kernel(%{{.*}}: memref<16xf32>) kernel
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: gpu.func @layer0_kernel_0(%{{.*}}: memref<16xf32>) kernel
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK: gpu.func @layer0_kernel_1(%{{.*}}: memref<16xf16>) kernel
// CHECK: gpu.func @layer0_kernel_2(%{{.*}}: memref<32xf32>) kernel
// CHECK-NOT: gpu.func
// CHECK-LABEL: func.func @layers(
// CHECK: gpu.launch_func @braid_kernels::@layer0_kernel
// CHECK: gpu.launch_func @braid_kernels::@layer0_kernel
// CHECK: gpu.launch_func @braid_kernels::@layer0_kernel_0
// CHECK: gpu.launch_func @braid_kernels::@layer0_kernel_1
// CHECK: gpu.launch_func @braid_kernels::@layer0_kernel_2
module attributes {gpu.container_module} {
  gpu.module @layer0_kernel {
    gpu.func @layer0_kernel(%m: memref<16xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %m[%i] : memref<16xf32>
      %two = arith.constant 2.0 : f32
      %w = arith.mulf %v, %two : f32
      memref.store %w, %m[%i] : memref<16xf32>
      gpu.return
    }
  }
  gpu.module @layer1_kernel {
    gpu.func @layer1_kernel(%m: memref<16xf32>) kernel {
      %i = gpu.thread_id x loc("layer1.py":3:0)
      %v = memref.load %m[%i] : memref<16xf32>
      %two = arith.constant 2.0 : f32
      %w = arith.mulf %v, %two : f32
      memref.store %w, %m[%i] : memref<16xf32>
      gpu.return
    }
  }
  gpu.module @layer0_kernel_0 {
    gpu.func @layer0_kernel(%m: memref<16xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %m[%i] : memref<16xf32>
      %three = arith.constant 3.0 : f32
      %w = arith.mulf %v, %three : f32
      memref.store %w, %m[%i] : memref<16xf32>
      gpu.return
    }
  }
  gpu.module @layer0_kernel_1 {
    gpu.func @layer0_kernel(%m: memref<16xf16>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %m[%i] : memref<16xf16>
      %two = arith.constant 2.0 : f16
      %w = arith.mulf %v, %two : f16
      memref.store %w, %m[%i] : memref<16xf16>
      gpu.return
    }
  }
  gpu.module @layer0_kernel_2 {
    gpu.func @layer0_kernel(%m: memref<32xf32>) kernel {
      %i = gpu.thread_id x
      %v = memref.load %m[%i] : memref<32xf32>
      %two = arith.constant 2.0 : f32
      %w = arith.mulf %v, %two : f32
      memref.store %w, %m[%i] : memref<32xf32>
      gpu.return
    }
  }
  func.func @layers(%a: memref<16xf32>, %h: memref<16xf16>, %b: memref<32xf32>) {
    %c1 = arith.constant 1 : index
    %c16 = arith.constant 16 : index
    gpu.launch_func @layer0_kernel::@layer0_kernel blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%a : memref<16xf32>)
    gpu.launch_func @layer1_kernel::@layer1_kernel blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%a : memref<16xf32>)
    gpu.launch_func @layer0_kernel_0::@layer0_kernel blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%a : memref<16xf32>)
    gpu.launch_func @layer0_kernel_1::@layer0_kernel blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%h : memref<16xf16>)
    gpu.launch_func @layer0_kernel_2::@layer0_kernel blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1) args(%b : memref<32xf32>)
    return
  }
}
