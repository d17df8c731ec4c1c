// RUN: braid-opt %s --split-input-file --verify-diagnostics --braid-map-to-gpu="shared-memory-limit=4096"

// Host code may not read what the device computes.
func.func @host_reads_device(%x: memref<16xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %buf = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%buf : memref<16xf32>)
  // expected-error @below {{host code accesses a device buffer; the cuda target runs all compute on the GPU}}
  %v = memref.load %buf[%c0] : memref<16xf32>
  return %v : f32
}

// -----

// A fused kernel's scratch must fit the block's shared memory.
func.func @scratch_too_big(%x: memref<4x2048xf32>, %y: memref<4x2048xf32>) {
  // expected-error @below {{this fused kernel needs 8192 bytes of shared memory per tile, more than the 4096 the target allows; fuse with a smaller row tile}}
  scf.forall (%r) = (0) to (4) step (1) {
    %in = memref.subview %x[%r, 0] [1, 2048] [1, 1] : memref<4x2048xf32> to memref<1x2048xf32, strided<[2048, 1], offset: ?>>
    %out = memref.subview %y[%r, 0] [1, 2048] [1, 1] : memref<4x2048xf32> to memref<1x2048xf32, strided<[2048, 1], offset: ?>>
    %t = memref.alloca() : memref<1x2048xf32>
    linalg.copy ins(%in : memref<1x2048xf32, strided<[2048, 1], offset: ?>>) outs(%t : memref<1x2048xf32>)
    linalg.copy ins(%t : memref<1x2048xf32>) outs(%out : memref<1x2048xf32, strided<[2048, 1], offset: ?>>)
  } {braid.kernel}
  return
}

// -----

// Kernels are sized at compile time.
func.func @dynamic(%x: memref<?xf32>, %y: memref<?xf32>) {
  // expected-error @below {{the cuda target needs static shapes; this op has a dynamic iteration space}}
  linalg.copy ins(%x : memref<?xf32>) outs(%y : memref<?xf32>)
  return
}

// -----

// Fused kernels have static bounds.
func.func @dynamic_kernel(%x: memref<64xf32>, %n: index) {
  // expected-error @below {{the cuda target needs fused kernels with static bounds}}
  scf.forall (%r) = (0) to (%n) step (1) {
  } {braid.kernel}
  return
}

// -----

// Only what a GPU thread can do goes into a kernel.
func.func private @host_only()
func.func @call_in_kernel(%x: memref<64xf32>) {
  scf.forall (%r) = (0) to (64) step (1) {
    // expected-error @below {{cannot be part of a GPU kernel on the cuda target}}
    func.call @host_only() : () -> ()
  } {braid.kernel}
  return
}

// -----

// Scratch must have a size in bytes.
func.func @index_scratch(%y: memref<4x8xindex>) {
  scf.forall (%r) = (0) to (4) step (1) {
    // expected-error @below {{fused-kernel scratch must be a static, identity-layout buffer of integers or floats}}
    %t = memref.alloca() : memref<1x8xindex>
  } {braid.kernel}
  return
}

// -----

// A buffer chosen at run time between an allocation and one the function
// did not allocate: an error, not a host free() of memory it does not
// know. (Two allocations are both on the device: map-to-gpu.mlir.)
func.func @chosen(%c: i1, %x: memref<16xf32>) {
  %a = memref.alloc() : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %s = arith.select %c, %a, %x : memref<16xf32>
  // expected-error @below {{the cuda target cannot tell whether this buffer is on the device or the host}}
  memref.dealloc %s : memref<16xf32>
  return
}

// -----

// A planned buffer that device work writes is in the device arena: host
// code may not read it either.
memref.global "private" @__braid_arena_planned : memref<64xi8> = uninitialized {alignment = 64 : i64}
func.func @host_reads_planned(%x: memref<16xf32>) -> f32 {
  %arena = memref.get_global @__braid_arena_planned : memref<64xi8> {braid.arena}
  %c0 = arith.constant 0 : index
  %buf = memref.view %arena[%c0][] {braid.buffer = 0 : i64} : memref<64xi8> to memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%buf : memref<16xf32>)
  // expected-error @below {{host code accesses a device buffer; the cuda target runs all compute on the GPU}}
  %v = memref.load %buf[%c0] : memref<16xf32>
  return %v : f32
}
