//===- FusePuts.cpp - Kernels store their results into peers' slots -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A put copies a buffer into a peer's symmetric slot once the buffer is
// written. When a fused kernel (scf.forall {braid.kernel}) has just written
// the whole buffer, tile by tile, or an elementwise op has, that op can
// store its result into the peer's slot as well, through a peer view, as
// it computes it (one more output of the op that completes each tile; a
// copy of the finished tile where a copy completes it); the put then only
// has to raise the peer's data flag. A reshape between the buffer and the
// put is undone on the peer's slot. This is the producer side of an
// all-gather fused into the kernel before it (push_ag_matmul), and of the
// second round of a two-shot all-reduce. A contraction that writes a
// buffer of its own whole, which only its fill and the put use, writes
// the peer's slot instead (push_matmul_rs: a block's partial computed in
// its owner's slot).
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace braid::xfer {
#define GEN_PASS_DEF_FUSEPUTS
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;
using namespace braid;
using namespace braid::xfer;

namespace {

/// Whether `op`, or an op nested in it, may write `buffer` or another view
/// of its root buffer. Unknown ops write every buffer they take.
bool mayWrite(Operation *op, Value buffer) {
  Value root = getRootBuffer(buffer);
  WalkResult result = op->walk([&](Operation *nested) {
    SmallVector<Value> written;
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(nested)) {
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffects(list);
      for (auto &effect : list) {
        if (!isa<MemoryEffects::Write, MemoryEffects::Free>(effect.getEffect()))
          continue;
        Value value = effect.getValue();
        // A write of no buffer in particular may be of this one, except
        // for the signals' ordering effects.
        if (!value && !isa<SignalOp, SignalWaitOp>(nested) &&
            isa<SideEffects::DefaultResource>(effect.getResource()))
          return WalkResult::interrupt();
        if (value && isa<BaseMemRefType>(value.getType()))
          written.push_back(value);
      }
    } else if (!nested->hasTrait<OpTrait::HasRecursiveMemoryEffects>()) {
      for (Value operand : nested->getOperands())
        if (isa<BaseMemRefType>(operand.getType()))
          written.push_back(operand);
    }
    for (Value value : written)
      if (getRootBuffer(value) == root)
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Whether `a` and `b` are the same view: equal, or identical subviews of
/// one buffer.
bool sameView(Value a, Value b) {
  if (a == b)
    return true;
  auto x = a.getDefiningOp<memref::SubViewOp>();
  auto y = b.getDefiningOp<memref::SubViewOp>();
  return x && y && x.getSource() == y.getSource() &&
         x.getMixedOffsets() == y.getMixedOffsets() &&
         x.getMixedSizes() == y.getMixedSizes() &&
         x.getMixedStrides() == y.getMixedStrides();
}

/// Whether an op of `kernel`'s body writes `view` whole: a linalg op with
/// it as an init that its indexing map covers, or a copy into it.
/// The init of `op` that is `view` and that `op` writes whole (its
/// indexing map a permutation), or null.
OpOperand *wholeInit(linalg::LinalgOp op, Value view) {
  for (OpOperand &init : op.getDpsInitsMutable())
    if (sameView(init.get(), view) &&
        op.getMatchingIndexingMap(&init).isPermutation())
      return &init;
  return nullptr;
}

bool writtenWhole(scf::ForallOp kernel, Value view) {
  for (Operation &op : kernel.getBody()->without_terminator()) {
    if (auto copy = dyn_cast<memref::CopyOp>(op);
        copy && sameView(copy.getTarget(), view) &&
        copy.getSource() != copy.getTarget())
      return true;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
        linalgOp && wholeInit(linalgOp, view))
      return true;
  }
  return false;
}

/// What each iteration of `kernel` writes of `buffer`: its only view in the
/// kernel (one subview op, or several identical ones), into which the
/// kernel's iterations partition `buffer`; or `buffer` itself, used
/// directly by a kernel of one iteration (the canonicalizer folds a subview
/// that covers its source). An op of the body must write it whole. Null
/// otherwise.
Value writtenTile(scf::ForallOp kernel, Value buffer) {
  if (!kernel.getOutputs().empty())
    return {};
  ArrayRef<int64_t> lbs = kernel.getStaticLowerBound();
  ArrayRef<int64_t> ubs = kernel.getStaticUpperBound();
  ArrayRef<int64_t> steps = kernel.getStaticStep();
  memref::SubViewOp tile;
  bool direct = false;
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (!kernel->isProperAncestor(user))
      continue;
    if (user->getParentOp() != kernel)
      return {};
    auto view = dyn_cast<memref::SubViewOp>(user);
    if (!view) {
      direct = true;
      continue;
    }
    if (!tile) {
      tile = view;
      continue;
    }
    if (!sameView(view, tile))
      return {};
  }
  if (direct) {
    // The whole buffer in each iteration: there must be only one.
    for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps))
      if (ShapedType::isDynamic(lb) || ShapedType::isDynamic(ub) ||
          ShapedType::isDynamic(step) || step <= 0 || ub - lb > step ||
          ub <= lb)
        return {};
    return !tile && writtenWhole(kernel, buffer) ? buffer : Value();
  }
  if (!tile)
    return {};
  // Every dimension whole, or cut by one loop of the kernel into blocks of
  // its step from 0 to the dimension's size.
  auto type = cast<MemRefType>(buffer.getType());
  SmallVector<bool> used(kernel.getRank(), false);
  for (auto [d, offset, size, stride] :
       llvm::enumerate(tile.getMixedOffsets(), tile.getMixedSizes(),
                       tile.getMixedStrides())) {
    std::optional<int64_t> staticSize = getConstantIntValue(size);
    if (getConstantIntValue(stride) != 1 || !staticSize)
      return {};
    int64_t extent = type.getDimSize(d);
    if (getConstantIntValue(offset) == 0 && *staticSize == extent)
      continue;
    auto iv = dyn_cast_if_present<Value>(offset);
    auto it = llvm::find(kernel.getInductionVars(), iv);
    if (!iv || it == kernel.getInductionVars().end())
      return {};
    unsigned loop = it - kernel.getInductionVars().begin();
    if (used[loop] || lbs[loop] != 0 || steps[loop] != *staticSize ||
        ubs[loop] != extent)
      return {};
    used[loop] = true;
  }
  // Each iteration writes a tile of its own.
  if (!llvm::all_of(used, [](bool u) { return u; }))
    return {};
  return writtenWhole(kernel, tile.getResult()) ? tile.getResult() : Value();
}

/// An elementwise linalg.generic (every loop parallel) that writes `view`
/// whole as one of its inits: it can write a second buffer alongside.
linalg::GenericOp elementwiseWriter(Operation *op, Value view,
                                    unsigned &initIndex) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics() ||
      generic.getNumReductionLoops() != 0)
    return {};
  OpOperand *init = wholeInit(generic, view);
  if (!init)
    return {};
  initIndex = init->getOperandNumber() - generic.getNumDpsInputs();
  return generic;
}

/// `op` with one more init, `extra`, written like init `initIndex`: the
/// same indexing map and the same yielded value.
void addOutput(OpBuilder &b, linalg::GenericOp op, unsigned initIndex,
               Value extra) {
  SmallVector<Value> inits(op.getDpsInits());
  inits.push_back(extra);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  maps.push_back(maps[op.getNumDpsInputs() + initIndex]);
  b.setInsertionPoint(op);
  auto grown =
      linalg::GenericOp::create(b, op.getLoc(), TypeRange(), op.getDpsInputs(),
                                inits, maps, op.getIteratorTypesArray());
  grown.getRegion().takeBody(op.getRegion());
  Block &body = grown.getRegion().front();
  body.addArgument(getElementTypeOrSelf(extra.getType()), op.getLoc());
  Operation *yield = body.getTerminator();
  SmallVector<Value> yielded(yield->getOperands());
  yielded.push_back(yielded[initIndex]);
  yield->setOperands(yielded);
  grown->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op->erase();
}

/// The last op of `block` before `end` that may write `buffer` (no op
/// between it and `end` does), or null.
Operation *lastWriter(Block::iterator begin, Block::iterator end,
                      Value buffer) {
  while (end != begin) {
    --end;
    // A copy onto itself changes nothing.
    if (auto copy = dyn_cast<memref::CopyOp>(*end);
        copy && copy.getSource() == copy.getTarget())
      continue;
    if (mayWrite(&*end, buffer))
      return &*end;
  }
  return nullptr;
}

/// For a buffer of its own (an allocation, or a planned buffer: a view of
/// the arena, whose bytes no other live buffer shares) that `writer` (a
/// linalg op that is not elementwise: a contraction) writes whole and that
/// nothing else touches but a fill right before it, the put and its
/// deallocation: that fill (or the writer itself when there is none), the
/// first op to retarget. Null otherwise.
Operation *retargetableWriter(Operation *writer, Value source, PutOp put,
                              ArrayRef<Operation *> reshapes) {
  // The put may read it through reshapes, each read by the next alone.
  Operation *reader = reshapes.empty() ? put.getOperation() : reshapes.back();
  for (Operation *reshape : reshapes)
    if (!reshape->getResult(0).hasOneUse())
      return nullptr;
  if (!source.getDefiningOp<memref::AllocOp>() &&
      !source.getDefiningOp<memref::AllocaOp>() && !getArenaBytes(source))
    return nullptr;
  auto linalgOp = dyn_cast<linalg::LinalgOp>(writer);
  if (!linalgOp || !linalgOp.hasPureBufferSemantics() ||
      linalgOp.getNumReductionLoops() == 0 || linalgOp.getNumDpsInits() != 1 ||
      linalgOp.getDpsInitOperand(0)->get() != source ||
      !linalgOp.getMatchingIndexingMap(linalgOp.getDpsInitOperand(0))
           .isProjectedPermutation() ||
      writer->getParentOp() != put->getParentOp())
    return nullptr;
  Operation *first = writer;
  for (Operation *user : source.getUsers()) {
    if (user == writer || user == reader || isa<memref::DeallocOp>(user))
      continue;
    auto fill = dyn_cast<linalg::FillOp>(user);
    if (!fill || fill->getNextNode() != writer ||
        fill.getOutputs()[0] != source)
      return nullptr;
    first = fill;
  }
  // An op that reads its output (a contraction accumulating) starts from
  // the fill's values, which it then reads in the peer's slot.
  if (first == writer &&
      linalgOp.payloadUsesValueFromOperand(linalgOp.getDpsInitOperand(0)))
    return nullptr;
  // Nothing reads the buffer but the put, so nothing sees it unwritten.
  return first;
}

struct FusePutsPass : public braid::xfer::impl::FusePutsBase<FusePutsPass> {
  void runOnOperation() override {
    FunctionOpInterface function = getOperation();
    SmallVector<PutOp> puts;
    function.walk([&](PutOp put) { puts.push_back(put); });
    DominanceInfo dominance(function);
    for (PutOp put : puts)
      if (fuse(put, dominance))
        ++numFused;
  }

  /// Fuses `put` into the op that writes its source, where one can store
  /// into the peer's slot as well: a fused kernel (each tile once
  /// complete), or an elementwise op (each element as it computes it).
  bool fuse(PutOp put, DominanceInfo &dominance) {
    Value source = put.getSource();
    Value slot = put.getDest();
    auto sourceType = cast<MemRefType>(source.getType());
    auto slotType = cast<MemRefType>(slot.getType());
    if (!put.getFlags() || !slot.getDefiningOp<SymmetricAllocOp>() ||
        sourceType.getShape() != slotType.getShape() ||
        sourceType.getElementType() != slotType.getElementType() ||
        !llvm::all_of(put->getUsers(),
                      [](Operation *user) { return isa<WaitOp>(user); }))
      return false;
    // The credit that lets this rank write the peer's slot, waited right
    // before the put (braid-symmetric-transfers puts it there).
    auto credit = dyn_cast_or_null<SignalWaitOp>(put->getPrevNode());
    if (!credit || credit.getFlags() != put.getFlags() ||
        credit.getSlack() != 1)
      return false;
    // A reshape of a contiguous buffer leaves its bytes in place: the
    // buffer reshaped is what its writer writes, and the peer's slot is
    // reshaped back to it (the inverse reshapes, innermost last).
    SmallVector<Operation *> reshapes;
    while (Operation *def = source.getDefiningOp()) {
      if (!isa<memref::CollapseShapeOp, memref::ExpandShapeOp>(def))
        break;
      auto from = cast<MemRefType>(def->getOperand(0).getType());
      if (!from.getLayout().isIdentity())
        return false;
      reshapes.push_back(def);
      source = def->getOperand(0);
    }
    // The op that last wrote the source, with nothing writing it since.
    Block *block = put->getBlock();
    Operation *writer =
        lastWriter(block->begin(), credit->getIterator(), source);
    if (!writer || !dominance.properlyDominates(slot, writer) ||
        !llvm::all_of(credit->getOperands(), [&](Value operand) {
          return dominance.properlyDominates(operand, writer);
        }))
      return false;
    unsigned initIndex = 0;
    auto kernel = dyn_cast<scf::ForallOp>(writer);
    Value tile;
    // A contraction (and the fill before it) writes the peer's slot instead.
    Operation *retarget = nullptr;
    if (kernel && kernel->hasAttr(dist::DistDialect::getKernelAttrName()))
      tile = writtenTile(kernel, source);
    else if (!elementwiseWriter(writer, source, initIndex) &&
             !(retarget = retargetableWriter(writer, source, put, reshapes)))
      return false;
    if (kernel && !tile)
      return false;
    if (retarget && !llvm::all_of(credit->getOperands(), [&](Value operand) {
          return dominance.properlyDominates(operand, retarget);
        }))
      return false;
    if (retarget && !dominance.properlyDominates(slot, retarget))
      return false;

    // Wait for the credit before the writer stores into the peer's slot.
    Operation *firstStore = retarget ? retarget : writer;
    credit->moveBefore(firstStore);
    OpBuilder b(firstStore);
    Value peer = PeerViewOp::create(b, put.getLoc(), slot.getType(), slot,
                                    put.getGridAttr(), put.getAxesAttr(),
                                    put.getOffsetAttr())
                     .getView();
    for (Operation *reshape : reshapes) {
      auto to = cast<MemRefType>(reshape->getOperand(0).getType());
      if (auto collapse = dyn_cast<memref::CollapseShapeOp>(reshape))
        peer =
            memref::ExpandShapeOp::create(b, put.getLoc(), to.getShape(), peer,
                                          collapse.getReassociationIndices());
      else
        peer = memref::CollapseShapeOp::create(
            b, put.getLoc(), peer,
            cast<memref::ExpandShapeOp>(reshape).getReassociationIndices());
    }
    if (retarget) {
      for (Operation *op = retarget; op != writer->getNextNode();
           op = op->getNextNode())
        op->replaceUsesOfWith(source, peer);
    } else if (!kernel) {
      addOutput(b, cast<linalg::GenericOp>(writer), initIndex, peer);
    } else {
      // The tile's view of the peer's slot, at the end of the iteration.
      Block *body = kernel.getBody();
      b.setInsertionPoint(body->getTerminator());
      Value peerTile = peer;
      if (tile != source) {
        auto view = tile.getDefiningOp<memref::SubViewOp>();
        peerTile = memref::SubViewOp::create(
            b, put.getLoc(), peer, view.getMixedOffsets(), view.getMixedSizes(),
            view.getMixedStrides());
      }
      // The op that completes the tile stores it into the peer's as well,
      // or, where it cannot, the iteration copies the tile once complete.
      Operation *peerView = tile != source ? peerTile.getDefiningOp() : nullptr;
      Operation *last = lastWriter(
          body->begin(),
          (peerView ? peerView : body->getTerminator())->getIterator(), tile);
      if (linalg::GenericOp generic =
              elementwiseWriter(last, tile, initIndex)) {
        if (peerView)
          peerView->moveBefore(generic);
        addOutput(b, generic, initIndex, peerTile);
      } else {
        memref::CopyOp::create(b, put.getLoc(), tile, peerTile);
      }
    }

    // The put only raises the peer's data flag now, announcing the slot.
    b.setInsertionPoint(put);
    SignalOp::create(b, put.getLoc(), put.getFlags(), put.getIndex(),
                     put.getGridAttr(), put.getAxesAttr(), put.getOffsetAttr(),
                     b.getI64IntegerAttr(1), slot, put.getStepAttr());
    for (OpOperand &use : llvm::make_early_inc_range(put->getUses())) {
      auto wait = cast<WaitOp>(use.getOwner());
      wait->eraseOperand(use.getOperandNumber());
      if (wait->getNumOperands() == 0)
        wait->erase();
    }
    put->erase();
    return true;
  }
};

} // namespace
