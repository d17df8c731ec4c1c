//===- Checks.cpp - Argument checks both backends share ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "Diagnostics.h"

#include <cstdlib>

namespace braid::rt {

double timeoutFromEnvironment() {
  constexpr double defaultTimeoutSeconds = 120;
  const char *text = std::getenv("BRAID_TIMEOUT");
  if (!text || !*text)
    return defaultTimeoutSeconds;
  char *end = nullptr;
  double seconds = std::strtod(text, &end);
  if (*end != '\0' || !(seconds > 0))
    fatalf("BRAID_TIMEOUT=%s is not a positive number of seconds", text);
  return seconds;
}

void checkBuffer(const char *call, const char *name, int64_t addr,
                 int64_t bytes, int64_t step) {
  if (bytes < 0)
    fatalf("%s (step %lld): negative size %lld", call,
           static_cast<long long>(step), static_cast<long long>(bytes));
  if (bytes > 0 && addr == 0)
    fatalf("%s (step %lld): %s is null", call, static_cast<long long>(step),
           name);
}

int64_t checkedProduct(const char *call, int64_t a, int64_t b, int64_t step) {
  int64_t product;
  if (a < 0 || __builtin_mul_overflow(a, b, &product))
    fatalf("%s (step %lld): size %lld x %lld is out of range", call,
           static_cast<long long>(step), static_cast<long long>(a),
           static_cast<long long>(b));
  return product;
}

void checkSignal(const char *call, int64_t addr, int64_t stream, int64_t step) {
  if (addr == 0 || addr % 4 != 0)
    fatalf("%s (step %lld): the flag address %p is null or not 4-byte "
           "aligned",
           call, static_cast<long long>(step), reinterpret_cast<void *>(addr));
  if (stream != 0 && stream != 1)
    fatalf("%s (step %lld): stream %lld is neither 0 (compute) nor 1 (comm)",
           call, static_cast<long long>(step), static_cast<long long>(stream));
}

} // namespace braid::rt
