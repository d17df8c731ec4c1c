//===- Loopback.cpp - N logical ranks on one GPU in one process -----------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A measurement transport, not an engine: NCCL refuses two ranks on one
// GPU, so to time a multi-rank program on a single GPU, each rank becomes a
// thread with its own streams and transfers become device-to-device copies.
// Sends and receives meet in a mailbox per (group, source position,
// destination position), first in first out; the thread that completes a
// match issues the copy on the receiver's comm stream after both sides'
// ready events, and both requests share its completion event. Collectives
// meet likewise (the n-th collective of each member of a group), and the
// last member to arrive issues all copies (and, for reductions, the
// elementwise reduction kernels of Reduce.cpp, every kind the ABI has) on
// its own comm stream.
//
// Copies use the copy engine (cudaMemcpyAsync) unless
// BRAID_LOOPBACK_COPY=sm, which uses the small SM copy kernel below, closer
// to what NCCL's kernels cost in SM time.
//
//===----------------------------------------------------------------------===//

#include "CudaRuntime.h"
#include "Driver.h"
#include "Reduce.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace braid::rt::cuda::loopback {

namespace {

/// copy(dst, src, vectors, bytes): 16-byte vectors [0, vectors), then the
/// bytes [16 * vectors, bytes) one by one, in a grid-stride loop.
const char *const copyKernelPtx = R"PTX(
.version 7.0
.target sm_75
.address_size 64

.visible .entry braid_loopback_copy(
  .param .u64 dst_param,
  .param .u64 src_param,
  .param .u64 vectors_param,
  .param .u64 bytes_param)
{
  .reg .pred %p<3>;
  .reg .b16 %rs<2>;
  .reg .b32 %r<9>;
  .reg .b64 %rd<13>;

  ld.param.u64 %rd1, [dst_param];
  ld.param.u64 %rd2, [src_param];
  ld.param.u64 %rd3, [vectors_param];
  ld.param.u64 %rd4, [bytes_param];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mul.wide.u32 %rd5, %r1, %r2;
  cvt.u64.u32 %rd6, %r3;
  add.u64 %rd5, %rd5, %rd6;
  mul.wide.u32 %rd7, %r4, %r2;
  mov.u64 %rd8, %rd5;
VECTORS:
  setp.ge.u64 %p1, %rd8, %rd3;
  @%p1 bra TAIL_START;
  shl.b64 %rd9, %rd8, 4;
  add.u64 %rd10, %rd2, %rd9;
  ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd10];
  add.u64 %rd11, %rd1, %rd9;
  st.global.v4.u32 [%rd11], {%r5, %r6, %r7, %r8};
  add.u64 %rd8, %rd8, %rd7;
  bra VECTORS;
TAIL_START:
  shl.b64 %rd12, %rd3, 4;
  add.u64 %rd8, %rd12, %rd5;
TAIL:
  setp.ge.u64 %p2, %rd8, %rd4;
  @%p2 bra DONE;
  add.u64 %rd10, %rd2, %rd8;
  ld.global.u8 %rs1, [%rd10];
  add.u64 %rd11, %rd1, %rd8;
  st.global.u8 [%rd11], %rs1;
  add.u64 %rd8, %rd8, %rd7;
  bra TAIL;
DONE:
  ret;
}
)PTX";

/// (group key..., color, a, b): a mailbox's (source, destination)
/// positions, or a collective's sequence number and -1.
using MailKey = std::array<int64_t, std::tuple_size<GroupKey>::value + 3>;

struct Mailbox {
  std::deque<Request *> sends, recvs;
};

struct World {
  int size = 0;
  bool smCopy = false;
  CUfunction copyKernel = nullptr;

  std::mutex mutex;
  std::condition_variable changed;
  std::vector<RankState *> ranks;
  std::map<MailKey, Mailbox> mail;
  std::map<MailKey, std::vector<Request *>> rendezvous;
  int64_t barrierArrived = 0;
  int64_t barrierGeneration = 0;
  std::vector<std::vector<double>> maxSlots;
  std::vector<std::string> traceSlots;
  /// Symmetric sites: every member's copy by position, as they publish.
  std::map<MailKey, std::vector<char *>> sites;
};

World &world() {
  static World *instance = new World();
  return *instance;
}

MailKey mailKey(const CudaGroup &group, int64_t a, int64_t b) {
  MailKey key{};
  std::copy(group.key.begin(), group.key.end(), key.begin());
  key[group.key.size()] = group.color;
  key[group.key.size() + 1] = a;
  key[group.key.size() + 2] = b;
  return key;
}

/// Waits on `changed` until `done`, aborting with `what` after the timeout.
template <typename Predicate>
void waitWithTimeout(std::unique_lock<std::mutex> &lock, Predicate done,
                     const std::string &what) {
  double timeout = timeoutSeconds();
  if (timeout > 1e9) {
    world().changed.wait(lock, done);
    return;
  }
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(timeout));
  if (!world().changed.wait_until(lock, deadline, done)) {
    lock.unlock();
    fatalf("timed out after %g s waiting for %s", timeout, what.c_str());
  }
}

bool overlaps(const void *a, int64_t aBytes, const void *b, int64_t bBytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return aBytes > 0 && bBytes > 0 && x < y + static_cast<uintptr_t>(bBytes) &&
         y < x + static_cast<uintptr_t>(aBytes);
}

char *at(void *base, int64_t offset) {
  return static_cast<char *>(base) + offset;
}
const char *at(const void *base, int64_t offset) {
  return static_cast<const char *>(base) + offset;
}

/// Issues a matched send/receive pair (under the world's mutex).
void match(RankState &issuer, Request &send, Request &recv) {
  if (send.bytes != recv.bytes)
    fatalf("%s: received %lld bytes but expected %lld (the sender's message "
           "has a different size)",
           formatString("recv (step %lld, peer %d)",
                        static_cast<long long>(recv.step), recv.peerWorldRank)
               .c_str(),
           static_cast<long long>(send.bytes),
           static_cast<long long>(recv.bytes));
  RankState *receiver = world().ranks[static_cast<size_t>(recv.ownerRank)];
  cudaStream_t stream = receiver->comm;
  std::string context = recv.context();
  checkCuda(cudaStreamWaitEvent(stream, send.ready->event, 0),
            "cudaStreamWaitEvent", context);
  checkCuda(cudaStreamWaitEvent(stream, recv.ready->event, 0),
            "cudaStreamWaitEvent", context);
  EventPtr start;
  traceBegin(issuer, stream, start);
  copyDevice(recv.dst, send.src, recv.bytes, stream, context);
  EventPtr done = recordEvent(stream, issuer.tracing, context);
  for (Request *request : {&send, &recv}) {
    request->completion = done;
    request->traceStart = start;
    request->traceEnd = done;
    request->matched = true;
  }
}

/// Issues a collective every member has posted (under the world's mutex),
/// all on the issuer's comm stream.
void issueCollective(RankState &issuer, std::vector<Request *> &members) {
  Request &first = *members.front();
  std::string context = first.context();
  for (Request *m : members)
    if (m->kind != first.kind || m->bytes != first.bytes ||
        m->count != first.count || m->dtype != first.dtype ||
        m->reduction != first.reduction || m->root != first.root)
      fatalf("%s: the ranks of the group disagree on the collective (rank %d "
             "posted %s)",
             context.c_str(), m->ownerRank, m->context().c_str());
  cudaStream_t stream = issuer.comm;
  for (Request *m : members)
    checkCuda(cudaStreamWaitEvent(stream, m->ready->event, 0),
              "cudaStreamWaitEvent", context);
  EventPtr start;
  traceBegin(issuer, stream, start);

  // A member whose source overlaps its destination is read from a copy.
  // A broadcast reads the root's source only: the others' may be anything.
  int64_t n = static_cast<int64_t>(members.size());
  std::vector<const void *> src(members.size());
  std::vector<void *> scratch;
  for (size_t i = 0; i < members.size(); ++i) {
    Request &m = *members[i];
    if (first.kind == OpKind::Broadcast &&
        static_cast<int64_t>(i) != first.root)
      continue;
    src[i] = m.src;
    int64_t bytes = m.sourceBytes();
    if (m.src && overlaps(m.src, bytes, m.dst, m.destinationBytes())) {
      void *copy = nullptr;
      checkCuda(cudaMallocAsync(&copy, static_cast<size_t>(bytes), stream),
                "cudaMallocAsync", context);
      checkCuda(cudaMemcpyAsync(copy, m.src, static_cast<size_t>(bytes),
                                cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync", context);
      src[i] = copy;
      scratch.push_back(copy);
    }
  }

  int64_t block = first.bytes;
  int64_t elements = first.count, es = first.elementSize;
  for (int64_t p = 0; p < n; ++p) {
    Request &to = *members[static_cast<size_t>(p)];
    switch (first.kind) {
    case OpKind::AllGather:
      for (int64_t q = 0; q < n; ++q)
        copyDevice(at(to.dst, q * block), src[static_cast<size_t>(q)], block,
                   stream, context);
      break;
    case OpKind::AllToAll:
      for (int64_t q = 0; q < n; ++q)
        copyDevice(at(to.dst, q * block),
                   at(src[static_cast<size_t>(q)], p * block), block, stream,
                   context);
      break;
    case OpKind::Broadcast:
      copyDevice(to.dst, src[static_cast<size_t>(first.root)], block, stream,
                 context);
      break;
    case OpKind::AllReduce:
    case OpKind::ReduceScatter: {
      int64_t offset =
          first.kind == OpKind::ReduceScatter ? p * elements * es : 0;
      copyDevice(to.dst, at(src[0], offset), elements * es, stream, context);
      for (int64_t q = 1; q < n; ++q)
        reduce::into(to.dst, at(src[static_cast<size_t>(q)], offset), elements,
                     first.dtype, first.reduction, stream, context);
      break;
    }
    default: // Point-to-point requests are matched in pairs elsewhere.
      break;
    }
  }
  for (void *copy : scratch)
    checkCuda(cudaFreeAsync(copy, stream), "cudaFreeAsync", context);
  EventPtr done = recordEvent(stream, issuer.tracing, context);
  for (Request *m : members) {
    m->completion = done;
    m->traceStart = start;
    m->traceEnd = done;
    m->matched = true;
  }
}

} // namespace

void init(int ranks, int /*device*/) {
  World &w = world();
  w.size = ranks;
  w.ranks.assign(static_cast<size_t>(ranks), nullptr);
  w.maxSlots.assign(static_cast<size_t>(ranks), {});
  w.sites.clear();
  w.traceSlots.assign(static_cast<size_t>(ranks), {});
  const char *copy = std::getenv("BRAID_LOOPBACK_COPY");
  if (copy && *copy && std::strcmp(copy, "ce") != 0 &&
      std::strcmp(copy, "sm") != 0)
    fatalf("BRAID_LOOPBACK_COPY=%s: expected ce (the copy engine, default) or "
           "sm (a copy kernel)",
           copy);
  w.smCopy = copy && std::strcmp(copy, "sm") == 0;
  if (w.smCopy) {
    const char *context = "braid_rt_init (loading the loopback copy kernel)";
    CUmodule module = nullptr;
    checkDriver(driver().moduleLoadData(&module, copyKernelPtx),
                "cuModuleLoadData", context);
    checkDriver(driver().moduleGetFunction(&w.copyKernel, module,
                                           "braid_loopback_copy"),
                "cuModuleGetFunction", context);
  }
}

int ranks() { return world().size; }

void registerRank(int rank, RankState *state) {
  World &w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  w.ranks[static_cast<size_t>(rank)] = state;
}

void run(void (*fn)(void *), void *arg) {
  World &w = world();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < w.size; ++rank)
    threads.emplace_back(runLoopbackRank, rank, fn, arg);
  for (std::thread &thread : threads)
    thread.join();
}

void post(RankState &state, std::unique_ptr<Request> request) {
  Request &r = *request;
  Request *raw = request.get();
  state.requests.emplace(r.handle, std::move(request));
  CudaGroup &group = const_cast<CudaGroup &>(*raw->group);

  World &w = world();
  std::lock_guard<std::mutex> lock(w.mutex);
  if (raw->kind == OpKind::Send || raw->kind == OpKind::Recv) {
    bool isSend = raw->kind == OpKind::Send;
    MailKey key = isSend ? mailKey(group, group.position, raw->peerPosition)
                         : mailKey(group, raw->peerPosition, group.position);
    Mailbox &box = w.mail[key];
    std::deque<Request *> &partners = isSend ? box.recvs : box.sends;
    if (partners.empty()) {
      (isSend ? box.sends : box.recvs).push_back(raw);
      return;
    }
    Request *partner = partners.front();
    partners.pop_front();
    if (isSend)
      match(state, *raw, *partner);
    else
      match(state, *partner, *raw);
    w.changed.notify_all();
    return;
  }
  MailKey key = mailKey(group, group.collectives++, -1);
  std::vector<Request *> &members = w.rendezvous[key];
  if (members.empty())
    members.assign(static_cast<size_t>(group.size), nullptr);
  members[static_cast<size_t>(group.position)] = raw;
  if (std::find(members.begin(), members.end(), nullptr) != members.end())
    return;
  issueCollective(state, members);
  w.rendezvous.erase(key);
  w.changed.notify_all();
}

void wait(RankState &state, std::unique_ptr<Request> request) {
  {
    World &w = world();
    std::unique_lock<std::mutex> lock(w.mutex);
    // Blocks only until the peers have posted the match; the transfer
    // itself is only stream-ordered.
    Request *raw = request.get();
    waitWithTimeout(
        lock, [raw] { return raw->matched; }, raw->describe());
  }
  orderAfter(state, *request);
  state.inFlight.push_back(std::move(request));
}

std::vector<char *> exchangeSite(const CudaGroup &group, int64_t site,
                                 char *local) {
  World &w = world();
  std::unique_lock<std::mutex> lock(w.mutex);
  std::vector<char *> &copies = w.sites[mailKey(group, site, 0)];
  copies.resize(static_cast<size_t>(group.size), nullptr);
  copies[static_cast<size_t>(group.position)] = local;
  w.changed.notify_all();
  waitWithTimeout(
      lock,
      [&] {
        return std::find(copies.begin(), copies.end(), nullptr) == copies.end();
      },
      formatString("braid_rt_symmetric_site (site %lld on group %s: every "
                   "member allocates it collectively)",
                   static_cast<long long>(site), group.str().c_str()));
  return copies;
}

void hostBarrier(const char *what) {
  World &w = world();
  std::unique_lock<std::mutex> lock(w.mutex);
  int64_t generation = w.barrierGeneration;
  if (++w.barrierArrived == w.size) {
    w.barrierArrived = 0;
    ++w.barrierGeneration;
    w.changed.notify_all();
    return;
  }
  waitWithTimeout(
      lock, [&] { return w.barrierGeneration != generation; },
      formatString("%s (collective over all ranks)", what));
}

void hostMax(double *values, int64_t count) {
  World &w = world();
  RankState &state = currentRank("braid_rt_host_max");
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.maxSlots[static_cast<size_t>(state.rank)].assign(values, values + count);
  }
  hostBarrier("braid_rt_host_max");
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    for (const std::vector<double> &slot : w.maxSlots) {
      if (static_cast<int64_t>(slot.size()) != count)
        fatalf("braid_rt_host_max: the ranks passed different counts (%lld "
               "and %zu)",
               static_cast<long long>(count), slot.size());
      for (int64_t i = 0; i < count; ++i)
        values[i] = std::max(values[i], slot[static_cast<size_t>(i)]);
    }
  }
  // Nobody may overwrite a slot before everyone has read them.
  hostBarrier("braid_rt_host_max");
}

std::string gatherTraces(const std::string &local, int rank) {
  World &w = world();
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    w.traceSlots[static_cast<size_t>(rank)] = local;
  }
  hostBarrier("braid_rt_trace_end");
  std::string merged;
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(w.mutex);
    for (std::string &slot : w.traceSlots) {
      if (slot.empty())
        continue;
      if (!merged.empty())
        merged += ",\n";
      merged += slot;
      slot.clear();
    }
  }
  hostBarrier("braid_rt_trace_end");
  return merged;
}

bool smCopy() { return world().smCopy; }

void copyWithKernel(void *dst, const void *src, int64_t bytes,
                    cudaStream_t stream, const std::string &context) {
  uint64_t vectors = 0;
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) %
          16 ==
      0)
    vectors = static_cast<uint64_t>(bytes) / 16;
  uint64_t total = static_cast<uint64_t>(bytes);
  uint64_t work = vectors ? vectors : total;
  constexpr unsigned threads = 256;
  unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(
      std::max<uint64_t>(1, (work + threads - 1) / threads), 1024));
  void *dstArg = dst;
  const void *srcArg = src;
  void *params[] = {&dstArg, const_cast<void **>(&srcArg), &vectors, &total};
  checkDriver(driver().launchKernel(world().copyKernel, blocks, 1, 1, threads,
                                    1, 1, 0, reinterpret_cast<CUstream>(stream),
                                    params, nullptr),
              "cuLaunchKernel (the loopback copy kernel)", context);
}

} // namespace braid::rt::cuda::loopback
