// GPU micro-benchmarks that give Braid's GPU numbers their ceilings.
//
// (a) GEMM epilogue: bf16 D[M,N] = gelu_tanh(A[M,K] . B[K,N] + bias[N])
//     (row-major, f32 accumulation) through cuBLASLt at Llama-70B-like shapes,
//     three ways:
//       bare      - cublasLtMatmul, CUBLASLT_EPILOGUE_DEFAULT (no bias/GELU);
//       epilogue  - cublasLtMatmul, CUBLASLT_EPILOGUE_GELU_BIAS;
//       separate  - the bare GEMM, then an elementwise kernel applying
//                   D = gelu_tanh(D + bias[col]) in place (one timed region).
//     The epilogue and separate results are compared elementwise once per
//     shape, and sampled outputs are checked against a float64 host
//     reference.
// (b) Copy bandwidth: a 4 GiB device-to-device cudaMemcpyAsync and a
//     vectorized copy kernel, counting bytes read plus bytes written.
//
// Every timing is the median of kTimedRuns runs after kWarmupRuns warm-ups,
// with CUDA events around each run. Inputs are random values in [-1, 1)
// from a hash, fresh per shape (never zeros).
//
// Build and run (on an sm_90a GPU, e.g. H200):
//   /usr/local/cuda/bin/nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o microbench microbench.cu -lcublasLt
//   ./microbench OUT.json
// Prints a table to stdout and writes
//   {"device": ..., "gemm_epilogue": [{per shape}, ...], "copy": {...}}
// to OUT.json. Exits 1 on any CUDA/cuBLASLt error or failed check.

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDA_CHECK(call)                                                      \
  do {                                                                        \
    cudaError_t err_ = (call);                                                \
    if (err_ != cudaSuccess) {                                                \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__,      \
                   #call, cudaGetErrorString(err_));                          \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

#define CUBLAS_CHECK(call)                                                    \
  do {                                                                        \
    cublasStatus_t status_ = (call);                                          \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                   \
      std::fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, \
                   #call, cublasLtGetStatusName(status_),                     \
                   cublasLtGetStatusString(status_));                         \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

// Checks the launch configuration and any asynchronous error so far.
#define LAUNCH_CHECK() CUDA_CHECK(cudaGetLastError())

namespace {

constexpr int kWarmupRuns = 5;
constexpr int kTimedRuns = 25;
constexpr size_t kWorkspaceBytes = 32ull << 20;
constexpr size_t kCopyBytes = 4ull << 30;
constexpr double kMaxRelDiff = 2e-2;
constexpr int kReferenceSamples = 64;
constexpr int kThreadsPerBlock = 256;

// ---------------------------------------------------------------------------
// Random inputs: value i of a tensor with a given seed, identical on host and
// device, so the host can recompute any input element for the reference.

__host__ __device__ inline uint32_t hash32(uint64_t index, uint32_t seed) {
  uint64_t x = index * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  x *= 0xD6E8CD0DA3CA3E9Bull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x);
}

// Uniform in [-1, 1), rounded toward zero to bf16 (so it stays under 1; the
// same on host and device).
__host__ __device__ inline __nv_bfloat16 random_bf16(uint64_t index,
                                                      uint32_t seed) {
  float unit = static_cast<float>(hash32(index, seed) >> 8) * 0x1p-24f;
  return __float2bfloat16_rz(2.0f * unit - 1.0f);
}

__global__ void fill_random_bf16(__nv_bfloat16* data, size_t count,
                                 uint32_t seed) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride)
    data[i] = random_bf16(i, seed);
}

// Sets every bf16 to NaN so that an element no kernel wrote fails the checks.
__global__ void poison_bf16(__nv_bfloat16* data, size_t count) {
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride)
    data[i] = __ushort_as_bfloat16(0x7FFF);
}

// ---------------------------------------------------------------------------
// Separate epilogue: D = gelu_tanh(D + bias[col]), 8 bf16 (16 bytes) per
// load/store, grid-stride. Requires cols % 8 == 0 and 16-byte aligned D and
// bias, so the 8 elements of a vector share one row.

// 0.5 x (1 + tanh(u)) == x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3):
// one fast exponential and divide instead of tanhf, so the kernel stays
// memory-bound. Large |u| gives exp = inf or 0, hence -0 or x, as it should.
__device__ inline float gelu_tanh(float x) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return __fdividef(x, 1.0f + __expf(-2.0f * u));
}

__global__ void bias_gelu_inplace(__nv_bfloat16* d, const __nv_bfloat16* bias,
                                  size_t rows, size_t cols) {
  const size_t vectors = rows * cols / 8;
  const size_t vectors_per_row = cols / 8;
  uint4* d_vec = reinterpret_cast<uint4*>(d);
  const uint4* bias_vec = reinterpret_cast<const uint4*>(bias);
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t v = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  // Column (in vectors) of v, advanced by stride mod vectors_per_row per
  // step rather than a 64-bit modulo per vector.
  const size_t col_step = stride % vectors_per_row;
  size_t col = v % vectors_per_row;
  for (; v < vectors; v += stride) {
    uint4 packed = d_vec[v];
    uint4 bias_packed = bias_vec[col];
    __nv_bfloat162* values = reinterpret_cast<__nv_bfloat162*>(&packed);
    const __nv_bfloat162* biases =
        reinterpret_cast<const __nv_bfloat162*>(&bias_packed);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 x = __bfloat1622float2(values[j]);
      float2 b = __bfloat1622float2(biases[j]);
      values[j] = __floats2bfloat162_rn(gelu_tanh(x.x + b.x),
                                        gelu_tanh(x.y + b.y));
    }
    d_vec[v] = packed;
    col += col_step;
    if (col >= vectors_per_row) col -= vectors_per_row;
  }
}

// ---------------------------------------------------------------------------
// Checks.

// result[0] = max |a - b|, result[1] = max |a|, as float bits (non-negative
// floats order like their bits; a NaN has larger bits than +inf, so it
// survives the max and fails the check).
__global__ void max_abs_diff(const __nv_bfloat16* a, const __nv_bfloat16* b,
                             size_t count, unsigned int* result) {
  float local_diff = 0.0f;
  float local_max = 0.0f;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    float x = __bfloat162float(a[i]);
    float y = __bfloat162float(b[i]);
    float diff = fabsf(x - y);
    float mag = fabsf(x);
    // fmaxf would drop NaNs; keep them explicitly.
    local_diff = (diff > local_diff || diff != diff) ? diff : local_diff;
    local_max = (mag > local_max || mag != mag) ? mag : local_max;
  }
  atomicMax(&result[0], __float_as_uint(local_diff));
  atomicMax(&result[1], __float_as_uint(local_max));
}

// Counts the 16-byte words where a and b differ.
__global__ void count_mismatches(const uint4* a, const uint4* b, size_t count,
                                 unsigned long long* mismatches) {
  unsigned long long local = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
       i < count; i += stride) {
    uint4 x = a[i];
    uint4 y = b[i];
    local += (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w);
  }
  if (local) atomicAdd(mismatches, local);
}

// ---------------------------------------------------------------------------
// Copy kernel: 16-byte loads/stores, grid-stride, four independent loads in
// flight per thread before their stores.

__global__ void copy_kernel(const uint4* __restrict__ src,
                            uint4* __restrict__ dst, size_t count) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    uint4 w0 = src[i];
    uint4 w1 = src[i + stride];
    uint4 w2 = src[i + 2 * stride];
    uint4 w3 = src[i + 3 * stride];
    dst[i] = w0;
    dst[i + stride] = w1;
    dst[i + 2 * stride] = w2;
    dst[i + 3 * stride] = w3;
  }
  for (; i < count; i += stride) dst[i] = src[i];
}

// ---------------------------------------------------------------------------
// Timing.

struct Timer {
  cudaStream_t stream;
  cudaEvent_t start, stop;

  explicit Timer(cudaStream_t s) : stream(s) {
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Timer() {
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
  }

  // Median in milliseconds of kTimedRuns runs of work(), after kWarmupRuns.
  template <typename Work>
  double median_ms(Work work) {
    for (int i = 0; i < kWarmupRuns; ++i) work();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> times(kTimedRuns);
    for (float& t : times) {
      CUDA_CHECK(cudaEventRecord(start, stream));
      work();
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
    }
    std::sort(times.begin(), times.end());
    int mid = kTimedRuns / 2;
    return kTimedRuns % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  }
};

int grid_for(int sm_count) { return sm_count * (2048 / kThreadsPerBlock); }

// ---------------------------------------------------------------------------
// cuBLASLt GEMM, row-major D[M,N] = A[M,K] . B[K,N] (+ epilogue).
// Row-major D is column-major D^T[N,M] = B^T[N,K] . A^T[K,M], and a
// row-major X is a column-major X^T with the same leading dimension, so
// cuBLASLt gets B as its first operand and A as its second, no transposes.
// The bias is indexed by the rows of D^T, i.e. by the columns of D.

class LtGemm {
 public:
  LtGemm(cublasLtHandle_t handle, int m, int n, int k,
         cublasLtEpilogue_t epilogue, const __nv_bfloat16* bias)
      : handle_(handle) {
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F,
                                          CUDA_R_32F));
    cublasOperation_t no_transpose = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
        sizeof(no_transpose)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_TRANSB, &no_transpose,
        sizeof(no_transpose)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    if (bias) {
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      cudaDataType_t bias_type = CUDA_R_16BF;
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
          desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
          sizeof(bias_type)));
    }
    // Column-major views: B^T is N x K, A^T is K x M, D^T is N x M.
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_layout_, CUDA_R_16BF, n, k, n));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_layout_, CUDA_R_16BF, k, m, k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d_layout_, CUDA_R_16BF, n, m, n));

    cublasLtMatmulPreference_t preference;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    size_t workspace = kWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
        sizeof(workspace)));
    cublasLtMatmulHeuristicResult_t result = {};
    int returned = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(
        handle_, desc_, b_layout_, a_layout_, d_layout_, d_layout_,
        preference, 1, &result, &returned));
    CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
    if (returned == 0) {
      std::fprintf(stderr,
                   "cuBLASLt has no algorithm for M=%d N=%d K=%d epilogue=%d\n",
                   m, n, k, static_cast<int>(epilogue));
      std::exit(1);
    }
    algo_ = result.algo;
  }

  ~LtGemm() {
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(d_layout_));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(a_layout_));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(b_layout_));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc_));
  }

  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  void run(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* d,
           void* workspace, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(handle_, desc_, &alpha, b, b_layout_, a,
                                a_layout_, &beta, d, d_layout_, d, d_layout_,
                                &algo_, workspace, kWorkspaceBytes, stream));
  }

 private:
  cublasLtHandle_t handle_;
  cublasLtMatmulDesc_t desc_;
  cublasLtMatrixLayout_t a_layout_, b_layout_, d_layout_;
  cublasLtMatmulAlgo_t algo_;
};

struct Shape {
  int m, n, k;
};

struct GemmResult {
  Shape shape;
  double t_bare_ms, t_epilogue_ms, t_separate_ms;
  double max_rel_diff;       // epilogue vs separate, over max |epilogue|
  double max_reference_err;  // sampled separate vs float64 host reference
  double bare_tflops() const {
    return 2.0 * shape.m * shape.n * shape.k / (t_bare_ms * 1e-3) / 1e12;
  }
};

// Compares kReferenceSamples elements of the separate result against
// gelu_tanh(A.B + bias) in float64 on the host, with the inputs recomputed
// from their seeds. Returns max |error| over max |reference| of the samples.
double sampled_reference_error(const __nv_bfloat16* d_separate, Shape s,
                               uint32_t seed_a, uint32_t seed_b,
                               uint32_t seed_bias) {
  double max_err = 0.0, max_ref = 0.0;
  for (int i = 0; i < kReferenceSamples; ++i) {
    int row = hash32(2 * i, 12345) % s.m;
    int col = hash32(2 * i + 1, 12345) % s.n;
    double acc = 0.0;
    for (int kk = 0; kk < s.k; ++kk) {
      double a = __bfloat162float(
          random_bf16(static_cast<uint64_t>(row) * s.k + kk, seed_a));
      double b = __bfloat162float(
          random_bf16(static_cast<uint64_t>(kk) * s.n + col, seed_b));
      acc += a * b;
    }
    double x = acc + __bfloat162float(random_bf16(col, seed_bias));
    double ref = 0.5 * x * (1.0 + std::tanh(0.7978845608028654 *
                                            (x + 0.044715 * x * x * x)));
    __nv_bfloat16 got_bits;
    CUDA_CHECK(cudaMemcpy(&got_bits,
                          d_separate + static_cast<size_t>(row) * s.n + col,
                          sizeof(got_bits), cudaMemcpyDeviceToHost));
    double got = __bfloat162float(got_bits);
    double err = std::fabs(got - ref);
    if (!(err <= max_err)) max_err = err;  // keeps a NaN
    max_ref = std::max(max_ref, std::fabs(ref));
  }
  return max_err / max_ref;
}

GemmResult bench_gemm(Shape s, uint32_t seed, cublasLtHandle_t handle,
                      void* workspace, cudaStream_t stream, int sm_count) {
  if (s.n % 8 != 0) {
    std::fprintf(stderr, "N=%d must be a multiple of 8\n", s.n);
    std::exit(1);
  }
  const size_t a_count = static_cast<size_t>(s.m) * s.k;
  const size_t b_count = static_cast<size_t>(s.k) * s.n;
  const size_t d_count = static_cast<size_t>(s.m) * s.n;
  __nv_bfloat16 *a, *b, *bias, *d_bare, *d_epilogue, *d_separate;
  CUDA_CHECK(cudaMalloc(&a, a_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&b, b_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&bias, s.n * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&d_bare, d_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&d_epilogue, d_count * sizeof(__nv_bfloat16)));
  CUDA_CHECK(cudaMalloc(&d_separate, d_count * sizeof(__nv_bfloat16)));

  const int grid = grid_for(sm_count);
  const uint32_t seed_a = seed, seed_b = seed + 1, seed_bias = seed + 2;
  fill_random_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(a, a_count, seed_a);
  LAUNCH_CHECK();
  fill_random_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(b, b_count, seed_b);
  LAUNCH_CHECK();
  fill_random_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(bias, s.n,
                                                          seed_bias);
  LAUNCH_CHECK();

  LtGemm bare(handle, s.m, s.n, s.k, CUBLASLT_EPILOGUE_DEFAULT, nullptr);
  LtGemm fused(handle, s.m, s.n, s.k, CUBLASLT_EPILOGUE_GELU_BIAS, bias);
  auto run_separate = [&] {
    bare.run(a, b, d_separate, workspace, stream);
    bias_gelu_inplace<<<grid, kThreadsPerBlock, 0, stream>>>(d_separate, bias,
                                                              s.m, s.n);
    LAUNCH_CHECK();
  };

  // Correctness, once: both outputs poisoned first, so an unwritten element
  // shows up as NaN.
  poison_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(d_epilogue, d_count);
  LAUNCH_CHECK();
  poison_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(d_separate, d_count);
  LAUNCH_CHECK();
  fused.run(a, b, d_epilogue, workspace, stream);
  run_separate();
  unsigned int* max_bits;
  CUDA_CHECK(cudaMalloc(&max_bits, 2 * sizeof(unsigned int)));
  CUDA_CHECK(cudaMemsetAsync(max_bits, 0, 2 * sizeof(unsigned int), stream));
  max_abs_diff<<<grid, kThreadsPerBlock, 0, stream>>>(d_epilogue, d_separate,
                                                       d_count, max_bits);
  LAUNCH_CHECK();
  unsigned int host_bits[2];
  CUDA_CHECK(cudaMemcpyAsync(host_bits, max_bits, sizeof(host_bits),
                             cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(max_bits));
  float max_diff, max_value;
  std::memcpy(&max_diff, &host_bits[0], sizeof(float));
  std::memcpy(&max_value, &host_bits[1], sizeof(float));

  GemmResult r;
  r.shape = s;
  r.max_rel_diff = max_diff / max_value;
  r.max_reference_err =
      sampled_reference_error(d_separate, s, seed_a, seed_b, seed_bias);
  if (!(r.max_rel_diff < kMaxRelDiff) ||
      !(r.max_reference_err < kMaxRelDiff)) {
    std::fprintf(stderr,
                 "FAIL M=%d N=%d K=%d: epilogue vs separate max|diff|/max|D| "
                 "= %g, separate vs float64 reference (sampled) = %g, "
                 "limit %g\n",
                 s.m, s.n, s.k, r.max_rel_diff, r.max_reference_err,
                 kMaxRelDiff);
    std::exit(1);
  }

  Timer timer(stream);
  r.t_bare_ms =
      timer.median_ms([&] { bare.run(a, b, d_bare, workspace, stream); });
  r.t_epilogue_ms =
      timer.median_ms([&] { fused.run(a, b, d_epilogue, workspace, stream); });
  r.t_separate_ms = timer.median_ms(run_separate);

  for (__nv_bfloat16* p : {a, b, bias, d_bare, d_epilogue, d_separate})
    CUDA_CHECK(cudaFree(p));
  return r;
}

// ---------------------------------------------------------------------------
// Copy bandwidth.

struct CopyResult {
  size_t bytes;
  double memcpy_ms, kernel_ms;
  double gbps(double ms) const { return 2.0 * bytes / (ms * 1e-3) / 1e9; }
};

// Poisons dst, runs copy once, and fails unless dst then equals src.
template <typename Copy>
void check_copy(const char* name, const uint4* src, uint4* dst, size_t words,
                Copy copy, cudaStream_t stream, int grid) {
  CUDA_CHECK(cudaMemsetAsync(dst, 0xFF, words * sizeof(uint4), stream));
  copy();
  unsigned long long* mismatches;
  CUDA_CHECK(cudaMalloc(&mismatches, sizeof(*mismatches)));
  CUDA_CHECK(cudaMemsetAsync(mismatches, 0, sizeof(*mismatches), stream));
  count_mismatches<<<grid, kThreadsPerBlock, 0, stream>>>(src, dst, words,
                                                          mismatches);
  LAUNCH_CHECK();
  unsigned long long host_mismatches = 0;
  CUDA_CHECK(cudaMemcpyAsync(&host_mismatches, mismatches,
                             sizeof(host_mismatches), cudaMemcpyDeviceToHost,
                             stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaFree(mismatches));
  if (host_mismatches) {
    std::fprintf(stderr, "FAIL %s: %llu of %zu 16-byte words differ\n", name,
                 host_mismatches, words);
    std::exit(1);
  }
}

CopyResult bench_copy(cudaStream_t stream, int sm_count) {
  const size_t words = kCopyBytes / sizeof(uint4);
  uint4 *src, *dst;
  CUDA_CHECK(cudaMalloc(&src, kCopyBytes));
  CUDA_CHECK(cudaMalloc(&dst, kCopyBytes));
  const int grid = grid_for(sm_count);
  fill_random_bf16<<<grid, kThreadsPerBlock, 0, stream>>>(
      reinterpret_cast<__nv_bfloat16*>(src),
      kCopyBytes / sizeof(__nv_bfloat16), 777);
  LAUNCH_CHECK();

  auto memcpy_copy = [&] {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice,
                               stream));
  };
  auto kernel_copy = [&] {
    copy_kernel<<<grid, kThreadsPerBlock, 0, stream>>>(src, dst, words);
    LAUNCH_CHECK();
  };
  check_copy("cudaMemcpyAsync", src, dst, words, memcpy_copy, stream, grid);
  check_copy("copy_kernel", src, dst, words, kernel_copy, stream, grid);

  Timer timer(stream);
  CopyResult r;
  r.bytes = kCopyBytes;
  r.memcpy_ms = timer.median_ms(memcpy_copy);
  r.kernel_ms = timer.median_ms(kernel_copy);
  CUDA_CHECK(cudaFree(src));
  CUDA_CHECK(cudaFree(dst));
  return r;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

void write_json(const char* path, const std::string& device,
                const std::vector<GemmResult>& gemms, const CopyResult& copy) {
  FILE* f = std::fopen(path, "w");
  if (!f) {
    std::perror(path);
    std::exit(1);
  }
  std::fprintf(f, "{\n  \"device\": \"%s\",\n  \"gemm_epilogue\": [\n",
               json_escape(device).c_str());
  for (size_t i = 0; i < gemms.size(); ++i) {
    const GemmResult& g = gemms[i];
    std::fprintf(
        f,
        "    {\"M\": %d, \"N\": %d, \"K\": %d, \"t_bare_ms\": %.6f, "
        "\"t_epilogue_ms\": %.6f, \"t_separate_ms\": %.6f, "
        "\"epilogue_over_bare\": %.4f, \"separate_over_bare\": %.4f, "
        "\"bare_tflops\": %.2f, \"max_rel_diff\": %.3e, "
        "\"max_reference_err\": %.3e}%s\n",
        g.shape.m, g.shape.n, g.shape.k, g.t_bare_ms, g.t_epilogue_ms,
        g.t_separate_ms, g.t_epilogue_ms / g.t_bare_ms,
        g.t_separate_ms / g.t_bare_ms, g.bare_tflops(), g.max_rel_diff,
        g.max_reference_err, i + 1 < gemms.size() ? "," : "");
  }
  std::fprintf(f,
               "  ],\n  \"copy\": {\"bytes\": %zu, "
               "\"bytes_read_plus_written\": %zu, \"memcpy_ms\": %.6f, "
               "\"kernel_ms\": %.6f, \"copy_gbps\": %.1f, "
               "\"kernel_copy_gbps\": %.1f}\n}\n",
               copy.bytes, 2 * copy.bytes, copy.memcpy_ms, copy.kernel_ms,
               copy.gbps(copy.memcpy_ms), copy.gbps(copy.kernel_ms));
  if (std::fclose(f) != 0) {
    std::perror(path);
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.json\n", argv[0]);
    return 2;
  }
  int device;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreate(&stream));
  cublasLtHandle_t handle;
  CUBLAS_CHECK(cublasLtCreate(&handle));
  void* workspace;
  CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));

  const Shape shapes[] = {{4096, 3584, 8192}, {4096, 8192, 3584},
                          {8192, 28672 / 8, 8192}};
  std::vector<GemmResult> gemms;
  uint32_t seed = 1;
  for (const Shape& s : shapes) {
    gemms.push_back(bench_gemm(s, seed, handle, workspace, stream,
                               prop.multiProcessorCount));
    seed += 3;
  }
  CopyResult copy = bench_copy(stream, prop.multiProcessorCount);

  std::printf("\nGEMM bf16, f32 accumulate, median of %d after %d warm-ups\n",
              kTimedRuns, kWarmupRuns);
  std::printf("%6s %6s %6s %9s %9s %9s %8s %8s %8s %9s\n", "M", "N", "K",
              "bare_ms", "epi_ms", "sep_ms", "epi/bare", "sep/bare", "TFLOP/s",
              "rel_diff");
  for (const GemmResult& g : gemms)
    std::printf("%6d %6d %6d %9.4f %9.4f %9.4f %8.3f %8.3f %8.1f %9.2e\n",
                g.shape.m, g.shape.n, g.shape.k, g.t_bare_ms, g.t_epilogue_ms,
                g.t_separate_ms, g.t_epilogue_ms / g.t_bare_ms,
                g.t_separate_ms / g.t_bare_ms, g.bare_tflops(),
                g.max_rel_diff);
  std::printf("\ncopy %.1f GiB (read + write counted): cudaMemcpyAsync %.1f "
              "GB/s (%.3f ms), kernel %.1f GB/s (%.3f ms)\n",
              copy.bytes / double(1ull << 30), copy.gbps(copy.memcpy_ms),
              copy.memcpy_ms, copy.gbps(copy.kernel_ms), copy.kernel_ms);

  write_json(argv[1], prop.name, gemms, copy);
  std::printf("wrote %s\n", argv[1]);

  CUDA_CHECK(cudaFree(workspace));
  CUBLAS_CHECK(cublasLtDestroy(handle));
  CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}
