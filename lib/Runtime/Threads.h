//===- Threads.h - A rank's threads -----------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_THREADS_H
#define BRAID_RUNTIME_THREADS_H

namespace braid::rt {

/// Threads of a rank's GEMMs and kernels: BRAID_NUM_THREADS, else the
/// cores shared evenly by the ranks of the job (all on this machine, as MPI
/// places them here), at least 1. Read once.
int threadsPerRank();

} // namespace braid::rt

#endif // BRAID_RUNTIME_THREADS_H
