// The whole pipeline from braid-opt, stage by stage.
// RUN: braid-opt %s --braid-pipeline="stop-after=dist overlap=force" 2>/dev/null | FileCheck %s --check-prefix=DIST
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer overlap=force check-schedule=1 comm=two-sided" 2>/dev/null | FileCheck %s --check-prefix=XFER
// RUN: braid-opt %s --braid-pipeline="stop-after=xfer overlap=force check-schedule=1 comm=symmetric" 2>/dev/null | FileCheck %s --check-prefix=SYM
// RUN: braid-opt %s --braid-pipeline="entry=f overlap=off" 2>/dev/null | FileCheck %s --check-prefix=LLVM
// The target's defaults resolve as in braid-compile: target=cuda decides
// with the h200 preset (it once used cpu's here and h200 in braid-compile).
// RUN: braid-opt %s --braid-pipeline="target=cuda stop-after=dist report=%t.json" -o /dev/null 2>/dev/null
// RUN: FileCheck %s --check-prefix=PRESET < %t.json
// Option errors are one located line, never an abort.
// RUN: not braid-opt %s --braid-pipeline="overlap=sometimes" 2>&1 | FileCheck %s --check-prefix=BAD
// RUN: not braid-opt %s --braid-pipeline="stop-after=dist cuda-path='/opt/cu da" 2>&1 | FileCheck %s --check-prefix=QUOTE
// PRESET: "target_preset": "h200"
// PRESET: "options": {"target": "cuda", {{.*}}"target-preset": "h200"
// BAD: braid-pipeline: option 'overlap' expects auto, force or off, got 'sometimes'
// QUOTE: braid-pipeline: unterminated quote

shard.grid @tp(shape = 2)

// DIST: dist.shift_start
// XFER: xfer.send
// XFER: xfer.recv
// SYM: xfer.symmetric_alloc
// SYM: xfer.put
// SYM: xfer.signal_wait
// SYM: xfer.signal
// SYM-NOT: xfer.send
// LLVM: llvm.call @braid_rt_all_gather
// LLVM: llvm.func @braid_entry
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = linalg.matmul ins(%g, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%z : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
