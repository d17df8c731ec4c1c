//===- Driver.h - The CUDA driver API, resolved at run time -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The few driver functions the backend needs (modules and launches for the
// mgpu* ABI, memsets, the loopback copy kernel). They come from the CUDA
// runtime's cudaGetDriverEntryPointByVersion rather than from linking
// libcuda, which only a machine with the driver has (see CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CUDA_DRIVER_H
#define BRAID_RUNTIME_CUDA_DRIVER_H

#include <cuda.h>

#include <string>

namespace braid::rt::cuda {

struct DriverApi {
  decltype(&::cuModuleLoadData) moduleLoadData = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
  decltype(&::cuMemsetD32Async) memsetD32Async = nullptr;
  decltype(&::cuMemsetD16Async) memsetD16Async = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuStreamWriteValue32) streamWriteValue32 = nullptr;
  decltype(&::cuStreamWaitValue32) streamWaitValue32 = nullptr;
};

/// The driver functions; resolved on first use (after the runtime created
/// the context), aborting if the driver lacks one.
const DriverApi &driver();

/// Aborts with "<call> in <context>: <driver error string>" unless `rc` is
/// CUDA_SUCCESS.
void checkDriver(CUresult rc, const char *call, const std::string &context);

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_DRIVER_H
