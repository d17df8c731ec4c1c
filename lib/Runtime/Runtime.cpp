//===- Runtime.cpp - The C entry points of the Braid runtime --------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Implements braid_rt.h on MPI. The entry points validate their arguments,
// turn each operation into a Request for the communication thread and, when
// tracing, mark the boundaries of the compute steps between them.
//
//===----------------------------------------------------------------------===//

// The library is built with hidden visibility; only the ABI is exported.
#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Checks.h"
#include "CommThread.h"
#include "Diagnostics.h"
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

/// Marks a runtime call as the end of one compute step and the start of the
/// next one in the trace.
class CallScope {
public:
  explicit CallScope(Tracer &tracer) : tracer(tracer) {
    if (tracer.active())
      tracer.callBegin(nowNs());
  }
  ~CallScope() {
    if (tracer.active())
      tracer.callEnd(nowNs());
  }

private:
  Tracer &tracer;
};

std::unique_ptr<Request> newRequest(OpKind kind, const Group &group,
                                    int64_t step) {
  auto request = std::make_unique<Request>();
  request->kind = kind;
  request->group = &group;
  request->comm = group.comm;
  request->commSize = group.size;
  request->step = step;
  return request;
}

int64_t pointToPoint(OpKind kind, const char *call, int64_t groupHandle,
                     int64_t peerOffset, int64_t addr, int64_t bytes,
                     int64_t step) {
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &group = rt.groups.get(groupHandle, call);
  checkBuffer(call, "the buffer", addr, bytes, step);
  auto request = newRequest(kind, group, step);
  int64_t n = group.size;
  int64_t offset = ((peerOffset % n) + n) % n;
  request->peerOffset = peerOffset;
  request->peerPosition = peerPosition(group.position, n, peerOffset);
  request->peerWorldRank = group.worldRanks[request->peerPosition];
  // A send with offset k and the matching receive with offset -k use the
  // same tag, k mod n; messages with one tag between two ranks match in
  // posting order (MPI does not let them overtake each other).
  request->tag =
      static_cast<int>(kind == OpKind::Send ? offset : (n - offset) % n);
  if (kind == OpKind::Send)
    request->src = reinterpret_cast<const void *>(addr);
  else
    request->dst = reinterpret_cast<void *>(addr);
  request->bytes = bytes;
  return rt.comm->submit(std::move(request));
}

int64_t reduction(OpKind kind, const char *call, int64_t groupHandle,
                  int64_t src, int64_t dst, int64_t count, int64_t dtype,
                  int64_t reductionKind, int64_t step) {
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &group = rt.groups.get(groupHandle, call);
  ReductionType type = resolveReduction(dtype, reductionKind, call, step);
  checkReductionBuffers(call, kind == OpKind::ReduceScatter, src, dst, count,
                        type.elementSize, group.size, step);
  auto request = newRequest(kind, group, step);
  request->src = reinterpret_cast<const void *>(src);
  request->dst = reinterpret_cast<void *>(dst);
  request->count = count;
  request->reduction = type;
  return rt.comm->submit(std::move(request));
}

int64_t blockExchange(OpKind kind, const char *call, int64_t groupHandle,
                      int64_t src, int64_t dst, int64_t bytesPerRank,
                      int64_t step) {
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &group = rt.groups.get(groupHandle, call);
  checkBlockBuffers(call, kind == OpKind::AllGather, src, dst, bytesPerRank,
                    group.size, step);
  auto request = newRequest(kind, group, step);
  request->src = reinterpret_cast<const void *>(src);
  request->dst = reinterpret_cast<void *>(dst);
  request->bytes = bytesPerRank;
  return rt.comm->submit(std::move(request));
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
  request->commSize = rt.worldSize;
  waitTraced(rt, rt.comm->submit(std::move(request)));
}

} // namespace

//===----------------------------------------------------------------------===//
// Lifecycle
//===----------------------------------------------------------------------===//

void braid_rt_init(int *argc, char ***argv) {
  Runtime &rt = runtime();
  if (rt.initialized)
    return;
  if (rt.finalized)
    fatal("braid_rt_init called after braid_rt_finalize (MPI cannot be "
          "initialized twice)");

  int alreadyInitialized = 0;
  if (MPI_Initialized(&alreadyInitialized) != MPI_SUCCESS)
    fatal("MPI_Initialized failed in braid_rt_init");
  int provided = MPI_THREAD_SINGLE;
  if (!alreadyInitialized) {
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      fatalf("MPI_Init_thread failed in braid_rt_init (MPI error %d)", rc);
    rt.ownsMPI = true;
  }
  setMPIUsable(true);
  if (alreadyInitialized)
    checkMPI(MPI_Query_thread(&provided), "MPI_Query_thread", "braid_rt_init");
  // A host program that initialized MPI keeps its own error handling; the
  // runtime's communicators (duplicates) get MPI_ERRORS_RETURN regardless.
  if (rt.ownsMPI)
    checkMPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
             "MPI_Comm_set_errhandler", "braid_rt_init");
  checkMPI(MPI_Comm_rank(MPI_COMM_WORLD, &rt.worldRank), "MPI_Comm_rank",
           "braid_rt_init");
  checkMPI(MPI_Comm_size(MPI_COMM_WORLD, &rt.worldSize), "MPI_Comm_size",
           "braid_rt_init");
  setDiagnosticRank(rt.worldRank);
  // MPI is only ever called by one thread at a time (init and finalize
  // here, everything in between on the comm thread), which SERIALIZED
  // allows; MULTIPLE is requested so that a fatal error may call MPI_Abort
  // from the compute thread while the comm thread is inside MPI.
  if (provided < MPI_THREAD_SERIALIZED)
    fatalf("braid_rt_init: the MPI library provides thread level %d, but the "
           "runtime calls MPI from a communication thread and needs "
           "MPI_THREAD_SERIALIZED (%d) or better",
           provided, MPI_THREAD_SERIALIZED);
  checkMPI(MPI_Comm_dup(MPI_COMM_WORLD, &rt.world), "MPI_Comm_dup",
           "braid_rt_init");
  checkMPI(MPI_Comm_set_errhandler(rt.world, MPI_ERRORS_RETURN),
           "MPI_Comm_set_errhandler", "braid_rt_init");
  createReductionOps();

  double timeout =
      rt.timeoutOverride > 0 ? rt.timeoutOverride : timeoutFromEnvironment();
  rt.comm = std::make_unique<CommThread>(rt.tracer, timeout);
  rt.comm->start();
  rt.initialized = true;
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
  rt.finalized = true;
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
  Runtime &rt = initialized("braid_rt_barrier");
  CallScope scope(rt.tracer);
  worldBarrier(rt);
}

void braid_rt_trace_begin(void) {
  Runtime &rt = initialized("braid_rt_trace_begin");
  if (rt.tracer.active())
    rt.tracer.finish(rt.worldRank); // Restart: drop what was recorded.
  // All ranks start together so that their time origins line up.
  worldBarrier(rt);
  rt.tracer.begin(nowNs());
}

void braid_rt_trace_end(const char *path) {
  Runtime &rt = initialized("braid_rt_trace_end");
  if (!path || !*path)
    fatal("braid_rt_trace_end: no path given");
  std::string local = rt.tracer.finish(rt.worldRank);
  std::string merged;
  rt.comm->runSync(
      formatString("gathering the trace for %s (collective over all ranks)",
                   path),
      [&] {
        merged = Tracer::gather(local, rt.world, rt.worldRank, rt.worldSize);
      });
  if (rt.worldRank == 0)
    Tracer::write(path, merged);
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

int64_t braid_rt_coord(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t axis) {
  Runtime &rt = initialized("braid_rt_coord");
  GridShape shape =
      makeGridShape("braid_rt_coord", ndims, s0, s1, s2, s3, rt.worldSize);
  if (axis < 0 || axis >= shape.ndims)
    fatalf("braid_rt_coord: axis %lld is out of range for grid %s",
           static_cast<long long>(axis), shape.str().c_str());
  return shape.coordinates(rt.worldRank)[axis];
}

int64_t braid_rt_send(int64_t group, int64_t peer_offset, int64_t addr,
                      int64_t bytes, int64_t step) {
  return pointToPoint(OpKind::Send, "braid_rt_send", group, peer_offset, addr,
                      bytes, step);
}

int64_t braid_rt_recv(int64_t group, int64_t peer_offset, int64_t addr,
                      int64_t bytes, int64_t step) {
  return pointToPoint(OpKind::Recv, "braid_rt_recv", group, peer_offset, addr,
                      bytes, step);
}

int64_t braid_rt_all_gather(int64_t group, int64_t src, int64_t dst,
                            int64_t bytes_per_rank, int64_t step) {
  return blockExchange(OpKind::AllGather, "braid_rt_all_gather", group, src,
                       dst, bytes_per_rank, step);
}

int64_t braid_rt_reduce_scatter(int64_t group, int64_t src, int64_t dst,
                                int64_t count_per_rank, int64_t dtype,
                                int64_t reduction, int64_t step) {
  return ::reduction(OpKind::ReduceScatter, "braid_rt_reduce_scatter", group,
                     src, dst, count_per_rank, dtype, reduction, step);
}

int64_t braid_rt_all_reduce(int64_t group, int64_t src, int64_t dst,
                            int64_t count, int64_t dtype, int64_t reduction,
                            int64_t step) {
  return ::reduction(OpKind::AllReduce, "braid_rt_all_reduce", group, src, dst,
                     count, dtype, reduction, step);
}

int64_t braid_rt_all_to_all(int64_t group, int64_t src, int64_t dst,
                            int64_t bytes_per_rank, int64_t step) {
  return blockExchange(OpKind::AllToAll, "braid_rt_all_to_all", group, src, dst,
                       bytes_per_rank, step);
}

int64_t braid_rt_broadcast(int64_t group, int64_t src, int64_t dst,
                           int64_t bytes, int64_t root, int64_t step) {
  Runtime &rt = initialized("braid_rt_broadcast");
  CallScope scope(rt.tracer);
  const Group &g = rt.groups.get(group, "braid_rt_broadcast");
  if (root < 0 || root >= g.size)
    fatalf("braid_rt_broadcast (step %lld): root %lld is not a position in "
           "a group of %d ranks",
           static_cast<long long>(step), static_cast<long long>(root), g.size);
  checkBuffer("braid_rt_broadcast", "the destination", dst, bytes, step);
  if (g.position == root)
    checkBuffer("braid_rt_broadcast", "the source", src, bytes, step);
  auto request = newRequest(OpKind::Broadcast, g, step);
  request->src = reinterpret_cast<const void *>(src);
  request->dst = reinterpret_cast<void *>(dst);
  request->bytes = bytes;
  request->root = root;
  return rt.comm->submit(std::move(request));
}

void braid_rt_wait(int64_t request) {
  Runtime &rt = initialized("braid_rt_wait");
  CallScope scope(rt.tracer);
  waitTraced(rt, request);
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

void braid_rt_loopback_run(void (*)(void *), void *) {
  fatal("braid_rt_loopback_run is only implemented by the cuda backend");
}

int64_t braid_rt_symmetric_alloc(int64_t group, int64_t bytes) {
  const char *call = "braid_rt_symmetric_alloc";
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &g = rt.groups.get(group, call);
  return reinterpret_cast<int64_t>(
      rt.symmetric.allocate(g, bytes, /*site=*/-1, *rt.comm, call));
}

void braid_rt_symmetric_free(int64_t group, int64_t addr) {
  const char *call = "braid_rt_symmetric_free";
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &g = rt.groups.get(group, call);
  rt.symmetric.free(g, reinterpret_cast<void *>(addr), *rt.comm, call);
}

int64_t braid_rt_symmetric_site(int64_t group, int64_t bytes, int64_t site) {
  const char *call = "braid_rt_symmetric_site";
  Runtime &rt = initialized(call);
  const Group &g = rt.groups.get(group, call);
  if (site < 0)
    fatalf("%s: site %lld is negative", call, static_cast<long long>(site));
  return reinterpret_cast<int64_t>(
      rt.symmetric.allocate(g, bytes, site, *rt.comm, call));
}

int64_t braid_rt_symmetric_peer(int64_t group, int64_t peer_offset,
                                int64_t addr) {
  const char *call = "braid_rt_symmetric_peer";
  Runtime &rt = initialized(call);
  const Group &g = rt.groups.get(group, call);
  return reinterpret_cast<int64_t>(rt.symmetric.peer(
      g, reinterpret_cast<const void *>(addr), peer_offset, -1, call));
}

int64_t braid_rt_put(int64_t group, int64_t peer_offset, int64_t src,
                     int64_t dst, int64_t bytes, int64_t flag, int64_t step) {
  const char *call = "braid_rt_put";
  Runtime &rt = initialized(call);
  CallScope scope(rt.tracer);
  const Group &g = rt.groups.get(group, call);
  checkBuffer(call, "the source", src, bytes, step);
  auto request = newRequest(OpKind::Put, g, step);
  int64_t n = g.size;
  request->peerOffset = peer_offset;
  request->peerPosition = peerPosition(g.position, n, peer_offset);
  request->peerWorldRank = g.worldRanks[request->peerPosition];
  request->src = reinterpret_cast<const void *>(src);
  if (bytes > 0) {
    // Both ends of the destination must lie in the symmetric buffer.
    rt.symmetric.peer(g, reinterpret_cast<const void *>(dst + bytes - 1),
                      peer_offset, step, call);
    request->dst = rt.symmetric.peer(g, reinterpret_cast<const void *>(dst),
                                     peer_offset, step, call);
  }
  if (flag) {
    if (flag % 4 != 0)
      fatalf("%s (step %lld): flag address %p is not 4-byte aligned", call,
             static_cast<long long>(step), reinterpret_cast<void *>(flag));
    request->flag = static_cast<int32_t *>(rt.symmetric.peer(
        g, reinterpret_cast<const void *>(flag), peer_offset, step, call));
  }
  request->bytes = bytes;
  return rt.comm->submit(std::move(request));
}

void braid_rt_signal_add(int64_t group, int64_t peer_offset, int64_t flag,
                         int64_t value, int64_t step) {
  const char *call = "braid_rt_signal_add";
  Runtime &rt = initialized(call);
  const Group &g = rt.groups.get(group, call);
  if (flag % 4 != 0)
    fatalf("%s (step %lld): flag address %p is not 4-byte aligned", call,
           static_cast<long long>(step), reinterpret_cast<void *>(flag));
  auto *peerFlag = static_cast<int32_t *>(rt.symmetric.peer(
      g, reinterpret_cast<const void *>(flag), peer_offset, step, call));
  __atomic_fetch_add(peerFlag, static_cast<int32_t>(value), __ATOMIC_RELEASE);
}

void braid_rt_signal_wait_next(int64_t flag, int64_t slack, int64_t step) {
  const char *call = "braid_rt_signal_wait_next";
  Runtime &rt = initialized(call);
  if (flag == 0 || flag % 4 != 0)
    fatalf("%s (step %lld): flag address %p is null or not 4-byte aligned",
           call, static_cast<long long>(step), reinterpret_cast<void *>(flag));
  auto *word = reinterpret_cast<int32_t *>(flag);
  uint32_t &waits = rt.symmetric.waitsOn(word);
  ++waits;
  uint32_t expected = waits - static_cast<uint32_t>(slack);
  // Wrap-safe: at least `expected` modulo 2^32.
  auto reached = [&](uint32_t value) {
    return static_cast<int32_t>(value - expected) >= 0;
  };
  uint32_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  if (reached(seen))
    return;
  bool tracing = rt.tracer.active();
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
      fatalf("%s (step %lld): %s is %u after %g s, waiting for epoch %u (a "
             "peer died or never raised it)",
             call, static_cast<long long>(step),
             rt.symmetric.describeFlag(word).c_str(), seen, timeout, expected);
    if (polls < 64)
      continue;
    if (elapsed < 50000)
      sched_yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::min<int64_t>(200, 5 + elapsed / 1000 / 16)));
  }
  if (tracing)
    rt.tracer.addEvent(
        Track::Compute, start, nowNs(),
        formatString("signal_wait step %lld", static_cast<long long>(step)));
}

void braid_rt_signal_set(int64_t addr, int64_t value, int64_t stream,
                         int64_t step) {
  initialized("braid_rt_signal_set");
  checkSignal("braid_rt_signal_set", addr, stream, step);
  __atomic_store_n(reinterpret_cast<int32_t *>(addr),
                   static_cast<int32_t>(value), __ATOMIC_RELEASE);
}

void braid_rt_signal_wait(int64_t addr, int64_t value, int64_t stream,
                          int64_t step) {
  Runtime &rt = initialized("braid_rt_signal_wait");
  checkSignal("braid_rt_signal_wait", addr, stream, step);
  double timeout = rt.comm->timeout();
  auto *flag = reinterpret_cast<int32_t *>(addr);
  int64_t start = nowNs();
  // At least `value` modulo 2^32, as cuStreamWaitValue32's GEQ compares.
  while (static_cast<int32_t>(
             static_cast<uint32_t>(__atomic_load_n(flag, __ATOMIC_ACQUIRE)) -
             static_cast<uint32_t>(value)) < 0) {
    if (std::isfinite(timeout) &&
        static_cast<double>(nowNs() - start) * 1e-9 > timeout)
      fatalf("braid_rt_signal_wait (step %lld): the flag at %p is %d, still "
             "below %lld after %g s",
             static_cast<long long>(step), static_cast<void *>(flag),
             __atomic_load_n(flag, __ATOMIC_ACQUIRE),
             static_cast<long long>(value), timeout);
    sched_yield();
  }
}
