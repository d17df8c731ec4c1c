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
#include <atomic>
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
  case kAssert:
    return "device-side assert triggered (emulated device: the assertion "
           "is reported above)";
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

namespace {

cudaError_t newStream(const char *call, cudaStream_t *stream,
                      unsigned int flags, int priority) {
  if (!stream)
    return note(cudaErrorInvalidValue);
  *stream = static_cast<cudaStream_t>(
      createStream(std::clamp(priority, -5, 0), flags & cudaStreamNonBlocking));
  BRAID_EMU_LOG("%s%s -> %s", call,
                flags & cudaStreamNonBlocking ? " (non-blocking)" : "",
                streamName(*stream).c_str());
  return cudaSuccess;
}

} // namespace

EMU_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream,
                                                    unsigned int flags,
                                                    int priority) {
  return newStream("cudaStreamCreateWithPriority", stream, flags, priority);
}

EMU_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream,
                                                 unsigned int flags) {
  return newStream("cudaStreamCreateWithFlags", stream, flags, 0);
}

EMU_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return newStream("cudaStreamCreate", stream, 0, 0);
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
  BRAID_EMU_LOG("cudaStreamWaitEvent: %s waits for an event",
                streamName(stream).c_str());
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
  BRAID_EMU_LOG("cudaEventRecord: %s on %s",
                timingEvent(reinterpret_cast<Event *>(event))
                    ? "a timing event"
                    : "an event without timing",
                streamName(stream).c_str());
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
  BRAID_EMU_LOG("cudaEventElapsedTime");
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

/// The size of the allocation at `p`, for the call log (0 if none).
unsigned long long allocationBytes(const void *p) {
  Region region;
  std::string why;
  return findMemory(reinterpret_cast<uintptr_t>(p), 1, region, why)
             ? region.size
             : 0;
}

/// The call log's name of memory `what` (a classify result, null when a
/// range runs outside its allocation).
const char *orBad(const char *what) { return what ? what : "(bad)"; }

cudaError_t copy(const char *call, void *dst, const void *src, size_t bytes,
                 cudaMemcpyKind kind, cudaStream_t stream, bool sync) {
  const char *to = dst ? classify(dst, bytes) : nullptr;
  const char *from = src ? classify(src, bytes) : nullptr;
  BRAID_EMU_LOG("%s %zu B %s -> %s on %s", call, bytes, orBad(from), orBad(to),
                streamName(stream).c_str());
  if (cudaError_t error = sticky())
    return error;
  if (bytes == 0)
    return cudaSuccess;
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
  std::vector<Range> ranges;
  if (fromDevice)
    ranges.push_back({src, bytes, Read});
  if (toDevice)
    ranges.push_back({dst, bytes, Write});
  cudaError_t error = static_cast<cudaError_t>(
      enqueueRanges(stream, call, std::move(ranges), [=] {
        std::memmove(dst, staged ? staged->data() : src, bytes);
      }));
  if (error != cudaSuccess)
    return note(error);
  if (sync || !toDevice)
    return note(static_cast<cudaError_t>(synchronize(stream)));
  return cudaSuccess;
}

} // namespace

EMU_EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
  BRAID_EMU_LOG("cudaMalloc %zu B", size);
  return allocateInto(p, size, MemoryKind::Device, "cudaMalloc");
}

EMU_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size,
                                       cudaStream_t stream) {
  BRAID_EMU_LOG("cudaMallocAsync %zu B on %s", size,
                streamName(stream).c_str());
  if (!validStream(stream))
    return note(cudaErrorInvalidResourceHandle);
  return allocateInto(p, size, MemoryKind::Device, "cudaMallocAsync");
}

EMU_EXPORT cudaError_t cudaMallocHost(void **p, size_t size) {
  BRAID_EMU_LOG("cudaMallocHost %zu B", size);
  return allocateInto(p, size, MemoryKind::Pinned, "cudaMallocHost");
}

EMU_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int) {
  BRAID_EMU_LOG("cudaMallocManaged %zu B", size);
  return allocateInto(p, size, MemoryKind::Managed, "cudaMallocManaged");
}

EMU_EXPORT cudaError_t cudaFree(void *p) {
  if (!p)
    return sticky();
  BRAID_EMU_LOG("cudaFree %llu B", allocationBytes(p));
  // cudaFree synchronizes with the device.
  synchronizeDevice();
  return releaseFrom(p, false);
}

EMU_EXPORT cudaError_t cudaFreeHost(void *p) {
  if (!p)
    return cudaSuccess;
  BRAID_EMU_LOG("cudaFreeHost %llu B", allocationBytes(p));
  synchronizeDevice();
  return releaseFrom(p, true);
}

EMU_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t stream) {
  if (!p)
    return cudaSuccess;
  BRAID_EMU_LOG("cudaFreeAsync %llu B on %s", allocationBytes(p),
                streamName(stream).c_str());
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
  BRAID_EMU_LOG("%s %llu B on %s", call, static_cast<unsigned long long>(bytes),
                streamName(stream).c_str());
  if (cudaError_t error = sticky())
    return static_cast<CUresult>(error);
  if (bytes && !onDevice(classify(p, bytes)))
    return CUDA_ERROR_INVALID_VALUE;
  if (dst % sizeof(T))
    return CUDA_ERROR_INVALID_VALUE;
  return static_cast<CUresult>(
      enqueueRanges(stream, call, {Range{p, bytes, Write}},
                    [=] { std::fill_n(static_cast<T *>(p), count, value); }));
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

/// BRAID_EMULATE_PTX_DIR=DIR: every PTX module a program loads is written
/// to DIR/ENTRY.ptx (its first kernel's name; rejected-N.ptx for one the
/// emulator cannot parse), for ptxas or a reader.
void keepModule(const std::string &text, const ptx::Module *parsed) {
  const char *dir = std::getenv("BRAID_EMULATE_PTX_DIR");
  if (!dir || !*dir)
    return;
  static std::atomic<int> rejected{0};
  std::string name = parsed && !parsed->name.empty()
                         ? parsed->name
                         : "rejected-" + std::to_string(++rejected);
  std::string path = std::string(dir) + "/" + name + ".ptx";
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file) {
    say("BRAID_EMULATE_PTX_DIR: cannot write " + path);
    return;
  }
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
}

CUresult loadModule(const char *call, CUmodule *handle, const void *image,
                    char *log, size_t logSize) {
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
    BRAID_EMU_LOG("%s: a cubin or fatbin, refused (the emulated device runs "
                  "PTX)",
                  call);
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
  keepModule(module.text, module.ptx.get());
  if (module.ptx)
    replaceModule(module);
  if (!module.ptx) {
    std::string message = "PTX the emulated device cannot run: " + error;
    BRAID_EMU_LOG("%s: %s", call, message.c_str());
    say(message);
    writeLog(message);
    return CUDA_ERROR_INVALID_PTX;
  }
  BRAID_EMU_LOG("%s: PTX with %s", call, module.ptx->name.c_str());
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
  return loadModule("cuModuleLoadData", module, image, nullptr, 0);
}

CUresult emuModuleLoadDataEx(CUmodule *module, const void *image,
                             unsigned int numOptions, CUjit_option *options,
                             void **values) {
  char *log = nullptr;
  size_t logSize = 0;
  long level = -1;
  for (unsigned i = 0; i < numOptions; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
      log = static_cast<char *>(values[i]);
    else if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
      logSize = reinterpret_cast<size_t>(values[i]);
    else if (options[i] == CU_JIT_OPTIMIZATION_LEVEL)
      level = static_cast<long>(reinterpret_cast<intptr_t>(values[i]));
  }
  BRAID_EMU_LOG("cuModuleLoadDataEx: JIT optimization level %ld", level);
  return loadModule("cuModuleLoadDataEx", module, image, log, logSize);
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

/// The sticky error a launch that failed with `status` leaves.
int stickyError(LaunchStatus status) {
  switch (status) {
  case LaunchStatus::IllegalAddress:
    return kIllegalAddress;
  case LaunchStatus::MisalignedAddress:
    return kMisalignedAddress;
  case LaunchStatus::IllegalInstruction:
    return kIllegalInstruction;
  case LaunchStatus::Timeout:
    return kLaunchTimeout;
  case LaunchStatus::Assert:
    return kAssert;
  default: // a trap, a race
    return kLaunchFailure;
  }
}

CUresult emuLaunchKernel(CUfunction handle, unsigned gridX, unsigned gridY,
                         unsigned gridZ, unsigned blockX, unsigned blockY,
                         unsigned blockZ, unsigned sharedBytes, CUstream stream,
                         void **params, void **extra) {
  auto *f = reinterpret_cast<Function *>(handle);
  if (!f)
    return CUDA_ERROR_INVALID_HANDLE;
  BRAID_EMU_LOG("cuLaunchKernel %s: grid (%u,%u,%u), block (%u,%u,%u), %u B "
                "of dynamic shared memory, on %s",
                f->kernel->name.c_str(), gridX, gridY, gridZ, blockX, blockY,
                blockZ, sharedBytes,
                streamName(reinterpret_cast<cudaStream_t>(stream)).c_str());
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
                if (result.status == LaunchStatus::Success ||
                    result.status == LaunchStatus::Cancelled)
                  return true;
                if (result.status == LaunchStatus::Race && !racesFatal()) {
                  say(context.where + ": " + result.report);
                  return true;
                }
                code = stickyError(result.status);
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

/// How the call log writes a stream wait's comparison.
const char *waitComparison(unsigned flags) {
  switch (flags & 0xF) {
  case CU_STREAM_WAIT_VALUE_EQ:
    return "==";
  case CU_STREAM_WAIT_VALUE_AND:
    return "&";
  case CU_STREAM_WAIT_VALUE_NOR:
    return "nor";
  default:
    return ">=";
  }
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
  BRAID_EMU_LOG("cuStreamWriteValue32 %u on %s", value,
                streamName(reinterpret_cast<cudaStream_t>(stream)).c_str());
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
  BRAID_EMU_LOG("cuStreamWaitValue32 %s %u on %s", waitComparison(flags), value,
                streamName(reinterpret_cast<cudaStream_t>(stream)).c_str());
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
