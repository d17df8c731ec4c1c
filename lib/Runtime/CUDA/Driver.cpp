//===- Driver.cpp - The CUDA driver API, resolved at run time -------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Driver.h"

#include "Diagnostics.h"

#include <cuda_runtime.h>

#include <mutex>

namespace braid::rt::cuda {

namespace {

template <typename Function>
void resolve(Function &function, const char *symbol) {
  void *address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // CUDA_VERSION: the version of the function whose prototype cuda.h
  // declares, so that the pointer's type is right.
  cudaError_t rc = cudaGetDriverEntryPointByVersion(
      symbol, &address, CUDA_VERSION, cudaEnableDefault, &found);
  if (rc != cudaSuccess || found != cudaDriverEntryPointSuccess || !address)
    fatalf("cannot resolve the CUDA driver function %s (%s)", symbol,
           rc != cudaSuccess ? cudaGetErrorString(rc)
           : found == cudaDriverEntryPointVersionNotSufficent
               ? "the driver is older than the toolkit"
               : "symbol not found");
  function = reinterpret_cast<Function>(address);
}

} // namespace

const DriverApi &driver() {
  static DriverApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    resolve(api.moduleLoadData, "cuModuleLoadData");
    resolve(api.moduleLoadDataEx, "cuModuleLoadDataEx");
    resolve(api.moduleUnload, "cuModuleUnload");
    resolve(api.moduleGetFunction, "cuModuleGetFunction");
    resolve(api.launchKernel, "cuLaunchKernel");
    resolve(api.funcSetAttribute, "cuFuncSetAttribute");
    resolve(api.memsetD32Async, "cuMemsetD32Async");
    resolve(api.memsetD16Async, "cuMemsetD16Async");
    resolve(api.getErrorString, "cuGetErrorString");
    resolve(api.streamWriteValue32, "cuStreamWriteValue32");
    resolve(api.streamWaitValue32, "cuStreamWaitValue32");
  });
  return api;
}

void checkDriver(CUresult rc, const char *call, const std::string &context) {
  if (rc == CUDA_SUCCESS)
    return;
  const char *text = nullptr;
  if (driver().getErrorString(rc, &text) != CUDA_SUCCESS || !text)
    text = "unknown driver error";
  fatalf("%s in %s: %s (CUresult %d)", call, context.c_str(), text,
         static_cast<int>(rc));
}

} // namespace braid::rt::cuda
