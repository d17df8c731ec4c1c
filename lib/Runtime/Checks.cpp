//===- Checks.cpp - Argument checks both backends share ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Checks.h"

#include "Diagnostics.h"

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include <climits>
#include <cstdlib>
#include <utility>

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

int peerPosition(int64_t position, int64_t n, int64_t peerOffset) {
  return static_cast<int>((position + ((peerOffset % n) + n) % n) % n);
}

void checkReductionBuffers(const char *call, bool scatters, int64_t src,
                           int64_t dst, int64_t count, int64_t elementSize,
                           int64_t n, int64_t step) {
  int64_t outBytes = checkedProduct(call, count, elementSize, step);
  int64_t inBytes =
      scatters ? checkedProduct(call, outBytes, n, step) : outBytes;
  checkBuffer(call, "the source", src, inBytes, step);
  checkBuffer(call, "the destination", dst, outBytes, step);
}

void checkBlockBuffers(const char *call, bool gathers, int64_t src, int64_t dst,
                       int64_t bytesPerRank, int64_t n, int64_t step) {
  int64_t total = checkedProduct(call, bytesPerRank, n, step);
  checkBuffer(call, "the source", src, gathers ? bytesPerRank : total, step);
  checkBuffer(call, "the destination", dst, total, step);
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

bool gemmEpilogueHasBias(int64_t epilogue) {
  return epilogue >= BRAID_RT_EPILOGUE_BIAS &&
         epilogue <= BRAID_RT_EPILOGUE_BIAS_RELU;
}

bool checkGemm(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t a,
               int64_t lda, int64_t aType, int64_t transA, int64_t b,
               int64_t ldb, int64_t bType, int64_t transB, int64_t c,
               int64_t ldc, int64_t cType, int64_t accumulate, int64_t epilogue,
               int64_t bias, int64_t step) {
  auto invalid = [&](const std::string &why) {
    fatalf("gemm step %lld: %s", static_cast<long long>(step), why.c_str());
  };
  if (m < 0 || n < 0 || k < 0 || batch < 0 || batch > INT32_MAX)
    invalid(formatString("bad sizes m=%lld n=%lld k=%lld batch=%lld",
                         static_cast<long long>(m), static_cast<long long>(n),
                         static_cast<long long>(k),
                         static_cast<long long>(batch)));
  if (m == 0 || n == 0 || batch == 0)
    return false;
  if (k == 0) {
    // No product: C keeps its value, which only an accumulating call
    // without an epilogue means.
    if (!accumulate || epilogue != 0)
      invalid("k = 0 with beta = 0 or an epilogue");
    return false;
  }
  for (auto [dtype, which] :
       {std::pair{aType, "A"}, std::pair{bType, "B"}, std::pair{cType, "C"}})
    if (dtype != BRAID_RT_F32 && dtype != BRAID_RT_F16 &&
        dtype != BRAID_RT_BF16)
      invalid(formatString("%s has dtype %lld; only f32, f16 and bf16 are "
                           "supported",
                           which, static_cast<long long>(dtype)));
  if (bType != aType)
    invalid("A and B have different dtypes");
  if (cType != BRAID_RT_F32 && cType != aType)
    invalid("C must be f32 or the inputs' dtype");
  if (epilogue < BRAID_RT_EPILOGUE_NONE || epilogue > BRAID_RT_EPILOGUE_RELU)
    invalid(formatString("unknown epilogue %lld",
                         static_cast<long long>(epilogue)));
  bool hasBias = gemmEpilogueHasBias(epilogue);
  if (hasBias && bias == 0)
    invalid("the epilogue adds a bias, but bias is null");
  if (a == 0 || b == 0 || c == 0)
    invalid("a matrix is null");
  if (lda < (transA ? m : k) || ldb < (transB ? k : n) || ldc < n)
    invalid(formatString("leading dimensions lda=%lld ldb=%lld ldc=%lld are "
                         "too small",
                         static_cast<long long>(lda),
                         static_cast<long long>(ldb),
                         static_cast<long long>(ldc)));
  return true;
}

} // namespace braid::rt
