// Bad pass options are errors.
// RUN: not braid-opt %s --braid-overlap=mode=sometimes 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not braid-opt %s --braid-overlap=target-preset=tpu 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: not braid-opt %s --braid-overlap=bidirectional=maybe 2>&1 | FileCheck %s --check-prefix=BIDIR
// RUN: not braid-opt %s --braid-overlap=micro-batches=1 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: not braid-opt %s --braid-overlap="mode=force report=/nonexistent/dir/r.json" 2>&1 | FileCheck %s --check-prefix=REPORT
// MODE: error: braid-overlap: unknown mode 'sometimes', expected auto, force or off
// PRESET: error: braid-overlap: unknown target preset 'tpu', expected cpu, h100 or h200
// BIDIR: error: braid-overlap: unknown bidirectional 'maybe', expected auto, on or off
// MICRO: error: braid-overlap: sub-chunks must be >= 0 and micro-batches 0 or >= 2
// REPORT: error: braid-overlap: cannot write the report:
shard.grid @tp(shape = 2)
