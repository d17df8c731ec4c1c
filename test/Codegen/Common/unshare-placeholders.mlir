// braid-unshare-placeholders gives each group of uses of a tensor.empty its
// own copy, so that One-Shot Bufferize does not put the results of every op
// writing into a shared placeholder (CSE merges them across a program's
// layers) into one alias set, whose analysis grows with its square. A
// group is one top-level op (a kernel's slices of the empty and its shared
// output stay one buffer), or an extract_slice with the insert_slice of
// what was computed in that slice (a ring's chunk, computed in place).
// Fills stay shared: cloned where nothing folds them they would be kernels.
// RUN: braid-opt %s -split-input-file --pass-pipeline="builtin.module(func.func(braid-unshare-placeholders))" | FileCheck %s

// CHECK-LABEL: func.func @layers(
// CHECK: %[[EA:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NEXT: %[[EF:.*]] = tensor.empty() : tensor<8x8xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%{{.*}}) outs(%[[EF]] : tensor<8x8xf32>)
// CHECK-NEXT: %[[M0:.*]] = linalg.matmul ins(%arg0, %arg1 : {{.*}}) outs(%[[F]] : tensor<8x8xf32>)
// CHECK-NEXT: %[[M1:.*]] = linalg.matmul ins(%[[M0]], %arg1 : {{.*}}) outs(%[[F]] : tensor<8x8xf32>)
// CHECK-NEXT: linalg.add ins(%[[M0]], %[[M1]] : {{.*}}) outs(%[[EA]] : tensor<8x8xf32>)
// CHECK-NOT: tensor.empty
func.func @layers(%x: tensor<8x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %a = linalg.matmul ins(%x, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %b = linalg.matmul ins(%a, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = linalg.add ins(%a, %b : tensor<8x8xf32>, tensor<8x8xf32>) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %c : tensor<8x8xf32>
}

// -----

// Two rings' first chunks, each filled in a slice of the same empty and
// inserted back into it: each ring keeps one empty for its slice and its
// insert, the second ring gets its own.
// CHECK-LABEL: func.func @rings(
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<16x8xf32>
// CHECK-NEXT: %[[E0:.*]] = tensor.empty() : tensor<16x8xf32>
// CHECK-NEXT: tensor.extract_slice %[[E0]][%arg2, 0]
// CHECK: tensor.insert_slice %{{.*}} into %[[E0]][%arg2, 0]
// CHECK-NEXT: tensor.extract_slice %[[E1]][%arg2, 0]
// CHECK: tensor.insert_slice %{{.*}} into %[[E1]][%arg2, 0]
// CHECK-NOT: tensor.empty
func.func @rings(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %at: index) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x8xf32>
  %s0 = tensor.extract_slice %e[%at, 0] [4, 8] [1, 1] : tensor<16x8xf32> to tensor<4x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%s0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f0 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = tensor.insert_slice %m0 into %e[%at, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<16x8xf32>
  %s1 = tensor.extract_slice %e[%at, 0] [4, 8] [1, 1] : tensor<16x8xf32> to tensor<4x8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%s1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%f1 : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r1 = tensor.insert_slice %m1 into %e[%at, 0] [4, 8] [1, 1] : tensor<4x8xf32> into tensor<16x8xf32>
  return %r0, %r1 : tensor<16x8xf32>, tensor<16x8xf32>
}
