//===- Gemm.cpp - braid_rt_gemm on cuBLASLt -------------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// cuBLASLt is column-major; the ABI is row-major. A row-major [r,c] matrix
// with row stride ld is the column-major [c,r] matrix with the same ld, so
// row-major C = op(A).op(B) is column-major C^T = op(B)^T.op(A)^T: B goes in
// as cuBLASLt's first matrix and A as its second, with m and n swapped, and
// a row-major bias over C's columns becomes cuBLASLt's bias over its rows.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "../Checks.h"
#include "CudaRuntime.h"
#include "Gemm.h"

#include <climits>

using namespace braid::rt;
using namespace braid::rt::cuda;

GemmPlan::~GemmPlan() {
  // Teardown only: a failure cannot be reported usefully any more.
  if (desc)
    (void)cublasLtMatmulDescDestroy(desc);
  for (cublasLtMatrixLayout_t layout : {first, second, result})
    if (layout)
      (void)cublasLtMatrixLayoutDestroy(layout);
}

namespace {

/// "braid: rank R: gemm step S: <cublas status string>".
void check(cublasStatus_t rc, int64_t step, const char *call) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    fatalf("gemm step %lld: %s (%s)", static_cast<long long>(step),
           cublasLtGetStatusString(rc), call);
}

[[noreturn]] void invalid(int64_t step, const std::string &why) {
  fatalf("gemm step %lld: %s", static_cast<long long>(step), why.c_str());
}

cudaDataType_t cudaType(int64_t dtype, int64_t step, const char *which) {
  switch (dtype) {
  case BRAID_RT_F32:
    return CUDA_R_32F;
  case BRAID_RT_F16:
    return CUDA_R_16F;
  case BRAID_RT_BF16:
    return CUDA_R_16BF;
  default:
    invalid(step, formatString("%s has dtype %lld; only f32, f16 and bf16 are "
                               "supported",
                               which, static_cast<long long>(dtype)));
  }
}

int64_t sizeOf(int64_t dtype) { return dtype == BRAID_RT_F32 ? 4 : 2; }

/// The largest power of two (up to 256) dividing the address of every
/// batch's matrix: cuBLASLt picks algorithms for a given alignment.
int64_t alignment(int64_t address, int64_t strideBytes, int64_t batch) {
  uint64_t bits = static_cast<uint64_t>(address) | 256;
  if (batch > 1)
    bits |= static_cast<uint64_t>(strideBytes);
  return static_cast<int64_t>(bits & (~bits + 1));
}

cublasLtEpilogue_t epilogueOf(int64_t epilogue) {
  switch (epilogue) {
  case 1:
    return CUBLASLT_EPILOGUE_BIAS;
  case 2:
    return CUBLASLT_EPILOGUE_GELU_BIAS;
  case 3:
    return CUBLASLT_EPILOGUE_RELU_BIAS;
  case 4:
    return CUBLASLT_EPILOGUE_GELU;
  case 5:
    return CUBLASLT_EPILOGUE_RELU;
  default:
    return CUBLASLT_EPILOGUE_DEFAULT;
  }
}

cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, int64_t rows,
                                  int64_t cols, int64_t ld, int64_t batch,
                                  int64_t stride, int64_t step) {
  cublasLtMatrixLayout_t layout = nullptr;
  check(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                   static_cast<uint64_t>(cols), ld),
        step, "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    check(cublasLtMatrixLayoutSetAttribute(layout,
                                           CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                           &count, sizeof(count)),
          step, "cublasLtMatrixLayoutSetAttribute");
    check(cublasLtMatrixLayoutSetAttribute(
              layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
              sizeof(stride)),
          step, "cublasLtMatrixLayoutSetAttribute");
  }
  return layout;
}

const char *epilogueName(int64_t epilogue) {
  static const char *const names[] = {"none",        "bias", "bias + GELU",
                                      "bias + ReLU", "GELU", "ReLU"};
  return names[epilogue];
}

/// The GEMM cuBLASLt found no algorithm for, in the ABI's row-major terms:
/// shapes, types, layouts, alignments, epilogue and workspace, which are
/// what its heuristic decides on.
std::string describeNoAlgorithm(int64_t m, int64_t n, int64_t k, int64_t batch,
                                int64_t aType, int64_t transA, int64_t lda,
                                int64_t bType, int64_t transB, int64_t ldb,
                                int64_t cType, int64_t ldc, int64_t accumulate,
                                int64_t epilogue, const GemmCache::Key &key,
                                int64_t workspace) {
  auto ll = [](int64_t v) { return static_cast<long long>(v); };
  return formatString(
      "cuBLASLt has no algorithm for C[%lldx%lld] %s %s A%s[%lldx%lld] %s . "
      "B%s[%lldx%lld] %s (%lld batch%s; row strides lda=%lld ldb=%lld "
      "ldc=%lld; A, B and C aligned to %lld, %lld and %lld bytes; epilogue "
      "%s; %s of workspace)",
      ll(m), ll(n), dtypeName(cType), accumulate ? "+=" : "=",
      transA ? "^T" : "", ll(m), ll(k), dtypeName(aType), transB ? "^T" : "",
      ll(k), ll(n), dtypeName(bType), ll(batch), batch == 1 ? "" : "es",
      ll(lda), ll(ldb), ll(ldc), ll(key[15]), ll(key[16]), ll(key[17]),
      epilogueName(epilogue), formatBytes(workspace).c_str());
}

} // namespace

void braid_rt_gemm(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t a,
                   int64_t lda, int64_t stride_a, int64_t a_dtype,
                   int64_t trans_a, int64_t b, int64_t ldb, int64_t stride_b,
                   int64_t b_dtype, int64_t trans_b, int64_t c, int64_t ldc,
                   int64_t stride_c, int64_t c_dtype, int64_t accumulate,
                   int64_t epilogue, int64_t bias, int64_t step) {
  RankState &state = currentRank("braid_rt_gemm");

  // Validate what cuBLASLt would reject with a less helpful status.
  if (!checkGemm(m, n, k, batch, a, lda, a_dtype, trans_a, b, ldb, b_dtype,
                 trans_b, c, ldc, c_dtype, accumulate, epilogue, bias, step))
    return;
  cudaDataType_t abType = cudaType(a_dtype, step, "A");
  cudaDataType_t cType = cudaType(c_dtype, step, "C");
  bool hasBias = gemmEpilogueHasBias(epilogue);

  GemmCache::Key key = {m,
                        n,
                        k,
                        batch,
                        lda,
                        batch > 1 ? stride_a : 0,
                        a_dtype,
                        trans_a != 0,
                        ldb,
                        batch > 1 ? stride_b : 0,
                        trans_b != 0,
                        ldc,
                        batch > 1 ? stride_c : 0,
                        c_dtype,
                        epilogue,
                        alignment(a, stride_a * sizeOf(a_dtype), batch),
                        alignment(b, stride_b * sizeOf(a_dtype), batch),
                        alignment(c, stride_c * sizeOf(c_dtype), batch),
                        hasBias ? alignment(bias, 0, 1) : 256};
  std::unique_ptr<GemmPlan> &slot = state.gemm->plans[key];
  if (!slot) {
    auto plan = std::make_unique<GemmPlan>();
    check(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          step, "cublasLtMatmulDescCreate");
    cublasOperation_t opFirst = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opSecond = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(plan->desc,
                                         CUBLASLT_MATMUL_DESC_TRANSA, &opFirst,
                                         sizeof(opFirst)),
          step, "cublasLtMatmulDescSetAttribute");
    check(cublasLtMatmulDescSetAttribute(plan->desc,
                                         CUBLASLT_MATMUL_DESC_TRANSB, &opSecond,
                                         sizeof(opSecond)),
          step, "cublasLtMatmulDescSetAttribute");
    cublasLtEpilogue_t epi = epilogueOf(epilogue);
    check(cublasLtMatmulDescSetAttribute(
              plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)),
          step, "cublasLtMatmulDescSetAttribute");
    if (hasBias) {
      int32_t biasType = cType;
      check(cublasLtMatmulDescSetAttribute(plan->desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                           &biasType, sizeof(biasType)),
            step, "cublasLtMatmulDescSetAttribute");
    }
    // Column-major: first = B ([n,k] or its transpose), second = A.
    plan->first = trans_b
                      ? makeLayout(abType, k, n, ldb, batch, stride_b, step)
                      : makeLayout(abType, n, k, ldb, batch, stride_b, step);
    plan->second = trans_a
                       ? makeLayout(abType, m, k, lda, batch, stride_a, step)
                       : makeLayout(abType, k, m, lda, batch, stride_a, step);
    plan->result = makeLayout(cType, n, m, ldc, batch, stride_c, step);

    cublasLtMatmulPreference_t preference = nullptr;
    check(cublasLtMatmulPreferenceCreate(&preference), step,
          "cublasLtMatmulPreferenceCreate");
    uint64_t workspace = static_cast<uint64_t>(state.workspaceBytes);
    check(cublasLtMatmulPreferenceSetAttribute(
              preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
              sizeof(workspace)),
          step, "cublasLtMatmulPreferenceSetAttribute");
    // cuBLASLt's first matrix is B and its second A.
    uint32_t aligns[4] = {
        static_cast<uint32_t>(key[16]), static_cast<uint32_t>(key[15]),
        static_cast<uint32_t>(key[17]), static_cast<uint32_t>(key[17])};
    cublasLtMatmulPreferenceAttributes_t alignAttrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      check(cublasLtMatmulPreferenceSetAttribute(preference, alignAttrs[i],
                                                 &aligns[i], sizeof(uint32_t)),
            step, "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(
        state.lt, plan->desc, plan->first, plan->second, plan->result,
        plan->result, preference, 1, &heuristic, &found);
    (void)cublasLtMatmulPreferenceDestroy(preference);
    // cuBLASLt reports "no algorithm" as CUBLAS_STATUS_NOT_SUPPORTED (or
    // success with none found); either way, say which GEMM it was.
    if (rc != CUBLAS_STATUS_SUCCESS || found == 0)
      invalid(step, describeNoAlgorithm(m, n, k, batch, a_dtype, trans_a, lda,
                                        b_dtype, trans_b, ldb, c_dtype, ldc,
                                        accumulate, epilogue, key,
                                        state.workspaceBytes) +
                        (rc != CUBLAS_STATUS_SUCCESS
                             ? formatString(": cublasLtMatmulAlgoGetHeuristic "
                                            "returned %s",
                                            cublasLtGetStatusString(rc))
                             : std::string(": cublasLtMatmulAlgoGetHeuristic "
                                           "found none")));
    plan->algo = heuristic.algo;
    slot = std::move(plan);
  }

  GemmPlan &plan = *slot;
  if (hasBias) {
    void *biasPointer = reinterpret_cast<void *>(bias);
    check(cublasLtMatmulDescSetAttribute(plan.desc,
                                         CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                         &biasPointer, sizeof(biasPointer)),
          step, "cublasLtMatmulDescSetAttribute");
  }
  float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  void *cPointer = reinterpret_cast<void *>(c);
  std::string name = stepContext("gemm", step);
  state.lastCompute = name;
  EventPtr start;
  traceBegin(state, state.compute, start);
  check(cublasLtMatmul(
            state.lt, plan.desc, &alpha, reinterpret_cast<const void *>(b),
            plan.first, reinterpret_cast<const void *>(a), plan.second, &beta,
            cPointer, plan.result, cPointer, plan.result, &plan.algo,
            state.workspace, static_cast<size_t>(state.workspaceBytes),
            state.compute),
        step, "cublasLtMatmul");
  // The program's description names it where there is one ("gemm
  // 512x1408x1024 bf16 ... at model.py:164:0").
  const RankState::DescribedKernel &described = state.described;
  traceEnd(state, state.compute, start, Track::Kernel,
           described.name ? std::string(described.name)
                          : formatString("%s %lldx%lldx%lld", name.c_str(),
                                         static_cast<long long>(m),
                                         static_cast<long long>(n),
                                         static_cast<long long>(k)),
           described.bytes, described.flops);
}
