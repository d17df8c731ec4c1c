// RUN: braid-opt %s --braid-gpu-kernel-scratch --verify-diagnostics

func.func @dynamic_scratch(%n: index) {
  scf.forall (%r) = (0) to (4) step (1) {
    // expected-error @below {{a fused kernel's intermediate must have a static shape on the cuda target (it lives in shared memory, sized at launch); got 'memref<?xf32>'}}
    %t = memref.alloc(%n) : memref<?xf32>
  } {braid.kernel}
  return
}
