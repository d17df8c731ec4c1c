// RUN: braid-opt %s --split-input-file --braid-map-to-gpu="gemm-kernels=1" -mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s
// RUN: braid-opt %s --split-input-file --braid-map-to-gpu="gemm-kernels=1" -mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=REMARK
// RUN: braid-opt %s --split-input-file --braid-map-to-gpu -mlir-print-op-on-diagnostic=false 2>/dev/null | FileCheck %s --check-prefix=LIBRARY
// RUN: braid-opt %s --split-input-file --braid-map-to-gpu -mlir-print-op-on-diagnostic=false 2>&1 >/dev/null | FileCheck %s --check-prefix=LIBRARY-REMARK

shard.grid @tp(shape = 4)

// Three chunk GEMMs of 100x48x32 (two tiles each), the first not waiting,
// the others polling a flag each, at most 4 blocks: one persistent launch
// of 4 blocks over 6 tiles. Each block loops over its tiles (block id,
// then every 4th); a tile's segment picks its operands (the outputs'
// layouts differ in their offsets: cast to a dynamic one) and its polls:
// thread 0 loads the flag with acquire at system scope until it reaches
// the epoch (a wrapping comparison), then the block synchronizes.
// REMARK: remark: runs with 2 more contraction(s) as one persistent generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 4 blocks over 6 tiles, 2 per contraction of 100x48x32, from zero; each tile polls its contraction's flags first
// CHECK-LABEL: func.func @segments
// CHECK-NOT: linalg.fill
// CHECK: %[[O0:.*]] = memref.cast %{{.*}} : memref<100x48xf32, strided<[48, 1]>> to memref<100x48xf32, strided<[48, 1], offset: ?>>
// CHECK: %[[O1:.*]] = memref.cast %{{.*}} : memref<100x48xf32, strided<[48, 1], offset: 4800>> to memref<100x48xf32, strided<[48, 1], offset: ?>>
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c4{{[_0-9]*}}, %{{.*}} = %c1{{[_0-9]*}}, %{{.*}} = %c1{{[_0-9]*}})
// CHECK: scf.for %[[T:.*]] = %[[BX]] to %c6{{[_0-9]*}} step %c4{{[_0-9]*}} {
// CHECK: %[[SEG:.*]] = arith.divui %[[T]], %c2
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : memref<100x32xbf16>
// CHECK: arith.select %{{.*}}, %[[O0]], %{{.*}} : memref<100x48xf32, strided<[48, 1], offset: ?>>
// CHECK: gpu.barrier
// CHECK: %[[IS1:.*]] = arith.cmpi eq, %[[SEG]], %c1
// CHECK: scf.if %[[IS1]] {
// CHECK: scf.while
// CHECK: llvm.inline_asm has_side_effects "ld.acquire.sys.u32 $0, [$1];", "=r,l,~{memory}"
// CHECK: arith.subi
// CHECK: arith.cmpi slt
// CHECK: gpu.barrier
// CHECK: %[[IS2:.*]] = arith.cmpi eq, %[[SEG]], %c2
// CHECK: scf.if %[[IS2]] {
// CHECK: ld.acquire.sys.u32
// CHECK: nvgpu.ldmatrix
// CHECK: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// CHECK: gpu.terminator
// CHECK-NOT: linalg.matmul
// CHECK: return
// Without gemm-kernels: each waiting segment's polls are a one-block
// kernel, and its contraction a cuBLASLt call after it.
// LIBRARY-REMARK: remark: its contractions' flag waits are one-block polling kernels before them, not polls inside a generated GEMM: gemm-kernels is off
// LIBRARY-LABEL: func.func @segments
// LIBRARY: call @braid_rt_gemm
// LIBRARY: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}) threads({{.*}}) in ({{.*}} = %c1{{[_0-9]*}},
// LIBRARY: ld.acquire.sys.u32
// LIBRARY: call @braid_rt_gemm
// LIBRARY: gpu.launch
// LIBRARY: ld.acquire.sys.u32
// LIBRARY: call @braid_rt_gemm
// LIBRARY-NOT: gpu.launch
// LIBRARY: return
func.func @segments(%a: memref<100x32xbf16>, %b: memref<32x48xbf16>, %out: memref<300x48xf32>, %e1: i32, %e2: i32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<4xi32>
  %slot1 = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<100x32xbf16>
  %slot2 = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<100x32xbf16>
  %o0 = memref.subview %out[0, 0] [100, 48] [1, 1] : memref<300x48xf32> to memref<100x48xf32, strided<[48, 1]>>
  %o1 = memref.subview %out[100, 0] [100, 48] [1, 1] : memref<300x48xf32> to memref<100x48xf32, strided<[48, 1], offset: 4800>>
  %o2 = memref.subview %out[200, 0] [100, 48] [1, 1] : memref<300x48xf32> to memref<100x48xf32, strided<[48, 1], offset: 9600>>
  scf.forall (%s) in (3) {
    scf.index_switch %s
    case 0 {
      linalg.fill ins(%zero : f32) outs(%o0 : memref<100x48xf32, strided<[48, 1]>>)
      linalg.matmul ins(%a, %b : memref<100x32xbf16>, memref<32x48xbf16>) outs(%o0 : memref<100x48xf32, strided<[48, 1]>>)
      scf.yield
    }
    case 1 {
      xfer.kernel_wait %flags[%c0] until %e1 step = 1 : memref<4xi32>
      linalg.fill ins(%zero : f32) outs(%o1 : memref<100x48xf32, strided<[48, 1], offset: 4800>>)
      linalg.matmul ins(%slot1, %b : memref<100x32xbf16>, memref<32x48xbf16>) outs(%o1 : memref<100x48xf32, strided<[48, 1], offset: 4800>>)
      scf.yield
    }
    case 2 {
      xfer.kernel_wait %flags[%c1] until %e2 step = 2 : memref<4xi32>
      linalg.fill ins(%zero : f32) outs(%o2 : memref<100x48xf32, strided<[48, 1], offset: 9600>>)
      linalg.matmul ins(%slot2, %b : memref<100x32xbf16>, memref<32x48xbf16>) outs(%o2 : memref<100x48xf32, strided<[48, 1], offset: 9600>>)
      scf.yield
    }
    default {
    }
  } {braid.gemm_segments = 4 : i64, braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

shard.grid @tp(shape = 2)

// Segments the generated GEMM declines (one starts from a zero fill, the
// other accumulates): a polling kernel before the contraction that
// waits, each contraction then mapped on its own (here a generated GEMM
// each), with the reason.
// REMARK: remark: its contractions' flag waits are one-block polling kernels before them, not polls inside a generated GEMM: some of its contractions start from a zero fill and some do not
// REMARK-NOT: runs with
// CHECK-LABEL: func.func @mixed_fills
// CHECK: mma.sync
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}) threads({{.*}}) in ({{.*}} = %c1{{[_0-9]*}},
// CHECK: ld.acquire.sys.u32
// CHECK-NOT: mma.sync
// CHECK: gpu.terminator
// CHECK: mma.sync
func.func @mixed_fills(%a: memref<64x32xf16>, %b: memref<32x48xf16>, %out0: memref<64x48xf16>, %out1: memref<64x48xf16>, %e: i32) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f16
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x32xf16>
  scf.forall (%s) in (2) {
    scf.index_switch %s
    case 0 {
      linalg.fill ins(%zero : f16) outs(%out0 : memref<64x48xf16>)
      linalg.matmul ins(%a, %b : memref<64x32xf16>, memref<32x48xf16>) outs(%out0 : memref<64x48xf16>)
      scf.yield
    }
    case 1 {
      xfer.kernel_wait %flags[%c0] until %e step = 1 : memref<2xi32>
      linalg.matmul ins(%slot, %b : memref<64x32xf16>, memref<32x48xf16>) outs(%out1 : memref<64x48xf16>)
      scf.yield
    }
    default {
    }
  } {braid.gemm_segments = 96 : i64, braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

shard.grid @tp(shape = 2)

// A pushed reduce-scatter's blocks: the first stores into the peer's slot
// and raises its flag from its last tile. After each of its tiles, the
// block synchronizes and thread 0 counts the tile in the segment's arrival
// word (acquire-release at device scope); the tile that completes the
// count (its 2 tiles: the one that saw 1) resets it and raises the peer's
// flag with release at system scope. The own block raises nothing.
// REMARK: remark: runs with 1 more contraction(s) as one persistent generated tensor-core kernel (mma.sync m16n8k16, 64x64x32 tiles): 4 blocks over 4 tiles, 2 per contraction of 64x96x32, from zero; the last tile of each contraction that raises flags raises them
// CHECK-LABEL: func.func @raises
// CHECK: gpu.launch
// CHECK: mma.sync
// CHECK: scf.if
// CHECK: gpu.barrier
// CHECK: atom.acq_rel.gpu.add.u32
// CHECK: arith.cmpi eq, %{{.*}}, %c1_i32
// CHECK: st.relaxed.gpu.u32
// CHECK: red.release.sys.add.u32
// CHECK-NOT: atom.acq_rel.gpu.add.u32
// CHECK: gpu.terminator
// LIBRARY-LABEL: func.func @raises
// LIBRARY: braid_rt_gemm
// LIBRARY: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}}, {{.*}} = %c1{{[_0-9]*}})
// LIBRARY: atom.acq_rel.gpu.add.u32
// LIBRARY: arith.cmpi eq, %{{.*}}, %c0_i32
// LIBRARY: red.release.sys.add.u32
// LIBRARY: gpu.terminator
// LIBRARY: braid_rt_gemm
func.func @raises(%a0: memref<64x32xbf16>, %a1: memref<64x32xbf16>, %b: memref<32x96xbf16>, %own: memref<64x96xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
  %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<64x96xf32>
  %arrivals = xfer.symmetric_alloc on @tp axes = [0] site = 2 : memref<1xi32>
  %peer = xfer.peer_view %slot on @tp axes = [0] offset = 1 : memref<64x96xf32>
  %peerFlags = xfer.peer_view %flags on @tp axes = [0] offset = 1 : memref<2xi32>
  scf.forall (%s) in (2) {
    scf.index_switch %s
    case 0 {
      linalg.fill ins(%zero : f32) outs(%peer : memref<64x96xf32>)
      linalg.matmul ins(%a0, %b : memref<64x32xbf16>, memref<32x96xbf16>) outs(%peer : memref<64x96xf32>)
      xfer.kernel_signal %peerFlags[%c0] arrivals %arrivals[%c0] for %slot step = 0 : memref<2xi32>, memref<1xi32>, memref<64x96xf32>
      scf.yield
    }
    case 1 {
      linalg.fill ins(%zero : f32) outs(%own : memref<64x96xf32>)
      linalg.matmul ins(%a1, %b : memref<64x32xbf16>, memref<32x96xbf16>) outs(%own : memref<64x96xf32>)
      scf.yield
    }
    default {
    }
  } {braid.gemm_segments = 96 : i64, braid.kernel, mapping = [#gpu.block<linear_dim_0>]}
  return
}
