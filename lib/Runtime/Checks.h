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

/// The position `peerOffset` (of any sign) names from `position` in a group
/// of `n` ranks.
int peerPosition(int64_t position, int64_t n, int64_t peerOffset);

/// A reduction's buffers: the destination holds `count` elements of
/// `elementSize` bytes, the source as many, or `n` times as many for a
/// reduce-scatter (`scatters`).
void checkReductionBuffers(const char *call, bool scatters, int64_t src,
                           int64_t dst, int64_t count, int64_t elementSize,
                           int64_t n, int64_t step);

/// A block exchange's buffers: `n` blocks of `bytesPerRank` in the
/// destination, one in the source of an all-gather (`gathers`), `n` in an
/// all-to-all's.
void checkBlockBuffers(const char *call, bool gathers, int64_t src, int64_t dst,
                       int64_t bytesPerRank, int64_t n, int64_t step);

/// A signal's flag address (non-null, 4-byte aligned) and stream (0 or 1).
void checkSignal(const char *call, int64_t addr, int64_t stream, int64_t step);

/// Whether a braid_rt_epilogue code adds a bias.
bool gemmEpilogueHasBias(int64_t epilogue);

/// Checks braid_rt_gemm's arguments as both backends take them (sizes;
/// A and B f32, f16 or bf16 alike, C f32 or their type; a known epilogue
/// with its bias; no null matrix; leading dimensions that fit), aborting
/// with "gemm step S: <problem>". Returns false when there is nothing to
/// compute: an empty product, or k = 0 accumulating (C keeps its value).
bool checkGemm(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t a,
               int64_t lda, int64_t aType, int64_t transA, int64_t b,
               int64_t ldb, int64_t bType, int64_t transB, int64_t c,
               int64_t ldc, int64_t cType, int64_t accumulate, int64_t epilogue,
               int64_t bias, int64_t step);

} // namespace braid::rt

#endif // BRAID_RUNTIME_CHECKS_H
