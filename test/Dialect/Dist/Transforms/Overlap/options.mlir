// Bad pass options are errors.
// RUN: not braid-opt %s --braid-overlap=mode=sometimes 2>&1 | FileCheck %s --check-prefix=MODE
// RUN: not braid-opt %s --braid-overlap=target-preset=tpu 2>&1 | FileCheck %s --check-prefix=PRESET
// RUN: not braid-opt %s --braid-overlap=bidirectional=maybe 2>&1 | FileCheck %s --check-prefix=BIDIR
// RUN: not braid-opt %s --braid-overlap=micro-batches=1 2>&1 | FileCheck %s --check-prefix=MICRO
// RUN: not braid-opt %s --braid-overlap=bucket-bytes=-2 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not braid-opt %s --braid-overlap="mode=force report=/nonexistent/dir/r.json" 2>&1 | FileCheck %s --check-prefix=REPORT
// MODE: for the --mode option: Cannot find option named 'sometimes'
// PRESET: for the --target-preset option: Cannot find option named 'tpu'
// BIDIR: for the --bidirectional option: Cannot find option named 'maybe'
// MICRO: error: braid-overlap: micro-batches must be 0 (the model picks) or at least 2
// BUCKET: error: braid-overlap: bucket-bytes must be -1 (no buckets), 0 (the model picks) or positive
// REPORT: error: braid-overlap: cannot write the report:
shard.grid @tp(shape = 2)
