//===- Interpreter.h - Running PTX kernels on the CPU -----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Runs one kernel launch: every thread of every block from its PTX, with
// the GPU's semantics where a program can observe them:
//
//  - Threads of a block run one at a time up to a point where they must
//    wait (a barrier, a warp-synchronous instruction, a load that polls a
//    flag), so barriers, shuffles and votes see every participant; a barrier
//    or shuffle some participant can never reach (it exited, or waits at
//    another one) is reported.
//  - Blocks run one after another while they make progress. A block whose
//    threads all poll without progress lets further blocks start, up to
//    what could be co-resident on the target (SMs x blocks per SM for its
//    threads and shared memory); a grid that spins on blocks that could not
//    be co-resident is reported, not hung.
//  - Memory: shared memory laid out as the PTX declares it (dynamic shared
//    memory after the static variables, every `.extern .shared` array at
//    the same address), local memory per thread, parameters; global and
//    generic addresses checked against the device's allocations. An access
//    outside every allocation, past the end of shared memory, or not
//    aligned to its size faults with the kernel, block, thread and
//    instruction.
//  - Races (Races.h) are checked on shared memory and device memory.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_INTERPRETER_H
#define BRAID_EMULATOR_INTERPRETER_H

#include "Ptx.h"
#include "Races.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid::emu {

/// A parsed module with its global and const variables in device memory.
struct LoadedModule {
  std::unique_ptr<ptx::Module> ptx;
  uint8_t *image = nullptr; ///< ptx->imageBytes of device memory
  std::string text;
};

/// How a launch ended (CUresult-style: 0 is success).
enum class LaunchStatus {
  Success,
  IllegalAddress,
  MisalignedAddress,
  IllegalInstruction, ///< a barrier or warp operation that cannot complete
  Trap,
  Assert,    ///< a device-side assertion failed (__assertfail)
  Timeout,   ///< a wait that never completed
  Race,      ///< a data race (reported; the launch itself completed)
  Cancelled, ///< the device failed elsewhere meanwhile
};

struct LaunchConfig {
  const LoadedModule *module = nullptr;
  const ptx::Function *kernel = nullptr;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t dynamicShared = 0;
  std::vector<uint8_t> params; ///< the parameter space, laid out
  /// Who runs it, for the race detector and messages.
  uint32_t lane = 0;
  uint32_t seq = 0;
  uint32_t device = 0; ///< the process (rank) that owns the device
  std::string where;   ///< "rank 1, stream 2 (priority -5)"
  /// The target's SMs, for co-residency; and the time a wait may take.
  uint32_t smCount = 132;
  double timeoutSeconds = 90;
  const std::atomic<bool> *cancelled = nullptr;
};

struct LaunchResult {
  LaunchStatus status = LaunchStatus::Success;
  std::string report; ///< the fault, stall or race, with where it happened
};

/// Runs the launch to its end. `clock` is what its stream knew when it
/// started (in), joined with what its blocks learnt (out).
LaunchResult runLaunch(const LaunchConfig &config, VectorClock &clock);

/// Lays out a kernel's parameters from cuLaunchKernel's `params` (one
/// pointer to each argument's value); false if `kernel` has parameters the
/// emulator cannot size.
bool packParams(const ptx::Module &module, const ptx::Function &kernel,
                void **params, std::vector<uint8_t> &out);

} // namespace braid::emu

#endif // BRAID_EMULATOR_INTERPRETER_H
