//===- OneSided.cpp - Symmetric memory, puts and counting flags -----------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Symmetric memory on CUDA: the one-sided half of the cuda backend's
// Transport under Front.cpp's entry points (braid_rt_symmetric_alloc/free,
// and what xfer.symmetric_alloc, xfer.put, xfer.signal and
// xfer.signal_wait lower to):
//
// - a site is a persistent buffer per (group, site): ncclMemAlloc and an NCCL
//   symmetric window, whose peers' copies are read once from the window into
//   plain device addresses; on the loopback transport, one cudaMalloc per
//   rank, the ranks exchanging their addresses;
// - a put is a copy-engine copy into the peer's copy on the comm stream,
//   after the compute stream's work so far, followed by the raise of the
//   peer's flag;
// - a raise is a one-thread kernel doing red.release.sys.global.add: flags
//   count, and several peers may raise one flag, which cuStreamWriteValue32
//   (an absolute store) could not express;
// - a wait is cuStreamWaitValue32 (GEQ, which CUDA defines as a wrapping
//   comparison) on the compute stream; the host never blocks, and a
//   synchronization that times out names the first wait still blocking,
//   with the epoch expected and the value the flag holds.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "Driver.h"

// The layout of NCCL's window (peer addresses), from NCCL's own header.
#include <nccl_device/impl/core__types.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

using namespace braid::rt;
using namespace braid::rt::cuda;

namespace {

/// flag[0] += value, with release semantics at system scope: the raiser's
/// earlier writes (the put's copy, ordered before it on its stream) are
/// visible to a peer whose acquiring wait sees the new value.
const char *const signalKernelPtx = R"PTX(
.version 7.0
.target sm_70
.address_size 64

.visible .entry braid_signal_add(
  .param .u64 flag_param,
  .param .u32 value_param)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<3>;

  ld.param.u64 %rd1, [flag_param];
  ld.param.u32 %r1, [value_param];
  cvta.to.global.u64 %rd2, %rd1;
  red.release.sys.global.add.u32 [%rd2], %r1;
  ret;
}
)PTX";

CUfunction signalKernel() {
  static std::mutex mutex;
  static CUfunction function = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!function) {
    const char *context = "loading the signal kernel";
    CUmodule module = nullptr;
    checkDriver(driver().moduleLoadData(&module, signalKernelPtx),
                "cuModuleLoadData", context);
    checkDriver(
        driver().moduleGetFunction(&function, module, "braid_signal_add"),
        "cuModuleGetFunction", context);
  }
  return function;
}

void raise(char *flag, uint32_t value, cudaStream_t stream,
           const std::string &context) {
  void *flagArg = flag;
  void *params[] = {&flagArg, &value};
  checkDriver(driver().launchKernel(signalKernel(), 1, 1, 1, 1, 1, 1, 0,
                                    reinterpret_cast<CUstream>(stream), params,
                                    nullptr),
              "cuLaunchKernel (the signal kernel)", context);
}

/// Zero-fills a new site before any peer can learn its address.
void zeroFill(char *p, size_t bytes, const std::string &context) {
  cudaStream_t stream = nullptr;
  checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags", context);
  checkDriver(driver().memsetD32Async(reinterpret_cast<CUdeviceptr>(p), 0,
                                      bytes / 4,
                                      reinterpret_cast<CUstream>(stream)),
              "cuMemsetD32Async", context);
  checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize", context);
  checkCuda(cudaStreamDestroy(stream), "cudaStreamDestroy", context);
}

/// A symmetric buffer's memory: at least `bytes`, rounded to NCCL's window
/// alignment, zero-filled with `zero` (before any peer can learn its
/// address), registered as a symmetric window on NCCL.
struct WindowMemory {
  char *data = nullptr;
  ncclWindow_t window = nullptr; ///< Null on the loopback transport.
};

WindowMemory allocateWindow(RankState &state, const CudaGroup &g, int64_t bytes,
                            bool zero, const std::string &context) {
  size_t size = (static_cast<size_t>(std::max<int64_t>(bytes, 1)) +
                 NCCL_WIN_REQUIRED_ALIGNMENT - 1) /
                NCCL_WIN_REQUIRED_ALIGNMENT * NCCL_WIN_REQUIRED_ALIGNMENT;
  void *memory = nullptr;
  if (isLoopback()) {
    // One process: every rank's memory is already the others' to read.
    checkCuda(cudaMalloc(&memory, size), "cudaMalloc", context);
  } else {
    cuda::nccl::flush(state);
    checkNccl(ncclMemAlloc(&memory, size), "ncclMemAlloc", context);
  }
  WindowMemory result;
  result.data = static_cast<char *>(memory);
  if (zero)
    zeroFill(result.data, size, context);
  if (!isLoopback())
    checkNccl(ncclCommWindowRegister(g.comm, memory, size, &result.window,
                                     NCCL_WIN_COLL_SYMMETRIC),
              "ncclCommWindowRegister", context);
  return result;
}

void freeWindow(const CudaGroup &g, const WindowMemory &memory,
                const std::string &context) {
  if (memory.window) {
    checkNccl(ncclCommWindowDeregister(g.comm, memory.window),
              "ncclCommWindowDeregister", context);
    checkNccl(ncclMemFree(memory.data), "ncclMemFree", context);
  } else {
    checkCuda(cudaFree(memory.data), "cudaFree", context);
  }
}

/// Every member's copy of an NCCL symmetric window, by group position.
std::vector<char *> windowPeers(const CudaGroup &g, ncclWindow_t window,
                                char *local, int64_t site,
                                const std::string &context) {
  ncclTeam_t lsa = ncclTeamLsa(g.comm);
  if (lsa.nRanks < g.size)
    fatalf("%s: only %d of the group's %d ranks share memory with this one "
           "(NCCL's LSA team: one NVLink domain); compile with "
           "--comm=two-sided for this group",
           context.c_str(), lsa.nRanks, g.size);
  ncclWindow_vidmem fields{};
  checkCuda(cudaMemcpy(&fields, window, sizeof(fields), cudaMemcpyDefault),
            "cudaMemcpy (reading the window's peer addresses)", context);
  ncclTeam_t world = ncclTeamWorld(g.comm);
  std::vector<char *> peers(static_cast<size_t>(g.size));
  for (int p = 0; p < g.size; ++p) {
    // As ncclGetLsaPointer computes it: the copies lie stride4G * 4 GiB
    // apart from the LSA team's first.
    int lsaRank = ncclTeamRankToLsa(g.comm, world, p);
    uint64_t base = reinterpret_cast<uint64_t>(fields.lsaFlatBase);
    base += (static_cast<uint64_t>(static_cast<uint32_t>(lsaRank) *
                                   fields.stride4G))
            << 32;
    peers[static_cast<size_t>(p)] = reinterpret_cast<char *>(base);
  }
  if (peers[static_cast<size_t>(g.position)] != local)
    fatalf("%s: NCCL's window for site %lld is not symmetric: this rank's "
           "copy is at %p, the window places it at %p",
           context.c_str(), static_cast<long long>(site),
           static_cast<void *>(local),
           static_cast<void *>(peers[static_cast<size_t>(g.position)]));
  return peers;
}

/// The site of `group` (any group when 0) holding [addr, addr + bytes), or
/// null.
RankState::Site *findSite(RankState &state, int64_t group, int64_t addr,
                          int64_t bytes) {
  auto *p = reinterpret_cast<char *>(addr);
  for (auto &entry : state.sites) {
    RankState::Site &site = entry.second;
    if ((group == 0 || site.group == group) && p >= site.local && bytes >= 0 &&
        p + bytes <= site.local + site.bytes)
      return &site;
  }
  return nullptr;
}

/// The site holding the flag at `flag`; aborts naming `call` otherwise.
RankState::Site &flagSite(RankState &state, void *flag, int64_t step,
                          const char *call) {
  RankState::Site *site =
      findSite(state, 0, reinterpret_cast<int64_t>(flag), 4);
  if (!site)
    fatalf("%s (step %lld): the flag at %p lies in no symmetric buffer", call,
           static_cast<long long>(step), flag);
  return *site;
}

char *peerAddress(const RankState::Site &site, int position, int64_t addr) {
  return site.peers[static_cast<size_t>(position)] +
         (reinterpret_cast<char *>(addr) - site.local);
}

std::string siteText(const RankState::Site &site, const CudaGroup &g) {
  return formatString("site %lld on group %s",
                      static_cast<long long>(site.site), g.str().c_str());
}

} // namespace

void *CudaTransport::symmetricAllocate(int64_t group, int64_t bytes,
                                       int64_t site, const char *call) {
  RankState &state = currentRank(call);
  const CudaGroup &g = getGroup(state, group, call);
  if (site < 0) {
    std::string context =
        formatString("%s (%s on group %s)", call, formatBytes(bytes).c_str(),
                     g.str().c_str());
    WindowMemory memory =
        allocateWindow(state, g, bytes, /*zero=*/false, context);
    RankState::SymmetricBuffer record;
    record.group = group;
    record.window = memory.window;
    state.symmetric.emplace(memory.data, record);
    return memory.data;
  }
  auto key = std::make_pair(group, site);
  auto found = state.sites.find(key);
  if (found != state.sites.end()) {
    if (found->second.bytes != bytes)
      fatalf("%s: site %lld of group %s has %s, not %s (two programs of this "
             "process disagree on it)",
             call, static_cast<long long>(site), g.str().c_str(),
             formatBytes(found->second.bytes).c_str(),
             formatBytes(bytes).c_str());
    return found->second.local;
  }
  RankState::Site record;
  record.group = group;
  record.site = site;
  record.bytes = bytes;
  std::string context = formatString(
      "%s (site %lld: %s on group %s)", call, static_cast<long long>(site),
      formatBytes(bytes).c_str(), g.str().c_str());
  WindowMemory memory = allocateWindow(state, g, bytes, /*zero=*/true, context);
  record.local = memory.data;
  record.window = memory.window;
  record.peers =
      memory.window ? windowPeers(g, memory.window, record.local, site, context)
                    : loopback::exchangeSite(g, site, record.local);
  state.sites.emplace(key, std::move(record));
  return memory.data;
}

void CudaTransport::symmetricFree(int64_t group, void *buffer,
                                  const char *call) {
  RankState &state = currentRank(call);
  const CudaGroup &g = getGroup(state, group, call);
  auto found = state.symmetric.find(buffer);
  if (found == state.symmetric.end() || found->second.group != group)
    fatalf("%s: %p is not a symmetric buffer of group %s (from "
           "braid_rt_symmetric_alloc)",
           call, buffer, g.str().c_str());
  // Device work may still read or write it.
  synchronizeRank(state, call);
  freeWindow(g, {static_cast<char *>(buffer), found->second.window},
             std::string(call) + " (group " + g.str() + ")");
  state.symmetric.erase(found);
}

void *CudaTransport::symmetricPeer(int64_t group, const void *addr,
                                   int64_t bytes, int position, int64_t step,
                                   const char *call, const char *what) {
  RankState &state = currentRank(call);
  int64_t address = reinterpret_cast<int64_t>(addr);
  RankState::Site *site = findSite(state, group, address, bytes);
  if (!site)
    fatalf("%s (step %lld): %s (%s at %p) is not inside a symmetric buffer of "
           "group %s",
           call, static_cast<long long>(step), what,
           formatBytes(std::max<int64_t>(bytes, 1)).c_str(), addr,
           getGroup(state, group, call).str().c_str());
  return peerAddress(*site, position, address);
}

int64_t CudaTransport::put(const Transfer &transfer) {
  RankState &state = currentRank("braid_rt_put");
  auto request = std::make_unique<Request>();
  static_cast<Transfer &>(*request) = transfer;
  request->group = static_cast<const CudaGroup *>(transfer.layout);
  request->ownerRank = state.rank;
  request->handle = state.nextHandle++;
  std::string context = request->context();
  // The source is written once the compute stream gets here.
  request->ready = recordEvent(state.compute, false, context + " (posting)");
  checkCuda(cudaStreamWaitEvent(state.comm, request->ready->event, 0),
            "cudaStreamWaitEvent", context);
  traceBegin(state, state.comm, request->traceStart);
  copyDevice(request->dst, request->src, request->bytes, state.comm, context);
  if (request->flag)
    raise(static_cast<char *>(request->flag), 1, state.comm, context);
  request->completion = recordEvent(state.comm, state.tracing, context);
  request->traceEnd = request->completion;
  int64_t handle = request->handle;
  state.requests.emplace(handle, std::move(request));
  return handle;
}

void CudaTransport::signalAdd(int64_t group, int position, void *peerFlag,
                              uint32_t value, int64_t step) {
  const char *call = "braid_rt_signal_add";
  RankState &state = currentRank(call);
  const CudaGroup &g = getGroup(state, group, call);
  std::string context = formatString(
      "signal step %lld (to peer %d)", static_cast<long long>(step),
      g.worldRanks[static_cast<size_t>(position)]);
  // After everything this rank did before, on its compute stream.
  EventPtr start;
  traceBegin(state, state.compute, start);
  raise(static_cast<char *>(peerFlag), value, state.compute, context);
  state.lastCompute = context;
  int offset = (position - g.position + g.size) % g.size;
  traceEnd(state, state.compute, start, Track::Compute,
           formatString("signal step %lld -> %+d", static_cast<long long>(step),
                        offset));
}

uint32_t &CudaTransport::waitsOn(void *flag, int64_t step, const char *call) {
  RankState &state = currentRank(call);
  flagSite(state, flag, step, call);
  return state.flagWaits[reinterpret_cast<uint64_t>(flag)];
}

void CudaTransport::signalWaitUntil(void *flag, uint32_t epoch, int64_t step) {
  const char *call = "braid_rt_signal_wait_next";
  RankState &state = currentRank(call);
  int64_t address = reinterpret_cast<int64_t>(flag);
  RankState::Site &site = flagSite(state, flag, step, call);
  const CudaGroup &g = getGroup(state, site.group, call);
  RankState::SignalWait wait;
  wait.flag = static_cast<uint64_t>(address);
  wait.epoch = epoch;
  wait.what = formatString(
      "signal_wait step %lld (flag %lld of %s, epoch %u)",
      static_cast<long long>(step),
      static_cast<long long>((static_cast<char *>(flag) - site.local) / 4),
      siteText(site, g).c_str(), epoch);
  EventPtr start;
  traceBegin(state, state.compute, start);
  checkDriver(
      driver().streamWaitValue32(reinterpret_cast<CUstream>(state.compute),
                                 static_cast<CUdeviceptr>(address), epoch,
                                 CU_STREAM_WAIT_VALUE_GEQ),
      "cuStreamWaitValue32", wait.what);
  wait.passed = recordEvent(state.compute, false, wait.what);
  state.lastCompute = wait.what;
  traceEnd(state, state.compute, start, Track::Compute, wait.what);
  // Those already passed need no naming.
  while (!state.signalWaits.empty() &&
         cudaEventQuery(state.signalWaits.front().passed->event) == cudaSuccess)
    state.signalWaits.pop_front();
  state.signalWaits.push_back(std::move(wait));
}

namespace braid::rt::cuda::oneSided {

void releaseSites(RankState &state) {
  if (state.sites.empty())
    return;
  const char *context = "braid_rt_finalize (freeing symmetric buffers)";
  // The peers' last raises and puts may still target this rank's copies.
  if (isLoopback())
    loopback::hostBarrier(context);
  else
    cuda::nccl::barrier(state);
  for (auto &entry : state.sites) {
    RankState::Site &site = entry.second;
    freeWindow(getGroup(state, site.group, context), {site.local, site.window},
               context);
  }
  state.sites.clear();
  state.flagWaits.clear();
  state.signalWaits.clear();
}

void reportStalledWait(RankState &state, double timeout,
                       const std::string &context) {
  for (const RankState::SignalWait &wait : state.signalWaits) {
    if (cudaEventQuery(wait.passed->event) != cudaErrorNotReady)
      continue;
    // The flag's value, read past the blocked streams.
    std::string seen = "unreadable";
    cudaStream_t stream = nullptr;
    uint32_t value = 0;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
        cudaSuccess) {
      if (cudaMemcpyAsync(&value, reinterpret_cast<void *>(wait.flag),
                          sizeof(value), cudaMemcpyDefault,
                          stream) == cudaSuccess) {
        auto deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(1);
        cudaError_t rc;
        while ((rc = cudaStreamQuery(stream)) == cudaErrorNotReady &&
               std::chrono::steady_clock::now() < deadline)
          std::this_thread::yield();
        if (rc == cudaSuccess)
          seen = formatString("%u", value);
      }
      cudaStreamDestroy(stream);
    }
    fatalf("%s: timed out after %g s in %s: the flag holds %s, expected at "
           "least %u (the peer that raises it never got there)",
           wait.what.c_str(), timeout, context.c_str(), seen.c_str(),
           wait.epoch);
  }
}

} // namespace braid::rt::cuda::oneSided
