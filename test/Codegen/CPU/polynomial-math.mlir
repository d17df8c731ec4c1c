// RUN: braid-opt %s --braid-polynomial-math | FileCheck %s

// exp, tanh, erf and log on vectors and scalars become arithmetic; the
// approximations' own fma and floor become a multiply and add that LLVM may
// contract and an i32 round trip, which the x86-64 baseline vectorizes.
// CHECK-LABEL: func.func @approximated
// CHECK-NOT: math.exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.erf
// CHECK-NOT: math.log
// CHECK-NOT: math.fma
// CHECK-NOT: math.floor
// CHECK: arith.mulf {{.*}} fastmath<contract> : vector<16xf32>
// CHECK: arith.fptosi {{.*}} : vector<16xf32> to vector<16xi32>
// CHECK: return
func.func @approximated(%v: vector<16xf32>, %s: f32) -> (vector<16xf32>, vector<16xf32>, f32, f32) {
  %e = math.exp %v : vector<16xf32>
  %t = math.tanh %v : vector<16xf32>
  %r = math.erf %s : f32
  %l = math.log %s : f32
  return %e, %t, %r, %l : vector<16xf32>, vector<16xf32>, f32, f32
}

// A program's own fma and floor keep their semantics (one rounding; every
// value, -0.0 included).
// CHECK-LABEL: func.func @own
// CHECK: math.fma %arg0, %arg0, %arg0 : vector<16xf32>
// CHECK: math.floor %arg1 : f32
// CHECK-NOT: braid.own_op
func.func @own(%v: vector<16xf32>, %s: f32) -> (vector<16xf32>, f32) {
  %f = math.fma %v, %v, %v : vector<16xf32>
  %g = math.floor %s : f32
  return %f, %g : vector<16xf32>, f32
}
