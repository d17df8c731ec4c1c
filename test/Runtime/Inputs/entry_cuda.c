/*===- entry_cuda.c - A hand-written stand-in for a cuda program -----------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * Implements braid_entry the way Braid's code for the cuda target does, for
 * braid-exec-cuda tests: device buffers from mgpuMemAlloc, transfers and a
 * GEMM through the runtime, no host access to device memory. For x: f32[4,4]
 * on each of the ranks, it returns
 *   0: all_gather(x)            f32[ranks*4, 4]
 *   1: all_reduce(x, sum)       f32[4,4]
 *   2: x of the previous rank   f32[4,4]   (a ring step: send +1, recv -1)
 *   3: x . x^T + 1 (row bias)   f32[4,4]   (braid_rt_gemm, bias epilogue)
 * Built without linking the runtime: braid_rt_* and mgpu* resolve against
 * the one braid-exec-cuda loaded. Ranks are 1 or 2 (the manifests).
 *
 *===----------------------------------------------------------------------===*/

#include "braid/Runtime/braid_rt.h"
#include "memref2.h"

#include <stdbool.h>
#include <stddef.h>

void *mgpuMemAlloc(uint64_t sizeBytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream);
void *mgpuStreamCreate(void);


static void *deviceBuffer(void *stream, int64_t floats, float value) {
  void *buffer = mgpuMemAlloc((uint64_t)floats * 4, stream, false);
  union {
    float f;
    unsigned u;
  } bits = {value};
  mgpuMemset32(buffer, bits.u, (size_t)floats, stream);
  return buffer;
}

static void setResult(MemRef2 *result, void *data, int64_t rows) {
  result->allocated = data;
  result->aligned = data;
  result->offset = 0;
  result->sizes[0] = rows;
  result->sizes[1] = 4;
  result->strides[0] = 4;
  result->strides[1] = 1;
}

void braid_entry(void **argv) {
  MemRef2 *results = (MemRef2 *)argv[0];
  const MemRef2 *x = (const MemRef2 *)argv[1];
  void *stream = mgpuStreamCreate();
  int64_t ranks = braid_rt_world_size();
  int64_t group = braid_rt_group(1, ranks, 1, 1, 1, /*naxes=*/1, 0);

  /* The input (managed memory) copied to device memory first, as compiled
   * code does with its arguments. */
  void *input = deviceBuffer(stream, 16, 0.0f);
  mgpuMemcpy(input, (float *)x->aligned + x->offset, 64, stream);

  void *gathered = deviceBuffer(stream, ranks * 16, -1.0f);
  void *reduced = deviceBuffer(stream, 16, -1.0f);
  void *shifted = deviceBuffer(stream, 16, -1.0f);
  void *product = deviceBuffer(stream, 16, 0.0f);
  void *bias = deviceBuffer(stream, 4, 1.0f);

  int64_t requests[4];
  requests[0] = braid_rt_all_gather(group, (int64_t)input, (int64_t)gathered,
                                    64, /*step=*/1);
  requests[1] = braid_rt_all_reduce(group, (int64_t)input, (int64_t)reduced, 16,
                                    BRAID_RT_F32, BRAID_RT_SUM, /*step=*/2);
  /* The ring step posts its send before its receive, as compiled rings do. */
  requests[2] = braid_rt_send(group, +1, (int64_t)input, 64, /*step=*/3);
  requests[3] = braid_rt_recv(group, -1, (int64_t)shifted, 64, /*step=*/3);
  /* Overlapped with the transfers: product = x . x^T + bias. */
  braid_rt_gemm(4, 4, 4, 1, (int64_t)input, 4, 0, BRAID_RT_F32, 0,
                (int64_t)input, 4, 0, BRAID_RT_F32, 1, (int64_t)product, 4, 0,
                BRAID_RT_F32, /*accumulate=*/1, /*epilogue=*/1, (int64_t)bias,
                /*step=*/4);
  for (int i = 0; i < 4; ++i)
    braid_rt_wait(requests[i]);
  /* Stream-ordered after the GEMM and (through the waits) the transfers. */
  mgpuMemFree(input, stream);
  mgpuMemFree(bias, stream);

  setResult(&results[0], gathered, ranks * 4);
  setResult(&results[1], reduced, 4);
  setResult(&results[2], shifted, 4);
  setResult(&results[3], product, 4);
}
