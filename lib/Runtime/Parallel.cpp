//===- Parallel.cpp - A rank's kernels on the rank's threads ----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid_rt_parallel_for runs a fused kernel's tiles on the rank's threads,
// through OpenMP: the runtime oneDNN's GEMMs use (Debian builds oneDNN on
// GNU OpenMP), so kernels and GEMMs share one pool of threads.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Diagnostics.h"
#include "Threads.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#ifdef _OPENMP
#include <omp.h>
#endif

int braid::rt::threadsPerRank() {
  static const int threads = [] {
    if (const char *given = std::getenv("BRAID_NUM_THREADS")) {
      char *end = nullptr;
      long value = std::strtol(given, &end, 10);
      if (end == given || *end || value < 1 || value > 4096)
        fatalf("BRAID_NUM_THREADS=%s: a number of threads from 1 to 4096 "
               "expected",
               given);
      return static_cast<int>(value);
    }
    long cores = static_cast<long>(std::thread::hardware_concurrency());
    long ranks = std::max<long>(1, braid_rt_world_size());
    return static_cast<int>(std::max<long>(1, cores / ranks));
  }();
  return threads;
}

extern "C" void braid_rt_parallel_for(void (*body)(void *, int64_t, int64_t),
                                      void *context, int64_t count) {
  if (count <= 0)
    return;
  int64_t threads = std::min<int64_t>(braid::rt::threadsPerRank(), count);
#ifdef _OPENMP
  if (threads > 1) {
#pragma omp parallel num_threads(threads)
    {
      int64_t t = omp_get_thread_num();
      int64_t n = omp_get_num_threads();
      body(context, count * t / n, count * (t + 1) / n);
    }
    return;
  }
#endif
  body(context, 0, count);
}
