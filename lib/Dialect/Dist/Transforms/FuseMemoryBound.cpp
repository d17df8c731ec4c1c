//===- FuseMemoryBound.cpp - One kernel per memory-bound chain -----------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Groups producer -> consumer chains of memory-bound linalg ops (elementwise,
// broadcasts, fills, row reductions), and optionally the contraction that
// heads such a chain (a GEMM epilogue), into one loop nest over row tiles:
// one kernel that reads each input of the chain once and writes each output
// once. Softmax, layernorm, RMSNorm, bias + activation + residual become one
// kernel each.
//
// A group grows backwards from a root (an op no memory-bound op consumes)
// through producers whose every user is already in the group, so nothing is
// computed twice for different consumers: a value two groups need stays
// materialized and becomes the root of its own group. The root is tiled
// along its leading parallel dimensions and the group's producers are fused
// into the tile loop (TilingInterface); identical fused copies, which arise
// when one producer feeds two ops of the group, are merged (CSE), so a
// reduction consumed twice is computed once per tile.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/MathExtras.h"

namespace braid::dist {
#define GEN_PASS_DEF_FUSEMEMORYBOUND
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using braid::dist::schedule::isMemoryBound;

namespace {

constexpr StringLiteral kCopyOfAttr = "braid.copy_of";

/// `loop` with one more shared output, initialized with `init`, into which
/// each iteration writes `tile` where `where` (a slice of the init) reads.
scf::ForallOp addSharedOutput(RewriterBase &rewriter, scf::ForallOp loop,
                              Value init, Value tile,
                              tensor::ExtractSliceOp where) {
  SmallVector<Value> outputs(loop.getOutputs());
  outputs.push_back(init);
  rewriter.setInsertionPoint(loop);
  auto newLoop =
      scf::ForallOp::create(rewriter, loop.getLoc(), loop.getMixedLowerBound(),
                            loop.getMixedUpperBound(), loop.getMixedStep(),
                            outputs, loop.getMapping());
  Block *body = newLoop.getBody();
  rewriter.eraseOp(body->getTerminator());
  SmallVector<Value> arguments(body->getArguments().drop_back());
  rewriter.mergeBlocks(loop.getBody(), body, arguments);
  auto terminator = cast<scf::InParallelOp>(body->getTerminator());
  rewriter.setInsertionPointToEnd(terminator.getBody());
  tensor::ParallelInsertSliceOp::create(
      rewriter, loop.getLoc(), tile, body->getArguments().back(),
      where.getMixedOffsets(), where.getMixedSizes(), where.getMixedStrides());
  newLoop->setDiscardableAttrs(loop->getDiscardableAttrDictionary());
  rewriter.replaceOp(loop, newLoop.getResults().drop_back());
  return newLoop;
}

/// Bytes of a statically shaped tensor value (0 for anything else),
/// saturating at UINT64_MAX.
uint64_t bytesOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return 0;
  uint64_t bytes = llvm::divideCeil(type.getElementTypeBitWidth(), 8);
  for (int64_t size : type.getShape())
    bytes = llvm::SaturatingMultiply(bytes, static_cast<uint64_t>(size));
  return bytes;
}

/// A contraction that may head a group as its GEMM: its epilogue follows.
bool isEpilogueHead(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         linalg::isaContractionOpInterface(linalgOp) &&
         linalgOp.getIteratorTypesArray().front() ==
             utils::IteratorType::parallel &&
         llvm::all_of(linalgOp.getStaticLoopRanges(), [](int64_t size) {
           return !ShapedType::isDynamic(size) && size > 0;
         });
}

struct Group {
  Operation *root;
  /// Ops of the group, the root first.
  llvm::SetVector<Operation *> ops;
  /// Elementwise producers whose whole result is also used after the
  /// kernel: the kernel writes it too (a second output), once.
  llvm::SetVector<Operation *> yielded;
};

/// An elementwise op that covers the same rows as `root`, so that the
/// kernel's tiles write all of it.
bool coversRoot(Operation *producer, Operation *root) {
  auto linalgOp = cast<linalg::LinalgOp>(producer);
  if (linalgOp.getNumReductionLoops() != 0 || producer->getNumResults() != 1)
    return false;
  return producer->getResult(0).getType() == root->getResult(0).getType();
}

struct FuseMemoryBoundPass
    : public braid::dist::impl::FuseMemoryBoundBase<FuseMemoryBoundPass> {
  using FuseMemoryBoundBase::FuseMemoryBoundBase;

  void runOnOperation() override;

  /// Groups of the ops of `block`, roots in reverse program order.
  SmallVector<Group> formGroups(Block &block);
  /// Tile sizes of `root`: leading parallel loops, rows of `rowTile` (or
  /// chosen from the row size) on the innermost of them, 1 on the others;
  /// the last loop and reduction loops whole.
  SmallVector<OpFoldResult> tileSizes(linalg::LinalgOp root, OpBuilder &b);
  LogicalResult fuse(Group &group, IRRewriter &rewriter);
};

SmallVector<Group> FuseMemoryBoundPass::formGroups(Block &block) {
  DenseMap<Operation *, unsigned> groupOf;
  SmallVector<Group> groups;
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (!isMemoryBound(op) || groupOf.count(op))
      continue;
    unsigned id = groups.size();
    groups.push_back({op, {}});
    Group &group = groups.back();
    group.ops.insert(op);
    groupOf[op] = id;
    // Producers join when every user of theirs is already in the group.
    SmallVector<Operation *> worklist{op};
    while (!worklist.empty()) {
      Operation *consumer = worklist.pop_back_val();
      for (Value operand : consumer->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || producer->getBlock() != &block ||
            groupOf.count(producer))
          continue;
        bool memoryBound = isMemoryBound(producer);
        if (!memoryBound && !(epilogues && isEpilogueHead(producer)))
          continue;
        bool usedAfter = false, usedElsewhere = false;
        for (Operation *user : producer->getUsers()) {
          if (group.ops.contains(user))
            continue;
          if (user->getBlock() == &block && op->isBeforeInBlock(user))
            usedAfter = true;
          else
            usedElsewhere = true;
        }
        if (usedElsewhere ||
            (usedAfter && !(memoryBound && coversRoot(producer, op))))
          continue;
        if (usedAfter)
          group.yielded.insert(producer);
        group.ops.insert(producer);
        groupOf[producer] = id;
        // A contraction heads the group: of its own producers only the
        // fill of its accumulator joins.
        if (memoryBound) {
          worklist.push_back(producer);
          continue;
        }
        for (Value init : cast<linalg::LinalgOp>(producer).getDpsInits())
          if (auto fill = init.getDefiningOp<linalg::FillOp>())
            if (fill->getBlock() == &block && fill->hasOneUse() &&
                !groupOf.count(fill)) {
              group.ops.insert(fill);
              groupOf[fill] = id;
            }
      }
    }
  }
  return groups;
}

SmallVector<OpFoldResult> FuseMemoryBoundPass::tileSizes(linalg::LinalgOp root,
                                                         OpBuilder &b) {
  SmallVector<utils::IteratorType> iterators = root.getIteratorTypesArray();
  SmallVector<int64_t> ranges = root.getStaticLoopRanges();
  unsigned numLoops = iterators.size();
  // Leading parallel loops, but never the last loop of a multi-dimensional
  // op: a row stays whole.
  unsigned tiled = 0;
  while (tiled < numLoops && iterators[tiled] == utils::IteratorType::parallel)
    ++tiled;
  if (numLoops > 1)
    tiled = std::min(tiled, numLoops - 1);
  SmallVector<OpFoldResult> sizes(numLoops, b.getIndexAttr(0));
  if (tiled == 0)
    return sizes;
  for (unsigned i = 0; i + 1 < tiled; ++i)
    sizes[i] = b.getIndexAttr(1);
  // Rows per tile: the option, or as many as fit in `tileBytes`, a power of
  // two that divides the rows (so that tiles have static shapes).
  // Saturating: a row of more than 2^64 bytes is one row per tile. Loops
  // are static and not empty (isMemoryBound, isEpilogueHead).
  int64_t rows = ranges[tiled - 1];
  uint64_t rowBytes = 4;
  for (unsigned i = tiled; i < numLoops; ++i)
    rowBytes =
        llvm::SaturatingMultiply(rowBytes, static_cast<uint64_t>(ranges[i]));
  int64_t tile =
      rowTile > 0
          ? rowTile
          : std::max<int64_t>(1, static_cast<uint64_t>(tileBytes) / rowBytes);
  int64_t chosen = 1;
  while (chosen <= std::min(tile, rows) / 2 && rows % (chosen * 2) == 0)
    chosen *= 2;
  // At least two tiles: a loop of one iteration folds away, and the kernel
  // with it.
  while (chosen > 1 && chosen > rows / 2)
    chosen /= 2;
  if (rowTile > 0 && rows % rowTile == 0)
    chosen = rowTile;
  sizes[tiled - 1] = b.getIndexAttr(chosen);
  return sizes;
}

LogicalResult FuseMemoryBoundPass::fuse(Group &group, IRRewriter &rewriter) {
  auto root = cast<linalg::LinalgOp>(group.root);
  Location loc = root->getLoc();

  // What the group moves: inputs from outside, read once, and results used
  // outside, written once; against every op reading and writing its own.
  uint64_t before = 0, after = 0;
  auto add = [](uint64_t &sum, Value value) {
    sum = llvm::SaturatingAdd(sum, bytesOf(value));
  };
  llvm::SetVector<Value> external;
  for (Operation *op : group.ops) {
    for (Value operand : op->getOperands()) {
      add(before, operand);
      if (!group.ops.contains(operand.getDefiningOp()))
        external.insert(operand);
    }
    for (Value result : op->getResults())
      add(before, result);
  }
  for (Value value : external) {
    // Inits that no payload reads (tensor.empty) cost nothing.
    if (value.getDefiningOp<tensor::EmptyOp>())
      continue;
    add(after, value);
  }
  for (Value result : root->getResults())
    add(after, result);
  for (Operation *op : group.yielded)
    add(after, op->getResult(0));

  unsigned reductions = 0;
  bool gemm = false;
  for (Operation *op : group.ops) {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    bool contraction = linalg::isaContractionOpInterface(linalgOp);
    gemm |= contraction;
    reductions += !contraction && linalgOp.getNumReductionLoops() > 0;
  }

  OpBuilder b(root);
  scf::SCFTilingOptions tiling;
  SmallVector<OpFoldResult> sizes = tileSizes(root, b);
  tiling.setTileSizes(sizes);
  tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
  // Each tile is one block of the kernel. A mapped loop keeps its
  // dimensions of one iteration (a decode step's single row), which the
  // canonicalizer would otherwise fold away, and the kernel with them.
  SmallVector<Attribute> mapping;
  for (OpFoldResult size : sizes)
    if (getConstantIntValue(size) != 0)
      mapping.push_back(gpu::GPUBlockMappingAttr::get(
          b.getContext(),
          static_cast<gpu::MappingId>(
              static_cast<uint64_t>(gpu::MappingId::LinearDim0) +
              mapping.size())));
  if (mapping.size() <= 10)
    tiling.setMapping(mapping);
  rewriter.setInsertionPoint(root);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(root.getOperation()), tiling);
  if (failed(tiled) || tiled->loops.size() != 1)
    return root->emitRemark() << "not fused: the chain cannot be tiled by rows";
  SmallVector<LoopLikeOpInterface> loops = tiled->loops;
  for (auto [res, replacement] :
       llvm::zip(root->getResults(), tiled->replacements))
    rewriter.replaceAllUsesWith(res, replacement);

  // Fuse the group's producers slice by slice. Merging identical ops first
  // (CSE) merges identical slices, so that a producer two ops of the group
  // read is fused, and computed, once per tile.
  DominanceInfo dominance;
  auto producerOf = [&](tensor::ExtractSliceOp slice) -> Operation * {
    Value source = slice.getSource();
    if (auto arg = dyn_cast<BlockArgument>(source)) {
      // A destination: the loop's init for that shared output.
      auto forall = dyn_cast<scf::ForallOp>(arg.getOwner()->getParentOp());
      if (!forall || arg.getArgNumber() < forall.getRank())
        return nullptr;
      source = forall.getOutputs()[arg.getArgNumber() - forall.getRank()];
    }
    Operation *producer = source.getDefiningOp();
    return group.ops.contains(producer) ? producer : nullptr;
  };
  llvm::SetVector<Operation *> fusedOps;
  while (true) {
    eliminateCommonSubExpressions(rewriter, dominance, loops.front());
    tensor::ExtractSliceOp candidate;
    loops.front()->walk([&](tensor::ExtractSliceOp slice) {
      if (!candidate && !slice->use_empty() && producerOf(slice))
        candidate = slice;
    });
    if (!candidate)
      break;
    Operation *producer = producerOf(candidate);
    std::optional<scf::SCFFuseProducerOfSliceResult> fusedResult =
        scf::tileAndFuseProducerOfSlice(rewriter, candidate, loops);
    if (!fusedResult) {
      // It stays outside, computed once; the kernel reads its result.
      producer->emitRemark()
          << "kept outside the kernel: it cannot be computed by row tiles";
      group.ops.remove(producer);
      group.yielded.remove(producer);
      continue;
    }
    fusedOps.insert(producer);
    // Mark the copies of an op whose result is also used after the kernel,
    // to write that result from the kernel below.
    if (group.yielded.contains(producer)) {
      int64_t index =
          llvm::find(group.yielded, producer) - group.yielded.begin();
      for (Operation *tiledOp : fusedResult->tiledOps)
        tiledOp->setAttr(kCopyOfAttr, rewriter.getI64IntegerAttr(index));
    }
  }

  // Each such result becomes one more output of the kernel: the loop gets a
  // shared output, and each tile writes its part of the result into it.
  auto forall = cast<scf::ForallOp>(loops.front().getOperation());
  for (auto [index, producer] : llvm::enumerate(group.yielded)) {
    Operation *copy = nullptr;
    forall.getBody()->walk([&](Operation *op) {
      auto mark = op->getAttrOfType<IntegerAttr>(kCopyOfAttr);
      if (!copy && mark && mark.getInt() == static_cast<int64_t>(index))
        copy = op;
    });
    auto init = copy ? cast<DestinationStyleOpInterface>(copy)
                           .getDpsInits()[0]
                           .getDefiningOp<tensor::ExtractSliceOp>()
                     : nullptr;
    if (!init) {
      // Correct, at the price of computing it outside as well.
      producer->emitRemark() << "computed again outside the kernel: its "
                                "tiles do not cover its result";
      continue;
    }
    forall = addSharedOutput(
        rewriter, forall,
        cast<DestinationStyleOpInterface>(producer).getDpsInits()[0],
        copy->getResult(0), init);
    Value written = forall.getResults().back();
    rewriter.replaceUsesWithIf(
        producer->getResult(0), written,
        [&](OpOperand &use) { return !forall->isAncestor(use.getOwner()); });
  }
  forall.getBody()->walk([&](Operation *op) { op->removeAttr(kCopyOfAttr); });
  loops.front() = forall;
  unsigned fused = fusedOps.size() + 1;
  loops.front()->setAttr(braid::dist::DistDialect::getKernelAttrName(),
                         rewriter.getUnitAttr());
  // The originals are dead now; erase consumers before their producers.
  // Fusion leaves the slices it fused through in place, unused.
  SmallVector<Operation *> dead(group.ops.begin(), group.ops.end());
  for (Operation *op : dead)
    for (Operation *user : llvm::make_early_inc_range(op->getUsers()))
      if (isa<tensor::ExtractSliceOp>(user) && user->use_empty())
        rewriter.eraseOp(user);
  bool erased = true;
  while (erased) {
    erased = false;
    for (Operation *&op : dead)
      if (op && op->use_empty()) {
        rewriter.eraseOp(op);
        op = nullptr;
        erased = true;
      }
  }

  emitRemark(loc) << "fused " << fused << " ops into one kernel"
                  << (gemm ? " (GEMM epilogue)" : "")
                  << (group.yielded.empty()
                          ? ""
                          : " writing " +
                                std::to_string(group.yielded.size() + 1) +
                                " outputs")
                  << " with " << reductions << " row reduction"
                  << (reductions == 1 ? "" : "s") << ": moves " << after
                  << " bytes instead of " << before;
  ++numGroups;
  numFusedOps += fused;
  return success();
}

/// The one value of every element of `value`: a splat constant, or a slice
/// or reshape of one (block slicing cuts constants before any folding).
TypedAttr splatValue(Value value) {
  DenseElementsAttr dense;
  if (!matchPattern(braid::dist::schedule::throughViews(value),
                    m_Constant(&dense)) ||
      !dense.isSplat())
    return {};
  auto element = dense.getSplatValue<Attribute>();
  return isa<IntegerAttr, FloatAttr>(element) ? cast<TypedAttr>(element)
                                              : TypedAttr();
}

/// `op` reading none of the splat constants among its inputs: each becomes
/// its one value, a constant in the payload. Materialized, such a constant
/// is a read-only global that every element reads from memory; and where
/// the payload selects it for only some rows (a mask's zeros, which block
/// slicing cuts per block of rows), x86 turns the select into an AVX-512
/// masked load that, on pages the masked-off loads never fault in, costs a
/// microcode assist each (braid-tile-attention's later blocks ran at
/// 0.4 GB/s). A constant whose map alone gives a loop its extent stays.
void foldSplatInputs(linalg::GenericOp op, RewriterBase &rewriter) {
  SmallVector<std::pair<unsigned, TypedAttr>> folded;
  // Whether the operands but `skipped` and those folded already still give
  // every loop its extent.
  auto extentsWithout = [&](OpOperand *skipped) {
    llvm::SmallBitVector covered(op.getNumLoops());
    for (OpOperand &operand : op->getOpOperands()) {
      if (&operand == skipped || llvm::any_of(folded, [&](auto &f) {
            return f.first == operand.getOperandNumber();
          }))
        continue;
      for (AffineExpr result : op.getMatchingIndexingMap(&operand).getResults())
        if (auto expr = dyn_cast<AffineDimExpr>(result))
          covered.set(expr.getPosition());
    }
    return covered.all();
  };
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *operand : op.getDpsInputOperands()) {
    TypedAttr value = splatValue(operand->get());
    if (value && extentsWithout(operand)) {
      folded.push_back({operand->getOperandNumber(), value});
      continue;
    }
    inputs.push_back(operand->get());
    maps.push_back(op.getMatchingIndexingMap(operand));
  }
  if (folded.empty())
    return;
  for (OpOperand &init : op.getDpsInitsMutable())
    maps.push_back(op.getMatchingIndexingMap(&init));
  rewriter.setInsertionPoint(op);
  auto generic = linalg::GenericOp::create(
      rewriter, op.getLoc(), op.getResultTypes(), inputs, op.getDpsInits(),
      maps, op.getIteratorTypesArray());
  generic->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  rewriter.inlineRegionBefore(op.getRegion(), generic.getRegion(),
                              generic.getRegion().end());
  Block &body = generic.getRegion().front();
  rewriter.setInsertionPointToStart(&body);
  for (auto [number, value] : llvm::reverse(folded)) {
    BlockArgument argument = body.getArgument(number);
    rewriter.replaceAllUsesWith(
        argument, arith::ConstantOp::create(rewriter, op.getLoc(), value));
    body.eraseArgument(number);
  }
  rewriter.replaceOp(op, generic.getResults());
}

void FuseMemoryBoundPass::runOnOperation() {
  func::FuncOp function = getOperation();
  if (function.isExternal())
    return;
  IRRewriter rewriter(&getContext());
  // Not fusion, so also when fusion is off: no kernel loads a value known
  // when it is compiled.
  function.walk([&](linalg::GenericOp op) {
    if (op.hasPureTensorSemantics())
      foldSplatInputs(op, rewriter);
  });
  if (mode == braid::FuseMode::Off)
    return;
  // A fill that several ops start from (frontends share one zero-filled
  // init among reductions) becomes one fill per use: filling is no
  // computation to share, and a kernel that yielded its fill for another
  // kernel would also reduce into it in place (the fill's tile is the
  // reduction's init), handing the other kernel sums instead of zeros.
  function.walk([&](linalg::FillOp fill) {
    if (!fill.hasPureTensorSemantics() || fill->hasOneUse() ||
        fill->use_empty())
      return;
    for (OpOperand &use :
         llvm::make_early_inc_range(llvm::drop_begin(fill->getUses()))) {
      rewriter.setInsertionPoint(use.getOwner());
      use.set(rewriter.clone(*fill)->getResult(0));
    }
  });
  // The function's blocks and those of host control flow in it (ring
  // attention's skipped blocks put a block's chain inside an scf.if).
  SmallVector<Block *> blocks;
  for (Block &block : function.getBody())
    blocks.push_back(&block);
  function.walk([&](Operation *op) {
    if (isa<scf::IfOp, scf::ForOp>(op))
      for (Region &region : op->getRegions())
        for (Block &block : region)
          blocks.push_back(&block);
  });
  for (Block *block : blocks) {
    // An op on no elements is no kernel (isMemoryBound); tiling could not
    // cut it into rows anyway.
    for (auto op : block->getOps<linalg::LinalgOp>())
      if (std::string empty = braid::dist::schedule::emptyLoop(op);
          !empty.empty() && op.hasPureTensorSemantics())
        op->emitRemark() << "not fused: it computes no elements (" << empty
                         << ")";
    SmallVector<Group> groups = formGroups(*block);
    // A group that cannot be tiled stays as it was; fuse() says why.
    for (Group &group : groups)
      if (group.ops.size() > 1)
        (void)fuse(group, rewriter);
  }
  // Tiling writes the same constants and index arithmetic for every kernel.
  DominanceInfo dominance(function);
  eliminateCommonSubExpressions(rewriter, dominance, function);
}

} // namespace
