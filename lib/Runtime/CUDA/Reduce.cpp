//===- Reduce.cpp - Elementwise reduction kernels -------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The kernels are generated as PTX text rather than compiled with nvcc, so
// that the runtime stays a plain C++ library (like the loopback copy
// kernel): one small template, a body per element type, one combining
// instruction (or two, for NaN-propagating f64 max/min) per reduction.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Reduce.h"

#include "CudaRuntime.h"
#include "Driver.h"
#include "Front.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

namespace braid::rt::cuda::reduce {

namespace {

bool isFloat(int64_t dtype) {
  return dtype == BRAID_RT_F32 || dtype == BRAID_RT_F64 ||
         dtype == BRAID_RT_F16 || dtype == BRAID_RT_BF16;
}

/// The combining instructions: operands `a` and `b`, result `r`, all of
/// register type `type` (f32, f64, s16, s32 or s64).
std::string combine(int64_t reduction, const std::string &type,
                    const std::string &r, const std::string &a,
                    const std::string &b) {
  auto op = [&](const std::string &name) {
    return "  " + name + " " + r + ", " + a + ", " + b + ";\n";
  };
  bool floating = type[0] == 'f';
  std::string bits = "b" + type.substr(1);
  switch (reduction) {
  case BRAID_RT_SUM:
    return op((floating ? "add.rn." : "add.") + type);
  case BRAID_RT_PRODUCT:
    return op((floating ? "mul.rn." : "mul.lo.") + type);
  case BRAID_RT_MAX:
  case BRAID_RT_MIN: {
    std::string name = reduction == BRAID_RT_MAX ? "max" : "min";
    if (type == "f32")
      return op(name + ".NaN.f32");
    if (type != "f64")
      return op(name + "." + type);
    // No .NaN form for f64: a NaN operand makes the result a + b (NaN).
    return op(name + ".f64") + "  setp.nan.f64 %p2, " + a + ", " + b +
           ";\n  @%p2 add.rn.f64 " + r + ", " + a + ", " + b + ";\n";
  }
  case BRAID_RT_BITAND:
    return op("and." + bits);
  case BRAID_RT_BITOR:
    return op("or." + bits);
  default:
    return op("xor." + bits);
  }
}

/// Loads dst[i] and src[i] (addresses %rd8, %rd9), combines them and
/// stores the result to dst[i].
std::string body(int64_t dtype, int64_t reduction) {
  switch (dtype) {
  case BRAID_RT_F32:
    return "  ld.global.f32 %f1, [%rd8];\n"
           "  ld.global.f32 %f2, [%rd9];\n" +
           combine(reduction, "f32", "%f3", "%f1", "%f2") +
           "  st.global.f32 [%rd8], %f3;\n";
  case BRAID_RT_F64:
    return "  ld.global.f64 %fd1, [%rd8];\n"
           "  ld.global.f64 %fd2, [%rd9];\n" +
           combine(reduction, "f64", "%fd3", "%fd1", "%fd2") +
           "  st.global.f64 [%rd8], %fd3;\n";
  case BRAID_RT_F16:
    return "  ld.global.b16 %h1, [%rd8];\n"
           "  ld.global.b16 %h2, [%rd9];\n"
           "  cvt.f32.f16 %f1, %h1;\n"
           "  cvt.f32.f16 %f2, %h2;\n" +
           combine(reduction, "f32", "%f3", "%f1", "%f2") +
           "  cvt.rn.f16.f32 %h3, %f3;\n"
           "  st.global.b16 [%rd8], %h3;\n";
  case BRAID_RT_BF16:
    // bf16 is the high half of an f32.
    return "  ld.global.b16 %h1, [%rd8];\n"
           "  ld.global.b16 %h2, [%rd9];\n"
           "  mov.b16 %h0, 0;\n"
           "  mov.b32 %f1, {%h0, %h1};\n"
           "  mov.b32 %f2, {%h0, %h2};\n" +
           combine(reduction, "f32", "%f3", "%f1", "%f2") +
           "  cvt.rn.bf16.f32 %h3, %f3;\n"
           "  st.global.b16 [%rd8], %h3;\n";
  case BRAID_RT_I8:
  case BRAID_RT_I16: {
    // Bytes are sign-extended into 16-bit registers; the low 8 bits of a
    // 16-bit sum or product are the 8-bit ones.
    std::string mem = dtype == BRAID_RT_I8 ? "s8" : "s16";
    return "  ld.global." + mem + " %h1, [%rd8];\n  ld.global." + mem +
           " %h2, [%rd9];\n" + combine(reduction, "s16", "%h3", "%h1", "%h2") +
           "  st.global." + mem + " [%rd8], %h3;\n";
  }
  case BRAID_RT_I32:
    return "  ld.global.s32 %r5, [%rd8];\n"
           "  ld.global.s32 %r6, [%rd9];\n" +
           combine(reduction, "s32", "%r7", "%r5", "%r6") +
           "  st.global.s32 [%rd8], %r7;\n";
  default:
    return "  ld.global.s64 %rd10, [%rd8];\n"
           "  ld.global.s64 %rd11, [%rd9];\n" +
           combine(reduction, "s64", "%rd12", "%rd10", "%rd11") +
           "  st.global.s64 [%rd8], %rd12;\n";
  }
}

} // namespace

bool defined(int64_t dtype, int64_t reduction) {
  if (dtypeBytes(dtype) == 0 || reduction < BRAID_RT_SUM ||
      reduction > BRAID_RT_BITXOR)
    return false;
  return !isFloat(dtype) || reduction <= BRAID_RT_PRODUCT;
}

std::string kernelName(int64_t dtype, int64_t reduction) {
  return std::string("braid_reduce_") + dtypeName(dtype) + "_" +
         reductionName(reduction);
}

std::string kernelPtx(int64_t dtype, int64_t reduction) {
  std::string name = kernelName(dtype, reduction);
  return ".version 7.0\n"
         ".target sm_80\n"
         ".address_size 64\n"
         "\n"
         ".visible .entry " +
         name +
         "(\n"
         "  .param .u64 dst_param,\n"
         "  .param .u64 src_param,\n"
         "  .param .u64 count_param)\n"
         "{\n"
         "  .reg .pred %p<3>;\n"
         "  .reg .b16 %h<4>;\n"
         "  .reg .b32 %r<8>;\n"
         "  .reg .b64 %rd<13>;\n"
         "  .reg .f32 %f<4>;\n"
         "  .reg .f64 %fd<4>;\n"
         "\n"
         "  ld.param.u64 %rd1, [dst_param];\n"
         "  ld.param.u64 %rd2, [src_param];\n"
         "  ld.param.u64 %rd3, [count_param];\n"
         "  cvta.to.global.u64 %rd1, %rd1;\n"
         "  cvta.to.global.u64 %rd2, %rd2;\n"
         "  mov.u32 %r1, %ctaid.x;\n"
         "  mov.u32 %r2, %ntid.x;\n"
         "  mov.u32 %r3, %tid.x;\n"
         "  mov.u32 %r4, %nctaid.x;\n"
         "  mul.wide.u32 %rd4, %r1, %r2;\n"
         "  cvt.u64.u32 %rd5, %r3;\n"
         "  add.u64 %rd4, %rd4, %rd5;\n"
         "  mul.wide.u32 %rd6, %r4, %r2;\n"
         "LOOP:\n"
         "  setp.ge.u64 %p1, %rd4, %rd3;\n"
         "  @%p1 bra DONE;\n"
         "  mul.lo.u64 %rd7, %rd4, " +
         std::to_string(dtypeBytes(dtype)) +
         ";\n"
         "  add.u64 %rd8, %rd1, %rd7;\n"
         "  add.u64 %rd9, %rd2, %rd7;\n" +
         body(dtype, reduction) +
         "  add.u64 %rd4, %rd4, %rd6;\n"
         "  bra LOOP;\n"
         "DONE:\n"
         "  ret;\n"
         "}\n";
}

namespace {

/// Kernels loaded so far, per device and pair; loaded once (a JIT compile
/// of a few hundred bytes of PTX) and kept for the process's life.
CUfunction function(int64_t dtype, int64_t reduction,
                    const std::string &context) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int64_t, int64_t>, CUfunction> loaded;
  int device = 0;
  checkCuda(cudaGetDevice(&device), "cudaGetDevice", context);
  std::lock_guard<std::mutex> lock(mutex);
  CUfunction &slot = loaded[{device, dtype, reduction}];
  if (slot)
    return slot;
  std::string ptx = kernelPtx(dtype, reduction);
  std::string name = kernelName(dtype, reduction);
  std::string what = context + " (loading " + name + ")";
  CUmodule module = nullptr;
  checkDriver(driver().moduleLoadData(&module, ptx.c_str()), "cuModuleLoadData",
              what);
  checkDriver(driver().moduleGetFunction(&slot, module, name.c_str()),
              "cuModuleGetFunction", what);
  return slot;
}

} // namespace

void into(void *dst, const void *src, int64_t count, int64_t dtype,
          int64_t reduction, cudaStream_t stream, const std::string &context) {
  if (count <= 0)
    return;
  if (!defined(dtype, reduction))
    fatalf("%s: %s reduction of %s is not defined", context.c_str(),
           reductionName(reduction), dtypeName(dtype));
  CUfunction kernel = function(dtype, reduction, context);
  constexpr unsigned threads = 256;
  uint64_t n = static_cast<uint64_t>(count);
  unsigned blocks = static_cast<unsigned>(
      std::min<uint64_t>((n + threads - 1) / threads, 1024));
  void *dstArg = dst;
  const void *srcArg = src;
  void *params[] = {&dstArg, const_cast<void **>(&srcArg), &n};
  checkDriver(driver().launchKernel(kernel, blocks, 1, 1, threads, 1, 1, 0,
                                    reinterpret_cast<CUstream>(stream), params,
                                    nullptr),
              "cuLaunchKernel",
              context + " (" + kernelName(dtype, reduction) + ")");
}

} // namespace braid::rt::cuda::reduce
