// RUN: braid-opt %s --split-input-file --braid-map-to-gpu="gemm-kernels=1" 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-map-to-gpu="gemm-kernels=1" 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK

// gemm-kernels: a bf16 matmul into f32 after its zero fill, its B a ring
// chunk (a subview at a dynamic offset), becomes one launch of 128 threads
// per 64x64 tile of C (ceil(12 / 64) x ceil(70 / 64) blocks), the fill
// folded: two tiles in dynamic shared memory (64x40 and 32x72 bf16, 9728
// bytes), a loop over K tiles of 32 carrying 32 f32 accumulators, two
// barriers per tile, per k16 step 2 ldmatrix.x4 of A, 4 ldmatrix.x2.trans
// of B and 8 mma.sync, then guarded stores. N = 12 is no multiple of 8,
// so the tiles are copied an element at a time, in one stage.
// CHECK-LABEL: func.func @gemm_chunk
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 70x12x40, from zero (its zero fill folded)
// CHECK-NOT: linalg.fill
// CHECK-NOT: braid_rt_gemm
// CHECK-DAG: %[[GY:.*]] = arith.constant 2 : index
// CHECK-DAG: %[[T:.*]] = arith.constant 128 : index
// CHECK-DAG: %[[BYTES:.*]] = arith.constant 9728 : i32
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{[_0-9]*}}, {{.*}} = %[[GY]], {{.*}} = %c1{{[_0-9]*}}) threads({{.*}}) in ({{.*}} = %[[T]], {{.*}}) dynamic_shared_memory_size %[[BYTES]]
// CHECK: %[[BASE:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)
// CHECK: %[[SA:.*]] = memref.view %[[BASE]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: %[[SB:.*]] = memref.view %[[BASE]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<32x72xbf16, #gpu.address_space<workgroup>>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<70x40xbf16>
// CHECK: memref.store %{{.*}}, %[[SA]]
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<40x12xbf16, strided<[12, 1], offset: ?>>
// CHECK: memref.store %{{.*}}, %[[SB]]
// CHECK: gpu.barrier
// CHECK-COUNT-2: nvgpu.ldmatrix %[[SA]][%{{.*}}, %{{.*}}] {numTiles = 4 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<4x2xbf16>
// CHECK-COUNT-4: nvgpu.ldmatrix %[[SB]][%{{.*}}, %{{.*}}] {numTiles = 2 : i32, transpose = true} : memref<32x72xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK-COUNT-8: llvm.inline_asm has_side_effects "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK: nvgpu.ldmatrix
// CHECK: gpu.barrier
// CHECK: scf.yield
// CHECK-COUNT-32: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<70x12xf32>
// CHECK: gpu.terminator
func.func @gemm_chunk(%a: memref<70x40xbf16>, %b: memref<80x12xbf16>, %c: memref<70x12xf32>, %i: index) {
  %zero = arith.constant 0.0 : f32
  %sub = memref.subview %b[%i, 0] [40, 12] [1, 1] : memref<80x12xbf16> to memref<40x12xbf16, strided<[12, 1], offset: ?>>
  linalg.fill ins(%zero : f32) outs(%c : memref<70x12xf32>)
  linalg.matmul ins(%a, %sub : memref<70x40xbf16>, memref<40x12xbf16, strided<[12, 1], offset: ?>>) outs(%c : memref<70x12xf32>)
  return
}

// -----

// f16 into f16, B stored [n, k], batched, accumulating into its output:
// C's values start the accumulators (extended to f32) and the results are
// truncated back; the batch is the grid's z; B is read transposed.
// CHECK-LABEL: func.func @batched_transposed
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 16x24x8 in 3 batches, reading B transposed, accumulating into its output
// CHECK-DAG: %[[Z:.*]] = arith.constant 3 : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %[[BY:.*]], %[[BZ:.*]]) in ({{.*}}, {{.*}}, {{.*}} = %[[Z]])
// CHECK: memref.load %{{.*}}[%[[BZ]], %{{.*}}, %{{.*}}] : memref<3x16x24xf16>
// CHECK: arith.extf %{{.*}} : f16 to f32
// CHECK: scf.for
// CHECK: memref.load %{{.*}}[%[[BZ]], %{{.*}}, %{{.*}}] : memref<3x24x8xf16>
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK: arith.truncf %{{.*}} : f32 to f16
// CHECK: memref.store %{{.*}}, %{{.*}}[%[[BZ]], %{{.*}}, %{{.*}}] : memref<3x16x24xf16>
func.func @batched_transposed(%a: memref<3x16x8xf16>, %b: memref<3x24x8xf16>, %c: memref<3x16x24xf16>) {
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>, affine_map<(b, m, n, k) -> (b, n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ins(%a, %b : memref<3x16x8xf16>, memref<3x24x8xf16>) outs(%c : memref<3x16x24xf16>)
  return
}

// -----

// f32 operands stay on cuBLASLt, and the remark says why.
// CHECK-LABEL: func.func @f32_stays
// REMARK: remark: not a generated tensor-core kernel: its operands are f32, which the tensor cores multiply as tf32 only (10 bits of mantissa): allow-tf32 allows it
// REMARK: remark: runs on cuBLASLt: 8x8x8
// CHECK: call @braid_rt_gemm
// CHECK-NOT: nvgpu.ldmatrix
func.func @f32_stays(%a: memref<8x8xf32>, %b: memref<8x8xf32>, %c: memref<8x8xf32>) {
  linalg.matmul ins(%a, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32>)
  return
}

// -----

// The elementwise op that alone reads the product (a bias along the
// columns, a ReLU, a residual, the cast to bf16) is applied as the results
// are stored: its output is written, the product's buffer never.
// CHECK-LABEL: func.func @epilogue
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 32x24x16, from zero (its zero fill folded), with the elementwise op after it (4 ops on 3 operands) as its epilogue, writing bf16
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch
// CHECK: mma.sync
// CHECK: scf.yield
// CHECK: scf.if
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<24xf32>
// CHECK: memref.load %{{.*}}[%{{.*}}, %{{.*}}] : memref<32x24xf32>
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK: arith.addf
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<32x24xbf16>
// CHECK-NOT: memref.store {{.*}} : memref<32x24xf32>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @epilogue(%a: memref<32x16xbf16>, %b: memref<16x24xbf16>, %bias: memref<24xf32>, %res: memref<32x24xf32>, %out: memref<32x24xbf16>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x24xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<32x24xf32>)
  linalg.matmul ins(%a, %b : memref<32x16xbf16>, memref<16x24xbf16>) outs(%c : memref<32x24xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%c, %bias, %res : memref<32x24xf32>, memref<24xf32>, memref<32x24xf32>) outs(%out : memref<32x24xbf16>) {
  ^bb0(%p: f32, %q: f32, %r: f32, %o: bf16):
    %u = arith.addf %p, %q : f32
    %v = arith.maximumf %u, %zero : f32
    %w = arith.addf %v, %r : f32
    %t = arith.truncf %w : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<32x24xf32>
  return
}

// -----

// A product that something else reads too (a copy) is stored, and the
// elementwise op after it stays a kernel of its own.
// CHECK-LABEL: func.func @two_readers
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 32x24x16, from zero (its zero fill folded){{$}}
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<32x24xf32>
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK: arith.maximumf
func.func @two_readers(%a: memref<32x16xbf16>, %b: memref<16x24xbf16>, %out: memref<32x24xf32>, %copy: memref<32x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x24xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<32x24xf32>)
  linalg.matmul ins(%a, %b : memref<32x16xbf16>, memref<16x24xbf16>) outs(%c : memref<32x24xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%c : memref<32x24xf32>) outs(%out : memref<32x24xf32>) {
  ^bb0(%p: f32, %o: f32):
    %v = arith.maximumf %p, %zero : f32
    linalg.yield %v : f32
  }
  memref.copy %c, %copy : memref<32x24xf32> to memref<32x24xf32>
  memref.dealloc %c : memref<32x24xf32>
  return
}

// -----

// K and N multiples of 8, B stored [n][k] (x @ w^T): the K tiles come in
// by cp.async (nvgpu.device_async_copy of 8 elements, zero-filled past the
// edges), two stages of 64x40 A and 64x40 B tiles (20480 bytes), when a
// run-time check finds both operands' starts 16-byte aligned and their row
// strides multiples of 8; else the one-stage element copies. B's tile
// keeps B's layout, its fragments by ldmatrix without .trans.
// CHECK-LABEL: func.func @pipelined
// REMARK: remark: runs as a generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 96x40x48, reading B transposed, from zero (its zero fill folded)
// CHECK-DAG: %[[BYTES:.*]] = arith.constant 20480 : i32
// CHECK: gpu.launch {{.*}} dynamic_shared_memory_size %[[BYTES]]
// CHECK: memref.extract_strided_metadata
// CHECK: memref.extract_aligned_pointer_as_index
// CHECK: arith.andi
// CHECK: = scf.if %{{.*}} -> (f32,
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1} : memref<96x48xbf16> to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: nvgpu.device_async_copy %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}[%{{.*}}, %{{.*}}], 8, %{{.*}} {bypassL1} : memref<40x48xbf16> to memref<64x40xbf16, #gpu.address_space<workgroup>>
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: scf.for
// CHECK: scf.if
// CHECK: nvgpu.device_async_copy
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;"
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 1;"
// CHECK: gpu.barrier
// CHECK: nvgpu.ldmatrix %{{.*}}[%{{.*}}, %{{.*}}] {numTiles = 2 : i32, transpose = false} : memref<64x40xbf16, #gpu.address_space<workgroup>> -> vector<2x2xbf16>
// CHECK: mma.sync
// CHECK: } else {
// CHECK-NOT: nvgpu.device_async_copy
// CHECK: scf.for
// CHECK: memref.load
// CHECK: gpu.terminator
func.func @pipelined(%a: memref<96x48xbf16>, %b: memref<40x48xbf16>, %c: memref<96x40xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<96x40xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] ins(%a, %b : memref<96x48xbf16>, memref<40x48xbf16>) outs(%c : memref<96x40xf32>)
  return
}
