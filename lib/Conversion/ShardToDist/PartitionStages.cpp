//===- PartitionStages.cpp - Around upstream shard-partition ----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The two stages braid-import-shard runs around upstream partitioning, on
// each function: braid-prepare-partition between sharding-propagation and
// shard-partition, braid-offset-global-indices after it
// (docs/rationale/import.md, "Guarding upstream partitioning").
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SmallSet.h"

namespace braid {
#define GEN_PASS_DEF_PREPAREPARTITION
#define GEN_PASS_DEF_OFFSETGLOBALINDICES
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;
using braid::dist::lookupGrid;

namespace {

//===----------------------------------------------------------------------===//
// braid-prepare-partition: annotations propagation leaves out
//===----------------------------------------------------------------------===//

/// The sharding the shard.shard ops annotating `value` for its users ask
/// for, when they agree (null otherwise).
static Value requestedSharding(Value value) {
  Value requested;
  for (Operation *user : value.getUsers()) {
    auto shardOp = dyn_cast<shard::ShardOp>(user);
    if (!shardOp)
      continue;
    if (!shardOp.getAnnotateForUsers())
      return shardOp.getSharding();
    if (requested && !shard::Sharding(requested).equalSplitAxes(
                         shard::Sharding(shardOp.getSharding())))
      return {};
    requested = shardOp.getSharding();
  }
  return requested;
}

/// The grid of the function's first sharding, or null when it has none.
static FlatSymbolRefAttr shardingGrid(func::FuncOp func) {
  FlatSymbolRefAttr grid;
  func.walk([&](shard::ShardingOp op) {
    grid = op.getGridAttr();
    return WalkResult::interrupt();
  });
  return grid;
}

/// A sharding replicated over `grid`.
static Value replicatedSharding(OpBuilder &b, Location loc,
                                FlatSymbolRefAttr grid) {
  return shard::ShardingOp::create(
             b, loc, grid,
             ArrayRef<shard::GridAxesAttr>{
                 shard::GridAxesAttr::get(b.getContext(), {})})
      .getResult();
}

/// The annotation propagation gave `result` itself (not its users'), if any.
static shard::ShardOp resultAnnotation(Value result) {
  for (Operation *user : result.getUsers())
    if (auto shardOp = dyn_cast<shard::ShardOp>(user);
        shardOp && !shardOp.getAnnotateForUsers())
      return shardOp;
  return {};
}

/// Propagation annotates the results of an op that something reads and can
/// leave an unread result of the same op bare (the values of a max whose
/// indices alone are used: DeepSeek-V3's `topk(...)[1]`), which crashes
/// upstream partitioning. Such a result gets the sharding of an annotated
/// result of the same rank (a linalg op's results share its loops'), else
/// replicated: a sharding consistent with the op, which partitioning
/// reshards for any user it has (in practice it has none).
static void annotateBareResults(Operation &op, FlatSymbolRefAttr grid) {
  SmallVector<shard::ShardOp> given;
  for (Value result : op.getResults())
    given.push_back(resultAnnotation(result));
  for (auto [result, annotation] : llvm::zip(op.getResults(), given)) {
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type || annotation)
      continue;
    shard::ShardOp model, anchor;
    for (auto [other, otherAnnotation] : llvm::zip(op.getResults(), given)) {
      if (!otherAnnotation)
        continue;
      anchor = anchor ? anchor : otherAnnotation;
      auto otherType = dyn_cast<RankedTensorType>(other.getType());
      if (!model && otherType && otherType.getRank() == type.getRank())
        model = otherAnnotation;
    }
    if (!anchor || (!model && !grid))
      return;
    // After the annotation whose sharding it takes, which that dominates.
    OpBuilder b(anchor);
    b.setInsertionPointAfter(model ? model : anchor);
    Value sharding =
        model ? model.getSharding() : replicatedSharding(b, op.getLoc(), grid);
    shard::ShardOp::create(b, op.getLoc(), result, sharding);
  }
}

/// Upstream propagation sometimes leaves an op without annotations (seen on
/// a zero fill feeding a reduction in HF models' mask code), which
/// partitioning then cannot take. Such an op gets for each result what its
/// users ask for (replicated when they disagree or ask nothing), for each
/// init the sharding of its result, and replicated for its other tensor
/// operands: the same values it computes unpartitioned.
static void completeAnnotations(func::FuncOp func) {
  // The grid: the function's only one, as the plan's.
  FlatSymbolRefAttr grid = shardingGrid(func);
  auto replicated = [&](OpBuilder &b, Location loc) -> Value {
    return grid ? replicatedSharding(b, loc, grid) : Value();
  };
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (isa<shard::ShardOp, shard::ShardingOp, func::ReturnOp>(op) ||
        op.getNumResults() == 0 || !isa<shard::ShardingInterface>(op))
      continue;
    bool annotated = false;
    for (Value result : op.getResults())
      for (Operation *user : result.getUsers())
        if (auto shardOp = dyn_cast<shard::ShardOp>(user))
          annotated |= !shardOp.getAnnotateForUsers();
    for (Value operand : op.getOperands())
      if (auto shardOp = operand.getDefiningOp<shard::ShardOp>())
        annotated |= shardOp.getAnnotateForUsers();
    if (annotated) {
      annotateBareResults(op, grid);
      continue;
    }
    OpBuilder b(&op);
    SmallVector<Value> resultShardings;
    for (Value result : op.getResults()) {
      if (!isa<RankedTensorType>(result.getType())) {
        resultShardings.push_back({});
        continue;
      }
      b.setInsertionPointAfter(&op);
      Value sharding = requestedSharding(result);
      if (!sharding)
        sharding = replicated(b, op.getLoc());
      if (!sharding)
        return;
      if (Operation *def = sharding.getDefiningOp();
          def && def->getBlock() == op.getBlock() && op.isBeforeInBlock(def))
        sharding = b.clone(*def)->getResult(0);
      auto annotation =
          shard::ShardOp::create(b, op.getLoc(), result, sharding);
      result.replaceAllUsesExcept(annotation.getResult(), annotation);
      resultShardings.push_back(sharding);
    }
    auto dps = dyn_cast<DestinationStyleOpInterface>(op);
    b.setInsertionPoint(&op);
    for (OpOperand &operand : op.getOpOperands()) {
      if (!isa<RankedTensorType>(operand.get().getType()))
        continue;
      Value sharding;
      if (dps && dps.isDpsInit(&operand))
        sharding =
            resultShardings[dps.getTiedOpResult(&operand).getResultNumber()];
      if (!sharding)
        sharding = replicated(b, op.getLoc());
      if (!sharding)
        return;
      if (Operation *def = sharding.getDefiningOp();
          def && def->getBlock() == op.getBlock() && !def->isBeforeInBlock(&op))
        sharding = b.clone(*def)->getResult(0);
      operand.set(shard::ShardOp::create(b, op.getLoc(), operand.get(),
                                         sharding,
                                         /*annotate_for_users=*/true));
    }
  }
}

/// A `linalg.index` whose value stays the rank's own (offsetIndices
/// leaves it): the index into a captured tensor's local block.
static constexpr StringLiteral kLocalIndexAttr = "braid.local_index";

/// The grid axes that split each loop of `op` (empty: not split), from the
/// shardings propagation annotated its operands (for it) and its results
/// with; `grid`, when given, is set to their grid.
static SmallVector<SmallVector<int16_t>>
loopSplits(linalg::GenericOp op, FlatSymbolRefAttr *grid = nullptr) {
  SmallVector<SmallVector<int16_t>> axes(op.getNumLoops());
  auto note = [&](Value sharding, AffineMap map) {
    auto shardingOp =
        sharding ? sharding.getDefiningOp<shard::ShardingOp>() : nullptr;
    if (!shardingOp || !map.isProjectedPermutation())
      return;
    if (grid)
      *grid = shardingOp.getGridAttr();
    for (auto [dim, split] :
         llvm::enumerate(shardingOp.getSplitAxes().getAxes())) {
      if (dim >= map.getNumResults() || split.empty())
        continue;
      SmallVector<int16_t> &loopAxes = axes[map.getDimPosition(dim)];
      if (loopAxes.empty())
        loopAxes.assign(split.asArrayRef().begin(), split.asArrayRef().end());
    }
  };
  for (OpOperand &operand : op->getOpOperands())
    if (auto shardOp = operand.get().getDefiningOp<shard::ShardOp>();
        shardOp && shardOp.getAnnotateForUsers())
      note(shardOp.getSharding(), op.getMatchingIndexingMap(&operand));
  for (OpResult result : op->getResults())
    for (Operation *user : result.getUsers())
      if (auto shardOp = dyn_cast<shard::ShardOp>(user);
          shardOp && !shardOp.getAnnotateForUsers())
        note(shardOp.getSharding(), op.getIndexingMapMatchingResult(result));
  return axes;
}

/// How `holder` (a linalg.generic) reads the captured `value`: per
/// dimension of the value, the grid axes of the loop whose linalg.index
/// every read takes as its index along that dimension, where propagation
/// split that loop and the dimension is as long as the loop (each rank
/// then reads its own block of it, at the loop's local index); no axes
/// where some read indexes it otherwise (the read needs the dimension
/// whole). Empty when some use is not a tensor.extract in the body.
static SmallVector<SmallVector<int16_t>>
ownBlockSplits(linalg::GenericOp holder, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<SmallVector<int16_t>> loopAxes = loopSplits(holder);
  SmallVector<int64_t> extents = holder.getStaticLoopRanges();
  SmallVector<std::optional<unsigned>> loopOf(type.getRank());
  SmallVector<bool> computed(type.getRank(), false);
  for (OpOperand &use : value.getUses()) {
    if (!holder->isProperAncestor(use.getOwner()))
      continue;
    auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
    if (!extract || extract->getBlock() != holder.getBody())
      return {};
    for (auto [d, index] : llvm::enumerate(extract.getIndices())) {
      auto loop = index.getDefiningOp<linalg::IndexOp>();
      if (!loop || loop->getParentOp() != holder ||
          (loopOf[d] && *loopOf[d] != loop.getDim()))
        computed[d] = true;
      else
        loopOf[d] = loop.getDim();
    }
  }
  SmallVector<SmallVector<int16_t>> splits(type.getRank());
  llvm::SmallSet<int16_t, 4> used;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (computed[d] || !loopOf[d])
      continue;
    unsigned loop = *loopOf[d];
    ArrayRef<int16_t> axes = loopAxes[loop];
    if (axes.empty() || type.isDynamicDim(d) ||
        extents[loop] != type.getDimSize(d) ||
        llvm::any_of(axes, [&](int16_t a) { return used.contains(a); }))
      continue;
    used.insert(axes.begin(), axes.end());
    splits[d].assign(axes.begin(), axes.end());
  }
  return splits;
}

/// Makes every read of `value` in `holder` index the dimensions `splits`
/// splits at the loop's local index (offsetIndices leaves those).
static void readOwnBlocks(linalg::GenericOp holder, Value value,
                          ArrayRef<SmallVector<int16_t>> splits) {
  for (Operation *user : llvm::make_early_inc_range(value.getUsers())) {
    auto extract = dyn_cast<tensor::ExtractOp>(user);
    if (!extract || extract->getBlock() != holder.getBody())
      continue;
    OpBuilder b(extract);
    for (auto [d, axes] : llvm::enumerate(splits)) {
      if (axes.empty())
        continue;
      auto index = extract.getIndices()[d].getDefiningOp<linalg::IndexOp>();
      auto local = linalg::IndexOp::create(b, index.getLoc(), index.getDim());
      local->setAttr(kLocalIndexAttr, b.getUnitAttr());
      extract->setOperand(1 + d, local);
    }
  }
}

/// Whether `sharding` splits exactly as `splits` says, without halos or
/// explicit offsets.
static bool splitsAs(shard::ShardingOp sharding,
                     ArrayRef<SmallVector<int16_t>> splits) {
  if (!sharding || !sharding.getStaticHaloSizes().empty() ||
      !sharding.getStaticShardedDimsOffsets().empty())
    return false;
  ArrayRef<shard::GridAxesAttr> given = sharding.getSplitAxes().getAxes();
  for (auto [d, axes] : llvm::enumerate(splits)) {
    ArrayRef<int16_t> has =
        d < given.size() ? given[d].asArrayRef() : ArrayRef<int16_t>();
    if (has != ArrayRef<int16_t>(axes))
      return false;
  }
  for (size_t d = splits.size(); d < given.size(); ++d)
    if (!given[d].empty())
      return false;
  return true;
}

/// Upstream partitioning clones an op's regions as they are, with the
/// values they capture from above mapped to their local blocks: a body
/// that reads a captured tensor at computed indices (`tensor.extract` in a
/// linalg.generic, as HF's mask code does with positions) then reads the
/// rank's block at global indices, out of bounds or the wrong element,
/// silently. After propagation every captured tensor is read through an
/// annotation asking for it replicated, which partitioning turns into a
/// gather of it when propagation split it, and into nothing otherwise;
/// except along the dimensions where the body reads only the rank's own
/// block (ownBlockSplits): those are asked for split as the loops that
/// index them, and a tensor split so already is read as it is. A tensor
/// split along another dimension is then resharded by one all-to-all (the
/// combine of experts' outputs under expert parallelism with the tokens
/// split over the same ranks), not gathered whole.
static void replicateCapturedTensors(func::FuncOp func) {
  FlatSymbolRefAttr grid = shardingGrid(func);
  if (!grid)
    return;
  SmallVector<Operation *> holders;
  for (Operation &op : func.getBody().front())
    if (op.getNumRegions() != 0)
      holders.push_back(&op);
  for (Operation *holder : holders) {
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(holder->getRegions(), captured);
    for (Value value : captured) {
      if (!isa<RankedTensorType>(value.getType()) ||
          value.getParentBlock() != holder->getBlock())
        continue;
      // The value as its producer's annotation gives it, when it has one.
      Value annotated = value;
      shard::ShardingOp sharding;
      if (auto shardOp = value.getDefiningOp<shard::ShardOp>()) {
        sharding = shardOp.getSharding().getDefiningOp<shard::ShardingOp>();
        if (shardOp.getAnnotateForUsers())
          annotated = shardOp.getSrc();
      } else {
        for (Operation *user : value.getUsers())
          if (auto shardOp = dyn_cast<shard::ShardOp>(user);
              shardOp && !shardOp.getAnnotateForUsers()) {
            annotated = shardOp.getResult();
            sharding = shardOp.getSharding().getDefiningOp<shard::ShardingOp>();
          }
      }
      // Read whole, or split along the dimensions the body reads at its
      // split loops' indices.
      SmallVector<SmallVector<int16_t>> splits;
      auto generic = dyn_cast<linalg::GenericOp>(holder);
      if (generic && generic->getNumResults() == 1)
        splits = ownBlockSplits(generic, value);
      bool ownBlocks = llvm::any_of(splits, [](auto &a) { return !a.empty(); });
      if (ownBlocks)
        readOwnBlocks(generic, value, splits);
      if (ownBlocks && splitsAs(sharding, splits))
        continue;
      OpBuilder b(holder);
      Value wanted;
      if (ownBlocks) {
        while (splits.back().empty())
          splits.pop_back();
        SmallVector<shard::GridAxesAttr> axes;
        for (ArrayRef<int16_t> dimAxes : splits)
          axes.push_back(shard::GridAxesAttr::get(b.getContext(), dimAxes));
        wanted = shard::ShardingOp::create(b, holder->getLoc(), grid, axes)
                     .getResult();
      } else {
        wanted = replicatedSharding(b, holder->getLoc(), grid);
      }
      auto read = shard::ShardOp::create(b, holder->getLoc(), annotated, wanted,
                                         /*annotate_for_users=*/true);
      for (Region &region : holder->getRegions())
        replaceAllUsesInRegionWith(value, read.getResult(), region);
    }
  }
}

//===----------------------------------------------------------------------===//
// Loop indices of split loops
//===----------------------------------------------------------------------===//

/// The attributes recordIndexSplits leaves on a linalg.generic whose body
/// reads its loop indices: per loop the grid axes that split it, and the
/// loops' extents before partitioning.
static constexpr StringLiteral kIndexAxes = "braid.index_axes";
static constexpr StringLiteral kIndexExtents = "braid.index_extents";
static constexpr StringLiteral kIndexGrid = "braid.index_grid";

/// Upstream partitioning clones a linalg.generic onto its local blocks as
/// it is, so `linalg.index` then counts from 0 on every rank, where the
/// unpartitioned op counted from the rank's block: an iota, a causal
/// mask or RoPE's positions silently wrong on every rank but the first.
/// Before partitioning, such an op records which grid axes split each
/// loop (from the shardings propagation annotated its operands and
/// results with) and its loops' global extents.
static void recordIndexSplits(func::FuncOp func) {
  func.walk([&](linalg::GenericOp op) {
    if (op.getBody()->getOps<linalg::IndexOp>().empty())
      return;
    FlatSymbolRefAttr grid;
    SmallVector<SmallVector<int16_t>> axes = loopSplits(op, &grid);
    if (!grid || llvm::all_of(axes, [](auto &a) { return a.empty(); }))
      return;
    Builder b(op.getContext());
    SmallVector<Attribute> perLoop;
    for (ArrayRef<int16_t> loopAxes : axes)
      perLoop.push_back(b.getDenseI16ArrayAttr(loopAxes));
    op->setAttr(kIndexAxes, b.getArrayAttr(perLoop));
    op->setAttr(kIndexExtents,
                b.getDenseI64ArrayAttr(op.getStaticLoopRanges()));
    op->setAttr(kIndexGrid, grid);
  });
}

/// After partitioning: each `linalg.index` of a loop that the partition
/// split counts from the rank's block, its position in the group over
/// the loop's axes (row-major over them, as shardings number blocks)
/// times the block's extent.
static LogicalResult offsetIndices(func::FuncOp func) {
  WalkResult result = func.walk([&](linalg::GenericOp op) {
    auto axesAttr = op->getAttrOfType<ArrayAttr>(kIndexAxes);
    auto extents = op->getAttrOfType<DenseI64ArrayAttr>(kIndexExtents);
    auto gridAttr = op->getAttrOfType<FlatSymbolRefAttr>(kIndexGrid);
    if (!axesAttr || !extents || !gridAttr)
      return WalkResult::advance();
    op->removeAttr(kIndexAxes);
    op->removeAttr(kIndexExtents);
    op->removeAttr(kIndexGrid);
    shard::GridOp grid = lookupGrid(op, gridAttr);
    SmallVector<int64_t> local = op.getStaticLoopRanges();
    if (!grid || local.size() != axesAttr.size())
      return WalkResult::advance();
    OpBuilder b(op);
    Location loc = op.getLoc();
    for (auto [loop, attr] : llvm::enumerate(axesAttr)) {
      ArrayRef<int16_t> loopAxes = cast<DenseI16ArrayAttr>(attr).asArrayRef();
      int64_t global = extents[loop];
      if (loopAxes.empty() || local[loop] == global)
        continue;
      if (ShapedType::isDynamic(local[loop]) || ShapedType::isDynamic(global) ||
          local[loop] <= 0 || global % local[loop] != 0) {
        op.emitError() << "loop " << loop
                       << " reads its index (linalg.index) and is split "
                          "unevenly by partitioning ("
                       << global << " iterations into blocks of " << local[loop]
                       << "): its indices on each rank cannot be told";
        return WalkResult::interrupt();
      }
      b.setInsertionPoint(op);
      SmallVector<shard::GridAxis> gridAxes(loopAxes.begin(), loopAxes.end());
      ValueRange coords = shard::ProcessMultiIndexOp::create(
                              b, loc, grid.getSymName(), gridAxes)
                              .getResult();
      Value position = coords[0];
      for (size_t i = 1; i < coords.size(); ++i) {
        Value size = arith::ConstantIndexOp::create(
            b, loc, grid.getShape()[loopAxes[i]]);
        position = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, position, size), coords[i]);
      }
      Value offset = arith::MulIOp::create(
          b, loc, position,
          arith::ConstantIndexOp::create(b, loc, local[loop]));
      for (linalg::IndexOp index : llvm::make_early_inc_range(
               op.getBody()->getOps<linalg::IndexOp>())) {
        if (index.getDim() != loop || index->hasAttr(kLocalIndexAttr))
          continue;
        b.setInsertionPointAfter(index);
        Value shifted = arith::AddIOp::create(b, loc, index, offset);
        index.getResult().replaceAllUsesExcept(shifted,
                                               shifted.getDefiningOp());
      }
    }
    return WalkResult::advance();
  });
  func.walk([](linalg::IndexOp index) { index->removeAttr(kLocalIndexAttr); });
  return failure(result.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// The passes
//===----------------------------------------------------------------------===//

struct PreparePartitionPass
    : public braid::impl::PreparePartitionBase<PreparePartitionPass> {
  void runOnOperation() override {
    getOperation()->walk([](func::FuncOp func) {
      completeAnnotations(func);
      replicateCapturedTensors(func);
      recordIndexSplits(func);
    });
  }
};

struct OffsetGlobalIndicesPass
    : public braid::impl::OffsetGlobalIndicesBase<OffsetGlobalIndicesPass> {
  void runOnOperation() override {
    WalkResult result = getOperation()->walk([](func::FuncOp func) {
      return failed(offsetIndices(func)) ? WalkResult::interrupt()
                                         : WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
