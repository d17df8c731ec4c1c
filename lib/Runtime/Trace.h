//===- Trace.h - Timeline recording of one rank -----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Records what a rank does between braid_rt_trace_begin and
// braid_rt_trace_end as Chrome trace events: the compute steps (intervals
// between runtime calls), the kernels inside them (braid_rt_kernel_begin
// and _end around each kernel call of a cpu program) and waits on the
// compute track, each request from post to completion on the comm track.
// Rank 0 merges all ranks into one file that chrome://tracing and Perfetto
// open, and can print a per-kernel profile of the recorded run.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_TRACE_H
#define BRAID_RUNTIME_TRACE_H

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace braid::rt {

/// Nanoseconds on the steady clock, the time base of every event.
int64_t nowNs();

/// Kernels are drawn on the compute track, inside its compute steps, with
/// their own category.
enum class Track { Compute, Comm, Kernel };

class Tracer {
public:
  bool active() const { return isActive.load(std::memory_order_acquire); }

  /// Starts recording; `startNs` is the common origin (taken right after a
  /// barrier, so that all ranks' origins agree to within the barrier's exit
  /// skew even where their clocks do not). Without `computeGaps`, callBegin
  /// records nothing (the cuda backend times device work with events
  /// instead of host gaps between calls).
  void begin(int64_t startNs, bool computeGaps = true);

  /// Adds one complete event; `args` is a JSON object body without braces
  /// ("\"step\": 3") or empty; a kernel's `bytes` and `flops` (0: not
  /// known) are added to them and give the profile its rates. Callable from
  /// any thread.
  void addEvent(Track track, int64_t startNs, int64_t endNs, std::string name,
                std::string args = std::string(), int64_t bytes = 0,
                int64_t flops = 0);

  /// Called by the compute thread at the start and end of every runtime call
  /// that delimits compute steps: the time since the previous call ended is
  /// recorded as a compute event.
  void callBegin(int64_t now);
  void callEnd(int64_t now);

  /// Called by the compute thread around one kernel call: `name` (static
  /// storage: the program's constant) describes it, `bytes` and `flops`
  /// are what it moves and computes (0: not known).
  void kernelBegin(int64_t now, const char *name, int64_t bytes, int64_t flops);
  void kernelEnd(int64_t now);

  /// Stops recording and returns this rank's events as comma-separated JSON
  /// objects (no enclosing brackets), including the metadata naming the
  /// process and its tracks. With `profile`, also this rank's summary for
  /// printProfile.
  std::string finish(int rank, std::string *profile = nullptr);

  /// Gathers every rank's text at rank 0 of `comm`; returns the texts
  /// joined by `separator` (empty ones left out) on rank 0 and an empty
  /// string elsewhere. Collective; must run on the communication thread.
  static std::string gather(const std::string &local, MPI_Comm comm, int rank,
                            int size, const char *separator = ",\n");

  /// Prints the per-kernel table of the ranks' gathered summaries to
  /// `out`: per kernel its calls, time and share of the run (means over
  /// the ranks) and its rate, slowest first, then the waits and the
  /// compute outside kernels.
  static void printProfile(const std::string &summaries, int ranks, FILE *out);

  /// Rank 0's end of braid_rt_trace_finish: writes the merged trace to
  /// `path` unless it is null, and prints the profile of the gathered
  /// `summaries` unless they are null.
  static void deliver(const char *path, const std::string &merged,
                      const std::string *summaries, int ranks);

  /// Writes the trace file (rank 0); aborts if it cannot.
  static void write(const std::string &path, const std::string &events);

private:
  struct Event {
    Track track;
    int64_t startNs;
    int64_t endNs;
    std::string name;
    std::string args;
    /// A kernel's, for the profile (its `args` say the same to the trace).
    int64_t bytes = 0;
    int64_t flops = 0;
  };

  /// The kernel between kernelBegin and kernelEnd.
  struct PendingKernel {
    int64_t startNs = 0;
    const char *name = nullptr;
    int64_t bytes = 0;
    int64_t flops = 0;
  };

  std::atomic<bool> isActive{false};
  std::mutex mutex;
  std::vector<Event> events;
  int64_t originNs = 0;
  int64_t lastCallEndNs = 0; // Compute thread only.
  PendingKernel kernel;      // Compute thread only.
  bool recordComputeGaps = true;
};

/// Escapes a string for a JSON string literal.
std::string jsonEscape(const std::string &text);

} // namespace braid::rt

#endif // BRAID_RUNTIME_TRACE_H
