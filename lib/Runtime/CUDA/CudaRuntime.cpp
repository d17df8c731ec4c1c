//===- CudaRuntime.cpp - The C entry points of the cuda backend -----------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Implements braid_rt.h on CUDA: lifecycle, groups, the transfer entry points
// (which validate their arguments and hand a Request to the transport),
// synchronization with the timeout, runner memory and traces. See
// CudaRuntime.h for the stream model and docs/Runtime.md for the transports.
//
//===----------------------------------------------------------------------===//

// The library is built with hidden visibility; only the ABI is exported.
#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Checks.h"
#include "CudaRuntime.h"
#include "Driver.h"
#include "Gemm.h"
#include "Reduce.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace braid::rt;
using namespace braid::rt::cuda;

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

namespace braid::rt::cuda {

void checkCuda(cudaError_t rc, const char *call, const std::string &context) {
  if (rc != cudaSuccess)
    fatalf("%s in %s: %s", call, context.c_str(), cudaGetErrorString(rc));
}

void checkNccl(ncclResult_t rc, const char *call, const std::string &context) {
  if (rc == ncclSuccess)
    return;
  // NCCL's own account of the failure (its log is usually off).
  const char *last = ncclGetLastError(nullptr);
  fatalf("%s in %s: %s%s%s", call, context.c_str(), ncclGetErrorString(rc),
         last && *last ? ": " : "", last && *last ? last : "");
}

void checkCublas(cublasStatus_t rc, const char *call,
                 const std::string &context) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    fatalf("%s in %s: %s", call, context.c_str(), cublasLtGetStatusString(rc));
}

std::string stepContext(const char *op, int64_t step) {
  if (step < 0)
    return op;
  return formatString("%s step %lld", op, static_cast<long long>(step));
}

Event::~Event() {
  // Errors here would only come from a context already torn down at exit.
  if (event)
    (void)cudaEventDestroy(event);
}

EventPtr newEvent(bool timing, const std::string &context) {
  auto event = std::make_shared<Event>();
  checkCuda(
      cudaEventCreateWithFlags(&event->event, timing ? cudaEventDefault
                                                     : cudaEventDisableTiming),
      "cudaEventCreateWithFlags", context);
  return event;
}

EventPtr recordEvent(cudaStream_t stream, bool timing,
                     const std::string &context) {
  EventPtr event = newEvent(timing, context);
  checkCuda(cudaEventRecord(event->event, stream), "cudaEventRecord", context);
  return event;
}

} // namespace braid::rt::cuda

//===----------------------------------------------------------------------===//
// Process state
//===----------------------------------------------------------------------===//

namespace {

constexpr double defaultTimeoutSeconds = 120;
constexpr int64_t gemmWorkspaceBytes = 32 << 20;

enum class Mode { None, Nccl, Loopback };

struct Process {
  bool initialized = false;
  bool finalized = false;
  Mode mode = Mode::None;
  bool usesMPI = false;
  bool ownsMPI = false;
  MPI_Comm mpiWorld = MPI_COMM_NULL;
  int worldRank = 0;
  int worldSize = 1;
  int device = 0;
  double timeoutOverride = 0;
  double timeout = defaultTimeoutSeconds;
  /// Process mode: the one rank of this process.
  std::unique_ptr<RankState> rank;
  /// Id-file mode: the trace file's path pattern for the merge.
  std::string idFile;
};

// Never destroyed, like the cpu runtime's: a program that exits after an
// error must not run destructors that touch CUDA or NCCL.
Process &process() {
  static Process *instance = new Process();
  return *instance;
}

thread_local RankState *threadRank = nullptr;

Process &initialized(const char *call) {
  Process &p = process();
  if (!p.initialized)
    fatalf("%s called %s", call,
           p.finalized ? "after braid_rt_finalize" : "before braid_rt_init");
  return p;
}

/// A non-negative integer environment variable, or -1 when unset.
int64_t intFromEnvironment(const char *name) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return -1;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || errno || value < 0)
    fatalf("%s=%s is not a non-negative integer", name, text);
  return value;
}

void checkMPIResult(int rc, const char *call) {
  checkMPI(rc, call, "braid_rt_init");
}

/// The local rank that picks this process's GPU.
int localRank(Process &p) {
  int64_t fromLauncher = intFromEnvironment("OMPI_COMM_WORLD_LOCAL_RANK");
  if (fromLauncher < 0)
    fromLauncher = intFromEnvironment("MPI_LOCALRANKID");
  if (fromLauncher < 0 && !p.usesMPI) {
    fromLauncher = intFromEnvironment("BRAID_LOCAL_RANK");
    if (fromLauncher < 0)
      fromLauncher = intFromEnvironment("LOCAL_RANK");
  }
  if (fromLauncher >= 0)
    return static_cast<int>(fromLauncher);
  if (!p.usesMPI)
    return p.worldRank;
  MPI_Comm node;
  checkMPIResult(MPI_Comm_split_type(p.mpiWorld, MPI_COMM_TYPE_SHARED,
                                     p.worldRank, MPI_INFO_NULL, &node),
                 "MPI_Comm_split_type");
  int local = 0;
  checkMPIResult(MPI_Comm_rank(node, &local), "MPI_Comm_rank");
  checkMPIResult(MPI_Comm_free(&node), "MPI_Comm_free");
  return local;
}

/// Fails clearly when there is no GPU (before anything else touches CUDA).
int deviceCount() {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    fatalf("no CUDA device (cudaGetDeviceCount: %s)",
           rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
  return count;
}

/// Makes `device` current on the calling thread and creates its primary
/// context, which the driver API calls (modules, launches) use.
void useDevice(int device, const char *context) {
  checkCuda(cudaSetDevice(device), "cudaSetDevice", context);
  checkCuda(cudaFree(nullptr), "cudaFree(nullptr)", context);
}

void ncclFatalHook() { nccl::abortAll(); }

} // namespace

namespace braid::rt::cuda {

RankState::RankState() = default;
RankState::~RankState() = default;

RankState *currentRankOrNull() {
  if (threadRank)
    return threadRank;
  return process().rank.get();
}

RankState &currentRank(const char *call) {
  Process &p = initialized(call);
  RankState *state = currentRankOrNull();
  if (!state)
    fatalf("%s called outside a rank (on the loopback transport, only "
           "inside braid_rt_loopback_run)",
           call);
  (void)p;
  return *state;
}

bool isLoopback() { return process().mode == Mode::Loopback; }

double timeoutSeconds() { return process().timeout; }

void setUpRank(RankState &state, int rank, int worldSize, int device,
               bool loopback) {
  const char *context = "braid_rt_init (setting up the rank)";
  state.rank = rank;
  state.worldSize = worldSize;
  state.device = device;
  useDevice(device, context);
  // The comm stream gets the highest priority: NCCL's kernels and the
  // loopback's SM copies then start as soon as an SM frees up, instead of
  // queueing behind the GEMM blocks the compute stream keeps issuing.
  int leastPriority = 0, greatestPriority = 0;
  checkCuda(cudaDeviceGetStreamPriorityRange(&leastPriority, &greatestPriority),
            "cudaDeviceGetStreamPriorityRange", context);
  checkCuda(cudaStreamCreateWithPriority(&state.compute, cudaStreamNonBlocking,
                                         leastPriority),
            "cudaStreamCreateWithPriority", context);
  checkCuda(cudaStreamCreateWithPriority(&state.comm, cudaStreamNonBlocking,
                                         greatestPriority),
            "cudaStreamCreateWithPriority", context);
  checkCublas(cublasLtCreate(&state.lt), "cublasLtCreate", context);
  state.workspaceBytes = gemmWorkspaceBytes;
  checkCuda(
      cudaMalloc(&state.workspace, static_cast<size_t>(state.workspaceBytes)),
      "cudaMalloc (the cuBLASLt workspace)", context);
  state.gemm = std::make_unique<GemmCache>();
  checkCuda(cudaMalloc(&state.scratch, 64), "cudaMalloc (scratch)", context);
}

void tearDownRank(RankState &state) {
  const char *context = "braid_rt_finalize";
  state.gemm.reset();
  state.groups.clear();
  state.groupHandles.clear();
  state.inFlight.clear();
  state.traceRecords.clear();
  state.traceOrigin.reset();
  for (auto &entry : state.arenas)
    checkCuda(cudaFree(entry.second.first), "cudaFree", context);
  state.arenas.clear();
  checkCublas(cublasLtDestroy(state.lt), "cublasLtDestroy", context);
  checkCuda(cudaFree(state.workspace), "cudaFree", context);
  checkCuda(cudaFree(state.scratch), "cudaFree", context);
  if (!state.hostOwned)
    checkCuda(cudaStreamDestroy(state.compute), "cudaStreamDestroy", context);
  checkCuda(cudaStreamDestroy(state.comm), "cudaStreamDestroy", context);
  state.lt = nullptr;
  state.workspace = state.scratch = nullptr;
  state.compute = state.comm = nullptr;
}

void synchronizeRank(RankState &state, const char *what, bool spin) {
  if (!isLoopback())
    nccl::flush(state);
  std::string context = formatString("%s", what);
  auto start = std::chrono::steady_clock::now();
  double timeout = timeoutSeconds();
  int64_t sleepUs = 0;
  for (;;) {
    cudaError_t computeRc = cudaStreamQuery(state.compute);
    cudaError_t commRc = cudaStreamQuery(state.comm);
    for (cudaError_t rc : {computeRc, commRc})
      if (rc != cudaSuccess && rc != cudaErrorNotReady)
        fatalf("cudaStreamQuery in %s (the last compute work: %s): %s",
               context.c_str(), state.lastCompute.c_str(),
               cudaGetErrorString(rc));
    if (computeRc == cudaSuccess && commRc == cudaSuccess)
      break;
    if (!isLoopback())
      nccl::checkAsyncErrors(state, context);
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (elapsed > timeout) {
      // A stream stuck at a signal wait holds back everything after it.
      oneSided::reportStalledWait(state, timeout, context);
      // Name the oldest transfer still running, else the compute work.
      for (auto &request : state.inFlight)
        if (request->completion &&
            cudaEventQuery(request->completion->event) == cudaErrorNotReady)
          fatalf("%s: timed out after %g s in %s", request->context().c_str(),
                 timeout, context.c_str());
      for (auto &[handle, request] : state.requests)
        if (request->completion &&
            cudaEventQuery(request->completion->event) == cudaErrorNotReady)
          fatalf("%s: timed out after %g s in %s (never waited)",
                 request->context().c_str(), timeout, context.c_str());
      fatalf("%s: timed out after %g s waiting for the device (the last "
             "compute work: %s)",
             context.c_str(), timeout, state.lastCompute.c_str());
    }
    // Yield first (short transfers), then back off to sleeps so that an
    // oversubscribed host is not spun on; a timed synchronization spins
    // (yielding only), since a sleep's wake-up (tens of microseconds) would
    // delay the next run.
    if (spin || sleepUs == 0) {
      std::this_thread::yield();
      sleepUs = 1;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
      sleepUs = std::min<int64_t>(sleepUs * 2, 1000);
    }
  }
  state.inFlight.clear();
  state.signalWaits.clear();
}

void traceBegin(RankState &state, cudaStream_t stream, EventPtr &start) {
  if (state.tracing)
    start = recordEvent(stream, true, "tracing");
}

void traceEnd(RankState &state, cudaStream_t stream, const EventPtr &start,
              Track track, std::string name, int64_t bytes, int64_t flops) {
  if (!state.tracing || !start)
    return;
  EventPtr end = recordEvent(stream, true, "tracing");
  state.traceRecords.push_back(
      TraceRecord{track, start, end, std::move(name), bytes, flops});
}

void orderAfter(RankState &state, const Request &request) {
  std::string context = request.context();
  EventPtr stallStart;
  traceBegin(state, state.compute, stallStart);
  checkCuda(cudaStreamWaitEvent(state.compute, request.completion->event, 0),
            "cudaStreamWaitEvent", context);
  if (!state.tracing)
    return;
  std::string name = request.traceName();
  traceEnd(state, state.compute, stallStart, Track::Compute, "wait " + name);
  if (request.traceStart && request.traceEnd)
    state.traceRecords.push_back(
        TraceRecord{Track::Comm, request.traceStart, request.traceEnd, name});
}

void copyDevice(void *dst, const void *src, int64_t bytes, cudaStream_t stream,
                const std::string &context) {
  if (bytes <= 0 || dst == src)
    return;
  if (isLoopback() && loopback::smCopy()) {
    loopback::copyWithKernel(dst, src, bytes, stream, context);
    return;
  }
  checkCuda(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes),
                            cudaMemcpyDefault, stream),
            "cudaMemcpyAsync", context);
}

} // namespace braid::rt::cuda

//===----------------------------------------------------------------------===//
// Transfer entry points
//===----------------------------------------------------------------------===//

namespace braid::rt::cuda {
const CudaGroup &getGroup(RankState &state, int64_t handle, const char *call) {
  if (handle < 1 || handle > static_cast<int64_t>(state.groups.size()))
    fatalf("%s: %lld is not a group handle (from braid_rt_group)", call,
           static_cast<long long>(handle));
  return *state.groups[static_cast<size_t>(handle - 1)];
}
} // namespace braid::rt::cuda

namespace {

int64_t submit(RankState &state, std::unique_ptr<Request> request) {
  int64_t handle = state.nextHandle++;
  request->handle = handle;
  // The source is written and the destination free once the compute
  // stream gets here.
  request->ready =
      recordEvent(state.compute, false, request->context() + " (posting)");
  if (isLoopback())
    loopback::post(state, std::move(request));
  else
    nccl::post(state, std::move(request));
  return handle;
}

void worldBarrier(RankState &state, const char *what) {
  if (isLoopback()) {
    synchronizeRank(state, what);
    loopback::hostBarrier(what);
  } else {
    nccl::barrier(state);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Lifecycle
//===----------------------------------------------------------------------===//

void braid_rt_init(int *argc, char ***argv) {
  Process &p = process();
  if (p.initialized)
    return;
  if (p.finalized)
    fatal("braid_rt_init called after braid_rt_finalize");
  p.timeout =
      p.timeoutOverride > 0 ? p.timeoutOverride : timeoutFromEnvironment();

  int64_t loopbackRanks = intFromEnvironment("BRAID_LOOPBACK");
  const char *idFile = std::getenv("BRAID_NCCL_ID_FILE");
  if (loopbackRanks >= 0) {
    if (loopbackRanks < 1)
      fatal("BRAID_LOOPBACK must be at least 1");
    p.mode = Mode::Loopback;
    p.worldSize = static_cast<int>(loopbackRanks);
    p.worldRank = 0;
    deviceCount();
    p.device = 0;
    useDevice(p.device, "braid_rt_init");
    loopback::init(p.worldSize, p.device);
    p.initialized = true;
    return;
  }

  p.mode = Mode::Nccl;
  if (idFile && *idFile) {
    int64_t rank = intFromEnvironment("BRAID_RANK");
    int64_t size = intFromEnvironment("BRAID_WORLD_SIZE");
    if (rank < 0 || size < 1 || rank >= size)
      fatalf("BRAID_NCCL_ID_FILE=%s needs BRAID_RANK and BRAID_WORLD_SIZE "
             "(0 <= rank < size), got %s and %s",
             idFile,
             std::getenv("BRAID_RANK") ? std::getenv("BRAID_RANK") : "none",
             std::getenv("BRAID_WORLD_SIZE") ? std::getenv("BRAID_WORLD_SIZE")
                                             : "none");
    p.worldRank = static_cast<int>(rank);
    p.worldSize = static_cast<int>(size);
    p.idFile = idFile;
  } else {
    int already = 0;
    if (MPI_Initialized(&already) != MPI_SUCCESS)
      fatal("MPI_Initialized failed in braid_rt_init");
    if (!already) {
      int provided = MPI_THREAD_SINGLE;
      int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
      if (rc != MPI_SUCCESS)
        fatalf("MPI_Init_thread failed in braid_rt_init (MPI error %d)", rc);
      p.ownsMPI = true;
      checkMPIResult(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                     "MPI_Comm_set_errhandler");
    }
    setMPIUsable(true);
    p.usesMPI = true;
    checkMPIResult(MPI_Comm_dup(MPI_COMM_WORLD, &p.mpiWorld), "MPI_Comm_dup");
    checkMPIResult(MPI_Comm_set_errhandler(p.mpiWorld, MPI_ERRORS_RETURN),
                   "MPI_Comm_set_errhandler");
    checkMPIResult(MPI_Comm_rank(p.mpiWorld, &p.worldRank), "MPI_Comm_rank");
    checkMPIResult(MPI_Comm_size(p.mpiWorld, &p.worldSize), "MPI_Comm_size");
  }
  setDiagnosticRank(p.worldRank);
  int count = deviceCount();
  p.device = localRank(p) % count;
  p.rank = std::make_unique<RankState>();
  setUpRank(*p.rank, p.worldRank, p.worldSize, p.device, /*loopback=*/false);
  setFatalHook(ncclFatalHook);
  nccl::initWorld(*p.rank, p.usesMPI, p.mpiWorld);
  p.initialized = true;
}

const char *braid_rt_init_on(int64_t) {
  return "the cuda runtime runs in a host's process on the host's NCCL "
         "communicator and stream (braid_rt_init_cuda_on; "
         "braid_program_load_cuda), not on an MPI communicator";
}

const char *braid_rt_init_cuda_on(void *ncclComm, void *stream) {
  static std::string problem;
  Process &p = process();
  auto comm = static_cast<ncclComm_t>(ncclComm);
  if (!comm)
    return "no NCCL communicator (nccl_comm is null)";
  if (p.initialized) {
    if (p.mode == Mode::Nccl && p.rank && p.rank->hostOwned &&
        p.rank->world == comm &&
        p.rank->compute == static_cast<cudaStream_t>(stream))
      return nullptr;
    problem = "the runtime of this process already runs on another NCCL "
              "communicator or stream: one of each per process";
    return problem.c_str();
  }
  int rank = -1, count = 0, device = 0;
  if (ncclCommUserRank(comm, &rank) != ncclSuccess ||
      ncclCommCount(comm, &count) != ncclSuccess || rank < 0 || count < 1) {
    problem = "nccl_comm is not a usable NCCL communicator (ncclCommUserRank "
              "or ncclCommCount failed)";
    return problem.c_str();
  }
  if (cudaError_t rc = cudaGetDevice(&device); rc != cudaSuccess) {
    problem = formatString("cudaGetDevice failed: %s", cudaGetErrorString(rc));
    return problem.c_str();
  }
  p.timeout =
      p.timeoutOverride > 0 ? p.timeoutOverride : timeoutFromEnvironment();
  p.mode = Mode::Nccl;
  p.usesMPI = p.ownsMPI = false;
  p.worldRank = rank;
  p.worldSize = count;
  p.device = device;
  setDiagnosticRank(rank);
  p.rank = std::make_unique<RankState>();
  RankState &state = *p.rank;
  setUpRank(state, rank, count, device, /*loopback=*/false);
  // The host's stream computes: what the host enqueues before a call is
  // ordered before it, what it enqueues after sees its results.
  checkCuda(cudaStreamDestroy(state.compute), "cudaStreamDestroy",
            "braid_rt_init_cuda_on");
  state.compute = static_cast<cudaStream_t>(stream);
  state.hostOwned = true;
  setFatalHook(ncclFatalHook);
  nccl::adoptWorld(state, comm);
  p.initialized = true;
  p.finalized = false;
  return nullptr;
}

void braid_rt_finalize(void) {
  Process &p = process();
  if (!p.initialized)
    return;
  if (p.mode == Mode::Nccl) {
    RankState &state = *p.rank;
    nccl::flush(state);
    if (!state.requests.empty()) {
      auto oldest = std::min_element(
          state.requests.begin(), state.requests.end(),
          [](const auto &a, const auto &b) { return a.first < b.first; });
      size_t n = state.requests.size();
      fatalf("braid_rt_finalize: %zu request%s never waited (the oldest: %s)",
             n, n == 1 ? " was" : "s were", oldest->second->describe().c_str());
    }
    synchronizeRank(state, "braid_rt_finalize");
    oneSided::releaseSites(state);
    nccl::destroyComms(state);
    tearDownRank(state);
    p.rank.reset();
    setFatalHook(nullptr);
    if (p.usesMPI) {
      checkMPI(MPI_Comm_free(&p.mpiWorld), "MPI_Comm_free",
               "braid_rt_finalize");
      if (p.ownsMPI) {
        int rc = MPI_Finalize();
        setMPIUsable(false);
        if (rc != MPI_SUCCESS)
          fatalf("MPI_Finalize failed in braid_rt_finalize (MPI error %d)", rc);
      }
    }
  }
  p.initialized = false;
  p.finalized = true;
}

int64_t braid_rt_world_rank(void) {
  Process &p = initialized("braid_rt_world_rank");
  if (RankState *state = currentRankOrNull())
    return state->rank;
  return p.worldRank;
}

int64_t braid_rt_world_size(void) {
  return initialized("braid_rt_world_size").worldSize;
}

void braid_rt_set_timeout(double seconds) {
  if (!(seconds > 0))
    fatalf("braid_rt_set_timeout: %g is not a positive number of seconds",
           seconds);
  Process &p = process();
  p.timeoutOverride = seconds;
  p.timeout = seconds;
}

void braid_rt_abort(const char *message) {
  fatal(message ? message : "aborted");
}

void braid_rt_barrier(void) {
  RankState &state = currentRank("braid_rt_barrier");
  worldBarrier(state, "braid_rt_barrier");
}

void braid_rt_trace_begin(void) {
  RankState &state = currentRank("braid_rt_trace_begin");
  // All ranks start together so that their time origins line up.
  worldBarrier(state, "braid_rt_trace_begin");
  state.traceRecords.clear();
  state.tracing = true;
  state.traceOrigin = recordEvent(state.compute, true, "braid_rt_trace_begin");
  state.tracer.begin(0, /*computeGaps=*/false);
}

void braid_rt_trace_finish(const char *path, int64_t profile) {
  RankState &state = currentRank("braid_rt_trace_finish");
  Process &p = process();
  if (path && !*path)
    fatal("braid_rt_trace_finish: the trace's path is empty");
  synchronizeRank(state, "braid_rt_trace_end");
  // Device times relative to the origin event, as nanoseconds.
  auto toNs = [&](const EventPtr &event) {
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, state.traceOrigin->event, event->event),
              "cudaEventElapsedTime", "braid_rt_trace_end");
    // Events on different streams may land a rounding error before the
    // origin.
    return std::max<int64_t>(
        0, static_cast<int64_t>(static_cast<double>(ms) * 1e6));
  };
  if (state.tracing)
    for (const TraceRecord &record : state.traceRecords)
      state.tracer.addEvent(record.track, toNs(record.start), toNs(record.end),
                            record.name, std::string(), record.bytes,
                            record.flops);
  state.tracing = false;
  state.traceRecords.clear();
  std::string summary;
  std::string local =
      state.tracer.finish(state.rank, profile ? &summary : nullptr);
  // Every rank's text at rank 0, joined by ",\n" (which the profile's
  // reader skips as a line it does not know).
  auto gather = [&](const std::string &text, const char *what) {
    if (isLoopback())
      return loopback::gatherTraces(text, state.rank);
    if (p.usesMPI)
      return Tracer::gather(text, p.mpiWorld, state.rank, state.worldSize);
    // Id-file mode has no MPI: the ranks hand their parts over files next
    // to the trace or, for a profile alone, the working directory (the id
    // file already needs a shared file system).
    std::string part =
        formatString("%s.%s.rank%%d.part", path ? path : "braid-profile", what);
    if (state.rank != 0) {
      std::string mine = formatString(part.c_str(), state.rank);
      std::ofstream out(mine, std::ios::binary);
      out << text;
      if (!out.flush())
        fatalf("braid_rt_trace_end: cannot write %s: %s", mine.c_str(),
               std::strerror(errno));
    }
    nccl::barrier(state);
    std::string merged;
    if (state.rank == 0) {
      merged = text;
      for (int r = 1; r < state.worldSize; ++r) {
        std::string other = formatString(part.c_str(), r);
        std::ifstream in(other, std::ios::binary);
        std::stringstream read;
        read << in.rdbuf();
        if (!in)
          fatalf("braid_rt_trace_end: cannot read rank %d's %s %s", r, what,
                 other.c_str());
        if (!read.str().empty())
          merged += (merged.empty() ? "" : ",\n") + read.str();
        std::remove(other.c_str());
      }
    }
    return merged;
  };
  std::string merged = path ? gather(local, "trace") : std::string();
  std::string summaries = profile ? gather(summary, "profile") : std::string();
  if (state.rank == 0)
    Tracer::deliver(path, merged, profile ? &summaries : nullptr,
                    state.worldSize);
}

//===----------------------------------------------------------------------===//
// Called by compiled code
//===----------------------------------------------------------------------===//

int64_t braid_rt_group(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t naxes, int64_t axes_packed) {
  RankState &state = currentRank("braid_rt_group");
  GridShape shape =
      makeGridShape("braid_rt_group", ndims, s0, s1, s2, s3, state.worldSize);
  GroupLayout layout = makeGroupLayout(shape, naxes, axes_packed, state.rank);
  auto found = state.groupHandles.find(layout.key);
  if (found != state.groupHandles.end())
    return found->second;
  auto group = std::make_unique<CudaGroup>();
  static_cast<GroupLayout &>(*group) = std::move(layout);
  // Collective over the world (ncclCommSplit): every rank asks for the
  // same groups in the same order, as SPMD programs do.
  if (!isLoopback())
    nccl::createGroupComm(state, *group);
  state.groups.push_back(std::move(group));
  int64_t handle = static_cast<int64_t>(state.groups.size());
  state.groupHandles.emplace(state.groups.back()->key, handle);
  return handle;
}

//===----------------------------------------------------------------------===//
// Runner memory
//===----------------------------------------------------------------------===//

void *braid_rt_buffer_alloc(int64_t bytes) {
  initialized("braid_rt_buffer_alloc");
  if (bytes < 0)
    fatalf("braid_rt_buffer_alloc: negative size %lld",
           static_cast<long long>(bytes));
  // Device memory, not managed memory: managed inputs that the runner
  // rewrites on the host between runs would migrate back page by page
  // inside the timed region. The runner fills it with
  // braid_rt_copy_to_device.
  void *data = nullptr;
  size_t size = std::max<size_t>(static_cast<size_t>(bytes), 1);
  checkCuda(cudaMalloc(&data, size), "cudaMalloc",
            formatString("braid_rt_buffer_alloc (%s for an input)",
                         formatBytes(bytes).c_str()));
  return data;
}

void braid_rt_buffer_free(void *p) {
  if (!p)
    return;
  // The device may still be using it.
  if (RankState *state = currentRankOrNull())
    synchronizeRank(*state, "braid_rt_buffer_free");
  checkCuda(cudaFree(p), "cudaFree", "braid_rt_buffer_free");
}

int64_t braid_rt_device_arena(int64_t key, int64_t bytes) {
  const char *call = "braid_rt_device_arena";
  RankState &state = currentRank(call);
  if (bytes <= 0)
    fatalf("%s: an arena of %lld bytes (expected a positive size)", call,
           static_cast<long long>(bytes));
  auto found = state.arenas.find(key);
  if (found != state.arenas.end()) {
    if (found->second.second != bytes)
      fatalf("%s: the arena with key %#llx has %s, not %s", call,
             static_cast<unsigned long long>(key),
             formatBytes(found->second.second).c_str(),
             formatBytes(bytes).c_str());
    return reinterpret_cast<int64_t>(found->second.first);
  }
  // Once per rank and arena, kept for every later call: not in stream order
  // (cudaMalloc waits for nothing the stream holds, and nothing before the
  // first call uses it).
  void *data = nullptr;
  checkCuda(cudaMalloc(&data, static_cast<size_t>(bytes)), "cudaMalloc",
            formatString("%s (%s for a memory plan)", call,
                         formatBytes(bytes).c_str()));
  state.arenas.emplace(key, std::make_pair(data, bytes));
  return reinterpret_cast<int64_t>(data);
}

void *braid_rt_host_alloc(int64_t bytes) {
  initialized("braid_rt_host_alloc");
  if (bytes < 0)
    fatalf("braid_rt_host_alloc: negative size %lld",
           static_cast<long long>(bytes));
  // Page-locked, so that copies from it are asynchronous DMA at full speed.
  void *data = nullptr;
  size_t size = std::max<size_t>(static_cast<size_t>(bytes), 1);
  checkCuda(cudaMallocHost(&data, size), "cudaMallocHost",
            formatString("braid_rt_host_alloc (%s of pinned host memory)",
                         formatBytes(bytes).c_str()));
  return data;
}

void braid_rt_host_free(void *p) {
  if (!p)
    return;
  // A copy from it may still be pending.
  if (RankState *state = currentRankOrNull())
    synchronizeRank(*state, "braid_rt_host_free");
  checkCuda(cudaFreeHost(p), "cudaFreeHost", "braid_rt_host_free");
}

void braid_rt_copy_to_device(void *dst, const void *src, int64_t bytes) {
  RankState &state = currentRank("braid_rt_copy_to_device");
  if (bytes < 0)
    fatalf("braid_rt_copy_to_device: negative size %lld",
           static_cast<long long>(bytes));
  if (bytes == 0)
    return;
  if (!dst || !src)
    fatal("braid_rt_copy_to_device: null buffer");
  state.lastCompute = "braid_rt_copy_to_device";
  checkCuda(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault,
                      state.compute),
      "cudaMemcpyAsync",
      formatString("braid_rt_copy_to_device (%s)", formatBytes(bytes).c_str()));
}

void braid_rt_timer_start(void) {
  RankState &state = currentRank("braid_rt_timer_start");
  state.timerStart = recordEvent(state.compute, true, "braid_rt_timer_start");
}

double braid_rt_timer_stop(void) {
  const char *call = "braid_rt_timer_stop";
  RankState &state = currentRank(call);
  if (!state.timerStart)
    fatal("braid_rt_timer_stop called without braid_rt_timer_start");
  // Everything the program enqueued, its transfers included, is ordered
  // before this point of the compute stream (a wait orders the compute
  // stream after its transfer), so two events there time the whole run on
  // the device, as PyTorch's CUDA-event timing does.
  EventPtr stop = recordEvent(state.compute, true, call);
  synchronizeRank(state, call, /*spin=*/true);
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, state.timerStart->event, stop->event),
            "cudaEventElapsedTime", call);
  state.timerStart.reset();
  return static_cast<double>(ms);
}

// Host kernels are the cpu target's; a cuda program has none, and a call
// runs its range on the calling thread.
void braid_rt_parallel_for(void (*body)(void *, int64_t, int64_t),
                           void *context, int64_t count) {
  if (count > 0)
    body(context, 0, count);
}

// A cuda program's kernels are device launches and GEMMs, which the trace
// times with device events. The pair around each (braid-kernel-events)
// only says what the next one is: its trace event's name and rates.
void braid_rt_kernel_begin(int64_t name, int64_t bytes, int64_t flops) {
  RankState &state = currentRank("braid_rt_kernel_begin");
  state.described = {reinterpret_cast<const char *>(name), bytes, flops};
}

void braid_rt_kernel_end(void) {
  currentRank("braid_rt_kernel_end").described = {};
}

void braid_rt_result_free(void *p) {
  if (!p)
    return;
  RankState &state = currentRank("braid_rt_result_free");
  cudaPointerAttributes attributes;
  checkCuda(cudaPointerGetAttributes(&attributes, p),
            "cudaPointerGetAttributes", "braid_rt_result_free");
  switch (attributes.type) {
  case cudaMemoryTypeUnregistered:
    std::free(p); // The program malloc'ed it on the host.
    break;
  case cudaMemoryTypeHost:
    checkCuda(cudaFreeHost(p), "cudaFreeHost", "braid_rt_result_free");
    break;
  case cudaMemoryTypeManaged:
    synchronizeRank(state, "braid_rt_result_free");
    checkCuda(cudaFree(p), "cudaFree", "braid_rt_result_free");
    break;
  case cudaMemoryTypeDevice:
    // mgpuMemAlloc's cudaMallocAsync: freed in stream order.
    checkCuda(cudaFreeAsync(p, state.compute), "cudaFreeAsync",
              "braid_rt_result_free");
    break;
  }
}

void braid_rt_copy_to_host(void *dst, const void *src, int64_t bytes) {
  RankState &state = currentRank("braid_rt_copy_to_host");
  synchronizeRank(state, "braid_rt_copy_to_host");
  if (bytes > 0)
    checkCuda(
        cudaMemcpy(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault),
        "cudaMemcpy", "braid_rt_copy_to_host");
}

void braid_rt_synchronize(void) {
  RankState &state = currentRank("braid_rt_synchronize");
  synchronizeRank(state, "braid_rt_synchronize", /*spin=*/true);
}

void braid_rt_host_max(double *values, int64_t count) {
  Process &p = initialized("braid_rt_host_max");
  if (count < 0)
    fatalf("braid_rt_host_max: negative count %lld",
           static_cast<long long>(count));
  if (count == 0)
    return;
  RankState *state = currentRankOrNull();
  if (p.mode == Mode::Loopback) {
    // Outside braid_rt_loopback_run the process is the only participant.
    if (state)
      loopback::hostMax(values, count);
    return;
  }
  if (p.usesMPI) {
    checkMPI(MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count),
                           MPI_DOUBLE, MPI_MAX, p.mpiWorld),
             "MPI_Allreduce", "braid_rt_host_max");
    return;
  }
  nccl::hostMax(*state, values, count);
}

int64_t braid_rt_loopback_ranks(void) {
  Process &p = initialized("braid_rt_loopback_ranks");
  return p.mode == Mode::Loopback ? p.worldSize : 0;
}

void braid_rt_loopback_run(void (*fn)(void *), void *arg) {
  Process &p = initialized("braid_rt_loopback_run");
  if (p.mode != Mode::Loopback)
    fatal("braid_rt_loopback_run: not in loopback mode (set BRAID_LOOPBACK=N "
          "before braid_rt_init)");
  if (currentRankOrNull())
    fatal("braid_rt_loopback_run called from a rank's thread");
  loopback::run(fn, arg);
}

//===----------------------------------------------------------------------===//
// The transport under Front.cpp (its one-sided half: OneSided.cpp)
//===----------------------------------------------------------------------===//

const GroupLayout &CudaTransport::group(int64_t handle, const char *call) {
  return getGroup(currentRank(call), handle, call);
}

int64_t CudaTransport::post(const Transfer &transfer) {
  RankState &state = currentRank(opName(transfer.kind));
  auto request = std::make_unique<Request>();
  static_cast<Transfer &>(*request) = transfer;
  // The front's layout is the CudaGroup that group() returned.
  request->group = static_cast<const CudaGroup *>(transfer.layout);
  request->ownerRank = state.rank;
  return submit(state, std::move(request));
}

void CudaTransport::wait(int64_t request) {
  RankState &state = currentRank("braid_rt_wait");
  auto found = state.requests.find(request);
  if (found == state.requests.end())
    fatalf("braid_rt_wait: request %lld is not outstanding (never returned "
           "by the runtime, or already waited)",
           static_cast<long long>(request));
  std::unique_ptr<Request> owned = std::move(found->second);
  state.requests.erase(found);
  if (owned->kind == OpKind::Put) {
    // Issued on the comm stream when posted.
    orderAfter(state, *owned);
    state.inFlight.push_back(std::move(owned));
  } else if (isLoopback())
    loopback::wait(state, std::move(owned));
  else
    nccl::wait(state, std::move(owned));
}

void CudaTransport::signalSet(int32_t *flag, int32_t value, int64_t stream,
                              int64_t step) {
  const char *call = "braid_rt_signal_set";
  RankState &state = currentRank(call);
  // Transfers posted before the signal go first on the comm stream.
  if (stream == 1 && !isLoopback())
    nccl::flush(state);
  checkDriver(
      driver().streamWriteValue32(
          reinterpret_cast<CUstream>(stream == 0 ? state.compute : state.comm),
          reinterpret_cast<CUdeviceptr>(flag), static_cast<cuuint32_t>(value),
          CU_STREAM_WRITE_VALUE_DEFAULT),
      "cuStreamWriteValue32",
      formatString("%s step %lld", call, static_cast<long long>(step)));
}

void CudaTransport::signalWait(int32_t *flag, int32_t value, int64_t stream,
                               int64_t step) {
  const char *call = "braid_rt_signal_wait";
  RankState &state = currentRank(call);
  std::string context = formatString("%s step %lld (flag %p >= %d)", call,
                                     static_cast<long long>(step),
                                     static_cast<void *>(flag), value);
  if (stream == 0)
    state.lastCompute = context; // named if the stream never gets past it
  checkDriver(
      driver().streamWaitValue32(
          reinterpret_cast<CUstream>(stream == 0 ? state.compute : state.comm),
          reinterpret_cast<CUdeviceptr>(flag), static_cast<cuuint32_t>(value),
          CU_STREAM_WAIT_VALUE_GEQ),
      "cuStreamWaitValue32", context);
}

Transport &braid::rt::transport(const char *call) {
  // Every call acts for the calling thread's rank.
  currentRank(call);
  static CudaTransport *instance = new CudaTransport();
  return *instance;
}

namespace braid::rt::cuda {

/// Runs on each loopback rank's thread around the runner's function.
void runLoopbackRank(int rank, void (*fn)(void *), void *arg) {
  Process &p = process();
  setThreadDiagnosticRank(rank);
  RankState state;
  setUpRank(state, rank, p.worldSize, p.device, /*loopback=*/true);
  threadRank = &state;
  loopback::registerRank(rank, &state);
  fn(arg);
  if (!state.requests.empty()) {
    auto oldest = std::min_element(
        state.requests.begin(), state.requests.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    size_t n = state.requests.size();
    fatalf("braid_rt_finalize: %zu request%s never waited (the oldest: %s)", n,
           n == 1 ? " was" : "s were", oldest->second->describe().c_str());
  }
  synchronizeRank(state, "braid_rt_finalize");
  oneSided::releaseSites(state);
  loopback::registerRank(rank, nullptr);
  threadRank = nullptr;
  tearDownRank(state);
}

} // namespace braid::rt::cuda
