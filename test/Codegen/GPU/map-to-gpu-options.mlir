// Option values the pass cannot honour are errors, not silent misbehaviour.
// RUN: not braid-opt %s --braid-map-to-gpu="block-size=100" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not braid-opt %s --braid-map-to-gpu="block-size=2048" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not braid-opt %s --braid-map-to-gpu="shared-memory-limit=-1" 2>&1 | FileCheck %s --check-prefix=SMEM
// RUN: not braid-opt %s --braid-map-to-gpu="sm-count=0" 2>&1 | FileCheck %s --check-prefix=SMS
// RUN: braid-opt %s --braid-map-to-gpu="block-size=128" | FileCheck %s --check-prefix=OK
// RUN: braid-opt %s --braid-map-to-gpu="block-size=32 sm-count=1" | FileCheck %s --check-prefix=CAP
// BLOCK: error: braid-map-to-gpu: block-size must be a multiple of 32 from 32 to 1024
// SMEM: error: braid-map-to-gpu: shared-memory-limit must not be negative
// SMS: error: braid-map-to-gpu: sm-count must be positive, got 0
// OK: threads({{.*}}) in (%{{.*}} = %c128
// 16384 vectors of 32 threads would be 512 blocks; one SM of 64 blocks of
// 32 threads, 4 waves of it, is 256.
// CAP: gpu.launch blocks({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}} threads({{.*}}) in (%{{.*}} = %c32
func.func @copy(%x: memref<65536xf32>, %y: memref<65536xf32>) {
  linalg.copy ins(%x : memref<65536xf32>) outs(%y : memref<65536xf32>)
  return
}
