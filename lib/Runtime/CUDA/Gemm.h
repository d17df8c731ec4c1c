//===- Gemm.h - braid_rt_gemm on cuBLASLt -----------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The descriptors and heuristic algorithm of every GEMM shape a rank ran,
// so that a program's repeated GEMMs pay for the heuristic once.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CUDA_GEMM_H
#define BRAID_RUNTIME_CUDA_GEMM_H

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>

namespace braid::rt::cuda {

struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr;  // B, as cuBLASLt's A.
  cublasLtMatrixLayout_t second = nullptr; // A, as cuBLASLt's B.
  cublasLtMatrixLayout_t result = nullptr; // C (and D).
  cublasLtMatmulAlgo_t algo{};
  GemmPlan() = default;
  GemmPlan(const GemmPlan &) = delete;
  GemmPlan &operator=(const GemmPlan &) = delete;
  ~GemmPlan();
};

struct GemmCache {
  /// Every argument that shapes the plan, plus the pointers' alignment.
  using Key = std::array<int64_t, 19>;
  std::map<Key, std::unique_ptr<GemmPlan>> plans;
};

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_GEMM_H
