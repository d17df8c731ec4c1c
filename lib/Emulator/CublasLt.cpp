//===- CublasLt.cpp - The emulated device's libcublasLt -------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// libcublasLt.so.13 of the emulated device: what braid_rt_gemm calls, done
// on the host with cuBLASLt's documented semantics: column-major layouts
// with leading dimensions, TRANSA/TRANSB, strided batches, D = act(alpha
// op(A) op(B) + beta C + bias) with the bias along D's rows, GELU in its
// tanh form, accumulation in f32. Every matrix must lie in device memory;
// the GEMM runs as an operation of its stream (Device.h), which checks its
// ranges again when it runs and records them for the race detector. With
// BRAID_EMULATE_CUBLASLT_NO_ALGORITHM=1 the heuristic finds no algorithm
// (as the real one does for a shape or alignment it cannot handle), so that
// the runtime's error path can be tested.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Memory.h"

#include "HalfFloat.h"

#include <cublasLt.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

using namespace braid::emu;

namespace {

struct Desc {
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1;
};

struct Layout {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint64_t workspace = 0;
};

int64_t bytesOf(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

float load(const void *base, cudaDataType type, int64_t index) {
  using namespace braid::rt;
  switch (type) {
  case CUDA_R_32F:
    return static_cast<const float *>(base)[index];
  case CUDA_R_16F:
    return halfToFloat(static_cast<const uint16_t *>(base)[index]);
  default:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
  }
}

void store(void *base, cudaDataType type, int64_t index, float value) {
  using namespace braid::rt;
  switch (type) {
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = value;
    break;
  case CUDA_R_16F:
    static_cast<uint16_t *>(base)[index] = floatToHalf(value);
    break;
  default:
    static_cast<uint16_t *>(base)[index] = floatToBf16(value);
    break;
  }
}

/// The bytes every element of `layout` at `p` spans.
size_t spanOf(const Layout &layout) {
  if (layout.rows == 0 || layout.cols == 0)
    return 0;
  int64_t elements = static_cast<int64_t>(layout.cols - 1) * layout.ld +
                     static_cast<int64_t>(layout.rows) +
                     (layout.batch - 1) * layout.stride;
  return static_cast<size_t>(elements * bytesOf(layout.type));
}

/// Whether [p, p + bytes) lies in device-visible memory of the device.
bool deviceMemory(const void *p, size_t bytes) {
  const char *what = classify(p, bytes);
  return what && std::strcmp(what, "host") != 0;
}

/// Whether every element of `layout` at `p` lies in device-side memory.
bool inDeviceMemory(const void *p, const Layout &layout) {
  size_t bytes = spanOf(layout);
  return bytes == 0 || deviceMemory(p, bytes);
}

/// One GEMM, with copies of its descriptors (the call may return before it
/// runs).
struct Gemm {
  Desc desc;
  Layout a, b, c, out;
  const void *A, *B, *C;
  void *D;
  float alpha, beta;
  bool hasBias;
  cudaDataType biasType;
};

void runGemm(const Gemm &g) {
  const Desc &desc = g.desc;
  const Layout &a = g.a, &b = g.b, &c = g.c, &out = g.out;
  bool ta = desc.transA == CUBLAS_OP_T, tb = desc.transB == CUBLAS_OP_T;
  uint64_t m = out.rows, n = out.cols;
  uint64_t k = ta ? a.rows : a.cols;
  std::vector<float> result(m * n);
  for (int32_t batch = 0; batch < out.batch; ++batch) {
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i) {
        float sum = 0;
        for (uint64_t p = 0; p < k; ++p) {
          int64_t ai = ta ? static_cast<int64_t>(p + i * a.ld)
                          : static_cast<int64_t>(i + p * a.ld);
          int64_t bi = tb ? static_cast<int64_t>(j + p * b.ld)
                          : static_cast<int64_t>(p + j * b.ld);
          sum += load(g.A, a.type, batch * a.stride + ai) *
                 load(g.B, b.type, batch * b.stride + bi);
        }
        float value = g.alpha * sum;
        if (g.beta != 0)
          value += g.beta *
                   load(g.C, c.type,
                        batch * c.stride + static_cast<int64_t>(i + j * c.ld));
        if (g.hasBias)
          value += load(desc.bias, g.biasType, static_cast<int64_t>(i));
        if (desc.epilogue == CUBLASLT_EPILOGUE_GELU ||
            desc.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS)
          value =
              0.5f * value *
              (1.0f + std::tanh(0.7978845608f *
                                (value + 0.044715f * value * value * value)));
        if (desc.epilogue == CUBLASLT_EPILOGUE_RELU ||
            desc.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS)
          value = std::max(value, 0.0f);
        result[i + j * m] = value;
      }
    // C may be D: write only when every element has been read.
    for (uint64_t j = 0; j < n; ++j)
      for (uint64_t i = 0; i < m; ++i)
        store(g.D, out.type,
              batch * out.stride + static_cast<int64_t>(i + j * out.ld),
              result[i + j * m]);
  }
}

bool supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16F || type == CUDA_R_16BF;
}

} // namespace

EMU_EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = reinterpret_cast<cublasLtHandle_t>(new int(1));
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete reinterpret_cast<int *>(handle);
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  default:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  }
}

EMU_EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                                   cublasComputeType_t compute,
                                                   cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc());
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete reinterpret_cast<Desc *>(d);
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(
    cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attribute,
    const void *buffer, size_t size) {
  auto *desc = reinterpret_cast<Desc *>(d);
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    std::memcpy(&desc->transA, buffer, std::min(size, sizeof(desc->transA)));
    break;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    std::memcpy(&desc->transB, buffer, std::min(size, sizeof(desc->transB)));
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    std::memcpy(&desc->epilogue, buffer,
                std::min(size, sizeof(desc->epilogue)));
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    std::memcpy(&desc->bias, buffer, std::min(size, sizeof(desc->bias)));
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    std::memcpy(&desc->biasType, buffer,
                std::min(size, sizeof(desc->biasType)));
    break;
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t
cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout, cudaDataType type,
                           uint64_t rows, uint64_t cols, int64_t ld) {
  if (!supported(type) || ld < static_cast<int64_t>(rows))
    return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t
cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(
    cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attribute,
    const void *buffer, size_t size) {
  auto *layout = reinterpret_cast<Layout *>(l);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
    std::memcpy(&layout->batch, buffer, std::min(size, sizeof(int32_t)));
  else if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
    std::memcpy(&layout->stride, buffer, std::min(size, sizeof(int64_t)));
  else
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete reinterpret_cast<Preference *>(preference);
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buffer, size_t size) {
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES)
    std::memcpy(&reinterpret_cast<Preference *>(p)->workspace, buffer,
                std::min(size, sizeof(uint64_t)));
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
    cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *found) {
  *found = 0;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  const char *none = std::getenv("BRAID_EMULATE_CUBLASLT_NO_ALGORITHM");
  if (none && std::strcmp(none, "1") == 0) {
    BRAID_EMU_LOG("cublasLtMatmulAlgoGetHeuristic: no algorithm "
                  "(BRAID_EMULATE_CUBLASLT_NO_ALGORITHM)");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

EMU_EXPORT cublasStatus_t cublasLtMatmul(
    cublasLtHandle_t, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
    cublasLtMatrixLayout_t aLayout, const void *B,
    cublasLtMatrixLayout_t bLayout, const void *beta, const void *C,
    cublasLtMatrixLayout_t cLayout, void *D, cublasLtMatrixLayout_t dLayout,
    const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t stream) {
  const Desc &desc = *reinterpret_cast<Desc *>(d);
  const Layout &a = *reinterpret_cast<Layout *>(aLayout);
  const Layout &b = *reinterpret_cast<Layout *>(bLayout);
  const Layout &c = *reinterpret_cast<Layout *>(cLayout);
  const Layout &out = *reinterpret_cast<Layout *>(dLayout);
  bool ta = desc.transA == CUBLAS_OP_T, tb = desc.transB == CUBLAS_OP_T;
  uint64_t m = out.rows, n = out.cols;
  uint64_t k = ta ? a.rows : a.cols;
  BRAID_EMU_LOG("cublasLtMatmul %llux%llux%llu (column-major) on %s",
                static_cast<unsigned long long>(m),
                static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(k), streamName(stream).c_str());
  if ((ta ? a.cols : a.rows) != m || (tb ? b.cols : b.rows) != k ||
      (tb ? b.rows : b.cols) != n || c.rows != m || c.cols != n ||
      a.batch != out.batch || b.batch != out.batch || c.batch != out.batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!inDeviceMemory(A, a) || !inDeviceMemory(B, b) || !inDeviceMemory(C, c) ||
      !inDeviceMemory(D, out))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool hasBias = desc.epilogue == CUBLASLT_EPILOGUE_BIAS ||
                 desc.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS ||
                 desc.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  cudaDataType biasType =
      desc.biasType < 0 ? out.type : static_cast<cudaDataType>(desc.biasType);
  size_t biasBytes = hasBias ? static_cast<size_t>(m * bytesOf(biasType)) : 0;
  if (hasBias && !deviceMemory(desc.bias, biasBytes))
    return CUBLAS_STATUS_INVALID_VALUE;
  auto gemm = std::make_shared<Gemm>(
      Gemm{desc, a, b, c, out, A, B, C, D, *static_cast<const float *>(alpha),
           *static_cast<const float *>(beta), hasBias, biasType});
  std::vector<Range> ranges = {{A, spanOf(a), Read},
                               {B, spanOf(b), Read},
                               {C, gemm->beta != 0 ? spanOf(c) : 0, Read},
                               {desc.bias, biasBytes, Read},
                               {D, spanOf(out), Write}};
  if (enqueueRanges(stream, "cublasLtMatmul", std::move(ranges),
                    [gemm] { runGemm(*gemm); }) != 0)
    return CUBLAS_STATUS_EXECUTION_FAILED;
  return CUBLAS_STATUS_SUCCESS;
}
