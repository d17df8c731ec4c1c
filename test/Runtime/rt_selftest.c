/*===- rt_selftest.c - Exercises the Braid runtime ABI ---------------------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * Calls every braid_rt_* entry point the way compiled code does and checks
 * the results, on 1-D grids of any size and on a 2x2 grid when run on 4
 * ranks. Each check is agreed on by all ranks; rank 0 prints "OK <name>" or
 * "FAIL <name>" (the failing ranks print details to stderr) and the exit
 * code is non-zero if any check failed.
 *
 * With a mode argument it instead provokes one failure the runtime must
 * report and abort on (see usage()); a rank that is not involved idles until
 * the abort takes it down.
 *
 * Usage: mpirun -np N braid-rt-selftest [MODE] [--trace=FILE]
 *
 *===----------------------------------------------------------------------===*/

#include "braid/Runtime/braid_rt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int64_t rank, size;
static int64_t world; /* The group of all ranks over a 1-D grid. */
static int failures;
static int64_t nextStep = 1000; /* Steps of the selftest's own collectives. */

/*--- Reporting -----------------------------------------------------------*/

static int localOk;
static char current[160];
static const char *prefix = ""; /* Names the group of the checks. */

static void begin(const char *name) {
  snprintf(current, sizeof(current), "%s%s", prefix, name);
  localOk = 1;
}

static void expect(int condition, const char *what, long long index, double got,
                   double want) {
  if (condition)
    return;
  if (localOk) /* The first mismatch of a check is enough to debug it. */
    fprintf(stderr, "rank %lld: %s: %s [%lld]: got %g, expected %g\n",
            (long long)rank, current, what, index, got, want);
  localOk = 0;
}

/* Agrees on the outcome of the current check; rank 0 reports it. */
static void end(void) {
  int32_t failed = !localOk, anyFailed = 0;
  braid_rt_wait(braid_rt_all_reduce(world, (int64_t)&failed,
                                    (int64_t)&anyFailed, 1, BRAID_RT_I32,
                                    BRAID_RT_MAX, nextStep++));
  if (rank == 0) {
    printf("%s %s\n", anyFailed ? "FAIL" : "OK", current);
    fflush(stdout);
  }
  if (anyFailed)
    ++failures;
}

static int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p)
    braid_rt_abort("selftest: out of memory");
  return p;
}

/*--- 16-bit floats (independent of the runtime's implementation) --------*/

static uint32_t bitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float floatOf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float bf16ToFloat(uint16_t h) { return floatOf((uint32_t)h << 16); }
static uint16_t floatToBf16(float f) {
  uint32_t u = bitsOf(f);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float halfToFloat(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v; /* No infinities or NaNs in these tests. */
}
static uint16_t floatToHalf(float f) {
  /* Normal, finite values only, which is all the tests produce. */
  uint16_t sign = f < 0 ? 0x8000 : 0;
  int e;
  float m = frexpf(fabsf(f), &e); /* f = m * 2^e, m in [0.5, 1) */
  if (f == 0)
    return sign;
  /* 11 significant bits, rounded to nearest even by rintf. */
  float scaled = rintf(ldexpf(m, 11));
  if (scaled >= 2048) {
    scaled /= 2;
    ++e;
  }
  return (uint16_t)(sign | (uint16_t)((e + 14) << 10) |
                    ((uint16_t)scaled & 0x3FF));
}

/*--- Typed buffers -------------------------------------------------------*/

static const char *dtypeNames[] = {"f32", "f64", "f16", "bf16",
                                   "i8",  "i16", "i32", "i64"};
static const int dtypeSizes[] = {4, 8, 2, 2, 1, 2, 4, 8};

static void store(int dtype, void *buffer, int64_t i, double value) {
  switch (dtype) {
  case BRAID_RT_F32:
    ((float *)buffer)[i] = (float)value;
    break;
  case BRAID_RT_F64:
    ((double *)buffer)[i] = value;
    break;
  case BRAID_RT_F16:
    ((uint16_t *)buffer)[i] = floatToHalf((float)value);
    break;
  case BRAID_RT_BF16:
    ((uint16_t *)buffer)[i] = floatToBf16((float)value);
    break;
  case BRAID_RT_I8:
    ((int8_t *)buffer)[i] = (int8_t)value;
    break;
  case BRAID_RT_I16:
    ((int16_t *)buffer)[i] = (int16_t)value;
    break;
  case BRAID_RT_I32:
    ((int32_t *)buffer)[i] = (int32_t)value;
    break;
  default:
    ((int64_t *)buffer)[i] = (int64_t)value;
  }
}

static double load(int dtype, const void *buffer, int64_t i) {
  switch (dtype) {
  case BRAID_RT_F32:
    return ((const float *)buffer)[i];
  case BRAID_RT_F64:
    return ((const double *)buffer)[i];
  case BRAID_RT_F16:
    return halfToFloat(((const uint16_t *)buffer)[i]);
  case BRAID_RT_BF16:
    return bf16ToFloat(((const uint16_t *)buffer)[i]);
  case BRAID_RT_I8:
    return ((const int8_t *)buffer)[i];
  case BRAID_RT_I16:
    return ((const int16_t *)buffer)[i];
  case BRAID_RT_I32:
    return ((const int32_t *)buffer)[i];
  default:
    return (double)((const int64_t *)buffer)[i];
  }
}

static int64_t loadInt(int dtype, const void *buffer, int64_t i) {
  return (int64_t)load(dtype, buffer, i);
}

/*--- Point-to-point ------------------------------------------------------*/

/* The ring of an all-gather: n-1 steps, each sending the block received in
 * the step before to position +shift and receiving from -shift. */
static void testRing(const char *name, int64_t group, int64_t n,
                     int64_t position, int64_t shift, int64_t words) {
  begin(name);
  int64_t bytes = words * 8;
  int64_t *current = xmalloc(bytes), *next = xmalloc(bytes);
  for (int64_t i = 0; i < words; ++i)
    current[i] = position * 1000003 + i;
  for (int64_t step = 0; step < n - 1; ++step) {
    int64_t s = braid_rt_send(group, shift, (int64_t)current, bytes, step);
    int64_t r = braid_rt_recv(group, -shift, (int64_t)next, bytes, step);
    braid_rt_wait(r);
    braid_rt_wait(s);
    int64_t from = mod(position - shift * (step + 1), n);
    for (int64_t i = 0; i < words; ++i)
      expect(next[i] == from * 1000003 + i, "block", i, (double)next[i],
             (double)(from * 1000003 + i));
    int64_t *swap = current;
    current = next;
    next = swap;
  }
  free(current);
  free(next);
  end();
}

static void testPointToPointEdges(void) {
  /* Messages with one tag between two ranks match in posting order. */
  begin("send/recv order");
  enum { messages = 4 };
  int64_t out[messages], in[messages], sends[messages], recvs[messages];
  for (int i = 0; i < messages; ++i) {
    out[i] = rank * 100 + i;
    in[i] = -1;
  }
  for (int i = 0; i < messages; ++i) {
    sends[i] = braid_rt_send(world, 1, (int64_t)&out[i], 8, i);
    recvs[i] = braid_rt_recv(world, -1, (int64_t)&in[i], 8, i);
  }
  /* Waiting out of posting order must work too. */
  for (int i = messages; i-- > 0;) {
    braid_rt_wait(recvs[i]);
    braid_rt_wait(sends[i]);
  }
  for (int i = 0; i < messages; ++i)
    expect(in[i] == mod(rank - 1, size) * 100 + i, "message", i, (double)in[i],
           (double)(mod(rank - 1, size) * 100 + i));
  end();

  begin("send/recv self and empty");
  int64_t mine = 7 + rank, back = 0;
  int64_t s = braid_rt_send(world, 0, (int64_t)&mine, 8, 1);
  int64_t r = braid_rt_recv(world, 0, (int64_t)&back, 8, 1);
  int64_t es = braid_rt_send(world, 1, 0, 0, 2);
  int64_t er = braid_rt_recv(world, -1, 0, 0, 2);
  braid_rt_wait(s);
  braid_rt_wait(r);
  braid_rt_wait(es);
  braid_rt_wait(er);
  expect(back == mine, "self", 0, (double)back, (double)mine);
  end();

  begin("send/recv offsets beyond the group");
  /* +n+1 is +1; the receive of -(n+1) is -1. */
  int64_t value = rank, got = -1;
  s = braid_rt_send(world, size + 1, (int64_t)&value, 8, 3);
  r = braid_rt_recv(world, -(size + 1), (int64_t)&got, 8, 3);
  braid_rt_wait(s);
  braid_rt_wait(r);
  expect(got == mod(rank - 1, size), "peer", 0, (double)got,
         (double)mod(rank - 1, size));
  end();
}

/*--- Collectives over bytes ---------------------------------------------*/

static void testAllGather(int64_t group, int64_t n, int64_t position) {
  begin("all_gather");
  enum { words = 5 };
  int32_t src[words], *dst = xmalloc(sizeof(int32_t) * words * n);
  for (int i = 0; i < words; ++i)
    src[i] = (int32_t)(position * 100 + i);
  braid_rt_wait(
      braid_rt_all_gather(group, (int64_t)src, (int64_t)dst, sizeof(src), 1));
  for (int64_t p = 0; p < n; ++p)
    for (int i = 0; i < words; ++i)
      expect(dst[p * words + i] == p * 100 + i, "element", p * words + i,
             dst[p * words + i], (double)(p * 100 + i));
  end();

  begin("all_gather in place");
  for (int64_t i = 0; i < words * n; ++i)
    dst[i] = -1;
  for (int i = 0; i < words; ++i)
    dst[position * words + i] = (int32_t)(position * 100 + i);
  braid_rt_wait(braid_rt_all_gather(group, (int64_t)(dst + position * words),
                                    (int64_t)dst, sizeof(src), 2));
  for (int64_t p = 0; p < n; ++p)
    for (int i = 0; i < words; ++i)
      expect(dst[p * words + i] == p * 100 + i, "element", p * words + i,
             dst[p * words + i], (double)(p * 100 + i));
  free(dst);
  end();
}

static void testAllToAll(int64_t group, int64_t n, int64_t position) {
  enum { words = 3 };
  int64_t count = words * n;
  int32_t *src = xmalloc(4 * count), *dst = xmalloc(4 * count);
  // Into another buffer, then in place (the result over the source).
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    begin(inPlace ? "all_to_all in place" : "all_to_all");
    int32_t *out = inPlace ? src : dst;
    for (int64_t j = 0; j < n; ++j)
      for (int i = 0; i < words; ++i)
        src[j * words + i] = (int32_t)(position * 1000 + j * 10 + i);
    braid_rt_wait(braid_rt_all_to_all(group, (int64_t)src, (int64_t)out,
                                      4 * words, 3 + inPlace));
    for (int64_t j = 0; j < n; ++j)
      for (int i = 0; i < words; ++i)
        expect(out[j * words + i] == j * 1000 + position * 10 + i, "element",
               j * words + i, out[j * words + i],
               (double)(j * 1000 + position * 10 + i));
    end();
  }
  free(src);
  free(dst);
}

static void testBroadcast(int64_t group, int64_t n, int64_t position) {
  begin("broadcast from the last position");
  enum { words = 6 };
  int64_t root = n - 1;
  double src[words], dst[words];
  for (int i = 0; i < words; ++i) {
    src[i] = position == root ? 42.5 + i : -1;
    dst[i] = -2;
  }
  braid_rt_wait(braid_rt_broadcast(group, (int64_t)src, (int64_t)dst,
                                   sizeof(dst), root, 5));
  for (int i = 0; i < words; ++i)
    expect(dst[i] == 42.5 + i, "element", i, dst[i], 42.5 + i);
  end();

  begin("broadcast in place from position 0");
  for (int i = 0; i < words; ++i)
    dst[i] = position == 0 ? 7 * i : -1;
  braid_rt_wait(
      braid_rt_broadcast(group, (int64_t)dst, (int64_t)dst, sizeof(dst), 0, 6));
  for (int i = 0; i < words; ++i)
    expect(dst[i] == 7 * i, "element", i, dst[i], 7.0 * i);
  end();
}

/*--- Reductions ----------------------------------------------------------*/

static const char *reductionNames[] = {"sum",    "max",   "min",   "product",
                                       "bitand", "bitor", "bitxor"};

/* The value position p contributes at element i. Small integers (and
 * halves for floats) keep every result exact in every type, including i8
 * products over 4 ranks. */
static double contribution(int dtype, int reduction, int64_t p, int64_t i) {
  int isFloat = dtype <= BRAID_RT_BF16;
  switch (reduction) {
  case BRAID_RT_PRODUCT: {
    int64_t k = (p + i) % 3;
    return k == 0 ? 2 : k == 1 ? -1 : (isFloat ? 0.5 : 1);
  }
  case BRAID_RT_BITAND:
  case BRAID_RT_BITOR:
  case BRAID_RT_BITXOR:
    return (double)((1 << ((p + i) % 7)) | (i & 3) | 0x40);
  default: {
    double v = (double)(((p * 7 + i * 3) % 11) - 5);
    return isFloat ? v * 0.5 : v;
  }
  }
}

static double combine(int reduction, double a, double b) {
  switch (reduction) {
  case BRAID_RT_SUM:
    return a + b;
  case BRAID_RT_MAX:
    return a > b ? a : b;
  case BRAID_RT_MIN:
    return a < b ? a : b;
  case BRAID_RT_PRODUCT:
    return a * b;
  case BRAID_RT_BITAND:
    return (double)((int64_t)a & (int64_t)b);
  case BRAID_RT_BITOR:
    return (double)((int64_t)a | (int64_t)b);
  default:
    return (double)((int64_t)a ^ (int64_t)b);
  }
}

static double expected(int dtype, int reduction, int64_t n, int64_t i) {
  double acc = contribution(dtype, reduction, 0, i);
  for (int64_t p = 1; p < n; ++p)
    acc = combine(reduction, acc, contribution(dtype, reduction, p, i));
  return acc;
}

static void testReduction(int64_t group, int64_t n, int64_t position, int dtype,
                          int reduction, int scatter) {
  char name[96];
  snprintf(name, sizeof(name), "%s %s %s",
           scatter ? "reduce_scatter" : "all_reduce", dtypeNames[dtype],
           reductionNames[reduction]);
  begin(name);
  int64_t perRank = 5, count = scatter ? perRank * n : perRank;
  int size = dtypeSizes[dtype];
  void *src = xmalloc(size * count), *dst = xmalloc(size * perRank);
  for (int64_t i = 0; i < count; ++i)
    store(dtype, src, i, contribution(dtype, reduction, position, i));
  int64_t step = 100 + dtype * 10 + reduction;
  if (scatter)
    braid_rt_wait(braid_rt_reduce_scatter(group, (int64_t)src, (int64_t)dst,
                                          perRank, dtype, reduction, step));
  else
    braid_rt_wait(braid_rt_all_reduce(group, (int64_t)src, (int64_t)dst,
                                      perRank, dtype, reduction, step));
  for (int64_t i = 0; i < perRank; ++i) {
    int64_t global = scatter ? position * perRank + i : i;
    double want = expected(dtype, reduction, n, global);
    if (dtype <= BRAID_RT_BF16)
      expect(load(dtype, dst, i) == want, "element", i, load(dtype, dst, i),
             want);
    else
      expect(loadInt(dtype, dst, i) == (int64_t)want, "element", i,
             load(dtype, dst, i), want);
  }
  free(src);
  free(dst);
  end();
}

/* Sums whose terms are not exact in 16 bits: the result must be within a
 * few roundings of the float sum of the rounded inputs. */
static void testInexactSum(int64_t group, int64_t n, int64_t position,
                           int dtype, double relativeTolerance) {
  char name[64];
  snprintf(name, sizeof(name), "all_reduce %s sum inexact", dtypeNames[dtype]);
  begin(name);
  enum { count = 64 };
  uint16_t src[count], dst[count];
  for (int i = 0; i < count; ++i)
    store(dtype, src, i, 0.1 * (position + 1) + 0.013 * i);
  braid_rt_wait(braid_rt_all_reduce(group, (int64_t)src, (int64_t)dst, count,
                                    dtype, BRAID_RT_SUM, 200 + dtype));
  for (int i = 0; i < count; ++i) {
    double want = 0;
    for (int64_t p = 0; p < n; ++p) {
      uint16_t rounded;
      store(dtype, &rounded, 0, 0.1 * (p + 1) + 0.013 * i);
      want += load(dtype, &rounded, 0);
    }
    double got = load(dtype, dst, i);
    expect(fabs(got - want) <= relativeTolerance * fabs(want), "element", i,
           got, want);
  }
  end();
}

static void testInPlaceReductions(int64_t group, int64_t n, int64_t position) {
  begin("all_reduce f32 sum in place");
  float values[4];
  for (int i = 0; i < 4; ++i)
    values[i] = (float)(position + i);
  braid_rt_wait(braid_rt_all_reduce(group, (int64_t)values, (int64_t)values, 4,
                                    BRAID_RT_F32, BRAID_RT_SUM, 300));
  for (int i = 0; i < 4; ++i)
    expect(values[i] == n * (n - 1) / 2 + n * i, "element", i, values[i],
           (double)(n * (n - 1) / 2 + n * i));
  end();

  begin("reduce_scatter i64 sum in place");
  int64_t *buffer = xmalloc(8 * 2 * n);
  for (int64_t i = 0; i < 2 * n; ++i)
    buffer[i] = position * 10 + i;
  braid_rt_wait(braid_rt_reduce_scatter(group, (int64_t)buffer, (int64_t)buffer,
                                        2, BRAID_RT_I64, BRAID_RT_SUM, 301));
  for (int64_t i = 0; i < 2; ++i) {
    int64_t global = position * 2 + i;
    int64_t want = 10 * n * (n - 1) / 2 + n * global;
    expect(buffer[i] == want, "element", i, (double)buffer[i], (double)want);
  }
  free(buffer);
  end();

  begin("all_reduce empty");
  braid_rt_wait(
      braid_rt_all_reduce(group, 0, 0, 0, BRAID_RT_F32, BRAID_RT_SUM, 302));
  end();
}

static void testReductions(int64_t group, int64_t n, int64_t position) {
  for (int scatter = 0; scatter <= 1; ++scatter)
    for (int dtype = BRAID_RT_F32; dtype <= BRAID_RT_I64; ++dtype) {
      int lastReduction =
          dtype <= BRAID_RT_BF16 ? BRAID_RT_PRODUCT : BRAID_RT_BITXOR;
      for (int reduction = 0; reduction <= lastReduction; ++reduction)
        testReduction(group, n, position, dtype, reduction, scatter);
    }
  testInexactSum(group, n, position, BRAID_RT_F16, 4e-3);
  testInexactSum(group, n, position, BRAID_RT_BF16, 3e-2);
  testInPlaceReductions(group, n, position);
}

/*--- Many requests in flight --------------------------------------------*/

static void testOverlap(void) {
  begin("overlapping requests");
  enum { words = 1 << 14 };
  int64_t *a = xmalloc(8 * words), *b = xmalloc(8 * words),
          *c = xmalloc(8 * words), *d = xmalloc(8 * words);
  float sum = 0, total = (float)rank;
  for (int i = 0; i < words; ++i) {
    a[i] = rank * words + i;
    c[i] = -rank * words - i;
  }
  int64_t handles[5];
  handles[0] = braid_rt_send(world, 1, (int64_t)a, 8 * words, 0);
  handles[1] = braid_rt_send(world, -1, (int64_t)c, 8 * words, 0);
  handles[2] = braid_rt_all_reduce(world, (int64_t)&total, (int64_t)&sum, 1,
                                   BRAID_RT_F32, BRAID_RT_SUM, 1);
  /* On 2 ranks +1 and -1 name the same peer and tag, so messages match in
   * posting order: the receives are posted in the order of the sends they
   * match (the peer's +1 send first). */
  handles[3] = braid_rt_recv(world, -1, (int64_t)b, 8 * words, 0);
  handles[4] = braid_rt_recv(world, 1, (int64_t)d, 8 * words, 0);
  for (int i = 4; i >= 0; --i)
    braid_rt_wait(handles[i]);
  int64_t left = mod(rank - 1, size), right = mod(rank + 1, size);
  for (int i = 0; i < words; ++i) {
    expect(b[i] == left * words + i, "from the left", i, (double)b[i],
           (double)(left * words + i));
    expect(d[i] == -right * words - i, "from the right", i, (double)d[i],
           (double)(-right * words - i));
  }
  expect(sum == size * (size - 1) / 2, "sum", 0, sum,
         (double)(size * (size - 1) / 2));
  free(a);
  free(b);
  free(c);
  free(d);
  end();
}

/* A symmetric buffer takes part in collectives like any buffer; a signal
 * set on one stream releases a wait for it (on the cpu backend, the same
 * thread: the wait returns at once). */
static void testSymmetricAndSignals(void) {
  begin("symmetric buffer and signals");
  enum { count = 1024 };
  float *mine = (float *)braid_rt_symmetric_alloc(world, 4 * count);
  float *sum = (float *)braid_rt_symmetric_alloc(world, 4 * count);
  expect(((uintptr_t)mine % 4096) == 0, "page-aligned", 0,
         (double)((uintptr_t)mine % 4096), 0);
  for (int i = 0; i < count; ++i)
    mine[i] = (float)(rank + i);
  braid_rt_wait(braid_rt_all_reduce(world, (int64_t)mine, (int64_t)sum, count,
                                    BRAID_RT_F32, BRAID_RT_SUM, nextStep++));
  for (int i = 0; i < count; ++i) {
    double want = size * (size - 1) / 2.0 + (double)size * i;
    expect(sum[i] == want, "sum", i, sum[i], want);
  }
  int32_t *flag = (int32_t *)xmalloc(4);
  *flag = 0;
  braid_rt_signal_set((int64_t)flag, 7, /*stream=*/1, nextStep);
  braid_rt_signal_wait((int64_t)flag, 7, /*stream=*/0, nextStep);
  braid_rt_signal_wait((int64_t)flag, 5, /*stream=*/0, nextStep++);
  expect(*flag == 7, "flag", 0, *flag, 7);
  free(flag);
  braid_rt_symmetric_free(world, (int64_t)sum);
  braid_rt_symmetric_free(world, (int64_t)mine);
  end();
}

/* One-sided ring through a persistent symmetric slot: each round, every
 * rank waits for its credit, puts its value into the next rank's slot with
 * a signal, waits for the data from the previous rank, reads it and gives
 * the previous rank its credit back. Several rounds reuse the slot and the
 * flags, whose epochs only grow. */
static void testOneSided(void) {
  begin("one-sided ring with credits");
  enum { count = 4096, rounds = 5 };
  for (int round = 0; round < rounds; ++round) {
    /* Same site: the same memory every round. */
    float *slot = (float *)braid_rt_symmetric_site(world, 4 * count, 7);
    int32_t *flags = (int32_t *)braid_rt_symmetric_site(world, 8, 8);
    float *mine = (float *)xmalloc(4 * count);
    for (int i = 0; i < count; ++i)
      mine[i] = (float)(1000 * round + 10 * rank + i);
    braid_rt_signal_wait_next((int64_t)&flags[1], /*slack=*/1, nextStep);
    int64_t put = braid_rt_put(world, 1, (int64_t)mine, (int64_t)slot,
                               4 * count, (int64_t)&flags[0], nextStep);
    braid_rt_wait(put);
    braid_rt_signal_wait_next((int64_t)&flags[0], /*slack=*/0, nextStep);
    int64_t from = (rank + size - 1) % size;
    for (int i = 0; i < count; ++i) {
      double want = 1000.0 * round + 10.0 * from + i;
      expect(slot[i] == want, "received", i, slot[i], want);
    }
    braid_rt_signal_add(world, -1, (int64_t)&flags[1], 1, nextStep++);
    /* A peer view reads the same bytes the put wrote. */
    float *next = (float *)braid_rt_symmetric_peer(world, 1, (int64_t)slot);
    expect(next != slot || size == 1, "peer view differs", 0, 0, 0);
    free(mine);
    expect(flags[0] == round + 1, "data epoch", round, flags[0], round + 1);
  }
  end();
}

/*--- Grids ---------------------------------------------------------------*/

static void testCoordinates(void) {
  begin("coord 1-D");
  expect(braid_rt_coord(1, size, 1, 1, 1, 0) == rank, "coordinate", 0,
         (double)braid_rt_coord(1, size, 1, 1, 1, 0), (double)rank);
  expect(braid_rt_group(1, size, 1, 1, 1, 1, 0) == world, "cached handle", 0, 0,
         0);
  expect(braid_rt_world_size() == size, "world size", 0,
         (double)braid_rt_world_size(), (double)size);
  end();
}

/* Checks a group of the 2x2 grid by gathering the members' world ranks in
 * group order, then runs the collectives over it. */
static void testGroup2x2(const char *axesName, int64_t naxes, int64_t packed) {
  int64_t group = braid_rt_group(2, 2, 2, 1, 1, naxes, packed);
  int64_t c[2] = {braid_rt_coord(2, 2, 2, 1, 1, 0),
                  braid_rt_coord(2, 2, 2, 1, 1, 1)};
  int axes[2] = {(int)(packed & 0xFF), (int)((packed >> 8) & 0xFF)};
  int64_t n = naxes == 1 ? 2 : 4, position = 0;
  for (int k = 0; k < naxes; ++k)
    position = position * 2 + c[axes[k]];

  char name[96];
  snprintf(name, sizeof(name), "2x2 group %s: membership", axesName);
  begin(name);
  int32_t me = (int32_t)rank, members[4];
  braid_rt_wait(
      braid_rt_all_gather(group, (int64_t)&me, (int64_t)members, 4, 10));
  for (int64_t q = 0; q < n; ++q) {
    /* Position q -> coordinates along the listed axes, the others mine. */
    int64_t mc[2] = {c[0], c[1]}, rest = q;
    for (int k = (int)naxes - 1; k >= 0; --k) {
      mc[axes[k]] = rest % 2;
      rest /= 2;
    }
    int64_t want = mc[0] * 2 + mc[1];
    expect(members[q] == want, "member", q, members[q], (double)want);
  }
  end();

  snprintf(name, sizeof(name), "2x2 group %s: ring", axesName);
  testRing(name, group, n, position, 1, 3);

  snprintf(name, sizeof(name), "2x2 group %s: all_reduce i32 sum", axesName);
  begin(name);
  int32_t sum = 0, wantSum = 0;
  braid_rt_wait(braid_rt_all_reduce(group, (int64_t)&me, (int64_t)&sum, 1,
                                    BRAID_RT_I32, BRAID_RT_SUM, 11));
  for (int64_t q = 0; q < n; ++q)
    wantSum += members[q];
  expect(sum == wantSum, "sum", 0, sum, wantSum);
  end();

  snprintf(name, sizeof(name), "2x2 group %s: ", axesName);
  prefix = name;
  testAllToAll(group, n, position);
  testBroadcast(group, n, position);
  testReduction(group, n, position, BRAID_RT_BF16, BRAID_RT_SUM, 1);
  testReduction(group, n, position, BRAID_RT_I32, BRAID_RT_BITXOR, 0);
  prefix = "";
}

/*--- Failure modes -------------------------------------------------------*/

/* Ranks not involved in a failure wait for the abort to take them down. */
static void idle(void) {
  for (int i = 0; i < 60; ++i)
    sleep(1);
  fprintf(stderr, "rank %lld: still alive 60 s after the failure\n",
          (long long)rank);
  exit(3);
}

static int compareDoubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int runMode(const char *mode) {
  if (!strcmp(mode, "timeout")) {
    /* The last rank receives a message nobody sends. */
    if (rank != size - 1)
      idle();
    int64_t buffer;
    braid_rt_wait(braid_rt_recv(world, -1, (int64_t)&buffer, 8, 7));
    return 0;
  }
  if (!strcmp(mode, "signal-timeout") || !strcmp(mode, "signal-dead-peer")) {
    /* The last rank waits on a flag of a symmetric buffer nobody raises;
     * with signal-dead-peer, rank 0 dies instead of idling. */
    int32_t *flags = (int32_t *)braid_rt_symmetric_site(world, 16, 3);
    if (rank != size - 1) {
      if (rank == 0 && !strcmp(mode, "signal-dead-peer"))
        _exit(9);
      idle();
    }
    braid_rt_signal_wait_next((int64_t)&flags[2], 0, 11);
    return 0;
  }
  if (!strcmp(mode, "timeout-collective")) {
    /* Every rank but the last joins an all-reduce. */
    if (rank == size - 1)
      idle();
    float x = 1, y;
    braid_rt_wait(braid_rt_all_reduce(world, (int64_t)&x, (int64_t)&y, 1,
                                      BRAID_RT_F32, BRAID_RT_SUM, 8));
    return 0;
  }
  if (!strcmp(mode, "abort")) {
    if (rank != size - 1)
      idle();
    braid_rt_abort("selftest abort");
  }
  if (!strcmp(mode, "double-wait")) {
    if (rank != 0)
      idle();
    int64_t value = 1, back = 0;
    int64_t s = braid_rt_send(world, 0, (int64_t)&value, 8, 4);
    int64_t r = braid_rt_recv(world, 0, (int64_t)&back, 8, 4);
    braid_rt_wait(s);
    braid_rt_wait(r);
    braid_rt_wait(s);
    return 0;
  }
  if (!strcmp(mode, "grid-mismatch")) {
    braid_rt_group(2, 2, 4, 1, 1, 1, 0);
    return 0;
  }
  if (!strcmp(mode, "short-message") || !strcmp(mode, "long-message")) {
    /* Rank 0 sends 8 bytes; rank 1 expects 16 (short) or 4 (long). */
    int64_t buffer[2] = {1, 2};
    if (rank == 0) {
      braid_rt_wait(braid_rt_send(world, 1, (int64_t)buffer, 8, 5));
      idle();
    }
    if (rank != 1)
      idle();
    int64_t bytes = !strcmp(mode, "short-message") ? 16 : 4;
    braid_rt_wait(braid_rt_recv(world, -1, (int64_t)buffer, bytes, 5));
    idle();
  }
  if (!strcmp(mode, "unwaited")) {
    int64_t value = 1, back = 0;
    braid_rt_send(world, 0, (int64_t)&value, 8, 9);
    braid_rt_wait(braid_rt_recv(world, 0, (int64_t)&back, 8, 9));
    braid_rt_finalize();
    return 0;
  }
  if (!strcmp(mode, "idle-cost")) {
    /* Rank 0 computes (sleeps) for 2 s with a receive in flight while the
     * others block in braid_rt_wait; neither may burn the core. Prints the
     * CPU time each process used. */
    int64_t value = rank, got = -1;
    struct timespec start, stop;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int64_t r = braid_rt_recv(world, -1, (int64_t)&got, 8, 13);
    if (rank == 0)
      sleep(2);
    int64_t s = braid_rt_send(world, 1, (int64_t)&value, 8, 13);
    braid_rt_wait(r);
    braid_rt_wait(s);
    clock_gettime(CLOCK_MONOTONIC, &stop);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
    double wall =
        (stop.tv_sec - start.tv_sec) + 1e-9 * (stop.tv_nsec - start.tv_nsec);
    printf("rank %lld: %.3f s CPU over %.3f s\n", (long long)rank, cpu, wall);
    return 0;
  }
  if (!strcmp(mode, "bench")) {
    /* Not a check: prints the time of small operations and the bandwidth
     * of a large ring step, for tuning the comm thread. */
    enum { iterations = 1000, bigIterations = 20 };
    static double each[iterations];
    const int64_t bigBytes = 16 << 20;
    float a[12] = {0}, b[12];
    int64_t value = rank, got;
    char *big = xmalloc(bigBytes), *bigIn = xmalloc(bigBytes);
    memset(big, 1, bigBytes);
    const char *names[] = {"all_reduce 48 B", "ring step 8 B",
                           "ring step 16 MiB"};
    for (int kind = 0; kind < 3; ++kind) {
      int count = kind == 2 ? bigIterations : iterations;
      braid_rt_barrier();
      for (int i = 0; i < count; ++i) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (kind == 0) {
          braid_rt_wait(braid_rt_all_reduce(world, (int64_t)a, (int64_t)b, 12,
                                            BRAID_RT_F32, BRAID_RT_SUM, i));
        } else {
          int64_t bytes = kind == 1 ? 8 : bigBytes;
          int64_t s = braid_rt_send(
              world, 1, kind == 1 ? (int64_t)&value : (int64_t)big, bytes, i);
          int64_t r = braid_rt_recv(
              world, -1, kind == 1 ? (int64_t)&got : (int64_t)bigIn, bytes, i);
          braid_rt_wait(r);
          braid_rt_wait(s);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        each[i] =
            (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3;
      }
      qsort(each, count, sizeof(double), compareDoubles);
      if (rank == 0 && kind < 2)
        printf("%s: median %.1f us, 90%% %.1f us\n", names[kind],
               each[count / 2], each[count * 9 / 10]);
      if (rank == 0 && kind == 2)
        printf("%s: median %.0f us, %.2f GB/s\n", names[kind], each[count / 2],
               bigBytes / each[count / 2] / 1e3);
    }
    free(big);
    free(bigIn);
    return 0;
  }
  /* Checks of Front.cpp, which both backends share. */
  if (!strcmp(mode, "signal-add-zero") || !strcmp(mode, "negative-slack") ||
      !strcmp(mode, "stray-flag") || !strcmp(mode, "put-outside")) {
    int32_t *flags = (int32_t *)braid_rt_symmetric_site(world, 64, 5);
    int32_t stray = 0;
    if (!strcmp(mode, "signal-add-zero"))
      braid_rt_signal_add(world, 1, (int64_t)&flags[0], 0, 21);
    if (!strcmp(mode, "negative-slack"))
      braid_rt_signal_wait_next((int64_t)&flags[0], -1, 22);
    if (!strcmp(mode, "stray-flag"))
      braid_rt_signal_wait_next((int64_t)&stray, 0, 23);
    /* 64 bytes from the middle of a 64-byte buffer run past its end. */
    if (!strcmp(mode, "put-outside"))
      braid_rt_wait(braid_rt_put(world, 1, (int64_t)flags, (int64_t)&flags[8],
                                 64, 0, 24));
    return 0;
  }
  if (!strcmp(mode, "bitwise-float")) {
    float x = 1, y;
    braid_rt_all_reduce(world, (int64_t)&x, (int64_t)&y, 1, BRAID_RT_F32,
                        BRAID_RT_BITAND, 12);
    return 0;
  }
  fprintf(stderr,
          "unknown mode '%s' (timeout, timeout-collective, abort, double-wait, "
          "grid-mismatch, "
          "short-message, long-message, unwaited, bitwise-float, "
          "signal-add-zero, negative-slack, stray-flag, put-outside, "
          "idle-cost, latency)\n",
          mode);
  return 2;
}

int main(int argc, char **argv) {
  braid_rt_init(&argc, &argv);
  rank = braid_rt_world_rank();
  size = braid_rt_world_size();
  world = braid_rt_group(1, size, 1, 1, 1, 1, 0);

  const char *mode = NULL, *trace = NULL;
  for (int i = 1; i < argc; ++i) {
    if (!strncmp(argv[i], "--trace=", 8))
      trace = argv[i] + 8;
    else
      mode = argv[i];
  }
  if (mode) {
    int rc = runMode(mode);
    braid_rt_finalize();
    return rc;
  }

  if (trace)
    braid_rt_trace_begin();
  testCoordinates();
  testRing("ring +1 (8 B blocks)", world, size, rank, 1, 1);
  testRing("ring +1 (1 MiB blocks)", world, size, rank, 1, 1 << 17);
  testRing("ring -1", world, size, rank, -1, 64);
  if (size >= 4)
    testRing("ring +2", world, size, rank, 2, 16);
  testPointToPointEdges();
  testAllGather(world, size, rank);
  testAllToAll(world, size, rank);
  testBroadcast(world, size, rank);
  testReductions(world, size, rank);
  testOverlap();
  testSymmetricAndSignals();
  testOneSided();
  if (size == 4) {
    begin("coord 2x2");
    expect(braid_rt_coord(2, 2, 2, 1, 1, 0) == rank / 2, "axis 0", 0,
           (double)braid_rt_coord(2, 2, 2, 1, 1, 0), (double)(rank / 2));
    expect(braid_rt_coord(2, 2, 2, 1, 1, 1) == rank % 2, "axis 1", 0,
           (double)braid_rt_coord(2, 2, 2, 1, 1, 1), (double)(rank % 2));
    end();
    testGroup2x2("[0]", 1, 0);
    testGroup2x2("[1]", 1, 1);
    testGroup2x2("[0, 1]", 2, 0 | 1 << 8);
    testGroup2x2("[1, 0]", 2, 1 | 0 << 8);
  }
  begin("barrier");
  braid_rt_barrier();
  end();
  if (trace)
    braid_rt_trace_end(trace);

  if (rank == 0)
    printf("%s: %d failed checks\n", failures ? "FAILED" : "PASSED", failures);
  braid_rt_finalize();
  return failures ? 1 : 0;
}
