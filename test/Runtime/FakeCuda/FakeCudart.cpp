//===- FakeCudart.cpp - A host-only libcudart for the runtime's tests -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// With the fake libcublasLt and libnccl next to it, this library stands in
// for CUDA on machines without a GPU (CI, development), so that the cuda
// runtime's control flow runs there: `LD_LIBRARY_PATH=<this directory>
// braid-exec-cuda ...` loads the real libBraidRuntimeCUDA.so against it.
//
// - Device memory is host memory the fake allocated and tracks; every copy,
//   memset, kernel, GEMM and collective checks that the bytes it touches
//   lie inside one allocation (or, for copies, in the caller's own host
//   memory where the copy's direction says host) and fails with
//   cudaErrorInvalidValue otherwise. Fresh device memory holds 0xA5 bytes.
// - Work runs when it is enqueued, on the calling thread: every stream is
//   always idle, events are complete when recorded (their time is the host
//   clock's then). This is one valid order of what a GPU would do, so
//   results are right when the runtime orders its work correctly; what it
//   cannot show is a missing dependency.
// - Kernels: only the runtime's own (the loopback copy and the reduction
//   kernels, recognized by name and done on the host). A compiled
//   program's kernel fails its launch with CUDA_ERROR_NOT_SUPPORTED. The
//   PTX modules loaded can be written to $BRAID_FAKE_CUDA_PTX_DIR, for a
//   test to hand them to ptxas.
// - Stream-memory waits that do not come true within a second hold their
//   stream back from then on, as a GPU's would be: cudaStreamQuery says
//   not ready forever.
// - $BRAID_FAKE_CUDA_LOG names a file that gets one line per call that
//   matters to tests (allocations, copies and their streams, stream
//   priorities, timing events), for FileCheck.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include "HalfFloat.h"
#include "StandIn.h"

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <elf.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum class Memory { Device, Pinned, Managed };

const char *memoryName(Memory kind) {
  switch (kind) {
  case Memory::Device:
    return "device";
  case Memory::Pinned:
    return "pinned host";
  case Memory::Managed:
    return "managed";
  }
  return "?";
}

struct Allocation {
  size_t size;
  Memory kind;
};

struct Stream {
  int id = 0;
  int priority = 0;
  std::atomic<bool> stuck{false};
  std::string name;
};

struct Event {
  bool timing = true;
  bool recorded = false;
  bool pending = false; // recorded on a stuck stream
  std::chrono::steady_clock::time_point time;
};

struct Module {
  std::string image;
  bool ptx = false;
  std::vector<std::string> entries;
};

struct Function {
  std::string name;
};

struct State {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> allocations;
  int nextStream = 1;
  std::mutex logMutex;
  FILE *log = nullptr;
  bool logOpened = false;
};

State &state() {
  static State *instance = new State();
  return *instance;
}

thread_local int currentDevice = 0;

cudaError_t invalid(const char *call, const char *why) {
  braidFakeLog("%s: invalid: %s", call, why);
  return cudaErrorInvalidValue;
}

/// The allocation that holds `p`, if any, and its base.
const Allocation *find(const void *p, uintptr_t &base) {
  State &s = state();
  auto address = reinterpret_cast<uintptr_t>(p);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin())
    return nullptr;
  --it;
  if (address >= it->first + std::max<size_t>(it->second.size, 1))
    return nullptr;
  base = it->first;
  return &it->second;
}

void *allocate(size_t size, Memory kind) {
  size_t rounded = (std::max<size_t>(size, 1) + 255) / 256 * 256;
  void *p = std::aligned_alloc(256, rounded);
  if (!p)
    return nullptr;
  if (kind != Memory::Pinned)
    std::memset(p, 0xA5, rounded);
  std::lock_guard<std::mutex> lock(state().mutex);
  state().allocations[reinterpret_cast<uintptr_t>(p)] = {size, kind};
  return p;
}

cudaError_t release(const char *call, void *p, bool pinned) {
  if (!p)
    return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().allocations.find(reinterpret_cast<uintptr_t>(p));
    if (it == state().allocations.end())
      return invalid(call, "not an allocation of the fake");
    if ((it->second.kind == Memory::Pinned) != pinned)
      return invalid(call, pinned ? "not pinned host memory"
                                  : "pinned host memory (use cudaFreeHost)");
    state().allocations.erase(it);
  }
  std::free(p);
  return cudaSuccess;
}

Stream *asStream(cudaStream_t stream) {
  return reinterpret_cast<Stream *>(stream);
}

/// Whether memory `what` may be read or written by the device.
bool onDevice(const char *what) {
  return what && std::strcmp(what, "host") != 0;
}

//===----------------------------------------------------------------------===//
// Host versions of the runtime's kernels
//===----------------------------------------------------------------------===//

template <typename T> T combineInt(int64_t op, T a, T b) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
  case 0:
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  case 1:
    return std::max(a, b);
  case 2:
    return std::min(a, b);
  case 3:
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  case 4:
    return a & b;
  case 5:
    return a | b;
  default:
    return a ^ b;
  }
}

template <typename T> T combineFloat(int64_t op, T a, T b) {
  if ((op == 1 || op == 2) && (std::isnan(a) || std::isnan(b)))
    return a + b;
  switch (op) {
  case 0:
    return a + b;
  case 1:
    return a > b ? a : b;
  case 2:
    return a < b ? a : b;
  default:
    return a * b;
  }
}

template <typename T, typename F>
void elementwise(void *dst, const void *src, uint64_t count, F f) {
  auto *d = static_cast<T *>(dst);
  auto *s = static_cast<const T *>(src);
  for (uint64_t i = 0; i < count; ++i)
    d[i] = f(d[i], s[i]);
}

bool hostReduce(const std::string &dtype, int64_t op, void *dst,
                const void *src, uint64_t count) {
  using namespace braid::rt;
  if (dtype == "f32")
    elementwise<float>(dst, src, count, [&](float a, float b) {
      return combineFloat(op, a, b);
    });
  else if (dtype == "f64")
    elementwise<double>(dst, src, count, [&](double a, double b) {
      return combineFloat(op, a, b);
    });
  else if (dtype == "f16")
    elementwise<uint16_t>(dst, src, count, [&](uint16_t a, uint16_t b) {
      return floatToHalf(combineFloat(op, halfToFloat(a), halfToFloat(b)));
    });
  else if (dtype == "bf16")
    elementwise<uint16_t>(dst, src, count, [&](uint16_t a, uint16_t b) {
      return floatToBf16(combineFloat(op, bf16ToFloat(a), bf16ToFloat(b)));
    });
  else if (dtype == "i8")
    elementwise<int8_t>(dst, src, count, [&](int8_t a, int8_t b) {
      return combineInt(op, a, b);
    });
  else if (dtype == "i16")
    elementwise<int16_t>(dst, src, count, [&](int16_t a, int16_t b) {
      return combineInt(op, a, b);
    });
  else if (dtype == "i32")
    elementwise<int32_t>(dst, src, count, [&](int32_t a, int32_t b) {
      return combineInt(op, a, b);
    });
  else if (dtype == "i64")
    elementwise<int64_t>(dst, src, count, [&](int64_t a, int64_t b) {
      return combineInt(op, a, b);
    });
  else
    return false;
  return true;
}

int64_t dtypeBytes(const std::string &dtype) {
  if (dtype == "f64" || dtype == "i64")
    return 8;
  if (dtype == "f32" || dtype == "i32")
    return 4;
  if (dtype == "i8")
    return 1;
  return 2;
}

//===----------------------------------------------------------------------===//
// The driver API, handed out by cudaGetDriverEntryPointByVersion
//===----------------------------------------------------------------------===//

CUresult loadModule(CUmodule *module, const void *image, const char *call,
                    char *log, size_t logSize) {
  if (!module || !image)
    return CUDA_ERROR_INVALID_VALUE;
  auto result = std::make_unique<Module>();
  const auto *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes, ELFMAG, SELFMAG) == 0) {
    // A cubin: its size is where its section or program headers end.
    const auto *header = static_cast<const Elf64_Ehdr *>(image);
    size_t size = std::max<size_t>(
        header->e_shoff + size_t(header->e_shnum) * header->e_shentsize,
        header->e_phoff + size_t(header->e_phnum) * header->e_phentsize);
    result->image.assign(reinterpret_cast<const char *>(image), size);
  } else {
    result->ptx = true;
    result->image = static_cast<const char *>(image);
    if (result->image.find(".version") == std::string::npos ||
        result->image.find(".target") == std::string::npos) {
      if (log && logSize)
        std::snprintf(log, logSize,
                      "fake JIT: the image is neither a cubin nor PTX (no "
                      ".version and .target directives)");
      braidFakeLog("%s: not a cubin, not PTX", call);
      return CUDA_ERROR_INVALID_PTX;
    }
    for (size_t at = result->image.find(".entry"); at != std::string::npos;
         at = result->image.find(".entry", at + 6)) {
      size_t start = result->image.find_first_not_of(" \t", at + 6);
      size_t end = result->image.find_first_of("( \t\n", start);
      result->entries.push_back(result->image.substr(start, end - start));
    }
    if (const char *dir = std::getenv("BRAID_FAKE_CUDA_PTX_DIR"))
      if (!result->entries.empty()) {
        std::string path =
            std::string(dir) + "/" + result->entries.front() + ".ptx";
        if (FILE *file = std::fopen(path.c_str(), "w")) {
          std::fputs(result->image.c_str(), file);
          std::fclose(file);
        }
      }
  }
  braidFakeLog("%s: %s%s%s", call, result->ptx ? "PTX" : "cubin",
               result->entries.empty() ? "" : " with ",
               result->entries.empty() ? "" : result->entries.front().c_str());
  *module = reinterpret_cast<CUmodule>(result.release());
  return CUDA_SUCCESS;
}

CUresult fakeModuleLoadData(CUmodule *module, const void *image) {
  return loadModule(module, image, "cuModuleLoadData", nullptr, 0);
}

CUresult fakeModuleLoadDataEx(CUmodule *module, const void *image,
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
  braidFakeLog("cuModuleLoadDataEx: JIT optimization level %ld", level);
  return loadModule(module, image, "cuModuleLoadDataEx", log, logSize);
}

CUresult fakeModuleUnload(CUmodule module) {
  delete reinterpret_cast<Module *>(module);
  return CUDA_SUCCESS;
}

CUresult fakeModuleGetFunction(CUfunction *function, CUmodule module,
                               const char *name) {
  auto *m = reinterpret_cast<Module *>(module);
  if (!function || !m || !name)
    return CUDA_ERROR_INVALID_VALUE;
  bool found = m->ptx ? std::find(m->entries.begin(), m->entries.end(), name) !=
                            m->entries.end()
                      : m->image.find(name) != std::string::npos;
  if (!found)
    return CUDA_ERROR_NOT_FOUND;
  *function = reinterpret_cast<CUfunction>(new Function{name});
  return CUDA_SUCCESS;
}

CUresult fakeFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}

CUresult fakeLaunchKernel(CUfunction f, unsigned gridX, unsigned gridY,
                          unsigned gridZ, unsigned blockX, unsigned blockY,
                          unsigned blockZ, unsigned sharedBytes,
                          CUstream stream, void **params, void **extra) {
  (void)gridY, (void)gridZ, (void)blockY, (void)blockZ, (void)sharedBytes,
      (void)extra;
  auto *function = reinterpret_cast<Function *>(f);
  if (!function || !params || gridX == 0 || blockX == 0)
    return CUDA_ERROR_INVALID_VALUE;
  const std::string &name = function->name;
  auto stuck = braidFakeStreamStuck(reinterpret_cast<cudaStream_t>(stream));
  if (name == "braid_loopback_copy") {
    void *dst = *static_cast<void **>(params[0]);
    void *src = *static_cast<void **>(params[1]);
    uint64_t bytes = *static_cast<uint64_t *>(params[3]);
    braidFakeLog("cuLaunchKernel %s: %llu B on %s", name.c_str(),
                 static_cast<unsigned long long>(bytes),
                 braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
    if (!onDevice(braidFakeMemory(dst, bytes)) ||
        !onDevice(braidFakeMemory(src, bytes)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    if (!stuck && bytes)
      std::memmove(dst, src, bytes);
    return CUDA_SUCCESS;
  }
  if (name == "braid_signal_add") {
    void *flag = *static_cast<void **>(params[0]);
    uint32_t value = *static_cast<uint32_t *>(params[1]);
    braidFakeLog("cuLaunchKernel %s: +%u on %s", name.c_str(), value,
                 braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
    if (!onDevice(braidFakeMemory(flag, 4)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    if (!stuck)
      reinterpret_cast<std::atomic<uint32_t> *>(flag)->fetch_add(value);
    return CUDA_SUCCESS;
  }
  if (name.rfind("braid_reduce_", 0) == 0) {
    std::string rest = name.substr(13);
    std::string dtype = rest.substr(0, rest.find('_'));
    std::string opName = rest.substr(rest.find('_') + 1);
    static const char *const ops[] = {"sum",    "max",   "min",   "product",
                                      "bitand", "bitor", "bitxor"};
    int64_t op = -1;
    for (int64_t i = 0; i < 7; ++i)
      if (opName == ops[i])
        op = i;
    void *dst = *static_cast<void **>(params[0]);
    void *src = *static_cast<void **>(params[1]);
    uint64_t count = *static_cast<uint64_t *>(params[2]);
    uint64_t bytes = count * static_cast<uint64_t>(dtypeBytes(dtype));
    braidFakeLog("cuLaunchKernel %s: %llu elements on %s", name.c_str(),
                 static_cast<unsigned long long>(count),
                 braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
    if (op < 0)
      return CUDA_ERROR_NOT_FOUND;
    if (!onDevice(braidFakeMemory(dst, bytes)) ||
        !onDevice(braidFakeMemory(src, bytes)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    if (!stuck && !hostReduce(dtype, op, dst, src, count))
      return CUDA_ERROR_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  braidFakeLog("cuLaunchKernel %s: a compiled kernel, which the fake cannot "
               "run",
               name.c_str());
  return CUDA_ERROR_NOT_SUPPORTED;
}

template <typename T>
CUresult memsetAsync(CUdeviceptr dst, T value, size_t count, CUstream stream) {
  void *p = reinterpret_cast<void *>(dst);
  if (!onDevice(braidFakeMemory(p, count * sizeof(T))))
    return CUDA_ERROR_INVALID_VALUE;
  if (!braidFakeStreamStuck(reinterpret_cast<cudaStream_t>(stream)))
    std::fill_n(static_cast<T *>(p), count, value);
  return CUDA_SUCCESS;
}

CUresult fakeMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                            CUstream stream) {
  return memsetAsync<uint32_t>(dst, value, count, stream);
}

CUresult fakeMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t count,
                            CUstream stream) {
  return memsetAsync<uint16_t>(dst, value, count, stream);
}

CUresult fakeGetErrorString(CUresult rc, const char **text) {
  switch (rc) {
  case CUDA_SUCCESS:
    *text = "no error";
    break;
  case CUDA_ERROR_INVALID_VALUE:
    *text = "invalid argument";
    break;
  case CUDA_ERROR_INVALID_PTX:
    *text = "a PTX JIT compilation failed";
    break;
  case CUDA_ERROR_NOT_FOUND:
    *text = "named symbol not found";
    break;
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    *text = "an illegal memory access was encountered";
    break;
  case CUDA_ERROR_NOT_SUPPORTED:
    *text = "operation not supported (the fake CUDA of Braid's tests runs no "
            "compiled kernels)";
    break;
  default:
    *text = "unknown error";
    break;
  }
  return CUDA_SUCCESS;
}

CUresult fakeStreamWriteValue32(CUstream stream, CUdeviceptr addr,
                                cuuint32_t value, unsigned int) {
  void *p = reinterpret_cast<void *>(addr);
  if (!onDevice(braidFakeMemory(p, 4)))
    return CUDA_ERROR_INVALID_VALUE;
  braidFakeLog("cuStreamWriteValue32 %u on %s", value,
               braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
  if (!braidFakeStreamStuck(reinterpret_cast<cudaStream_t>(stream)))
    reinterpret_cast<std::atomic<uint32_t> *>(p)->store(value);
  return CUDA_SUCCESS;
}

CUresult fakeStreamWaitValue32(CUstream stream, CUdeviceptr addr,
                               cuuint32_t value, unsigned int flags) {
  void *p = reinterpret_cast<void *>(addr);
  if (!onDevice(braidFakeMemory(p, 4)))
    return CUDA_ERROR_INVALID_VALUE;
  auto *s = asStream(reinterpret_cast<cudaStream_t>(stream));
  braidFakeLog("cuStreamWaitValue32 >= %u on %s", value,
               braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
  auto met = [&] {
    uint32_t now = reinterpret_cast<std::atomic<uint32_t> *>(p)->load();
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
  };
  if (!s || s->stuck)
    return CUDA_SUCCESS;
  // Another thread (a loopback rank) may still set it.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!met()) {
    if (std::chrono::steady_clock::now() > deadline) {
      braidFakeLog("%s is held back by a wait that never came true",
                   braidFakeStreamName(reinterpret_cast<cudaStream_t>(stream)));
      s->stuck = true;
      break;
    }
    std::this_thread::yield();
  }
  return CUDA_SUCCESS;
}

struct DriverEntry {
  const char *name;
  void *function;
};

const DriverEntry driverEntries[] = {
    {"cuModuleLoadData", reinterpret_cast<void *>(&fakeModuleLoadData)},
    {"cuModuleLoadDataEx", reinterpret_cast<void *>(&fakeModuleLoadDataEx)},
    {"cuModuleUnload", reinterpret_cast<void *>(&fakeModuleUnload)},
    {"cuModuleGetFunction", reinterpret_cast<void *>(&fakeModuleGetFunction)},
    {"cuLaunchKernel", reinterpret_cast<void *>(&fakeLaunchKernel)},
    {"cuFuncSetAttribute", reinterpret_cast<void *>(&fakeFuncSetAttribute)},
    {"cuMemsetD32Async", reinterpret_cast<void *>(&fakeMemsetD32Async)},
    {"cuMemsetD16Async", reinterpret_cast<void *>(&fakeMemsetD16Async)},
    {"cuGetErrorString", reinterpret_cast<void *>(&fakeGetErrorString)},
    {"cuStreamWriteValue32", reinterpret_cast<void *>(&fakeStreamWriteValue32)},
    {"cuStreamWaitValue32", reinterpret_cast<void *>(&fakeStreamWaitValue32)},
};

} // namespace

//===----------------------------------------------------------------------===//
// Shared with the other fakes
//===----------------------------------------------------------------------===//

FAKE_EXPORT void braidFakeLog(const char *format, ...) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.logMutex);
  if (!s.logOpened) {
    s.logOpened = true;
    if (const char *path = std::getenv("BRAID_FAKE_CUDA_LOG"))
      s.log = std::fopen(path, "a");
  }
  if (!s.log)
    return;
  std::fputs("fake-cuda: ", s.log);
  va_list args;
  va_start(args, format);
  std::vfprintf(s.log, format, args);
  va_end(args);
  std::fputc('\n', s.log);
  std::fflush(s.log);
}

FAKE_EXPORT const char *braidFakeMemory(const void *p, size_t bytes) {
  if (!p)
    return nullptr;
  std::lock_guard<std::mutex> lock(state().mutex);
  uintptr_t base = 0;
  const Allocation *allocation = find(p, base);
  if (!allocation) {
    // The end must not reach into an allocation either.
    if (bytes && find(static_cast<const char *>(p) + bytes - 1, base))
      return nullptr;
    return "host";
  }
  if (reinterpret_cast<uintptr_t>(p) + bytes > base + allocation->size)
    return nullptr;
  return memoryName(allocation->kind);
}

FAKE_EXPORT const char *braidFakeStreamName(cudaStream_t stream) {
  if (!stream)
    return "the null stream";
  return asStream(stream)->name.c_str();
}

FAKE_EXPORT bool braidFakeStreamStuck(cudaStream_t stream) {
  return stream && asStream(stream)->stuck;
}

// StandIn.h, for the libcublasLt the fake shares with the emulated device:
// work runs at once (streams are always idle), unless its stream is stuck.

FAKE_EXPORT bool braidStandInDeviceMemory(const void *p, size_t bytes) {
  return onDevice(braidFakeMemory(p, bytes));
}

FAKE_EXPORT int braidStandInRun(cudaStream_t stream, const char *,
                                const BraidStandInRange *, int,
                                void (*work)(void *), void *argument,
                                void (*release)(void *)) {
  if (!braidFakeStreamStuck(stream))
    work(argument);
  release(argument);
  return 0;
}

FAKE_EXPORT void braidStandInLog(const char *format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  braidFakeLog("%s", line);
}

FAKE_EXPORT const char *braidStandInStreamName(cudaStream_t stream) {
  return braidFakeStreamName(stream);
}

//===----------------------------------------------------------------------===//
// The runtime API
//===----------------------------------------------------------------------===//

FAKE_EXPORT const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorNotReady:
    return "device not ready";
  case cudaErrorInvalidResourceHandle:
    return "invalid resource handle";
  default:
    return "unknown error";
  }
}

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
  const char *text = std::getenv("BRAID_FAKE_CUDA_DEVICES");
  *count = text ? std::atoi(text) : 1;
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

FAKE_EXPORT cudaError_t cudaSetDevice(int device) {
  int count = 0;
  cudaGetDeviceCount(&count);
  if (device < 0 || device >= count)
    return cudaErrorInvalidDevice;
  currentDevice = device;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least,
                                                         int *greatest) {
  // As on an H100: 0 is the lowest priority, -5 the highest.
  if (least)
    *least = 0;
  if (greatest)
    *greatest = -5;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *stream,
                                                     unsigned int flags,
                                                     int priority) {
  if (!stream)
    return cudaErrorInvalidValue;
  auto *s = new Stream();
  {
    std::lock_guard<std::mutex> lock(state().mutex);
    s->id = state().nextStream++;
  }
  s->priority = std::clamp(priority, -5, 0);
  s->name = "stream " + std::to_string(s->id) + " (priority " +
            std::to_string(s->priority) + ")";
  braidFakeLog("cudaStreamCreateWithPriority%s -> %s",
               flags & cudaStreamNonBlocking ? " (non-blocking)" : "",
               s->name.c_str());
  *stream = reinterpret_cast<cudaStream_t>(s);
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream,
                                                  unsigned int flags) {
  return cudaStreamCreateWithPriority(stream, flags, 0);
}

FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete asStream(stream);
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return braidFakeStreamStuck(stream) ? cudaErrorNotReady : cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return braidFakeStreamStuck(stream) ? cudaErrorNotReady : cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event,
                                            unsigned int) {
  return event ? cudaSuccess : cudaErrorInvalidResourceHandle;
}

FAKE_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event,
                                                 unsigned int flags) {
  if (!event)
    return cudaErrorInvalidValue;
  auto *e = new Event();
  e->timing = !(flags & cudaEventDisableTiming);
  *event = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete reinterpret_cast<Event *>(event);
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event,
                                        cudaStream_t stream) {
  auto *e = reinterpret_cast<Event *>(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  e->recorded = true;
  e->pending = braidFakeStreamStuck(stream);
  e->time = std::chrono::steady_clock::now();
  if (e->timing)
    braidFakeLog("cudaEventRecord: a timing event on %s",
                 braidFakeStreamName(stream));
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  auto *e = reinterpret_cast<Event *>(event);
  if (!e)
    return cudaErrorInvalidResourceHandle;
  return e->pending ? cudaErrorNotReady : cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return cudaEventQuery(event);
}

FAKE_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start,
                                             cudaEvent_t end) {
  auto *a = reinterpret_cast<Event *>(start);
  auto *b = reinterpret_cast<Event *>(end);
  if (!ms || !a || !b || !a->timing || !b->timing)
    return cudaErrorInvalidResourceHandle;
  if (!a->recorded || !b->recorded || a->pending || b->pending)
    return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  braidFakeLog("cudaEventElapsedTime");
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaFree(void *p) {
  return release("cudaFree", p, /*pinned=*/false);
}

FAKE_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
  return release("cudaFreeAsync", p, /*pinned=*/false);
}

FAKE_EXPORT cudaError_t cudaFreeHost(void *p) {
  return release("cudaFreeHost", p, /*pinned=*/true);
}

FAKE_EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
  *p = allocate(size, Memory::Device);
  braidFakeLog("cudaMalloc %zu B", size);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

FAKE_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size,
                                        cudaStream_t stream) {
  *p = allocate(size, Memory::Device);
  braidFakeLog("cudaMallocAsync %zu B on %s", size,
               braidFakeStreamName(stream));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

FAKE_EXPORT cudaError_t cudaMallocHost(void **p, size_t size) {
  *p = allocate(size, Memory::Pinned);
  braidFakeLog("cudaMallocHost %zu B", size);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

FAKE_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int) {
  *p = allocate(size, Memory::Managed);
  braidFakeLog("cudaMallocManaged %zu B", size);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

FAKE_EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *out,
                                                 const void *p) {
  if (!out)
    return cudaErrorInvalidValue;
  std::memset(out, 0, sizeof(*out));
  const char *what = braidFakeMemory(p, 1);
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

namespace {

cudaError_t copy(const char *call, void *dst, const void *src, size_t bytes,
                 cudaMemcpyKind kind, cudaStream_t stream) {
  const char *to = braidFakeMemory(dst, bytes);
  const char *from = braidFakeMemory(src, bytes);
  braidFakeLog("%s %zu B %s -> %s on %s", call, bytes, from ? from : "(bad)",
               to ? to : "(bad)", braidFakeStreamName(stream));
  if (bytes == 0)
    return cudaSuccess;
  if (!to || !from)
    return invalid(call, "a range runs outside its allocation");
  auto host = [](const char *what) { return std::strcmp(what, "device") != 0; };
  bool ok = true;
  switch (kind) {
  case cudaMemcpyHostToDevice:
    ok = host(from) && onDevice(to);
    break;
  case cudaMemcpyDeviceToHost:
    ok = onDevice(from) && host(to);
    break;
  case cudaMemcpyDeviceToDevice:
    ok = onDevice(from) && onDevice(to);
    break;
  default:
    break;
  }
  if (!ok)
    return invalid(call, "the memory does not match the copy's direction");
  if (!braidFakeStreamStuck(stream))
    std::memmove(dst, src, bytes);
  return cudaSuccess;
}

} // namespace

FAKE_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                                   cudaMemcpyKind kind) {
  return copy("cudaMemcpy", dst, src, bytes, kind, nullptr);
}

FAKE_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src,
                                        size_t bytes, cudaMemcpyKind kind,
                                        cudaStream_t stream) {
  return copy("cudaMemcpyAsync", dst, src, bytes, kind, stream);
}

FAKE_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **function, unsigned int, unsigned long long,
    cudaDriverEntryPointQueryResult *status) {
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
