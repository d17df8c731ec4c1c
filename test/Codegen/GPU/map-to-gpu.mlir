// RUN: braid-opt %s --split-input-file --braid-map-to-gpu 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-map-to-gpu 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// A bf16 matmul accumulating into f32, its B a ring chunk (a subview with a
// dynamic offset): one cuBLASLt call with the chunk's address and leading
// dimension read from its strided metadata.
// CHECK-LABEL: func.func @gemm_chunk
// REMARK: remark: runs on cuBLASLt: 4x12x16
// CHECK: memref.extract_strided_metadata %arg0 : memref<4x16xbf16>
// CHECK: %{{.*}}, %[[OFF:.*]], %{{.*}}:2, %[[STRIDES:.*]]:2 = memref.extract_strided_metadata %subview : memref<16x12xbf16, strided<[12, 1], offset: ?>>
// CHECK: %[[BASE:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFF]], %c2
// CHECK: %[[ADDR:.*]] = arith.addi %[[BASE]], %[[BYTES]]
// CHECK: %[[ADDR64:.*]] = arith.index_cast %[[ADDR]]
// CHECK: %[[LD:.*]] = arith.index_cast %[[STRIDES]]#0
// (m, n, k, batch; A: address, lda, batch stride, bf16, not transposed;
// B: ...; C: f32, accumulating; no epilogue, no bias, no step)
// CHECK: call @braid_rt_gemm(%c4_i64{{[_0-9]*}}, %c12_i64{{[_0-9]*}}, %c16_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %[[ADDR64]], %[[LD]], %{{[^,]*}}, %c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c0_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64{{[_0-9]*}})
// CHECK-NOT: linalg.matmul
// CHECK: func.func private @braid_rt_gemm(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
func.func @gemm_chunk(%a: memref<4x16xbf16>, %b: memref<32x12xbf16>, %c: memref<4x12xf32>, %i: index) {
  %sub = memref.subview %b[%i, 0] [16, 12] [1, 1] : memref<32x12xbf16> to memref<16x12xbf16, strided<[12, 1], offset: ?>>
  linalg.matmul ins(%a, %sub : memref<4x16xbf16>, memref<16x12xbf16, strided<[12, 1], offset: ?>>) outs(%c : memref<4x12xf32>)
  return
}

// -----

// B stored [n, k] (x @ w^T) is a transposed operand, not a kernel; a
// batch_matmul is one strided-batched call.
// CHECK-LABEL: func.func @gemm_layouts
// REMARK: remark: runs on cuBLASLt: 8x32x64
// REMARK: remark: runs on cuBLASLt: 16x8x4 in 3 batches
// The first: f16, B transposed (its flag is the 14th argument).
// CHECK: call @braid_rt_gemm(%c8_i64{{[_0-9]*}}, %c32_i64{{[_0-9]*}}, %c64_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %c2_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}},
// The second: three batches, batch strides from the metadata.
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}:3, %[[PS:.*]]:3 = memref.extract_strided_metadata %arg3
// CHECK: %[[PSTRIDE:.*]] = arith.index_cast %[[PS]]#0
// CHECK: call @braid_rt_gemm(%c16_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c4_i64{{[_0-9]*}}, %c3_i64{{[_0-9]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[PSTRIDE]], %c0_i64{{[_0-9]*}}
// CHECK-NOT: linalg.
func.func @gemm_layouts(%x: memref<8x64xf16>, %w: memref<32x64xf16>, %y: memref<8x32xf16>,
                        %p: memref<3x16x4xf32>, %q: memref<3x4x8xf32>, %r: memref<3x16x8xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%x, %w : memref<8x64xf16>, memref<32x64xf16>) outs(%y : memref<8x32xf16>)
  linalg.batch_matmul ins(%p, %q : memref<3x16x4xf32>, memref<3x4x8xf32>) outs(%r : memref<3x16x8xf32>)
  return
}

// -----

// A zero fill right before the product is folded into it (beta = 0: the
// 19th argument says "do not accumulate"); a fill of another value, or one
// with a transfer between, stays.
// REMARK: remark: runs on cuBLASLt: 8x8x16, beta = 0 (its zero fill folded)
// REMARK: remark: runs on cuBLASLt: 8x8x16, beta = 1 (accumulating into its output)
// REMARK: remark: runs on cuBLASLt: 8x8x16, beta = 1 (accumulating into its output)
// CHECK-LABEL: func.func @gemm_zero_fill
// CHECK-NOT: linalg.fill
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64
// CHECK: gpu.launch
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c1_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64
// CHECK: gpu.launch
// CHECK: call @braid_rt_send
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c1_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64
func.func private @braid_rt_send(i64, i64, i64, i64, i64) -> i64
func.func @gemm_zero_fill(%a: memref<8x16xf32>, %b: memref<16x8xf32>, %c: memref<8x8xf32>, %d: memref<8x8xf32>, %e: memref<8x8xf32>, %g: i64) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x8xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>) outs(%c : memref<8x8xf32>)
  linalg.fill ins(%one : f32) outs(%d : memref<8x8xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>) outs(%d : memref<8x8xf32>)
  linalg.fill ins(%zero : f32) outs(%e : memref<8x8xf32>)
  %r = func.call @braid_rt_send(%g, %g, %g, %g, %g) : (i64, i64, i64, i64, i64) -> i64
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>) outs(%e : memref<8x8xf32>)
  return
}

// -----

// A contraction cuBLASLt cannot take (a strided inner dimension) runs as a
// generated kernel, and says why. The launch carries what the trace says
// of it: what it computes, the bytes of its buffers and its flops.
// CHECK-LABEL: func.func @gemm_fallback
// REMARK: remark: runs as a generated kernel, not on cuBLASLt: an operand's innermost stride is not 1
// CHECK: gpu.launch
// CHECK: } {braid.trace = {bytes = 320 : i64, flops = 256 : i64, name = "(matmul)"}}
// CHECK-NOT: braid_rt_gemm
func.func @gemm_fallback(%a: memref<4x32xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>) {
  %sub = memref.subview %a[0, 0] [4, 8] [1, 4] : memref<4x32xf32> to memref<4x8xf32, strided<[32, 4]>>
  linalg.matmul ins(%sub, %b : memref<4x8xf32, strided<[32, 4]>>, memref<8x4xf32>) outs(%c : memref<4x4xf32>)
  return
}

// -----

// Host elementwise work and copies: one grid-stride kernel each; the output
// is not read when the payload does not use it. The grid is sized by the
// loop the threads stride over: 8192 vectors of 4 floats need 32 blocks of
// 256 threads (not 128, one thread per element).
// CHECK-LABEL: func.func @host_elementwise
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %c32{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%[[SX:.*]] = %c256{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK: %[[START:.*]] = arith.muli %[[BX]], %[[SX]]
// CHECK: %[[TID:.*]] = arith.addi %[[START]], %[[TX]]
// CHECK: %[[ALL:.*]] = arith.muli %[[GX]], %[[SX]]
// 16-byte vectors when aligned: 8192 vectors of 4 floats ...
// CHECK: scf.if
// CHECK: scf.for %[[V:.*]] = %[[TID]] to %c8192{{.*}} step %[[ALL]]
// CHECK: arith.remui %[[V]], %c64
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<128x256xf32>, vector<4xf32>
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<128x256xf32>, vector<4xf32>
// CHECK-COUNT-4: arith.addf
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<128x256xf32>, vector<4xf32>
// ... and one element at a time otherwise.
// CHECK: } else {
// CHECK: scf.for %[[P:.*]] = %[[TID]] to %c32768{{.*}} step %[[ALL]]
// CHECK: arith.remui %[[P]], %c256
// CHECK: arith.divui %[[P]], %c256
// CHECK: memref.load
// CHECK-NEXT: memref.load
// CHECK-NEXT: arith.addf
// CHECK-NEXT: memref.store
// CHECK: gpu.terminator
// The copy: 8192 vectors too.
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c32{{.*}},
// CHECK: vector.load
// CHECK: memref.load
// CHECK-NEXT: memref.store
// CHECK-NOT: memref.copy
func.func @host_elementwise(%a: memref<128x256xf32>, %b: memref<128x256xf32>, %c: memref<128x256xf32>, %d: memref<128x256xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : memref<128x256xf32>, memref<128x256xf32>) outs(%c : memref<128x256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  memref.copy %c, %d : memref<128x256xf32> to memref<128x256xf32>
  return
}

// -----

// Grid sizes: a bf16 op over 4096 x 8192 elements has 4 Mi vectors of 8, or
// 16384 blocks of them, capped at 4 waves of 132 SMs x 8 blocks (4224); an
// op that cannot be vectorized (an odd row) is sized by its elements (1000
// x 3 -> 12 blocks); a tiny one still gets a block.
// CHECK-LABEL: func.func @grid_sizes
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c4224{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c256
// CHECK: vector<8xbf16>
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c12{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c256
// CHECK-NOT: vector.load
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads({{.*}}) in (%{{.*}} = %c256
func.func @grid_sizes(%a: memref<4096x8192xbf16>, %b: memref<4096x8192xbf16>,
                      %c: memref<1000x3xf32>, %d: memref<1000x3xf32>,
                      %e: memref<4xf32>, %f: memref<4xf32>) {
  linalg.copy ins(%a : memref<4096x8192xbf16>) outs(%b : memref<4096x8192xbf16>)
  linalg.copy ins(%c : memref<1000x3xf32>) outs(%d : memref<1000x3xf32>)
  linalg.copy ins(%e : memref<4xf32>) outs(%f : memref<4xf32>)
  return
}

// -----

// A fused softmax kernel, one row per tile: one block per row, its scratch
// in dynamic shared memory, both row reductions shared by the block's
// threads (a strided partial each, then gpu.all_reduce), barriers between
// the tile's ops.
// CHECK-LABEL: func.func @fused_softmax
// CHECK: %[[SMEM:.*]] = arith.constant 8224 : i32
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c64{{.*}}, {{.*}} threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%[[SX:.*]] = %c256{{.*}}, {{.*}} dynamic_shared_memory_size %[[SMEM]]
// CHECK: %[[ROW:.*]] = arith.addi
// CHECK: %[[BASE:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: %[[EXP:.*]] = memref.view %[[BASE]][%c0{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1x2048xf32, #gpu.address_space<workgroup>>
// CHECK: %[[MAX:.*]] = memref.view %[[BASE]][%c8192{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<1xf32, #gpu.address_space<workgroup>>
// CHECK: memref.subview %{{.*}}[%[[ROW]], 0]
// The max: a partial per thread, then the block's combine. When the row
// and its stride are 16-byte aligned (checked once, for all threads), each
// thread reads 4 floats at a time; otherwise one.
// CHECK: %[[BASE0:.*]] = memref.extract_aligned_pointer_as_index
// CHECK: %[[START:.*]] = arith.addi %[[BASE0]]
// CHECK: arith.remui %[[START]], %c16
// CHECK: arith.andi
// CHECK: arith.remui %strides#0, %c4
// CHECK: %[[ALIGNED:.*]] = arith.andi
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[PART:.*]] = scf.if %[[ALIGNED]] -> (f32) {
// CHECK:   %[[STEP:.*]] = arith.muli %[[SX]], %c4
// CHECK:   %[[FIRST:.*]] = arith.muli %[[TX]], %c4
// CHECK:   scf.for %{{.*}} = %[[FIRST]] to %c2048{{.*}} step %[[STEP]] iter_args(%[[VACC:.*]] = %[[NEGINF]]) -> (f32)
// CHECK:     %[[VEC:.*]] = vector.load %{{.*}} {alignment = 16 : i64} : memref<1x2048xf32, strided<[2048, 1], offset: ?>>, vector<4xf32>
// CHECK:     %[[L0:.*]] = vector.extract %[[VEC]][0]
// CHECK:     arith.maximumf %[[VACC]], %[[L0]]
// CHECK-COUNT-3: arith.maximumf
// CHECK: } else {
// CHECK:   scf.for %{{.*}} = %[[TX]] to %c2048{{.*}} step %[[SX]] iter_args(%[[ACC:.*]] = %[[NEGINF]]) -> (f32)
// CHECK:     arith.maximumf %[[ACC]]
// CHECK: %[[TOTAL:.*]] = gpu.all_reduce maximumf %[[PART]] uniform
// CHECK: scf.if
// CHECK: arith.maximumf %{{.*}}, %[[TOTAL]]
// CHECK: gpu.barrier
// exp(x - max) into shared memory, 4 lanes per vector:
// CHECK: scf.if
// CHECK: vector.load
// CHECK-COUNT-4: math.exp
// CHECK: %[[LANES:.*]] = vector.from_elements
// CHECK: vector.store %[[LANES]], %[[EXP]]{{.*}} {alignment = 16 : i64} : memref<1x2048xf32, #gpu.address_space<workgroup>>, vector<4xf32>
// CHECK: } else {
// CHECK: math.exp
// CHECK: memref.store %{{.*}}, %[[EXP]]
// CHECK: gpu.barrier
// The sum:
// CHECK: gpu.all_reduce add
// CHECK: gpu.barrier
// CHECK: arith.divf
// CHECK: gpu.barrier
// CHECK: gpu.terminator
// CHECK-NEXT: } {braid.trace = {bytes = 1048576 : i64, flops = 0 : i64, name = "(fill, reduce, exp)"}}
// CHECK-NOT: scf.forall
func.func @fused_softmax(%x: memref<64x2048xf32>, %y: memref<64x2048xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  scf.forall (%r) = (0) to (64) step (1) {
    %in = memref.subview %x[%r, 0] [1, 2048] [1, 1] : memref<64x2048xf32> to memref<1x2048xf32, strided<[2048, 1], offset: ?>>
    %out = memref.subview %y[%r, 0] [1, 2048] [1, 1] : memref<64x2048xf32> to memref<1x2048xf32, strided<[2048, 1], offset: ?>>
    %e = memref.alloca() : memref<1x2048xf32>
    %m = memref.alloca() : memref<1xf32>
    %s = memref.alloca() : memref<1xf32>
    linalg.fill ins(%ninf : f32) outs(%m : memref<1xf32>)
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
        ins(%in : memref<1x2048xf32, strided<[2048, 1], offset: ?>>) outs(%m : memref<1xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %mx = arith.maximumf %acc, %v : f32
      linalg.yield %mx : f32
    }
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
        ins(%in, %m : memref<1x2048xf32, strided<[2048, 1], offset: ?>>, memref<1xf32>) outs(%e : memref<1x2048xf32>) {
    ^bb0(%v: f32, %mx: f32, %o: f32):
      %d = arith.subf %v, %mx : f32
      %ex = math.exp %d : f32
      linalg.yield %ex : f32
    }
    linalg.fill ins(%zero : f32) outs(%s : memref<1xf32>)
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
        ins(%e : memref<1x2048xf32>) outs(%s : memref<1xf32>) {
    ^bb0(%v: f32, %acc: f32):
      %sum = arith.addf %acc, %v : f32
      linalg.yield %sum : f32
    }
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
        ins(%e, %s : memref<1x2048xf32>, memref<1xf32>) outs(%out : memref<1x2048xf32, strided<[2048, 1], offset: ?>>) {
    ^bb0(%v: f32, %sum: f32, %o: f32):
      %q = arith.divf %v, %sum : f32
      linalg.yield %q : f32
    }
  } {braid.kernel}
  return
}

// -----

// A reduction whose combiner the block cannot share (a sum of squares is
// still an add: shared; a max of a product with the accumulator is not)
// runs one thread per output element.
// CHECK-LABEL: func.func @fused_unshared_reduction
// CHECK: gpu.launch
// CHECK-NOT: gpu.all_reduce
// CHECK: scf.for %{{.*}} = %{{.*}} to %c4{{.*}} step %{{.*}} {
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c64{{.*}} step %c1{{.*}} iter_args
func.func @fused_unshared_reduction(%x: memref<16x64xf32>, %y: memref<16xf32>) {
  scf.forall (%r) = (0) to (16) step (4) {
    %in = memref.subview %x[%r, 0] [4, 64] [1, 1] : memref<16x64xf32> to memref<4x64xf32, strided<[64, 1], offset: ?>>
    %out = memref.subview %y[%r] [4] [1] : memref<16xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], iterator_types = ["parallel", "reduction"]}
        ins(%in : memref<4x64xf32, strided<[64, 1], offset: ?>>) outs(%out : memref<4xf32, strided<[1], offset: ?>>) {
    ^bb0(%v: f32, %acc: f32):
      %p = arith.mulf %acc, %v : f32
      %mx = arith.maximumf %p, %acc : f32
      linalg.yield %mx : f32
    }
  } {braid.kernel}
  return
}

// -----

// Buffers: those compute touches are allocated on the device, stream-
// ordered; the host bookkeeping of buffer deallocation stays on the host.
// CHECK-LABEL: func.func @buffers
// CHECK: %[[T0:.*]] = gpu.wait async
// CHECK: %[[BUF:.*]], %[[T1:.*]] = gpu.alloc async [%[[T0]]] () : memref<64xf32>
// CHECK: gpu.wait [%[[T1]]]
// CHECK: %[[BOOK:.*]] = memref.alloc() : memref<2xindex>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[BOOK]]
// CHECK: call @helper
// CHECK: %[[T2:.*]] = gpu.wait async
// CHECK: %[[T3:.*]] = gpu.dealloc async [%[[T2]]] %[[BUF]] : memref<64xf32>
// CHECK: gpu.wait [%[[T3]]]
// CHECK: memref.dealloc %[[BOOK]] : memref<2xindex>
func.func private @helper(memref<?xindex>)
func.func @buffers(%x: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %buf = memref.alloc() {alignment = 64 : i64} : memref<64xf32>
  %book = memref.alloc() : memref<2xindex>
  linalg.copy ins(%x : memref<64xf32>) outs(%buf : memref<64xf32>)
  %p = memref.extract_aligned_pointer_as_index %buf : memref<64xf32> -> index
  memref.store %p, %book[%c0] : memref<2xindex>
  %cast = memref.cast %book : memref<2xindex> to memref<?xindex>
  call @helper(%cast) : (memref<?xindex>) -> ()
  memref.dealloc %buf : memref<64xf32>
  memref.dealloc %book : memref<2xindex>
  return
}

// -----

// A buffer chosen at run time between device allocations (ring
// attention's skipped pieces keep their running buffers: an scf.if, which
// canonicalization may make a select) is freed on the device.
// CHECK-LABEL: func.func @chosen
// CHECK: %[[A:.*]], %{{.*}} = gpu.alloc async
// CHECK: %[[B:.*]], %{{.*}} = gpu.alloc async
// CHECK: %[[C:.*]], %{{.*}} = gpu.alloc async
// CHECK: %[[IF:.*]] = scf.if
// CHECK: %[[S:.*]] = arith.select %{{.*}}, %[[IF]], %[[C]]
// CHECK: gpu.dealloc async [%{{.*}}] %[[S]]
// CHECK-NOT: memref.dealloc
func.func @chosen(%c: i1, %d: i1, %x: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  %b = memref.alloc() : memref<16xf32>
  %e = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  linalg.copy ins(%x : memref<16xf32>) outs(%b : memref<16xf32>)
  linalg.copy ins(%x : memref<16xf32>) outs(%e : memref<16xf32>)
  %r = scf.if %d -> memref<16xf32> {
    scf.yield %a : memref<16xf32>
  } else {
    scf.yield %b : memref<16xf32>
  }
  %s = arith.select %c, %r, %e : memref<16xf32>
  memref.dealloc %s : memref<16xf32>
  return
}

// -----

// Elementwise work on a product that only it reads becomes cuBLASLt's
// epilogue, written straight to its own output: bias + GELU (any spelling
// of the tanh form) is epilogue 2, a ReLU spelled as a select is 5, a cast
// alone is 0 with the output in bf16. An erf GELU (not what cuBLASLt
// computes) and a product read twice stay separate kernels.
// REMARK-LABEL: remark: runs on cuBLASLt: 64x32x16, with the bias + GELU after it as its epilogue, writing 'bf16'
// REMARK: remark: runs on cuBLASLt: 64x32x16, with the ReLU after it as its epilogue, writing 'f32'
// REMARK: remark: runs on cuBLASLt: 64x32x16, with the cast after it as its epilogue, writing 'bf16'
// REMARK: remark: runs on cuBLASLt: 64x32x16, beta = 0 (its zero fill folded){{$}}
// REMARK: remark: runs on cuBLASLt: 64x32x16, beta = 0 (its zero fill folded){{$}}
// CHECK-LABEL: func.func @epilogues
// CHECK: %{{.*}}, %[[DOFF:.*]], %{{.*}}:2, %[[DST:.*]]:2 = memref.extract_strided_metadata %arg4 : memref<64x32xbf16>
// CHECK: memref.extract_strided_metadata %arg3 : memref<32xbf16>
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c2_i64{{[_0-9]*}}, %{{[0-9]+}}, %c-1_i64
// CHECK-NOT: gpu.launch
// CHECK: memref.extract_strided_metadata %arg5 : memref<64x32xf32>
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c5_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64
// CHECK-NOT: gpu.launch
// CHECK: memref.extract_strided_metadata %arg6 : memref<64x32xbf16>
// CHECK: call @braid_rt_gemm({{([^,]*, ?)+}}%c3_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c-1_i64
// The erf GELU, then the product read twice (by the ReLU and the copy).
// CHECK: call @braid_rt_gemm(
// CHECK: gpu.launch
// CHECK: math.erf
// CHECK: call @braid_rt_gemm(
// CHECK: gpu.launch
// CHECK: arith.maximumf
// CHECK: gpu.launch
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @epilogues(%a: memref<64x16xbf16>, %b: memref<16x32xbf16>, %c: index, %bias: memref<32xbf16>,
                     %d: memref<64x32xbf16>, %e: memref<64x32xf32>, %f: memref<64x32xbf16>,
                     %g: memref<64x32xbf16>, %h: memref<64x32xf32>, %k: memref<64x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %c0447 = arith.constant 0.044715 : f32
  %s2pi = arith.constant 0.7978845608 : f32
  %isq2 = arith.constant 0.70710678 : f32
  %acc1 = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc1 : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc1 : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc1, %bias : memref<64x32xf32>, memref<32xbf16>) outs(%d : memref<64x32xbf16>) {
  ^bb0(%x: f32, %bv: bf16, %o: bf16):
    %bf = arith.extf %bv : bf16 to f32
    %y = arith.addf %x, %bf : f32
    %y3 = arith.mulf %y, %y : f32
    %y3b = arith.mulf %y3, %y : f32
    %in = arith.mulf %y3b, %c0447 : f32
    %in2 = arith.addf %y, %in : f32
    %in3 = arith.mulf %in2, %s2pi : f32
    %t = math.tanh %in3 : f32
    %t1 = arith.addf %t, %one : f32
    %hy = arith.mulf %y, %half : f32
    %r = arith.mulf %hy, %t1 : f32
    %rt = arith.truncf %r : f32 to bf16
    linalg.yield %rt : bf16
  }
  memref.dealloc %acc1 : memref<64x32xf32>
  %acc2 = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc2 : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc2 : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc2 : memref<64x32xf32>) outs(%e : memref<64x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %pos = arith.cmpf ogt, %x, %zero : f32
    %r = arith.select %pos, %x, %zero : f32
    linalg.yield %r : f32
  }
  %acc3 = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc3 : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc3 : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc3 : memref<64x32xf32>) outs(%f : memref<64x32xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %r = arith.truncf %x : f32 to bf16
    linalg.yield %r : bf16
  }
  %acc4 = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc4 : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc4 : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc4 : memref<64x32xf32>) outs(%g : memref<64x32xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %s = arith.mulf %x, %isq2 : f32
    %erf = math.erf %s : f32
    %e1 = arith.addf %erf, %one : f32
    %hx = arith.mulf %x, %half : f32
    %r = arith.mulf %hx, %e1 : f32
    %rt = arith.truncf %r : f32 to bf16
    linalg.yield %rt : bf16
  }
  %acc5 = memref.alloc() : memref<64x32xf32>
  linalg.fill ins(%zero : f32) outs(%acc5 : memref<64x32xf32>)
  linalg.matmul ins(%a, %b : memref<64x16xbf16>, memref<16x32xbf16>) outs(%acc5 : memref<64x32xf32>)
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc5 : memref<64x32xf32>) outs(%h : memref<64x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    linalg.yield %r : f32
  }
  linalg.copy ins(%acc5 : memref<64x32xf32>) outs(%k : memref<64x32xf32>)
  return
}

// -----

// bf16 streams 8 elements (16 bytes) per access; a transpose, whose
// accesses are not contiguous along the same loop, is not vectorized.
// CHECK-LABEL: func.func @vector_widths
// CHECK: vector.load %{{.*}} : memref<64x512xbf16>, vector<8xbf16>
// CHECK: vector.store %{{.*}} : memref<64x512xbf16>, vector<8xbf16>
// CHECK: gpu.launch
// CHECK-NOT: vector.load
// CHECK: gpu.terminator
func.func @vector_widths(%x: memref<64x512xbf16>, %y: memref<64x512xbf16>, %t: memref<512x64xbf16>) {
  linalg.copy ins(%x : memref<64x512xbf16>) outs(%y : memref<64x512xbf16>)
  linalg.transpose ins(%x : memref<64x512xbf16>) outs(%t : memref<512x64xbf16>) permutation = [1, 0]
  return
}

// -----

// A reduction of a whole tensor to one value (the largest magnitude that
// fp8 quantization scales by) is one block of 1024 threads walking every
// element linearly, 8 bf16 at a time when aligned, then gpu.all_reduce.
// CHECK-LABEL: func.func @whole_tensor_max
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c1{{.*}}, {{.*}} threads({{.*}}) in (%{{.*}} = %c1024
// CHECK: scf.if
// CHECK: scf.for %[[R:.*]] = %{{.*}} to %c32768{{.*}} step
// CHECK: arith.remui %[[R]], %c512
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<64x512xbf16>, vector<8xbf16>
// CHECK-COUNT-8: math.absf
// CHECK: } else {
// CHECK: gpu.all_reduce maximumf
func.func @whole_tensor_max(%x: memref<64x512xbf16>, %m: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> ()>], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<64x512xbf16>) outs(%m : memref<f32>) {
  ^bb0(%v: bf16, %acc: f32):
    %f = arith.extf %v : bf16 to f32
    %a = math.absf %f : f32
    %r = arith.maximumf %acc, %a : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A contraction whose payload does more than multiply and accumulate (an
// exp on an operand) is not a GEMM; a clamp after a product (ReLU6) is not
// ReLU, so it stays a kernel of its own.
// REMARK: remark: runs as a generated kernel, not on cuBLASLt: its payload does more than accumulate a product of the (extended) operands
// REMARK: remark: runs on cuBLASLt: 16x8x32, beta = 0 (its zero fill folded){{$}}
// CHECK-LABEL: func.func @not_plain
// CHECK: gpu.launch
// CHECK: math.exp
// CHECK: call @braid_rt_gemm
// CHECK: gpu.launch
// CHECK: arith.minimumf
func.func @not_plain(%a: memref<16x32xf32>, %b: memref<32x8xf32>, %c: memref<16x8xf32>, %d: memref<16x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<16x32xf32>, memref<32x8xf32>) outs(%c : memref<16x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %e = math.exp %x : f32
    %p = arith.mulf %e, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  %zero = arith.constant 0.0 : f32
  %six = arith.constant 6.0 : f32
  %acc = memref.alloc() : memref<16x8xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<16x8xf32>)
  linalg.matmul ins(%a, %b : memref<16x32xf32>, memref<32x8xf32>) outs(%acc : memref<16x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<16x8xf32>) outs(%d : memref<16x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    %r = arith.maximumf %x, %zero : f32
    %r6 = arith.minimumf %r, %six : f32
    linalg.yield %r6 : f32
  }
  return
}

// -----

// A constant that device code reads is copied to the device at entry and
// freed before the return.
// CHECK-LABEL: func.func @constant
// CHECK: %[[HOST:.*]] = memref.get_global @table
// CHECK: %[[DEV:.*]], %[[T:.*]] = gpu.alloc async
// CHECK: %[[C:.*]] = gpu.memcpy async [%[[T]]] %[[DEV]], %[[HOST]]
// CHECK: gpu.launch
// CHECK: memref.load %[[DEV]]
// CHECK: gpu.dealloc async [%{{.*}}] %[[DEV]]
// CHECK-NEXT: gpu.wait
// CHECK-NEXT: return
memref.global "private" constant @table : memref<64xf32> = dense<4.0>
func.func @constant(%y: memref<64xf32>) {
  %t = memref.get_global @table : memref<64xf32>
  linalg.copy ins(%t : memref<64xf32>) outs(%y : memref<64xf32>)
  return
}

// -----

// The memory plan's arena: the buffers device work uses view device memory
// the runtime allocates once per rank and arena (keyed by the host
// global's address), never a gpu.alloc per call; a buffer only host
// bookkeeping touches keeps the host global's bytes.
// CHECK: func.func private @braid_rt_device_arena(i64, i64) -> i64
// CHECK-LABEL: func.func @arena
// CHECK: %[[HOST:.*]] = memref.get_global @__braid_arena_arena : memref<4160xi8>
// CHECK: %[[KEYIDX:.*]] = memref.extract_aligned_pointer_as_index %[[HOST]]
// CHECK: %[[KEY:.*]] = arith.index_cast %[[KEYIDX]] : index to i64
// CHECK: %[[ADDR:.*]] = call @braid_rt_device_arena(%[[KEY]], %c4160_i64)
// CHECK: llvm.inttoptr %[[ADDR]]
// CHECK: %[[DEV:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<1 x i64>, array<1 x i64>)> to memref<4160xi8> {braid.arena, braid.device_arena}
// CHECK: %[[A:.*]] = memref.view %[[DEV]][%c0{{.*}}][] {braid.buffer = 0 : i64}
// CHECK: %[[B:.*]] = memref.view %[[DEV]][%c64{{.*}}][] {braid.buffer = 1 : i64}
// CHECK: %[[FLAG:.*]] = memref.view %[[HOST]][%c4096{{.*}}][] {braid.buffer = 2 : i64}
// CHECK-NOT: gpu.alloc
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[FLAG]]
memref.global "private" @__braid_arena_arena : memref<4160xi8> = uninitialized {alignment = 64 : i64}
func.func @arena(%x: memref<16xf32>, %y: memref<16xf32>) {
  %arena = memref.get_global @__braid_arena_arena : memref<4160xi8> {braid.arena}
  %c0 = arith.constant 0 : index
  %c64 = arith.constant 64 : index
  %c4096 = arith.constant 4096 : index
  %a = memref.view %arena[%c0][] {braid.buffer = 0 : i64} : memref<4160xi8> to memref<16xf32>
  %b = memref.view %arena[%c64][] {braid.buffer = 1 : i64} : memref<4160xi8> to memref<16xf32>
  %flag = memref.view %arena[%c4096][] {braid.buffer = 2 : i64} : memref<4160xi8> to memref<1xi64>
  linalg.copy ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  linalg.copy ins(%a : memref<16xf32>) outs(%b : memref<16xf32>)
  linalg.copy ins(%b : memref<16xf32>) outs(%y : memref<16xf32>)
  %one = arith.constant 1 : i64
  memref.store %one, %flag[%c0] : memref<1xi64>
  return
}
