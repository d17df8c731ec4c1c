//===- Front.h - The C ABI's front over each backend's transports -*- C++ -*-=//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Front.cpp implements the communication calls of braid_rt.h once for every
// backend: it checks their arguments, resolves peers and element types,
// names steps, and hands a checked Transfer to the Transport of the calling
// rank. Each backend implements Transport once over what it has (the cpu
// backend: MPI two-sided on its comm thread and MPI shared-memory windows;
// the cuda backend: NCCL or the loopback world, and NCCL symmetric windows
// or loopback sites), plus the lifecycle and memory calls of the ABI, which
// depend on the machine. A transport sees only checked arguments, so its
// messages name the backend's own failures, not the caller's.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_FRONT_H
#define BRAID_RUNTIME_FRONT_H

#include <cstdint>
#include <string>

namespace braid::rt {

struct GroupLayout;

enum class OpKind {
  Send,
  Recv,
  AllGather,
  ReduceScatter,
  AllReduce,
  AllToAll,
  Broadcast,
  /// A copy into a peer's symmetric buffer, then a release add of 1 on the
  /// peer's flag when `flag` is set.
  Put,
  /// The cpu backend's world barrier.
  Barrier,
  /// A function the cpu backend runs on its comm thread (communicator
  /// creation, the trace gather).
  Task,
};

/// "send", "all_gather", ...
const char *opName(OpKind kind);

/// Element types and reductions of the ABI: "f32", "sum"; null for an
/// unknown code.
const char *dtypeName(int64_t dtype);
const char *reductionName(int64_t reduction);
/// Bytes of an element; 0 for an unknown code.
int64_t dtypeBytes(int64_t dtype);

/// One transfer or collective as the front checked it. Buffers and sizes are
/// as the ABI passed them, except a put's `dst` and `flag`, which are
/// already the peer's addresses.
struct Transfer {
  OpKind kind = OpKind::Task;
  int64_t step = -1; // -1 where the ABI has none (barrier, tasks).
  /// Null for operations over all ranks.
  const GroupLayout *layout = nullptr;
  int groupSize = 1;

  // Point-to-point and puts.
  int64_t peerOffset = 0;
  int peerPosition = -1;
  int peerWorldRank = -1;

  const void *src = nullptr;
  void *dst = nullptr;
  int64_t bytes = 0; // p2p/put/broadcast: message; gather/all_to_all: block.
  int64_t count = 0; // Reductions: elements per block (reduce_scatter) or all.
  int64_t root = 0;  // Broadcast: group position.
  int64_t dtype = 0;
  int64_t reduction = 0;
  int64_t elementSize = 0;
  void *flag = nullptr;

  /// Bytes the source and destination span.
  int64_t sourceBytes() const;
  int64_t destinationBytes() const;
  /// For timeouts: "recv (step 7) with peer 0 on group grid 2 axes [0]".
  std::string describe() const;
  /// For errors of the transport: "recv (step 7, peer 0)".
  std::string context() const;
  /// For traces: "send step 3 -> +1 (1.0 MiB)".
  std::string traceName() const;
  /// A JSON object body with the details, for traces.
  std::string traceArgs() const;
  /// "grid 2x4 axes [1]", or "all ranks".
  std::string groupName() const;
};

/// What a backend implements below the front, for the calling rank. Group
/// handles are valid (group() accepted them) and transfers checked.
class Transport {
public:
  virtual ~Transport();

  /// The group of a braid_rt_group handle; aborts naming `call` otherwise.
  virtual const GroupLayout &group(int64_t handle, const char *call) = 0;

  /// Two-sided transfers and collectives: posts one, returns its request
  /// handle (> 0). `transfer.layout` is what group() returned.
  virtual int64_t post(const Transfer &transfer) = 0;
  /// braid_rt_wait: completes the request (cpu) or orders the compute
  /// stream after it (cuda); aborts for a handle that is not outstanding.
  virtual void wait(int64_t request) = 0;

  /// Marks one ABI call in the trace (the cpu backend's compute steps).
  virtual void callBegin() {}
  virtual void callEnd() {}

  /// Symmetric memory: a fresh buffer (site < 0, collective) or the
  /// persistent one of `site` over the group, `bytes` > 0 for sites.
  virtual void *symmetricAllocate(int64_t group, int64_t bytes, int64_t site,
                                  const char *call) = 0;
  /// Frees a fresh buffer (collective); aborts if it is not one of `group`.
  virtual void symmetricFree(int64_t group, void *buffer, const char *call) = 0;
  /// The address that [addr, addr + bytes) of this rank's copy of a
  /// symmetric buffer of `group` has in the copy of group position
  /// `position`; aborts naming `call`, `what` and `step` when the range is
  /// not inside one such buffer.
  virtual void *symmetricPeer(int64_t group, const void *addr, int64_t bytes,
                              int position, int64_t step, const char *call,
                              const char *what) = 0;
  /// A put (dst and flag resolved); returns its request handle.
  virtual int64_t put(const Transfer &transfer) = 0;
  /// Adds `value` (release) to the flag at `peerFlag` of the peer at
  /// `position`, after this rank's earlier work.
  virtual void signalAdd(int64_t group, int position, void *peerFlag,
                         uint32_t value, int64_t step) = 0;
  /// Makes the compute side wait (acquire) until the flag at `flag` in this
  /// rank's copy reaches `epoch` (wrap-safe), with the transfer timeout.
  virtual void signalWaitUntil(void *flag, uint32_t epoch, int64_t step) = 0;
  /// The waits braid_rt_signal_wait_next made on a flag so far, to advance;
  /// aborts naming `call` when `flag` lies in no symmetric site.
  virtual uint32_t &waitsOn(void *flag, int64_t step, const char *call) = 0;

  /// braid_rt_signal_set / braid_rt_signal_wait on a checked flag.
  virtual void signalSet(int32_t *flag, int32_t value, int64_t stream,
                         int64_t step) = 0;
  virtual void signalWait(int32_t *flag, int32_t value, int64_t stream,
                          int64_t step) = 0;
};

/// The transport of the calling thread's rank; aborts naming `call` when
/// there is none (before braid_rt_init, after finalize, or on the loopback
/// main thread). Defined by each backend.
Transport &transport(const char *call);

} // namespace braid::rt

#endif // BRAID_RUNTIME_FRONT_H
