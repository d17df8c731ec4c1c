//===- Reduce.h - Elementwise reduction kernels -----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// dst[i] = op(dst[i], src[i]) on the device for every (dtype, reduction)
// pair of the ABI: what the loopback transport reduces with, and what the
// NCCL transport falls back on for the reductions NCCL lacks (bitwise ones,
// 16-bit integers). The kernels are PTX generated here, one per pair, and
// JIT-compiled for the current device on first use.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CUDA_REDUCE_H
#define BRAID_RUNTIME_CUDA_REDUCE_H

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace braid::rt::cuda::reduce {

/// Whether `reduction` is defined on `dtype` (bitwise ones only on
/// integers).
bool defined(int64_t dtype, int64_t reduction);

/// The kernel's entry name, "braid_reduce_<dtype>_<reduction>".
std::string kernelName(int64_t dtype, int64_t reduction);
/// Its PTX (sm_80 and newer): a grid-stride loop over `count` elements
/// taking (dst, src, count). 16-bit floats combine in f32 and round once,
/// as the cpu backend does; max and min of floats propagate NaN.
std::string kernelPtx(int64_t dtype, int64_t reduction);

/// Enqueues dst = op(dst, src) over `count` elements on `stream`.
void into(void *dst, const void *src, int64_t count, int64_t dtype,
          int64_t reduction, cudaStream_t stream, const std::string &context);

} // namespace braid::rt::cuda::reduce

#endif // BRAID_RUNTIME_CUDA_REDUCE_H
