//===- CheckSchedule.cpp - Deadlock and race freedom of transfers -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

namespace braid::xfer {
#define GEN_PASS_DEF_CHECKSCHEDULE
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;
using namespace braid;
using namespace braid::xfer;

namespace {

/// Static [begin, end) ranges of a subview of its source, or nothing.
std::optional<SmallVector<std::pair<int64_t, int64_t>>> staticRanges(Value v) {
  auto subview = v.getDefiningOp<memref::SubViewOp>();
  if (!subview)
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (auto [offset, size, stride] :
       llvm::zip(subview.getStaticOffsets(), subview.getStaticSizes(),
                 subview.getStaticStrides())) {
    if (ShapedType::isDynamic(offset) || ShapedType::isDynamic(size) ||
        stride != 1)
      return std::nullopt;
    ranges.push_back({offset, offset + size});
  }
  return ranges;
}

/// Conservative: buffers of one allocation overlap unless they are static
/// subviews of the same source that are disjoint in some dimension; planned
/// buffers overlap where their bytes in the arena do.
bool mayAlias(Value a, Value b) {
  if (a == b)
    return true;
  Value rootA = getRootBuffer(a), rootB = getRootBuffer(b);
  if (rootA != rootB) {
    // Two buffers of a memory plan share bytes only where the plan found
    // their lifetimes disjoint: a race between them is a wrong plan.
    return arenaBytesOverlap(rootA, rootB);
  }
  auto ra = staticRanges(a), rb = staticRanges(b);
  if (!ra || !rb ||
      a.getDefiningOp()->getOperand(0) != b.getDefiningOp()->getOperand(0))
    return true;
  for (auto [x, y] : llvm::zip(*ra, *rb))
    if (x.second <= y.first || y.second <= x.first)
      return false;
  return true;
}

std::string describeBuffer(Value buffer) {
  std::string text;
  llvm::raw_string_ostream os(text);
  buffer.printAsOperand(os, OpPrintingFlags().useLocalScope());
  os << " (" << buffer.getType() << ")";
  return text;
}

/// A peer offset of `op` (a transfer on a grid's axes) modulo its group's
/// size, where that size is known.
static int64_t normalizedOffset(Operation *op, int64_t offset) {
  auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
  auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
  shard::GridOp gridOp = dist::lookupGrid(op, grid);
  int64_t n = gridOp ? dist::getGroupSize(gridOp, axes) : ShapedType::kDynamic;
  return ShapedType::isDynamic(n) || n <= 0 ? offset : ((offset % n) + n) % n;
}

static std::string peer(int64_t offset) {
  if (offset == 0)
    return "rank r";
  return ("rank r" + Twine(offset > 0 ? "+" : "") + Twine(offset)).str();
}

/// What `op` does to memory, by buffer; unknown ops read and write every
/// memref they take.
void accesses(Operation &op, SmallVectorImpl<Value> &reads,
              SmallVectorImpl<Value> &writes) {
  if (isa<WaitOp>(op))
    return;
  if (auto effects = dyn_cast<MemoryEffectOpInterface>(op)) {
    SmallVector<MemoryEffects::EffectInstance> list;
    effects.getEffects(list);
    for (auto &effect : list) {
      Value value = effect.getValue();
      if (!value || !isa<BaseMemRefType>(value.getType()))
        continue;
      if (isa<MemoryEffects::Read>(effect.getEffect()))
        reads.push_back(value);
      else if (isa<MemoryEffects::Write, MemoryEffects::Free>(
                   effect.getEffect()))
        writes.push_back(value);
    }
    return;
  }
  if (op.hasTrait<OpTrait::HasRecursiveMemoryEffects>() ||
      op.getNumRegions() == 0) {
    if (isMemoryEffectFree(&op))
      return;
  }
  for (Value operand : op.getOperands())
    if (isa<BaseMemRefType>(operand.getType())) {
      reads.push_back(operand);
      writes.push_back(operand);
    }
}

/// How many sends and receives each channel gets in a whole block.
struct Totals {
  llvm::StringMap<size_t> sends, recvs;
};

/// One posted transfer, until its wait.
struct Pending {
  Operation *op = nullptr;
  bool isSend = false, isRecv = false;
  std::string channel; ///< grid, axis and the matching send offset.
  size_t index = 0;    ///< Position among the sends (or receives) of it.
  int64_t step = 0;
  SmallVector<Value> reads, writes;
};

class Checker {
public:
  explicit Checker(Operation *root) : root(root) {}

  LogicalResult checkBlock(Block &block) {
    llvm::MapVector<Value, Pending> pending;
    llvm::StringMap<SmallVector<Operation *>> sends, recvs;
    // How many sends and receives each channel gets in the whole block, to
    // tell a wait that comes too early from one that waits forever.
    Totals totals;
    for (Operation &op : block) {
      if (auto send = dyn_cast<SendOp>(op))
        ++totals.sends[channelOf(&op, send.getOffset())];
      if (auto recv = dyn_cast<RecvOp>(op))
        ++totals.recvs[channelOf(&op, -recv.getOffset())];
    }
    for (Operation &op : block) {
      if (failed(checkHazards(op, pending)))
        return failure();
      if (auto wait = dyn_cast<WaitOp>(op)) {
        for (Value request : wait.getRequests()) {
          auto it = pending.find(request);
          if (it == pending.end())
            return wait.emitError()
                   << "waits for a request posted in another block; the "
                      "schedule cannot be checked";
          if (failed(checkWait(wait, it->second, sends, recvs, totals)))
            return failure();
          pending.erase(it);
        }
        continue;
      }
      if (op.getNumResults() == 1 &&
          isa<RequestType>(op.getResult(0).getType()))
        pending[op.getResult(0)] = post(op, sends, recvs);
      for (Region &region : op.getRegions())
        for (Block &nested : region)
          if (failed(checkBlock(nested)))
            return failure();
    }
    if (!pending.empty()) {
      Pending &first = pending.front().second;
      return first.op->emitError()
             << "the transfer of step " << first.step
             << " is not waited in the block that posts it";
    }
    return success();
  }

private:
  static std::string channelOf(Operation *op, int64_t sendOffset) {
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
    return (grid.getValue() + "/" + Twine(axes.empty() ? -1 : axes[0]) + "/" +
            Twine(normalizedOffset(op, sendOffset)))
        .str();
  }

  static std::string axisText(Operation *op) {
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
    return ("along axis " + Twine(axes.empty() ? -1 : axes[0]) + " of @" +
            grid.getValue())
        .str();
  }

  Pending post(Operation &op, llvm::StringMap<SmallVector<Operation *>> &sends,
               llvm::StringMap<SmallVector<Operation *>> &recvs) {
    Pending p;
    p.op = &op;
    if (auto step = op.getAttrOfType<IntegerAttr>("step"))
      p.step = step.getInt();
    if (auto send = dyn_cast<SendOp>(op)) {
      p.isSend = true;
      p.channel = channelOf(&op, send.getOffset());
      p.index = sends[p.channel].size();
      sends[p.channel].push_back(&op);
      p.reads.push_back(send.getBuffer());
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      p.isRecv = true;
      p.channel = channelOf(&op, -recv.getOffset());
      p.index = recvs[p.channel].size();
      recvs[p.channel].push_back(&op);
      p.writes.push_back(recv.getBuffer());
    } else if (auto put = dyn_cast<PutOp>(op)) {
      // It writes a peer's copy, which the signal protocol orders.
      p.reads.push_back(put.getSource());
    } else {
      // Collectives: every rank calls them in the same order, so only
      // their buffers need watching.
      p.reads.push_back(op.getOperand(0));
      p.writes.push_back(op.getOperand(1));
    }
    return p;
  }

  LogicalResult checkWait(WaitOp wait, const Pending &p,
                          llvm::StringMap<SmallVector<Operation *>> &sends,
                          llvm::StringMap<SmallVector<Operation *>> &recvs,
                          const Totals &totals) {
    if (p.isRecv) {
      auto recv = cast<RecvOp>(p.op);
      if (totals.sends.lookup(p.channel) <= p.index)
        return wait.emitError()
               << "unmatched: the receive of step " << p.step << " from "
               << peer(recv.getOffset()) << " " << axisText(p.op)
               << " has no matching send in this block: " << p.index + 1
               << " receive(s), " << totals.sends.lookup(p.channel)
               << " send(s); it never completes";
      if (sends.lookup(p.channel).size() <= p.index)
        return wait.emitError()
               << "deadlock: rank r waits at step " << p.step
               << " for the receive from " << peer(recv.getOffset()) << " "
               << axisText(p.op) << " before the matching send is posted; "
               << peer(recv.getOffset())
               << " runs the same program and waits here too";
      Operation *send = sends.lookup(p.channel)[p.index];
      int64_t sent = bytes(send->getOperand(0));
      int64_t received = bytes(recv.getBuffer());
      if (sent != received)
        return wait.emitError()
               << "step " << p.step << ": " << peer(recv.getOffset())
               << " sends " << sent << " bytes " << axisText(p.op)
               << " but rank r receives " << received << " into "
               << describeBuffer(recv.getBuffer());
    }
    if (p.isSend && totals.recvs.lookup(p.channel) <= p.index) {
      auto send = cast<SendOp>(p.op);
      return wait.emitError()
             << "unmatched: the send of step " << p.step << " to "
             << peer(send.getOffset()) << " " << axisText(p.op)
             << " has no matching receive in this block: " << p.index + 1
             << " send(s), " << totals.recvs.lookup(p.channel)
             << " receive(s); it never completes";
    }
    if (p.isSend && recvs.lookup(p.channel).size() <= p.index) {
      auto send = cast<SendOp>(p.op);
      return wait.emitError()
             << "deadlock: rank r waits at step " << p.step
             << " for its send to " << peer(send.getOffset()) << " "
             << axisText(p.op)
             << " to complete before posting the matching receive; "
             << peer(send.getOffset()) << " runs the same program and waits "
             << "here too";
    }
    return success();
  }

  static int64_t bytes(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    if (!type.hasStaticShape())
      return -1;
    return type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
  }

  LogicalResult checkHazards(Operation &op,
                             llvm::MapVector<Value, Pending> &pending) {
    if (pending.empty())
      return success();
    SmallVector<Value> reads, writes;
    op.walk([&](Operation *nested) { accesses(*nested, reads, writes); });
    for (auto &[request, p] : pending) {
      if (&op == p.op)
        continue;
      for (Value written : writes)
        for (Value source : p.reads)
          if (mayAlias(written, source))
            return op.emitError() << "race: '" << op.getName() << "' writes "
                                  << describeBuffer(written) << " while the "
                                  << p.op->getName() << " of step " << p.step
                                  << " still reads it (it is waited later)";
      for (Value touched : llvm::concat<Value>(reads, writes))
        for (Value dest : p.writes)
          if (mayAlias(touched, dest))
            return op.emitError() << "race: '" << op.getName() << "' accesses "
                                  << describeBuffer(touched) << " while the "
                                  << p.op->getName() << " of step " << p.step
                                  << " still writes it (it is waited later)";
    }
    return success();
  }

  Operation *root;
};

/// Proves the signal protocol of a function's one-sided transfers: puts,
/// signals and signal waits on symmetric flags. Every rank runs the same
/// program, so a rank's flag is raised by its peers at the same program
/// points where it raises theirs, and positions in the one program order
/// compare events of different ranks. Flags keep counting across calls, so
/// every rule also holds between the end of one call and the start of the
/// next.
class SignalChecker {
public:
  LogicalResult check(FunctionOpInterface function) {
    SmallVector<Operation *> ops;
    function.walk([&](Operation *op) {
      if (isa<PutOp, SignalOp, SignalWaitOp, PeerViewOp>(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return success();
    Region &body = function.getFunctionBody();
    for (Operation *op : ops)
      if (!isa<PeerViewOp>(op) &&
          (op->getBlock() != &body.front() || !body.hasOneBlock()))
        return op->emitError()
               << "the signal protocol cannot be checked: signals and puts "
                  "inside loops, branches or other blocks are not modeled "
                  "(pass --check-schedule=false to skip the check)";
    size_t pos = 0;
    for (Operation &op : body.front())
      position[&op] = pos++;
    if (failed(collect(body.front())) || failed(checkReads(body.front())) ||
        failed(checkBalance()))
      return failure();
    for (auto &[alloc, slot] : slots)
      for (auto [j, writer] : llvm::enumerate(slot.writers))
        if (failed(checkCredit(writer, j + 1, alloc, slot)))
          return failure();
    return success();
  }

private:
  using Flag = std::pair<Operation *, int64_t>;
  struct Raise {
    Operation *op;
    size_t pos;
    int64_t offset; ///< Normalized to [0, group size).
    int64_t add;
  };
  struct FlagEvents {
    SmallVector<Raise> raises;
    int64_t raised = 0;                                  ///< Sum of the adds.
    SmallVector<std::pair<SignalWaitOp, int64_t>> waits; ///< With epochs.
    Operation *slot = nullptr; ///< The symmetric buffer whose puts raise it.
  };
  /// A delivery into a peer's copy of a slot: a put, or the stores of an
  /// op through a peer view (a kernel, braid-fuse-puts) that a signal
  /// `for` the slot announces.
  struct Writer {
    Operation *op;  ///< The put, or the first op storing.
    int64_t offset; ///< The peer's offset, as written.
    int64_t step;
    /// An op that names the writer's group (the put, or the peer view).
    Operation *grouped;
  };
  /// A symmetric buffer that peers put into.
  struct Slot {
    SmallVector<Writer> writers;
    std::optional<Flag> data;
    /// The last position reading each delivery (1-based, within a call).
    DenseMap<int64_t, size_t> lastRead;
  };

  static std::string symmetricText(Operation *alloc) {
    auto op = cast<SymmetricAllocOp>(alloc);
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "symmetric buffer site " << op.getSite() << " (" << op.getType()
       << ")";
    return text;
  }

  static std::string flagText(Flag flag) {
    return ("flag " + Twine(flag.second) + " of " + symmetricText(flag.first))
        .str();
  }

  static int64_t stepOf(Operation *op) {
    auto step = op->getAttrOfType<IntegerAttr>("step");
    return step ? step.getInt() : -1;
  }

  FailureOr<Flag> flagOf(Operation *op, Value flags, Value index) {
    auto alloc = flags.getDefiningOp<SymmetricAllocOp>();
    std::optional<int64_t> i = getConstantIntValue(index);
    if (!alloc || !i)
      return op->emitError()
             << "the signal protocol cannot be checked: the flag must be a "
                "constant index into an 'xfer.symmetric_alloc' (pass "
                "--check-schedule=false to skip the check)";
    return Flag{alloc.getOperation(), *i};
  }

  /// Puts, raises and waits, in program order; a wait whose epoch no raise
  /// before it reaches deadlocks.
  LogicalResult collect(Block &block) {
    for (Operation &op : block) {
      size_t pos = position.lookup(&op);
      if (auto put = dyn_cast<PutOp>(op)) {
        Operation *dest = getSymmetricAlloc(put.getDest());
        Slot &slot = slots[dest];
        slot.writers.push_back({put, put.getOffset(), put.getStep(), put});
        if (!put.getFlags())
          continue;
        FailureOr<Flag> flag = flagOf(put, put.getFlags(), put.getIndex());
        if (failed(flag))
          return failure();
        FlagEvents &events = flags[*flag];
        if ((slot.data && *slot.data != *flag) ||
            (events.slot && events.slot != dest) ||
            (!events.slot && !events.raises.empty()))
          return put.emitError()
                 << "step " << put.getStep() << ": the put into "
                 << symmetricText(dest) << " raises " << flagText(*flag)
                 << ", which other ops raise too; a reader cannot tell which "
                    "data has landed";
        slot.data = *flag;
        events.slot = dest;
        events.raises.push_back(
            {put, pos, normalizedOffset(put, put.getOffset()), 1});
        ++events.raised;
      } else if (auto signal = dyn_cast<SignalOp>(op)) {
        FailureOr<Flag> flag =
            flagOf(signal, signal.getFlags(), signal.getIndex());
        if (failed(flag))
          return failure();
        FlagEvents &events = flags[*flag];
        if (signal.getData()) {
          if (failed(announce(signal, *flag, pos)))
            return failure();
          continue;
        }
        if (events.slot)
          return signal.emitError()
                 << "step " << signal.getStep() << ": " << flagText(*flag)
                 << " announces the puts into " << symmetricText(events.slot)
                 << "; raising it here tells a reader data has landed that "
                    "has not";
        int64_t add = static_cast<int64_t>(signal.getAdd());
        events.raises.push_back(
            {signal, pos, normalizedOffset(signal, signal.getOffset()), add});
        events.raised += add;
      } else if (auto wait = dyn_cast<SignalWaitOp>(op)) {
        FailureOr<Flag> flag = flagOf(wait, wait.getFlags(), wait.getIndex());
        if (failed(flag))
          return failure();
        FlagEvents &events = flags[*flag];
        int64_t epoch = static_cast<int64_t>(events.waits.size()) + 1 -
                        static_cast<int64_t>(wait.getSlack());
        if (epoch > events.raised)
          return wait.emitError()
                 << "deadlock: rank r waits at step " << wait.getStep()
                 << " for " << flagText(*flag) << " to reach epoch " << epoch
                 << " of this call, but the program raises it only "
                 << events.raised
                 << " time(s) before this point; the peers that raise it run "
                    "the same program and wait here too";
        events.waits.push_back({wait, epoch});
        waitEpoch[wait] = {*flag, epoch};
      } else if (failed(collectPeerStores(op))) {
        return failure();
      }
    }
    if (!stores.empty()) {
      auto &[key, store] = stores.front();
      return store.first->emitError()
             << "stores into the copy of " << symmetricText(key.first)
             << " that " << peer(key.second)
             << " holds, but no 'xfer.signal' for it at that peer offset "
                "follows: nothing tells "
             << peer(key.second) << " when the data has landed";
    }
    return success();
  }

  /// Stores of `op` (or of ops nested in it) through a peer view of a
  /// symmetric buffer: pending until a signal for that buffer announces
  /// them. Loads through a peer view are not modeled, but for an
  /// accumulator the op stores into as well (a contraction's output in a
  /// peer's slot, read back after this rank's own fill or stores).
  LogicalResult collectPeerStores(Operation &op) {
    SmallVector<Value> reads, writes;
    op.walk([&](Operation *nested) {
      SmallVector<Value> own;
      size_t first = writes.size();
      accesses(*nested, own, writes);
      ArrayRef<Value> written = ArrayRef(writes).drop_front(first);
      for (Value read : own)
        if (!llvm::is_contained(written, read))
          reads.push_back(read);
    });
    for (auto [values, writing] : {std::pair(&reads, false), {&writes, true}})
      for (Value value : *values) {
        auto view = getRootBuffer(value).getDefiningOp<PeerViewOp>();
        if (!view)
          continue;
        SymmetricAllocOp alloc = getSymmetricAlloc(view.getBuffer());
        if (!writing || !alloc)
          return op.emitError()
                 << "the signal protocol cannot be checked: '" << op.getName()
                 << "' " << (writing ? "stores into" : "loads from")
                 << " a peer's copy of a buffer, which is modeled only for "
                    "stores into a symmetric buffer that a signal announces "
                    "(pass --check-schedule=false to skip the check)";
        int64_t offset = normalizedOffset(view, view.getOffset());
        stores.try_emplace({alloc.getOperation(), offset}, &op, view);
      }
    return success();
  }

  /// A signal for a slot: the delivery of the stores into the copy of it
  /// that the signalled peer holds, as a put with that signal would be.
  LogicalResult announce(SignalOp signal, Flag flag, size_t pos) {
    Operation *dest = getSymmetricAlloc(signal.getData());
    int64_t offset = normalizedOffset(signal, signal.getOffset());
    auto it = stores.find({dest, offset});
    if (it == stores.end())
      return signal.emitError()
             << "step " << signal.getStep() << ": announces data in "
             << symmetricText(dest) << " of " << peer(signal.getOffset())
             << ", but rank r stored nothing into that copy since the last "
                "announcement";
    auto [writer, view] = it->second;
    stores.erase(it);
    Slot &slot = slots[dest];
    FlagEvents &events = flags[flag];
    if ((slot.data && *slot.data != flag) ||
        (events.slot && events.slot != dest) ||
        (!events.slot && !events.raises.empty()))
      return signal.emitError()
             << "step " << signal.getStep() << ": the delivery into "
             << symmetricText(dest) << " raises " << flagText(flag)
             << ", which other ops raise too; a reader cannot tell which "
                "data has landed";
    slot.data = flag;
    events.slot = dest;
    slot.writers.push_back({writer, view.getOffset(),
                            static_cast<int64_t>(signal.getStep()), view});
    events.raises.push_back({signal, pos, offset, 1});
    ++events.raised;
    return success();
  }

  /// Every local read of a slot comes after a wait on its data flag, which
  /// tells the delivery it reads; nothing but puts writes a slot.
  LogicalResult checkReads(Block &block) {
    DenseMap<Operation *, int64_t> delivered;
    for (Operation &op : block) {
      size_t pos = position.lookup(&op);
      if (auto wait = dyn_cast<SignalWaitOp>(op)) {
        auto [flag, epoch] = waitEpoch.lookup(wait);
        if (Operation *alloc = flags.lookup(flag).slot)
          delivered[alloc] = std::max(delivered[alloc], epoch);
        continue;
      }
      if (isa<SignalOp, SymmetricAllocOp, PeerViewOp>(op))
        continue;
      // A transfer reads its source until its wait.
      size_t until = pos;
      if (op.getNumResults() == 1 &&
          isa<RequestType>(op.getResult(0).getType()))
        for (Operation *user : op.getResult(0).getUsers())
          if (isa<WaitOp>(user) && position.count(user))
            until = std::max(until, position.lookup(user));
      SmallVector<Value> reads, writes;
      op.walk([&](Operation *nested) {
        if (auto put = dyn_cast<PutOp>(nested)) {
          reads.push_back(put.getSource());
          return;
        }
        if (!isa<SignalOp, SignalWaitOp>(nested))
          accesses(*nested, reads, writes);
      });
      for (Value written : writes) {
        auto it = slots.find(getSymmetricAlloc(written));
        if (it == slots.end())
          continue;
        const Writer &put = it->second.writers.front();
        return op.emitError() << "race: '" << op.getName() << "' writes "
                              << symmetricText(it->first) << ", which "
                              << peer(-put.offset) << " puts into at step "
                              << put.step << "; only puts may write it";
      }
      for (Value read : reads) {
        auto it = slots.find(getSymmetricAlloc(read));
        if (it == slots.end())
          continue;
        Slot &slot = it->second;
        const Writer &put = slot.writers.front();
        if (!slot.data)
          return op.emitError()
                 << "'" << op.getName() << "' reads "
                 << symmetricText(it->first) << ", but the put of step "
                 << put.step << " from " << peer(-put.offset)
                 << " into it raises no flag: nothing tells rank r when the "
                    "data has landed";
        int64_t epoch = delivered.lookup(it->first);
        if (epoch <= 0)
          return op.emitError()
                 << "race: '" << op.getName() << "' reads "
                 << symmetricText(it->first) << ", which " << peer(-put.offset)
                 << " puts into at step " << put.step << ", before waiting for "
                 << flagText(*slot.data) << " that announces the data";
        size_t &last = slot.lastRead[epoch];
        last = std::max(last, until);
      }
    }
    return success();
  }

  /// A flag raised more often per call than it is waited makes the next
  /// call's waits return early; less often, a later call waits forever.
  LogicalResult checkBalance() {
    for (auto &[flag, events] : flags) {
      int64_t waited = events.waits.size();
      if (waited == 0 || waited == events.raised)
        continue;
      SignalWaitOp wait = events.waits.front().first;
      if (events.raises.empty())
        return wait.emitError()
               << "unbalanced: " << flagText(flag) << " is waited " << waited
               << " time(s) per call (first at step " << wait.getStep()
               << ") but never raised; a later call waits forever";
      return wait.emitError()
             << "unbalanced: " << flagText(flag) << " is raised "
             << events.raised << " time(s) per call (first at step "
             << stepOf(events.raises.front().op) << ") but waited " << waited
             << " time(s) (first at step " << wait.getStep() << "); "
             << (events.raised > waited
                     ? "the next call's waits would pass before their data"
                     : "a later call waits forever");
    }
    return success();
  }

  /// The j-th put of a call into a slot (1-based) overwrites what the
  /// previous one delivered. Some earlier wait of the writer must cover a
  /// raise that the reader makes after its last read of that delivery, the
  /// previous call's last delivery for the first put (a credit).
  LogicalResult checkCredit(const Writer &put, int64_t j, Operation *alloc,
                            Slot &slot) {
    int64_t puts = slot.writers.size();
    // Events of earlier calls are one call back per period.
    auto locate = [](int64_t k, int64_t period) {
      int64_t call = k >= 1 ? (k - 1) / period : -((period - k) / period);
      return std::pair<int64_t, int64_t>{call, k - call * period};
    };
    auto [readCall, delivery] = locate(j - 1, puts);
    auto read = slot.lastRead.find(delivery);
    if (read == slot.lastRead.end())
      return success(); // Nothing reads what this put overwrites.
    size_t putPos = position.lookup(put.op);
    int64_t toWriter = normalizedOffset(put.grouped, -put.offset);
    for (auto &[flag, events] : flags) {
      if (events.raised <= 0 || events.raises.size() != size_t(events.raised))
        continue;
      for (auto [wait, epoch] : events.waits) {
        if (position.lookup(wait) >= putPos)
          break;
        auto [raiseCall, index] = locate(epoch, events.raised);
        const Raise &raise = events.raises[index - 1];
        if (raise.offset == toWriter &&
            std::pair<int64_t, size_t>(raiseCall, raise.pos) >
                std::pair<int64_t, size_t>(readCall, read->second))
          return success();
      }
    }
    bool isPut = isa<PutOp>(put.op);
    return put.op->emitError()
           << "race: the " << (isPut ? "put" : "stores") << " of step "
           << put.step << " into " << symmetricText(alloc) << " of "
           << peer(put.offset) << " may land before " << peer(put.offset)
           << " has read what the previous " << (isPut ? "put" : "delivery")
           << " left there: no earlier "
              "signal_wait of rank r covers a flag that "
           << peer(put.offset) << " raises after that read (a credit)";
  }

  DenseMap<Operation *, size_t> position;
  DenseMap<Operation *, std::pair<Flag, int64_t>> waitEpoch;
  llvm::MapVector<Flag, FlagEvents> flags;
  llvm::MapVector<Operation *, Slot> slots;
  /// Stores through peer views not announced yet, by slot and normalized
  /// peer offset: the first op storing, and its view.
  llvm::MapVector<std::pair<Operation *, int64_t>,
                  std::pair<Operation *, PeerViewOp>>
      stores;
};

struct CheckSchedulePass
    : public braid::xfer::impl::CheckScheduleBase<CheckSchedulePass> {
  void runOnOperation() override {
    FunctionOpInterface function = getOperation();
    if (function.isExternal())
      return;
    Checker checker(function);
    for (Block &block : function.getFunctionBody())
      if (failed(checker.checkBlock(block)))
        return signalPassFailure();
    if (failed(SignalChecker().check(function)))
      return signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
