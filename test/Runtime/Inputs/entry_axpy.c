/*===- entry_axpy.c - A hand-written stand-in for a compiled program -------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * Implements braid_entry the way Braid's compiled code does, for braid-exec
 * tests: f(x: f32[4,3], y: bf16[3]) -> f32[4,3] computes 2 * x + y (y
 * broadcast along the rows) on every rank and sums it over all ranks with
 * braid_rt_all_reduce, so that every rank's result depends on every rank's
 * inputs. The result is returned transposed in memory, at an offset, to
 * exercise braid-exec's handling of strided results. Built without linking
 * the runtime: braid_rt_* resolve against the one braid-exec loaded.
 *
 *===----------------------------------------------------------------------===*/

#include "braid/Runtime/braid_rt.h"
#include "memref2.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  void *allocated;
  void *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} MemRef1;

static float bf16ToFloat(uint16_t bits) {
  uint32_t word = (uint32_t)bits << 16;
  float value;
  memcpy(&value, &word, sizeof(value));
  return value;
}

void braid_entry(void **argv) {
  MemRef2 *result = (MemRef2 *)argv[0];
  const MemRef2 *x = (const MemRef2 *)argv[1];
  const MemRef1 *y = (const MemRef1 *)argv[2];
  const float *xData = (const float *)x->aligned + x->offset;
  const uint16_t *yData = (const uint16_t *)y->aligned + y->offset;

  float local[4][3], sum[4][3];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      local[i][j] = 2.0f * xData[i * x->strides[0] + j * x->strides[1]] +
                    bf16ToFloat(yData[j * y->strides[0]]);

  int64_t ranks = braid_rt_world_size();
  int64_t group = braid_rt_group(1, ranks, 1, 1, 1, /*naxes=*/1, 0);
  braid_rt_wait(braid_rt_all_reduce(group, (int64_t)local, (int64_t)sum, 12,
                                    BRAID_RT_F32, BRAID_RT_SUM, /*step=*/0));

  /* Column-major storage after two padding elements. */
  enum { offset = 2 };
  float *storage = (float *)malloc(sizeof(float) * (offset + 12));
  if (!storage)
    braid_rt_abort("entry_axpy: out of memory");
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      storage[offset + j * 4 + i] = sum[i][j];
  result->allocated = storage;
  result->aligned = storage;
  result->offset = offset;
  result->sizes[0] = 4;
  result->sizes[1] = 3;
  result->strides[0] = 1;
  result->strides[1] = 4;
}
