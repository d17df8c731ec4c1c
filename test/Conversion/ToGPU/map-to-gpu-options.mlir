// Option values the pass cannot honour are errors, not silent misbehaviour.
// RUN: not braid-opt %s --braid-map-to-gpu="block-size=100" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not braid-opt %s --braid-map-to-gpu="block-size=2048" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not braid-opt %s --braid-map-to-gpu="shared-memory-limit=-1" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: braid-opt %s --braid-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=OK
// BLOCK: error: braid-map-to-gpu: block-size must be a multiple of 32 from 32 to 1024
// SMEM: error: braid-map-to-gpu: shared-memory-limit must not be negative
// OK: threads({{.*}}) in (%{{.*}} = %c128
func.func @copy(%x: memref<64xf32>, %y: memref<64xf32>) {
  linalg.copy ins(%x : memref<64xf32>) outs(%y : memref<64xf32>)
  return
}
