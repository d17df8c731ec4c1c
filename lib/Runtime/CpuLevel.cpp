//===- CpuLevel.cpp - Which kernel clones this CPU runs ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid_rt_cpu_level: the widest of the code paths that kernels compiled
// with --cpu=generic carry (baseline, x86-64-v3, x86-64-v4) this CPU and
// its operating system support, read once.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Diagnostics.h"

#include <cstdlib>
#include <cstring>

namespace {

int64_t detectLevel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // __builtin_cpu_supports checks the operating system's support for the
  // AVX and AVX-512 registers (XCR0) too.
  bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
            __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
  bool v4 = v3 && __builtin_cpu_supports("avx512f") &&
            __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512cd");
  return v4 ? 2 : v3 ? 1 : 0;
#else
  return 0;
#endif
}

int64_t cappedLevel() {
  int64_t level = detectLevel();
  const char *cap = std::getenv("BRAID_CPU_DISPATCH");
  if (!cap || !*cap)
    return level;
  static const char *const names[] = {"generic", "x86-64-v3", "x86-64-v4"};
  for (int64_t i = 0; i < 3; ++i)
    if (std::strcmp(cap, names[i]) == 0)
      return i < level ? i : level;
  braid::rt::fatalf("BRAID_CPU_DISPATCH='%s': expected generic, x86-64-v3 "
                    "or x86-64-v4",
                    cap);
}

} // namespace

extern "C" int64_t braid_rt_cpu_level(void) {
  static const int64_t level = cappedLevel();
  return level;
}
