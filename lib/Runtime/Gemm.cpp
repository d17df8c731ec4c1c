//===- Gemm.cpp - braid_rt_gemm on oneDNN ---------------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cpu backend's GEMM: oneDNN's matmul primitive, which picks AMX,
// AVX-512 or AVX2 code at run time, so that an artifact runs on any x86-64.
// Row-major like the ABI: A is oneDNN's source [batch, m, k], B its weights
// [batch, k, n], C its destination, each described by the strides given
// (a transposed operand is the same matrix with its strides swapped). beta
// = 1 is a sum post-op, the activations are eltwise post-ops and the bias
// is the matmul's own. One primitive per distinct shape, kept for the run.
//
// Where this oneDNN has no kernel for a type (bf16 before AVX-512), and for
// f16, which oneDNN 2.6 accepts but does not execute on CPUs without
// AVX512-FP16, the operands are widened to f32, multiplied in f32, and the
// result rounded to C's type: the accumulation is f32 either way, as the
// ABI says.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Checks.h"
#include "Diagnostics.h"
#include "HalfFloat.h"
#include "Threads.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <array>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

using namespace braid::rt;

namespace {

[[noreturn]] void invalid(int64_t step, const std::string &what) {
  fatalf("gemm step %lld: %s", static_cast<long long>(step), what.c_str());
}

void check(dnnl_status_t status, int64_t step, const char *call) {
  if (status != dnnl_success)
    fatalf("gemm step %lld: oneDNN %s failed (status %d)",
           static_cast<long long>(step), call, static_cast<int>(status));
}

/// oneDNN's type of a dtype checkGemm has accepted (f32, f16 or bf16).
dnnl_data_type_t dnnlType(int64_t dtype) {
  return dtype == BRAID_RT_F32   ? dnnl_f32
         : dtype == BRAID_RT_F16 ? dnnl_f16
                                 : dnnl_bf16;
}

/// The shape of one call: everything a primitive depends on.
struct Shape {
  int64_t m, n, k, batch;
  int64_t lda, strideA, ldb, strideB, ldc, strideC;
  int64_t transA, transB, accumulate, epilogue;
  dnnl_data_type_t a, b, c;
  auto key() const {
    return std::array<int64_t, 17>{
        m,          n,        k,   batch,   lda,    strideA,
        ldb,        strideB,  ldc, strideC, transA, transB,
        accumulate, epilogue, a,   b,       c};
  }
};

/// A matrix operand [batch, rows, cols] of `dtype` whose element (i, r, c)
/// is at i * batchStride + r * rowStride + c * colStride elements; a batch
/// stride of 0 broadcasts one matrix to every batch.
dnnl_memory_desc_t describe(int64_t batch, int64_t rows, int64_t cols,
                            int64_t batchStride, int64_t rowStride,
                            int64_t colStride, dnnl_data_type_t dtype,
                            int64_t step) {
  dnnl_memory_desc_t desc;
  dnnl_dims_t dims = {batchStride == 0 ? 1 : batch, rows, cols};
  dnnl_dims_t strides = {batchStride == 0 ? rows * cols : batchStride,
                         rowStride, colStride};
  check(dnnl_memory_desc_init_by_strides(&desc, 3, dims, dtype, strides), step,
        "dnnl_memory_desc_init_by_strides");
  return desc;
}

struct Primitive {
  dnnl_primitive_t primitive = nullptr;
  dnnl_memory_desc_t a, b, c, bias;
  Primitive() = default;
  Primitive(const Primitive &) = delete;
  Primitive &operator=(const Primitive &) = delete;
  ~Primitive() {
    if (primitive)
      (void)dnnl_primitive_destroy(primitive);
  }
};

struct Engine {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<std::array<int64_t, 17>, std::unique_ptr<Primitive>> primitives;
  std::mutex mutex;
};

Engine &engine(int64_t step) {
  static Engine *instance = [&] {
    auto *created = new Engine;
    check(dnnl_engine_create(&created->engine, dnnl_cpu, 0), step,
          "dnnl_engine_create");
    check(dnnl_stream_create(&created->stream, created->engine,
                             dnnl_stream_default_flags),
          step, "dnnl_stream_create");
    // oneDNN runs on OpenMP: its pool, for the calling (the rank's main)
    // thread.
    omp_set_num_threads(threadsPerRank());
    return created;
  }();
  return *instance;
}

/// Whether oneDNN 2.6's bf16 matmuls run on this CPU: its bf16 kernels,
/// and the conversions around its reference one, need AVX-512 (F, BW, VL
/// and DQ: its avx512_core), checked at run time like every other ISA
/// choice; elsewhere (and off x86-64) bf16 products are widened to f32.
bool bf16MatmulsRun() {
#if defined(__x86_64__)
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return supported;
#else
  return false;
#endif
}

/// The matmul for `shape`, or null where oneDNN has no implementation for
/// its types on this CPU.
Primitive *primitiveFor(Engine &state, const Shape &shape, int64_t step) {
  auto found = state.primitives.find(shape.key());
  if (found != state.primitives.end())
    return found->second.get();
  auto made = std::make_unique<Primitive>();
  made->a = describe(shape.batch, shape.m, shape.k, shape.strideA,
                     shape.transA ? 1 : shape.lda, shape.transA ? shape.lda : 1,
                     shape.a, step);
  made->b = describe(shape.batch, shape.k, shape.n, shape.strideB,
                     shape.transB ? 1 : shape.ldb, shape.transB ? shape.ldb : 1,
                     shape.b, step);
  made->c = describe(shape.batch, shape.m, shape.n, shape.strideC, shape.ldc, 1,
                     shape.c, step);
  bool hasBias = gemmEpilogueHasBias(shape.epilogue);
  if (hasBias) {
    dnnl_dims_t dims = {1, 1, shape.n};
    check(dnnl_memory_desc_init_by_tag(&made->bias, 3, dims, shape.c, dnnl_abc),
          step, "dnnl_memory_desc_init_by_tag");
  }
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &made->a, &made->b,
                              hasBias ? &made->bias : nullptr, &made->c),
        step, "dnnl_matmul_desc_init");
  dnnl_primitive_attr_t attr;
  check(dnnl_primitive_attr_create(&attr), step, "dnnl_primitive_attr_create");
  dnnl_post_ops_t ops;
  check(dnnl_post_ops_create(&ops), step, "dnnl_post_ops_create");
  if (shape.accumulate)
    check(dnnl_post_ops_append_sum(ops, 1.0f), step, "append_sum");
  if (shape.epilogue == BRAID_RT_EPILOGUE_BIAS_GELU ||
      shape.epilogue == BRAID_RT_EPILOGUE_GELU)
    check(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_gelu_tanh, 0.f,
                                       0.f),
          step, "append_eltwise");
  if (shape.epilogue == BRAID_RT_EPILOGUE_BIAS_RELU ||
      shape.epilogue == BRAID_RT_EPILOGUE_RELU)
    check(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.f, 0.f),
          step, "append_eltwise");
  check(dnnl_primitive_attr_set_post_ops(attr, ops), step, "set_post_ops");
  dnnl_primitive_desc_t primitiveDesc = nullptr;
  dnnl_status_t status = dnnl_primitive_desc_create(&primitiveDesc, &desc, attr,
                                                    state.engine, nullptr);
  (void)dnnl_post_ops_destroy(ops);
  (void)dnnl_primitive_attr_destroy(attr);
  if (status == dnnl_success) {
    check(dnnl_primitive_create(&made->primitive, primitiveDesc), step,
          "dnnl_primitive_create");
    (void)dnnl_primitive_desc_destroy(primitiveDesc);
  } else if (status != dnnl_unimplemented) {
    check(status, step, "dnnl_primitive_desc_create");
  }
  Primitive *result = made->primitive ? made.get() : nullptr;
  state.primitives.emplace(shape.key(), std::move(made));
  return result;
}

void run(Engine &state, Primitive &primitive, void *a, void *b, void *c,
         void *bias, int64_t step) {
  std::vector<dnnl_memory_t> memories;
  std::vector<dnnl_exec_arg_t> args;
  auto add = [&](int arg, const dnnl_memory_desc_t &desc, void *data) {
    dnnl_memory_t memory;
    check(dnnl_memory_create(&memory, &desc, state.engine, data), step,
          "dnnl_memory_create");
    memories.push_back(memory);
    args.push_back({arg, memory});
  };
  add(DNNL_ARG_SRC, primitive.a, a);
  add(DNNL_ARG_WEIGHTS, primitive.b, b);
  add(DNNL_ARG_DST, primitive.c, c);
  if (bias)
    add(DNNL_ARG_BIAS, primitive.bias, bias);
  check(dnnl_primitive_execute(primitive.primitive, state.stream,
                               static_cast<int>(args.size()), args.data()),
        step, "dnnl_primitive_execute");
  check(dnnl_stream_wait(state.stream), step, "dnnl_stream_wait");
  for (dnnl_memory_t memory : memories)
    (void)dnnl_memory_destroy(memory);
}

float load(const void *base, int64_t index, int64_t dtype) {
  switch (dtype) {
  case BRAID_RT_F32:
    return static_cast<const float *>(base)[index];
  case BRAID_RT_F16:
    return halfToFloat(static_cast<const uint16_t *>(base)[index]);
  default:
    return bf16ToFloat(static_cast<const uint16_t *>(base)[index]);
  }
}

void store(void *base, int64_t index, int64_t dtype, float value) {
  switch (dtype) {
  case BRAID_RT_F32:
    static_cast<float *>(base)[index] = value;
    break;
  case BRAID_RT_F16:
    static_cast<uint16_t *>(base)[index] = floatToHalf(value);
    break;
  default:
    static_cast<uint16_t *>(base)[index] = floatToBf16(value);
  }
}

} // namespace

void braid_rt_gemm(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t a,
                   int64_t lda, int64_t stride_a, int64_t a_dtype,
                   int64_t trans_a, int64_t b, int64_t ldb, int64_t stride_b,
                   int64_t b_dtype, int64_t trans_b, int64_t c, int64_t ldc,
                   int64_t stride_c, int64_t c_dtype, int64_t accumulate,
                   int64_t epilogue, int64_t bias, int64_t step) {
  if (!checkGemm(m, n, k, batch, a, lda, a_dtype, trans_a, b, ldb, b_dtype,
                 trans_b, c, ldc, c_dtype, accumulate, epilogue, bias, step))
    return;
  bool hasBias = gemmEpilogueHasBias(epilogue);
  if (stride_a < 0 || stride_b < 0 || stride_c < 0 ||
      (batch > 1 && stride_c == 0))
    invalid(step, "negative batch strides, or batches of C that overlap");

  Engine &state = engine(step);
  std::lock_guard<std::mutex> lock(state.mutex);
  Shape shape{m,
              n,
              k,
              batch,
              lda,
              stride_a,
              ldb,
              stride_b,
              ldc,
              stride_c,
              trans_a,
              trans_b,
              accumulate,
              epilogue,
              dnnlType(a_dtype),
              dnnlType(b_dtype),
              dnnlType(c_dtype)};
  auto *aData = reinterpret_cast<void *>(a);
  auto *bData = reinterpret_cast<void *>(b);
  auto *cData = reinterpret_cast<void *>(c);
  auto *biasData = hasBias ? reinterpret_cast<void *>(bias) : nullptr;
  // oneDNN 2.6 accepts f16 matmuls it then fails to execute on CPUs
  // without AVX512-FP16, and bf16 ones on CPUs without AVX-512 (its
  // execute returns invalid arguments on an AVX2 machine): f16 always, and
  // bf16 there, take the widened path.
  bool f16 = a_dtype == BRAID_RT_F16 || c_dtype == BRAID_RT_F16;
  bool bf16 = a_dtype == BRAID_RT_BF16 || b_dtype == BRAID_RT_BF16 ||
              c_dtype == BRAID_RT_BF16;
  bool narrow = f16 || (bf16 && !bf16MatmulsRun());
  if (Primitive *primitive =
          narrow ? nullptr : primitiveFor(state, shape, step)) {
    run(state, *primitive, aData, bData, cData, biasData, step);
    return;
  }

  // No kernel for these types here: widen to packed f32 (A [batch, m, k],
  // B [batch, k, n], C [batch, m, n] with its old values when accumulating,
  // the bias [n]), multiply in f32, round back into C.
  std::vector<float> wideA(batch * m * k), wideB(batch * k * n),
      wideC(batch * m * n), wideBias(hasBias ? n : 0);
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t x = 0; x < k; ++x)
        wideA[(i * m + r) * k + x] =
            load(aData, i * stride_a + (trans_a ? x * lda + r : r * lda + x),
                 a_dtype);
    for (int64_t x = 0; x < k; ++x)
      for (int64_t col = 0; col < n; ++col)
        wideB[(i * k + x) * n + col] = load(
            bData, i * stride_b + (trans_b ? col * ldb + x : x * ldb + col),
            b_dtype);
    if (accumulate)
      for (int64_t r = 0; r < m; ++r)
        for (int64_t col = 0; col < n; ++col)
          wideC[(i * m + r) * n + col] =
              load(cData, i * stride_c + r * ldc + col, c_dtype);
  }
  for (int64_t col = 0; col < static_cast<int64_t>(wideBias.size()); ++col)
    wideBias[col] = load(biasData, col, c_dtype);
  Shape wide = shape;
  wide.lda = k;
  wide.strideA = batch > 1 ? m * k : 0;
  wide.ldb = n;
  wide.strideB = batch > 1 ? k * n : 0;
  wide.ldc = n;
  wide.strideC = m * n;
  wide.transA = wide.transB = 0;
  wide.a = wide.b = wide.c = dnnl_f32;
  Primitive *primitive = primitiveFor(state, wide, step);
  if (!primitive)
    invalid(step, "oneDNN has no f32 matmul on this CPU");
  run(state, *primitive, wideA.data(), wideB.data(), wideC.data(),
      hasBias ? wideBias.data() : nullptr, step);
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t col = 0; col < n; ++col)
        store(cData, i * stride_c + r * ldc + col, c_dtype,
              wideC[(i * m + r) * n + col]);
}
