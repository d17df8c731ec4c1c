//===- SymmetricTransfers.cpp - Ring transfers through symmetric memory ---===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace braid::xfer {
#define GEN_PASS_DEF_SYMMETRICTRANSFERS
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;
using namespace braid;
using namespace braid::xfer;

namespace {

/// A send and the receive it meets on the peer: one slot, two flags.
struct Channel {
  SendOp send;
  RecvOp recv;
  int64_t index = 0; // Within its group's flags.
};

/// The channels of one group (grid and axis): one flag buffer.
struct GroupChannels {
  FlatSymbolRefAttr grid;
  int16_t axis = 0;
  SmallVector<Channel> channels;
};

/// The single xfer.wait of a request, in the block of the op that made it.
WaitOp waitOf(Operation *op) {
  Value request = op->getResult(0);
  if (!request.hasOneUse())
    return {};
  auto wait = dyn_cast<WaitOp>(*request.user_begin());
  return wait && wait->getBlock() == op->getBlock() ? wait : WaitOp();
}

struct SymmetricTransfersPass
    : public braid::xfer::impl::SymmetricTransfersBase<SymmetricTransfersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk([&](SymmetricAllocOp alloc) {
      nextSite = std::max<int64_t>(nextSite, alloc.getSite() + 1);
    });
    SmallVector<FunctionOpInterface> functions;
    module.walk([&](FunctionOpInterface f) { functions.push_back(f); });
    for (FunctionOpInterface function : functions)
      if (!function.isExternal() && failed(processFunction(function)))
        return signalPassFailure();
  }

  LogicalResult processFunction(FunctionOpInterface function) {
    StringRef mark = dist::DistDialect::getSymmetricAttrName();
    // Marked sends and receives by (grid, axis, +d, step), in program order.
    using Key = std::tuple<StringRef, int16_t, int64_t, int64_t>;
    llvm::MapVector<Key, std::pair<SmallVector<SendOp>, SmallVector<RecvOp>>>
        byKey;
    function.walk([&](Operation *op) {
      if (!op->hasAttr(mark))
        return;
      if (auto send = dyn_cast<SendOp>(op))
        byKey[{send.getGrid(), send.getAxes()[0],
               static_cast<int64_t>(send.getOffset()),
               static_cast<int64_t>(send.getStep())}]
            .first.push_back(send);
      else if (auto recv = dyn_cast<RecvOp>(op))
        byKey[{recv.getGrid(), recv.getAxes()[0],
               -static_cast<int64_t>(recv.getOffset()),
               static_cast<int64_t>(recv.getStep())}]
            .second.push_back(recv);
    });
    if (byKey.empty())
      return success();

    llvm::MapVector<std::pair<StringRef, int16_t>, GroupChannels> groups;
    for (auto &[key, ops] : byKey) {
      auto &[sends, recvs] = ops;
      if (sends.size() != recvs.size()) {
        Operation *extra = sends.size() > recvs.size()
                               ? sends[recvs.size()].getOperation()
                               : recvs[sends.size()].getOperation();
        return extra->emitError()
               << "braid-symmetric-transfers: this transfer at step "
               << std::get<3>(key) << " has no partner: the function has "
               << sends.size() << " marked sends with offset "
               << std::get<2>(key) << " and " << recvs.size()
               << " marked receives with offset " << -std::get<2>(key);
      }
      for (auto [send, recv] : llvm::zip(sends, recvs)) {
        MemRefType in = send.getBuffer().getType();
        MemRefType out = recv.getBuffer().getType();
        if (!in.hasStaticShape() || !out.hasStaticShape() ||
            in.getElementType() != out.getElementType() ||
            in.getNumElements() != out.getNumElements())
          return send.emitError()
                 << "braid-symmetric-transfers: the send (" << in
                 << ") and the receive it meets (" << out
                 << ") need static shapes and the same elements";
        for (Operation *op : {send.getOperation(), recv.getOperation()})
          if (!waitOf(op))
            return op->emitError() << "braid-symmetric-transfers: the "
                                      "request must be waited in its block";
        GroupChannels &group = groups[{send.getGrid(), send.getAxes()[0]}];
        group.grid = send.getGridAttr();
        group.axis = send.getAxes()[0];
        group.channels.push_back(
            {send, recv, static_cast<int64_t>(group.channels.size())});
      }
    }

    lastAfterWait.clear();
    emptyWaits.clear();
    Block &entry = function.getFunctionBody().front();
    OpBuilder b(function.getContext());
    for (GroupChannels &group : llvm::make_second_range(groups)) {
      int64_t count = group.channels.size();
      Location loc = function.getLoc();
      b.setInsertionPointToStart(&entry);
      DenseI16ArrayAttr axes = b.getDenseI16ArrayAttr({group.axis});
      // Flags [0, count) carry data, [count, 2 count) credits.
      Value flags = SymmetricAllocOp::create(
                        b, loc, MemRefType::get({2 * count}, b.getI32Type()),
                        group.grid, axes, b.getI64IntegerAttr(nextSite++))
                        .getBuffer();
      for (Channel &channel : group.channels) {
        // After the allocations so far: the op the block started with may
        // be a transfer that the rewrite erases.
        b.setInsertionPointAfterValue(flags);
        MemRefType recvType = channel.recv.getBuffer().getType();
        Value slot =
            SymmetricAllocOp::create(
                b, channel.recv.getLoc(),
                MemRefType::get(recvType.getShape(), recvType.getElementType()),
                group.grid, axes, b.getI64IntegerAttr(nextSite++))
                .getBuffer();
        // The flag indices, at the entry too.
        Value data = arith::ConstantIndexOp::create(b, loc, channel.index);
        Value credit =
            arith::ConstantIndexOp::create(b, loc, count + channel.index);
        rewrite(channel, slot, flags, data, credit);
        ++numChannels;
      }
    }
    // Waits left with no request go once every channel was placed after
    // them.
    for (Operation *wait : emptyWaits)
      if (wait->getNumOperands() == 0)
        wait->erase();
    // Then, where the receive buffer is only read, its readers read the
    // slot itself and the credit goes back after the last of them.
    for (CopyOut &out : copyOuts)
      if (zeroCopy(out))
        ++numZeroCopy;
    copyOuts.clear();
    return success();
  }

  /// A receive's copy out of its slot and the credit after it.
  struct CopyOut {
    memref::CopyOp copy;
    SignalOp credit;
  };

  /// A view of its first operand (a kernel's row tile, a piece).
  static bool isView(Operation *op) {
    return isa<memref::SubViewOp, memref::CastOp, memref::ExpandShapeOp,
               memref::CollapseShapeOp>(op);
  }

  /// Whether `use` only reads its buffer: a linalg input, the source of a
  /// copy, put or send, a load, or a view (a kernel's row tile) whose every
  /// use only reads.
  static bool readsOnly(OpOperand &use) {
    Operation *user = use.getOwner();
    if (isView(user))
      return use.getOperandNumber() == 0 &&
             llvm::all_of(user->getResult(0).getUses(), [](OpOperand &viewUse) {
               return readsOnly(viewUse);
             });
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user))
      return linalgOp.isDpsInput(&use);
    if (isa<memref::CopyOp, PutOp, SendOp>(user))
      return use.getOperandNumber() == 0;
    return isa<memref::LoadOp, vector::TransferReadOp, vector::LoadOp>(user);
  }

  /// The last op of `block` reading through `use` (which readsOnly()
  /// accepts): its user's ancestor there, or, for a view, the last reader
  /// of the view; a transfer reads its source until its wait. Null if a
  /// reader lies outside `block`.
  static Operation *lastReader(OpOperand &use, Block *block) {
    Operation *user = use.getOwner();
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!top)
      return nullptr;
    if (isView(user))
      for (OpOperand &viewUse : user->getResult(0).getUses()) {
        Operation *later = lastReader(viewUse, block);
        if (!later)
          return nullptr;
        if (top->isBeforeInBlock(later))
          top = later;
      }
    if (isa<PutOp, SendOp>(user))
      for (Operation *waiter : user->getResult(0).getUsers())
        if (Operation *w = block->findAncestorOpInBlock(*waiter);
            w && top->isBeforeInBlock(w))
          top = w;
    return top;
  }

  /// Elides the copy of `out` when its destination is an allocation (or a
  /// planned buffer) of the slot's type that, after the copy, is only read in
  /// the copy's block (and deallocated): the readers take the slot instead, and
  /// the credit moves after the last read (for a transfer, after its wait).
  bool zeroCopy(CopyOut &out) {
    Value slot = out.copy.getSource();
    Value buffer = out.copy.getTarget();
    if (!(buffer.getDefiningOp<memref::AllocOp>() || getArenaBytes(buffer)) ||
        buffer.getType() != slot.getType())
      return false;
    Block *block = out.copy->getBlock();
    SmallVector<OpOperand *> reads;
    Operation *last = out.copy;
    for (OpOperand &use : buffer.getUses()) {
      Operation *user = use.getOwner();
      if (user == out.copy ||
          isa<memref::DeallocOp, memref::ExtractAlignedPointerAsIndexOp>(user))
        continue;
      Operation *top = block->findAncestorOpInBlock(*user);
      if (!top || !out.copy->isBeforeInBlock(top) || !readsOnly(use))
        return false;
      reads.push_back(&use);
      // Through views (the pieces a schedule reads), to their last reader.
      top = lastReader(use, block);
      if (!top)
        return false;
      if (last->isBeforeInBlock(top))
        last = top;
    }
    for (OpOperand *use : reads)
      use->set(slot);
    out.credit->moveAfter(last);
    out.copy->erase();
    return true;
  }

  void rewrite(Channel &channel, Value slot, Value flags, Value data,
               Value credit) {
    SendOp send = channel.send;
    RecvOp recv = channel.recv;
    IntegerAttr step = send.getStepAttr();
    OpBuilder b(send);
    Location loc = send.getLoc();
    // The peer has consumed what the previous execution put in its slot.
    SignalWaitOp::create(b, loc, flags, credit, b.getI64IntegerAttr(1), step);
    auto put =
        PutOp::create(b, loc, send.getRequest().getType(), send.getBuffer(),
                      slot, flags, data, send.getOffsetAttr(),
                      send.getGridAttr(), send.getAxesAttr(), step);
    send.getRequest().replaceAllUsesWith(put.getRequest());
    send.erase();

    WaitOp wait = waitOf(recv);
    SmallVector<Value> rest;
    for (Value request : wait.getRequests())
      if (request != recv.getRequest())
        rest.push_back(request);
    // After the wait, and after what earlier channels of the same wait
    // placed there, so that receives complete in program order.
    Operation *&last = lastAfterWait[wait];
    b.setInsertionPointAfter(last ? last : wait.getOperation());
    loc = recv.getLoc();
    SignalWaitOp::create(b, loc, flags, data, b.getI64IntegerAttr(0), step);
    auto copy = memref::CopyOp::create(b, loc, slot, recv.getBuffer());
    // The producer is the peer this receive named.
    auto signal = SignalOp::create(b, loc, flags, credit, recv.getGridAttr(),
                                   recv.getAxesAttr(), recv.getOffsetAttr(),
                                   b.getI64IntegerAttr(1), Value(), step);
    last = signal;
    if (zeroCopySlots)
      copyOuts.push_back({copy, signal});
    // A wait left with nothing to wait for goes at the end: later channels
    // of the same wait are placed after it.
    wait->setOperands(rest);
    if (rest.empty())
      emptyWaits.push_back(wait);
    recv.erase();
  }

  DenseMap<Operation *, Operation *> lastAfterWait;
  SmallVector<CopyOut> copyOuts;
  SmallVector<Operation *> emptyWaits;

  int64_t nextSite = 0;
};

} // namespace
