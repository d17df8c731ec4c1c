//===- Nccl.cpp - The NCCL transport of the cuda backend ------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// One process per GPU. The world communicator is bootstrapped with an
// ncclUniqueId broadcast over MPI, or handed over a file for launchers
// without MPI; groups are ncclCommSplit's of it. Point-to-point calls are
// queued and issued together in one ncclGroupStart/End at the next wait,
// collective or synchronization: a ring step posts its send before its
// receive, and issued one by one they would deadlock. Reductions NCCL does
// not have (bitwise ones, 16-bit integers) gather every rank's data instead
// and combine it with Braid's own reduction kernels.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "Reduce.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace braid::rt::cuda::nccl {

namespace {

/// Every communicator of the process, for abortAll.
std::mutex commsMutex;
std::vector<ncclComm_t> allComms;

void remember(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(commsMutex);
  allComms.push_back(comm);
}

bool dtypeOf(int64_t dtype, ncclDataType_t &out) {
  switch (dtype) {
  case BRAID_RT_F32:
    out = ncclFloat32;
    return true;
  case BRAID_RT_F64:
    out = ncclFloat64;
    return true;
  case BRAID_RT_F16:
    out = ncclFloat16;
    return true;
  case BRAID_RT_BF16:
    out = ncclBfloat16;
    return true;
  case BRAID_RT_I8:
    out = ncclInt8;
    return true;
  case BRAID_RT_I32:
    out = ncclInt32;
    return true;
  case BRAID_RT_I64:
    out = ncclInt64;
    return true;
  default:
    return false;
  }
}

bool opOf(int64_t reduction, ncclRedOp_t &out) {
  switch (reduction) {
  case BRAID_RT_SUM:
    out = ncclSum;
    return true;
  case BRAID_RT_MAX:
    out = ncclMax;
    return true;
  case BRAID_RT_MIN:
    out = ncclMin;
    return true;
  case BRAID_RT_PRODUCT:
    out = ncclProd;
    return true;
  default:
    return false;
  }
}

bool overlaps(const void *a, int64_t aBytes, const void *b, int64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + static_cast<uintptr_t>(bBytes) &&
         y < x + static_cast<uintptr_t>(aBytes);
}

/// Reads the id rank 0 wrote, waiting for it up to the timeout.
ncclUniqueId readIdFile(const std::string &path) {
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    if (FILE *file = std::fopen(path.c_str(), "rb")) {
      ncclUniqueId id;
      size_t got = std::fread(&id, 1, sizeof(id), file);
      std::fclose(file);
      if (got == sizeof(id))
        return id;
    }
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (elapsed > timeoutSeconds())
      fatalf("braid_rt_init: timed out after %g s waiting for rank 0 to write "
             "the NCCL id to BRAID_NCCL_ID_FILE=%s",
             timeoutSeconds(), path.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void writeIdFile(const std::string &path, const ncclUniqueId &id) {
  // Written aside and renamed, so that no rank reads half an id.
  std::string temporary = formatString("%s.tmp.%d", path.c_str(), getpid());
  FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file || std::fwrite(&id, 1, sizeof(id), file) != sizeof(id) ||
      std::fclose(file) != 0 || std::rename(temporary.c_str(), path.c_str()))
    fatalf("braid_rt_init: cannot write the NCCL id to %s: %s", path.c_str(),
           std::strerror(errno));
}

/// Makes the comm stream wait until the compute stream reached `ready`.
void waitReady(RankState &state, const Request &request) {
  checkCuda(cudaStreamWaitEvent(state.comm, request.ready->event, 0),
            "cudaStreamWaitEvent", request.context());
}

/// Whether NCCL reduces `request` itself.
bool ncclReduces(const Request &request) {
  ncclDataType_t type;
  ncclRedOp_t op;
  return dtypeOf(request.dtype, type) && opOf(request.reduction, op);
}

/// A reduce-scatter or all-reduce NCCL cannot reduce: every rank's blocks
/// are gathered into scratch (an all-gather, or grouped sends and receives
/// of each peer's block), then combined into the destination by Braid's
/// reduction kernel, all on the comm stream. The source is fully read
/// before the destination is written, so any overlap of the two is fine.
void issueGatheredReduction(RankState &state, Request &request,
                            const std::string &context) {
  const CudaGroup &group = *request.group;
  int n = group.size, me = group.position;
  int64_t blockBytes = request.count * request.elementSize;
  void *gathered = nullptr;
  checkCuda(cudaMallocAsync(&gathered,
                            static_cast<size_t>(std::max<int64_t>(
                                blockBytes * static_cast<int64_t>(n), 1)),
                            state.comm),
            "cudaMallocAsync", context);
  auto block = [&](const void *base, int64_t q) {
    return static_cast<const char *>(base) + q * blockBytes;
  };
  if (request.kind == OpKind::AllReduce) {
    checkNccl(ncclAllGather(request.src, gathered,
                            static_cast<size_t>(blockBytes), ncclUint8,
                            group.comm, state.comm),
              "ncclAllGather", context);
  } else {
    // Block q of every peer's source comes to rank q.
    checkNccl(ncclGroupStart(), "ncclGroupStart", context);
    for (int peer = 0; peer < n; ++peer) {
      checkNccl(ncclSend(block(request.src, peer),
                         static_cast<size_t>(blockBytes), ncclUint8, peer,
                         group.comm, state.comm),
                "ncclSend", context);
      checkNccl(ncclRecv(static_cast<char *>(gathered) + peer * blockBytes,
                         static_cast<size_t>(blockBytes), ncclUint8, peer,
                         group.comm, state.comm),
                "ncclRecv", context);
    }
    checkNccl(ncclGroupEnd(), "ncclGroupEnd", context);
  }
  (void)me;
  copyDevice(request.dst, gathered, blockBytes, state.comm, context);
  for (int q = 1; q < n; ++q)
    reduce::into(request.dst, block(gathered, q), request.count, request.dtype,
                 request.reduction, state.comm, context);
  checkCuda(cudaFreeAsync(gathered, state.comm), "cudaFreeAsync", context);
}

/// Issues one collective request on the comm stream.
void issueCollective(RankState &state, Request &request) {
  std::string context = request.context();
  waitReady(state, request);
  EventPtr start;
  traceBegin(state, state.comm, start);
  request.traceStart = start;
  const CudaGroup &group = *request.group;
  ncclComm_t comm = group.comm;
  int n = group.size, me = group.position;
  bool reduces = request.kind == OpKind::ReduceScatter ||
                 request.kind == OpKind::AllReduce;
  if (reduces && !ncclReduces(request)) {
    issueGatheredReduction(state, request, context);
    request.completion = recordEvent(state.comm, state.tracing, context);
    request.traceEnd = request.completion;
    return;
  }

  // NCCL's in-place forms are specific (the rank's block of a gather's
  // destination, ...); any other overlap goes through a scratch copy.
  const void *src = request.src;
  int64_t srcBytes = request.sourceBytes();
  bool inPlace = false;
  switch (request.kind) {
  case OpKind::AllGather:
    inPlace = request.src == static_cast<char *>(request.dst) +
                                 static_cast<int64_t>(me) * request.bytes;
    break;
  case OpKind::ReduceScatter:
    inPlace = request.dst == static_cast<const char *>(request.src) +
                                 static_cast<int64_t>(me) * request.count *
                                     request.elementSize;
    break;
  case OpKind::AllReduce:
    inPlace = request.src == request.dst;
    break;
  case OpKind::Broadcast:
    // Only the root's source is read (and valid): a non-root passes its
    // destination, which NCCL ignores as a source there.
    if (me != request.root)
      src = request.dst;
    inPlace = src == request.dst;
    break;
  default:
    break;
  }
  void *scratch = nullptr;
  if (!inPlace && src &&
      overlaps(src, srcBytes, request.dst, request.destinationBytes())) {
    checkCuda(
        cudaMallocAsync(&scratch, static_cast<size_t>(srcBytes), state.comm),
        "cudaMallocAsync", context);
    checkCuda(cudaMemcpyAsync(scratch, src, static_cast<size_t>(srcBytes),
                              cudaMemcpyDeviceToDevice, state.comm),
              "cudaMemcpyAsync", context);
    src = scratch;
  }

  ncclDataType_t type = ncclUint8;
  ncclRedOp_t op = ncclSum;
  if (request.kind == OpKind::ReduceScatter ||
      request.kind == OpKind::AllReduce) {
    dtypeOf(request.dtype, type);
    opOf(request.reduction, op);
  }
  size_t bytes = static_cast<size_t>(request.bytes);
  switch (request.kind) {
  case OpKind::AllGather:
    checkNccl(
        ncclAllGather(src, request.dst, bytes, ncclUint8, comm, state.comm),
        "ncclAllGather", context);
    break;
  case OpKind::ReduceScatter:
    checkNccl(ncclReduceScatter(src, request.dst,
                                static_cast<size_t>(request.count), type, op,
                                comm, state.comm),
              "ncclReduceScatter", context);
    break;
  case OpKind::AllReduce:
    checkNccl(ncclAllReduce(src, request.dst,
                            static_cast<size_t>(request.count), type, op, comm,
                            state.comm),
              "ncclAllReduce", context);
    break;
  case OpKind::Broadcast:
    checkNccl(ncclBroadcast(src, request.dst, bytes, ncclUint8,
                            static_cast<int>(request.root), comm, state.comm),
              "ncclBroadcast", context);
    break;
  case OpKind::AllToAll: {
    checkNccl(ncclGroupStart(), "ncclGroupStart", context);
    for (int peer = 0; peer < n; ++peer) {
      checkNccl(ncclSend(static_cast<const char *>(src) +
                             static_cast<int64_t>(peer) * request.bytes,
                         bytes, ncclUint8, peer, comm, state.comm),
                "ncclSend", context);
      checkNccl(ncclRecv(static_cast<char *>(request.dst) +
                             static_cast<int64_t>(peer) * request.bytes,
                         bytes, ncclUint8, peer, comm, state.comm),
                "ncclRecv", context);
    }
    checkNccl(ncclGroupEnd(), "ncclGroupEnd", context);
    break;
  }
  default: // Point-to-point requests are issued by flush().
    break;
  }
  if (scratch)
    checkCuda(cudaFreeAsync(scratch, state.comm), "cudaFreeAsync", context);
  request.completion = recordEvent(state.comm, state.tracing, context);
  request.traceEnd = request.completion;
}

} // namespace

void initWorld(RankState &state, bool useMPI, MPI_Comm mpiWorld) {
  const char *context = "braid_rt_init";
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  const char *idFile = std::getenv("BRAID_NCCL_ID_FILE");
  if (state.rank == 0)
    checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId", context);
  if (useMPI) {
    checkMPI(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpiWorld), "MPI_Bcast",
             "braid_rt_init (the NCCL id)");
  } else if (state.rank == 0) {
    writeIdFile(idFile, id);
  } else {
    id = readIdFile(idFile);
  }
  checkNccl(ncclCommInitRank(&state.world, state.worldSize, id, state.rank),
            "ncclCommInitRank", context);
  remember(state.world);
  // Every rank has joined, so all have read the file: a later job with the
  // same path cannot pick up this one's id.
  if (!useMPI && state.rank == 0)
    std::remove(idFile);
}

void adoptWorld(RankState &state, ncclComm_t comm) {
  state.world = comm;
  // A fatal error aborts it with the runtime's own: the host's peers
  // waiting in it must not hang either.
  remember(state.world);
}

void createGroupComm(RankState &state, CudaGroup &group) {
  std::string context = "braid_rt_group (" + group.str() + ")";
  flush(state);
  checkNccl(ncclCommSplit(state.world, static_cast<int>(group.color),
                          group.position, &group.comm, nullptr),
            "ncclCommSplit", context);
  remember(group.comm);
  int rank = -1, count = -1;
  checkNccl(ncclCommUserRank(group.comm, &rank), "ncclCommUserRank", context);
  checkNccl(ncclCommCount(group.comm, &count), "ncclCommCount", context);
  if (rank != group.position || count != group.size)
    fatalf("%s: ncclCommSplit made rank %d of %d, expected position %d of %d "
           "(do all ranks use the same grid?)",
           context.c_str(), rank, count, group.position, group.size);
}

void post(RankState &state, std::unique_ptr<Request> request) {
  Request &r = *request;
  int64_t handle = r.handle;
  Request *raw = request.get();
  state.requests.emplace(handle, std::move(request));
  if (raw->kind == OpKind::Send || raw->kind == OpKind::Recv) {
    state.queued.push_back(raw);
    return;
  }
  // Collectives keep program order with the queued point-to-point calls.
  flush(state);
  issueCollective(state, *raw);
}

void flush(RankState &state) {
  if (state.queued.empty())
    return;
  std::vector<Request *> batch;
  batch.swap(state.queued);
  std::string context = batch.front()->context();
  // Ready events are recorded on the compute stream in posting order: the
  // last one covers them all.
  waitReady(state, *batch.back());
  EventPtr start;
  traceBegin(state, state.comm, start);
  checkNccl(ncclGroupStart(), "ncclGroupStart", context);
  for (Request *request : batch) {
    if (request->bytes == 0)
      continue;
    if (request->kind == OpKind::Send)
      checkNccl(ncclSend(request->src, static_cast<size_t>(request->bytes),
                         ncclUint8, request->peerPosition, request->group->comm,
                         state.comm),
                "ncclSend", request->context());
    else
      checkNccl(ncclRecv(request->dst, static_cast<size_t>(request->bytes),
                         ncclUint8, request->peerPosition, request->group->comm,
                         state.comm),
                "ncclRecv", request->context());
  }
  checkNccl(ncclGroupEnd(), "ncclGroupEnd", context);
  EventPtr done = recordEvent(state.comm, state.tracing, context);
  for (Request *request : batch) {
    request->completion = done;
    request->traceStart = start;
    request->traceEnd = done;
  }
}

void wait(RankState &state, std::unique_ptr<Request> request) {
  flush(state);
  // The overlap: the host goes on; only the compute stream waits.
  orderAfter(state, *request);
  state.inFlight.push_back(std::move(request));
}

void checkAsyncErrors(RankState &state, const std::string &context) {
  auto check = [&](ncclComm_t comm, const std::string &which) {
    if (!comm)
      return;
    ncclResult_t result = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm, &result);
    if (rc != ncclSuccess)
      result = rc;
    if (result == ncclSuccess || result == ncclInProgress)
      return;
    // Name the oldest transfer not yet complete.
    std::string culprit = which;
    for (auto &request : state.inFlight)
      if (request->completion &&
          cudaEventQuery(request->completion->event) == cudaErrorNotReady) {
        culprit = request->context();
        break;
      }
    const char *last = ncclGetLastError(comm);
    fatalf("%s: NCCL error in %s: %s%s%s", culprit.c_str(), context.c_str(),
           ncclGetErrorString(result), last && *last ? ": " : "",
           last ? last : "");
  };
  check(state.world, "the world communicator");
  for (auto &group : state.groups)
    check(group->comm, "group " + group->str());
}

void barrier(RankState &state) {
  // The device work before the barrier is done on every rank once an
  // all-reduce issued after it completed everywhere.
  synchronizeRank(state, "braid_rt_barrier");
  checkNccl(ncclAllReduce(state.scratch, state.scratch, 1, ncclInt32, ncclSum,
                          state.world, state.comm),
            "ncclAllReduce", "braid_rt_barrier");
  synchronizeRank(state, "braid_rt_barrier");
}

void hostMax(RankState &state, double *values, int64_t count) {
  const char *context = "braid_rt_host_max";
  synchronizeRank(state, context);
  // Both copies go on the comm stream with the all-reduce: a synchronous
  // cudaMemcpy runs on the legacy default stream, which the non-blocking
  // comm stream is not ordered after, so the all-reduce could read the
  // buffer before the values arrived (and the copy back read it early).
  size_t bytes = static_cast<size_t>(count) * sizeof(double);
  void *device = nullptr;
  checkCuda(cudaMallocAsync(&device, bytes, state.comm), "cudaMallocAsync",
            context);
  checkCuda(cudaMemcpyAsync(device, values, bytes, cudaMemcpyHostToDevice,
                            state.comm),
            "cudaMemcpyAsync", context);
  checkNccl(ncclAllReduce(device, device, static_cast<size_t>(count),
                          ncclFloat64, ncclMax, state.world, state.comm),
            "ncclAllReduce", context);
  checkCuda(cudaMemcpyAsync(values, device, bytes, cudaMemcpyDeviceToHost,
                            state.comm),
            "cudaMemcpyAsync", context);
  checkCuda(cudaFreeAsync(device, state.comm), "cudaFreeAsync", context);
  synchronizeRank(state, context);
}

void destroyComms(RankState &state) {
  const char *context = "braid_rt_finalize";
  {
    std::lock_guard<std::mutex> lock(commsMutex);
    allComms.clear();
  }
  for (auto &group : state.groups)
    if (group->comm) {
      checkNccl(ncclCommDestroy(group->comm), "ncclCommDestroy", context);
      group->comm = nullptr;
    }
  if (state.world && !state.hostOwned)
    checkNccl(ncclCommDestroy(state.world), "ncclCommDestroy", context);
  state.world = nullptr;
}

void abortAll() {
  // Called by fatal(), possibly while another thread holds the mutex: try
  // once rather than hang.
  std::unique_lock<std::mutex> lock(commsMutex, std::try_to_lock);
  if (!lock.owns_lock())
    return;
  for (ncclComm_t comm : allComms)
    (void)ncclCommAbort(comm);
  allComms.clear();
}

} // namespace braid::rt::cuda::nccl
