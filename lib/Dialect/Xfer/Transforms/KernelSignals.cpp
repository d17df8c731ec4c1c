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
#include "braid/Dialect/Xfer/Transforms/Schedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

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

/// A subview offset that names a chunk: ((base + shift) mod modulus) *
/// scale, base a value (or none, for a constant offset); modulus 0 when
/// there is no mod.
struct ChunkOffset {
  Value base;
  int64_t shift = 0, modulus = 0, scale = 1;
};

ChunkOffset chunkOffset(OpFoldResult offset) {
  ChunkOffset chunk;
  if (std::optional<int64_t> constant = getConstantIntValue(offset)) {
    chunk.shift = *constant;
    return chunk;
  }
  Value value = cast<Value>(offset);
  auto constantOperand = [](Operation *op, Value &other) {
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<int64_t> c = getConstantIntValue(op->getOperand(i))) {
        other = op->getOperand(1 - i);
        return c;
      }
    return std::optional<int64_t>();
  };
  Value other;
  if (auto mul = value.getDefiningOp<arith::MulIOp>())
    if (std::optional<int64_t> c = constantOperand(mul, other)) {
      chunk.scale = *c;
      value = other;
    }
  if (auto rem = value.getDefiningOp<arith::RemUIOp>())
    if (std::optional<int64_t> c = getConstantIntValue(rem.getRhs())) {
      chunk.modulus = *c;
      value = rem.getLhs();
    }
  if (auto add = value.getDefiningOp<arith::AddIOp>())
    if (std::optional<int64_t> c = constantOperand(add, other)) {
      chunk.shift = *c;
      value = other;
    }
  // A process's position along one axis is below that axis's size: it is
  // its own residue modulo the size.
  if (auto multi = value.getDefiningOp<shard::ProcessMultiIndexOp>();
      multi && chunk.modulus == 0 && chunk.shift == 0) {
    ArrayRef<int16_t> axes = multi.getAxes();
    unsigned number = cast<OpResult>(value).getResultNumber();
    int64_t axis = axes.empty() ? number : axes[number];
    auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
        multi, multi.getGridAttr());
    if (grid && axis < grid.getRank() &&
        !ShapedType::isDynamic(grid.getShape()[axis]))
      chunk.modulus = grid.getShape()[axis];
  }
  chunk.base = value;
  return chunk;
}

/// Whether the offsets `a` and `b` of two views are at least `extent` apart
/// (two different chunks of `extent` elements, or constants that far
/// apart).
bool chunksApart(OpFoldResult a, OpFoldResult b, int64_t extent) {
  ChunkOffset x = chunkOffset(a), y = chunkOffset(b);
  if (!x.base && !y.base)
    return std::abs(x.shift - y.shift) >= extent;
  // remui wraps a negative sum around 2^64, which is no residue.
  if (x.base != y.base || x.scale != y.scale || x.scale < extent ||
      x.modulus == 0 || x.modulus != y.modulus || x.shift < 0 || y.shift < 0)
    return false;
  int64_t n = x.modulus;
  return ((x.shift % n) + n) % n != ((y.shift % n) + n) % n;
}

/// The subview `buffer` is (through casts), or null.
memref::SubViewOp subviewOf(Value buffer) {
  while (auto cast = buffer.getDefiningOp<memref::CastOp>())
    buffer = cast.getSource();
  return buffer.getDefiningOp<memref::SubViewOp>();
}

/// The allocation a root buffer (getRootBuffer) is bytes of: itself, or
/// for a planned buffer the arena it is a view of.
Value allocationOf(Value root) {
  if (getArenaBytes(root))
    return getRootBuffer(
        root.getDefiningOp<ViewLikeOpInterface>().getViewSource());
  return root;
}

/// Whether `buffer` is a memory allocation (not a view, a value chosen
/// between buffers, a loop's or a call's buffer) or an argument of the
/// function (which no allocation inside it is).
bool isAllocationOrArgument(Value buffer) {
  if (auto argument = dyn_cast<BlockArgument>(buffer))
    return isa<FunctionOpInterface>(argument.getOwner()->getParentOp());
  return isa_and_nonnull<memref::AllocOp, memref::AllocaOp, SymmetricAllocOp,
                         memref::GetGlobalOp>(buffer.getDefiningOp());
}

/// The size of the axis `peer` views along, or 0 when not one static
/// axis.
int64_t axisSize(PeerViewOp peer) {
  ArrayRef<int16_t> axes = peer.getAxes();
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      peer, peer.getGridAttr());
  if (axes.size() != 1 || !grid || axes[0] >= grid.getRank() ||
      ShapedType::isDynamic(grid.getShape()[axes[0]]))
    return 0;
  return grid.getShape()[axes[0]];
}

/// Whether `peer` views another rank's copy: an offset that is not a
/// multiple of its axis's size.
bool isRemote(PeerViewOp peer) {
  int64_t size = axisSize(peer);
  return size > 0 && peer.getOffset() % size != 0;
}

/// Whether the buffers `a` and `b` provably share no byte: another rank's
/// copy of a symmetric buffer and any buffer of this rank, or peers'
/// copies of two different allocations; two different
/// allocations, or an allocation and an argument of the function (a
/// planned buffer counts as its arena, and two of one arena by their
/// bytes); or subviews of one buffer, alike in sizes and strides, whose
/// offsets along some dimension of unit stride are chunks at least a size
/// apart.
bool disjoint(Value a, Value b) {
  if (a == b)
    return false;
  Value x = getRootBuffer(a), y = getRootBuffer(b);
  // A peer's copy of a symmetric buffer is another rank's memory: no
  // buffer of this rank's, nor a peer's copy of another allocation.
  auto px = x.getDefiningOp<PeerViewOp>(), py = y.getDefiningOp<PeerViewOp>();
  if (px || py) {
    if (px && py)
      return getSymmetricAlloc(px.getBuffer()) &&
             getSymmetricAlloc(py.getBuffer()) &&
             getSymmetricAlloc(px.getBuffer()) !=
                 getSymmetricAlloc(py.getBuffer());
    return isRemote(px ? px : py);
  }
  if (x != y) {
    if (getArenaBytes(x) && getArenaBytes(y))
      return !arenaBytesOverlap(x, y);
    Value ax = allocationOf(x), ay = allocationOf(y);
    return ax != ay && isAllocationOrArgument(ax) &&
           isAllocationOrArgument(ay) &&
           (!isa<BlockArgument>(ax) || !isa<BlockArgument>(ay));
  }
  memref::SubViewOp p = subviewOf(a), q = subviewOf(b);
  if (!p || !q || p.getSource() != q.getSource() ||
      p.getMixedSizes() != q.getMixedSizes() ||
      p.getMixedStrides() != q.getMixedStrides())
    return false;
  for (auto [first, second, size, stride] :
       llvm::zip(p.getMixedOffsets(), q.getMixedOffsets(), p.getMixedSizes(),
                 p.getMixedStrides())) {
    std::optional<int64_t> extent = getConstantIntValue(size);
    if (extent && isConstantIntValue(stride, 1) &&
        chunksApart(first, second, *extent))
      return true;
  }
  return false;
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

/// An empty fused kernel of `tiles` iterations at `b`'s insertion point.
scf::ForallOp createKernel(OpBuilder &b, Location loc, int64_t tiles) {
  auto kernel = scf::ForallOp::create(
      b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(0)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(tiles)},
      ArrayRef<OpFoldResult>{b.getIndexAttr(1)}, ValueRange{},
      // Mapped, as braid-fuse-memory-bound's kernels are, so that the
      // canonicalizer keeps a kernel of one tile.
      b.getArrayAttr(gpu::GPUBlockMappingAttr::get(
          b.getContext(), gpu::MappingId::LinearDim0)));
  kernel->setAttr("braid.kernel", b.getUnitAttr());
  return kernel;
}

/// `op` (rowTileable) as a fused kernel of one tile per index of its first
/// loop: each iteration runs the op on the subviews of its operands at
/// that index.
scf::ForallOp wrapRows(linalg::GenericOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  scf::ForallOp kernel = createKernel(b, loc, op.getStaticLoopRanges()[0]);
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
      if (gemmWaits) {
        SmallVector<Block *> blocks;
        function.walk([&](Block *block) {
          if (!block->getParentOp()->getParentOfType<scf::ForallOp>() &&
              !isa<scf::ForallOp>(block->getParentOp()))
            blocks.push_back(block);
        });
        for (Block *block : blocks)
          groupGemms(*block, function);
      }
    }
  }

  /// A contraction of a run, with the flag waits right before it and its
  /// zero fill.
  struct GemmSegment {
    SmallVector<SignalWaitOp> waits;
    linalg::FillOp fill;
    linalg::LinalgOp op;
    /// The raises right after it that announce what it stored into a
    /// peer's copy: its last tile raises them.
    SmallVector<SignalOp> raises;
  };

  /// Contractions that may run at once in kernels after the ops between
  /// them, which move after those kernels (`deferred`: copies, waits for
  /// puts and raises, in their order).
  struct GemmRun {
    SmallVector<GemmSegment> segments;
    SmallVector<Operation *> deferred;
  };

  /// Whether the generated GEMM may take `op`: a contraction on buffers of
  /// f16 or bf16 (or f32, with gemm-tf32).
  bool gemmCandidate(Operation *op) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp || !linalg::isaContractionOpInterface(linalgOp) ||
        !linalgOp.hasPureBufferSemantics() || linalgOp.getNumDpsInputs() != 2)
      return false;
    Type element = getElementTypeOrSelf(linalgOp.getDpsInputOperand(0)->get());
    return element.isF16() || element.isBF16() || (element.isF32() && gemmTf32);
  }

  /// Whether the contractions of one kernel can be `a` and `b`: the same
  /// op on operands of the same shapes and element types.
  static bool alike(linalg::LinalgOp a, linalg::LinalgOp b) {
    if (a->getName() != b->getName() ||
        a->getNumOperands() != b->getNumOperands())
      return false;
    for (auto [x, y] : llvm::zip(a->getOperands(), b->getOperands())) {
      auto xt = dyn_cast<MemRefType>(x.getType());
      auto yt = dyn_cast<MemRefType>(y.getType());
      if (!xt || !yt || xt.getShape() != yt.getShape() ||
          xt.getElementType() != yt.getElementType())
        return false;
    }
    return true;
  }

  /// Whether `written` shares no byte with any buffer of `values`.
  static bool disjointFromAll(ValueRange written, ValueRange values) {
    for (Value w : written)
      for (Value v : values)
        if (isa<MemRefType>(v.getType()) && !disjoint(w, v))
          return false;
    return true;
  }

  /// Whether contraction `op` and an op that reads `reads` and writes
  /// `writes` may run in either order: neither writes a byte the other
  /// touches.
  static bool commute(linalg::LinalgOp op, ValueRange reads,
                      ValueRange writes) {
    return disjointFromAll(writes, op->getOperands()) &&
           disjointFromAll(op.getDpsInits(), reads);
  }

  /// The buffers an op that may move after a run's contractions reads and
  /// writes: a copy's source and target; a wait for puts, their sources
  /// (which may be written again once it returns) and, for a put to this
  /// rank's own copy, its destination (whose data is there after the
  /// wait). False for any other op (a wait for other than puts).
  static bool accesses(Operation *op, SmallVector<Value> &reads,
                       SmallVector<Value> &writes) {
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      reads.push_back(copy.getSource());
      writes.push_back(copy.getTarget());
      return true;
    }
    if (!isa<WaitOp>(op))
      return false;
    for (Value request : op->getOperands()) {
      auto put = request.getDefiningOp<PutOp>();
      if (!put)
        return false;
      reads.push_back(put.getSource());
      if (put.getOffset() == 0)
        writes.push_back(put.getDest());
    }
    return true;
  }

  /// Whether contraction `op` may run at the same time as every
  /// contraction of `run` and before its deferred copies and put waits.
  static bool independent(GemmRun &run, linalg::LinalgOp op) {
    for (GemmSegment &segment : run.segments)
      if (!commute(op, segment.op->getOperands(), segment.op.getDpsInits()))
        return false;
    for (Operation *deferred : run.deferred) {
      SmallVector<Value> reads, writes;
      if (accesses(deferred, reads, writes) && !commute(op, reads, writes))
        return false;
    }
    return true;
  }

  /// Whether `op` (a copy or a wait for puts) may run after the
  /// contractions of `run`.
  static bool deferrable(GemmRun &run, Operation *op) {
    SmallVector<Value> reads, writes;
    if (!accesses(op, reads, writes))
      return false;
    for (GemmSegment &segment : run.segments)
      if (!commute(segment.op, reads, writes))
        return false;
    return true;
  }

  /// The symmetric allocation of a flag buffer, through views (a peer's
  /// view too: a kernel raises a peer's flags through one).
  static SymmetricAllocOp flagAlloc(Value flags) {
    Value root = getRootBuffer(flags);
    if (auto peer = root.getDefiningOp<PeerViewOp>())
      return getSymmetricAlloc(peer.getBuffer());
    return root.getDefiningOp<SymmetricAllocOp>();
  }

  /// The slot whose data `wait` waits for: the symmetric allocation that
  /// every put raising its flag writes (or every raise names, `for`), or
  /// null when not one (a credit, several slots, a flag at an unknown
  /// index).
  static SymmetricAllocOp slotOf(SignalWaitOp wait,
                                 FunctionOpInterface function) {
    SymmetricAllocOp flags = flagAlloc(wait.getFlags());
    std::optional<int64_t> index = getConstantIntValue(wait.getIndex());
    if (!flags || !index || wait.getSlack() != 0)
      return {};
    SymmetricAllocOp slot;
    bool known = true;
    auto note = [&](Value flagBuffer, Value flagIndex, Value data) {
      if (!flagBuffer || flagAlloc(flagBuffer) != flags)
        return;
      std::optional<int64_t> other = getConstantIntValue(flagIndex);
      if (other && *other != *index)
        return;
      SymmetricAllocOp written = data ? getSymmetricAlloc(data) : nullptr;
      if (!other || !written || (slot && slot != written))
        known = false;
      slot = written;
    };
    function.walk([&](Operation *op) {
      if (auto put = dyn_cast<PutOp>(op))
        note(put.getFlags(), put.getIndex(), put.getDest());
      else if (auto signal = dyn_cast<SignalOp>(op))
        note(signal.getFlags(), signal.getIndex(), signal.getData());
      else if (auto signal = dyn_cast<KernelSignalOp>(op))
        note(signal.getFlags(), signal.getIndex(), signal.getData());
    });
    return known ? slot : SymmetricAllocOp();
  }

  /// Whether `signal` may be raised later in the same call: it alone
  /// raises its flag, by one, and every wait on that flag lets the
  /// previous call's raise satisfy it (a slack), so nothing in this call
  /// waits for this raise.
  static bool delayable(SignalOp signal, FunctionOpInterface function) {
    SymmetricAllocOp alloc = flagAlloc(signal.getFlags());
    if (!alloc || signal.getAdd() != 1)
      return false;
    Value index = signal.getIndex();
    auto same = [&](Value flags, Value other) {
      if (flagAlloc(flags) != alloc)
        return false;
      std::optional<int64_t> x = getConstantIntValue(index),
                             y = getConstantIntValue(other);
      return other == index || !x || !y || *x == *y;
    };
    WalkResult result = function.walk([&](Operation *op) {
      bool ok =
          TypeSwitch<Operation *, bool>(op)
              .Case([&](SignalWaitOp wait) {
                return !same(wait.getFlags(), wait.getIndex()) ||
                       wait.getSlack() > 0;
              })
              .Case([&](FlagEpochOp epoch) {
                return !same(epoch.getFlags(), epoch.getIndex()) ||
                       epoch.getSlack() > 0;
              })
              .Case([&](SignalOp other) {
                return other == signal ||
                       !same(other.getFlags(), other.getIndex());
              })
              .Case([&](PutOp put) {
                return !put.getFlags() || !same(put.getFlags(), put.getIndex());
              })
              .Case([&](KernelSignalOp other) {
                return !same(other.getFlags(), other.getIndex());
              })
              .Default([](Operation *) { return true; });
      return ok ? WalkResult::advance() : WalkResult::interrupt();
    });
    return !result.wasInterrupted();
  }

  /// The peer's copy that contraction `op` writes whole, or null.
  static PeerViewOp peerOutput(linalg::LinalgOp op) {
    return getRootBuffer(op.getDpsInits()[0]).getDefiningOp<PeerViewOp>();
  }

  /// Whether `signal`, right after the last contraction of `run`, may be
  /// raised by that contraction's last tile: it announces the data of the
  /// peer's copy the contraction stored into (braid-fuse-puts' form of a
  /// put), on a flag buffer that is a symmetric allocation itself, defined
  /// before the contraction (where the kernel goes). A raise releases
  /// everything before it, and now follows only its own contraction: no
  /// earlier contraction of the run, nor an op it defers, may write
  /// anything that peer may read (its own memory, or a symmetric buffer of
  /// this rank's), or read a symmetric buffer (whose credit the raise
  /// might stand for). And the run's contractions are alike: they are one
  /// kernel, so no other kernel of the run waits behind the raise.
  static bool segmentRaise(GemmRun &run, SignalOp signal) {
    linalg::LinalgOp op = run.segments.back().op;
    PeerViewOp peer = peerOutput(op);
    SymmetricAllocOp flags = getSymmetricAlloc(signal.getFlags());
    if (!peer || !signal.getData() || !flags ||
        flags.getBuffer() != signal.getFlags() ||
        getSymmetricAlloc(signal.getData()) !=
            getSymmetricAlloc(peer.getBuffer()) ||
        peer.getGridAttr() != signal.getGridAttr() ||
        peer.getAxes() != signal.getAxes() ||
        peer.getOffset() != signal.getOffset() || !isRemote(peer))
      return false;
    for (Value operand : signal->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && def->getBlock() == op->getBlock() && !def->isBeforeInBlock(op))
        return false;
    int64_t size = axisSize(peer);
    auto normalized = [&](int64_t offset) {
      return ((offset % size) + size) % size;
    };
    // What the peer may read: its memory, through a peer view at its
    // offset (any other peer view of the axis is another rank's), or a
    // symmetric buffer of this rank's.
    auto peerReads = [&](Value buffer) {
      Value root = getRootBuffer(buffer);
      if (auto other = root.getDefiningOp<PeerViewOp>())
        return other.getGridAttr() != peer.getGridAttr() ||
               other.getAxes() != peer.getAxes() ||
               normalized(other.getOffset()) == normalized(peer.getOffset());
      return static_cast<bool>(getSymmetricAlloc(root)) ||
             !isAllocationOrArgument(allocationOf(root));
    };
    auto symmetric = [](Value buffer) {
      return isa<MemRefType>(buffer.getType()) &&
             (getSymmetricAlloc(buffer) ||
              getRootBuffer(buffer).getDefiningOp<PeerViewOp>());
    };
    for (const GemmSegment &segment : ArrayRef(run.segments).drop_back()) {
      linalg::LinalgOp earlier = segment.op;
      if (!alike(earlier, op) ||
          llvm::any_of(earlier.getDpsInits(), peerReads) ||
          llvm::any_of(earlier.getDpsInputs(), symmetric))
        return false;
    }
    for (Operation *deferred : run.deferred) {
      // A deferred raise hands a slot back for the next call (nothing in
      // this call waits for it): the order of the two raises is free.
      if (isa<SignalOp>(deferred))
        continue;
      SmallVector<Value> reads, writes;
      if (!accesses(deferred, reads, writes) ||
          llvm::any_of(writes, peerReads) || llvm::any_of(reads, symmetric))
        return false;
    }
    return true;
  }

  /// Runs of contractions in `block` that the generated GEMM takes, each
  /// with the flag waits right before it, that may run at once: kernels
  /// of GEMM segments where one of them waits.
  void groupGemms(Block &block, FunctionOpInterface function) {
    GemmRun run;
    GemmSegment next;
    // The ops deferred before the run's last contraction: a raise right
    // after it comes before any other.
    size_t deferredSince = 0;
    auto flush = [&] {
      if (llvm::any_of(run.segments, [](const GemmSegment &segment) {
            return !segment.waits.empty() || !segment.raises.empty();
          }))
        makeGemmKernels(run, function);
      run = GemmRun();
      deferredSince = 0;
    };
    for (Operation &op : llvm::make_early_inc_range(block)) {
      bool between = !run.segments.empty() && next.waits.empty() && !next.fill;
      if (auto wait = dyn_cast<SignalWaitOp>(op); wait && !next.fill) {
        next.waits.push_back(wait);
        continue;
      }
      if (auto fill = dyn_cast<linalg::FillOp>(op);
          fill && !next.fill && fill.hasPureBufferSemantics()) {
        next.fill = fill;
        continue;
      }
      if (gemmCandidate(&op)) {
        auto contraction = cast<linalg::LinalgOp>(op);
        // A fill of another buffer (or with no contraction after it) must
        // stay between what comes before and after it: the run ends.
        if (next.fill &&
            next.fill.getDpsInits()[0] != contraction.getDpsInits()[0]) {
          flush();
          next = GemmSegment();
        }
        // A run whose raises moved into its kernel is one kernel: a
        // contraction of another kind would be a kernel after it, which
        // a peer's raise that waits for ours could keep from running.
        bool raises = llvm::any_of(run.segments, [](const GemmSegment &s) {
          return !s.raises.empty();
        });
        if (!run.segments.empty() &&
            (!independent(run, contraction) ||
             (raises && !alike(run.segments.front().op, contraction))))
          flush();
        next.op = contraction;
        run.segments.push_back(next);
        next = GemmSegment();
        deferredSince = run.deferred.size();
        continue;
      }
      // A raise right after a contraction, of what it stored into a
      // peer's copy: its last tile's.
      if (auto signal = dyn_cast<SignalOp>(op);
          signal && between && deferredSince == run.deferred.size() &&
          segmentRaise(run, signal)) {
        run.segments.back().raises.push_back(signal);
        continue;
      }
      if (auto signal = dyn_cast<SignalOp>(op);
          signal && between && delayable(signal, function)) {
        run.deferred.push_back(signal);
        continue;
      }
      auto copy = dyn_cast<memref::CopyOp>(op);
      if (copy && copy.getSource() == copy.getTarget())
        continue;
      if (isa<memref::CopyOp, WaitOp>(op) && between && deferrable(run, &op)) {
        run.deferred.push_back(&op);
        continue;
      }
      if (movableAcross(op))
        continue;
      // Anything else ends the run; the waits and fill seen since its last
      // contraction stay where they are.
      flush();
      next = GemmSegment();
    }
    flush();
  }

  /// `run`'s contractions as kernels of GEMM segments, one per kind of
  /// contraction (alike ones), where its last contraction was. Each wait
  /// becomes an epoch counted where it was, polled by the contraction
  /// right after it and by every later one that reads the slot it waits
  /// for (every later one, when that slot is not known): a chunk's tiles
  /// wait for their own chunk only, and whatever ran after a wait still
  /// does. The copies, put waits and raises between the contractions move
  /// after the kernels, in their order (by then each wait has been polled
  /// by its own contraction's tiles).
  void makeGemmKernels(GemmRun &run, FunctionOpInterface function) {
    linalg::LinalgOp last = run.segments.back().op;
    OpBuilder b(last);
    // The polls of each contraction: the waits right before it, and each
    // earlier wait of the run for a slot it reads (or for what is not
    // known to be one slot's data).
    struct Epoch {
      Value value;
      SignalWaitOp wait;
      SymmetricAllocOp slot;
    };
    SmallVector<Epoch> epochs;
    SmallVector<SmallVector<Epoch>> polls;
    for (GemmSegment &segment : run.segments) {
      SmallVector<Epoch> &own = polls.emplace_back();
      for (const Epoch &earlier : epochs) {
        bool reads = llvm::any_of(segment.op->getOperands(), [&](Value v) {
          return isa<MemRefType>(v.getType()) &&
                 getSymmetricAlloc(v) == earlier.slot;
        });
        if (!earlier.slot || reads)
          own.push_back(earlier);
      }
      for (SignalWaitOp wait : segment.waits) {
        b.setInsertionPoint(wait);
        Value epoch = FlagEpochOp::create(
            b, wait.getLoc(), b.getI32Type(), wait.getFlags(), wait.getIndex(),
            wait.getSlackAttr(), wait.getStepAttr());
        epochs.push_back({epoch, wait, slotOf(wait, function)});
        own.push_back(epochs.back());
        ++numWaits;
      }
    }
    // Kinds in the order of their first contraction.
    SmallVector<SmallVector<size_t>> kinds;
    for (auto [i, segment] : llvm::enumerate(run.segments)) {
      auto kind = llvm::find_if(kinds, [&](const SmallVector<size_t> &k) {
        return alike(run.segments[k.front()].op, segment.op);
      });
      if (kind == kinds.end())
        kinds.push_back({i});
      else
        kind->push_back(i);
    }
    b.setInsertionPoint(last);
    Operation *after = nullptr;
    for (const SmallVector<size_t> &kind : kinds) {
      Location loc = run.segments[kind.back()].op.getLoc();
      int64_t count = static_cast<int64_t>(kind.size());
      scf::ForallOp kernel = createKernel(b, loc, count);
      kernel->setAttr(kGemmSegmentsAttrName,
                      b.getI64IntegerAttr(static_cast<int64_t>(maxTiles)));
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(kernel.getBody());
      SmallVector<int64_t> cases;
      for (int64_t i = 0; i < count; ++i)
        cases.push_back(i);
      auto body = scf::IndexSwitchOp::create(
          b, loc, TypeRange{}, kernel.getInductionVar(0), cases, cases.size());
      b.setInsertionPointToStart(&body.getDefaultRegion().emplaceBlock());
      scf::YieldOp::create(b, loc);
      for (auto [i, region] : llvm::zip(kind, body.getCaseRegions())) {
        GemmSegment &segment = run.segments[i];
        b.setInsertionPointToStart(&region.emplaceBlock());
        auto yield = scf::YieldOp::create(b, loc);
        b.setInsertionPoint(yield);
        for (Epoch epoch : polls[i])
          KernelWaitOp::create(b, epoch.wait.getLoc(), epoch.wait.getFlags(),
                               epoch.wait.getIndex(), epoch.value,
                               epoch.wait.getStepAttr());
        if (segment.fill)
          segment.fill->moveBefore(yield);
        segment.op->moveBefore(yield);
        // Its raises, by its last tile: a word of arrivals of its own.
        Value counts, word;
        for (SignalOp signal : segment.raises) {
          Location at = signal.getLoc();
          {
            OpBuilder::InsertionGuard outside(b);
            b.setInsertionPoint(kernel);
            Value peer = PeerViewOp::create(
                b, at, signal.getFlags().getType(), signal.getFlags(),
                signal.getGridAttr(), signal.getAxesAttr(),
                signal.getOffsetAttr());
            if (!counts) {
              counts = arrivalWord(signal, function);
              word = arith::ConstantIndexOp::create(b, at, words - 1);
            }
            b.setInsertionPoint(yield);
            KernelSignalOp::create(b, at, peer, signal.getIndex(), counts, word,
                                   signal.getAddAttr(), signal.getData(),
                                   signal.getStepAttr());
          }
          signal.erase();
          ++numSignals;
        }
        ++numGemmSegments;
      }
      bool raises = llvm::any_of(
          kind, [&](size_t i) { return !run.segments[i].raises.empty(); });
      if (!raises)
        kernel.emitRemark() << count
                            << " contraction(s) that wait for flags run as "
                               "one kernel whose tiles poll them (a "
                               "persistent generated GEMM of at most "
                            << static_cast<int64_t>(maxTiles) << " blocks)";
      else
        kernel.emitRemark()
            << count
            << " contraction(s) that store into peers' copies run as one "
               "kernel whose tiles poll the flags they wait for and whose "
               "last tile of each contraction that stores into a peer raises "
               "that peer's flag (a "
               "persistent generated GEMM of at most "
            << static_cast<int64_t>(maxTiles) << " blocks)";
      after = kernel;
    }
    for (Epoch &epoch : epochs)
      epoch.wait.erase();
    // The copies, put waits and raises between the contractions, in their
    // order, after the kernels (those after the last contraction are
    // there).
    for (Operation *op : run.deferred) {
      if (!op->isBeforeInBlock(after))
        continue;
      op->moveAfter(after);
      after = op;
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
