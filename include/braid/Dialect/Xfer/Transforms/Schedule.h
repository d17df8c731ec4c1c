//===- Schedule.h - The attribute of a program's schedule -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A header of its own so that the passes that mark schedules
// (braid-outline-kernels, braid-map-to-gpu) and the compiler that reads the
// mark share one name without depending on each other.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_TRANSFORMS_SCHEDULE_H
#define BRAID_DIALECT_XFER_TRANSFORMS_SCHEDULE_H

#include "llvm/ADT/StringRef.h"

namespace braid::xfer {

/// Name of the unit attribute on each function whose computations became
/// kernels (braid-outline-kernels on CPUs, braid-map-to-gpu on GPUs). What
/// remains in such a function is the program's schedule: kernel calls and
/// launches, transfers, waits, buffer bookkeeping. The compiler generates
/// its code without optimizing it: its run time is the callees', and
/// optimizing one call per kernel of a whole model cost more than all the
/// kernels together.
inline constexpr llvm::StringLiteral kScheduleAttrName = "braid.schedule";

/// Name of the unit attribute on a cpu kernel's companion that runs a range
/// of its tiles (braid-tile-kernels). The compiler makes the kernel's call
/// of it a braid_rt_parallel_for over the rank's threads.
inline constexpr llvm::StringLiteral kTilesAttrName = "braid.tiles";

/// Name of the integer attribute on a fused kernel (braid-kernel-signals,
/// cuda) whose iterations are contractions that wait for flags first: its
/// body is an `scf.index_switch` over them, each case the contraction's
/// `xfer.kernel_wait`s, its zero fill and itself. braid-map-to-gpu makes
/// them one persistent generated GEMM of at most that many blocks.
inline constexpr llvm::StringLiteral kGemmSegmentsAttrName =
    "braid.gemm_segments";

} // namespace braid::xfer

#endif // BRAID_DIALECT_XFER_TRANSFORMS_SCHEDULE_H
