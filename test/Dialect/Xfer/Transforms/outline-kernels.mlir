// Each computation on buffers moves into a private function of its own;
// its call says what the trace and profile call it (braid.trace: the
// kernel, what it computes, its buffers' bytes, a contraction's flops).
// RUN: braid-opt %s --split-input-file --braid-outline-kernels | FileCheck %s

// CHECK: func.func private @main_kernel_0(%{{.*}}: f32, %[[B:.*]]: memref<8x8xf32>)
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[B]] : memref<8x8xf32>)
// CHECK-NEXT: return
// CHECK: func.func private @main_kernel_1(%[[A:.*]]: memref<8x8xf32>, %[[C:.*]]: memref<8x8xf32>, %[[S:.*]]: f32)
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[S]]
// CHECK-LABEL: func.func @main
// CHECK: call @main_kernel_0(%{{.*}}, %{{.*}}) {braid.trace = {bytes = 256 : i64, flops = 0 : i64, name = "main_kernel_0 (fill)"}} : (f32, memref<8x8xf32>) -> ()
// CHECK: xfer.send
// CHECK: call @main_kernel_1({{.*}}name = "main_kernel_1 (elementwise)"
// CHECK: xfer.wait
shard.grid @tp(shape = 2)
func.func @main(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 2.0 : f32
  linalg.fill ins(%zero : f32) outs(%b : memref<8x8xf32>)
  %r = xfer.send %a on @tp axes = [0] offset = 1 step = 0 : memref<8x8xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %scale : f32
    linalg.yield %m : f32
  }
  xfer.wait %r : !xfer.request
  return
}

// -----

// A loop nest braid-fuse-memory-bound marked is one kernel, whatever it
// holds; the linalg ops in it are not outlined again.
// CHECK-LABEL: func.func private @fused_kernel_0(
// CHECK: scf.forall
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK: } {braid.kernel}
// CHECK-NEXT: return
// CHECK-NOT: func.func private @fused_kernel_1
// CHECK-LABEL: func.func @fused(
// CHECK: call @fused_kernel_0({{.*}}{braid.trace = {bytes = 544 : i64, flops = 0 : i64, name = "fused_kernel_0 (fill, reduce)"}}
// CHECK-NEXT: return
func.func @fused(%x: memref<8x16xf32>, %y: memref<8xf32>) {
  %zero = arith.constant 0.0 : f32
  scf.forall (%i) = (0) to (8) step (4) {
    %xs = memref.subview %x[%i, 0] [4, 16] [1, 1] : memref<8x16xf32> to memref<4x16xf32, strided<[16, 1], offset: ?>>
    %ys = memref.subview %y[%i] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.fill ins(%zero : f32) outs(%ys : memref<4xf32, strided<[1], offset: ?>>)
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
        ins(%xs : memref<4x16xf32, strided<[16, 1], offset: ?>>) outs(%ys : memref<4xf32, strided<[1], offset: ?>>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %acc, %a : f32
      linalg.yield %s : f32
    }
  } {braid.kernel}
  return
}

// -----

// Identical computations share one kernel, wherever they are (two layers
// of one function, another function); a computation that differs in a
// constant, a shape or a dtype gets its own. Captured values are
// arguments, so a scale passed in does not make a kernel of its own.
// CHECK: func.func private @first_kernel_0(%[[X:.*]]: memref<8xf32>, %{{.*}}: memref<8xf32>)
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: func.func private @first_kernel_1(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>)
// CHECK: arith.constant 3.000000e+00 : f32
// CHECK: func.func private @first_kernel_2(%{{.*}}: memref<16xf32>, %{{.*}}: memref<16xf32>)
// CHECK: func.func private @first_kernel_3(%{{.*}}: memref<8xf16>, %{{.*}}: memref<8xf16>)
// CHECK: func.func private @first_kernel_4(%{{.*}}: memref<8xf32>, %{{.*}}: memref<8xf32>, %{{.*}}: f32)
// CHECK-NOT: func.func private
// CHECK-LABEL: func.func @first(
// CHECK-NEXT: call @first_kernel_0(
// CHECK-NEXT: call @first_kernel_0(
// CHECK-NEXT: call @first_kernel_1(
// CHECK-NEXT: call @first_kernel_2(
// CHECK-NEXT: call @first_kernel_3(
// CHECK-NEXT: call @first_kernel_4(%{{.*}}, %{{.*}}, %{{.*}}) {braid.trace = {{.*}}} : (memref<8xf32>, memref<8xf32>, f32) -> ()
// CHECK-NEXT: call @first_kernel_4(
// CHECK-NEXT: return
// CHECK-LABEL: func.func @second(
// CHECK-NEXT: call @first_kernel_0(
// CHECK-NEXT: return
#id = affine_map<(i) -> (i)>
func.func @first(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<16xf32>,
                 %d: memref<16xf32>, %h: memref<8xf16>, %g: memref<8xf16>,
                 %s: f32, %t: f32) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%b : memref<8xf32>) outs(%a : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %three = arith.constant 3.0 : f32
    %m = arith.mulf %v, %three : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%c : memref<16xf32>) outs(%d : memref<16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%h : memref<8xf16>) outs(%g : memref<8xf16>) {
  ^bb0(%v: f16, %o: f16):
    %two = arith.constant 2.0 : f16
    %m = arith.mulf %v, %two : f16
    linalg.yield %m : f16
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %s : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%b : memref<8xf32>) outs(%a : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.mulf %v, %t : f32
    linalg.yield %m : f32
  }
  return
}
func.func @second(%a: memref<8xf32>, %b: memref<8xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %two = arith.constant 2.0 : f32
    %m = arith.mulf %v, %two : f32
    linalg.yield %m : f32
  } loc("elsewhere.py":7:0)
  return
}

// -----

// bf16 and f16 scalars go in as their i16 bits, bitcast back inside (as
// arguments x86 would round them through a compiler-rt call).
// CHECK-LABEL: func.func private @narrow_kernel_0(
// CHECK-SAME: %[[BITS:[^:]*]]: i16, %[[OUT:[^:]*]]: memref<4xbf16>)
// CHECK-NEXT: %[[V:.*]] = arith.bitcast %[[BITS]] : i16 to bf16
// CHECK-NEXT: linalg.fill ins(%[[V]] : bf16) outs(%[[OUT]] : memref<4xbf16>)
// CHECK-LABEL: func.func private @narrow_kernel_1(
// CHECK-SAME: %{{[^:]*}}: i16, %{{[^:]*}}: memref<4xf16>)
// CHECK-LABEL: func.func @narrow(
// CHECK-SAME: %[[X:[^:]*]]: bf16, %[[Y:[^:]*]]: f16
// CHECK: %[[XB:.*]] = arith.bitcast %[[X]] : bf16 to i16
// CHECK: call @narrow_kernel_0(%[[XB]], %{{.*}}) {braid.trace = {{.*}}} : (i16, memref<4xbf16>) -> ()
// CHECK: %[[YB:.*]] = arith.bitcast %[[Y]] : f16 to i16
// CHECK: call @narrow_kernel_1(%[[YB]], %{{.*}}) {braid.trace = {{.*}}} : (i16, memref<4xf16>) -> ()
func.func @narrow(%x: bf16, %y: f16, %a: memref<4xbf16>, %b: memref<4xf16>) {
  linalg.fill ins(%x : bf16) outs(%a : memref<4xbf16>)
  linalg.fill ins(%y : f16) outs(%b : memref<4xf16>)
  return
}

// -----

// A contraction left to generated code (--gemm=generated) is a kernel
// with its flops: 2 m n k.
// CHECK-LABEL: func.func @product(
// CHECK: call @product_kernel_0(%{{.*}}) {braid.trace = {bytes = 6656 : i64, flops = 16384 : i64, name = "product_kernel_0 (matmul)"}}
func.func @product(%a: memref<16x8xf32>, %b: memref<8x64xf32>, %c: memref<16x64xf32>) {
  linalg.matmul ins(%a, %b : memref<16x8xf32>, memref<8x64xf32>) outs(%c : memref<16x64xf32>)
  return
}
