// RUN: braid-opt %s --split-input-file --braid-vectorize-kernels="interleave=1" --canonicalize | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-vectorize-kernels="vector-bytes=32 interleave=1" --canonicalize | FileCheck %s --check-prefix=NARROW
// RUN: braid-opt %s --split-input-file --braid-vectorize-kernels --canonicalize | FileCheck %s --check-prefix=INTER
// RUN: braid-opt %s --split-input-file --braid-vectorize-kernels="vector-bytes=0" | FileCheck %s --check-prefix=OFF

// A row sum of bf16 into f32: a vector of 16 partial sums (64 bytes of the
// payload's widest type) from zeros, folded into the row's initial value
// after the loop, then the 4 columns that do not fill a vector one by one.
// CHECK-LABEL: func.func @row_sum
// CHECK-DAG: %[[ZEROS:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK: scf.for %[[I:.*]] = %c0 to %c4 step %c1 {
// CHECK:   %[[INIT:.*]] = memref.load %arg1[%[[I]]] : memref<4xf32>
// CHECK:   %[[PARTIAL:.*]] = scf.for %[[J:.*]] = %c0 to %c96 step %c16 iter_args(%[[P:.*]] = %[[ZEROS]]) -> (vector<16xf32>) {
// CHECK:     %[[V:.*]] = vector.load %arg0[%[[I]], %[[J]]] : memref<4x100xbf16>, vector<16xbf16>
// CHECK:     %[[W:.*]] = arith.extf %[[V]] : vector<16xbf16> to vector<16xf32>
// CHECK:     %[[Q:.*]] = arith.addf %[[P]], %[[W]] : vector<16xf32>
// CHECK:     scf.yield %[[Q]]
// CHECK:   %[[R:.*]] = vector.reduction <add>, %[[PARTIAL]], %[[INIT]] fastmath<reassoc> : vector<16xf32> into f32
// CHECK:   %[[T:.*]] = scf.for %{{.*}} = %c96 to %c100 step %c1 iter_args(%{{.*}} = %[[R]]) -> (f32) {
// CHECK:     memref.load %arg0
// CHECK:     arith.addf %{{.*}} : f32
// CHECK:   memref.store %[[T]], %arg1[%[[I]]] : memref<4xf32>
// NARROW-LABEL: func.func @row_sum
// NARROW: vector.load %arg0{{.*}} : memref<4x100xbf16>, vector<8xbf16>
// NARROW: scf.for %{{.*}} = %c96 to %c100
// By default a reduction first takes four vectors per iteration (one
// vector<64xf32>: four independent accumulators once LLVM splits it), then
// single vectors, then single columns: 64 (one iteration, folded) + 32 + 4.
// INTER-LABEL: func.func @row_sum
// INTER-DAG: %[[Z64:.*]] = arith.constant dense<0.000000e+00> : vector<64xf32>
// INTER-DAG: %[[Z16:.*]] = arith.constant dense<0.000000e+00> : vector<16xf32>
// INTER: %[[INIT:.*]] = memref.load %arg1
// INTER: vector.load %arg0{{.*}} : memref<4x100xbf16>, vector<64xbf16>
// INTER: %[[P64:.*]] = arith.addf %{{.*}}, %[[Z64]] : vector<64xf32>
// INTER: %[[R64:.*]] = vector.reduction <add>, %[[P64]], %[[INIT]] fastmath<reassoc> : vector<64xf32> into f32
// INTER: %[[P16:.*]] = scf.for %{{.*}} = %c64 to %c96 step %c16 iter_args(%{{.*}} = %[[Z16]]) -> (vector<16xf32>)
// INTER: %[[R16:.*]] = vector.reduction <add>, %[[P16]], %[[R64]] fastmath<reassoc> : vector<16xf32> into f32
// INTER: scf.for %{{.*}} = %c96 to %c100 step %c1 iter_args(%{{.*}} = %[[R16]]) -> (f32)
// OFF-LABEL: func.func @row_sum
// OFF-NOT: vector
// OFF: linalg.generic
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_sum(%x: memref<4x100xbf16>, %sum: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x100xbf16>) outs(%sum : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A torch-mlir-shaped 3-D activation normalized by a per-row value and
// scaled by a per-column weight: the row operand is loaded once per row and
// broadcast, the weight is loaded as a vector, and the payload (with its
// constant) applies to vectors; 64 columns fill four vectors exactly.
// CHECK-LABEL: func.func @broadcasts
// CHECK-DAG: %[[HALF:.*]] = arith.constant dense<5.000000e-01> : vector<16xf32>
// CHECK: scf.for %[[B:.*]] = %c0 to %c2 step %c1 {
// CHECK:   scf.for %[[S:.*]] = %c0 to %c3 step %c1 {
// CHECK:     %[[ROW:.*]] = memref.load %arg1[%[[B]], %[[S]]] : memref<2x3xf32>
// CHECK:     %[[SPLAT:.*]] = vector.broadcast %[[ROW]] : f32 to vector<16xf32>
// CHECK:     scf.for %[[H:.*]] = %c0 to %c64 step %c16 {
// CHECK:       %[[X:.*]] = vector.load %arg0[%[[B]], %[[S]], %[[H]]] : memref<2x3x64xf32>, vector<16xf32>
// CHECK:       %[[W:.*]] = vector.load %arg2[%[[H]]] : memref<64xf32>, vector<16xf32>
// CHECK:       %[[M:.*]] = arith.mulf %[[X]], %[[SPLAT]] : vector<16xf32>
// CHECK:       %[[N:.*]] = arith.mulf %[[M]], %[[W]] : vector<16xf32>
// CHECK:       %[[O:.*]] = arith.mulf %[[N]], %[[HALF]] : vector<16xf32>
// CHECK:       vector.store %[[O]], %arg3[%[[B]], %[[S]], %[[H]]] : memref<2x3x64xf32>, vector<16xf32>
// CHECK-NOT: linalg.generic
#x = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#r = affine_map<(d0, d1, d2) -> (d0, d1)>
#c = affine_map<(d0, d1, d2) -> (d2)>
func.func @broadcasts(%x: memref<2x3x64xf32>, %inv: memref<2x3xf32>, %w: memref<64xf32>, %y: memref<2x3x64xf32>) {
  linalg.generic {indexing_maps = [#x, #r, #c, #x], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %inv, %w : memref<2x3x64xf32>, memref<2x3xf32>, memref<64xf32>) outs(%y : memref<2x3x64xf32>) {
  ^bb0(%a: f32, %i: f32, %wv: f32, %o: f32):
    %half = arith.constant 0.5 : f32
    %m = arith.mulf %a, %i : f32
    %n = arith.mulf %m, %wv : f32
    %p = arith.mulf %n, %half : f32
    linalg.yield %p : f32
  }
  return
}

// -----

// A keepdim max (torch-mlir's amax(dim=-1, keepdim=True): a constant 0 in
// the output map) starts its partials at -inf, the maximumf's neutral value.
// CHECK-LABEL: func.func @keepdim_max
// CHECK-DAG: %[[NEG:.*]] = arith.constant dense<0xFF800000> : vector<16xf32>
// CHECK: %[[INIT:.*]] = memref.load %arg1[%{{.*}}, %c0] : memref<4x1xf32>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[NEG]]) -> (vector<16xf32>)
// CHECK:   arith.maximumf {{.*}} : vector<16xf32>
// CHECK: vector.reduction <maximumf>, %{{.*}}, %[[INIT]] fastmath<reassoc>
// CHECK: memref.store %{{.*}}, %arg1[%{{.*}}, %c0] : memref<4x1xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#keep = affine_map<(d0, d1) -> (d0, 0)>
func.func @keepdim_max(%x: memref<4x32xf32>, %m: memref<4x1xf32>) {
  linalg.generic {indexing_maps = [#id, #keep], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x32xf32>) outs(%m : memref<4x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %acc, %in : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A fill, and an elementwise op of dynamic extent: its vector loop ends
// where the remainder begins, computed at run time.
// CHECK-LABEL: func.func @fill_and_dynamic
// CHECK: %[[SPLAT:.*]] = vector.broadcast %arg2 : f32 to vector<16xf32>
// CHECK: vector.store %[[SPLAT]], %arg0
// CHECK: %[[N:.*]] = memref.dim %arg1, %c1
// CHECK: %[[REM:.*]] = arith.remui %[[N]], %c16
// CHECK: %[[SPLIT:.*]] = arith.subi %[[N]], %[[REM]]
// CHECK: scf.for %{{.*}} = %c0 to %[[SPLIT]] step %c16
// CHECK:   math.exp %{{.*}} : vector<16xf32>
// CHECK: scf.for %{{.*}} = %[[SPLIT]] to %[[N]] step %c1
// CHECK:   math.exp %{{.*}} : f32
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @fill_and_dynamic(%buf: memref<4x64xf32>, %x: memref<?x?xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%buf : memref<4x64xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x?xf32>) outs(%x : memref<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// What stays for convert-linalg-to-loops: a transpose (the innermost loop
// strides through the input), an innermost extent under one vector, a
// strided innermost dimension, a contraction (its B operand is strided
// along k), and booleans written along the innermost loop (a byte per
// element in memory, a bit per lane in a vector).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: vector.
// CHECK-COUNT-5: linalg.
// CHECK-NOT: vector.
#id = affine_map<(d0, d1) -> (d0, d1)>
#t = affine_map<(d0, d1) -> (d1, d0)>
func.func @left_alone(%x: memref<32x32xf32>, %y: memref<32x32xf32>, %s: memref<32x8xf32>,
                      %z: memref<32x32xf32, strided<[64, 2]>>, %c: memref<32x32xf32>,
                      %mask: memref<32x32xi1>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<32x32xf32>) outs(%mask : memref<32x32xi1>) {
  ^bb0(%a: f32, %m: i1):
    %ninf = arith.constant 0xFF800000 : f32
    %v = arith.cmpf oeq, %a, %ninf : f32
    linalg.yield %v : i1
  }
  linalg.generic {indexing_maps = [#t, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<32x32xf32>) outs(%y : memref<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : memref<32x8xf32>) outs(%s : memref<32x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%z : memref<32x32xf32, strided<[64, 2]>>) outs(%y : memref<32x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  linalg.matmul ins(%x, %y : memref<32x32xf32>, memref<32x32xf32>) outs(%c : memref<32x32xf32>)
  return
}

// -----

// A causal mask from the loop indices (HF's mask, read as a comparison of
// positions, fused into attention's softmax): the innermost index is a
// vector of consecutive indices, an outer one a broadcast; indices are 64
// bits, so 8 lanes.
// CHECK-LABEL: func.func @causal
// CHECK-DAG: %[[STEP:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xindex>
// CHECK: scf.for %[[I:[^ ]*]] =
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: %[[X:.*]] = vector.load
// CHECK: %[[JB:.*]] = vector.broadcast %[[J]] : index to vector<8xindex>
// CHECK: %[[JS:.*]] = arith.addi %[[JB]], %[[STEP]] : vector<8xindex>
// CHECK: %[[IB:.*]] = vector.broadcast %[[I]] : index to vector<8xindex>
// CHECK: %[[KEEP:.*]] = arith.cmpi ule, %[[JS]], %[[IB]] : vector<8xindex>
// CHECK: arith.select %[[KEEP]], %[[X]], %{{.*}} : vector<8xi1>, vector<8xf32>
// CHECK: vector.store
// The columns after the last full vector: the scalar indices.
// CHECK: scf.for %[[R:[^ ]*]] =
// CHECK: arith.cmpi ule, %[[R]], %[[I]] : index
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @causal(%x: memref<32x36xf32>, %y: memref<32x36xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<32x36xf32>) outs(%y : memref<32x36xf32>) {
  ^bb0(%a: f32, %o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %keep = arith.cmpi ule, %j, %i : index
    %ninf = arith.constant 0xFF800000 : f32
    %v = arith.select %keep, %a, %ninf : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// Booleans read or written once per row vectorize (a scalar load or store,
// broadcast or reduced): the "row entirely masked" check of attention's
// softmax reduces into an i1 per row, and the select after it reads that
// flag. Only i1 along the innermost loop stays scalar (@left_alone).
// CHECK-LABEL: func.func @row_flags
// CHECK: %[[START:.*]] = memref.load %{{.*}} : memref<32xi1>
// CHECK: scf.for {{.*}} -> (vector<8xi1>)
// CHECK: arith.cmpf oeq, {{.*}} : vector<8xf64>
// CHECK: arith.andi {{.*}} : vector<8xi1>
// CHECK: vector.reduction <and>, %{{.*}}, %[[START]] {{.*}} : vector<8xi1> into i1
// CHECK: memref.store
// CHECK: %[[FLAG:.*]] = memref.load %{{.*}} : memref<32xi1>
// CHECK: %[[ALL:.*]] = vector.broadcast %[[FLAG]] : i1 to vector<16xi1>
// CHECK: arith.select %[[ALL]], {{.*}} : vector<16xi1>, vector<16xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @row_flags(%x: memref<32x64xf32>, %flag: memref<32xi1>, %y: memref<32x64xf32>, %lowest: f64) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<32x64xf32>) outs(%flag : memref<32xi1>) {
  ^bb0(%a: f32, %all: i1):
    %w = arith.extf %a : f32 to f64
    %is = arith.cmpf oeq, %w, %lowest : f64
    %both = arith.andi %is, %all : i1
    linalg.yield %both : i1
  }
  linalg.generic {indexing_maps = [#row, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%flag, %x : memref<32xi1>, memref<32x64xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%f: i1, %a: f32, %o: f32):
    %zero = arith.constant 0.0 : f32
    %v = arith.select %f, %zero, %a : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// A boolean mask read along the innermost loop (HF's attention masks, a
// byte per element): its bytes loaded through the buffer's address and
// truncated to i1 lanes.
// CHECK-LABEL: func.func @byte_mask
// CHECK: scf.for %[[I:[^ ]*]] =
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %c64
// CHECK: %[[AT:.*]] = arith.addi %[[ROW]], %[[J]]
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index %arg0
// CHECK: %[[ADDR:.*]] = arith.addi %[[BASE]], %[[AT]]
// CHECK: %[[INT:.*]] = arith.index_cast %[[ADDR]] : index to i64
// CHECK: %[[PTR:.*]] = llvm.inttoptr %[[INT]] : i64 to !llvm.ptr
// CHECK: %[[BYTES:.*]] = llvm.load %[[PTR]] {alignment = 1 : i64} : !llvm.ptr -> vector<16xi8>
// CHECK: %[[KEEP:.*]] = arith.trunci %[[BYTES]] : vector<16xi8> to vector<16xi1>
// CHECK: arith.select %[[KEEP]], {{.*}} : vector<16xi1>, vector<16xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @byte_mask(%m: memref<32x64xi1>, %x: memref<32x64xf32>, %y: memref<32x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m, %x : memref<32x64xi1>, memref<32x64xf32>) outs(%y : memref<32x64xf32>) {
  ^bb0(%k: i1, %a: f32, %o: f32):
    %ninf = arith.constant 0xFF800000 : f32
    %v = arith.select %k, %a, %ninf : f32
    linalg.yield %v : f32
  }
  return
}

// -----

// A gather along the innermost loop (torch-mlir's gather, the capacity
// export's combine): the row it reads comes from an operand the innermost
// loop does not index, its last index is the innermost loop's, so each
// vector is one `vector.load` of that row; the bounds assertions on the
// row index are the same for every column, so they stay scalar, once per
// vector, and the weight multiplies the loaded vector (8 lanes: the
// payload's widest type is the 64-bit index).
// CHECK-LABEL: func.func @gather_rows
// CHECK: scf.for
// CHECK: scf.for
// CHECK: %[[ROW:.*]] = memref.load %{{.*}} : memref<4x8xi64>
// CHECK: scf.for %[[J:[^ ]*]] =
// CHECK: %[[I:.*]] = arith.index_cast %[[ROW]] : i64 to index
// CHECK: cf.assert
// CHECK: cf.assert
// CHECK: %[[V:.*]] = vector.load %{{.*}}[%{{.*}}, %[[I]], %[[J]]] : memref<4x6x64xf32>, vector<8xf32>
// CHECK: arith.mulf %{{.*}}, %[[V]] : vector<8xf32>
// CHECK: vector.store
// A row index that varies along the innermost loop is a gather of single
// elements: left alone.
// CHECK-LABEL: func.func @gather_columns
// CHECK-NOT: vector.
#et = affine_map<(e, t, h) -> (e, t)>
#eth = affine_map<(e, t, h) -> (e, t, h)>
func.func @gather_rows(%y: memref<4x6x64xf32>, %rows: memref<4x8xi64>, %w: memref<4x8xf32>, %out: memref<4x8x64xf32>) {
  %c6 = arith.constant 6 : index
  %c0 = arith.constant 0 : i64
  linalg.generic {indexing_maps = [#et, #et, #eth], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%w, %rows : memref<4x8xf32>, memref<4x8xi64>) outs(%out : memref<4x8x64xf32>) {
  ^bb0(%weight: f32, %row: i64, %o: f32):
    %e = linalg.index 0 : index
    %h = linalg.index 2 : index
    %i = arith.index_cast %row : i64 to index
    %below = arith.cmpi slt, %i, %c6 : index
    cf.assert %below, "index must be smaller than dim size"
    %above = arith.cmpi sge, %row, %c0 : i64
    cf.assert %above, "index must be larger or equal to 0"
    %v = memref.load %y[%e, %i, %h] : memref<4x6x64xf32>
    %r = arith.mulf %weight, %v : f32
    linalg.yield %r : f32
  }
  return
}
func.func @gather_columns(%y: memref<4x6x64xf32>, %cols: memref<4x8x64xindex>, %out: memref<4x8x64xf32>) {
  linalg.generic {indexing_maps = [#eth, #eth], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%cols : memref<4x8x64xindex>) outs(%out : memref<4x8x64xf32>) {
  ^bb0(%col: index, %o: f32):
    %e = linalg.index 0 : index
    %t = linalg.index 1 : index
    %c0 = arith.constant 0 : index
    %v = memref.load %y[%e, %c0, %col] : memref<4x6x64xf32>
    linalg.yield %v : f32
  }
  return
}

// -----

// An f32 division by the row's value (a softmax's sum): a product with its
// reciprocal, computed from the row's scalar (once per row after LLVM's
// hoisting), in the vector loop and in the columns left. A bf16 quotient
// and a row value divided by the columns keep their division.
// CHECK-LABEL: func.func @row_quotient
// CHECK: %[[ROW:.*]] = memref.load %arg1[%{{.*}}] : memref<4xf32>
// CHECK: scf.for
// CHECK:   arith.select
// CHECK:   %[[S:.*]] = arith.select %{{.*}} : f32
// CHECK:   %[[DS:.*]] = arith.mulf %[[ROW]], %[[S]] : f32
// CHECK:   %[[R:.*]] = arith.divf %cst{{.*}}, %[[DS]] : f32
// CHECK:   %[[SS:.*]] = vector.broadcast %[[S]] : f32 to vector<16xf32>
// CHECK:   %[[X:.*]] = arith.mulf %{{.*}}, %[[SS]] : vector<16xf32>
// CHECK:   %[[SR:.*]] = vector.broadcast %[[R]] : f32 to vector<16xf32>
// CHECK:   %[[Q:.*]] = arith.mulf %[[X]], %[[SR]] : vector<16xf32>
// CHECK:   vector.store %[[Q]]
// CHECK: scf.for
// CHECK:   %[[RS:.*]] = arith.divf %cst{{.*}}, %{{.*}} : f32
// CHECK:   arith.mulf %{{.*}}, %[[RS]] : f32
// A quotient the same along the row (its numerator captured) stays a
// scalar division, computed once per vector, read by the vector op as a
// broadcast and by uniform ops as the scalar.
// CHECK-LABEL: func.func @captured_numerator
// CHECK: %[[UC:.*]] = arith.divf %cst, %{{.*}} : f32
// CHECK: %[[UCB:.*]] = vector.broadcast %[[UC]] : f32 to vector<16xf32>
// CHECK: arith.addf %[[UCB]], %{{.*}} : vector<16xf32>
// CHECK-LABEL: func.func @uniform_quotient
// CHECK: scf.for
// CHECK:   %[[UQ:.*]] = arith.divf %{{.*}}, %{{.*}} : f32
// CHECK:   %[[UN:.*]] = arith.negf %[[UQ]] : f32
// CHECK:   %[[UB:.*]] = vector.broadcast %[[UN]] : f32 to vector<16xf32>
// CHECK:   arith.mulf %[[UB]], %{{.*}} : vector<16xf32>
// CHECK-LABEL: func.func @quotients_kept
// CHECK: arith.divf %{{.*}}, %{{.*}} : vector<32xbf16>
// CHECK: arith.divf %{{.*}}, %{{.*}} : vector<16xf32>
#qid = affine_map<(d0, d1) -> (d0, d1)>
#qrow = affine_map<(d0, d1) -> (d0)>
func.func @row_quotient(%x: memref<4x100xf32>, %s: memref<4xf32>, %y: memref<4x100xf32>) {
  linalg.generic {indexing_maps = [#qid, #qrow, #qid], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<4x100xf32>, memref<4xf32>) outs(%y : memref<4x100xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %a, %b : f32
    linalg.yield %q : f32
  }
  return
}
func.func @captured_numerator(%s: memref<4xf32>, %x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  %c = arith.constant 448.0 : f32
  linalg.generic {indexing_maps = [#qrow, #qid, #qid], iterator_types = ["parallel", "parallel"]}
      ins(%s, %x : memref<4xf32>, memref<4x64xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%b: f32, %a: f32, %o: f32):
    %q = arith.divf %c, %b : f32
    %r = arith.addf %q, %a : f32
    linalg.yield %r : f32
  }
  return
}
func.func @uniform_quotient(%s: memref<4xf32>, %x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  %c = arith.constant 448.0 : f32
  linalg.generic {indexing_maps = [#qrow, #qid, #qid], iterator_types = ["parallel", "parallel"]}
      ins(%s, %x : memref<4xf32>, memref<4x64xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%b: f32, %a: f32, %o: f32):
    %q = arith.divf %c, %b : f32
    %n = arith.negf %q : f32
    %r = arith.mulf %n, %a : f32
    linalg.yield %r : f32
  }
  return
}
func.func @quotients_kept(%x: memref<4x64xbf16>, %s: memref<4xbf16>, %y: memref<4x64xbf16>,
                          %c: memref<4x64xf32>, %r: memref<4xf32>, %z: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [#qid, #qrow, #qid], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : memref<4x64xbf16>, memref<4xbf16>) outs(%y : memref<4x64xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %o: bf16):
    %q = arith.divf %a, %b : bf16
    linalg.yield %q : bf16
  }
  linalg.generic {indexing_maps = [#qid, #qrow, #qid], iterator_types = ["parallel", "parallel"]}
      ins(%c, %r : memref<4x64xf32>, memref<4xf32>) outs(%z : memref<4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %q = arith.divf %b, %a : f32
    linalg.yield %q : f32
  }
  return
}

// -----

// An exponential (a long polynomial once approximated) runs four vectors
// per iteration, then single vectors and columns; a product alone (LLVM
// unrolls short bodies itself) one vector at a time.
// INTER-LABEL: func.func @interleaved_exp
// INTER: scf.for %{{.*}} = %c0 to %c128 step %c64
// INTER:   math.exp %{{.*}} : vector<64xf32>
// INTER: scf.for %{{.*}} = %c128 to %c176 step %c16
// INTER:   math.exp %{{.*}} : vector<16xf32>
// INTER: scf.for %{{.*}} = %c176 to %c180 step %c1
// INTER:   math.exp %{{.*}} : f32
// INTER: scf.for %{{.*}} = %c0 to %c176 step %c16
// INTER:   arith.mulf %{{.*}} : vector<16xf32>
// INTER-NOT: vector<64xf32>
// INTER: scf.for %{{.*}} = %c176 to %c180 step %c1
#eid = affine_map<(d0, d1) -> (d0, d1)>
func.func @interleaved_exp(%x: memref<2x180xf32>, %y: memref<2x180xf32>, %z: memref<2x180xf32>) {
  linalg.generic {indexing_maps = [#eid, #eid], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2x180xf32>) outs(%y : memref<2x180xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#eid, #eid], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<2x180xf32>) outs(%z : memref<2x180xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = arith.mulf %a, %a : f32
    linalg.yield %e : f32
  }
  return
}
