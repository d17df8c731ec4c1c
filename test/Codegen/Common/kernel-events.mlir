// RUN: braid-opt %s --split-input-file --verify-diagnostics --braid-kernel-events | FileCheck %s

// Each described call is bracketed by braid_rt_kernel_begin(name, bytes,
// flops) and braid_rt_kernel_end(). The name is a constant: the
// description, " at ", and the first file:line:col of the call's location
// (the file without its directories), else its name. One constant per
// distinct text: the first two calls share "k at a.py:3:5"; a call
// without a description is left alone.
// "k at b\0", "k at a.py:9:1\0", "k at a.py:3:5\0":
// CHECK-DAG: memref.global "private" constant @[[B:__braid_kernel_name_1]] : memref<7xi8> = dense<[107, 32, 97, 116, 32, 98, 0]>
// CHECK-DAG: memref.global "private" constant @[[A9:__braid_kernel_name_0]] : memref<14xi8> = dense<[107, 32, 97, 116, 32, 97, 46, 112, 121, 58, 57, 58, 49, 0]>
// CHECK-DAG: memref.global "private" constant @[[A3:__braid_kernel_name]] : memref<14xi8> = dense<[107, 32, 97, 116, 32, 97, 46, 112, 121, 58, 51, 58, 53, 0]>
// CHECK-DAG: func.func private @braid_rt_kernel_begin(i64, i64, i64)
// CHECK-DAG: func.func private @braid_rt_kernel_end()
// CHECK-LABEL: func.func @f(
// CHECK: %[[G:.*]] = memref.get_global @[[A3]] : memref<14xi8>
// CHECK-NEXT: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[G]]
// CHECK-NEXT: %[[P64:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK-NEXT: %[[BYTES:.*]] = arith.constant 32 : i64
// CHECK-NEXT: %[[FLOPS:.*]] = arith.constant 0 : i64
// CHECK-NEXT: call @braid_rt_kernel_begin(%[[P64]], %[[BYTES]], %[[FLOPS]])
// CHECK-NEXT: call @k(%{{.*}}) : (memref<8xf32>) -> ()
// CHECK-NEXT: call @braid_rt_kernel_end() : () -> ()
// CHECK-NEXT: memref.get_global @[[A3]]
// CHECK: call @k(
// CHECK-NEXT: call @braid_rt_kernel_end()
// CHECK-NEXT: memref.get_global @[[A9]]
// CHECK: arith.constant 7 : i64
// CHECK: call @k(
// CHECK-NEXT: call @braid_rt_kernel_end()
// CHECK-NEXT: memref.get_global @[[B]]
// CHECK: call @k(
// CHECK-NEXT: call @braid_rt_kernel_end()
// CHECK-NEXT: call @k(
// CHECK-NEXT: return
// CHECK-NOT: braid.trace
func.func private @k(memref<8xf32>)
func.func @f(%a: memref<8xf32>) {
  call @k(%a) {braid.trace = {bytes = 32 : i64, flops = 0 : i64, name = "k"}} : (memref<8xf32>) -> () loc("a.py":3:5)
  call @k(%a) {braid.trace = {bytes = 32 : i64, flops = 0 : i64, name = "k"}} : (memref<8xf32>) -> () loc("/dir/a.py":3:5)
  call @k(%a) {braid.trace = {bytes = 32 : i64, flops = 7 : i64, name = "k"}} : (memref<8xf32>) -> () loc("layer"("a.py":9:1))
  call @k(%a) {braid.trace = {bytes = 32 : i64, flops = 0 : i64, name = "k"}} : (memref<8xf32>) -> () loc("b")
  call @k(%a) : (memref<8xf32>) -> ()
  return
}

// -----

func.func private @k(memref<8xf32>)
func.func @malformed(%a: memref<8xf32>) {
  // expected-error @below {{'braid.trace' must be a dictionary of a string 'name' and integer 'bytes' and 'flops'}}
  call @k(%a) {braid.trace = {name = "k"}} : (memref<8xf32>) -> ()
  return
}

// -----

// A schedule's copies are kernels too: named by their shape, "(strided)"
// where a side has a layout, with the bytes read and written. Copies in
// other functions (an outlined kernel's) are left alone.
// "copy 4x8xf32 (strided) at kernel-events.mlir:LINE:3":
// CHECK-DAG: memref.global "private" constant @{{.*}} : memref<{{[0-9]+}}xi8> = dense<[99, 111, 112, 121, 32, 52, 120, 56, 120, 102, 51, 50, 32, 40, 115, 116, 114, 105, 100, 101, 100, 41, 32, 97, 116, 32,
// A copy of a dynamic shape is "copy ?x8xf32 at ...", its bytes unknown.
// "copy ?x8xf32 at kernel-events.mlir:LINE:3":
// CHECK-DAG: memref.global "private" constant @{{.*}} : memref<{{[0-9]+}}xi8> = dense<[99, 111, 112, 121, 32, 63, 120, 56, 120, 102, 51, 50, 32, 97, 116, 32,
// CHECK-LABEL: func.func @schedule(
// CHECK: %[[BYTES:.*]] = arith.constant 256 : i64
// CHECK: call @braid_rt_kernel_begin(%{{.*}}, %[[BYTES]], %{{.*}})
// CHECK-NEXT: memref.copy
// CHECK-NEXT: call @braid_rt_kernel_end()
// CHECK: arith.constant 0 : i64
// CHECK-NEXT: arith.constant 0 : i64
// CHECK-NEXT: call @braid_rt_kernel_begin(
// CHECK-NEXT: memref.copy %{{.*}} : memref<?x8xf32> to memref<?x8xf32>
// CHECK-LABEL: func.func @not_a_schedule(
// CHECK-NEXT: memref.copy
// CHECK-NEXT: return
func.func @schedule(%a: memref<4x8xf32>, %b: memref<4x8xf32, strided<[16, 1]>>, %c: memref<?x8xf32>, %d: memref<?x8xf32>) attributes {braid.schedule} {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32, strided<[16, 1]>>
  memref.copy %c, %d : memref<?x8xf32> to memref<?x8xf32>
  return
}
func.func @not_a_schedule(%a: memref<4x8xf32>, %b: memref<4x8xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  return
}

// -----

// On the cuda target a launch braid-map-to-gpu described is bracketed the
// same way (the runtime names the launch by the symbol it gets and this
// text): "(exp) at g.py:2:1".
// CHECK-DAG: memref.global "private" constant @[[L:__braid_kernel_name]] : memref<18xi8> = dense<[40, 101, 120, 112, 41, 32, 97, 116, 32, 103, 46, 112, 121, 58, 50, 58, 49, 0]>
// CHECK-LABEL: func.func @launch(
// CHECK: memref.get_global @[[L]]
// CHECK: %[[BYTES:.*]] = arith.constant 64 : i64
// CHECK: call @braid_rt_kernel_begin(%{{.*}}, %[[BYTES]], %{{.*}})
// CHECK-NEXT: gpu.launch
// CHECK-NOT: braid.trace
// CHECK: call @braid_rt_kernel_end()
func.func @launch(%a: memref<8xf32>, %b: memref<8xf32>) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %v = memref.load %a[%tx] : memref<8xf32>
    %e = math.exp %v : f32
    memref.store %e, %b[%tx] : memref<8xf32>
    gpu.terminator
  } {braid.trace = {bytes = 64 : i64, flops = 0 : i64, name = "(exp)"}} loc("g.py":2:1)
  return
}
