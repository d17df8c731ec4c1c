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
/// subviews of the same source that are disjoint in some dimension.
bool mayAlias(Value a, Value b) {
  if (a == b)
    return true;
  if (getRootBuffer(a) != getRootBuffer(b))
    return false;
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
  static int64_t axisSize(Operation *op, FlatSymbolRefAttr grid,
                          ArrayRef<int16_t> axes) {
    shard::GridOp gridOp = dist::lookupGrid(op, grid);
    return gridOp ? dist::getGroupSize(gridOp, axes) : ShapedType::kDynamic;
  }

  static std::string channelOf(Operation *op, int64_t sendOffset) {
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
    int64_t n = axisSize(op, grid, axes);
    int64_t normalized =
        ShapedType::isDynamic(n) ? sendOffset : ((sendOffset % n) + n) % n;
    return (grid.getValue() + "/" + Twine(axes.empty() ? -1 : axes[0]) + "/" +
            Twine(normalized))
        .str();
  }

  static std::string axisText(Operation *op) {
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
    return ("along axis " + Twine(axes.empty() ? -1 : axes[0]) + " of @" +
            grid.getValue())
        .str();
  }

  static std::string peer(int64_t offset) {
    if (offset == 0)
      return "rank r";
    return ("rank r" + Twine(offset > 0 ? "+" : "") + Twine(offset)).str();
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

  /// What `op` does to memory, by buffer; unknown ops read and write every
  /// memref they take.
  static void accesses(Operation &op, SmallVectorImpl<Value> &reads,
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
    markAllAnalysesPreserved();
  }
};

} // namespace
