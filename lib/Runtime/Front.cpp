//===- Front.cpp - The C ABI's communication calls, once ------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The communication entry points of braid_rt.h for every backend: argument
// checks, peers, element types and step names here, the work in the calling
// rank's Transport (Front.h).
//
//===----------------------------------------------------------------------===//

// The libraries are built with hidden visibility; only the ABI is exported
// (before any header that includes braid_rt.h without saying so).
#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include "Front.h"

#include "Checks.h"
#include "Diagnostics.h"
#include "Grid.h"
#include "Trace.h"

#include <algorithm>
#include <climits>
#include <iterator>

namespace braid::rt {

const char *opName(OpKind kind) {
  // In OpKind's order.
  static const char *const names[] = {
      "send",       "recv",      "all_gather", "reduce_scatter", "all_reduce",
      "all_to_all", "broadcast", "put",        "barrier",        "task"};
  static_assert(std::size(names) == static_cast<size_t>(OpKind::Task) + 1);
  return names[static_cast<size_t>(kind)];
}

const char *dtypeName(int64_t dtype) {
  static const char *const names[] = {"f32", "f64", "f16", "bf16",
                                      "i8",  "i16", "i32", "i64"};
  static_assert(BRAID_RT_F32 == 0 && BRAID_RT_BF16 == 3 && BRAID_RT_I64 == 7,
                "names is indexed by the dtype code");
  return dtype >= 0 && dtype < 8 ? names[dtype] : nullptr;
}

const char *reductionName(int64_t reduction) {
  static const char *const names[] = {"sum",    "max",   "min",   "product",
                                      "bitand", "bitor", "bitxor"};
  static_assert(BRAID_RT_SUM == 0 && BRAID_RT_BITXOR == 6,
                "names is indexed by the reduction code");
  return reduction >= 0 && reduction < 7 ? names[reduction] : nullptr;
}

int64_t dtypeBytes(int64_t dtype) {
  switch (dtype) {
  case BRAID_RT_F64:
  case BRAID_RT_I64:
    return 8;
  case BRAID_RT_F32:
  case BRAID_RT_I32:
    return 4;
  case BRAID_RT_F16:
  case BRAID_RT_BF16:
  case BRAID_RT_I16:
    return 2;
  case BRAID_RT_I8:
    return 1;
  default:
    return 0;
  }
}

//===----------------------------------------------------------------------===//
// Transfer
//===----------------------------------------------------------------------===//

namespace {
bool isPointToPoint(OpKind kind) {
  return kind == OpKind::Send || kind == OpKind::Recv || kind == OpKind::Put;
}
} // namespace

int64_t Transfer::sourceBytes() const {
  switch (kind) {
  case OpKind::AllToAll:
    return bytes * groupSize;
  case OpKind::ReduceScatter:
    return count * elementSize * groupSize;
  case OpKind::AllReduce:
    return count * elementSize;
  default:
    return bytes;
  }
}

int64_t Transfer::destinationBytes() const {
  switch (kind) {
  case OpKind::AllGather:
  case OpKind::AllToAll:
    return bytes * groupSize;
  case OpKind::ReduceScatter:
  case OpKind::AllReduce:
    return count * elementSize;
  default:
    return bytes;
  }
}

std::string Transfer::groupName() const {
  return layout ? layout->str() : std::string("all ranks");
}

std::string Transfer::describe() const {
  std::string stepText =
      step >= 0 ? formatString(" (step %lld)", static_cast<long long>(step))
                : std::string();
  if (isPointToPoint(kind))
    return formatString("%s%s with peer %d on group %s", opName(kind),
                        stepText.c_str(), peerWorldRank, groupName().c_str());
  return formatString("%s%s on group of %d ranks (%s)", opName(kind),
                      stepText.c_str(), groupSize, groupName().c_str());
}

std::string Transfer::context() const {
  std::string stepText =
      step >= 0 ? formatString("step %lld, ", static_cast<long long>(step))
                : std::string();
  if (isPointToPoint(kind))
    return formatString("%s (%speer %d)", opName(kind), stepText.c_str(),
                        peerWorldRank);
  return formatString("%s (%sgroup of %d ranks, %s)", opName(kind),
                      stepText.c_str(), groupSize, groupName().c_str());
}

std::string Transfer::traceName() const {
  std::string stepText =
      step >= 0 ? formatString(" step %lld", static_cast<long long>(step))
                : std::string();
  std::string size = formatBytes(std::max(sourceBytes(), destinationBytes()));
  long long offset = static_cast<long long>(peerOffset);
  switch (kind) {
  case OpKind::Send:
    return formatString("send%s -> %+lld (%s)", stepText.c_str(), offset,
                        size.c_str());
  case OpKind::Recv:
    return formatString("recv%s <- %+lld (%s)", stepText.c_str(), offset,
                        size.c_str());
  case OpKind::Put:
    return formatString("put%s -> %+lld (%s%s)", stepText.c_str(), offset,
                        size.c_str(), flag ? ", signal" : "");
  case OpKind::Broadcast:
    return formatString("broadcast%s (%d ranks, root %lld, %s)",
                        stepText.c_str(), groupSize,
                        static_cast<long long>(root), size.c_str());
  case OpKind::Barrier:
    return formatString("barrier (%d ranks)", groupSize);
  default:
    return formatString("%s%s (%d ranks, %s)", opName(kind), stepText.c_str(),
                        groupSize, size.c_str());
  }
}

std::string Transfer::traceArgs() const {
  std::string args = formatString(
      "\"op\":\"%s\",\"step\":%lld,\"bytes\":%lld,\"group\":\"%s\","
      "\"ranks\":%d",
      opName(kind), static_cast<long long>(step),
      static_cast<long long>(std::max(sourceBytes(), destinationBytes())),
      jsonEscape(groupName()).c_str(), groupSize);
  if (isPointToPoint(kind))
    args += formatString(",\"peer\":%d,\"offset\":%lld", peerWorldRank,
                         static_cast<long long>(peerOffset));
  if (kind == OpKind::ReduceScatter || kind == OpKind::AllReduce)
    args += formatString(",\"dtype\":\"%s\",\"reduction\":\"%s\"",
                         dtypeName(dtype), reductionName(reduction));
  return args;
}

Transport::~Transport() = default;

} // namespace braid::rt

//===----------------------------------------------------------------------===//
// The entry points
//===----------------------------------------------------------------------===//

using namespace braid::rt;

namespace {

/// One ABI call, marked in the trace.
class CallScope {
public:
  explicit CallScope(Transport &t) : t(t) { t.callBegin(); }
  ~CallScope() { t.callEnd(); }
  CallScope(const CallScope &) = delete;
  CallScope &operator=(const CallScope &) = delete;

private:
  Transport &t;
};

Transfer newTransfer(OpKind kind, const GroupLayout &g, int64_t step) {
  Transfer transfer;
  transfer.kind = kind;
  transfer.step = step;
  transfer.layout = &g;
  transfer.groupSize = g.size;
  return transfer;
}

void setPeer(Transfer &transfer, const GroupLayout &g, int64_t peerOffset) {
  transfer.peerOffset = peerOffset;
  transfer.peerPosition = peerPosition(g.position, g.size, peerOffset);
  transfer.peerWorldRank =
      g.worldRanks[static_cast<size_t>(transfer.peerPosition)];
}

int64_t pointToPoint(OpKind kind, const char *call, int64_t group,
                     int64_t peerOffset, int64_t addr, int64_t bytes,
                     int64_t step) {
  Transport &t = transport(call);
  CallScope scope(t);
  const GroupLayout &g = t.group(group, call);
  checkBuffer(call, "the buffer", addr, bytes, step);
  Transfer transfer = newTransfer(kind, g, step);
  setPeer(transfer, g, peerOffset);
  if (kind == OpKind::Send)
    transfer.src = reinterpret_cast<const void *>(addr);
  else
    transfer.dst = reinterpret_cast<void *>(addr);
  transfer.bytes = bytes;
  return t.post(transfer);
}

/// The element size of a reduction's dtype; aborts for unknown codes and
/// for bitwise reductions of floats.
int64_t checkReductionType(const char *call, int64_t dtype, int64_t reduction,
                           int64_t step) {
  int64_t size = dtypeBytes(dtype);
  if (size == 0)
    fatalf("%s (step %lld): unknown dtype code %lld", call,
           static_cast<long long>(step), static_cast<long long>(dtype));
  if (!reductionName(reduction))
    fatalf("%s (step %lld): unknown reduction code %lld", call,
           static_cast<long long>(step), static_cast<long long>(reduction));
  bool isFloat = dtype == BRAID_RT_F32 || dtype == BRAID_RT_F64 ||
                 dtype == BRAID_RT_F16 || dtype == BRAID_RT_BF16;
  bool isBitwise = reduction == BRAID_RT_BITAND ||
                   reduction == BRAID_RT_BITOR || reduction == BRAID_RT_BITXOR;
  if (isFloat && isBitwise)
    fatalf("%s (step %lld): %s reduction is only defined for integer types, "
           "not %s",
           call, static_cast<long long>(step), reductionName(reduction),
           dtypeName(dtype));
  return size;
}

int64_t reduction(OpKind kind, const char *call, int64_t group, int64_t src,
                  int64_t dst, int64_t count, int64_t dtype,
                  int64_t reductionKind, int64_t step) {
  Transport &t = transport(call);
  CallScope scope(t);
  const GroupLayout &g = t.group(group, call);
  int64_t size = checkReductionType(call, dtype, reductionKind, step);
  checkReductionBuffers(call, kind == OpKind::ReduceScatter, src, dst, count,
                        size, g.size, step);
  Transfer transfer = newTransfer(kind, g, step);
  transfer.src = reinterpret_cast<const void *>(src);
  transfer.dst = reinterpret_cast<void *>(dst);
  transfer.count = count;
  transfer.dtype = dtype;
  transfer.reduction = reductionKind;
  transfer.elementSize = size;
  return t.post(transfer);
}

int64_t blockExchange(OpKind kind, const char *call, int64_t group, int64_t src,
                      int64_t dst, int64_t bytesPerRank, int64_t step) {
  Transport &t = transport(call);
  CallScope scope(t);
  const GroupLayout &g = t.group(group, call);
  checkBlockBuffers(call, kind == OpKind::AllGather, src, dst, bytesPerRank,
                    g.size, step);
  Transfer transfer = newTransfer(kind, g, step);
  transfer.src = reinterpret_cast<const void *>(src);
  transfer.dst = reinterpret_cast<void *>(dst);
  transfer.bytes = bytesPerRank;
  return t.post(transfer);
}

/// The position `peerOffset` names in group `group`, for one-sided calls.
int onePeer(Transport &t, int64_t group, int64_t peerOffset, const char *call) {
  const GroupLayout &g = t.group(group, call);
  return peerPosition(g.position, g.size, peerOffset);
}

} // namespace

int64_t braid_rt_coord(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t axis) {
  int64_t rank = braid_rt_world_rank();
  GridShape shape = makeGridShape("braid_rt_coord", ndims, s0, s1, s2, s3,
                                  static_cast<int>(braid_rt_world_size()));
  if (axis < 0 || axis >= shape.ndims)
    fatalf("braid_rt_coord: axis %lld is out of range for grid %s",
           static_cast<long long>(axis), shape.str().c_str());
  return shape.coordinates(rank)[axis];
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
  const char *call = "braid_rt_broadcast";
  Transport &t = transport(call);
  CallScope scope(t);
  const GroupLayout &g = t.group(group, call);
  if (root < 0 || root >= g.size)
    fatalf("%s (step %lld): root %lld is not a position in a group of %d "
           "ranks",
           call, static_cast<long long>(step), static_cast<long long>(root),
           g.size);
  checkBuffer(call, "the destination", dst, bytes, step);
  if (g.position == root)
    checkBuffer(call, "the source", src, bytes, step);
  Transfer transfer = newTransfer(OpKind::Broadcast, g, step);
  transfer.src = reinterpret_cast<const void *>(src);
  transfer.dst = reinterpret_cast<void *>(dst);
  transfer.bytes = bytes;
  transfer.root = root;
  return t.post(transfer);
}

void braid_rt_wait(int64_t request) {
  Transport &t = transport("braid_rt_wait");
  CallScope scope(t);
  t.wait(request);
}

//===----------------------------------------------------------------------===//
// Symmetric memory and signals
//===----------------------------------------------------------------------===//

int64_t braid_rt_symmetric_alloc(int64_t group, int64_t bytes) {
  const char *call = "braid_rt_symmetric_alloc";
  Transport &t = transport(call);
  CallScope scope(t);
  t.group(group, call);
  if (bytes < 0)
    fatalf("%s: negative size %lld", call, static_cast<long long>(bytes));
  return reinterpret_cast<int64_t>(
      t.symmetricAllocate(group, bytes, /*site=*/-1, call));
}

void braid_rt_symmetric_free(int64_t group, int64_t addr) {
  const char *call = "braid_rt_symmetric_free";
  Transport &t = transport(call);
  CallScope scope(t);
  t.group(group, call);
  t.symmetricFree(group, reinterpret_cast<void *>(addr), call);
}

/// The program whose sites braid_rt_symmetric_site allocates: 0 in a
/// runner's process (one program), each in-process program's own number
/// otherwise (braid_program.h), so that two programs never share a site's
/// buffer and flags (their flags count raises and waits differently).
static int64_t siteScope = 0;

void braid_rt_set_site_scope(int64_t scope) { siteScope = scope; }

int64_t braid_rt_symmetric_site(int64_t group, int64_t bytes, int64_t site) {
  const char *call = "braid_rt_symmetric_site";
  Transport &t = transport(call);
  t.group(group, call);
  if (bytes <= 0 || site < 0 || site >= (int64_t(1) << 32))
    fatalf("%s: site %lld of %lld bytes (expected a site in [0, 2^32) and a "
           "positive size)",
           call, static_cast<long long>(site), static_cast<long long>(bytes));
  // The scope in the high bits: a site of another program is another key.
  return reinterpret_cast<int64_t>(
      t.symmetricAllocate(group, bytes, site | (siteScope << 32), call));
}

int64_t braid_rt_symmetric_peer(int64_t group, int64_t peer_offset,
                                int64_t addr) {
  const char *call = "braid_rt_symmetric_peer";
  Transport &t = transport(call);
  int position = onePeer(t, group, peer_offset, call);
  return reinterpret_cast<int64_t>(
      t.symmetricPeer(group, reinterpret_cast<const void *>(addr), 1, position,
                      /*step=*/-1, call, "the address"));
}

int64_t braid_rt_put(int64_t group, int64_t peer_offset, int64_t src,
                     int64_t dst, int64_t bytes, int64_t flag, int64_t step) {
  const char *call = "braid_rt_put";
  Transport &t = transport(call);
  CallScope scope(t);
  const GroupLayout &g = t.group(group, call);
  checkBuffer(call, "the source", src, bytes, step);
  Transfer transfer = newTransfer(OpKind::Put, g, step);
  setPeer(transfer, g, peer_offset);
  transfer.src = reinterpret_cast<const void *>(src);
  transfer.bytes = bytes;
  if (bytes > 0)
    transfer.dst =
        t.symmetricPeer(group, reinterpret_cast<const void *>(dst), bytes,
                        transfer.peerPosition, step, call, "the destination");
  if (flag) {
    checkSignal(call, flag, 0, step);
    transfer.flag =
        t.symmetricPeer(group, reinterpret_cast<const void *>(flag), 4,
                        transfer.peerPosition, step, call, "the flag");
  }
  return t.put(transfer);
}

void braid_rt_signal_add(int64_t group, int64_t peer_offset, int64_t flag,
                         int64_t value, int64_t step) {
  const char *call = "braid_rt_signal_add";
  Transport &t = transport(call);
  checkSignal(call, flag, 0, step);
  if (value <= 0 || value > INT32_MAX)
    fatalf("%s (step %lld): adds %lld (expected 1 to 2^31 - 1)", call,
           static_cast<long long>(step), static_cast<long long>(value));
  int position = onePeer(t, group, peer_offset, call);
  void *peerFlag = t.symmetricPeer(group, reinterpret_cast<const void *>(flag),
                                   4, position, step, call, "the flag");
  t.signalAdd(group, position, peerFlag, static_cast<uint32_t>(value), step);
}

/// Counts a wait on `flag` (the k-th of this rank) and returns the epoch it
/// waits for, k - slack modulo 2^32.
static uint32_t countWait(const char *call, Transport &t, int64_t flag,
                          int64_t slack, int64_t step) {
  checkSignal(call, flag, 0, step);
  if (slack < 0)
    fatalf("%s (step %lld): negative slack %lld", call,
           static_cast<long long>(step), static_cast<long long>(slack));
  uint32_t &waits = t.waitsOn(reinterpret_cast<void *>(flag), step, call);
  ++waits;
  return waits - static_cast<uint32_t>(slack);
}

void braid_rt_signal_wait_next(int64_t flag, int64_t slack, int64_t step) {
  const char *call = "braid_rt_signal_wait_next";
  Transport &t = transport(call);
  uint32_t epoch = countWait(call, t, flag, slack, step);
  t.signalWaitUntil(reinterpret_cast<void *>(flag), epoch, step);
}

int64_t braid_rt_signal_next_epoch(int64_t flag, int64_t slack, int64_t step) {
  const char *call = "braid_rt_signal_next_epoch";
  return countWait(call, transport(call), flag, slack, step);
}

void braid_rt_signal_set(int64_t addr, int64_t value, int64_t stream,
                         int64_t step) {
  const char *call = "braid_rt_signal_set";
  Transport &t = transport(call);
  checkSignal(call, addr, stream, step);
  t.signalSet(reinterpret_cast<int32_t *>(addr), static_cast<int32_t>(value),
              stream, step);
}

void braid_rt_signal_wait(int64_t addr, int64_t value, int64_t stream,
                          int64_t step) {
  const char *call = "braid_rt_signal_wait";
  Transport &t = transport(call);
  checkSignal(call, addr, stream, step);
  t.signalWait(reinterpret_cast<int32_t *>(addr), static_cast<int32_t>(value),
               stream, step);
}
