//===- StandIn.h - What stand-in CUDA libraries share -----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Two libcudart.so.13 stand in for CUDA's where there is no GPU: the
// emulated device (lib/Emulator), and the test fake that runs the
// runtime's control flow only (test/Runtime/FakeCuda). One libcublasLt
// (CublasLt.cpp) computes GEMMs for both, through these functions, which
// each libcudart exports:
//
//  - whether memory is the device's (a GEMM's operands must be);
//  - running work in its stream's order: at once on the fake (its streams
//    are always idle), on the stream's thread on the emulated device, which
//    checks the ranges again when the work runs and records them for the
//    race detector.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_STANDIN_H
#define BRAID_EMULATOR_STANDIN_H

#include <cuda_runtime_api.h>

#include <cstddef>

extern "C" {

/// Whether [p, p + bytes) lies in device-visible memory of the device.
bool braidStandInDeviceMemory(const void *p, size_t bytes);

/// A range a piece of work reads or writes.
struct BraidStandInRange {
  const void *p;
  size_t bytes;
  bool write;
};

/// Runs `work(argument)` as an operation of `stream` named `what`, which
/// touches `ranges`; `release(argument)` afterwards. Returns 0, or a
/// cudaError_t when the stream or device cannot take work.
int braidStandInRun(cudaStream_t stream, const char *what,
                    const BraidStandInRange *ranges, int count,
                    void (*work)(void *), void *argument,
                    void (*release)(void *));

/// A line for tests' logs ($BRAID_FAKE_CUDA_LOG on the fake; nothing on
/// the emulated device).
void braidStandInLog(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// "stream 3 (priority -5)", or "the null stream".
const char *braidStandInStreamName(cudaStream_t stream);
}

#endif // BRAID_EMULATOR_STANDIN_H
