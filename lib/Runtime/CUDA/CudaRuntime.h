//===- CudaRuntime.h - State of the cuda backend ----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cuda backend's per-rank state and the interface between its parts:
// CudaRuntime.cpp (lifecycle and the ABI entry points), Nccl.cpp and
// Loopback.cpp (the two transports), OneSided.cpp (symmetric buffers, puts
// and flags), Gemm.cpp (braid_rt_gemm on cuBLASLt) and MlirGpu.cpp (the
// mgpu* functions gpu-to-llvm lowers to).
//
// Stream model: every rank owns a compute stream, where compiled kernels,
// GEMMs and allocations run in program order, and a comm stream, where its
// transfers run. A transfer records a "ready" event on the compute stream
// when posted (its source is written, its destination free) and the comm
// stream waits for it; its completion event is recorded on a comm stream
// and braid_rt_wait makes the compute stream wait for that. The host only
// blocks in braid_rt_synchronize (and the barriers and teardown built on
// it), which polls with the timeout so that a hung peer becomes an error.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_CUDA_CUDARUNTIME_H
#define BRAID_RUNTIME_CUDA_CUDARUNTIME_H

#include "Diagnostics.h"
#include "Front.h"
#include "Grid.h"
#include "Trace.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace braid::rt::cuda {

//===----------------------------------------------------------------------===//
// Error checks: "braid: rank R: <call> in <op> step S: <error string>"
//===----------------------------------------------------------------------===//

void checkCuda(cudaError_t rc, const char *call, const std::string &context);
void checkNccl(ncclResult_t rc, const char *call, const std::string &context);
void checkCublas(cublasStatus_t rc, const char *call,
                 const std::string &context);

/// "gemm step 3", or just `op` for step -1.
std::string stepContext(const char *op, int64_t step);

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

/// An owned cudaEvent_t; requests of one NCCL group call or one loopback
/// match share their completion event. Destroying an event whose work is
/// still pending is fine (CUDA releases it once the work completes).
struct Event {
  cudaEvent_t event = nullptr;
  Event() = default;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();
};
using EventPtr = std::shared_ptr<Event>;

/// A new event; timing-enabled only when `timing` (for traces).
EventPtr newEvent(bool timing, const std::string &context);
/// Records a new event on `stream`.
EventPtr recordEvent(cudaStream_t stream, bool timing,
                     const std::string &context);

//===----------------------------------------------------------------------===//
// Groups and requests
//===----------------------------------------------------------------------===//

struct CudaGroup : GroupLayout {
  /// NCCL: the communicator, in which a rank's rank is its position.
  ncclComm_t comm = nullptr;
  /// Loopback: number of collectives this rank posted on the group; the
  /// n-th collective of every member meets the others' n-th.
  int64_t collectives = 0;
};

/// A posted transfer: the front's checked Transfer and the events that
/// order it on the streams.
struct Request : Transfer {
  int64_t handle = 0;
  const CudaGroup *group = nullptr;
  int ownerRank = 0;

  EventPtr ready;      // On the poster's compute stream.
  EventPtr completion; // On a comm stream; null until issued.
  EventPtr traceStart; // Timing events around the transfer when tracing.
  EventPtr traceEnd;
  /// Loopback: whether the peers have all posted and the copies are
  /// issued (guarded by the loopback world's mutex).
  bool matched = false;
};

//===----------------------------------------------------------------------===//
// Per-rank state
//===----------------------------------------------------------------------===//

struct GemmCache; // Gemm.cpp.

struct TraceRecord {
  Track track;
  EventPtr start, end;
  std::string name;
  /// A kernel's bytes and flops, for the profile's rates (0: not known).
  int64_t bytes = 0, flops = 0;
};

struct RankState {
  int rank = 0;
  int worldSize = 1;
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  /// In a host's process (braid_rt_init_cuda_on): the compute stream and
  /// the world communicator are the host's, which the runtime never
  /// destroys.
  bool hostOwned = false;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr; // For cuBLASLt.
  int64_t workspaceBytes = 0;
  std::unique_ptr<GemmCache> gemm;

  std::map<GroupKey, int64_t> groupHandles;
  std::vector<std::unique_ptr<CudaGroup>> groups;

  int64_t nextHandle = 1;
  /// Posted, not yet waited.
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests;
  /// Waited (the compute stream is ordered after them) but maybe not
  /// complete, oldest first; pruned by synchronize.
  std::deque<std::unique_ptr<Request>> inFlight;
  /// NCCL: posted point-to-point requests not yet issued; flushed as one
  /// ncclGroupStart/End by the next wait, collective or synchronization.
  std::vector<Request *> queued;
  /// NCCL: the world communicator and a small device scratch buffer.
  ncclComm_t world = nullptr;
  void *scratch = nullptr;

  /// braid_rt_symmetric_alloc buffers: their group handle and, with NCCL,
  /// their window (null on the loopback transport).
  struct SymmetricBuffer {
    int64_t group = 0;
    ncclWindow_t window = nullptr;
  };
  std::unordered_map<void *, SymmetricBuffer> symmetric;

  /// braid_rt_device_arena's device memory by key: the address and size.
  std::unordered_map<int64_t, std::pair<void *, int64_t>> arenas;

  /// braid_rt_symmetric_site buffers by (group handle, site): this rank's
  /// copy and every member's (by position), as plain device addresses.
  struct Site {
    int64_t group = 0, site = 0, bytes = 0;
    char *local = nullptr;
    std::vector<char *> peers;
    ncclWindow_t window = nullptr; ///< NCCL; null on loopback.
  };
  std::map<std::pair<int64_t, int64_t>, Site> sites;
  /// braid_rt_signal_wait_next: the waits made on each flag so far.
  std::unordered_map<uint64_t, uint32_t> flagWaits;
  /// Stream waits on flags not known to be passed, oldest first, with an
  /// event after each: a timeout names the first one still blocking.
  struct SignalWait {
    uint64_t flag = 0;
    uint32_t epoch = 0;
    std::string what;
    EventPtr passed;
  };
  std::deque<SignalWait> signalWaits;

  /// The last compute work enqueued ("kernel foo", "gemm step 3"), named
  /// when the compute stream fails or hangs.
  std::string lastCompute = "nothing yet";

  /// What braid_rt_kernel_begin said of the launch or GEMM that follows
  /// (the program's description and source location; null when none).
  struct DescribedKernel {
    const char *name = nullptr;
    int64_t bytes = 0, flops = 0;
  };
  DescribedKernel described;

  /// braid_rt_timer_start's event on the compute stream (timing-enabled).
  EventPtr timerStart;

  Tracer tracer;
  bool tracing = false;
  EventPtr traceOrigin;
  std::vector<TraceRecord> traceRecords;

  RankState();
  ~RankState();
};

/// The rank the calling thread acts for; aborts naming `call` when there is
/// none (before braid_rt_init, or on the loopback main thread).
RankState &currentRank(const char *call);
/// The same, or null.
RankState *currentRankOrNull();

/// Creates a rank's streams and library handles on the current device.
void setUpRank(RankState &state, int rank, int worldSize, int device,
               bool loopback);
void tearDownRank(RankState &state);

/// The timeout of waits in seconds.
double timeoutSeconds();

/// Polls until this rank's streams are idle; aborts naming the oldest
/// unfinished request after the timeout or on a transport error. `what`
/// names the caller ("braid_rt_synchronize"). With `spin`, polls without
/// ever sleeping, so that the host notices the end at once (timed runs);
/// otherwise backs off to sleeps, for an oversubscribed host.
void synchronizeRank(RankState &state, const char *what, bool spin = false);

/// Records a timing event pair around device work when tracing.
void traceBegin(RankState &state, cudaStream_t stream, EventPtr &start);
void traceEnd(RankState &state, cudaStream_t stream, const EventPtr &start,
              Track track, std::string name, int64_t bytes = 0,
              int64_t flops = 0);

/// braid_rt_wait's common part: the compute stream waits for the request's
/// completion; when tracing, the transfer goes on the comm track and the
/// compute stream's stall on the compute track ("wait ...").
void orderAfter(RankState &state, const Request &request);

/// Device-to-device copy on `stream` by the copy engine, or on the loopback
/// transport with BRAID_LOOPBACK_COPY=sm by an SM copy kernel.
void copyDevice(void *dst, const void *src, int64_t bytes, cudaStream_t stream,
                const std::string &context);

/// The group of a braid_rt_group handle; aborts naming `call` otherwise.
const CudaGroup &getGroup(RankState &state, int64_t handle, const char *call);

/// The transport under Front.cpp: two-sided transfers on NCCL or the
/// loopback world (CudaRuntime.cpp), symmetric memory, puts and signals on
/// NCCL windows or loopback sites (OneSided.cpp).
class CudaTransport final : public Transport {
public:
  const GroupLayout &group(int64_t handle, const char *call) override;
  int64_t post(const Transfer &transfer) override;
  void wait(int64_t request) override;
  void *symmetricAllocate(int64_t group, int64_t bytes, int64_t site,
                          const char *call) override;
  void symmetricFree(int64_t group, void *buffer, const char *call) override;
  void *symmetricPeer(int64_t group, const void *addr, int64_t bytes,
                      int position, int64_t step, const char *call,
                      const char *what) override;
  int64_t put(const Transfer &transfer) override;
  void signalAdd(int64_t group, int position, void *peerFlag, uint32_t value,
                 int64_t step) override;
  void signalWaitUntil(void *flag, uint32_t epoch, int64_t step) override;
  uint32_t &waitsOn(void *flag, int64_t step, const char *call) override;
  void signalSet(int32_t *flag, int32_t value, int64_t stream,
                 int64_t step) override;
  void signalWait(int32_t *flag, int32_t value, int64_t stream,
                  int64_t step) override;
};

//===----------------------------------------------------------------------===//
// Transports
//===----------------------------------------------------------------------===//

bool isLoopback();

/// Body of each loopback rank's thread (CudaRuntime.cpp): sets up the
/// rank, runs fn(arg), checks and tears the rank down.
void runLoopbackRank(int rank, void (*fn)(void *), void *arg);

namespace nccl {
/// Process mode: creates the world communicator (MPI or the id file).
void initWorld(RankState &state, bool useMPI, MPI_Comm mpiWorld);
/// In a host's process: the host's communicator is the world.
void adoptWorld(RankState &state, ncclComm_t comm);
void createGroupComm(RankState &state, CudaGroup &group);
void post(RankState &state, std::unique_ptr<Request> request);
/// Issues the queued point-to-point requests.
void flush(RankState &state);
void wait(RankState &state, std::unique_ptr<Request> request);
/// Aborts if a communicator reports an asynchronous error.
void checkAsyncErrors(RankState &state, const std::string &context);
void barrier(RankState &state);
void hostMax(RankState &state, double *values, int64_t count);
void destroyComms(RankState &state);
/// For fatal(): aborts every communicator of the process.
void abortAll();
} // namespace nccl

namespace oneSided {
/// Frees the persistent symmetric buffers once every rank is done with
/// them (a barrier first: a peer's last signal may still target them).
void releaseSites(RankState &state);
/// On a synchronization timeout: aborts naming the first signal wait that
/// still blocks a stream, with the epoch expected and the value seen.
void reportStalledWait(RankState &state, double timeout,
                       const std::string &context);
} // namespace oneSided

namespace loopback {
void init(int ranks, int device);
/// The collective part of a symmetric site on the loopback transport:
/// publishes this rank's copy and returns every member's, by position.
std::vector<char *> exchangeSite(const CudaGroup &group, int64_t site,
                                 char *local);
/// Makes a rank's streams known to the peers that complete its matches.
void registerRank(int rank, RankState *state);
int ranks();
void run(void (*fn)(void *), void *arg);
void post(RankState &state, std::unique_ptr<Request> request);
void wait(RankState &state, std::unique_ptr<Request> request);
/// Host-side rendezvous of all ranks; `what` names it in a timeout.
void hostBarrier(const char *what);
void hostMax(double *values, int64_t count);
/// Concatenates every rank's trace at rank 0 (empty elsewhere).
std::string gatherTraces(const std::string &local, int rank);
bool smCopy();
void copyWithKernel(void *dst, const void *src, int64_t bytes,
                    cudaStream_t stream, const std::string &context);
} // namespace loopback

} // namespace braid::rt::cuda

#endif // BRAID_RUNTIME_CUDA_CUDARUNTIME_H
