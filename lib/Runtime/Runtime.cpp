//===- Runtime.cpp - The C entry points of the Braid runtime --------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Implements braid_rt.h on MPI: the lifecycle, groups, runner memory and
// timers, and the Transport under the communication calls of Front.cpp,
// which turns each checked transfer into a Request for the communication
// thread (two-sided) or works on the MPI shared-memory windows of
// Symmetric.cpp (one-sided), and when tracing marks the boundaries of the
// compute steps between calls.
//
//===----------------------------------------------------------------------===//

// The library is built with hidden visibility; only the ABI is exported.
#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Checks.h"
#include "CommThread.h"
#include "Diagnostics.h"
#include "Front.h"
#include "Groups.h"
#include "Reductions.h"
#include "Symmetric.h"
#include "Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <sched.h>
#include <thread>
#include <vector>

using namespace braid::rt;

namespace {

struct Runtime {
  bool initialized = false;
  bool finalized = false;
  /// Whether braid_rt_init initialized MPI (and finalize must finalize it),
  /// as opposed to a host program that did so itself.
  bool ownsMPI = false;
  int worldRank = 0;
  int worldSize = 1;
  /// A duplicate of MPI_COMM_WORLD, so that the runtime's collectives never
  /// match traffic of a host program that uses MPI itself.
  MPI_Comm world = MPI_COMM_NULL;
  /// Set by braid_rt_set_timeout, possibly before init.
  double timeoutOverride = 0;
  Tracer tracer;
  GroupTable groups;
  std::unique_ptr<CommThread> comm;
  /// Symmetric buffers (MPI shared windows) and the waits on their flags.
  SymmetricHeap symmetric;
};

// Never destroyed: a program that exits without braid_rt_finalize (after an
// error of its own) must not run a destructor that joins the comm thread.
Runtime &runtime() {
  static Runtime *instance = new Runtime();
  return *instance;
}

Runtime &initialized(const char *call) {
  Runtime &rt = runtime();
  if (!rt.initialized)
    fatalf("%s called %s", call,
           rt.finalized ? "after braid_rt_finalize" : "before braid_rt_init");
  return rt;
}

/// Waits for a request, recording the blocked time when tracing.
void waitTraced(Runtime &rt, int64_t handle) {
  bool tracing = rt.tracer.active();
  int64_t start = tracing ? nowNs() : 0;
  std::string name;
  rt.comm->wait(handle, tracing ? &name : nullptr);
  if (tracing)
    rt.tracer.addEvent(Track::Compute, start, nowNs(), "wait " + name);
}

void worldBarrier(Runtime &rt) {
  auto request = std::make_unique<Request>();
  request->kind = OpKind::Barrier;
  request->comm = rt.world;
  request->groupSize = rt.worldSize;
  waitTraced(rt, rt.comm->submit(std::move(request)));
}

} // namespace

//===----------------------------------------------------------------------===//
// Lifecycle
//===----------------------------------------------------------------------===//

namespace {

/// Finalizes the runtime when the host finalizes MPI: the attribute a host's
/// runtime puts on MPI_COMM_SELF is deleted first thing in MPI_Finalize,
/// while MPI still works.
int finalizeWithMPI(MPI_Comm, int, void *, void *) {
  braid_rt_finalize();
  return MPI_SUCCESS;
}

/// Starts the runtime on `base` (MPI's world when `host` is null, else the
/// communicator whose Fortran handle *host is). Returns "" or, for a host
/// (braid_rt_init_on), why the runtime cannot start there; braid_rt_init
/// ends the job instead.
/// The communicator whose Fortran handle is `handle` (-1: MPI's world), or
/// MPI_COMM_NULL for a value no handle has.
MPI_Comm hostCommunicator(int64_t handle) {
  if (handle == -1)
    return MPI_COMM_WORLD;
  if (handle < std::numeric_limits<MPI_Fint>::min() ||
      handle > std::numeric_limits<MPI_Fint>::max())
    return MPI_COMM_NULL;
  return MPI_Comm_f2c(static_cast<MPI_Fint>(handle));
}

/// Finalizes MPI at exit where the runtime initialized it but refused to
/// start (a job must not end with MPI initialized).
void finalizeMPIAtExit() {
  int finalized = 0;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
    MPI_Finalize();
}

std::string start(Runtime &rt, int *argc, char ***argv, const int64_t *host) {
  auto refuse = [&](const std::string &why) {
    if (!host)
      fatal(why);
    if (rt.ownsMPI)
      std::atexit(finalizeMPIAtExit);
    return why;
  };
  int mpiInitialized = 0, mpiFinalized = 0;
  if (MPI_Initialized(&mpiInitialized) != MPI_SUCCESS ||
      MPI_Finalized(&mpiFinalized) != MPI_SUCCESS)
    fatal("MPI_Initialized failed in braid_rt_init");
  if (rt.finalized || mpiFinalized)
    return refuse("braid_rt_init called after MPI was finalized (MPI cannot "
                  "be initialized twice)");
  bool given = host && *host != -1;
  if (given && !mpiInitialized)
    return refuse("a communicator was given, but MPI is not initialized");
  int provided = MPI_THREAD_SINGLE;
  if (!mpiInitialized) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      fatalf("MPI_Init_thread failed in braid_rt_init (MPI error %d)", rc);
    rt.ownsMPI = true;
  }
  setMPIUsable(true);
  if (mpiInitialized)
    checkMPI(MPI_Query_thread(&provided), "MPI_Query_thread", "braid_rt_init");
  // MPI is only ever called by one thread at a time (init and finalize
  // here, everything in between on the comm thread), which SERIALIZED
  // allows; MULTIPLE is requested so that a fatal error may call MPI_Abort
  // from the compute thread while the comm thread is inside MPI.
  if (provided < MPI_THREAD_SERIALIZED)
    return refuse(
        formatString("the MPI library was initialized with thread level %d, "
                     "but the runtime calls MPI from a communication thread "
                     "and needs MPI_THREAD_SERIALIZED (%d) or better "
                     "(MPI_Init_thread)",
                     provided, MPI_THREAD_SERIALIZED));
  MPI_Comm base = given ? hostCommunicator(*host) : MPI_COMM_WORLD;
  if (base == MPI_COMM_NULL)
    return refuse(formatString("%lld is not a communicator's Fortran handle",
                               static_cast<long long>(*host)));
  // A host program that initialized MPI keeps its own error handling; the
  // runtime's communicators (duplicates) get MPI_ERRORS_RETURN regardless.
  if (rt.ownsMPI)
    checkMPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
             "MPI_Comm_set_errhandler", "braid_rt_init");
  checkMPI(MPI_Comm_rank(base, &rt.worldRank), "MPI_Comm_rank",
           "braid_rt_init");
  checkMPI(MPI_Comm_size(base, &rt.worldSize), "MPI_Comm_size",
           "braid_rt_init");
  setDiagnosticRank(rt.worldRank);
  checkMPI(MPI_Comm_dup(base, &rt.world), "MPI_Comm_dup", "braid_rt_init");
  checkMPI(MPI_Comm_set_errhandler(rt.world, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler", "braid_rt_init");
  createReductionOps();

  double timeout =
      rt.timeoutOverride > 0 ? rt.timeoutOverride : timeoutFromEnvironment();
  rt.comm = std::make_unique<CommThread>(rt.tracer, timeout);
  rt.comm->start();
  rt.initialized = true;
  if (host && !rt.ownsMPI) {
    int key = MPI_KEYVAL_INVALID;
    checkMPI(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalizeWithMPI,
                                    &key, nullptr),
             "MPI_Comm_create_keyval", "braid_rt_init");
    checkMPI(MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr),
             "MPI_Comm_set_attr", "braid_rt_init");
  } else if (host) {
    // MPI is the runtime's: nothing else finalizes it.
    std::atexit(braid_rt_finalize);
  }
  return std::string();
}

} // namespace

void braid_rt_init(int *argc, char ***argv) {
  Runtime &rt = runtime();
  if (!rt.initialized)
    start(rt, argc, argv, nullptr);
}

const char *braid_rt_init_on(int64_t comm) {
  static std::string problem;
  Runtime &rt = runtime();
  if (!rt.initialized) {
    problem = start(rt, nullptr, nullptr, &comm);
    return problem.empty() ? nullptr : problem.c_str();
  }
  // Already running: on this communicator (a congruent one) or refused.
  MPI_Comm base = hostCommunicator(comm);
  if (base == MPI_COMM_NULL) {
    problem = formatString("%lld is not a communicator's Fortran handle",
                           static_cast<long long>(comm));
    return problem.c_str();
  }
  int same = MPI_UNEQUAL;
  checkMPI(MPI_Comm_compare(rt.world, base, &same), "MPI_Comm_compare",
           "braid_rt_init_on");
  if (same == MPI_CONGRUENT || same == MPI_IDENT)
    return nullptr;
  problem = formatString(
      "the runtime of this process already runs on another communicator (of "
      "%d ranks): one communicator per process",
      rt.worldSize);
  return problem.c_str();
}

void braid_rt_finalize(void) {
  Runtime &rt = runtime();
  if (!rt.initialized)
    return;
  std::string oldest;
  size_t outstanding = rt.comm->outstanding(&oldest);
  // Finalizing with operations in flight could hang in MPI_Finalize, and an
  // unwaited request means the program broke the ABI's contract.
  if (outstanding)
    fatalf("braid_rt_finalize: %zu request%s never waited (the oldest: %s)",
           outstanding, outstanding == 1 ? " was" : "s were", oldest.c_str());
  rt.symmetric.freeAll(*rt.comm);
  rt.comm->stop();
  rt.comm.reset();
  rt.groups.freeAll();
  freeReductionOps();
  checkMPI(MPI_Comm_free(&rt.world), "MPI_Comm_free", "braid_rt_finalize");
  rt.initialized = false;
  // A host's MPI lives on, and the runtime may start again on it.
  rt.finalized = rt.ownsMPI;
  if (rt.ownsMPI) {
    int rc = MPI_Finalize();
    setMPIUsable(false);
    if (rc != MPI_SUCCESS)
      fatalf("MPI_Finalize failed in braid_rt_finalize (MPI error %d)", rc);
  }
}

int64_t braid_rt_world_rank(void) {
  return initialized("braid_rt_world_rank").worldRank;
}

int64_t braid_rt_world_size(void) {
  return initialized("braid_rt_world_size").worldSize;
}

void braid_rt_set_timeout(double seconds) {
  if (!(seconds > 0))
    fatalf("braid_rt_set_timeout: %g is not a positive number of seconds",
           seconds);
  Runtime &rt = runtime();
  rt.timeoutOverride = seconds;
  if (rt.comm)
    rt.comm->setTimeout(seconds);
}

void braid_rt_abort(const char *message) {
  fatal(message ? message : "aborted");
}

void braid_rt_barrier(void) {
  Transport &t = transport("braid_rt_barrier");
  t.callBegin();
  worldBarrier(runtime());
  t.callEnd();
}

void braid_rt_trace_begin(void) {
  Runtime &rt = initialized("braid_rt_trace_begin");
  if (rt.tracer.active())
    rt.tracer.finish(rt.worldRank); // Restart: drop what was recorded.
  // All ranks start together so that their time origins line up.
  worldBarrier(rt);
  rt.tracer.begin(nowNs());
}

void braid_rt_trace_finish(const char *path, int64_t profile) {
  Runtime &rt = initialized("braid_rt_trace_finish");
  if (path && !*path)
    fatal("braid_rt_trace_finish: the trace's path is empty");
  std::string summary;
  std::string local =
      rt.tracer.finish(rt.worldRank, profile ? &summary : nullptr);
  std::string merged, summaries;
  rt.comm->runSync("gathering the trace (collective over all ranks)", [&] {
    if (path)
      merged = Tracer::gather(local, rt.world, rt.worldRank, rt.worldSize);
    if (profile)
      summaries =
          Tracer::gather(summary, rt.world, rt.worldRank, rt.worldSize, "");
  });
  if (rt.worldRank == 0)
    Tracer::deliver(path, merged, profile ? &summaries : nullptr, rt.worldSize);
}

void braid_rt_kernel_begin(int64_t name, int64_t bytes, int64_t flops) {
  Tracer &tracer = runtime().tracer;
  if (tracer.active())
    tracer.kernelBegin(nowNs(), reinterpret_cast<const char *>(name), bytes,
                       flops);
}

void braid_rt_kernel_end(void) {
  Tracer &tracer = runtime().tracer;
  if (tracer.active())
    tracer.kernelEnd(nowNs());
}

//===----------------------------------------------------------------------===//
// Called by compiled code
//===----------------------------------------------------------------------===//

int64_t braid_rt_group(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t naxes, int64_t axes_packed) {
  Runtime &rt = initialized("braid_rt_group");
  GridShape shape =
      makeGridShape("braid_rt_group", ndims, s0, s1, s2, s3, rt.worldSize);
  bool tracing = rt.tracer.active();
  int64_t start = tracing ? nowNs() : 0;
  bool created = false;
  int64_t handle = rt.groups.lookup(shape, naxes, axes_packed, rt.worldRank,
                                    rt.world, *rt.comm, &created);
  // A cache hit is a cheap query inside a compute step; creating the
  // communicator is a collective that deserves its own slice.
  if (tracing && created) {
    int64_t end = nowNs();
    rt.tracer.callBegin(start);
    rt.tracer.addEvent(Track::Compute, start, end,
                       "create group " +
                           rt.groups.get(handle, "braid_rt_group").str());
    rt.tracer.callEnd(end);
  }
  return handle;
}

//===----------------------------------------------------------------------===//
// Runner memory
//===----------------------------------------------------------------------===//

void *braid_rt_buffer_alloc(int64_t bytes) {
  if (bytes < 0)
    fatalf("braid_rt_buffer_alloc: negative size %lld",
           static_cast<long long>(bytes));
  // Never empty, so that zero-sized tensors still get a distinct, valid
  // pointer; aligned_alloc wants a multiple of the alignment.
  size_t size =
      (std::max<size_t>(static_cast<size_t>(bytes), 1) + 63) / 64 * 64;
  void *data = std::aligned_alloc(64, size);
  if (!data)
    fatalf("cannot allocate %lld bytes for an input",
           static_cast<long long>(bytes));
  return data;
}

void braid_rt_buffer_free(void *p) { std::free(p); }

void *braid_rt_host_alloc(int64_t bytes) {
  if (bytes < 0)
    fatalf("braid_rt_host_alloc: negative size %lld",
           static_cast<long long>(bytes));
  return braid_rt_buffer_alloc(bytes);
}

void braid_rt_host_free(void *p) { std::free(p); }

void braid_rt_copy_to_device(void *dst, const void *src, int64_t bytes) {
  if (bytes < 0)
    fatalf("braid_rt_copy_to_device: negative size %lld",
           static_cast<long long>(bytes));
  if (bytes > 0)
    std::memcpy(dst, src, static_cast<size_t>(bytes));
}

namespace {
// Per thread, like the cuda backend's per-rank event.
thread_local std::chrono::steady_clock::time_point timerStart;
thread_local bool timerRunning = false;
} // namespace

void braid_rt_timer_start(void) {
  initialized("braid_rt_timer_start");
  timerStart = std::chrono::steady_clock::now();
  timerRunning = true;
}

double braid_rt_timer_stop(void) {
  initialized("braid_rt_timer_stop");
  if (!timerRunning)
    fatal("braid_rt_timer_stop called without braid_rt_timer_start");
  // Calls complete on the host: the program's work is done when it returns.
  timerRunning = false;
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - timerStart)
      .count();
}

void braid_rt_result_free(void *p) { std::free(p); }

void braid_rt_copy_to_host(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0)
    std::memcpy(dst, src, static_cast<size_t>(bytes));
}

void braid_rt_synchronize(void) { initialized("braid_rt_synchronize"); }

void braid_rt_host_max(double *values, int64_t count) {
  Runtime &rt = initialized("braid_rt_host_max");
  if (count < 0)
    fatalf("braid_rt_host_max: negative count %lld",
           static_cast<long long>(count));
  if (count == 0)
    return;
  std::vector<double> result(static_cast<size_t>(count));
  rt.comm->runSync("braid_rt_host_max (collective over all ranks)", [&] {
    checkMPI(MPI_Allreduce(values, result.data(), static_cast<int>(count),
                           MPI_DOUBLE, MPI_MAX, rt.world),
             "MPI_Allreduce", "braid_rt_host_max");
  });
  std::copy(result.begin(), result.end(), values);
}

int64_t braid_rt_loopback_ranks(void) { return 0; }

const char *braid_rt_init_cuda_on(void *, void *) {
  return "this is the cpu runtime, which runs on MPI communicators "
         "(braid_rt_init_on): cuda programs run on libBraidRuntimeCUDA.so";
}

int64_t braid_rt_device_arena(int64_t, int64_t) {
  fatal("braid_rt_device_arena is only implemented by the cuda backend (the "
        "cpu target keeps its memory plan's arena in the artifact)");
}

void braid_rt_loopback_run(void (*)(void *), void *) {
  fatal("braid_rt_loopback_run is only implemented by the cuda backend");
}

//===----------------------------------------------------------------------===//
// The transport under Front.cpp
//===----------------------------------------------------------------------===//

namespace {

class CpuTransport final : public Transport {
public:
  const GroupLayout &group(int64_t handle, const char *call) override {
    return runtime().groups.get(handle, call);
  }

  int64_t post(const Transfer &transfer) override {
    Runtime &rt = runtime();
    auto request = newRequest(transfer);
    if (transfer.kind == OpKind::Send || transfer.kind == OpKind::Recv) {
      // A send with offset k and the matching receive with offset -k use
      // the same tag, k mod n; messages with one tag between two ranks
      // match in posting order (MPI does not let them overtake each other).
      int64_t n = transfer.groupSize;
      int64_t k = ((transfer.peerOffset % n) + n) % n;
      request->tag =
          static_cast<int>(transfer.kind == OpKind::Send ? k : (n - k) % n);
    }
    if (transfer.kind == OpKind::ReduceScatter ||
        transfer.kind == OpKind::AllReduce)
      request->mpi = resolveReduction(transfer.dtype, transfer.reduction);
    return rt.comm->submit(std::move(request));
  }

  void wait(int64_t request) override { waitTraced(runtime(), request); }

  void callBegin() override {
    Tracer &tracer = runtime().tracer;
    if (tracer.active())
      tracer.callBegin(nowNs());
  }
  void callEnd() override {
    Tracer &tracer = runtime().tracer;
    if (tracer.active())
      tracer.callEnd(nowNs());
  }

  void *symmetricAllocate(int64_t group, int64_t bytes, int64_t site,
                          const char *call) override {
    Runtime &rt = runtime();
    return rt.symmetric.allocate(rt.groups.get(group, call), bytes, site,
                                 *rt.comm, call);
  }

  void symmetricFree(int64_t group, void *buffer, const char *call) override {
    Runtime &rt = runtime();
    rt.symmetric.free(rt.groups.get(group, call), buffer, *rt.comm, call);
  }

  void *symmetricPeer(int64_t group, const void *addr, int64_t bytes,
                      int position, int64_t step, const char *call,
                      const char *what) override {
    Runtime &rt = runtime();
    return rt.symmetric.peer(rt.groups.get(group, call), addr, bytes, position,
                             step, call, what);
  }

  int64_t put(const Transfer &transfer) override {
    return runtime().comm->submit(newRequest(transfer));
  }

  void signalAdd(int64_t, int, void *peerFlag, uint32_t value,
                 int64_t) override {
    __atomic_fetch_add(static_cast<int32_t *>(peerFlag),
                       static_cast<int32_t>(value), __ATOMIC_RELEASE);
  }

  void signalWaitUntil(void *flag, uint32_t epoch, int64_t step) override;

  uint32_t &waitsOn(void *flag, int64_t step, const char *call) override {
    return runtime().symmetric.waitsOn(flag, step, call);
  }

  void signalSet(int32_t *flag, int32_t value, int64_t, int64_t) override {
    __atomic_store_n(flag, value, __ATOMIC_RELEASE);
  }

  void signalWait(int32_t *flag, int32_t value, int64_t, int64_t step) override;

private:
  /// The front's layout is the Group that group() returned.
  static std::unique_ptr<Request> newRequest(const Transfer &transfer) {
    auto request = std::make_unique<Request>();
    static_cast<Transfer &>(*request) = transfer;
    request->comm = static_cast<const Group *>(transfer.layout)->comm;
    return request;
  }
};

void CpuTransport::signalWaitUntil(void *flag, uint32_t epoch, int64_t step) {
  Runtime &rt = runtime();
  auto *word = static_cast<int32_t *>(flag);
  // Wrap-safe: at least `epoch` modulo 2^32.
  auto reached = [&](uint32_t value) {
    return static_cast<int32_t>(value - epoch) >= 0;
  };
  uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  if (reached(seen))
    return;
  int64_t start = nowNs();
  double timeout = rt.comm->timeout();
  // Spin briefly, then back off: ranks often outnumber cores, and the
  // peer that must raise the flag may need this core.
  for (int64_t polls = 0;; ++polls) {
    seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (reached(seen))
      break;
    int64_t elapsed = nowNs() - start;
    if (std::isfinite(timeout) && static_cast<double>(elapsed) * 1e-9 > timeout)
      fatalf("braid_rt_signal_wait_next (step %lld): %s is %u after %g s, "
             "waiting for epoch %u (a peer died or never raised it)",
             static_cast<long long>(step),
             rt.symmetric.describeFlag(word).c_str(), seen, timeout, epoch);
    if (polls < 64)
      continue;
    if (elapsed < 50000)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::min<int64_t>(200, 5 + elapsed / 1000 / 16)));
  }
  if (rt.tracer.active())
    rt.tracer.addEvent(
        Track::Compute, start, nowNs(),
        formatString("signal_wait step %lld", static_cast<long long>(step)));
}

void CpuTransport::signalWait(int32_t *flag, int32_t value, int64_t,
                              int64_t step) {
  double timeout = runtime().comm->timeout();
  int64_t start = nowNs();
  // At least `value` modulo 2^32, as cuStreamWaitValue32's GEQ compares.
  while (static_cast<int32_t>(
             static_cast<uint32_t>(__atomic_load_n(flag, __ATOMIC_ACQUIRE)) -
             static_cast<uint32_t>(value)) < 0) {
    if (std::isfinite(timeout) &&
        static_cast<double>(nowNs() - start) * 1e-9 > timeout)
      fatalf("braid_rt_signal_wait (step %lld): the flag at %p is %d, still "
             "below %d after %g s",
             static_cast<long long>(step), static_cast<void *>(flag),
             __atomic_load_n(flag, __ATOMIC_ACQUIRE), value, timeout);
    sched_yield();
  }
}

} // namespace

Transport &braid::rt::transport(const char *call) {
  initialized(call);
  static CpuTransport *instance = new CpuTransport();
  return *instance;
}
