//===- Cudart.cpp - The emulated device's CUDA runtime and driver API -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// libcudart.so.13 of the emulated device: the runtime API calls Braid's
// cuda runtime makes, and the driver API it resolves through
// cudaGetDriverEntryPointByVersion (modules, launches, memsets, stream
// memory operations). Arguments are checked as CUDA checks them, and
// device-side work goes on the device's streams (Device.h).
//
// Modules are PTX: the emulated device runs what ptxas would compile. A
// cubin or fatbin (SASS) is refused with a message saying how to build PTX
// (`--gpu-format=isa`, which `braid-run --emulate` passes).
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Interpreter.h"
#include "Memory.h"
#include "Streams.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

using namespace braid::emu;

namespace {

struct Function {
  LoadedModule *module = nullptr;
  const ptx::Function *kernel = nullptr;
  int maxDynamicShared = 48 * 1024;
};

struct ModuleRecord {
  std::unique_ptr<LoadedModule> module;
  std::vector<std::unique_ptr<Function>> functions;
};

std::mutex &modulesMutex() {
  static auto *mutex = new std::mutex();
  return *mutex;
}
std::map<void *, std::unique_ptr<ModuleRecord>> &modules() {
  static auto *table = new std::map<void *, std::unique_ptr<ModuleRecord>>();
  return *table;
}

thread_local int currentDevice = 0;
thread_local cudaError_t lastError = cudaSuccess;

cudaError_t note(cudaError_t error) {
  if (error != cudaSuccess)
    lastError = error;
  return error;
}

/// The sticky error, if the device failed.
cudaError_t sticky() { return static_cast<cudaError_t>(deviceError()); }

unsigned smCountOf(unsigned sm) {
  if (const char *value = std::getenv("BRAID_EMULATE_SMS"))
    if (int count = std::atoi(value); count > 0)
      return static_cast<unsigned>(count);
  return sm >= 90 ? 132 : sm >= 80 ? 108 : 80;
}

/// The most shared memory a block may have on the module's target.
uint64_t sharedLimit(unsigned sm) {
  return sm >= 90 ? 227 * 1024 : sm >= 80 ? 163 * 1024 : 96 * 1024;
}

bool onDevice(const char *what) {
  return what && std::strcmp(what, "host") != 0;
}

} // namespace

//===----------------------------------------------------------------------===//
// Errors and devices
//===----------------------------------------------------------------------===//

EMU_EXPORT const char *braidEmulatedDevice(void) {
  return "Braid's emulated CUDA device (PTX interpreter)";
}

EMU_EXPORT const char *cudaGetErrorString(cudaError_t error) {
  switch (static_cast<int>(error)) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  case kIllegalAddress:
    return "an illegal memory access was encountered (emulated device: the "
           "fault is reported above)";
  case kLaunchTimeout:
    return "the launch timed out and was terminated (emulated device: a wait "
           "that never completes, reported above)";
  case kIllegalInstruction:
    return "an illegal instruction was encountered (emulated device: "
           "reported above)";
  case kMisalignedAddress:
    return "misaligned address (emulated device: reported above)";
  case kLaunchFailure:
    return "unspecified launch failure (emulated device: reported above)";
  default:
    return "unknown error";
  }
}

EMU_EXPORT const char *cudaGetErrorName(cudaError_t error) {
  return cudaGetErrorString(error);
}

EMU_EXPORT cudaError_t cudaGetLastError(void) {
  cudaError_t error = lastError;
  lastError = cudaSuccess;
  return error != cudaSuccess ? error : sticky();
}

EMU_EXPORT cudaError_t cudaPeekAtLastError(void) {
  return lastError != cudaSuccess ? lastError : sticky();
}

EMU_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
  if (!count)
    return note(cudaErrorInvalidValue);
  const char *text = std::getenv("BRAID_EMULATE_DEVICES");
  *count = text ? std::atoi(text) : 8;
  return *count > 0 ? cudaSuccess : note(cudaErrorNoDevice);
}

EMU_EXPORT cudaError_t cudaSetDevice(int device) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (device < 0 || device >= count)
    return note(cudaErrorInvalidDevice);
  currentDevice = device;
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaGetDevice(int *device) {
  if (!device)
    return note(cudaErrorInvalidValue);
  *device = currentDevice;
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least,
                                                        int *greatest) {
  // As on an H100: 0 is the lowest priority, -5 the highest.
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  return note(static_cast<cudaError_t>(synchronizeDevice()));
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

EMU_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream,
                                                    unsigned int flags,
                                                    int priority) {
  if (!stream)
    return note(cudaErrorInvalidValue);
  *stream = static_cast<cudaStream_t>(
      createStream(std::clamp(priority, -5, 0), flags & cudaStreamNonBlocking));
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream,
                                                 unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}

EMU_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithPriority(stream, 0, 0);
}

EMU_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return note(static_cast<cudaError_t>(destroyStream(stream)));
}

EMU_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return static_cast<cudaError_t>(queryStream(stream));
}

EMU_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return note(static_cast<cudaError_t>(synchronize(stream)));
}

EMU_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream,
                                           cudaEvent_t event, unsigned int) {
  return note(static_cast<cudaError_t>(
      streamWaitEvent(stream, reinterpret_cast<Event *>(event))));
}

EMU_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event,
                                                unsigned int flags) {
  if (!event)
    return note(cudaErrorInvalidValue);
  *event = reinterpret_cast<cudaEvent_t>(
      createEvent(!(flags & cudaEventDisableTiming)));
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, 0);
}

EMU_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return note(
      static_cast<cudaError_t>(destroyEvent(reinterpret_cast<Event *>(event))));
}

EMU_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return note(static_cast<cudaError_t>(
      recordEvent(reinterpret_cast<Event *>(event), stream)));
}

EMU_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  return static_cast<cudaError_t>(queryEvent(reinterpret_cast<Event *>(event)));
}

EMU_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return note(static_cast<cudaError_t>(
      synchronizeEvent(reinterpret_cast<Event *>(event))));
}

EMU_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                            cudaEvent_t end) {
  return static_cast<cudaError_t>(elapsedTime(
      ms, reinterpret_cast<Event *>(start), reinterpret_cast<Event *>(end)));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

namespace {

cudaError_t allocateInto(void **p, size_t size, MemoryKind kind,
                         const char *label) {
  if (!p)
    return note(cudaErrorInvalidValue);
  if (cudaError_t error = sticky())
    return error;
  *p = allocate(size, kind, label);
  return *p ? cudaSuccess : note(cudaErrorMemoryAllocation);
}

cudaError_t releaseFrom(void *p, bool pinned) {
  std::string why;
  if (!release(p, pinned, why))
    return note(cudaErrorInvalidValue);
  return cudaSuccess;
}

/// Checks that [p, p + bytes), which a stream operation reads or writes,
/// is still device memory when it runs.
bool stillThere(const void *p, uint64_t bytes, const char *what, int &code,
                std::string &report) {
  Region region;
  std::string why;
  if (findMemory(reinterpret_cast<uintptr_t>(p), bytes, region, why))
    return true;
  code = kIllegalAddress;
  char address[32];
  std::snprintf(
      address, sizeof(address), "0x%llx",
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  report = std::string(what) + " of " + std::to_string(bytes) + " bytes at " +
           address + ": " + why;
  return false;
}

cudaError_t copy(const char *call, void *dst, const void *src, size_t bytes,
                 cudaMemcpyKind kind, cudaStream_t stream, bool sync) {
  if (cudaError_t error = sticky())
    return error;
  if (bytes == 0)
    return cudaSuccess;
  if (!dst || !src)
    return note(cudaErrorInvalidValue);
  const char *to = classify(dst, bytes);
  const char *from = classify(src, bytes);
  if (!to || !from)
    return note(cudaErrorInvalidValue);
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToDevice:
    ok = std::strcmp(from, "device") != 0 && onDevice(to);
    break;
  case cudaMemcpyDeviceToHost:
    ok = onDevice(from) && std::strcmp(to, "device") != 0;
    break;
  case cudaMemcpyDeviceToDevice:
    ok = onDevice(from) && onDevice(to);
    break;
  case cudaMemcpyHostToHost:
    ok = !onDevice(from) && !onDevice(to);
    break;
  default:
    break;
  }
  if (!ok || !validStream(stream))
    return note(cudaErrorInvalidValue);
  bool fromDevice = onDevice(from), toDevice = onDevice(to);
  // Pageable host memory: the source is taken now (the caller may reuse
  // it as soon as the call returns), a pageable destination is written
  // before the call returns.
  std::shared_ptr<std::vector<uint8_t>> staged;
  if (!fromDevice) {
    staged = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t *>(src),
        static_cast<const uint8_t *>(src) + bytes);
  }
  cudaError_t error = static_cast<cudaError_t>(enqueue(
      stream, call, [=](OpContext &context, int &code, std::string &report) {
        if (fromDevice &&
            !stillThere(src, bytes, "a copy's read", code, report))
          return false;
        if (toDevice && !stillThere(dst, bytes, "a copy's write", code, report))
          return false;
        std::string race;
        if (fromDevice)
          race = recordOperationAccess(context, src, bytes, Read, call);
        if (toDevice && race.empty())
          race = recordOperationAccess(context, dst, bytes, Write, call);
        std::memmove(dst, staged ? staged->data() : src, bytes);
        if (!race.empty()) {
          code = kLaunchFailure;
          report = race;
          return false;
        }
        return true;
      }));
  if (error != cudaSuccess)
    return note(error);
  if (sync || !toDevice)
    return note(static_cast<cudaError_t>(synchronize(stream)));
  return cudaSuccess;
}

} // namespace

EMU_EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
  return allocateInto(p, size, MemoryKind::Device, "cudaMalloc");
}

EMU_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size,
                                       cudaStream_t stream) {
  if (!validStream(stream))
    return note(cudaErrorInvalidResourceHandle);
  return allocateInto(p, size, MemoryKind::Device, "cudaMallocAsync");
}

EMU_EXPORT cudaError_t cudaMallocHost(void **p, size_t size) {
  return allocateInto(p, size, MemoryKind::Pinned, "cudaMallocHost");
}

EMU_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int) {
  return allocateInto(p, size, MemoryKind::Managed, "cudaMallocManaged");
}

EMU_EXPORT cudaError_t cudaFree(void *p) {
  if (!p)
    return sticky();
  // cudaFree synchronizes with the device.
  synchronizeDevice();
  return releaseFrom(p, false);
}

EMU_EXPORT cudaError_t cudaFreeHost(void *p) {
  if (!p)
    return cudaSuccess;
  synchronizeDevice();
  return releaseFrom(p, true);
}

EMU_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  if (!p)
    return cudaSuccess;
  const char *what = classify(p, 1);
  if (!what || std::strcmp(what, "device") != 0)
    return note(cudaErrorInvalidValue);
  return note(static_cast<cudaError_t>(
      enqueue(stream, "cudaFreeAsync",
              [p](OpContext &, int &code, std::string &report) {
                std::string why;
                if (release(p, false, why))
                  return true;
                code = cudaErrorInvalidValue;
                report = "cudaFreeAsync: " + why;
                return false;
              })));
}

EMU_EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *out,
                                                const void *p) {
  if (!out)
    return note(cudaErrorInvalidValue);
  std::memset(out, 0, sizeof(*out));
  const char *what = classify(p, 1);
  out->device = currentDevice;
  if (!what || std::strcmp(what, "host") == 0) {
    out->type = cudaMemoryTypeUnregistered;
    out->hostPointer = const_cast<void *>(p);
  } else if (std::strcmp(what, "pinned host") == 0) {
    out->type = cudaMemoryTypeHost;
    out->hostPointer = out->devicePointer = const_cast<void *>(p);
  } else if (std::strcmp(what, "managed") == 0) {
    out->type = cudaMemoryTypeManaged;
    out->hostPointer = out->devicePointer = const_cast<void *>(p);
  } else {
    out->type = cudaMemoryTypeDevice;
    out->devicePointer = const_cast<void *>(p);
  }
  return cudaSuccess;
}

EMU_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                                  cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, bytes, kind, nullptr, true);
}

EMU_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                       cudaMemcpyKind kind,
                                       cudaStream_t stream) {
  return copy("cudaMemcpyAsync", dst, src, bytes, kind, stream, false);
}

namespace {

template <typename T>
CUresult memset(CUdeviceptr dst, T value, size_t count, CUstream stream,
                const char *call) {
  void *p = reinterpret_cast<void *>(dst);
  uint64_t bytes = count * sizeof(T);
  if (cudaError_t error = sticky())
    return static_cast<CUresult>(error);
  if (bytes && !onDevice(classify(p, bytes)))
    return CUDA_ERROR_INVALID_VALUE;
  if (dst % sizeof(T))
    return CUDA_ERROR_INVALID_VALUE;
  return static_cast<CUresult>(enqueue(
      stream, call, [=](OpContext &context, int &code, std::string &report) {
        if (!stillThere(p, bytes, call, code, report))
          return false;
        std::string race =
            recordOperationAccess(context, p, bytes, Write, call);
        std::fill_n(static_cast<T *>(p), count, value);
        if (!race.empty()) {
          code = kLaunchFailure;
          report = race;
          return false;
        }
        return true;
      }));
}

} // namespace

EMU_EXPORT cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                                       cudaStream_t stream) {
  return static_cast<cudaError_t>(memset<uint8_t>(
      reinterpret_cast<CUdeviceptr>(p), static_cast<uint8_t>(value), bytes,
      stream, "cudaMemsetAsync"));
}

EMU_EXPORT cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  cudaError_t error = cudaMemsetAsync(p, value, bytes, nullptr);
  return error ? error : static_cast<cudaError_t>(synchronize(nullptr));
}

//===----------------------------------------------------------------------===//
// The driver API
//===----------------------------------------------------------------------===//

namespace {

const char *const kPtxOnly =
    "the emulated device runs PTX, and this image is a cubin or fatbin (SASS): "
    "compile with --gpu-format=isa (braid-run --emulate and "
    "BRAID_EMULATE=1 runners ask for it)";

/// BRAID_EMULATE_PTX_REPLACE=FILE, for mutation tests: a module whose
/// kernels are FILE's (the same names) runs FILE's PTX instead, so that a
/// test can take a compiled program's PTX (braid-compile --emit=ptx),
/// break it on purpose and check that the emulator catches it.
void replaceModule(LoadedModule &module) {
  const char *path = std::getenv("BRAID_EMULATE_PTX_REPLACE");
  if (!path || !*path)
    return;
  FILE *file = std::fopen(path, "r");
  if (!file) {
    say(std::string("BRAID_EMULATE_PTX_REPLACE: cannot read ") + path);
    return;
  }
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0)
    text.append(chunk, n);
  std::fclose(file);
  std::string error;
  std::unique_ptr<ptx::Module> replacement = ptx::parse(text, error);
  if (!replacement) {
    say(std::string("BRAID_EMULATE_PTX_REPLACE: ") + path + ": " + error);
    return;
  }
  if (replacement->entries.size() != module.ptx->entries.size())
    return;
  for (const auto &entry : module.ptx->entries)
    if (!replacement->entries.count(entry.first))
      return;
  say(std::string("module ") + module.ptx->name + " runs the PTX of " + path +
      " (BRAID_EMULATE_PTX_REPLACE)");
  module.text = std::move(text);
  module.ptx = std::move(replacement);
}

CUresult loadModule(CUmodule *handle, const void *image, char *log,
                    size_t logSize) {
  if (!handle || !image)
    return CUDA_ERROR_INVALID_VALUE;
  if (cudaError_t error = sticky())
    return static_cast<CUresult>(error);
  auto writeLog = [&](const std::string &text) {
    if (log && logSize) {
      std::snprintf(log, logSize, "%s", text.c_str());
    }
  };
  const auto *bytes = static_cast<const unsigned char *>(image);
  uint32_t magic;
  std::memcpy(&magic, bytes, 4);
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0 || magic == 0xBA55ED50u ||
      magic == 0x466243B1u) {
    say(kPtxOnly);
    writeLog(kPtxOnly);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto record = std::make_unique<ModuleRecord>();
  record->module = std::make_unique<LoadedModule>();
  LoadedModule &module = *record->module;
  module.text = static_cast<const char *>(image);
  std::string error;
  module.ptx = ptx::parse(module.text, error);
  if (module.ptx)
    replaceModule(module);
  if (!module.ptx) {
    std::string message = "PTX the emulated device cannot run: " + error;
    say(message);
    writeLog(message);
    return CUDA_ERROR_INVALID_PTX;
  }
  // Names for race reports (another rank's too: it may never launch one).
  for (const auto &entry : module.ptx->entries)
    nameKernel(kernelHash(entry.first), entry.first);
  if (module.ptx->imageBytes) {
    module.image = static_cast<uint8_t *>(
        allocate(module.ptx->imageBytes, MemoryKind::Module,
                 "global variables of module " + module.ptx->name));
    if (!module.image)
      return CUDA_ERROR_OUT_OF_MEMORY;
    for (const ptx::Variable &variable : module.ptx->variables)
      if ((variable.space == ptx::Space::Global ||
           variable.space == ptx::Space::Const) &&
          !variable.init.empty())
        std::memcpy(module.image + variable.offset, variable.init.data(),
                    variable.init.size());
  }
  std::lock_guard<std::mutex> lock(modulesMutex());
  void *key = record.get();
  modules()[key] = std::move(record);
  *handle = reinterpret_cast<CUmodule>(key);
  return CUDA_SUCCESS;
}

CUresult emuModuleLoadData(CUmodule *module, const void *image) {
  return loadModule(module, image, nullptr, 0);
}

CUresult emuModuleLoadDataEx(CUmodule *module, const void *image,
                             unsigned int numOptions, CUjit_option *options,
                             void **values) {
  char *log = nullptr;
  size_t logSize = 0;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      log = static_cast<char *>(values[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      logSize = reinterpret_cast<size_t>(values[i]);
  }
  return loadModule(module, image, log, logSize);
}

CUresult emuModuleUnload(CUmodule handle) {
  synchronizeDevice();
  std::unique_ptr<ModuleRecord> record;
  {
    std::lock_guard<std::mutex> lock(modulesMutex());
    auto found = modules().find(handle);
    if (found == modules().end())
      return CUDA_ERROR_INVALID_HANDLE;
    record = std::move(found->second);
    modules().erase(found);
  }
  if (record->module->image)
    releaseModule(record->module->image);
  return CUDA_SUCCESS;
}

CUresult emuModuleGetFunction(CUfunction *function, CUmodule handle,
                              const char *name) {
  if (!function || !name)
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(modulesMutex());
  auto found = modules().find(handle);
  if (found == modules().end())
    return CUDA_ERROR_INVALID_HANDLE;
  ModuleRecord &record = *found->second;
  auto entry = record.module->ptx->entries.find(name);
  if (entry == record.module->ptx->entries.end())
    return CUDA_ERROR_NOT_FOUND;
  auto f = std::make_unique<Function>();
  f->module = record.module.get();
  f->kernel = entry->second;
  *function = reinterpret_cast<CUfunction>(f.get());
  record.functions.push_back(std::move(f));
  return CUDA_SUCCESS;
}

CUresult emuFuncSetAttribute(CUfunction handle, CUfunction_attribute attribute,
                             int value) {
  auto *f = reinterpret_cast<Function *>(handle);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
    uint64_t limit = sharedLimit(f->module->ptx->smVersion);
    if (value < 0 ||
        static_cast<uint64_t>(value) + f->kernel->staticSharedBytes > limit)
      return CUDA_ERROR_INVALID_VALUE;
    f->maxDynamicShared = value;
  }
  return CUDA_SUCCESS;
}

CUresult emuLaunchKernel(CUfunction handle, unsigned gridX, unsigned gridY,
                         unsigned gridZ, unsigned blockX, unsigned blockY,
                         unsigned blockZ, unsigned sharedBytes, CUstream stream,
                         void **params, void **extra) {
  auto *f = reinterpret_cast<Function *>(handle);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  if (cudaError_t error = sticky())
    return static_cast<CUresult>(error);
  const ptx::Function &kernel = *f->kernel;
  uint64_t threads = uint64_t(blockX) * blockY * blockZ;
  auto refuse = [&](const std::string &why) {
    say("cuLaunchKernel " + kernel.name + ": " + why);
    return CUDA_ERROR_INVALID_VALUE;
  };
  if (!gridX || !gridY || !gridZ || gridY > 65535 || gridZ > 65535 ||
      gridX > 0x7FFFFFFFu)
    return refuse("grid (" + std::to_string(gridX) + "," +
                  std::to_string(gridY) + "," + std::to_string(gridZ) +
                  ") out of range");
  if (!blockX || !blockY || !blockZ || blockX > 1024 || blockY > 1024 ||
      blockZ > 64 || threads > 1024)
    return refuse("block (" + std::to_string(blockX) + "," +
                  std::to_string(blockY) + "," + std::to_string(blockZ) +
                  ") out of range");
  if (kernel.maxThreads && threads > kernel.maxThreads)
    return refuse(std::to_string(threads) +
                  " threads per block, but the "
                  "kernel declares .maxntid " +
                  std::to_string(kernel.maxThreads));
  if (sharedBytes > static_cast<unsigned>(f->maxDynamicShared))
    return refuse(std::to_string(sharedBytes) +
                  " bytes of dynamic shared memory, above the kernel's "
                  "limit of " +
                  std::to_string(f->maxDynamicShared) +
                  " (raise it with cuFuncSetAttribute)");
  if (extra)
    return refuse("`extra` launch parameters are not supported");
  if (!kernel.params.empty() && !params)
    return refuse("no parameters for a kernel that takes " +
                  std::to_string(kernel.params.size()));
  auto config = std::make_shared<LaunchConfig>();
  config->module = f->module;
  config->kernel = f->kernel;
  config->grid[0] = gridX;
  config->grid[1] = gridY;
  config->grid[2] = gridZ;
  config->block[0] = blockX;
  config->block[1] = blockY;
  config->block[2] = blockZ;
  config->dynamicShared = sharedBytes;
  if (!packParams(*f->module->ptx, kernel, params, config->params))
    return refuse("a null parameter pointer");
  config->smCount = smCountOf(f->module->ptx->smVersion);
  config->timeoutSeconds = waitTimeout();
  std::string name = kernel.name;
  return static_cast<CUresult>(
      enqueue(stream, name.c_str(),
              [config](OpContext &context, int &code, std::string &report) {
                LaunchConfig &c = *config;
                c.lane = context.lane;
                c.seq = context.seq;
                c.device = context.device;
                c.where = context.where;
                c.cancelled = &context.cancelled;
                LaunchResult result = runLaunch(c, context.clock);
                switch (result.status) {
                case LaunchStatus::Success:
                case LaunchStatus::Cancelled:
                  return true;
                case LaunchStatus::Race:
                  if (!racesFatal()) {
                    say(context.where + ": " + result.report);
                    return true;
                  }
                  code = kLaunchFailure;
                  break;
                case LaunchStatus::IllegalAddress:
                  code = kIllegalAddress;
                  break;
                case LaunchStatus::MisalignedAddress:
                  code = kMisalignedAddress;
                  break;
                case LaunchStatus::IllegalInstruction:
                  code = kIllegalInstruction;
                  break;
                case LaunchStatus::Trap:
                  code = kLaunchFailure;
                  break;
                case LaunchStatus::Timeout:
                  code = kLaunchTimeout;
                  break;
                }
                report = result.report;
                return false;
              }));
}

template <typename T>
CUresult emuMemset(CUdeviceptr dst, T value, size_t count, CUstream stream) {
  return memset<T>(dst, value, count, stream,
                   sizeof(T) == 4 ? "cuMemsetD32Async" : "cuMemsetD16Async");
}

CUresult emuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                           CUstream stream) {
  return emuMemset<uint32_t>(dst, value, count, stream);
}

CUresult emuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                           CUstream stream) {
  return emuMemset<uint16_t>(dst, value, count, stream);
}

CUresult emuGetErrorString(CUresult rc, const char **text) {
  if (!text)
    return CUDA_ERROR_INVALID_VALUE;
  switch (rc) {
  case CUDA_ERROR_INVALID_PTX:
    *text = "a PTX JIT compilation failed (emulated device: the line it "
            "cannot run is reported above)";
    break;
  case CUDA_ERROR_INVALID_IMAGE:
    *text = "device kernel image is invalid (the emulated device runs PTX: "
            "compile with --gpu-format=isa)";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *text = "named symbol not found";
    break;
  case CUDA_ERROR_INVALID_HANDLE:
    *text = "invalid resource handle";
    break;
  case CUDA_ERROR_OUT_OF_MEMORY:
    *text = "out of memory";
    break;
  default:
    *text = cudaGetErrorString(static_cast<cudaError_t>(rc));
    break;
  }
  return CUDA_SUCCESS;
}

bool valueMet(uint32_t now, uint32_t value, unsigned flags) {
  switch (flags & 0xF) {
  case CU_STREAM_WAIT_VALUE_EQ:
    return now == value;
  case CU_STREAM_WAIT_VALUE_AND:
    return (now & value) != 0;
  case CU_STREAM_WAIT_VALUE_NOR:
    return ~(now | value) != 0;
  default: // GEQ, as CUDA defines it: a wrapping comparison
    return static_cast<int32_t>(now - value) >= 0;
  }
}

CUresult emuStreamWriteValue32(CUstream stream, CUdeviceptr address,
                               cuuint32_t value, unsigned int) {
  void *p = reinterpret_cast<void *>(address);
  if (address % 4 || !onDevice(classify(p, 4)))
    return CUDA_ERROR_INVALID_VALUE;
  return static_cast<CUresult>(enqueue(
      stream, "cuStreamWriteValue32",
      [=](OpContext &context, int &code, std::string &report) {
        if (!stillThere(p, 4, "cuStreamWriteValue32", code, report))
          return false;
        // A memory barrier first: a release of what the stream did.
        releaseAt(context, p);
        recordOperationAccess(context, p, 4, Write | Atomic,
                              "cuStreamWriteValue32");
        __atomic_store_n(static_cast<uint32_t *>(p), value, __ATOMIC_SEQ_CST);
        return true;
      }));
}

CUresult emuStreamWaitValue32(CUstream stream, CUdeviceptr address,
                              cuuint32_t value, unsigned int flags) {
  void *p = reinterpret_cast<void *>(address);
  if (address % 4 || !onDevice(classify(p, 4)))
    return CUDA_ERROR_INVALID_VALUE;
  return static_cast<CUresult>(
      enqueue(stream, "cuStreamWaitValue32",
              [=](OpContext &context, int &code, std::string &report) {
                if (!stillThere(p, 4, "cuStreamWaitValue32", code, report))
                  return false;
                // As on a GPU, the stream waits as long as it takes (the
                // runtime's synchronization times out and names the wait).
                unsigned backoff = 0;
                while (!valueMet(__atomic_load_n(static_cast<uint32_t *>(p),
                                                 __ATOMIC_SEQ_CST),
                                 value, flags)) {
                  if (context.cancelled.load())
                    return true;
                  std::this_thread::sleep_for(std::chrono::microseconds(
                      std::min(2000u, 10u << std::min(backoff++, 8u))));
                }
                acquireAt(context, p);
                recordOperationAccess(context, p, 4, Read | Atomic,
                                      "cuStreamWaitValue32");
                return true;
              }));
}

struct DriverEntry {
  const char *name;
  void *function;
};

const DriverEntry driverEntries[] = {
    {"cuModuleLoadData", reinterpret_cast<void *>(&emuModuleLoadData)},
    {"cuModuleLoadDataEx", reinterpret_cast<void *>(&emuModuleLoadDataEx)},
    {"cuModuleUnload", reinterpret_cast<void *>(&emuModuleUnload)},
    {"cuModuleGetFunction", reinterpret_cast<void *>(&emuModuleGetFunction)},
    {"cuLaunchKernel", reinterpret_cast<void *>(&emuLaunchKernel)},
    {"cuFuncSetAttribute", reinterpret_cast<void *>(&emuFuncSetAttribute)},
    {"cuMemsetD32Async", reinterpret_cast<void *>(&emuMemsetD32Async)},
    {"cuMemsetD16Async", reinterpret_cast<void *>(&emuMemsetD16Async)},
    {"cuGetErrorString", reinterpret_cast<void *>(&emuGetErrorString)},
    {"cuStreamWriteValue32", reinterpret_cast<void *>(&emuStreamWriteValue32)},
    {"cuStreamWaitValue32", reinterpret_cast<void *>(&emuStreamWaitValue32)},
};

} // namespace

EMU_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **function, unsigned int, unsigned long long,
    cudaDriverEntryPointQueryResult *status) {
  if (!symbol || !function)
    return cudaErrorInvalidValue;
  *function = nullptr;
  if (status)
    *status = cudaDriverEntryPointSymbolNotFound;
  for (const DriverEntry &entry : driverEntries)
    if (std::strcmp(entry.name, symbol) == 0) {
      *function = entry.function;
      if (status)
        *status = cudaDriverEntryPointSuccess;
    }
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// StandIn.h: the emulated device's side, for its libcublasLt
//===----------------------------------------------------------------------===//

#include "StandIn.h"

EMU_EXPORT bool braidStandInDeviceMemory(const void *p, size_t bytes) {
  return onDevice(classify(p, bytes));
}

EMU_EXPORT int braidStandInRun(cudaStream_t stream, const char *what,
                               const BraidStandInRange *ranges, int count,
                               void (*work)(void *), void *argument,
                               void (*release)(void *)) {
  std::vector<BraidStandInRange> touched(ranges, ranges + count);
  std::string name = what;
  // Released once, whether the work runs or is dropped.
  std::shared_ptr<void> owned(argument, release);
  return enqueue(
      stream, what, [=](OpContext &context, int &code, std::string &report) {
        std::string race;
        for (const BraidStandInRange &range : touched) {
          if (!range.bytes)
            continue;
          if (!stillThere(range.p, range.bytes, name.c_str(), code, report))
            return false;
          if (race.empty())
            race =
                recordOperationAccess(context, range.p, range.bytes,
                                      range.write ? Write : Read, name.c_str());
        }
        work(owned.get());
        if (!race.empty()) {
          code = kLaunchFailure;
          report = race;
          return false;
        }
        return true;
      });
}

EMU_EXPORT void braidStandInLog(const char *, ...) {}

EMU_EXPORT const char *braidStandInStreamName(cudaStream_t stream) {
  thread_local std::string name;
  name = streamName(stream);
  return name.c_str();
}
