//===- Trace.h - Timeline recording of one rank -----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Records what a rank does between braid_rt_trace_begin and
// braid_rt_trace_end as Chrome trace events: the compute steps (intervals
// between runtime calls) and waits on the compute track, each request from
// post to completion on the comm track. Rank 0 merges all ranks into one
// file that chrome://tracing and Perfetto open.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_TRACE_H
#define BRAID_RUNTIME_TRACE_H

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace braid::rt {

/// Nanoseconds on the steady clock, the time base of every event.
int64_t nowNs();

enum class Track { Compute, Comm };

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
  /// ("\"step\": 3") or empty. Callable from any thread.
  void addEvent(Track track, int64_t startNs, int64_t endNs, std::string name,
                std::string args = std::string());

  /// Called by the compute thread at the start and end of every runtime call
  /// that delimits compute steps: the time since the previous call ended is
  /// recorded as a compute event.
  void callBegin(int64_t now);
  void callEnd(int64_t now);

  /// Stops recording and returns this rank's events as comma-separated JSON
  /// objects (no enclosing brackets), including the metadata naming the
  /// process and its tracks.
  std::string finish(int rank);

  /// Gathers every rank's finish() text at rank 0 of `comm`; returns the
  /// concatenation on rank 0 and an empty string elsewhere. Collective; must
  /// run on the communication thread.
  static std::string gather(const std::string &local, MPI_Comm comm, int rank,
                            int size);

  /// Writes the trace file (rank 0); aborts if it cannot.
  static void write(const std::string &path, const std::string &events);

private:
  struct Event {
    Track track;
    int64_t startNs;
    int64_t endNs;
    std::string name;
    std::string args;
  };

  std::atomic<bool> isActive{false};
  std::mutex mutex;
  std::vector<Event> events;
  int64_t originNs = 0;
  int64_t lastCallEndNs = 0; // Compute thread only.
  bool recordComputeGaps = true;
};

/// Escapes a string for a JSON string literal.
std::string jsonEscape(const std::string &text);

} // namespace braid::rt

#endif // BRAID_RUNTIME_TRACE_H
