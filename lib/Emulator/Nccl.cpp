//===- Nccl.cpp - The emulated device's NCCL, across rank processes -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// libnccl.so.2 of the emulated device: communicators of any number of rank
// processes (up to 16) on one machine, meeting in a shared-memory segment.
// The unique id names the segment (the creating process and its file); a
// split creates one per color. Device memory is shared-memory files
// (Memory.h), so an operation reads its peers' buffers directly, as NCCL's
// kernels do over NVLink:
//
//  - point to point: a send posts its buffer in a ring per (source,
//    destination) pair; the receive copies from it and frees the slot; the
//    send completes then. A group's operations progress together, so a ring
//    of sends and receives never deadlocks.
//  - collectives: every rank posts its buffers; once all have, each reduces
//    or gathers its result from its peers' buffers in rank order (f16 and
//    bf16 in f32, rounded once), and writes it after all have read, so that
//    in-place forms are safe.
//  - symmetric windows (ncclMemAlloc + ncclCommWindowRegister): each peer's
//    buffer is mapped in the reserved range around ours, at the address
//    NCCL's LSA layout gives it, with its race-detector shadow.
//
// Operations run on the stream they are enqueued on and synchronize their
// participants' vector clocks. A peer that exits is noticed at once; a wait
// past the emulator's timeout is reported naming the peer.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "Memory.h"

#include "HalfFloat.h"

#include <cuda_runtime_api.h>
#include <iterator>
#include <nccl.h>
#include <nccl_device/impl/core__types.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <vector>

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

using namespace braid::emu;

namespace {

constexpr int kMaxRanks = 16;
constexpr int kRing = 4;
constexpr uint64_t kMagic = 0x62726169644E434CULL; // "braidNCL"

struct RankInfo {
  std::atomic<int32_t> pid;
  uint32_t device;
};

struct Message {
  Backing backing;
  VectorClock clock;
};

struct Channel {
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> consumed;
  Message ring[kRing];
};

struct CollectiveSlot {
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> done;
  Backing send;
  VectorClock clock;
};

struct SplitSlot {
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> ready;
  int32_t color, key;
  int32_t pid, fd;
  uint64_t nonce;
};

struct WindowSlot {
  std::atomic<uint64_t> posted;
  std::atomic<uint64_t> read; ///< registrations whose slots it has read
  Backing backing;
  VectorClock host; ///< what the rank's host had seen complete
};

struct Segment {
  uint64_t magic;
  uint64_t nonce;
  std::atomic<int32_t> nranks;
  std::atomic<int32_t> joined;
  std::atomic<int32_t> aborted;
  RankInfo ranks[kMaxRanks];
  CollectiveSlot collectives[kMaxRanks];
  SplitSlot splits[kMaxRanks];
  WindowSlot windows[kMaxRanks];
  Channel channels[kMaxRanks][kMaxRanks]; // [source][destination]
};

/// What the unique id carries.
struct Id {
  uint64_t magic;
  int32_t pid;
  int32_t fd;
  uint64_t nonce;
};
static_assert(sizeof(Id) <= sizeof(ncclUniqueId), "the id must fit");

struct Comm {
  Segment *segment = nullptr;
  int rank = 0, nranks = 0;
  uint64_t collectiveSeq = 0, splitSeq = 0, windowSeq = 0;
  uint64_t sendSeq[kMaxRanks] = {}, recvSeq[kMaxRanks] = {};
  std::atomic<int> asyncError{ncclSuccess};
  std::mutex mutex;
};

struct Window {
  Comm *comm;
  void *buffer;
  uint64_t stride;
  std::vector<void *> peers;
  void *fields;
};

thread_local std::string lastError;
thread_local int groupDepth = 0;

std::mutex &windowsMutex() {
  static auto *mutex = new std::mutex();
  return *mutex;
}
std::map<void *, Window *> &windows() {
  static auto *table = new std::map<void *, Window *>();
  return *table;
}

/// Whether [p, p + bytes) is device memory of the emulated device.
bool onDeviceMemory(const void *p, size_t bytes) {
  const char *what = classify(p, bytes);
  return what && std::strcmp(what, "host") != 0;
}

/// Waits for the device's work (teardown: buffers may be in use).
void synchronizeAll() { cudaDeviceSynchronize(); }

struct Pending {
  bool send;
  void *buffer;
  size_t bytes;
  int peer;
  Comm *comm;
  cudaStream_t stream;
  uint64_t seq;
};
thread_local std::vector<Pending> grouped;

ncclResult_t fail(ncclResult_t code, const std::string &why) {
  lastError = why;
  return code;
}

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

bool validType(ncclDataType_t type) {
  return type >= ncclInt8 && type <= ncclBfloat16;
}

/// Maps a segment of another process (or our own).
Segment *mapSegment(int32_t pid, int32_t fd, std::string &why) {
  Backing backing;
  backing.pid = pid;
  backing.fd = fd;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
  int opened = open(path, O_RDWR | O_CLOEXEC);
  if (opened < 0) {
    why = std::string("cannot open the communicator of process ") +
          std::to_string(pid) + " (" + path + "): " + std::strerror(errno) +
          (errno == ENOENT ? " (has it exited?)" : "");
    return nullptr;
  }
  void *p = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED,
                 opened, 0);
  close(opened);
  if (p == MAP_FAILED) {
    why = std::string("cannot map a communicator: ") + std::strerror(errno);
    return nullptr;
  }
  return static_cast<Segment *>(p);
}

/// A fresh segment in a file of ours; returns it with its file.
Segment *createSegment(int &fd, uint64_t nonce, std::string &why) {
  fd = memfd_create("braid-emulated-nccl", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, sizeof(Segment)) != 0) {
    why = std::string("cannot create a communicator: ") + std::strerror(errno);
    return nullptr;
  }
  void *p =
      mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = std::string("cannot map a communicator: ") + std::strerror(errno);
    return nullptr;
  }
  auto *segment = static_cast<Segment *>(p);
  segment->nonce = nonce;
  __atomic_store_n(&segment->magic, kMagic, __ATOMIC_RELEASE);
  return segment;
}

uint64_t freshNonce() {
  std::random_device device;
  return (uint64_t(device()) << 32) ^ device() ^ uint64_t(getpid());
}

bool alive(int32_t pid) {
  return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH;
}

/// Waits until `ready()`, checking that the device works, the peers live
/// and the time; false with `why` otherwise.
template <typename F>
bool waitUntil(Comm &comm, F ready, const std::atomic<bool> *cancelled,
               const std::string &what, std::string &why) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto lastCheck = start;
  unsigned backoff = 0;
  while (!ready()) {
    if (cancelled && cancelled->load()) {
      why = "cancelled: the device failed";
      return false;
    }
    auto now = Clock::now();
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      if (comm.segment->aborted.load()) {
        why = what + ": the communicator was aborted";
        return false;
      }
      for (int r = 0; r < comm.nranks; ++r) {
        int32_t pid = comm.segment->ranks[r].pid.load();
        if (!alive(pid)) {
          why = what + ": rank " + std::to_string(r) + " (process " +
                std::to_string(pid) + ") has exited";
          return false;
        }
      }
      double waited = std::chrono::duration<double>(now - start).count();
      if (waited > waitTimeout()) {
        why = what + ": still waiting after " +
              std::to_string(static_cast<int>(waited)) + " s";
        return false;
      }
    }
    if (backoff < 64)
      ++backoff;
    else
      std::this_thread::sleep_for(std::chrono::microseconds(
          std::min(1000u, 10u << std::min(backoff - 64, 7u))));
    if (backoff >= 64)
      ++backoff;
  }
  return true;
}

/// Waits until every rank's `counter(r)` (a field of its slot in the
/// segment) has reached `seq`, as waitUntil does.
template <typename F>
bool waitForAll(Comm &comm, uint64_t seq, F counter,
                const std::atomic<bool> *cancelled, const std::string &what,
                std::string &why) {
  return waitUntil(
      comm,
      [&] {
        for (int r = 0; r < comm.nranks; ++r)
          if (counter(r).load() < seq)
            return false;
        return true;
      },
      cancelled, what, why);
}

/// The lowest rank that has not reached `seq` of `field` (for messages).
template <typename F> int laggard(Comm &comm, F behind) {
  for (int r = 0; r < comm.nranks; ++r)
    if (behind(r))
      return r;
  return -1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

template <typename T> T combine(ncclRedOp_t op, T a, T b) {
  switch (op) {
  case ncclProd:
    return a * b;
  case ncclMax:
    return a > b ? a : b;
  case ncclMin:
    return a < b ? a : b;
  default:
    return a + b;
  }
}

/// How a reduction reads and writes elements of type T: as themselves.
template <typename T> struct Plain {
  using Value = T;
  static T load(const void *p, size_t i) {
    return static_cast<const T *>(p)[i];
  }
  static void store(void *p, size_t i, T value) {
    static_cast<T *>(p)[i] = value;
  }
};

/// 16-bit floats: widened to f32, reduced there, rounded once.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
struct Widened {
  using Value = float;
  static float load(const void *p, size_t i) {
    return ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
  static void store(void *p, size_t i, float value) {
    static_cast<uint16_t *>(p)[i] = FromFloat(value);
  }
};

/// dst[i] = op over the sources, in order, for `count` elements of E.
template <typename E>
void reduceAs(void *dst, const std::vector<const void *> &sources, size_t count,
              ncclRedOp_t op) {
  using Value = typename E::Value;
  size_t n = sources.size();
  ncclRedOp_t each = op == ncclAvg ? ncclSum : op;
  for (size_t i = 0; i < count; ++i) {
    Value value = E::load(sources[0], i);
    for (size_t s = 1; s < n; ++s)
      value = combine<Value>(each, value, E::load(sources[s], i));
    if (op == ncclAvg)
      value = value / static_cast<Value>(n);
    E::store(dst, i, value);
  }
}

/// dst[i] = op over the sources, in order, for `count` elements.
void reduce(void *dst, const std::vector<const void *> &sources, size_t count,
            ncclDataType_t type, ncclRedOp_t op) {
  using namespace braid::rt;
  switch (type) {
  case ncclFloat32:
    return reduceAs<Plain<float>>(dst, sources, count, op);
  case ncclFloat64:
    return reduceAs<Plain<double>>(dst, sources, count, op);
  case ncclFloat16:
    return reduceAs<Widened<halfToFloat, floatToHalf>>(dst, sources, count, op);
  case ncclBfloat16:
    return reduceAs<Widened<bf16ToFloat, floatToBf16>>(dst, sources, count, op);
  case ncclInt8:
    return reduceAs<Plain<int8_t>>(dst, sources, count, op);
  case ncclUint8:
    return reduceAs<Plain<uint8_t>>(dst, sources, count, op);
  case ncclInt32:
    return reduceAs<Plain<int32_t>>(dst, sources, count, op);
  case ncclUint32:
    return reduceAs<Plain<uint32_t>>(dst, sources, count, op);
  case ncclInt64:
    return reduceAs<Plain<int64_t>>(dst, sources, count, op);
  default:
    return reduceAs<Plain<uint64_t>>(dst, sources, count, op);
  }
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast, Barrier };

const char *kindName(Kind kind) {
  // In Kind's order.
  static const char *const names[] = {"ncclAllReduce", "ncclAllGather",
                                      "ncclReduceScatter", "ncclBroadcast",
                                      "a barrier"};
  static_assert(std::size(names) == static_cast<size_t>(Kind::Barrier) + 1);
  return names[static_cast<size_t>(kind)];
}

struct Collective {
  Kind kind;
  const void *send;
  void *recv;
  size_t count; // elements of the result per rank (AllGather: per source)
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  uint64_t seq;
};

bool runCollective(Comm &comm, const Collective &c, OpContext &context,
                   int &code, std::string &report) {
  Segment &segment = *comm.segment;
  CollectiveSlot &mine = segment.collectives[comm.rank];
  size_t element = typeBytes(c.type);
  size_t sendBytes = 0, recvBytes = 0;
  switch (c.kind) {
  case Kind::AllReduce:
  case Kind::Broadcast:
    sendBytes = recvBytes = c.count * element;
    break;
  case Kind::AllGather:
    sendBytes = c.count * element;
    recvBytes = sendBytes * comm.nranks;
    break;
  case Kind::ReduceScatter:
    recvBytes = c.count * element;
    sendBytes = recvBytes * comm.nranks;
    break;
  case Kind::Barrier:
    break;
  }
  std::string what = std::string(kindName(c.kind)) + " (collective " +
                     std::to_string(c.seq) + " of the communicator)";
  auto failWith = [&](const std::string &why) {
    code = kLaunchFailure;
    report = why;
    comm.asyncError.store(ncclSystemError);
    return false;
  };
  bool sends = c.kind != Kind::Barrier &&
               (c.kind != Kind::Broadcast || comm.rank == c.root);
  if (sends && sendBytes && !backingOf(c.send, sendBytes, mine.send))
    return failWith(what + ": the send buffer is not device memory (any more)");
  if (!sends)
    mine.send = Backing();
  mine.clock = context.clock;
  mine.posted.store(c.seq, std::memory_order_release);
  std::string why;
  auto posted = [&](int r) -> auto & { return segment.collectives[r].posted; };
  if (!waitForAll(
          comm, c.seq, posted, &context.cancelled,
          what + " waits for rank " +
              std::to_string(laggard(
                  comm, [&](int r) { return posted(r).load() < c.seq; })),
          why))
    return failWith(why);
  for (int r = 0; r < comm.nranks; ++r)
    if (r != comm.rank)
      context.clock.join(segment.collectives[r].clock);
  // Every rank's data as this process sees it.
  std::vector<const void *> sources(comm.nranks, nullptr);
  for (int r = 0; r < comm.nranks && c.kind != Kind::Barrier; ++r) {
    if (c.kind == Kind::Broadcast && r != c.root)
      continue;
    const Backing &backing = segment.collectives[r].send;
    if (!backing.bytes)
      continue;
    if (backing.bytes != sendBytes)
      return failWith(what + ": rank " + std::to_string(r) + " sends " +
                      std::to_string(backing.bytes) + " bytes, this rank " +
                      std::to_string(sendBytes));
    void *p = mapPeer(backing, why);
    if (!p)
      return failWith(what + ": " + why);
    sources[r] = p;
  }
  std::vector<uint8_t> result(recvBytes);
  switch (c.kind) {
  case Kind::AllReduce:
    reduce(result.data(), sources, c.count, c.type, c.op);
    break;
  case Kind::ReduceScatter: {
    std::vector<const void *> blocks;
    for (const void *source : sources)
      blocks.push_back(static_cast<const uint8_t *>(source) +
                       comm.rank * recvBytes);
    reduce(result.data(), blocks, c.count, c.type, c.op);
    break;
  }
  case Kind::AllGather:
    for (int r = 0; r < comm.nranks; ++r)
      std::memcpy(result.data() + r * sendBytes, sources[r], sendBytes);
    break;
  case Kind::Broadcast:
    std::memcpy(result.data(), sources[c.root], recvBytes);
    break;
  case Kind::Barrier:
    break;
  }
  if (sends && sendBytes)
    recordOperationAccess(context, c.send, sendBytes, Read, kindName(c.kind));
  mine.done.store(c.seq, std::memory_order_release);
  if (!waitForAll(
          comm,
          c.seq, [&](int r) -> auto & { return segment.collectives[r].done; },
          &context.cancelled, what + " (finishing)", why))
    return failWith(why);
  if (recvBytes) {
    std::string race = recordOperationAccess(context, c.recv, recvBytes, Write,
                                             kindName(c.kind));
    std::memcpy(c.recv, result.data(), recvBytes);
    if (!race.empty())
      return failWith(race);
  }
  return true;
}

ncclResult_t enqueueCollective(Comm *comm, Collective c, cudaStream_t stream) {
  if (!comm || !comm->segment)
    return fail(ncclInvalidArgument, "a null or destroyed communicator");
  if (c.kind != Kind::Barrier && !validType(c.type))
    return fail(ncclInvalidArgument, std::string(kindName(c.kind)) +
                                         ": unsupported data type " +
                                         std::to_string(c.type));
  if (c.op < ncclSum || c.op > ncclAvg)
    return fail(ncclInvalidArgument, std::string(kindName(c.kind)) +
                                         ": unsupported reduction " +
                                         std::to_string(c.op));
  if (c.kind == Kind::Broadcast && (c.root < 0 || c.root >= comm->nranks))
    return fail(ncclInvalidArgument, "ncclBroadcast: root " +
                                         std::to_string(c.root) +
                                         " out of range");
  size_t element = typeBytes(c.type);
  size_t count = c.count;
  size_t recvBytes = c.kind == Kind::AllGather ? count * element * comm->nranks
                                               : count * element;
  size_t sendBytes = c.kind == Kind::ReduceScatter
                         ? count * element * comm->nranks
                         : count * element;
  if (c.kind != Kind::Barrier && count) {
    bool sends = c.kind != Kind::Broadcast || comm->rank == c.root;
    if ((sends && !onDeviceMemory(c.send, sendBytes)) ||
        !onDeviceMemory(c.recv, recvBytes))
      return fail(ncclInvalidArgument,
                  std::string(kindName(c.kind)) +
                      ": a buffer is not device memory of the emulated device");
  }
  BRAID_EMU_LOG("%s %zu B on %s", kindName(c.kind), count * element,
                streamName(stream).c_str());
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    c.seq = ++comm->collectiveSeq;
  }
  int error =
      enqueue(stream, kindName(c.kind),
              [comm, c](OpContext &context, int &code, std::string &report) {
                return runCollective(*comm, c, context, code, report);
              });
  return error ? fail(ncclUnhandledCudaError, "the emulated device failed")
               : ncclSuccess;
}

//===----------------------------------------------------------------------===//
// Point to point
//===----------------------------------------------------------------------===//

bool runGroup(const std::vector<Pending> &ops, OpContext &context, int &code,
              std::string &report) {
  struct State {
    const Pending *op;
    bool posted = false, done = false;
  };
  std::vector<State> states;
  for (const Pending &op : ops)
    states.push_back({&op});
  auto failWith = [&](Comm &comm, const std::string &why) {
    code = kLaunchFailure;
    report = why;
    comm.asyncError.store(ncclSystemError);
    return false;
  };
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now(), lastCheck = start;
  unsigned backoff = 0;
  for (;;) {
    bool progress = false, finished = true;
    for (State &state : states) {
      const Pending &op = *state.op;
      Comm &comm = *op.comm;
      Segment &segment = *comm.segment;
      if (state.done)
        continue;
      finished = false;
      if (op.send) {
        Channel &channel = segment.channels[comm.rank][op.peer];
        if (!state.posted) {
          if (channel.consumed.load(std::memory_order_acquire) + kRing <=
              op.seq)
            continue; // no free slot yet
          Message &message = channel.ring[op.seq % kRing];
          if (op.bytes && !backingOf(op.buffer, op.bytes, message.backing))
            return failWith(comm, "ncclSend: the buffer is not device memory "
                                  "(any more)");
          message.backing.bytes = op.bytes;
          message.clock = context.clock;
          recordOperationAccess(context, op.buffer, op.bytes, Read, "ncclSend");
          channel.posted.store(op.seq + 1, std::memory_order_release);
          state.posted = progress = true;
        }
        if (channel.consumed.load(std::memory_order_acquire) > op.seq)
          state.done = progress = true;
      } else {
        Channel &channel = segment.channels[op.peer][comm.rank];
        if (channel.posted.load(std::memory_order_acquire) <= op.seq)
          continue;
        Message &message = channel.ring[op.seq % kRing];
        if (message.backing.bytes != op.bytes)
          return failWith(comm, "ncclRecv from rank " +
                                    std::to_string(op.peer) + ": it sends " +
                                    std::to_string(message.backing.bytes) +
                                    " bytes, the receive takes " +
                                    std::to_string(op.bytes));
        if (op.bytes) {
          std::string why;
          void *source = mapPeer(message.backing, why);
          if (!source)
            return failWith(comm, "ncclRecv from rank " +
                                      std::to_string(op.peer) + ": " + why);
          std::string race = recordOperationAccess(context, op.buffer, op.bytes,
                                                   Write, "ncclRecv");
          std::memcpy(op.buffer, source, op.bytes);
          if (!race.empty())
            return failWith(comm, race);
        }
        context.clock.join(message.clock);
        channel.consumed.store(op.seq + 1, std::memory_order_release);
        state.done = progress = true;
      }
    }
    if (finished)
      return true;
    if (progress) {
      backoff = 0;
      continue;
    }
    if (context.cancelled.load())
      return true;
    auto now = Clock::now();
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      for (State &state : states) {
        if (state.done)
          continue;
        Comm &comm = *state.op->comm;
        int32_t pid = comm.segment->ranks[state.op->peer].pid.load();
        std::string what =
            std::string(state.op->send ? "ncclSend to" : "ncclRecv from") +
            " rank " + std::to_string(state.op->peer);
        if (!alive(pid))
          return failWith(comm, what + ": its process (" + std::to_string(pid) +
                                    ") has exited");
        double waited = std::chrono::duration<double>(now - start).count();
        if (waited > waitTimeout())
          return failWith(comm, what + ": still waiting after " +
                                    std::to_string(static_cast<int>(waited)) +
                                    " s (the peer never posted its side)");
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::min(1000u, 5u << std::min(backoff++, 8u))));
  }
}

ncclResult_t flushGroup() {
  std::vector<Pending> ops;
  ops.swap(grouped);
  // One stream operation per stream, in the order posted.
  std::vector<cudaStream_t> streams;
  for (const Pending &op : ops)
    if (std::find(streams.begin(), streams.end(), op.stream) == streams.end())
      streams.push_back(op.stream);
  for (cudaStream_t stream : streams) {
    auto mine = std::make_shared<std::vector<Pending>>();
    for (const Pending &op : ops)
      if (op.stream == stream)
        mine->push_back(op);
    int error =
        enqueue(stream, "ncclSend/ncclRecv",
                [mine](OpContext &context, int &code, std::string &report) {
                  return runGroup(*mine, context, code, report);
                });
    if (error)
      return fail(ncclUnhandledCudaError, "the emulated device failed");
  }
  return ncclSuccess;
}

ncclResult_t pointToPoint(bool send, const void *buffer, size_t count,
                          ncclDataType_t type, int peer, Comm *comm,
                          cudaStream_t stream) {
  const char *call = send ? "ncclSend" : "ncclRecv";
  if (!comm || !comm->segment)
    return fail(ncclInvalidArgument,
                std::string(call) + ": a null or destroyed communicator");
  if (!validType(type))
    return fail(ncclInvalidArgument,
                std::string(call) + ": unsupported data type");
  if (peer < 0 || peer >= comm->nranks)
    return fail(ncclInvalidArgument, std::string(call) + ": peer " +
                                         std::to_string(peer) +
                                         " out of range");
  size_t bytes = count * typeBytes(type);
  BRAID_EMU_LOG("%s %zu B %s rank %d on %s", call, bytes, send ? "to" : "from",
                peer, streamName(stream).c_str());
  if (bytes && !onDeviceMemory(buffer, bytes))
    return fail(ncclInvalidArgument,
                std::string(call) +
                    ": the buffer is not device memory of the emulated device");
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    seq = send ? comm->sendSeq[peer]++ : comm->recvSeq[peer]++;
  }
  grouped.push_back(
      {send, const_cast<void *>(buffer), bytes, peer, comm, stream, seq});
  return groupDepth > 0 ? ncclSuccess : flushGroup();
}

//===----------------------------------------------------------------------===//
// Joining communicators
//===----------------------------------------------------------------------===//

ncclResult_t join(const char *call, Segment *segment, int nranks, int rank,
                  Comm **out) {
  if (nranks < 1 || nranks > kMaxRanks)
    return fail(ncclInvalidArgument,
                "the emulated NCCL runs 1 to " + std::to_string(kMaxRanks) +
                    " ranks, not " + std::to_string(nranks));
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "rank " + std::to_string(rank) +
                                         " out of range for " +
                                         std::to_string(nranks) + " ranks");
  int32_t expected = 0;
  if (!segment->nranks.compare_exchange_strong(expected, nranks) &&
      expected != nranks)
    return fail(ncclInvalidUsage,
                "ranks disagree on the size of the communicator (" +
                    std::to_string(expected) + " and " +
                    std::to_string(nranks) + ")");
  int32_t none = 0;
  if (!segment->ranks[rank].pid.compare_exchange_strong(none, getpid()))
    return fail(ncclInvalidUsage, "rank " + std::to_string(rank) +
                                      " joined the communicator twice");
  segment->ranks[rank].device = deviceId();
  segment->joined.fetch_add(1);
  auto comm = std::make_unique<Comm>();
  comm->segment = segment;
  comm->rank = rank;
  comm->nranks = nranks;
  std::string why;
  if (!waitUntil(
          *comm, [&] { return segment->joined.load() >= nranks; }, nullptr,
          "ncclCommInitRank waits for the other ranks", why))
    return fail(ncclSystemError, why);
  BRAID_EMU_LOG("%s: rank %d of %d", call, rank, nranks);
  *out = comm.release();
  return ncclSuccess;
}

} // namespace

//===----------------------------------------------------------------------===//
// The API
//===----------------------------------------------------------------------===//

EMU_EXPORT const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (the emulated device failed: reported above)";
  case ncclSystemError:
    return "unhandled system error (see ncclGetLastError)";
  case ncclInvalidArgument:
    return "invalid argument (see ncclGetLastError)";
  case ncclInvalidUsage:
    return "invalid usage (see ncclGetLastError)";
  default:
    return "internal error";
  }
}

EMU_EXPORT const char *ncclGetLastError(ncclComm_t) {
  return lastError.c_str();
}

EMU_EXPORT ncclResult_t ncclGetVersion(int *version) {
  if (!version)
    return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
  if (!out)
    return fail(ncclInvalidArgument, "ncclGetUniqueId: a null id");
  Id id;
  id.magic = kMagic;
  id.pid = getpid();
  id.nonce = freshNonce();
  std::string why;
  if (!createSegment(id.fd, id.nonce, why))
    return fail(ncclSystemError, why);
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->internal, &id, sizeof(id));
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks,
                                         ncclUniqueId unique, int rank) {
  if (!comm)
    return fail(ncclInvalidArgument, "ncclCommInitRank: a null result");
  Id id;
  std::memcpy(&id, unique.internal, sizeof(id));
  if (id.magic != kMagic)
    return fail(ncclInvalidArgument,
                "not an id of the emulated NCCL (from ncclGetUniqueId)");
  std::string why;
  Segment *segment = mapSegment(id.pid, id.fd, why);
  if (!segment)
    return fail(ncclSystemError, why);
  if (__atomic_load_n(&segment->magic, __ATOMIC_ACQUIRE) != kMagic ||
      segment->nonce != id.nonce)
    return fail(ncclInvalidArgument, "a stale unique id");
  Comm *created = nullptr;
  ncclResult_t rc = join("ncclCommInitRank", segment, nranks, rank, &created);
  if (rc != ncclSuccess)
    return rc;
  *comm = reinterpret_cast<ncclComm_t>(created);
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommSplit(ncclComm_t handle, int color, int key,
                                      ncclComm_t *newcomm, ncclConfig_t *) {
  auto *comm = reinterpret_cast<Comm *>(handle);
  if (!comm || !comm->segment || !newcomm)
    return fail(ncclInvalidArgument, "ncclCommSplit: bad arguments");
  Segment &segment = *comm->segment;
  uint64_t seq = ++comm->splitSeq;
  SplitSlot &mine = segment.splits[comm->rank];
  mine.color = color;
  mine.key = key;
  mine.posted.store(seq, std::memory_order_release);
  std::string why;
  if (!waitForAll(
          *comm, seq, [&](int r) -> auto & { return segment.splits[r].posted; },
          nullptr, "ncclCommSplit waits for the other ranks", why))
    return fail(ncclSystemError, why);
  *newcomm = nullptr;
  // Members of my color, by (key, rank).
  std::vector<std::pair<int, int>> members;
  for (int r = 0; r < comm->nranks; ++r)
    if (segment.splits[r].color == color)
      members.push_back({segment.splits[r].key, r});
  std::sort(members.begin(), members.end());
  int position = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == comm->rank)
      position = static_cast<int>(i);
  int leader = members.front().second;
  Segment *child = nullptr;
  if (color != NCCL_SPLIT_NOCOLOR) {
    if (leader == comm->rank) {
      int fd = -1;
      uint64_t nonce = freshNonce();
      child = createSegment(fd, nonce, why);
      if (!child)
        return fail(ncclSystemError, why);
      mine.pid = getpid();
      mine.fd = fd;
      mine.nonce = nonce;
      mine.ready.store(seq, std::memory_order_release);
    } else {
      SplitSlot &lead = segment.splits[leader];
      if (!waitUntil(
              *comm, [&] { return lead.ready.load() >= seq; }, nullptr,
              "ncclCommSplit waits for rank " + std::to_string(leader), why))
        return fail(ncclSystemError, why);
      child = mapSegment(lead.pid, lead.fd, why);
      if (!child)
        return fail(ncclSystemError, why);
    }
    Comm *created = nullptr;
    ncclResult_t rc =
        join("ncclCommSplit", child, static_cast<int>(members.size()), position,
             &created);
    if (rc != ncclSuccess)
      return rc;
    *newcomm = reinterpret_cast<ncclComm_t>(created);
  }
  // Nobody reuses the split slots before everyone has read them.
  Comm &parent = *comm;
  Collective barrier{Kind::Barrier, nullptr, nullptr, 0,
                     ncclInt8,      ncclSum, 0,       0};
  {
    std::lock_guard<std::mutex> lock(parent.mutex);
    barrier.seq = ++parent.collectiveSeq;
  }
  VectorClock clock = hostKnowledge();
  std::atomic<bool> never{false};
  std::string where = "ncclCommSplit";
  OpContext context{clock, 0, 0, deviceId(), never, where};
  int code = 0;
  if (!runCollective(parent, barrier, context, code, why))
    return fail(ncclSystemError, why);
  hostLearns(clock);
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t handle, int *rank) {
  auto *comm = reinterpret_cast<const Comm *>(handle);
  if (!comm || !rank)
    return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommCount(const ncclComm_t handle, int *count) {
  auto *comm = reinterpret_cast<const Comm *>(handle);
  if (!comm || !count)
    return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t handle) {
  auto *comm = reinterpret_cast<Comm *>(handle);
  if (!comm)
    return ncclInvalidArgument;
  // Its streams' work first.
  synchronizeAll();
  if (comm->segment)
    munmap(comm->segment, sizeof(Segment));
  delete comm;
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommAbort(ncclComm_t handle) {
  auto *comm = reinterpret_cast<Comm *>(handle);
  if (comm && comm->segment)
    comm->segment->aborted.store(1);
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t handle,
                                              ncclResult_t *error) {
  auto *comm = reinterpret_cast<Comm *>(handle);
  if (!comm || !error)
    return ncclInvalidArgument;
  *error = static_cast<ncclResult_t>(comm->asyncError.load());
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  return --groupDepth > 0 ? ncclSuccess : flushGroup();
}

EMU_EXPORT ncclResult_t ncclSend(const void *buffer, size_t count,
                                 ncclDataType_t type, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  return pointToPoint(true, buffer, count, type, peer,
                      reinterpret_cast<Comm *>(comm), stream);
}

EMU_EXPORT ncclResult_t ncclRecv(void *buffer, size_t count,
                                 ncclDataType_t type, int peer, ncclComm_t comm,
                                 cudaStream_t stream) {
  return pointToPoint(false, buffer, count, type, peer,
                      reinterpret_cast<Comm *>(comm), stream);
}

EMU_EXPORT ncclResult_t ncclAllGather(const void *send, void *recv,
                                      size_t count, ncclDataType_t type,
                                      ncclComm_t comm, cudaStream_t stream) {
  return enqueueCollective(
      reinterpret_cast<Comm *>(comm),
      {Kind::AllGather, send, recv, count, type, ncclSum, 0, 0}, stream);
}

EMU_EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv,
                                          size_t count, ncclDataType_t type,
                                          ncclRedOp_t op, ncclComm_t comm,
                                          cudaStream_t stream) {
  return enqueueCollective(
      reinterpret_cast<Comm *>(comm),
      {Kind::ReduceScatter, send, recv, count, type, op, 0, 0}, stream);
}

EMU_EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv,
                                      size_t count, ncclDataType_t type,
                                      ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  return enqueueCollective(reinterpret_cast<Comm *>(comm),
                           {Kind::AllReduce, send, recv, count, type, op, 0, 0},
                           stream);
}

EMU_EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv,
                                      size_t count, ncclDataType_t type,
                                      int root, ncclComm_t comm,
                                      cudaStream_t stream) {
  return enqueueCollective(
      reinterpret_cast<Comm *>(comm),
      {Kind::Broadcast, send, recv, count, type, ncclSum, root, 0}, stream);
}

//===----------------------------------------------------------------------===//
// Symmetric memory
//===----------------------------------------------------------------------===//

EMU_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (!ptr)
    return fail(ncclInvalidArgument, "ncclMemAlloc: a null result");
  BRAID_EMU_LOG("ncclMemAlloc %zu B", size);
  *ptr = allocateSymmetric(size);
  return *ptr ? ncclSuccess
              : fail(ncclSystemError, "ncclMemAlloc: out of memory");
}

EMU_EXPORT ncclResult_t ncclMemFree(void *ptr) {
  if (!ptr)
    return ncclSuccess;
  synchronizeAll();
  std::string why;
  return releaseSymmetric(ptr, why)
             ? ncclSuccess
             : fail(ncclInvalidArgument, "ncclMemFree: " + why);
}

EMU_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t handle, void *buffer,
                                               size_t size, ncclWindow_t *win,
                                               int flags) {
  BRAID_EMU_LOG("ncclCommWindowRegister %zu B (flags %d)", size, flags);
  auto *comm = reinterpret_cast<Comm *>(handle);
  if (!comm || !comm->segment || !win)
    return fail(ncclInvalidArgument, "ncclCommWindowRegister: bad arguments");
  Backing backing;
  const char *what = classify(buffer, size);
  if (!what || std::strcmp(what, "symmetric") != 0 ||
      !backingOf(buffer, size, backing) || backing.offset != 0)
    return fail(ncclInvalidArgument,
                "ncclCommWindowRegister: the buffer is not the start of an "
                "ncclMemAlloc buffer of at least " +
                    std::to_string(size) + " bytes");
  if (comm->nranks > kMaxWindowRanks)
    return fail(ncclInvalidUsage,
                "ncclCommWindowRegister: the emulated device's windows span "
                "at most " +
                    std::to_string(kMaxWindowRanks) + " ranks, not " +
                    std::to_string(comm->nranks));
  Segment &segment = *comm->segment;
  uint64_t seq = ++comm->windowSeq;
  WindowSlot &mine = segment.windows[comm->rank];
  mine.backing = backing;
  mine.host = hostKnowledge();
  mine.posted.store(seq, std::memory_order_release);
  std::string why;
  if (!waitForAll(
          *comm,
          seq, [&](int r) -> auto & { return segment.windows[r].posted; },
          nullptr, "ncclCommWindowRegister waits for the other ranks", why))
    return fail(ncclSystemError, why);
  // A host-level collective: each rank's host has seen what the others had
  // (the buffers' zero fill, typically) complete.
  for (int r = 0; r < comm->nranks; ++r)
    hostLearns(segment.windows[r].host);
  auto window = std::make_unique<Window>();
  window->comm = comm;
  window->buffer = buffer;
  window->stride = symmetricStride(size);
  for (int r = 0; r < comm->nranks; ++r) {
    const Backing &peer = segment.windows[r].backing;
    if (peer.bytes != size)
      return fail(ncclInvalidUsage,
                  "ncclCommWindowRegister: rank " + std::to_string(r) +
                      " registers " + std::to_string(peer.bytes) +
                      " bytes, this rank " + std::to_string(size));
    if (r == comm->rank)
      continue;
    auto *address = static_cast<uint8_t *>(buffer) +
                    (static_cast<int64_t>(r) - comm->rank) *
                        static_cast<int64_t>(window->stride);
    if (!mapPeerSymmetric(address, peer, segment.ranks[r].device, why))
      return fail(ncclSystemError, "ncclCommWindowRegister: " + why);
    window->peers.push_back(address);
  }
  // Nobody posts its next registration into the slots before every rank
  // has read this one's.
  mine.read.store(seq, std::memory_order_release);
  if (!waitForAll(
          *comm, seq, [&](int r) -> auto & { return segment.windows[r].read; },
          nullptr, "ncclCommWindowRegister waits for the other ranks", why))
    return fail(ncclSystemError, why);
  // The window's fields in device memory, where NCCL keeps them.
  void *fields =
      allocate(sizeof(ncclWindow_vidmem), MemoryKind::Device, "NCCL window");
  if (!fields)
    return fail(ncclSystemError, "ncclCommWindowRegister: out of memory");
  ncclWindow_vidmem fieldsValue{};
  fieldsValue.lsaFlatBase =
      static_cast<char *>(buffer) - comm->rank * window->stride;
  fieldsValue.lsaRank = comm->rank;
  fieldsValue.worldRank = comm->rank;
  fieldsValue.stride4G = static_cast<uint32_t>(window->stride >> 32);
  std::memcpy(fields, &fieldsValue, sizeof(fieldsValue));
  window->fields = fields;
  *win = static_cast<ncclWindow_t>(fields);
  std::lock_guard<std::mutex> lock(windowsMutex());
  windows()[fields] = window.release();
  return ncclSuccess;
}

EMU_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t, ncclWindow_t win) {
  Window *window = nullptr;
  {
    std::lock_guard<std::mutex> lock(windowsMutex());
    auto found = windows().find(win);
    if (found == windows().end())
      return fail(ncclInvalidArgument,
                  "ncclCommWindowDeregister: not a window");
    window = found->second;
    windows().erase(found);
  }
  synchronizeAll();
  for (void *peer : window->peers)
    unmapPeerSymmetric(peer);
  std::string why;
  release(window->fields, false, why);
  delete window;
  return ncclSuccess;
}

EMU_EXPORT ncclTeam_t ncclTeamWorld(ncclComm_t handle) {
  auto *comm = reinterpret_cast<Comm *>(handle);
  return {comm ? comm->nranks : 0, comm ? comm->rank : 0, 1};
}

EMU_EXPORT ncclTeam_t ncclTeamLsa(ncclComm_t handle) {
  // Every rank of the machine is in one load/store domain.
  return ncclTeamWorld(handle);
}

EMU_EXPORT int ncclTeamRankToLsa(ncclComm_t, ncclTeam_t, int rank) {
  return rank;
}
