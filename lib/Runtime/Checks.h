//===- Checks.h - Argument checks both backends share -----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The checks of braid_rt.h's arguments that do not depend on the backend;
// each aborts the job through fatalf with the call and step named.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CHECKS_H
#define BRAID_RUNTIME_CHECKS_H

#include <cstdint>

namespace braid::rt {

/// Seconds a wait may take: BRAID_TIMEOUT, or 120.
double timeoutFromEnvironment();

/// A buffer of `bytes` at `addr` named `name`: the size is not negative and
/// the address is not null unless the size is 0.
void checkBuffer(const char *call, const char *name, int64_t addr,
                 int64_t bytes, int64_t step);

/// a * b, aborting when a is negative or the product overflows.
int64_t checkedProduct(const char *call, int64_t a, int64_t b, int64_t step);

/// A signal's flag address (non-null, 4-byte aligned) and stream (0 or 1).
void checkSignal(const char *call, int64_t addr, int64_t stream, int64_t step);

} // namespace braid::rt

#endif // BRAID_RUNTIME_CHECKS_H
