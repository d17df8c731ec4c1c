//===- MlirGpu.cpp - The MLIR GPU runtime ABI on the rank's streams -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// gpu-to-llvm lowers GPU operations to calls of upstream MLIR's
// CudaRuntimeWrappers (mgpu*). Braid provides them itself, with the same
// signatures, so that compiled programs need no MLIR libraries and all
// their device work lands on the calling rank's compute stream: the
// "streams" the program creates are that stream, and the program never
// blocks the host (braid_rt_synchronize does, for the runner).
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "Driver.h"

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

using namespace braid::rt;
using namespace braid::rt::cuda;

#define MGPU_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

/// Kernel names for messages and traces, and the managed allocations
/// (which cudaFreeAsync cannot free).
struct Registry {
  std::mutex mutex;
  std::unordered_map<void *, std::string> kernelNames;
  std::unordered_set<void *> managed;
};

Registry &registry() {
  static Registry *instance = new Registry();
  return *instance;
}

std::string kernelName(void *function) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto found = r.kernelNames.find(function);
  return found == r.kernelNames.end() ? std::string("a kernel")
                                      : "kernel " + found->second;
}

/// The device the runtime chose, current on this thread, with its primary
/// context: module loads run in global constructors, possibly on a thread
/// that has not used CUDA yet.
void ensureContext(const char *call) {
  RankState *state = currentRankOrNull();
  int device = state ? state->device : 0;
  if (!state) {
    // The loopback main thread (or a process before init): the runtime made
    // its device current at init on this thread; keep whatever is current.
    if (cudaGetDevice(&device) != cudaSuccess)
      device = 0;
  }
  checkCuda(cudaSetDevice(device), "cudaSetDevice", call);
  checkCuda(cudaFree(nullptr), "cudaFree(nullptr)", call);
}

} // namespace

MGPU_EXPORT void *mgpuModuleLoad(void *data, size_t /*gpuBlobSize*/) {
  ensureContext("mgpuModuleLoad");
  CUmodule module = nullptr;
  checkDriver(driver().moduleLoadData(&module, data), "cuModuleLoadData",
              "mgpuModuleLoad (loading the program's kernels)");
  return module;
}

/// gpu-module-to-binary with format=isa embeds PTX (NUL-terminated), which
/// the driver compiles for the device at load time.
MGPU_EXPORT void *mgpuModuleLoadJIT(void *data, int optLevel) {
  const char *call = "mgpuModuleLoadJIT";
  ensureContext(call);
  if (optLevel < 0 || optLevel > 4)
    fatalf("%s: JIT optimization level %d is out of range (0 to 4)", call,
           optLevel);
  char errorLog[8192] = {0};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_OPTIMIZATION_LEVEL};
  void *values[] = {errorLog, reinterpret_cast<void *>(sizeof(errorLog) - 1),
                    reinterpret_cast<void *>(static_cast<intptr_t>(optLevel))};
  CUmodule module = nullptr;
  CUresult rc = driver().moduleLoadDataEx(&module, data, 3, options, values);
  if (rc != CUDA_SUCCESS) {
    errorLog[sizeof(errorLog) - 1] = '\0';
    const char *text = nullptr;
    if (driver().getErrorString(rc, &text) != CUDA_SUCCESS || !text)
      text = "unknown driver error";
    fatalf("cuModuleLoadDataEx in %s (JIT-compiling the program's PTX "
           "kernels): %s (CUresult %d)%s%s",
           call, text, static_cast<int>(rc), *errorLog ? ": " : "", errorLog);
  }
  return module;
}

MGPU_EXPORT void mgpuModuleUnload(void *module) {
  // Runs from global destructors at exit, when the context may already be
  // gone; nothing useful can be done about a failure then.
  if (module)
    (void)driver().moduleUnload(static_cast<CUmodule>(module));
}

MGPU_EXPORT void *mgpuModuleGetFunction(void *module, const char *name) {
  CUfunction function = nullptr;
  checkDriver(driver().moduleGetFunction(&function,
                                         static_cast<CUmodule>(module), name),
              "cuModuleGetFunction",
              formatString("mgpuModuleGetFunction (%s)", name ? name : "?"));
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.kernelNames.emplace(function, name ? name : "?");
  return function;
}

MGPU_EXPORT void mgpuLaunchKernel(void *function, intptr_t gridX,
                                  intptr_t gridY, intptr_t gridZ,
                                  intptr_t blockX, intptr_t blockY,
                                  intptr_t blockZ, int32_t smem,
                                  void * /*stream*/, void **params,
                                  void **extra, size_t /*paramsCount*/) {
  RankState &state = currentRank("mgpuLaunchKernel");
  std::string name = kernelName(function);
  // "kernel main_kernel_3 (reduce, rsqrt) at model.py:12:3": the symbol,
  // and what the program says it computes and where it came from.
  if (state.described.name)
    name += std::string(" ") + state.described.name;
  std::string context = "mgpuLaunchKernel (" + name + ")";
  auto cuFunction = static_cast<CUfunction>(function);
  // Beyond 48 KiB of static and dynamic shared memory together, the
  // dynamic part must be opted into per function; the static part is
  // small (reduction buffers), so opt in for anything above 32 KiB.
  if (smem > 32 * 1024)
    checkDriver(
        driver().funcSetAttribute(
            cuFunction, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
        "cuFuncSetAttribute", context);
  state.lastCompute = name;
  EventPtr start;
  traceBegin(state, state.compute, start);
  checkDriver(driver().launchKernel(
                  cuFunction, static_cast<unsigned>(gridX),
                  static_cast<unsigned>(gridY), static_cast<unsigned>(gridZ),
                  static_cast<unsigned>(blockX), static_cast<unsigned>(blockY),
                  static_cast<unsigned>(blockZ), static_cast<unsigned>(smem),
                  reinterpret_cast<CUstream>(state.compute), params, extra),
              "cuLaunchKernel", context);
  traceEnd(state, state.compute, start, Track::Kernel, name,
           state.described.bytes, state.described.flops);
}

MGPU_EXPORT void *mgpuStreamCreate() {
  return currentRank("mgpuStreamCreate").compute;
}

MGPU_EXPORT void mgpuStreamDestroy(void * /*stream*/) {}

MGPU_EXPORT void mgpuStreamSynchronize(void * /*stream*/) {
  // All device work of a rank is ordered on its compute stream; the host
  // only waits in braid_rt_synchronize.
}

MGPU_EXPORT void mgpuStreamWaitEvent(void * /*stream*/, void *event) {
  RankState &state = currentRank("mgpuStreamWaitEvent");
  checkCuda(
      cudaStreamWaitEvent(state.compute, static_cast<cudaEvent_t>(event), 0),
      "cudaStreamWaitEvent", "mgpuStreamWaitEvent");
}

MGPU_EXPORT void *mgpuEventCreate() {
  cudaEvent_t event = nullptr;
  checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
            "cudaEventCreateWithFlags", "mgpuEventCreate");
  return event;
}

MGPU_EXPORT void mgpuEventDestroy(void *event) {
  checkCuda(cudaEventDestroy(static_cast<cudaEvent_t>(event)),
            "cudaEventDestroy", "mgpuEventDestroy");
}

MGPU_EXPORT void mgpuEventSynchronize(void *event) {
  checkCuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event)),
            "cudaEventSynchronize", "mgpuEventSynchronize");
}

MGPU_EXPORT void mgpuEventRecord(void *event, void * /*stream*/) {
  RankState &state = currentRank("mgpuEventRecord");
  checkCuda(cudaEventRecord(static_cast<cudaEvent_t>(event), state.compute),
            "cudaEventRecord", "mgpuEventRecord");
}

MGPU_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, void * /*stream*/,
                               bool isHostShared) {
  RankState &state = currentRank("mgpuMemAlloc");
  if (sizeBytes == 0)
    return nullptr;
  void *pointer = nullptr;
  std::string context =
      formatString("mgpuMemAlloc (%s)",
                   formatBytes(static_cast<int64_t>(sizeBytes)).c_str());
  if (isHostShared) {
    checkCuda(cudaMallocManaged(&pointer, sizeBytes, cudaMemAttachGlobal),
              "cudaMallocManaged", context);
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.managed.insert(pointer);
    return pointer;
  }
  checkCuda(cudaMallocAsync(&pointer, sizeBytes, state.compute),
            "cudaMallocAsync", context);
  return pointer;
}

MGPU_EXPORT void mgpuMemFree(void *ptr, void * /*stream*/) {
  if (!ptr)
    return;
  RankState &state = currentRank("mgpuMemFree");
  bool managed = false;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    managed = r.managed.erase(ptr) > 0;
  }
  if (managed) {
    // cudaFree of managed memory waits for the device itself.
    checkCuda(cudaFree(ptr), "cudaFree", "mgpuMemFree");
    return;
  }
  checkCuda(cudaFreeAsync(ptr, state.compute), "cudaFreeAsync", "mgpuMemFree");
}

MGPU_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                            void * /*stream*/) {
  RankState &state = currentRank("mgpuMemcpy");
  checkCuda(
      cudaMemcpyAsync(dst, src, sizeBytes, cudaMemcpyDefault, state.compute),
      "cudaMemcpyAsync", "mgpuMemcpy");
}

MGPU_EXPORT void mgpuMemset32(void *dst, unsigned int value, size_t count,
                              void * /*stream*/) {
  RankState &state = currentRank("mgpuMemset32");
  checkDriver(
      driver().memsetD32Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                              reinterpret_cast<CUstream>(state.compute)),
      "cuMemsetD32Async", "mgpuMemset32");
}

MGPU_EXPORT void mgpuMemset16(void *dst, unsigned short value, size_t count,
                              void * /*stream*/) {
  RankState &state = currentRank("mgpuMemset16");
  checkDriver(
      driver().memsetD16Async(reinterpret_cast<CUdeviceptr>(dst), value, count,
                              reinterpret_cast<CUstream>(state.compute)),
      "cuMemsetD16Async", "mgpuMemset16");
}
