//===- emulator_selftest.cpp - The emulated device, checked ---------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-emulator-selftest MODE runs hand-written PTX kernels through the
// CUDA driver API, against Braid's emulated device (lib/Emulator, put first
// on LD_LIBRARY_PATH by the tests):
//
//   semantics    integer, float, conversion, warp, tensor-core (cp.async,
//                ldmatrix, mma.sync of f16, bf16 and tf32), shared / local /
//                const memory and atomic instructions, against references
//                computed here in C++ (not with the emulator's code); prints
//                one line per family and exits 1 on any mismatch.
//   ptx          prints every kernel of this file, for ptxas to check that
//                they are PTX (test/Runtime/emulator-selftest.test).
//
// and the deliberately broken kernels, each next to its correct twin, which
// must pass (the emulator's report goes to stderr; the exit code says
// whether the run failed):
//
//   barrier / barrier-ok         a shared-memory reduction without / with
//                                the bar.sync between its stores and reads
//   flag-order / flag-order-ok   a flag released before / after the data it
//                                announces (two blocks)
//   misaligned                   a 16-byte load from a 4-byte aligned
//                                address
//   out-of-bounds                a store past the end of an allocation
//   shared-overrun               a store past the block's shared memory
//   spin / spin-ok               block 0 waits for the grid's last block
//                                (not co-resident with it) / for block 1
//   wait-forever                 a flag nobody raises
//   barrier-exit                 half the block exits before a bar.sync
//   trap                         trap
//   peer-store / peer-store-ok   two rank processes over the emulated NCCL:
//                                rank 0 stores into rank 1's symmetric
//                                buffer, without / with a release of rank
//                                1's flag that rank 1's kernel acquires
//
//===----------------------------------------------------------------------===//

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <nccl_device/impl/core__types.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// The driver API
//===----------------------------------------------------------------------===//

struct Driver {
  CUresult (*moduleLoadData)(CUmodule *, const void *) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction *, CUmodule, const char *) = nullptr;
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, unsigned, CUstream, void **,
                           void **) = nullptr;
  CUresult (*funcSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
};

template <typename F> void resolve(F &function, const char *name) {
  void *address = nullptr;
  cudaDriverEntryPointQueryResult status;
  if (cudaGetDriverEntryPointByVersion(name, &address, CUDA_VERSION,
                                       cudaEnableDefault,
                                       &status) != cudaSuccess ||
      !address) {
    std::fprintf(stderr, "selftest: cannot resolve %s\n", name);
    std::exit(2);
  }
  function = reinterpret_cast<F>(address);
}

const Driver &driver() {
  static Driver d;
  static bool ready = false;
  if (!ready) {
    resolve(d.moduleLoadData, "cuModuleLoadData");
    resolve(d.moduleGetFunction, "cuModuleGetFunction");
    resolve(d.launchKernel, "cuLaunchKernel");
    resolve(d.funcSetAttribute, "cuFuncSetAttribute");
    ready = true;
  }
  return d;
}

void check(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "selftest: %s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}

CUfunction load(const char *ptx, const char *name) {
  CUmodule module = nullptr;
  CUresult rc = driver().moduleLoadData(&module, ptx);
  if (rc != CUDA_SUCCESS) {
    std::fprintf(stderr, "selftest: loading %s failed (CUresult %d)\n", name,
                 static_cast<int>(rc));
    std::exit(2);
  }
  CUfunction function = nullptr;
  if (driver().moduleGetFunction(&function, module, name) != CUDA_SUCCESS) {
    std::fprintf(stderr, "selftest: no kernel %s\n", name);
    std::exit(2);
  }
  return function;
}

/// Launches and synchronizes; returns the error the launch or the
/// synchronization gave.
cudaError_t launch(CUfunction f, unsigned grid, unsigned block,
                   std::vector<void *> args, unsigned shared = 0) {
  CUresult rc = driver().launchKernel(f, grid, 1, 1, block, 1, 1, shared,
                                      nullptr, args.data(), nullptr);
  if (rc != CUDA_SUCCESS)
    return static_cast<cudaError_t>(rc);
  return cudaDeviceSynchronize();
}

template <typename T> struct Buffer {
  T *device = nullptr;
  size_t count;
  explicit Buffer(size_t n) : count(n) {
    check(cudaMalloc(reinterpret_cast<void **>(&device), n * sizeof(T)),
          "cudaMalloc");
    check(cudaMemset(device, 0, n * sizeof(T)), "cudaMemset");
  }
  void put(const std::vector<T> &values) {
    check(cudaMemcpy(device, values.data(), values.size() * sizeof(T),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
  std::vector<T> get() const {
    std::vector<T> values(count);
    check(cudaMemcpy(values.data(), device, count * sizeof(T),
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy");
    return values;
  }
};

//===----------------------------------------------------------------------===//
// References (IEEE and PTX semantics, computed independently)
//===----------------------------------------------------------------------===//

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float value(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

template <typename F> float rounded(int mode, F f) {
  int saved = std::fegetround();
  std::fesetround(mode);
  volatile float r = f();
  std::fesetround(saved);
  return r;
}

uint16_t toHalf(float f) {
  if (std::isnan(f))
    return 0x7FFF;
  _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

float fromHalf(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

uint16_t toBf16(float f) {
  uint32_t b = bits(f);
  if (std::isnan(f))
    return 0x7FFF;
  uint32_t lsb = (b >> 16) & 1;
  return static_cast<uint16_t>((b + 0x7FFF + lsb) >> 16);
}

float ptxMin(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  if (a == 0 && b == 0)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

float ptxMax(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  if (a == 0 && b == 0)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

int32_t saturateToInt(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 2147483647.0)
    return INT32_MAX;
  if (v <= -2147483648.0)
    return INT32_MIN;
  return static_cast<int32_t>(v);
}

uint32_t saturateToUnsigned(double v) {
  if (std::isnan(v) || v <= 0)
    return 0;
  if (v >= 4294967295.0)
    return UINT32_MAX;
  return static_cast<uint32_t>(v);
}

int failures = 0;

void expectEqual(const char *family, int thread, int slot, uint32_t got,
                 uint32_t want) {
  if (got == want)
    return;
  if (failures++ < 20)
    std::printf("FAIL %s: thread %d result %d: got 0x%08x, expected 0x%08x\n",
                family, thread, slot, got, want);
}

//===----------------------------------------------------------------------===//
// Kernels of the semantics battery
//===----------------------------------------------------------------------===//

const char *const header = ".version 8.0\n.target sm_90a\n.address_size 64\n";

// Integer operations: a = in[2t], b = in[2t+1]; 36 results per thread
// (among them the carry flag of add.cc, addc, mad.lo.cc and madc.hi, and
// funnel shifts).
const char *const intKernel = R"PTX(
.visible .entry int_ops(.param .u64 in_param, .param .u64 out_param)
{
  .reg .pred %p<4>;
  .reg .b32 %r<48>;
  .reg .b64 %rd<10>;
  ld.param.u64 %rd1, [in_param];
  ld.param.u64 %rd2, [out_param];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.v2.u32 {%r2, %r3}, [%rd3];
  mul.wide.u32 %rd4, %r1, 144;
  add.s64 %rd4, %rd2, %rd4;
  add.s32 %r4, %r2, %r3;
  sub.s32 %r5, %r2, %r3;
  mul.lo.s32 %r6, %r2, %r3;
  mul.hi.s32 %r7, %r2, %r3;
  st.global.v4.u32 [%rd4], {%r4, %r5, %r6, %r7};
  mul.hi.u32 %r8, %r2, %r3;
  or.b32 %r9, %r3, 1;
  div.s32 %r10, %r2, %r9;
  rem.s32 %r11, %r2, %r9;
  div.u32 %r12, %r2, %r9;
  st.global.v4.u32 [%rd4+16], {%r8, %r10, %r11, %r12};
  rem.u32 %r13, %r2, %r9;
  min.s32 %r14, %r2, %r3;
  max.u32 %r15, %r2, %r3;
  abs.s32 %r16, %r2;
  st.global.v4.u32 [%rd4+32], {%r13, %r14, %r15, %r16};
  neg.s32 %r17, %r2;
  and.b32 %r18, %r3, 63;
  shl.b32 %r19, %r2, %r18;
  shr.s32 %r20, %r2, %r18;
  shr.u32 %r21, %r2, %r18;
  st.global.v4.u32 [%rd4+48], {%r17, %r19, %r20, %r21};
  and.b32 %r22, %r3, 31;
  bfe.u32 %r23, %r2, %r22, 8;
  bfe.s32 %r24, %r2, %r22, 12;
  bfi.b32 %r25, %r2, %r3, 4, 8;
  shr.u32 %r26, %r3, 8;
  prmt.b32 %r27, %r2, %r3, %r26;
  st.global.v4.u32 [%rd4+64], {%r23, %r24, %r25, %r27};
  popc.b32 %r28, %r2;
  clz.b32 %r29, %r2;
  brev.b32 %r30, %r2;
  mul.wide.s32 %rd5, %r2, %r3;
  mov.b64 {%r31, %r32}, %rd5;
  st.global.v4.u32 [%rd4+80], {%r28, %r29, %r30, %r31};
  mad.lo.s32 %r33, %r2, %r3, %r2;
  setp.lt.s32 %p1, %r2, %r3;
  selp.u32 %r34, 1, 0, %p1;
  setp.ne.s32 %p2, %r2, 0;
  setp.lo.and.u32 %p3, %r2, %r3, %p2;
  selp.u32 %r35, 1, 0, %p3;
  st.global.v4.u32 [%rd4+96], {%r32, %r33, %r34, %r35};
  add.cc.u32 %r36, %r2, %r3;
  addc.u32 %r37, %r3, %r2;
  mad.lo.cc.u32 %r38, %r2, %r3, %r3;
  madc.hi.u32 %r39, %r2, %r3, %r2;
  st.global.v4.u32 [%rd4+112], {%r36, %r37, %r38, %r39};
  shf.l.wrap.b32 %r40, %r2, %r3, %r18;
  shf.r.clamp.b32 %r41, %r2, %r3, %r18;
  shf.l.clamp.b32 %r42, %r2, %r3, %r18;
  shf.r.wrap.b32 %r43, %r2, %r3, %r18;
  st.global.v4.u32 [%rd4+128], {%r40, %r41, %r42, %r43};
  ret;
}
)PTX";

uint32_t prmt(uint32_t a, uint32_t b, uint32_t c) {
  uint64_t bytes = (uint64_t(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t nibble = (c >> (4 * i)) & 0xF;
    uint32_t byte = (bytes >> (8 * (nibble & 7))) & 0xFF;
    if (nibble & 8)
      byte = (byte & 0x80) ? 0xFF : 0;
    r |= byte << (8 * i);
  }
  return r;
}

std::vector<uint32_t> intReference(uint32_t ua, uint32_t ub) {
  int32_t a = static_cast<int32_t>(ua), b = static_cast<int32_t>(ub);
  uint32_t ob = ub | 1;
  int32_t sb = static_cast<int32_t>(ob);
  auto sdiv = [](int32_t x, int32_t y) {
    return y == -1 ? static_cast<int32_t>(0u - static_cast<uint32_t>(x))
                   : x / y;
  };
  auto srem = [](int32_t x, int32_t y) { return y == -1 ? 0 : x % y; };
  uint32_t s = ub & 63;
  uint32_t pos = ub & 31;
  auto bfeU = [&](uint32_t len) {
    uint32_t r = 0;
    for (uint32_t i = 0; i < len && pos + i < 32; ++i)
      r |= ((ua >> (pos + i)) & 1u) << i;
    return r;
  };
  uint32_t bfeS;
  {
    uint32_t len = 12, r = 0;
    uint32_t sbit = (ua >> std::min(pos + len - 1, 31u)) & 1u;
    for (uint32_t i = 0; i < 32; ++i) {
      uint32_t bit = (i < len && pos + i <= 31) ? (ua >> (pos + i)) & 1u : sbit;
      r |= bit << i;
    }
    bfeS = r;
  }
  uint32_t bfi = (ub & ~(0xFFu << 4)) | ((ua & 0xFFu) << 4);
  uint32_t brev = 0;
  for (int i = 0; i < 32; ++i)
    brev |= ((ua >> i) & 1u) << (31 - i);
  int64_t wide = int64_t(a) * int64_t(b);
  uint32_t carry1 = static_cast<uint32_t>((uint64_t(ua) + ub) >> 32);
  uint64_t product = uint64_t(ua) * ub;
  uint64_t madLo = (product & 0xFFFFFFFFu) + ub;
  uint64_t pair = (uint64_t(ub) << 32) | ua;
  return {
      ua + ub,
      ua - ub,
      ua * ub,
      static_cast<uint32_t>((int64_t(a) * int64_t(b)) >> 32),
      static_cast<uint32_t>((uint64_t(ua) * uint64_t(ub)) >> 32),
      static_cast<uint32_t>(sdiv(a, sb)),
      static_cast<uint32_t>(srem(a, sb)),
      ua / ob,
      ua % ob,
      static_cast<uint32_t>(std::min(a, b)),
      std::max(ua, ub),
      static_cast<uint32_t>(a < 0 ? 0u - ua : ua),
      0u - ua,
      s >= 32 ? 0u : ua << s,
      static_cast<uint32_t>(a >> std::min(s, 31u)),
      s >= 32 ? 0u : ua >> s,
      bfeU(8),
      bfeS,
      bfi,
      prmt(ua, ub, ub >> 8),
      static_cast<uint32_t>(__builtin_popcount(ua)),
      ua ? static_cast<uint32_t>(__builtin_clz(ua)) : 32u,
      brev,
      static_cast<uint32_t>(static_cast<uint64_t>(wide)),
      static_cast<uint32_t>(static_cast<uint64_t>(wide) >> 32),
      ua * ub + ua,
      a < b ? 1u : 0u,
      (ua < ub && a != 0) ? 1u : 0u,
      // add.cc then addc; mad.lo.cc then madc.hi (the carry flag).
      ua + ub,
      static_cast<uint32_t>(ub + ua + carry1),
      static_cast<uint32_t>(madLo),
      static_cast<uint32_t>((product >> 32) + ua + (madLo >> 32)),
      // shf of {b, a} by b & 63: .wrap takes it modulo 32, .clamp at 32.
      static_cast<uint32_t>((pair << (s & 31)) >> 32),
      static_cast<uint32_t>(pair >> std::min(s, 32u)),
      static_cast<uint32_t>((pair << std::min(s, 32u)) >> 32),
      static_cast<uint32_t>(pair >> (s & 31)),
  };
}

// Float operations: a = in[2t], b = in[2t+1] (f32 bits); 31 results.
const char *const floatKernel = R"PTX(
.visible .entry float_ops(.param .u64 in_param, .param .u64 out_param)
{
  .reg .pred %p<6>;
  .reg .b16 %h<4>;
  .reg .b32 %r<48>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [in_param];
  ld.param.u64 %rd2, [out_param];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 8;
  add.s64 %rd3, %rd1, %rd3;
  ld.global.v2.b32 {%r2, %r3}, [%rd3];
  mul.wide.u32 %rd4, %r1, 124;
  add.s64 %rd4, %rd2, %rd4;
  add.rn.f32 %r4, %r2, %r3;
  sub.rn.f32 %r5, %r2, %r3;
  mul.rn.f32 %r6, %r2, %r3;
  fma.rn.f32 %r7, %r2, %r3, %r2;
  div.rn.f32 %r8, %r2, %r3;
  min.f32 %r9, %r2, %r3;
  max.f32 %r10, %r2, %r3;
  max.NaN.f32 %r11, %r2, %r3;
  copysign.f32 %r12, %r2, %r3;
  abs.f32 %r13, %r2;
  neg.f32 %r14, %r2;
  cvt.rni.f32.f32 %r15, %r2;
  cvt.rzi.f32.f32 %r16, %r2;
  cvt.rmi.f32.f32 %r17, %r2;
  cvt.rpi.f32.f32 %r18, %r2;
  cvt.sat.f32.f32 %r19, %r2;
  cvt.rzi.s32.f32 %r20, %r2;
  cvt.rni.u32.f32 %r21, %r2;
  cvt.rn.f32.s32 %r22, %r2;
  setp.lt.f32 %p1, %r2, %r3;
  selp.u32 %r23, 1, 0, %p1;
  setp.ltu.f32 %p2, %r2, %r3;
  selp.u32 %r24, 1, 0, %p2;
  setp.nan.f32 %p3, %r2, %r3;
  selp.u32 %r25, 1, 0, %p3;
  testp.finite.f32 %p4, %r2;
  selp.u32 %r26, 1, 0, %p4;
  cvt.rn.f16.f32 %h1, %r2;
  cvt.u32.u16 %r27, %h1;
  cvt.f32.f16 %r28, %h1;
  cvt.rn.bf16.f32 %h2, %r2;
  cvt.u32.u16 %r29, %h2;
  cvt.rn.f16x2.f32 %r30, %r2, %r3;
  fma.rm.f32 %r31, %r2, %r3, %r2;
  fma.rz.f32 %r32, %r2, %r3, %r2;
  add.rz.f32 %r33, %r2, %r3;
  mul.rp.f32 %r34, %r2, %r3;
  st.global.b32 [%rd4], %r4;
  st.global.b32 [%rd4+4], %r5;
  st.global.b32 [%rd4+8], %r6;
  st.global.b32 [%rd4+12], %r7;
  st.global.b32 [%rd4+16], %r8;
  st.global.b32 [%rd4+20], %r9;
  st.global.b32 [%rd4+24], %r10;
  st.global.b32 [%rd4+28], %r11;
  st.global.b32 [%rd4+32], %r12;
  st.global.b32 [%rd4+36], %r13;
  st.global.b32 [%rd4+40], %r14;
  st.global.b32 [%rd4+44], %r15;
  st.global.b32 [%rd4+48], %r16;
  st.global.b32 [%rd4+52], %r17;
  st.global.b32 [%rd4+56], %r18;
  st.global.b32 [%rd4+60], %r19;
  st.global.b32 [%rd4+64], %r20;
  st.global.b32 [%rd4+68], %r21;
  st.global.b32 [%rd4+72], %r22;
  st.global.b32 [%rd4+76], %r23;
  st.global.b32 [%rd4+80], %r24;
  st.global.b32 [%rd4+84], %r25;
  st.global.b32 [%rd4+88], %r26;
  st.global.b32 [%rd4+92], %r27;
  st.global.b32 [%rd4+96], %r28;
  st.global.b32 [%rd4+100], %r29;
  st.global.b32 [%rd4+104], %r30;
  st.global.b32 [%rd4+108], %r31;
  st.global.b32 [%rd4+112], %r32;
  st.global.b32 [%rd4+116], %r33;
  st.global.b32 [%rd4+120], %r34;
  ret;
}
)PTX";

std::vector<uint32_t> floatReference(uint32_t ua, uint32_t ub) {
  float a = value(ua), b = value(ub);
  // Arithmetic that yields a NaN yields the canonical one on the GPU.
  auto same = [](float f) { return std::isnan(f) ? 0x7FFFFFFFu : bits(f); };
  uint32_t nanMax =
      (std::isnan(a) || std::isnan(b)) ? 0x7FFFFFFFu : bits(ptxMax(a, b));
  float sat = std::isnan(a) ? 0.0f : std::min(1.0f, std::max(0.0f, a));
  uint16_t half = toHalf(a);
  return {
      same(a + b),
      same(a - b),
      same(a * b),
      same(std::fma(a, b, a)),
      same(a / b),
      same(ptxMin(a, b)),
      same(ptxMax(a, b)),
      nanMax,
      (ub & 0x7FFFFFFFu) | (ua & 0x80000000u),
      ua & 0x7FFFFFFFu,
      ua ^ 0x80000000u,
      same(std::nearbyint(a)),
      same(std::trunc(a)),
      same(std::floor(a)),
      same(std::ceil(a)),
      same(sat),
      static_cast<uint32_t>(saturateToInt(std::trunc(double(a)))),
      saturateToUnsigned(std::nearbyint(double(a))),
      same(static_cast<float>(static_cast<int32_t>(ua))),
      (a < b) ? 1u : 0u,
      (std::isnan(a) || std::isnan(b) || a < b) ? 1u : 0u,
      (std::isnan(a) || std::isnan(b)) ? 1u : 0u,
      std::isfinite(a) ? 1u : 0u,
      half,
      same(fromHalf(half)),
      toBf16(a),
      (uint32_t(toHalf(a)) << 16) | toHalf(b),
      same(rounded(FE_DOWNWARD, [&] { return std::fma(a, b, a); })),
      same(rounded(FE_TOWARDZERO, [&] { return std::fma(a, b, a); })),
      same(rounded(FE_TOWARDZERO,
                   [&] {
                     volatile float x = a, y = b;
                     return x + y;
                   })),
      same(rounded(FE_UPWARD,
                   [&] {
                     volatile float x = a, y = b;
                     return x * y;
                   })),
  };
}

// Warp operations on 64 threads: shuffles of every mode with and without
// segments, their predicates, votes and the active mask. 14 results (of
// 16 slots).
const char *const warpKernel = R"PTX(
.visible .entry warp_ops(.param .u64 out_param)
{
  .reg .pred %p<12>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out_param];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mul.lo.u32 %r2, %r1, 10;
  add.u32 %r2, %r2, 1000;
  mov.u32 %r3, %laneid;
  shfl.sync.up.b32 %r4|%p1, %r2, 1, 0, -1;
  shfl.sync.down.b32 %r5|%p2, %r2, 3, 31, -1;
  shfl.sync.bfly.b32 %r6|%p3, %r2, 5, 31, -1;
  mul.lo.u32 %r7, %r3, 7;
  and.b32 %r7, %r7, 31;
  shfl.sync.idx.b32 %r8|%p4, %r2, %r7, 31, -1;
  shfl.sync.down.b32 %r9|%p5, %r2, 2, 6175, -1;
  shfl.sync.idx.b32 %r10, %r2, 3, 6175, -1;
  shfl.sync.up.b32 %r11|%p6, %r2, 2, 6144, -1;
  selp.u32 %r12, 1, 0, %p1;
  selp.u32 %r13, 2, 0, %p2;
  selp.u32 %r14, 4, 0, %p5;
  selp.u32 %r15, 8, 0, %p6;
  or.b32 %r12, %r12, %r13;
  or.b32 %r12, %r12, %r14;
  or.b32 %r12, %r12, %r15;
  rem.u32 %r16, %r1, 3;
  setp.eq.u32 %p7, %r16, 0;
  vote.sync.ballot.b32 %r17, %p7, -1;
  setp.lt.u32 %p8, %r1, 40;
  vote.sync.all.pred %p9, %p8, -1;
  selp.u32 %r18, 1, 0, %p9;
  vote.sync.any.pred %p10, %p7, -1;
  selp.u32 %r19, 1, 0, %p10;
  vote.sync.uni.pred %p11, %p8, -1;
  selp.u32 %r20, 1, 0, %p11;
  activemask.b32 %r21;
  mul.wide.u32 %rd2, %r1, 64;
  add.s64 %rd2, %rd1, %rd2;
  st.global.v4.u32 [%rd2], {%r4, %r5, %r6, %r8};
  st.global.v4.u32 [%rd2+16], {%r9, %r10, %r11, %r12};
  st.global.v4.u32 [%rd2+32], {%r17, %r18, %r19, %r20};
  st.global.v2.u32 [%rd2+48], {%r21, %r3};
  ret;
}
)PTX";

std::vector<uint32_t> warpReference(uint32_t t) {
  auto val = [](uint32_t thread) { return thread * 10 + 1000; };
  uint32_t lane = t % 32, base = t - lane;
  auto shfl = [&](int mode, uint32_t b, uint32_t c, bool &p) {
    uint32_t cval = c & 0x1F, seg = (c >> 8) & 0x1F;
    uint32_t maxLane = (lane & seg) | (cval & ~seg);
    uint32_t minLane = lane & seg;
    int j;
    switch (mode) {
    case 0:
      j = int(lane) - int(b);
      p = j >= int(maxLane);
      break;
    case 1:
      j = int(lane + b);
      p = j <= int(maxLane);
      break;
    case 2:
      j = int(lane ^ b);
      p = j <= int(maxLane);
      break;
    default:
      j = int(minLane | (b & ~seg));
      p = j <= int(maxLane);
      break;
    }
    if (!p)
      j = int(lane);
    return val(base + uint32_t(j));
  };
  bool p1, p2, p3, p4, p5, p6, p7;
  uint32_t up = shfl(0, 1, 0, p1), down = shfl(1, 3, 31, p2),
           bfly = shfl(2, 5, 31, p3), idx = shfl(3, (lane * 7) & 31, 31, p4),
           down8 = shfl(1, 2, 6175, p5), idx8 = shfl(3, 3, 6175, p7),
           up8 = shfl(0, 2, 6144, p6);
  uint32_t flags = (p1 ? 1 : 0) | (p2 ? 2 : 0) | (p5 ? 4 : 0) | (p6 ? 8 : 0);
  uint32_t ballot = 0;
  bool all = true, any = false, first = true, uniform = true,
       firstValue = false;
  for (uint32_t l = 0; l < 32; ++l) {
    uint32_t thread = base + l;
    bool p = thread % 3 == 0;
    ballot |= p ? 1u << l : 0;
    any |= p;
    bool q = thread < 40;
    all &= q;
    if (first)
      firstValue = q;
    else if (q != firstValue)
      uniform = false;
    first = false;
  }
  return {up,          down,          bfly,          idx,
          down8,       idx8,          up8,           flags,
          ballot,      all ? 1u : 0u, any ? 1u : 0u, uniform ? 1u : 0u,
          0xFFFFFFFFu, lane};
}

// Memory: static and dynamic shared memory (two extern arrays, one
// address), local memory, a const table, global and shared atomics. 8
// results per thread (of 64), and a global counter.
const char *const memoryKernel = R"PTX(
.const .align 4 .b32 table[4] = {7, 11, 13, 17};
.extern .shared .align 16 .b8 dynA[];
.extern .shared .align 16 .b8 dynB[];
.visible .entry memory_ops(.param .u64 out_param, .param .u64 counter_param)
{
  .local .align 4 .b8 depot[16];
  .shared .align 4 .b8 sbuf[20];
  .reg .pred %p<2>;
  .reg .b32 %r<30>;
  .reg .b64 %rd<20>;
  ld.param.u64 %rd1, [out_param];
  ld.param.u64 %rd2, [counter_param];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mov.u64 %rd3, dynA;
  mov.u64 %rd4, dynB;
  cvt.u32.u64 %r2, %rd3;
  sub.s64 %rd5, %rd4, %rd3;
  cvt.u32.u64 %r3, %rd5;
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  mul.lo.u32 %r4, %r1, 3;
  st.shared.u32 [%rd7], %r4;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 st.shared.u32 [sbuf+16], 0;
  bar.sync 0;
  add.s64 %rd8, %rd4, %rd6;
  ld.shared.u32 %r5, [%rd8];
  atom.shared.max.u32 %r6, [sbuf+16], %r1;
  mov.u64 %rd9, depot;
  cvta.local.u64 %rd10, %rd9;
  st.u32 [%rd10+8], %r4;
  ld.local.u32 %r7, [depot+8];
  and.b32 %r8, %r1, 3;
  mul.wide.u32 %rd11, %r8, 4;
  mov.u64 %rd12, table;
  add.s64 %rd12, %rd12, %rd11;
  ld.const.u32 %r9, [%rd12];
  atom.global.add.u32 %r10, [%rd2], 1;
  atom.global.inc.u32 %r11, [%rd2+4], 9;
  bar.sync 0;
  ld.shared.u32 %r12, [sbuf+16];
  mov.u32 %r13, %dynamic_smem_size;
  mul.wide.u32 %rd13, %r1, 32;
  add.s64 %rd13, %rd1, %rd13;
  st.global.v4.u32 [%rd13], {%r2, %r3, %r5, %r7};
  st.global.v4.u32 [%rd13+16], {%r9, %r12, %r13, %r11};
  @%p1 atom.global.cas.b32 %r14, [%rd2+8], 0, 77;
  @%p1 atom.global.exch.b32 %r15, [%rd2+12], 5;
  ret;
}
)PTX";

//===----------------------------------------------------------------------===//
// The battery
//===----------------------------------------------------------------------===//

std::vector<uint32_t> intInputs() {
  std::vector<uint32_t> v = {0,          1,          0xFFFFFFFF, 2,
                             0x80000000, 0xFFFFFFFF, 0x7FFFFFFF, 1,
                             12345,      678,        0xDEADBEEF, 0x12345678,
                             0xFFFFFF00, 33,         100,        0xFFFFFFF9};
  uint32_t x = 0x9E3779B9u;
  while (v.size() < 128) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v.push_back(x);
  }
  return v;
}

std::vector<uint32_t> floatInputs() {
  const float inf = INFINITY, nan = NAN;
  std::vector<float> f = {
      1.5f,   2.5f,    -2.5f, 0.5f,  0.0f,     -0.0f, -0.0f, 0.0f,   nan,
      1.0f,   1.0f,    nan,   inf,   -inf,     inf,   1.0f,  1e-40f, 3.0f,
      -7.25f, 1e-3f,   3e9f,  -2.0f, -3e9f,    0.25f, 0.3f,  0.7f,   1e20f,
      1e-20f, 65519.f, 1.0f,  -1.0f, 1.00001f, 0.1f,  0.2f,  5e-8f,  3.0f};
  std::vector<uint32_t> v;
  for (float value : f)
    v.push_back(bits(value));
  uint32_t x = 12345;
  while (v.size() < 128) {
    x = x * 1664525u + 1013904223u;
    float r = static_cast<float>(static_cast<int32_t>(x)) / 1e7f;
    v.push_back(bits(r));
  }
  return v;
}

// One warp copies a bf16 A (16x16, row-major), a bf16 B (16x8, row-major:
// k rows of n), and the same pair in f16 into shared memory, loads them
// with ldmatrix (A as four 8x8 matrices, B transposed) and multiplies them
// with mma.sync: m16n8k16 in bf16 and f16, and m16n8k8 in f16 (the left
// half of A, the top half of B). C is lane * 4 + i. The copy into shared
// memory is cp.async, in two groups (with and without a source size), and
// one more copy with a source size of 0 zero-fills 16 bytes of
// garbage. Each lane stores 25 words (28 apart): A's and B's ldmatrix
// registers (0-5), a word of the zero fill (6), A's first matrix alone
// (.x1, 7), D of the three products (8-19), A's four matrices transposed
// (.x4.trans, 20-23), and (24) its first word of the first group, read
// after wait_group 1 has waited for that group alone.
const char *const mmaKernel = R"PTX(
.visible .entry mma_ops(.param .u64 in_param, .param .u64 out_param)
{
  .shared .align 16 .b8 tiles[1536];
  .shared .align 16 .b8 zeros[512];
  .reg .b32 %r<32>;
  .reg .f32 %f<20>;
  .reg .b64 %rd<14>;
  ld.param.u64 %rd1, [in_param];
  cvta.to.global.u64 %rd1, %rd1;
  ld.param.u64 %rd2, [out_param];
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 48;
  add.s64 %rd4, %rd1, %rd3;
  mov.u64 %rd5, tiles;
  add.s64 %rd6, %rd5, %rd3;
  mov.u32 %r24, 16;
  cp.async.cg.shared.global [%rd6], [%rd4], 16;
  cp.async.cg.shared.global [%rd6+16], [%rd4+16], 16, %r24;
  cp.async.commit_group;
  cp.async.ca.shared.global [%rd6+32], [%rd4+32], 16;
  cp.async.commit_group;
  mul.wide.u32 %rd12, %r1, 16;
  mov.u64 %rd13, zeros;
  add.s64 %rd13, %rd13, %rd12;
  cp.async.ca.shared.global [%rd13], [%rd4], 16, 0;
  cp.async.wait_group 1;
  ld.shared.u32 %r31, [%rd6];
  cp.async.wait_all;
  bar.sync 0;
  ld.shared.u32 %r25, [%rd13+12];
  and.b32 %r6, %r1, 15;
  shr.u32 %r7, %r1, 4;
  mul.lo.u32 %r8, %r6, 32;
  mul.lo.u32 %r9, %r7, 16;
  add.u32 %r8, %r8, %r9;
  cvt.u64.u32 %rd7, %r8;
  add.s64 %rd8, %rd5, %rd7;
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r10, %r11, %r12, %r13}, [%rd8];
  ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r26}, [%rd8];
  ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r27, %r28, %r29, %r30}, [%rd8];
  mul.lo.u32 %r14, %r6, 16;
  cvt.u64.u32 %rd9, %r14;
  add.s64 %rd10, %rd5, %rd9;
  ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r15, %r16}, [%rd10+512];
  mul.lo.u32 %r17, %r1, 4;
  cvt.rn.f32.u32 %f1, %r17;
  add.f32 %f2, %f1, 0f3F800000;
  add.f32 %f3, %f1, 0f40000000;
  add.f32 %f4, %f1, 0f40400000;
  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f5, %f6, %f7, %f8}, {%r10, %r11, %r12, %r13}, {%r15, %r16}, {%f1, %f2, %f3, %f4};
  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r18, %r19, %r20, %r21}, [%rd8+768];
  ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r22, %r23}, [%rd10+1280];
  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f9, %f10, %f11, %f12}, {%r18, %r19, %r20, %r21}, {%r22, %r23}, {%f1, %f2, %f3, %f4};
  mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f13, %f14, %f15, %f16}, {%r18, %r19}, {%r22}, {%f1, %f2, %f3, %f4};
  mul.wide.u32 %rd11, %r1, 112;
  add.s64 %rd11, %rd2, %rd11;
  st.global.v4.u32 [%rd11], {%r10, %r11, %r12, %r13};
  st.global.v4.u32 [%rd11+16], {%r15, %r16, %r25, %r26};
  st.global.v4.u32 [%rd11+80], {%r27, %r28, %r29, %r30};
  st.global.u32 [%rd11+96], %r31;
  st.global.v4.f32 [%rd11+32], {%f5, %f6, %f7, %f8};
  st.global.v4.f32 [%rd11+48], {%f9, %f10, %f11, %f12};
  st.global.v4.f32 [%rd11+64], {%f13, %f14, %f15, %f16};
  ret;
}
)PTX";

/// The tensor-core family's inputs: small integers (exact in bf16 and f16,
/// and every sum exact in f32, so that any summation order gives the same
/// result): A[r][k] and B[k][n] as 16-bit patterns.
int mmaA(int r, int k) { return (r * 7 + k * 3) % 11 - 5; }
int mmaB(int k, int n) { return (k * 5 + n * 3) % 7 - 3; }

uint16_t bf16Bits(int v) { return static_cast<uint16_t>(bits(float(v)) >> 16); }
uint16_t f16Bits(int v) {
  _Float16 h = static_cast<_Float16>(v);
  uint16_t out;
  std::memcpy(&out, &h, 2);
  return out;
}

std::vector<uint32_t> mmaInputs() {
  std::vector<uint16_t> h(768, 0);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 16; ++k) {
      h[r * 16 + k] = bf16Bits(mmaA(r, k));
      h[384 + r * 16 + k] = f16Bits(mmaA(r, k));
    }
  for (int k = 0; k < 16; ++k)
    for (int n = 0; n < 8; ++n) {
      h[256 + k * 8 + n] = bf16Bits(mmaB(k, n));
      h[640 + k * 8 + n] = f16Bits(mmaB(k, n));
    }
  std::vector<uint32_t> words(384);
  std::memcpy(words.data(), h.data(), 1536);
  return words;
}

/// PTX ISA's fragments (group g = lane / 4, t = lane % 4): ldmatrix gives
/// lane l the pair (l / 4, 2 (l % 4)) of each 8x8 matrix (transposed with
/// .trans); D's element i is (g + 8 (i / 2), 2t + i % 2).
std::vector<uint32_t> mmaReference(uint32_t lane) {
  uint32_t g = lane / 4, t = lane % 4;
  std::vector<uint32_t> want(25, 0);
  want[24] = mmaInputs()[lane * 12];
  auto pair = [](uint16_t lo, uint16_t hi) { return lo | uint32_t(hi) << 16; };
  for (uint32_t j = 0; j < 4; ++j) {
    int r = int(g + (j % 2) * 8), k = int(2 * t + (j / 2) * 8);
    want[j] = pair(bf16Bits(mmaA(r, k)), bf16Bits(mmaA(r, k + 1)));
  }
  want[7] = want[0]; // .x1: the first matrix
  for (uint32_t j = 0; j < 4; ++j) {
    // .trans: the pair (2t, g), (2t + 1, g) of matrix j.
    int r = int((j % 2) * 8 + 2 * t), k = int((j / 2) * 8 + g);
    want[20 + j] = pair(bf16Bits(mmaA(r, k)), bf16Bits(mmaA(r + 1, k)));
  }
  for (uint32_t j = 0; j < 2; ++j) {
    int k = int(2 * t + j * 8);
    want[4 + j] =
        pair(bf16Bits(mmaB(k, int(g))), bf16Bits(mmaB(k + 1, int(g))));
  }
  for (uint32_t i = 0; i < 4; ++i) {
    int r = int(g + (i / 2) * 8), n = int(2 * t + i % 2);
    int full = 0, half = 0;
    for (int k = 0; k < 16; ++k)
      (k < 8 ? half : full) += mmaA(r, k) * mmaB(k, n);
    full += half;
    float c = float(lane * 4 + i);
    want[8 + i] = bits(c + float(full));
    want[12 + i] = bits(c + float(full));
    want[16 + i] = bits(c + float(half));
  }
  return want;
}

// One warp multiplies a 16x8 f32 A by an 8x8 f32 B as tf32 (mma.sync
// m16n8k8): each lane loads its fragments' elements from global memory
// (A (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B (t, g), (t + 4, g))
// and rounds them with cvt.rna.tf32.f32. C is lane * 4 + i. Each lane
// stores D (words 0-3) and the rounded bits of its first A element (4).
const char *const tf32Kernel = R"PTX(
.visible .entry tf32_ops(.param .u64 in_param, .param .u64 out_param)
{
  .reg .b32 %r<40>;
  .reg .f32 %f<20>;
  .reg .b64 %rd<12>;
  ld.param.u64 %rd1, [in_param];
  cvta.to.global.u64 %rd1, %rd1;
  ld.param.u64 %rd2, [out_param];
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %tid.x;
  shr.u32 %r2, %r1, 2;
  and.b32 %r3, %r1, 3;
  mul.lo.u32 %r4, %r2, 8;
  add.u32 %r4, %r4, %r3;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.f32 %f1, [%rd4];
  ld.global.f32 %f2, [%rd4+256];
  ld.global.f32 %f3, [%rd4+16];
  ld.global.f32 %f4, [%rd4+272];
  mul.lo.u32 %r5, %r3, 8;
  add.u32 %r5, %r5, %r2;
  mul.wide.u32 %rd5, %r5, 4;
  add.s64 %rd6, %rd1, %rd5;
  ld.global.f32 %f5, [%rd6+512];
  ld.global.f32 %f6, [%rd6+640];
  cvt.rna.tf32.f32 %r10, %f1;
  cvt.rna.tf32.f32 %r11, %f2;
  cvt.rna.tf32.f32 %r12, %f3;
  cvt.rna.tf32.f32 %r13, %f4;
  cvt.rna.tf32.f32 %r14, %f5;
  cvt.rna.tf32.f32 %r15, %f6;
  mul.lo.u32 %r16, %r1, 4;
  cvt.rn.f32.u32 %f7, %r16;
  add.f32 %f8, %f7, 0f3F800000;
  add.f32 %f9, %f7, 0f40000000;
  add.f32 %f10, %f7, 0f40400000;
  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f11, %f12, %f13, %f14}, {%r10, %r11, %r12, %r13}, {%r14, %r15}, {%f7, %f8, %f9, %f10};
  mul.wide.u32 %rd7, %r1, 32;
  add.s64 %rd7, %rd2, %rd7;
  st.global.v4.f32 [%rd7], {%f11, %f12, %f13, %f14};
  st.global.u32 [%rd7+16], %r10;
  ret;
}
)PTX";

/// The tf32 family's inputs: A (16x8, at word 0) and B (8x8, at word 128)
/// in f32, with bits below tf32's 10-bit mantissa, some past the halfway
/// point (rounded up, away from zero), some below it (rounded down).
float tf32A(int r, int k) {
  return float((r * 5 + k * 3) % 9 - 4) + float((r + k) % 4) * 0.000732421875f;
}
float tf32B(int k, int n) {
  return float((k * 3 + n * 5) % 7 - 3) - float((k + n) % 3) * 0.000244140625f;
}

std::vector<uint32_t> tf32Inputs() {
  std::vector<uint32_t> words(192, 0);
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < 8; ++k)
      words[r * 8 + k] = bits(tf32A(r, k));
  for (int k = 0; k < 8; ++k)
    for (int n = 0; n < 8; ++n)
      words[128 + k * 8 + n] = bits(tf32B(k, n));
  return words;
}

/// tf32 by cvt.rna: round to nearest on the magnitude, ties away from zero,
/// to 10 bits of mantissa (finite inputs).
float roundTf32(float f) {
  uint32_t x = bits(f);
  x = (x + 0x1000u) & ~0x1FFFu;
  float out;
  std::memcpy(&out, &x, 4);
  return out;
}

std::vector<uint32_t> tf32Reference(uint32_t lane) {
  uint32_t g = lane / 4, t = lane % 4;
  std::vector<uint32_t> want(5);
  for (uint32_t i = 0; i < 4; ++i) {
    int r = int(g + (i / 2) * 8), n = int(2 * t + i % 2);
    double sum = double(lane * 4 + i);
    for (int k = 0; k < 8; ++k)
      sum += double(roundTf32(tf32A(r, k))) * double(roundTf32(tf32B(k, n)));
    want[i] = bits(float(sum));
  }
  want[4] = bits(roundTf32(tf32A(int(g), int(t))));
  return want;
}

/// Checks each of `threads` threads' results (`stride` words apart in
/// `got`) against `reference(t)`, as many as it gives.
void expectThreads(
    const char *family, const std::vector<uint32_t> &got, size_t threads,
    size_t stride,
    const std::function<std::vector<uint32_t>(uint32_t)> &reference) {
  for (uint32_t t = 0; t < threads; ++t) {
    std::vector<uint32_t> want = reference(t);
    for (size_t k = 0; k < want.size(); ++k)
      expectEqual(family, static_cast<int>(t), static_cast<int>(k),
                  got[t * stride + k], want[k]);
  }
}

/// "OK integer: 64 threads x 28 results", or FAIL when a check since
/// `before` failures did.
void reportFamily(const char *family, int before, size_t threads,
                  size_t results, const char *more = "") {
  std::printf("%s %s: %zu threads x %zu results%s\n",
              failures == before ? "OK" : "FAIL", family, threads, results,
              more);
}

/// Runs `name` of `ptx` (after the battery's header) on one block of
/// `threads` threads with `params`, the null one replaced by an output of
/// `threads * stride` words, and returns the output.
std::vector<uint32_t> runBlock(const char *family, const char *ptx,
                               const char *name, unsigned threads,
                               size_t stride, std::vector<void *> params,
                               unsigned dynamicShared = 0) {
  std::string text = std::string(header) + ptx;
  CUfunction f = load(text.c_str(), name);
  Buffer<uint32_t> out(threads * stride);
  std::replace(params.begin(), params.end(), static_cast<void *>(nullptr),
               static_cast<void *>(out.device));
  std::vector<void *> pointers;
  for (void *&param : params)
    pointers.push_back(&param);
  check(launch(f, 1, threads, pointers, dynamicShared), family);
  return out.get();
}

/// A family of operations on input pairs: thread t computes `results`
/// words from inputs[2t] and inputs[2t + 1], checked against `reference`.
void runFamily(const char *family, const char *ptx, const char *name,
               const std::vector<uint32_t> &inputs, size_t results,
               std::function<std::vector<uint32_t>(uint32_t, uint32_t)> ref) {
  size_t threads = inputs.size() / 2;
  Buffer<uint32_t> in(inputs.size());
  in.put(inputs);
  std::vector<uint32_t> got =
      runBlock(family, ptx, name, static_cast<unsigned>(threads), results,
               {in.device, nullptr});
  int before = failures;
  expectThreads(family, got, threads, results, [&](uint32_t t) {
    return ref(inputs[2 * t], inputs[2 * t + 1]);
  });
  reportFamily(family, before, threads, results);
}

/// What thread t of memory_ops stores (its 8th word, the inc's old value,
/// depends on the order the threads ran in and is not checked).
std::vector<uint32_t> memoryReference(uint32_t t) {
  const uint32_t table[4] = {7, 11, 13, 17};
  // The dynamic region starts after the 20 static bytes, at 16-byte
  // alignment; both extern arrays are it.
  return {32, 0, t * 3, t * 3, table[t % 4], 63, 256};
}

int semantics() {
  runFamily("integer", intKernel, "int_ops", intInputs(), 36, intReference);
  runFamily("float", floatKernel, "float_ops", floatInputs(), 31,
            floatReference);
  int before = failures;
  expectThreads("warp",
                runBlock("warp", warpKernel, "warp_ops", 64, 16, {nullptr}), 64,
                16, warpReference);
  reportFamily("warp", before, 64, 14);

  before = failures;
  Buffer<uint32_t> tiles(384);
  tiles.put(mmaInputs());
  expectThreads("tensor core",
                runBlock("tensor core", mmaKernel, "mma_ops", 32, 28,
                         {tiles.device, nullptr}),
                32, 28, mmaReference);
  reportFamily("tensor core", before, 32, 25);

  before = failures;
  Buffer<uint32_t> tf32In(192);
  tf32In.put(tf32Inputs());
  expectThreads(
      "tf32",
      runBlock("tf32", tf32Kernel, "tf32_ops", 32, 8, {tf32In.device, nullptr}),
      32, 8, tf32Reference);
  reportFamily("tf32", before, 32, 5);

  before = failures;
  Buffer<uint32_t> counter(4);
  expectThreads("memory",
                runBlock("memory", memoryKernel, "memory_ops", 64, 8,
                         {nullptr, counter.device}, 256),
                64, 8, memoryReference);
  // inc wraps at 9: 64 increments from 0 leave 64 mod 10.
  std::vector<uint32_t> count = counter.get();
  const uint32_t counts[4] = {64, 64 % 10, 77, 5};
  for (int k = 0; k < 4; ++k)
    expectEqual("memory", -1, k, count[k], counts[k]);
  reportFamily("memory", before, 64, 7, ", 4 atomics");
  std::printf("semantics: %d mismatches\n", failures);
  return failures ? 1 : 0;
}

//===----------------------------------------------------------------------===//
// Broken kernels and their twins
//===----------------------------------------------------------------------===//

// Each thread stores its index into shared memory; thread 0 sums them.
// BARRIER is replaced by bar.sync (the correct kernel) or nothing.
const char *const reduceKernel = R"PTX(
.visible .entry reduce(.param .u64 out_param)
{
  .shared .align 4 .b8 values[256];
  .reg .pred %p<3>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out_param];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  mov.u64 %rd3, values;
  add.s64 %rd3, %rd3, %rd2;
  st.shared.u32 [%rd3], %r1;
  BARRIER
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  mov.u32 %r2, 0;
  mov.u32 %r3, 0;
LOOP:
  mul.wide.u32 %rd4, %r3, 4;
  mov.u64 %rd5, values;
  add.s64 %rd5, %rd5, %rd4;
  ld.shared.u32 %r4, [%rd5];
  add.u32 %r2, %r2, %r4;
  add.u32 %r3, %r3, 1;
  setp.lt.u32 %p2, %r3, 64;
  @%p2 bra LOOP;
  st.global.u32 [%rd1], %r2;
DONE:
  ret;
}
)PTX";

// Block 1 stores 42 into data and announces it on flag (release); block 0
// waits for the flag (acquire) and copies data to out. ORDER is the two
// stores in the right or the wrong order.
const char *const flagKernel = R"PTX(
.visible .entry flag(.param .u64 data_param, .param .u64 flag_param,
                     .param .u64 out_param)
{
  .reg .pred %p<3>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [data_param];
  ld.param.u64 %rd2, [flag_param];
  ld.param.u64 %rd3, [out_param];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra DONE;
  setp.eq.u32 %p2, %r1, 0;
  @%p2 bra CONSUMER;
  ORDER
  bra.uni DONE;
CONSUMER:
  ld.acquire.gpu.global.u32 %r3, [%rd2];
  setp.eq.u32 %p1, %r3, 0;
  @%p1 bra CONSUMER;
  ld.global.u32 %r4, [%rd1];
  st.global.u32 [%rd3], %r4;
DONE:
  ret;
}
)PTX";

// Blocks 1..n each release their own flag; block 0 acquires every flag in
// turn, so that it learns of n blocks of a running kernel (more than the
// race detector keeps), then reads what block 1 stored after its release:
// a race, whose report says the reader's knowledge overflowed.
const char *const overflowKernel = R"PTX(
.visible .entry overflow(.param .u64 data_param, .param .u64 flag_param,
                         .param .u64 out_param, .param .u32 n_param)
{
  .reg .pred %p<4>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [data_param];
  ld.param.u64 %rd2, [flag_param];
  ld.param.u64 %rd3, [out_param];
  ld.param.u32 %r5, [n_param];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  setp.ne.u32 %p1, %r2, 0;
  @%p1 bra DONE;
  setp.eq.u32 %p2, %r1, 0;
  @%p2 bra CONSUMER;
  mul.wide.u32 %rd4, %r1, 4;
  add.u64 %rd5, %rd2, %rd4;
  st.release.gpu.global.u32 [%rd5], 1;
  setp.ne.u32 %p3, %r1, 1;
  @%p3 bra DONE;
  st.global.u32 [%rd1], 42;
  bra.uni DONE;
CONSUMER:
  mov.u32 %r3, 1;
NEXT:
  mul.wide.u32 %rd4, %r3, 4;
  add.u64 %rd5, %rd2, %rd4;
WAIT:
  ld.acquire.gpu.global.u32 %r4, [%rd5];
  setp.eq.u32 %p1, %r4, 0;
  @%p1 bra WAIT;
  add.u32 %r3, %r3, 1;
  setp.le.u32 %p1, %r3, %r5;
  @%p1 bra NEXT;
  ld.global.u32 %r4, [%rd1];
  st.global.u32 [%rd3], %r4;
DONE:
  ret;
}
)PTX";

const char *const flagRight =
    "st.global.u32 [%rd1], 42;\n  st.release.gpu.global.u32 [%rd2], 1;";
const char *const flagWrong =
    "st.release.gpu.global.u32 [%rd2], 1;\n  st.global.u32 [%rd1], 42;";

const char *const faultKernels = R"PTX(
.visible .entry misaligned(.param .u64 in_param, .param .u64 out_param)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [in_param];
  ld.param.u64 %rd2, [out_param];
  ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1+4];
  st.global.u32 [%rd2], %r1;
  ret;
}

.visible .entry out_of_bounds(.param .u64 out_param, .param .u64 n_param)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out_param];
  ld.param.u64 %rd2, [n_param];
  mov.u32 %r1, %tid.x;
  cvt.u64.u32 %rd3, %r1;
  add.s64 %rd3, %rd3, %rd2;
  shl.b64 %rd3, %rd3, 2;
  add.s64 %rd4, %rd1, %rd3;
  st.global.u32 [%rd4], %r1;
  ret;
}

.extern .shared .align 16 .b8 scratch[];
.visible .entry shared_overrun(.param .u64 out_param)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd1, %r1, 16;
  mov.u64 %rd2, scratch;
  add.s64 %rd2, %rd2, %rd1;
  st.shared.v4.u32 [%rd2], {%r1, %r1, %r1, %r1};
  ret;
}

.visible .entry barrier_exit(.param .u64 out_param)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  mov.u32 %r1, %tid.x;
  setp.ge.u32 %p1, %r1, 16;
  @%p1 bra DONE;
  bar.sync 0;
DONE:
  ret;
}

.visible .entry trap_kernel(.param .u64 out_param)
{
  trap;
}

.extern .func __assertfail
(
  .param .b64 __assertfail_param_0,
  .param .b64 __assertfail_param_1,
  .param .b32 __assertfail_param_2,
  .param .b64 __assertfail_param_3,
  .param .b64 __assertfail_param_4
)
;
.global .align 1 .b8 assert_message[9] = {105, 100, 32, 60, 32, 49, 50, 56, 0};
.global .align 1 .b8 assert_file[9] = {109, 111, 100, 101, 108, 46, 112, 121, 0};

.visible .entry assert_kernel(.param .u64 out_param)
{
  .reg .b64 %rd<4>;
  { // callseq 0, 0
  .param .b64 param0;
  .param .b64 param1;
  .param .b32 param2;
  .param .b64 param3;
  .param .b64 param4;
  mov.u64 %rd1, assert_message;
  cvta.global.u64 %rd2, %rd1;
  st.param.b64 [param0], %rd2;
  mov.u64 %rd1, assert_file;
  cvta.global.u64 %rd3, %rd1;
  st.param.b64 [param1], %rd3;
  st.param.b32 [param2], 370;
  st.param.b64 [param3], %rd3;
  st.param.b64 [param4], 1;
  call.uni __assertfail, (param0, param1, param2, param3, param4);
  } // callseq 0
  trap;
}

.visible .entry wait_flag(.param .u64 flag_param)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [flag_param];
WAIT:
  ld.acquire.gpu.global.u32 %r1, [%rd1];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra WAIT;
  ret;
}

.visible .entry spin(.param .u64 flag_param, .param .u32 setter_param)
{
  .reg .pred %p<4>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [flag_param];
  ld.param.u32 %r1, [setter_param];
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %tid.x;
  setp.ne.u32 %p1, %r3, 0;
  @%p1 bra DONE;
  setp.eq.u32 %p2, %r2, %r1;
  @%p2 bra SET;
WAIT:
  ld.acquire.gpu.global.u32 %r4, [%rd1];
  setp.eq.u32 %p3, %r4, 0;
  @%p3 bra WAIT;
  bra.uni DONE;
SET:
  st.release.gpu.global.u32 [%rd1], 1;
DONE:
  ret;
}
)PTX";

std::string replace(std::string text, const std::string &from,
                    const std::string &to) {
  size_t at = text.find(from);
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// Runs a mode; returns the exit code (0: the run succeeded and the result
/// was right).
int broken(const std::string &mode) {
  auto verdict = [&](cudaError_t rc, bool right) {
    if (rc != cudaSuccess) {
      std::printf("%s: the run failed: %s\n", mode.c_str(),
                  cudaGetErrorString(rc));
      return 1;
    }
    std::printf("%s: %s\n", mode.c_str(),
                right ? "ran, result right" : "ran, result WRONG");
    return right ? 0 : 1;
  };
  if (mode == "barrier" || mode == "barrier-ok") {
    std::string text =
        std::string(header) + replace(reduceKernel, "BARRIER",
                                      mode == "barrier" ? "" : "bar.sync 0;");
    CUfunction f = load(text.c_str(), "reduce");
    Buffer<uint32_t> out(1);
    void *p = out.device;
    cudaError_t rc = launch(f, 1, 64, {&p});
    return verdict(rc, rc == cudaSuccess && out.get()[0] == 63 * 64 / 2);
  }
  if (mode == "flag-order" || mode == "flag-order-ok") {
    std::string text = std::string(header) +
                       replace(flagKernel, "ORDER",
                               mode == "flag-order" ? flagWrong : flagRight);
    CUfunction f = load(text.c_str(), "flag");
    Buffer<uint32_t> data(1), flag(1), out(1);
    void *d = data.device, *g = flag.device, *o = out.device;
    cudaError_t rc = launch(f, 2, 32, {&d, &g, &o});
    return verdict(rc, rc == cudaSuccess && out.get()[0] == 42);
  }
  if (mode == "clock-overflow") {
    std::string text = std::string(header) + overflowKernel;
    CUfunction f = load(text.c_str(), "overflow");
    uint32_t n = 600;
    Buffer<uint32_t> data(1), flags(n + 1), out(1);
    void *d = data.device, *g = flags.device, *o = out.device;
    cudaError_t rc = launch(f, n + 1, 32, {&d, &g, &o, &n});
    return verdict(rc, rc == cudaSuccess && out.get()[0] == 42);
  }
  std::string text = std::string(header) + faultKernels;
  if (mode == "misaligned") {
    CUfunction f = load(text.c_str(), "misaligned");
    Buffer<uint32_t> in(16), out(1);
    void *i = in.device, *o = out.device;
    return verdict(launch(f, 1, 1, {&i, &o}), true);
  }
  if (mode == "out-of-bounds") {
    CUfunction f = load(text.c_str(), "out_of_bounds");
    Buffer<uint32_t> out(60);
    void *o = out.device;
    uint64_t n = 50; // threads 10.. write past the 60 elements
    return verdict(launch(f, 1, 32, {&o, &n}), true);
  }
  if (mode == "shared-overrun") {
    CUfunction f = load(text.c_str(), "shared_overrun");
    void *o = nullptr;
    // 64 threads store 16 bytes each into 512 bytes of dynamic shared memory.
    return verdict(launch(f, 1, 64, {&o}, 512), true);
  }
  if (mode == "barrier-exit") {
    CUfunction f = load(text.c_str(), "barrier_exit");
    void *o = nullptr;
    return verdict(launch(f, 1, 64, {&o}), true);
  }
  if (mode == "trap") {
    CUfunction f = load(text.c_str(), "trap_kernel");
    void *o = nullptr;
    return verdict(launch(f, 1, 1, {&o}), true);
  }
  if (mode == "refused") {
    // Forms the emulated device does not implement: each module's load
    // fails, with the line it cannot run reported (never a guess).
    const char *bodies[] = {
        "shf.b32 %r1, %r2, %r2, %r2;",           // no direction, no mode
        "add.cc.f32 %f1, %f1, %f1;",             // the carry flag of a float
        "mad.wide.cc.u32 %rd1, %r2, %r2, %rd1;", // a carry of .wide
        "call.uni other, (%r1);",                // a call but __assertfail
    };
    int loaded = 0;
    for (const char *body : bodies) {
      std::string module = std::string(header) +
                           ".visible .entry refused() {\n"
                           "  .reg .b32 %r<3>;\n  .reg .f32 %f<2>;\n"
                           "  .reg .b64 %rd<2>;\n  " +
                           body + "\n  ret;\n}\n";
      CUmodule handle = nullptr;
      loaded +=
          driver().moduleLoadData(&handle, module.c_str()) == CUDA_SUCCESS;
    }
    std::printf("refused: %d of 4 loaded\n", loaded);
    return loaded == 0 ? 0 : 1;
  }
  if (mode == "assert") {
    CUfunction f = load(text.c_str(), "assert_kernel");
    void *o = nullptr;
    return verdict(launch(f, 1, 1, {&o}), true);
  }
  if (mode == "wait-forever") {
    CUfunction f = load(text.c_str(), "wait_flag");
    Buffer<uint32_t> flag(1);
    void *g = flag.device;
    return verdict(launch(f, 1, 32, {&g}), true);
  }
  if (mode == "spin" || mode == "spin-ok") {
    // 1024-thread blocks: 2 per SM; with BRAID_EMULATE_SMS=2 at most 4 are
    // resident. Every block waits for a flag that the last of 8 blocks
    // sets (never scheduled on a GPU: the first four spin forever), or
    // block 1 (resident with block 0).
    CUfunction f = load(text.c_str(), "spin");
    Buffer<uint32_t> flag(1);
    void *g = flag.device;
    uint32_t setter = mode == "spin" ? 7 : 1;
    return verdict(launch(f, 8, 1024, {&g, &setter}), true);
  }
  std::fprintf(stderr, "selftest: unknown mode %s\n", mode.c_str());
  return 2;
}

//===----------------------------------------------------------------------===//
// A peer store across two rank processes
//===----------------------------------------------------------------------===//

// Rank 0 stores 42 into its peer's buffer (then, in the correct program,
// releases the peer's flag at system scope); rank 1 waits for its flag
// (acquire) and copies its buffer to out, or in the broken one reads at
// once, after only a host-side handshake the device cannot see.
const char *const peerKernels = R"PTX(
.visible .entry peer_store(.param .u64 peer_param, .param .u64 flag_param,
                           .param .u32 signal_param)
{
  .reg .pred %p<2>;
  .reg .b32 %r<3>;
  .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [peer_param];
  ld.param.u64 %rd2, [flag_param];
  ld.param.u32 %r1, [signal_param];
  st.global.u32 [%rd1], 42;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  red.release.sys.global.add.u32 [%rd2], 1;
DONE:
  ret;
}

.visible .entry peer_read(.param .u64 mine_param, .param .u64 flag_param,
                          .param .u64 out_param, .param .u32 wait_param)
{
  .reg .pred %p<3>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [mine_param];
  ld.param.u64 %rd2, [flag_param];
  ld.param.u64 %rd3, [out_param];
  ld.param.u32 %r1, [wait_param];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra READ;
WAIT:
  ld.acquire.sys.global.u32 %r2, [%rd2];
  setp.eq.u32 %p2, %r2, 0;
  @%p2 bra WAIT;
READ:
  ld.global.u32 %r3, [%rd1];
  st.global.u32 [%rd3], %r3;
  ret;
}
)PTX";

int peerRank(int rank, ncclUniqueId id, bool correct, int toPeer,
             int fromPeer) {
  check(cudaSetDevice(rank), "cudaSetDevice");
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "selftest: ncclCommInitRank failed\n");
    return 2;
  }
  // [0, 4): data, [4, 8): flag.
  void *buffer = nullptr;
  ncclMemAlloc(&buffer, 4096);
  check(cudaMemset(buffer, 0, 4096), "cudaMemset");
  ncclWindow_t window;
  ncclCommWindowRegister(comm, buffer, 4096, &window, NCCL_WIN_COLL_SYMMETRIC);
  ncclWindow_vidmem fields{};
  check(cudaMemcpy(&fields, window, sizeof(fields), cudaMemcpyDefault),
        "cudaMemcpy");
  int peer = 1 - rank;
  char *peerBuffer = fields.lsaFlatBase +
                     ((static_cast<uint64_t>(peer) * fields.stride4G) << 32);
  std::string text = std::string(header) + peerKernels;
  char byte = 0;
  int code = 0;
  if (rank == 0) {
    CUfunction f = load(text.c_str(), "peer_store");
    void *data = peerBuffer, *flag = peerBuffer + 4;
    uint32_t signal = correct ? 1 : 0;
    cudaError_t rc = launch(f, 1, 1, {&data, &flag, &signal});
    code = rc == cudaSuccess ? 0 : 1;
    // Tell rank 1 its data is there (a host handshake, invisible to the
    // device), then wait for it to finish.
    (void)!write(toPeer, &byte, 1);
    (void)!read(fromPeer, &byte, 1);
  } else {
    (void)!read(fromPeer, &byte, 1);
    CUfunction f = load(text.c_str(), "peer_read");
    Buffer<uint32_t> out(1);
    void *mine = buffer, *flag = static_cast<char *>(buffer) + 4,
         *o = out.device;
    uint32_t wait = correct ? 1 : 0;
    cudaError_t rc = launch(f, 1, 1, {&mine, &flag, &o, &wait});
    code = rc != cudaSuccess ? 1 : (out.get()[0] == 42 ? 0 : 1);
    std::printf("peer-store%s: rank 1 %s\n", correct ? "-ok" : "",
                rc != cudaSuccess ? "failed"
                : code            ? "read a wrong value"
                                  : "read 42");
    std::fflush(stdout);
    (void)!write(toPeer, &byte, 1);
  }
  return code;
}

int peerStore(bool correct) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess)
    return 2;
  int toChild[2], toParent[2];
  if (pipe(toChild) || pipe(toParent))
    return 2;
  std::fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    setenv("BRAID_RANK", "1", 1);
    std::_Exit(peerRank(1, id, correct, toParent[1], toChild[0]));
  }
  int code = peerRank(0, id, correct, toChild[1], toParent[0]);
  int status = 0;
  waitpid(child, &status, 0);
  int childCode = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return code ? code : childCode;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: braid-emulator-selftest MODE (see the "
                         "source's header)\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "ptx") {
    // Modules as split-file sections.
    std::printf("//--- kernels.ptx\n%s%s%s%s%s%s%s\n", header, intKernel,
                floatKernel, warpKernel, mmaKernel, memoryKernel, faultKernels);
    std::printf("//--- peer.ptx\n%s%s\n", header, peerKernels);
    std::printf("//--- flag.ptx\n%s%s%s\n", header,
                replace(flagKernel, "ORDER", flagRight).c_str(),
                overflowKernel);
    std::printf("//--- reduce.ptx\n%s%s\n", header,
                replace(reduceKernel, "BARRIER", "bar.sync 0;").c_str());
    return 0;
  }
  if (mode == "peer-store" || mode == "peer-store-ok")
    return peerStore(mode == "peer-store-ok");
  check(cudaSetDevice(0), "cudaSetDevice");
  if (mode == "semantics")
    return semantics();
  return broken(mode);
}
