//===- KernelSignals.cpp - Fused kernels wait and raise flags themselves --===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// On the cuda target a flag wait is a stream wait and a raise a one-thread
// kernel on the stream. Around a fused kernel (scf.forall {braid.kernel})
// both can move into the kernel: the waits just before it become polls by
// each block (the host only counts the epoch), and the raises just after it
// become the last block's release. The collective and its chain are then
// one launch that talks to its peers itself, as vLLM's custom all-reduce
// and FlashInfer's fused all-reduce + RMSNorm do.
//
// Order is kept: a wait moved into the kernel still precedes every access
// of every block, and stream order puts everything after the kernel after
// every block's wait; a raise moved into the kernel still follows every
// access of every block (the last block's arrival acquires the others'; a
// kernel's raises share its count, so each block arrives once).
// A kernel whose blocks spin must not keep the work that would release
// them from running: the raise a peer waits for is enqueued before it (its
// put's wait precedes the data wait), and a grid of at most `max-tiles`
// blocks leaves every SM room for another stream's work. Larger grids keep
// their stream waits and raises, with a remark: they are prefill-sized,
// where a launch and a stream wait are small against the kernel.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Utils.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace braid::xfer {
#define GEN_PASS_DEF_KERNELSIGNALS
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;
using namespace braid;
using namespace braid::xfer;

namespace {

/// Ops a flag op may move across: they touch no buffer's contents.
bool movableAcross(Operation &op) {
  return isMemoryEffectFree(&op) || isa<ViewLikeOpInterface>(op) ||
         isa<PeerViewOp, memref::AllocOp, memref::AllocaOp>(op);
}

/// The number of iterations of a fused kernel with static bounds.
std::optional<int64_t> tileCount(scf::ForallOp kernel) {
  ArrayRef<int64_t> lbs = kernel.getStaticLowerBound(),
                    ubs = kernel.getStaticUpperBound(),
                    steps = kernel.getStaticStep();
  if (ShapedType::isDynamicShape(lbs) || ShapedType::isDynamicShape(ubs) ||
      ShapedType::isDynamicShape(steps))
    return std::nullopt;
  int64_t tiles = 1;
  for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps))
    tiles *= ub > lb ? (ub - lb + step - 1) / step : 0;
  return tiles;
}

/// Whether `op` is an elementwise op on buffers whose rows can be a
/// kernel's tiles: a `linalg.generic` with parallel loops only, every
/// operand read or written through a projection of its loops, every
/// output indexed by the first loop (so that no two rows write one
/// element), no loop index read in the body (a tile's would start at 0),
/// the first loop static.
bool rowTileable(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureBufferSemantics() ||
      generic.getNumLoops() < 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isProjectedPermutation(); }))
    return false;
  for (OpOperand &init : generic.getDpsInitsMutable())
    if (!generic.getMatchingIndexingMap(&init).isFunctionOfDim(0))
      return false;
  // A buffer passed twice is cut once: through the same map both times.
  DenseMap<Value, AffineMap> maps;
  for (OpOperand &operand : generic->getOpOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    auto [it, inserted] = maps.try_emplace(operand.get(), map);
    if (!inserted && it->second != map)
      return false;
  }
  if (!generic.getBody()->getOps<linalg::IndexOp>().empty())
    return false;
  SmallVector<int64_t> ranges = generic.getStaticLoopRanges();
  return !ShapedType::isDynamic(ranges[0]) && ranges[0] > 0;
}

/// `op` (rowTileable) as a fused kernel of one tile per index of its first
/// loop: each iteration runs the op on the subviews of its operands at
/// that index.
scf::ForallOp wrapRows(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  int64_t rows = op.getStaticLoopRanges()[0];
  auto kernel = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(rows)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)}, ValueRange{},
      // Mapped, as braid-fuse-memory-bound's kernels are, so that the
      // canonicalizer keeps a kernel of one row.
      b.getArrayAttr(gpu::GPUBlockMappingAttr::get(
          b.getContext(), gpu::MappingId::LinearDim0)));
  kernel->setAttr("braid.kernel", b.getUnitAttr());
  b.setInsertionPointToStart(kernel.getBody());
  Value row = kernel.getInductionVar(0);
  IRMapping mapping;
  for (OpOperand &operand : op->getOpOperands()) {
    // Scalars and 0-d buffers are the same for every row.
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || type.getRank() == 0)
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (auto [dim, expr] : llvm::enumerate(map.getResults())) {
      bool tiled = cast<AffineDimExpr>(expr).getPosition() == 0;
      offsets.push_back(tiled ? OpFoldResult(row) : b.getIndexAttr(0));
      sizes.push_back(b.getIndexAttr(tiled ? 1 : type.getDimSize(dim)));
      strides.push_back(b.getIndexAttr(1));
    }
    Value tile = memref::SubViewOp::create(b, loc, operand.get(), offsets,
                                           sizes, strides);
    mapping.map(operand.get(), tile);
  }
  b.clone(*op, mapping);
  op.erase();
  return kernel;
}

/// The ops of the kinds `Ops` on one side of `op` (`after` it, or before)
/// that only ops touching no buffer separate from it, in program order.
template <typename... Ops>
SmallVector<Operation *> flagOpsBeside(Operation *op, bool after) {
  SmallVector<Operation *> found;
  for (Operation *next = after ? op->getNextNode() : op->getPrevNode(); next;
       next = after ? next->getNextNode() : next->getPrevNode()) {
    if (isa<Ops...>(next)) {
      found.push_back(next);
      continue;
    }
    if (!movableAcross(*next) || braid::isTerminator(next))
      break;
  }
  if (!after)
    std::reverse(found.begin(), found.end());
  return found;
}

/// Whether flag waits or raises are next to `op`, on either side.
bool nextToFlagOps(Operation *op) {
  return !flagOpsBeside<SignalWaitOp, SignalOp>(op, /*after=*/false).empty() ||
         !flagOpsBeside<SignalWaitOp, SignalOp>(op, /*after=*/true).empty();
}

struct KernelSignalsPass
    : public braid::xfer::impl::KernelSignalsBase<KernelSignalsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    module.walk([&](SymmetricAllocOp alloc) {
      nextSite = std::max<int64_t>(nextSite, alloc.getSite() + 1);
    });
    for (auto function : module.getOps<FunctionOpInterface>()) {
      if (function.isExternal())
        continue;
      arrivals = nullptr;
      // Elementwise ops next to flag ops become kernels of their rows, so
      // that the flags can move into them (a put of a GEMM's result, cast
      // by an elementwise op that braid-fuse-puts has store into the peer).
      SmallVector<linalg::GenericOp> rowOps;
      function.walk([&](linalg::GenericOp op) {
        if (op->getParentOfType<scf::ForallOp>() || !rowTileable(op) ||
            !nextToFlagOps(op))
          return;
        int64_t rows = op.getStaticLoopRanges()[0];
        if (rows <= maxTiles)
          rowOps.push_back(op);
        else
          declineLarge(op, rows, "rows");
      });
      for (linalg::GenericOp op : rowOps) {
        wrapRows(op);
        ++numWrapped;
      }
      SmallVector<scf::ForallOp> kernels;
      function.walk([&](scf::ForallOp kernel) {
        if (kernel->hasAttr("braid.kernel") && kernel.getOutputs().empty())
          kernels.push_back(kernel);
      });
      for (scf::ForallOp kernel : kernels) {
        std::optional<int64_t> tiles = tileCount(kernel);
        if (!tiles || *tiles == 0)
          continue;
        if (*tiles > maxTiles) {
          if (nextToFlagOps(kernel))
            declineLarge(kernel, *tiles, "tiles");
          continue;
        }
        moveWaits(kernel);
        moveSignals(kernel, function);
      }
    }
  }

  /// The flag waits and raises next to `op` stay on the stream: it has
  /// more tiles (`what`: its tiles, or the rows it would have as a kernel)
  /// than blocks may poll.
  void declineLarge(Operation *op, int64_t tiles, StringRef what) {
    op->emitRemark()
        << "keeps the flag waits and raises next to it on the stream: its "
        << tiles << " " << what << " exceed the "
        << static_cast<int64_t>(maxTiles)
        << " blocks that may poll and count arrivals (--max-tiles): spinning "
           "blocks beyond that could keep the work that releases them from "
           "an SM";
  }

  /// The flag waits right before `kernel` become polls of its blocks.
  void moveWaits(scf::ForallOp kernel) {
    OpBuilder b(kernel);
    Operation *first = &kernel.getBody()->front();
    for (Operation *op : flagOpsBeside<SignalWaitOp>(kernel, /*after=*/false)) {
      auto wait = cast<SignalWaitOp>(op);
      b.setInsertionPoint(wait);
      Value epoch = FlagEpochOp::create(
          b, wait.getLoc(), b.getI32Type(), wait.getFlags(), wait.getIndex(),
          wait.getSlackAttr(), wait.getStepAttr());
      b.setInsertionPoint(first);
      KernelWaitOp::create(b, wait.getLoc(), wait.getFlags(), wait.getIndex(),
                           epoch, wait.getStepAttr());
      wait.erase();
      ++numWaits;
    }
  }

  /// The raises right after `kernel` become its last block's.
  void moveSignals(scf::ForallOp kernel, FunctionOpInterface function) {
    OpBuilder b(kernel);
    // One arrival word per kernel: its raises count each block once.
    Value counts, index;
    for (Operation *op : flagOpsBeside<SignalOp>(kernel, /*after=*/true)) {
      auto signal = cast<SignalOp>(op);
      Location loc = signal.getLoc();
      SymmetricAllocOp alloc = getSymmetricAlloc(signal.getFlags());
      if (signal.getFlags() != alloc.getBuffer()) {
        signal.emitRemark() << "stays a raise on the stream: its flag buffer "
                               "is a view of a symmetric allocation";
        continue;
      }
      b.setInsertionPoint(kernel);
      Value peer = PeerViewOp::create(
          b, loc, alloc.getBuffer().getType(), alloc.getBuffer(),
          signal.getGridAttr(), signal.getAxesAttr(), signal.getOffsetAttr());
      if (!counts) {
        counts = arrivalWord(signal, function);
        index = arith::ConstantIndexOp::create(b, loc, words - 1);
      }
      b.setInsertionPoint(kernel.getBody()->getTerminator());
      KernelSignalOp::create(b, loc, peer, signal.getIndex(), counts, index,
                             signal.getAddAttr(), signal.getData(),
                             signal.getStepAttr());
      signal.erase();
      ++numSignals;
    }
  }

  /// The function's arrival counters, one word more for a kernel's raises
  /// (word `words - 1`): a symmetric allocation on the raise's group, after
  /// the function's other symmetric allocations (every rank of the group
  /// allocates in the same order), grown by a word per kernel.
  Value arrivalWord(SignalOp signal, FunctionOpInterface function) {
    OpBuilder b(signal->getContext());
    if (!arrivals) {
      Block &entry = function.getFunctionBody().front();
      b.setInsertionPointToStart(&entry);
      for (Operation &op : entry)
        if (isa<SymmetricAllocOp>(op))
          b.setInsertionPointAfter(&op);
      arrivals = SymmetricAllocOp::create(
          b, signal.getLoc(), MemRefType::get({1}, b.getI32Type()),
          signal.getGridAttr(), signal.getAxesAttr(),
          b.getI64IntegerAttr(nextSite++));
      words = 0;
    }
    ++words;
    arrivals.getBuffer().setType(MemRefType::get({words}, b.getI32Type()));
    return arrivals.getBuffer();
  }

  int64_t nextSite = 0;
  SymmetricAllocOp arrivals;
  int64_t words = 0;
};

} // namespace
