//===- FakeNccl.cpp - A host-only libnccl for the runtime's tests ---------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// NCCL for one rank: every communicator has one member, so a collective is
// a copy and a grouped send to oneself meets the receive of the same group
// (in order). Buffers must be device memory of the fake libcudart; a world
// of more than one rank is refused with ncclInvalidUsage and a last-error
// message saying so. Enough for the cuda runtime's NCCL transport to run
// its control flow (bootstrap, groups, grouped point-to-point, collectives
// and their fallbacks, symmetric windows) without a GPU.
//
//===----------------------------------------------------------------------===//

#include "FakeCuda.h"

#include <nccl.h>
#include <nccl_device/impl/core__types.h>

#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Comm {
  std::string lastError;
};

struct PointToPoint {
  bool send;
  void *buffer;
  size_t bytes;
  int peer;
  cudaStream_t stream;
};

thread_local int groupDepth = 0;
thread_local std::vector<PointToPoint> grouped;
thread_local std::string lastError;

size_t typeBytes(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
  case ncclFloat8e4m3:
  case ncclFloat8e5m2:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

bool onDevice(const void *p, size_t bytes) {
  if (bytes == 0)
    return true;
  const char *what = braidFakeMemory(p, bytes);
  return what && std::strcmp(what, "host") != 0;
}

ncclResult_t fail(const std::string &why) {
  lastError = why;
  braidFakeLog("nccl: %s", why.c_str());
  return ncclInvalidArgument;
}

/// A one-rank collective: `bytes` from send to recv.
ncclResult_t copy(const char *call, const void *send, void *recv, size_t bytes,
                  cudaStream_t stream) {
  braidFakeLog("%s %zu B on %s", call, bytes, braidFakeStreamName(stream));
  if (!onDevice(send, bytes) || !onDevice(recv, bytes))
    return fail(std::string(call) + ": a buffer is not device memory");
  if (!braidFakeStreamStuck(stream) && bytes && send != recv)
    std::memmove(recv, send, bytes);
  return ncclSuccess;
}

ncclResult_t flushGroup() {
  std::vector<PointToPoint> sends, recvs;
  for (PointToPoint &p : grouped)
    (p.send ? sends : recvs).push_back(p);
  grouped.clear();
  if (sends.size() != recvs.size())
    return fail("a send without its receive (or the reverse) in a group of "
                "one rank would hang");
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i].bytes != recvs[i].bytes)
      return fail("a send and its receive differ in size");
    ncclResult_t rc = copy("ncclSend/ncclRecv", sends[i].buffer,
                           recvs[i].buffer, sends[i].bytes, recvs[i].stream);
    if (rc != ncclSuccess)
      return rc;
  }
  return ncclSuccess;
}

ncclResult_t pointToPoint(bool send, const void *buffer, size_t count,
                          ncclDataType_t type, int peer, cudaStream_t stream) {
  if (peer != 0)
    return fail("peer " + std::to_string(peer) + " in a world of one rank");
  grouped.push_back({send, const_cast<void *>(buffer), count * typeBytes(type),
                     peer, stream});
  return groupDepth > 0 ? ncclSuccess : flushGroup();
}

} // namespace

FAKE_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  default:
    return "unhandled system error";
  }
}

FAKE_EXPORT const char *ncclGetLastError(ncclComm_t) {
  return lastError.c_str();
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::strcpy(id->internal, "braid-fake-nccl");
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                          ncclUniqueId id, int rank) {
  if (std::strcmp(id.internal, "braid-fake-nccl") != 0)
    return fail("not an id of the fake NCCL");
  if (nranks != 1 || rank != 0) {
    lastError = "the fake NCCL of Braid's tests runs worlds of one rank only";
    return ncclInvalidUsage;
  }
  braidFakeLog("ncclCommInitRank: a world of 1 rank");
  *comm = reinterpret_cast<ncclComm_t>(new Comm());
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int, int key,
                                       ncclComm_t *newcomm, ncclConfig_t *) {
  if (!comm || key != 0)
    return fail("ncclCommSplit: bad communicator or key");
  *newcomm = reinterpret_cast<ncclComm_t>(new Comm());
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t, int *rank) {
  *rank = 0;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t, int *count) {
  *count = 1;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete reinterpret_cast<Comm *>(comm);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t) { return ncclSuccess; }

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t,
                                               ncclResult_t *error) {
  *error = ncclSuccess;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return fail("ncclGroupEnd without ncclGroupStart");
  return --groupDepth > 0 ? ncclSuccess : flushGroup();
}

FAKE_EXPORT ncclResult_t ncclSend(const void *buffer, size_t count,
                                  ncclDataType_t type, int peer, ncclComm_t,
                                  cudaStream_t stream) {
  return pointToPoint(true, buffer, count, type, peer, stream);
}

FAKE_EXPORT ncclResult_t ncclRecv(void *buffer, size_t count,
                                  ncclDataType_t type, int peer, ncclComm_t,
                                  cudaStream_t stream) {
  return pointToPoint(false, buffer, count, type, peer, stream);
}

FAKE_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       ncclComm_t, cudaStream_t stream) {
  return copy("ncclAllGather", send, recv, count * typeBytes(type), stream);
}

FAKE_EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv,
                                           size_t count, ncclDataType_t type,
                                           ncclRedOp_t, ncclComm_t,
                                           cudaStream_t stream) {
  return copy("ncclReduceScatter", send, recv, count * typeBytes(type), stream);
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       ncclRedOp_t, ncclComm_t,
                                       cudaStream_t stream) {
  return copy("ncclAllReduce", send, recv, count * typeBytes(type), stream);
}

FAKE_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv,
                                       size_t count, ncclDataType_t type,
                                       int root, ncclComm_t,
                                       cudaStream_t stream) {
  if (root != 0)
    return fail("root " + std::to_string(root) + " in a world of one rank");
  return copy("ncclBroadcast", send, recv, count * typeBytes(type), stream);
}

FAKE_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  braidFakeLog("ncclMemAlloc %zu B", size);
  return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclSystemError;
}

FAKE_EXPORT ncclResult_t ncclMemFree(void *ptr) {
  return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t, void *buffer,
                                                size_t size, ncclWindow_t *win,
                                                int flags) {
  if (!onDevice(buffer, size))
    return fail("ncclCommWindowRegister: not device memory");
  braidFakeLog("ncclCommWindowRegister %zu B (flags %d)", size, flags);
  // The window's fields in device memory, as NCCL keeps them: the only
  // member's copy is the buffer itself.
  void *fields = nullptr;
  if (cudaMalloc(&fields, sizeof(ncclWindow_vidmem)) != cudaSuccess)
    return ncclSystemError;
  ncclWindow_vidmem window{};
  window.lsaFlatBase = static_cast<char *>(buffer);
  window.stride4G = 1;
  std::memcpy(fields, &window, sizeof(window));
  *win = static_cast<ncclWindow_t>(fields);
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t,
                                                  ncclWindow_t win) {
  return cudaFree(win) == cudaSuccess ? ncclSuccess : ncclInvalidArgument;
}

FAKE_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t) { return {1, 0, 1}; }
FAKE_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t) { return {1, 0, 1}; }
FAKE_EXPORT int ncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int rank) {
  return rank;
}
