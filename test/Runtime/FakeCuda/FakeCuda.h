//===- FakeCuda.h - The host-only stand-in for CUDA of the tests -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// What the fake libcudart exports to the fake libcublasLt and libnccl next
// to it: its allocation registry, its streams and its call log. See
// FakeCudart.cpp for what the fakes are and are not.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_TEST_RUNTIME_FAKECUDA_FAKECUDA_H
#define BRAID_TEST_RUNTIME_FAKECUDA_FAKECUDA_H

#include <cuda_runtime_api.h>

#include <cstddef>

extern "C" {

/// Appends one line to $BRAID_FAKE_CUDA_LOG (nothing when it is unset).
void braidFakeLog(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// What [p, p + bytes) is: "device", "pinned host", "managed", or "host"
/// (memory the fake did not allocate: the caller's own); null when it starts
/// in an allocation of the fake but runs past its end, or is null itself.
const char *braidFakeMemory(const void *p, size_t bytes);

/// "stream 3 (priority -5)", or "the null stream".
const char *braidFakeStreamName(cudaStream_t stream);

/// Whether work on `stream` is held back (a stream-memory wait that never
/// came true): such work is not done, as on a GPU.
bool braidFakeStreamStuck(cudaStream_t stream);
}

#endif // BRAID_TEST_RUNTIME_FAKECUDA_FAKECUDA_H
