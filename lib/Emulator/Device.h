//===- Device.h - Streams, events and faults of the emulated device -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The emulated device's libcudart.so.13 holds the device: its memory
// (Memory.h), its streams and events, and its state. libcublasLt.so.13 and
// libnccl.so.2 of the emulator link it and put their work on its streams
// through this interface (exported from libcudart as braid::emu).
//
// Every stream is a host thread running its operations in order; an
// operation that waits (for an event, a flag, a peer rank) blocks only its
// stream, never the host. An operation knows a vector clock (Races.h): its
// stream's, joined with what the host thread that enqueued it knew, and
// what it acquires while running.
//
// A fault (an illegal or misaligned access, a trap, a barrier or warp
// operation that cannot complete, a wait that never completes, a data race)
// is printed at once, with the rank and stream, and then fails the device:
// every later call returns the sticky error, as CUDA's do after an illegal
// address, and queued work is dropped.
//
// The call log (BRAID_EMULATE_LOG) has a line for each call of the three
// libraries that matters to what the device does, written by the host
// thread that makes it, when it makes it.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_DEVICE_H
#define BRAID_EMULATOR_DEVICE_H

#include "Races.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace braid::emu {

/// What a running stream operation may use.
struct OpContext {
  VectorClock &clock; ///< what it knows (it may acquire more)
  uint32_t lane;
  uint32_t seq;
  uint32_t device;
  const std::atomic<bool> &cancelled;
  const std::string &where; ///< "rank 1, stream 2 (priority -5)"
};

/// Sticky errors, as cudaError_t / CUresult codes (the same numbers).
enum Fault : int {
  kIllegalAddress = 700,
  kLaunchTimeout = 702,
  kAssert = 710,
  kIllegalInstruction = 715,
  kMisalignedAddress = 716,
  kLaunchFailure = 719,
};

/// An operation: returns true, or false with `code` and `report`.
using Work = std::function<bool(OpContext &, int &code, std::string &report)>;

/// Puts `work` on `stream` (a cudaStream_t; null: the legacy stream).
/// Returns 0, or the sticky error if the device has failed.
int enqueue(void *stream, const char *what, Work work);

/// A range a stream operation reads or writes (`kind`: Read or Write).
struct Range {
  const void *p;
  uint64_t bytes;
  uint8_t kind;
};

/// Puts `work` on `stream` as an operation named `what` that touches
/// `ranges`: when it runs, each range must still be device memory (else
/// the device fails with an illegal address naming it) and is recorded for
/// the race detector; a race fails the device once `work` has run.
int enqueueRanges(void *stream, const char *what, std::vector<Range> ranges,
                  std::function<void()> work);

/// Whether [p, p + bytes), which a running operation touches, is still
/// device memory; else `code` and `report` ("WHAT of N bytes at 0x...:
/// why").
bool stillThere(const void *p, uint64_t bytes, const char *what, int &code,
                std::string &report);

/// Waits until everything enqueued on `stream` so far has run (the host
/// thread then knows what it did). Returns 0 or the sticky error.
int synchronize(void *stream);

/// Records a stream operation's accesses to [p, p + bytes) (device memory
/// with a shadow) for the race detector; returns a report of a race, or "".
std::string recordOperationAccess(OpContext &context, const void *p,
                                  uint64_t bytes, uint8_t kind,
                                  const char *what);

/// Releases / acquires the operation's knowledge to / from the flag at
/// `address` (system scope), as stream-memory operations do.
void releaseAt(OpContext &context, const void *address);
void acquireAt(OpContext &context, const void *address);

/// What the process's host threads have seen complete, and adding to it
/// (host-level collectives of the emulated NCCL exchange it between ranks).
VectorClock hostKnowledge();
void hostLearns(const VectorClock &clock);

/// Fails the device with `code`, printing `report` (once, with the rank).
void failDevice(int code, const std::string &report);
/// The sticky error (0 while the device works).
int deviceError();

/// Seconds a wait inside the device may take before it is reported:
/// BRAID_EMULATE_TIMEOUT, else 3/4 of BRAID_TIMEOUT, else 90.
double waitTimeout();

/// This process's device, for scopes (rank-unique in a job).
uint32_t deviceId();

/// "stream 3 (priority -5)" or "the legacy stream".
std::string streamName(void *stream);

/// Prints one line to stderr prefixed "braid emulated device: rank R: ".
void say(const std::string &message);

/// The call log (BRAID_EMULATE_LOG=FILE, `{rank}` in FILE replaced by the
/// process's rank): whether it is on.
bool logging();

/// Appends "rank R: " and the formatted text as one line to the call log,
/// with one write, so that rank processes may share the file. Called by
/// the host thread making the call, when it makes it, so the log is the
/// host's program order. Use BRAID_EMU_LOG, which formats nothing when the
/// log is off.
void logLine(const char *format, ...) __attribute__((format(printf, 1, 2)));

} // namespace braid::emu

/// Logs one line of the call log if it is on (the arguments are evaluated
/// only then).
#define BRAID_EMU_LOG(...)                                                     \
  do {                                                                         \
    if (::braid::emu::logging())                                               \
      ::braid::emu::logLine(__VA_ARGS__);                                      \
  } while (false)

#endif // BRAID_EMULATOR_DEVICE_H
