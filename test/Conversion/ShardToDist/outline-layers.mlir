// braid-outline-layers turns a repeated stretch of a function's body into
// one private function called once per repetition: identical layers make
// one function and one call per layer; layers that differ in shape,
// attributes or wiring stay apart; operand-free pure ops the layers share
// (constants, empties) are cloned in, a constant that differs per layer is
// passed; values read after a layer are its results.
// RUN: braid-opt %s -split-input-file --braid-outline-layers | FileCheck %s

shard.grid @g(shape = 4)

// Three identical tensor-parallel layers (all-reduce of a row-sharded
// product, bias, residual), between a prologue and an epilogue.
// CHECK-LABEL: func.func @three(
// CHECK-SAME: %[[X:[^:]*]]: tensor<8x16xf32>, %[[W0:[^:]*]]: tensor<16x16xf32>, %[[W1:[^:]*]]: tensor<16x16xf32>, %[[W2:[^:]*]]: tensor<16x16xf32>, %[[B:[^:]*]]: tensor<16xf32>
// CHECK: %[[P:.*]] = linalg.exp
// CHECK-NEXT: %[[L0:.*]] = call @three_layer(%[[P]], %[[W0]], %[[B]]) : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[L1:.*]] = call @three_layer(%[[L0]], %[[W1]], %[[B]])
// CHECK-NEXT: %[[L2:.*]] = call @three_layer(%[[L1]], %[[W2]], %[[B]])
// CHECK-NEXT: %[[E:.*]] = linalg.exp ins(%[[L2]]
// CHECK-NEXT: return %[[E]]
// CHECK: func.func private @three_layer(%[[LX:.*]]: tensor<8x16xf32>, %[[LW:.*]]: tensor<16x16xf32>, %[[LB:.*]]: tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[EMPTY:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]]
// CHECK-NEXT: %[[M:.*]] = linalg.matmul ins(%[[LX]], %[[LW]] : {{.*}}) outs(%[[F]]
// CHECK-NEXT: %[[R:.*]] = dist.all_reduce %[[M]]
// CHECK-NEXT: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[R]], %[[LB]], %[[LX]] : {{.*}}) outs(%[[EMPTY]]
// CHECK: return %[[Y]] : tensor<8x16xf32>
// CHECK-NOT: func.func
#row = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>
func.func @three(%x: tensor<8x16xf32>, %w0: tensor<16x16xf32>,
                 %w1: tensor<16x16xf32>, %w2: tensor<16x16xf32>,
                 %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %p = linalg.exp ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%p, %w0 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r0 = dist.all_reduce %m0 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y0 = linalg.generic {indexing_maps = [#row, #bias, #row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%r0, %b, %p : tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %c: f32, %res: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%y0, %w1 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r1 = dist.all_reduce %m1 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = linalg.generic {indexing_maps = [#row, #bias, #row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%r1, %b, %y0 : tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %c: f32, %res: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m2 = linalg.matmul ins(%y1, %w2 : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r2 = dist.all_reduce %m2 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y2 = linalg.generic {indexing_maps = [#row, #bias, #row, #row], iterator_types = ["parallel", "parallel"]}
      ins(%r2, %b, %y1 : tensor<8x16xf32>, tensor<16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %c: f32, %res: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %t = arith.addf %s, %res : f32
    linalg.yield %t : f32
  } -> tensor<8x16xf32>
  %out = linalg.exp ins(%y2 : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %out : tensor<8x16xf32>
}

// -----

shard.grid @g(shape = 4)

// The second layer subtracts where the first adds: not the same layer.
// CHECK-LABEL: func.func @payload(
// CHECK-NOT: call
// CHECK: return
// CHECK-NOT: func.func
func.func @payload(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r0 = dist.all_reduce %m0 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y0 = linalg.add ins(%r0, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%y0, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r1 = dist.all_reduce %m1 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = linalg.sub ins(%r1, %y0 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y1 : tensor<8x16xf32>
}

// -----

shard.grid @g(shape = 4)

// The second layer's all-reduce reads the first layer's product instead of
// its own: the same ops, wired differently.
// CHECK-LABEL: func.func @wiring(
// CHECK-NOT: call
// CHECK: return
// CHECK-NOT: func.func
func.func @wiring(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r0 = dist.all_reduce %m0 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y0 = linalg.add ins(%r0, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%y0, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r1 = dist.all_reduce %m0 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = linalg.add ins(%r1, %y0 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %y1 : tensor<8x16xf32>
}

// -----

shard.grid @g(shape = 4)

// Two layers of one shape, then one of another (a wider product): the two
// alike are outlined, the third stays. Each layer scales by its own
// constant, which becomes an argument; the shared zero is cloned in.
// CHECK-LABEL: func.func @shapes(
// CHECK-DAG: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[L0:.*]] = call @shapes_layer(%arg0, %arg1, %[[HALF]]) : (tensor<8x16xf32>, tensor<16x16xf32>, f32) -> tensor<8x16xf32>
// CHECK-NEXT: %[[L1:.*]] = call @shapes_layer(%[[L0]], %arg1, %[[TWO]])
// CHECK-NEXT: tensor.empty() : tensor<8x32xf32>
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: linalg.matmul ins(%[[L1]], %arg2 : tensor<8x16xf32>, tensor<16x32xf32>)
// CHECK-NEXT: dist.all_reduce
// CHECK: func.func private @shapes_layer(%{{.*}}: tensor<8x16xf32>, %{{.*}}: tensor<16x16xf32>, %[[S:.*]]: f32) -> tensor<8x16xf32>
// CHECK-NEXT: arith.constant 0.000000e+00 : f32
// CHECK: arith.mulf %{{.*}}, %[[S]] : f32
// CHECK-NOT: func.func
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @shapes(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>, %v: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r0 = dist.all_reduce %m0 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r0 : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %half : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%y0, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %r1 = dist.all_reduce %m1 on @g axes = [0] reduce = sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %y1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%r1 : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.mulf %a, %two : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x32xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m2 = linalg.matmul ins(%y1, %v : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f2 : tensor<8x32xf32>) -> tensor<8x32xf32>
  %r2 = dist.all_reduce %m2 on @g axes = [0] reduce = sum : tensor<8x32xf32> -> tensor<8x32xf32>
  return %r2 : tensor<8x32xf32>
}

// -----

shard.grid @g(shape = 4)

// A layer value read two layers later (a long skip connection) and the
// gathered value read after the last layer: both become results.
// CHECK-LABEL: func.func @skip(
// CHECK: %[[A:.*]]:2 = call @skip_layer(%arg0, %arg1) : (tensor<2x16xf32>, tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<2x16xf32>)
// CHECK-NEXT: %[[B:.*]]:2 = call @skip_layer(%[[A]]#1, %arg1)
// CHECK-NEXT: %[[C:.*]]:2 = call @skip_layer(%[[B]]#1, %arg1)
// CHECK-NEXT: linalg.add ins(%[[A]]#0, %[[C]]#0
// CHECK: func.func private @skip_layer(
// CHECK: %[[G:.*]] = dist.all_gather
// CHECK: %[[S:.*]] = dist.reduce_scatter
// CHECK: return %[[G]], %[[S]] : tensor<8x16xf32>, tensor<2x16xf32>
func.func @skip(%x: tensor<2x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x16xf32>
  %g0 = dist.all_gather %x on @g axes = [0] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m0 = linalg.matmul ins(%g0, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s0 = dist.reduce_scatter %m0 on @g axes = [0] dim = 0 reduce = sum : tensor<8x16xf32> -> tensor<2x16xf32>
  %g1 = dist.all_gather %s0 on @g axes = [0] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m1 = linalg.matmul ins(%g1, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f1 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s1 = dist.reduce_scatter %m1 on @g axes = [0] dim = 0 reduce = sum : tensor<8x16xf32> -> tensor<2x16xf32>
  %g2 = dist.all_gather %s1 on @g axes = [0] dim = 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %m2 = linalg.matmul ins(%g2, %w : tensor<8x16xf32>, tensor<16x16xf32>) outs(%f2 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %s2 = dist.reduce_scatter %m2 on @g axes = [0] dim = 0 reduce = sum : tensor<8x16xf32> -> tensor<2x16xf32>
  %sum = linalg.add ins(%g0, %g2 : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %sum : tensor<8x16xf32>
}

// -----

shard.grid @g(shape = 4)

// Repetition without a collective is left alone.
// CHECK-LABEL: func.func @local(
// CHECK-NOT: call
// CHECK-NOT: func.func
func.func @local(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %a = linalg.exp ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %b = linalg.add ins(%a, %x : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %c = linalg.exp ins(%b : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %d = linalg.add ins(%c, %b : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}
