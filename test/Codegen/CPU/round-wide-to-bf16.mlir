// f64 to bf16 truncations: a constant folds to the correctly rounded bf16
// (1 + 2^-8 + 2^-40 is just above a tie, so it rounds up to 1 + 2^-7,
// 1.0078125; through the nearest f32, a tie, it would round to even, 1.0);
// any other goes to f32 rounding to odd, then to bf16. f32 and f16
// truncations are left alone.
// RUN: braid-opt %s --braid-round-wide-to-bf16 | FileCheck %s

// CHECK-LABEL: func.func @constant
// CHECK: %[[C:.*]] = arith.constant 1.007810e+00 : bf16
// CHECK-NOT: arith.truncf
// CHECK: return %[[C]]
func.func @constant() -> bf16 {
  %c = arith.constant 1.0039062500009095 : f64
  %t = arith.truncf %c : f64 to bf16
  return %t : bf16
}

// CHECK-LABEL: func.func @value
// CHECK-SAME: (%[[X:.*]]: vector<4xf64>)
// CHECK: %[[N:.*]] = arith.truncf %[[X]] : vector<4xf64> to vector<4xf32>
// CHECK: %[[B:.*]] = arith.extf %[[N]] : vector<4xf32> to vector<4xf64>
// CHECK: %[[INEXACT:.*]] = arith.cmpf une, %[[B]], %[[X]]
// CHECK: %[[BITS:.*]] = arith.bitcast %[[N]] : vector<4xf32> to vector<4xi32>
// CHECK: %[[BS:.*]] = math.absf %[[B]]
// CHECK: %[[XS:.*]] = math.absf %[[X]]
// CHECK: %[[ABOVE:.*]] = arith.cmpf ogt, %[[BS]], %[[XS]]
// CHECK: %[[NEARER:.*]] = arith.subi %[[BITS]]
// CHECK: %[[FURTHER:.*]] = arith.addi %[[BITS]]
// CHECK: %[[TOWARDS:.*]] = arith.select %[[ABOVE]], %[[NEARER]], %[[FURTHER]]
// CHECK: %[[MOVE:.*]] = arith.andi %[[INEXACT]]
// CHECK: %[[ODD:.*]] = arith.select %[[MOVE]], %[[TOWARDS]], %[[BITS]]
// CHECK: %[[F:.*]] = arith.bitcast %[[ODD]] : vector<4xi32> to vector<4xf32>
// CHECK: arith.truncf %[[F]] : vector<4xf32> to vector<4xbf16>
func.func @value(%x: vector<4xf64>) -> vector<4xbf16> {
  %t = arith.truncf %x : vector<4xf64> to vector<4xbf16>
  return %t : vector<4xbf16>
}

// CHECK-LABEL: func.func @narrow_sources
// CHECK-NEXT: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NEXT: arith.truncf %{{.*}} : f64 to f16
func.func @narrow_sources(%a: f32, %b: f64) -> (bf16, f16) {
  %t = arith.truncf %a : f32 to bf16
  %h = arith.truncf %b : f64 to f16
  return %t, %h : bf16, f16
}
