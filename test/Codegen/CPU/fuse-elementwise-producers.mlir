// RUN: braid-opt %s --split-input-file --braid-fuse-elementwise-producers | FileCheck %s

// The cast to f32 before a row max folds into the max; the exponentials,
// which a softmax sums and divides by, stay one op.
// CHECK-LABEL: func.func @softmax_start
// CHECK-NOT: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0 : tensor<4x64xbf16>) outs
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x64xbf16>)
// CHECK:   arith.extf
// CHECK:   arith.maximumf
// CHECK: %[[EXP:.*]] = linalg.generic
// CHECK:   math.exp
// CHECK: linalg.generic {{.*}} ins(%[[EXP]] : tensor<4x64xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[EXP]], %{{.*}} : tensor<4x64xf32>, tensor<4xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @softmax_start(%x: tensor<4x64xbf16>, %init: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x64xf32>) {
  %e = tensor.empty() : tensor<4x64xf32>
  %f = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x64xbf16>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %w = arith.extf %a : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<4x64xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%f : tensor<4x64xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %m : tensor<4x64xbf16>, tensor<4xf32>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%a16: bf16, %b: f32, %o: f32):
    %a = arith.extf %a16 : bf16 to f32
    %d = arith.subf %a, %b : f32
    %v = math.exp %d : f32
    linalg.yield %v : f32
  } -> tensor<4x64xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%ex : tensor<4x64xf32>) outs(%init : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %acc, %a : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%ex, %s : tensor<4x64xf32>, tensor<4xf32>) outs(%e : tensor<4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %v = arith.divf %a, %b : f32
    linalg.yield %v : f32
  } -> tensor<4x64xf32>
  return %s, %y : tensor<4xf32>, tensor<4x64xf32>
}

// -----

// A producer feeding a contraction written as a generic stays: contractions
// go to oneDNN whole.
// CHECK-LABEL: func.func @into_contraction
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @into_contraction(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>, %acc: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %n = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.negf %v : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %p = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%n, %w : tensor<8x16xf32>, tensor<16x4xf32>) outs(%acc : tensor<8x4xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %m = arith.mulf %u, %v : f32
    %s = arith.addf %o, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

// Outputs stay what the program wrote into, also when the payload does not
// read them: here two halves of one buffer (as the fp8 all-gather encodes
// its chunks), which upstream's pattern set would make two empty tensors.
// CHECK-LABEL: func.func @outputs_kept
// CHECK: %[[BUF:.*]] = tensor.empty() : tensor<8x64xi8>
// CHECK: %[[HALF:.*]] = tensor.extract_slice %[[BUF]][0, 0] [8, 32] [1, 1]
// CHECK: linalg.generic {{.*}} outs(%[[HALF]] : tensor<8x32xi8>)
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @outputs_kept(%x: tensor<8x32xf32>) -> tensor<8x32xi8> {
  %buf = tensor.empty() : tensor<8x64xi8>
  %half = tensor.extract_slice %buf[0, 0] [8, 32] [1, 1] : tensor<8x64xi8> to tensor<8x32xi8>
  %q = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x32xf32>) outs(%half : tensor<8x32xi8>) {
  ^bb0(%a: f32, %o: i8):
    %i = arith.fptosi %a : f32 to i8
    linalg.yield %i : i8
  } -> tensor<8x32xi8>
  return %q : tensor<8x32xi8>
}

// -----

// A gather whose body asserts its index in bounds (torch-mlir's gather)
// has side effects, so the generic it fuses into is not dead by itself
// once replaced: the pass erases it (left alive, it was fused again
// without end and the pass failed without a word). One generic remains,
// the gather folded into the weighing.
// CHECK-LABEL: func.func @gather_with_assert
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: cf.assert
// CHECK: tensor.extract
// CHECK: arith.mulf
#id3 = affine_map<(e, t, h) -> (e, t, h)>
#et = affine_map<(e, t, h) -> (e, t)>
func.func @gather_with_assert(%y: tensor<4x6x8xf32>, %rows: tensor<4x8xindex>, %w: tensor<4x8xf32>) -> tensor<4x8x8xf32> {
  %c6 = arith.constant 6 : index
  %e = tensor.empty() : tensor<4x8x8xf32>
  %g = linalg.generic {indexing_maps = [#et, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%rows : tensor<4x8xindex>) outs(%e : tensor<4x8x8xf32>) {
  ^bb0(%row: index, %o: f32):
    %ok = arith.cmpi slt, %row, %c6 : index
    cf.assert %ok, "index must be smaller than dim size"
    %ie = linalg.index 0 : index
    %ih = linalg.index 2 : index
    %v = tensor.extract %y[%ie, %row, %ih] : tensor<4x6x8xf32>
    linalg.yield %v : f32
  } -> tensor<4x8x8xf32>
  %m = linalg.generic {indexing_maps = [#id3, #et, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%g, %w : tensor<4x8x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.mulf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  return %m : tensor<4x8x8xf32>
}

// -----

// torch's safe softmax tests the scores against -inf as f64: the test
// compares the f32 scores with an f32 -inf (exact), so the kernel's vector
// loop is not halved by f64 lanes. The constant may be captured or in the
// body, on either side; 0.1 is not an f32, so that comparison stays wide.
// CHECK-LABEL: func.func @narrowed_comparisons
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN:.*]]: f32, %{{.*}}: i1):
// CHECK-NEXT:   %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT:   %[[T:.*]] = arith.cmpf oeq, %[[IN]], %[[NINF]] : f32
// CHECK-NEXT:   linalg.yield %[[T]]
// CHECK: linalg.generic
// CHECK-NEXT: ^bb0(%[[IN2:.*]]: bf16, %{{.*}}: i1):
// CHECK-NEXT:   %[[TWO:.*]] = arith.constant 2.000000e+00 : bf16
// CHECK-NEXT:   %[[U:.*]] = arith.cmpf olt, %[[TWO]], %[[IN2]] : bf16
// CHECK-NEXT:   linalg.yield %[[U]]
// CHECK: linalg.generic
// CHECK:   arith.extf %{{.*}} : f32 to f64
// CHECK:   arith.cmpf ogt, %{{.*}}, %{{.*}} : f64
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @narrowed_comparisons(%x: tensor<4x64xf32>, %h: tensor<4x64xbf16>) -> (tensor<4x64xi1>, tensor<4x64xi1>, tensor<4x64xi1>) {
  %ninf = arith.constant 0xFFF0000000000000 : f64
  %e = tensor.empty() : tensor<4x64xi1>
  %a = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x64xf32>) outs(%e : tensor<4x64xi1>) {
  ^bb0(%in: f32, %o: i1):
    %w = arith.extf %in : f32 to f64
    %t = arith.cmpf oeq, %w, %ninf : f64
    linalg.yield %t : i1
  } -> tensor<4x64xi1>
  %b = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%h : tensor<4x64xbf16>) outs(%e : tensor<4x64xi1>) {
  ^bb0(%in: bf16, %o: i1):
    %two = arith.constant 2.0 : f32
    %w = arith.extf %in : bf16 to f32
    %t = arith.cmpf olt, %two, %w : f32
    linalg.yield %t : i1
  } -> tensor<4x64xi1>
  %c = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x64xf32>) outs(%e : tensor<4x64xi1>) {
  ^bb0(%in: f32, %o: i1):
    %tenth = arith.constant 0.1 : f64
    %w = arith.extf %in : f32 to f64
    %t = arith.cmpf ogt, %w, %tenth : f64
    linalg.yield %t : i1
  } -> tensor<4x64xi1>
  return %a, %b, %c : tensor<4x64xi1>, tensor<4x64xi1>, tensor<4x64xi1>
}
