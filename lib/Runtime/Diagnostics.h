//===- Diagnostics.h - Fatal errors of the Braid runtime --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The runtime never returns error codes (see braid_rt.h): every failure
// prints one "braid: rank R: ..." line and takes down the whole job, because
// a rank that gives up alone leaves its peers blocked in a collective.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_DIAGNOSTICS_H
#define BRAID_RUNTIME_DIAGNOSTICS_H

#include <mpi.h>

#include <cstdint>
#include <string>

namespace braid::rt {

/// Remembers this rank's number for messages; -1 until MPI is initialized.
void setDiagnosticRank(int rank);
int diagnosticRank();
/// Overrides the rank for messages from the calling thread only (-1: use
/// the process's); backends that run several ranks in one process (the cuda
/// backend's loopback transport) call it on each rank's thread.
void setThreadDiagnosticRank(int rank);

/// A function fatal() runs once before it takes the job down, to release
/// what would otherwise hang the peers (the cuda backend aborts its NCCL
/// communicators). Must not call fatal().
void setFatalHook(void (*hook)());

/// Whether MPI_Abort may be used to take down the job.
void setMPIUsable(bool usable);

/// Prints "braid: rank R: <message>" and aborts every rank with exit code 1.
/// Safe from any thread; when two threads fail at once only the first one
/// prints.
[[noreturn]] void fatal(const std::string &message);
[[noreturn]] void fatalf(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/// Aborts with "<call> failed in <context>: <MPI error string>" unless `rc`
/// is MPI_SUCCESS. `context` names the operation, its step and peer.
void checkMPI(int rc, const char *call, const std::string &context);

/// MPI's description of an error code.
std::string mpiErrorString(int rc);

/// "512 B", "4.0 KiB", "1.5 MiB": sizes for trace names and messages.
std::string formatBytes(int64_t bytes);

/// printf into a std::string.
std::string formatString(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

} // namespace braid::rt

#endif // BRAID_RUNTIME_DIAGNOSTICS_H
