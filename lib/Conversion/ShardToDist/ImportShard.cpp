//===- ImportShard.cpp - Upstream shard IR to dist --------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "ImportPatterns.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/CrashRecoveryContext.h"

namespace braid {
#define GEN_PASS_DEF_IMPORTSHARD
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;
using namespace braid;
using namespace braid::dist;

namespace {

//===----------------------------------------------------------------------===//
// Placements of the global view
//===----------------------------------------------------------------------===//

/// Translates an upstream sharding into a placement, or returns null when it
/// has no exact counterpart (halos, uneven shard sizes, a dimension split
/// over axes in descending order).
static PlacementAttr placementFromSharding(Value shardingValue,
                                           shard::GridOp grid) {
  auto shardingOp = shardingValue.getDefiningOp<shard::ShardingOp>();
  if (!shardingOp || !grid)
    return {};
  shard::Sharding sharding(shardingValue);
  if (!sharding.getStaticHaloSizes().empty() ||
      !sharding.getStaticShardedDimsOffsets().empty() ||
      !sharding.getDynamicHaloSizes().empty() ||
      !sharding.getDynamicShardedDimsOffsets().empty())
    return {};
  SmallVector<AxisPlacement> axes(grid.getRank(), AxisPlacement::replicate());
  for (auto [dim, gridAxes] : llvm::enumerate(sharding.getSplitAxes())) {
    ArrayRef<int16_t> list = gridAxes.asArrayRef();
    if (!llvm::is_sorted(list))
      return {};
    for (int16_t axis : list) {
      if (axis < 0 || axis >= grid.getRank())
        return {};
      axes[axis] = AxisPlacement::shard(dim);
    }
  }
  return PlacementAttr::get(grid.getContext(), shardingOp.getGridAttr(), axes);
}

struct FunctionPlacements {
  DenseMap<unsigned, PlacementAttr> args;
  DenseMap<unsigned, PlacementAttr> results;
};

/// Records the placement of each function argument annotated by a
/// `shard.shard` (the sharding the value has) and of each result produced
/// by one.
static FunctionPlacements collectPlacements(func::FuncOp func) {
  FunctionPlacements placements;
  auto gridOf = [&](shard::ShardOp op) {
    auto shardingOp = op.getSharding().getDefiningOp<shard::ShardingOp>();
    return shardingOp ? lookupGrid(func, shardingOp.getGridAttr())
                      : shard::GridOp();
  };
  // An argument's layout is its shard.shard's; braid-apply-parallel-plan
  // writes it for the argument's users (annotate_for_users), which
  // partitioning takes as the argument's own when it is the only one.
  for (BlockArgument arg : func.getArguments()) {
    SmallVector<shard::ShardOp> annotations;
    for (Operation *user : arg.getUsers())
      if (auto shardOp = dyn_cast<shard::ShardOp>(user))
        annotations.push_back(shardOp);
    for (shard::ShardOp shardOp : annotations)
      if (!shardOp.getAnnotateForUsers() || annotations.size() == 1)
        if (PlacementAttr placement =
                placementFromSharding(shardOp.getSharding(), gridOf(shardOp)))
          placements.args[arg.getArgNumber()] = placement;
  }
  func.walk([&](func::ReturnOp ret) {
    for (OpOperand &operand : ret->getOpOperands())
      if (auto shardOp = operand.get().getDefiningOp<shard::ShardOp>())
        if (!shardOp.getAnnotateForUsers())
          if (PlacementAttr placement =
                  placementFromSharding(shardOp.getSharding(), gridOf(shardOp)))
            placements.results[operand.getOperandNumber()] = placement;
  });
  return placements;
}

//===----------------------------------------------------------------------===//
// Conversion of collectives
//===----------------------------------------------------------------------===//

/// Casts `value` elementwise to a tensor of `elementType`.
static Value castElements(OpBuilder &builder, Location loc, Value value,
                          Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  Type from = type.getElementType();
  if (from == elementType)
    return value;
  auto target = type.clone(elementType);
  if (isa<FloatType>(from) && isa<FloatType>(elementType)) {
    if (from.getIntOrFloatBitWidth() < elementType.getIntOrFloatBitWidth())
      return arith::ExtFOp::create(builder, loc, target, value);
    return arith::TruncFOp::create(builder, loc, target, value);
  }
  if (from.isInteger() && isa<FloatType>(elementType))
    return arith::SIToFPOp::create(builder, loc, target, value);
  if (isa<FloatType>(from) && elementType.isInteger())
    return arith::FPToSIOp::create(builder, loc, target, value);
  if (from.getIntOrFloatBitWidth() < elementType.getIntOrFloatBitWidth())
    return arith::ExtSIOp::create(builder, loc, target, value);
  return arith::TruncIOp::create(builder, loc, target, value);
}

/// Maps an upstream reduction; `average` becomes a sum that the caller
/// divides by the group size.
static FailureOr<ReductionKind>
mapReduction(Operation *op, shard::ReductionKind kind, bool &average) {
  average = false;
  switch (kind) {
  case shard::ReductionKind::Sum:
    return ReductionKind::Sum;
  case shard::ReductionKind::Max:
    return ReductionKind::Max;
  case shard::ReductionKind::Min:
    return ReductionKind::Min;
  case shard::ReductionKind::Product:
    return ReductionKind::Product;
  case shard::ReductionKind::Average:
    average = true;
    return ReductionKind::Sum;
  case shard::ReductionKind::BitwiseAnd:
    return ReductionKind::BitAnd;
  case shard::ReductionKind::BitwiseOr:
    return ReductionKind::BitOr;
  case shard::ReductionKind::BitwiseXor:
    return ReductionKind::BitXor;
  case shard::ReductionKind::Generic:
    break;
  }
  return op->emitError() << "cannot convert '" << op->getName()
                         << "': reduction '"
                         << shard::stringifyReductionKind(kind)
                         << "' has no dist counterpart";
}

/// Divides `value` by the size of the group, for an average.
static Value divideByGroup(OpBuilder &builder, Location loc, Value value,
                           int64_t groupSize) {
  auto type = cast<RankedTensorType>(value.getType());
  Type element = type.getElementType();
  TypedAttr scalar =
      isa<FloatType>(element)
          ? TypedAttr(builder.getFloatAttr(element, groupSize))
          : TypedAttr(builder.getIntegerAttr(element, groupSize));
  Value divisor = arith::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(type, scalar));
  if (isa<FloatType>(element))
    return arith::DivFOp::create(builder, loc, value, divisor);
  return arith::DivSIOp::create(builder, loc, value, divisor);
}

/// A split dimension of a halo exchange: its grid axis and halo sizes.
struct HaloSplit {
  int64_t dim;
  int16_t axis;
  int64_t lo, hi;
};

/// The split dimensions of `op` (on a `type` tensor over `grid`), each
/// with its halo sizes, or an error where the exchange cannot be converted.
static FailureOr<SmallVector<HaloSplit>>
haloSplits(shard::UpdateHaloOp op, RankedTensorType type, shard::GridOp grid) {
  ArrayRef<shard::GridAxesAttr> split = op.getSplitAxesAttr().getAxes();
  ArrayRef<int64_t> halos = op.getStaticHaloSizes();
  int64_t rank = type.getRank();
  SmallVector<HaloSplit> splits;
  for (auto [dim, axes] : llvm::enumerate(split)) {
    if (axes.empty())
      continue;
    if (static_cast<int64_t>(dim) >= rank)
      return op.emitError() << "splits tensor dimension " << dim
                            << " of a rank-" << rank << " tensor";
    if (axes.size() != 1)
      return op.emitError() << "cannot convert 'shard.update_halo': tensor "
                               "dimension "
                            << dim << " is split over several grid axes";
    int16_t axis = axes.asArrayRef()[0];
    if (axis < 0 || axis >= grid.getRank() ||
        ShapedType::isDynamic(grid.getShape()[axis]))
      return op.emitError()
             << "cannot convert 'shard.update_halo' over grid axis " << axis
             << ": it must exist and have a static size";
    splits.push_back({static_cast<int64_t>(dim), axis, 0, 0});
  }
  if (2 * splits.size() != halos.size())
    return op.emitError() << "has " << halos.size() << " halo sizes for "
                          << splits.size()
                          << " split dimensions (expected two each)";
  for (auto [k, sp] : llvm::enumerate(splits)) {
    sp.lo = halos[2 * k];
    sp.hi = halos[2 * k + 1];
    // The interior must be at least as wide as either halo.
    if (sp.lo < 0 || sp.hi < 0 ||
        std::max(sp.lo, sp.hi) > type.getDimSize(sp.dim) - sp.lo - sp.hi)
      return op.emitError()
             << "cannot convert 'shard.update_halo': halos " << sp.lo << " and "
             << sp.hi << " of dimension " << sp.dim << " do not fit its "
             << type.getDimSize(sp.dim)
             << " elements with an interior at least as large";
  }
  return splits;
}

/// What the import's patterns share: the receives a send before them has
/// paired with itself (replaced already, never converted on their own), and
/// the count of converted ops.
struct ImportState {
  llvm::DenseSet<Operation *> pairedReceives;
  unsigned converted = 0;
};

/// Rewrites one shard op after partitioning into dist (or into index
/// arithmetic), through the rewriter of the pattern that calls it; emits a
/// located error and fails where it cannot, before changing any IR.
class CollectiveImporter {
public:
  CollectiveImporter(RewriterBase &rewriter, ImportState &state)
      : rewriter(rewriter), state(state) {}

  // A rooted gather leaves its result undefined off the root, so the
  // all-gather is a refinement of it.
  template <typename GatherLike> LogicalResult gather(GatherLike op) {
    Value result = AllGatherOp::create(
        rewriter, op.getLoc(), op.getResult().getType(), op.getGridAttr(),
        op.getGridAxesAttr(), op.getInput(),
        rewriter.getI64IntegerAttr(op.getGatherAxis().getSExtValue()));
    rewriter.replaceOp(op, result);
    return success();
  }
  LogicalResult convert(shard::AllGatherOp op) { return gather(op); }
  LogicalResult convert(shard::GatherOp op) { return gather(op); }

  LogicalResult convert(shard::AllToAllOp op) {
    Value result = AllToAllOp::create(
        rewriter, op.getLoc(), op.getResult().getType(), op.getGridAttr(),
        op.getGridAxesAttr(), op.getInput(),
        rewriter.getI64IntegerAttr(op.getSplitAxis().getSExtValue()),
        rewriter.getI64IntegerAttr(op.getConcatAxis().getSExtValue()));
    rewriter.replaceOp(op, result);
    return success();
  }

  // Upstream leaves the result undefined on ranks without a source when
  // `rotate` is absent; rotating is one valid refinement.
  LogicalResult convert(shard::ShiftOp op) {
    Value result = ShiftOp::create(
        rewriter, op.getLoc(), op.getResult().getType(), op.getGridAttr(),
        rewriter.getDenseI16ArrayAttr(
            {static_cast<int16_t>(op.getShiftAxis().getSExtValue())}),
        op.getInput(), rewriter.getI64IntegerAttr(op.getOffset()));
    rewriter.replaceOp(op, result);
    return success();
  }

  /// The root's tensor on every rank of a rooted op (broadcast, scatter):
  /// a broadcast from a static root; from a root known only at run time,
  /// the sum over the group of each rank's contribution (rootContribution).
  template <typename RootedOp> FailureOr<Value> rootValue(RootedOp op) {
    if (op.getRootDynamic().empty())
      return BroadcastOp::create(rewriter, op.getLoc(), op.getInput().getType(),
                                 op.getGridAttr(), op.getGridAxesAttr(),
                                 op.getInput(), op.getRootAttr())
          .getResult();
    FailureOr<Value> mine =
        rootContribution(op, op.getInput(), op.getGridAttr(), op.getGridAxes(),
                         op.getRoot(), op.getRootDynamic());
    if (failed(mine) || op.getGridAxes().empty())
      return mine;
    return sumOverGroup(op.getLoc(), *mine, op.getGridAttr(),
                        op.getGridAxesAttr());
  }

  LogicalResult convert(shard::BroadcastOp op) {
    FailureOr<Value> result = rootValue(op);
    if (failed(result))
      return failure();
    rewriter.replaceOp(op, *result);
    return success();
  }

  LogicalResult convert(shard::ShardOp op) {
    return op.emitError()
           << "'shard.shard' is a global-view annotation: partition "
              "first (braid-import-shard=partition=auto or always)";
  }

  // A rooted reduce is an all-reduce, for the same reason.
  template <typename ReductionOp> LogicalResult reduction(ReductionOp op) {
    return convertReduction(op, op.getInput(), op.getResult(), op.getGridAttr(),
                            op.getGridAxesAttr(), op.getReduction());
  }
  LogicalResult convert(shard::ReduceOp op) { return reduction(op); }
  LogicalResult convert(shard::AllReduceOp op) { return reduction(op); }

  // A scatter is the root's tensor, sliced; from a root known only at run
  // time, the root's contribution reduce-scattered.
  LogicalResult convert(shard::ScatterOp op) {
    Location loc = op.getLoc();
    auto outType = cast<RankedTensorType>(op.getResult().getType());
    if (!op.getRootDynamic().empty() && !op.getGridAxes().empty() &&
        outType.hasStaticShape()) {
      FailureOr<Value> mine =
          rootContribution(op, op.getInput(), op.getGridAttr(),
                           op.getGridAxes(), op.getRoot(), op.getRootDynamic());
      if (failed(mine))
        return failure();
      Value result = ReduceScatterOp::create(
          rewriter, loc, outType, op.getGridAttr(), op.getGridAxesAttr(), *mine,
          rewriter.getI64IntegerAttr(op.getScatterAxis().getSExtValue()),
          ReductionKindAttr::get(rewriter.getContext(), ReductionKind::Sum));
      rewriter.replaceOp(op, result);
      return success();
    }
    FailureOr<Value> whole = rootValue(op);
    if (failed(whole))
      return failure();
    auto slice = shard::AllSliceOp::create(
        rewriter, loc, outType, op.getGridAttr(), op.getGridAxesAttr(), *whole,
        op.getScatterAxisAttr());
    rewriter.replaceOp(op, slice.getResult());
    rewriter.setInsertionPoint(slice);
    return convert(slice);
  }

  LogicalResult convert(shard::RecvOp op) {
    return op.emitError()
           << "cannot convert 'shard.recv' to dist: no 'shard.send' "
              "before it in its block sends to it (Braid takes a send "
              "to this rank's position plus a constant along one grid "
              "axis, paired with a receive from the position minus "
              "it, of the same type)";
  }

  // Of an annotated value: the annotation's sharding.
  LogicalResult convert(shard::GetShardingOp op) {
    if (auto annotation = op.getSource().getDefiningOp<shard::ShardOp>()) {
      rewriter.replaceOp(op, annotation.getSharding());
      return success();
    }
    return op.emitError()
           << "cannot convert 'shard.get_sharding' in SPMD code: its "
              "tensor has no 'shard.shard' annotation to take the "
              "sharding from";
  }

  /// The constant k of a coordinate that is this rank's position along
  /// grid axis `axis` plus k (modulo the group size `n`, which a remainder
  /// may make explicit), normalized to [0, n); nullopt otherwise.
  static std::optional<int64_t> offsetFromPosition(OpFoldResult coordinate,
                                                   shard::GridOp grid,
                                                   int16_t axis, int64_t n) {
    auto value = dyn_cast<Value>(coordinate);
    if (!value)
      return std::nullopt;
    int64_t k = 0;
    while (Operation *def = value.getDefiningOp()) {
      std::optional<int64_t> lhs, rhs;
      if (def->getNumOperands() == 2) {
        lhs = getConstantIntValue(def->getOperand(0));
        rhs = getConstantIntValue(def->getOperand(1));
      }
      if (isa<arith::IndexCastOp, arith::IndexCastUIOp>(def)) {
        value = def->getOperand(0);
      } else if (isa<arith::RemUIOp, arith::RemSIOp>(def) && rhs && *rhs == n) {
        value = def->getOperand(0);
      } else if (isa<arith::AddIOp>(def) && (lhs || rhs)) {
        k += rhs ? *rhs : *lhs;
        value = def->getOperand(rhs ? 0 : 1);
      } else if (isa<arith::SubIOp>(def) && rhs) {
        k -= *rhs;
        value = def->getOperand(0);
      } else {
        break;
      }
    }
    auto result = dyn_cast<OpResult>(value);
    if (!result)
      return std::nullopt;
    auto normalized = [&] { return ((k % n) + n) % n; };
    if (auto index = dyn_cast<shard::ProcessMultiIndexOp>(result.getOwner())) {
      if (index.getGrid() != grid.getSymName())
        return std::nullopt;
      unsigned r = result.getResultNumber();
      int64_t of = index.getAxes().empty() ? r : index.getAxes()[r];
      if (of != axis)
        return std::nullopt;
      return normalized();
    }
    if (auto linear = dyn_cast<shard::ProcessLinearIndexOp>(result.getOwner()))
      if (linear.getGrid() == grid.getSymName() && grid.getRank() == 1)
        return normalized();
    return std::nullopt;
  }

  /// A send to this rank's position + k along one grid axis, paired with
  /// the first receive after it in its block from the position - k, of
  /// the same type on the same grid axis: together they are a shift by k
  /// (the rotation also fills what upstream leaves undefined at the
  /// group's ends). The send's result is its input.
  LogicalResult convert(shard::SendOp op) {
    auto reject = [&](const Twine &why) {
      return op.emitError() << "cannot convert 'shard.send' to dist: " << why;
    };
    shard::GridOp grid = lookupGrid(op, op.getGridAttr());
    if (!grid)
      return op.emitError() << "refers to unknown grid " << op.getGridAttr();
    ArrayRef<int16_t> axes = op.getGridAxes();
    if (axes.size() != 1)
      return reject("it spans " + Twine(axes.size()) +
                    " grid axes; Braid pairs sends and receives along one");
    int64_t n = getGroupSize(grid, axes);
    if (ShapedType::isDynamic(n))
      return reject("its group size is dynamic");
    SmallVector<OpFoldResult> destination = getMixedValues(
        op.getDestination(), op.getDestinationDynamic(), rewriter);
    std::optional<int64_t> k =
        destination.size() == 1
            ? offsetFromPosition(destination[0], grid, axes[0], n)
            : std::nullopt;
    if (!k)
      return reject("its destination is not this rank's position along grid "
                    "axis " +
                    Twine(axes[0]) +
                    " plus a constant (every rank would send to the same "
                    "device)");
    shard::RecvOp recv;
    for (Operation *next = op->getNextNode(); next && !recv;
         next = next->getNextNode()) {
      auto candidate = dyn_cast<shard::RecvOp>(next);
      if (!candidate || state.pairedReceives.contains(candidate) ||
          candidate.getGridAttr() != op.getGridAttr() ||
          candidate.getGridAxes() != axes ||
          candidate.getResult().getType() != op.getInput().getType() ||
          !candidate.getSource())
        continue;
      SmallVector<OpFoldResult> source = getMixedValues(
          *candidate.getSource(), candidate.getSourceDynamic(), rewriter);
      std::optional<int64_t> from =
          source.size() == 1 ? offsetFromPosition(source[0], grid, axes[0], n)
                             : std::nullopt;
      if (from && (*from + *k) % n == 0)
        recv = candidate;
    }
    if (!recv)
      return reject("no 'shard.recv' after it in its block receives from "
                    "this rank's position minus " +
                    Twine(*k) + " along grid axis " + Twine(axes[0]) +
                    " with its type");
    rewriter.setInsertionPoint(recv);
    Value received = op.getInput();
    if (*k != 0)
      received =
          ShiftOp::create(rewriter, recv.getLoc(), recv.getResult().getType(),
                          op.getGridAttr(), rewriter.getDenseI16ArrayAttr(axes),
                          op.getInput(), rewriter.getI64IntegerAttr(*k));
    rewriter.replaceOp(recv, received);
    state.pairedReceives.insert(recv);
    rewriter.replaceOp(op, op.getInput());
    return success();
  }

  int64_t groupSizeOf(Operation *op, FlatSymbolRefAttr grid,
                      ArrayRef<int16_t> axes) {
    shard::GridOp gridOp = lookupGrid(op, grid);
    return gridOp ? getGroupSize(gridOp, axes) : ShapedType::kDynamic;
  }

  /// A halo exchange as ring shifts: for each split dimension, from the
  /// last to the first (so that corners arrive through the later ones'
  /// halos, as upstream orders it), the first `hi` interior rows go to the
  /// lower neighbour's upper halo and the last `lo` to the upper one's lower
  /// halo. The shifts rotate; the ranks at the ends of the group, which
  /// have no such neighbour, keep the halo their destination had.
  LogicalResult convert(shard::UpdateHaloOp op) {
    Location loc = op.getLoc();
    auto type = dyn_cast<RankedTensorType>(op.getDestination().getType());
    if (!type || !type.hasStaticShape())
      return op.emitError() << "cannot convert 'shard.update_halo' on "
                            << op.getDestination().getType()
                            << ": it needs a statically shaped tensor";
    if (!op.getHaloSizes().empty())
      return op.emitError()
             << "cannot convert 'shard.update_halo' with dynamic halo sizes";
    shard::GridOp grid = lookupGrid(op, op.getGridAttr());
    if (!grid)
      return op.emitError() << "refers to unknown grid " << op.getGridAttr();
    FailureOr<SmallVector<HaloSplit>> found = haloSplits(op, type, grid);
    if (failed(found))
      return failure();
    SmallVector<HaloSplit> splits = std::move(*found);
    int64_t rank = type.getRank();

    // Block offsets and sizes: full along the dimensions done so far (the
    // later ones, halos included), interior along the others.
    SmallVector<int64_t> offsets(rank, 0), sizes(type.getShape());
    for (const HaloSplit &sp : splits) {
      offsets[sp.dim] = sp.lo;
      sizes[sp.dim] = type.getDimSize(sp.dim) - sp.lo - sp.hi;
    }
    Value result = op.getDestination();
    // The dimension exchanged before this one (one at most), whose halos the
    // rows sent now carry as their corners.
    std::optional<HaloSplit> done;
    for (const HaloSplit &sp : llvm::reverse(splits)) {
      int64_t extent = type.getDimSize(sp.dim);
      int64_t n = grid.getShape()[sp.axis];
      Value position =
          shard::ProcessMultiIndexOp::create(rewriter, loc, grid.getSymName(),
                                             ArrayRef<shard::GridAxis>{sp.axis})
              .getResult()[0];
      // The upper halo from the upper neighbour's first interior rows, the
      // lower halo from the lower neighbour's last interior rows.
      struct Direction {
        int64_t size, sendAt, recvAt, offset, edge;
      };
      Direction directions[] = {
          {sp.hi, sp.lo, extent - sp.hi, /*offset=*/-1, /*edge=*/n - 1},
          {sp.lo, extent - sp.hi - sp.lo, 0, /*offset=*/1, /*edge=*/0}};
      // Columns [begin, begin + width) of the dimension exchanged before;
      // none: every column the box has.
      using Columns = std::optional<std::pair<int64_t, int64_t>>;
      MLIRContext *ctx = rewriter.getContext();
      auto ones = getAsIndexOpFoldResult(ctx, SmallVector<int64_t>(rank, 1));
      // The box of `rows` rows at `row` of this dimension over `cols`.
      auto boxOf = [&](int64_t row, int64_t rows, Columns cols) {
        SmallVector<int64_t> o(offsets), z(sizes);
        o[sp.dim] = row;
        z[sp.dim] = rows;
        if (cols) {
          o[done->dim] = cols->first;
          z[done->dim] = cols->second;
        }
        return std::make_pair(o, z);
      };
      // The boxes of `from` over each of `cols`, side by side along the
      // dimension exchanged before (one box as it is).
      auto pack = [&](Value from, int64_t row, int64_t rows,
                      ArrayRef<Columns> cols) -> Value {
        auto extract = [&](Columns c) -> Value {
          auto [o, z] = boxOf(row, rows, c);
          return tensor::ExtractSliceOp::create(
              rewriter, loc, from, getAsIndexOpFoldResult(ctx, o),
              getAsIndexOpFoldResult(ctx, z), ones);
        };
        if (cols.size() == 1)
          return extract(cols[0]);
        SmallVector<int64_t> shape = boxOf(row, rows, std::nullopt).second;
        shape[done->dim] = 0;
        for (Columns c : cols)
          shape[done->dim] += c->second;
        Value packed = tensor::EmptyOp::create(rewriter, loc, shape,
                                               type.getElementType());
        int64_t at = 0;
        for (Columns c : cols) {
          SmallVector<int64_t> o(rank, 0), z(shape);
          o[done->dim] = at;
          z[done->dim] = c->second;
          packed = tensor::InsertSliceOp::create(
              rewriter, loc, extract(c), packed, getAsIndexOpFoldResult(ctx, o),
              getAsIndexOpFoldResult(ctx, z), ones);
          at += c->second;
        }
        return packed;
      };
      // One message: the rows of `from` over `cols` (packed) to the peer,
      // what arrives into the same boxes of the result (kept at the
      // group's edge).
      auto exchange = [&](Value from, const Direction &d,
                          ArrayRef<Columns> cols) {
        Value sent = pack(from, d.sendAt, d.size, cols);
        Value got =
            ShiftOp::create(rewriter, loc, sent.getType(), op.getGridAttr(),
                            rewriter.getDenseI16ArrayAttr({sp.axis}), sent,
                            rewriter.getI64IntegerAttr(d.offset));
        Value old = pack(result, d.recvAt, d.size, cols);
        Value atEdge = arith::CmpIOp::create(
            rewriter, loc, arith::CmpIPredicate::eq, position,
            arith::ConstantIndexOp::create(rewriter, loc, d.edge));
        Value kept = arith::SelectOp::create(rewriter, loc, atEdge, old, got);
        int64_t at = 0;
        for (Columns c : cols) {
          Value piece = kept;
          if (cols.size() > 1) {
            auto keptType = cast<RankedTensorType>(kept.getType());
            SmallVector<int64_t> o(rank, 0), z(keptType.getShape());
            o[done->dim] = at;
            z[done->dim] = c->second;
            piece = tensor::ExtractSliceOp::create(
                rewriter, loc, kept, getAsIndexOpFoldResult(ctx, o),
                getAsIndexOpFoldResult(ctx, z), ones);
            at += c->second;
          }
          auto [o, z] = boxOf(d.recvAt, d.size, c);
          result = tensor::InsertSliceOp::create(
              rewriter, loc, piece, result, getAsIndexOpFoldResult(ctx, o),
              getAsIndexOpFoldResult(ctx, z), ones);
        }
      };
      // After another dimension's exchange, the rows' columns inside that
      // dimension's interior go as a message of their own, read from the
      // tile before any exchange (the earlier exchanges wrote only halos,
      // so the values are the same): nothing orders it after them, so it
      // can travel while they do, and while the interior is computed
      // (braid-overlap). Only the corners wait for the exchange before,
      // the two of a direction packed in one message (they are latency,
      // not bandwidth). Both directions' interior pieces go first: shifts
      // keep their order when made asynchronous, so a corner before them
      // would hold them back.
      int64_t across = done ? type.getDimSize(done->dim) : 0;
      for (const Direction &d : directions) {
        if (d.size == 0)
          continue;
        if (!done)
          exchange(result, d, {Columns()});
        else if (int64_t width = across - done->lo - done->hi)
          exchange(op.getDestination(), d, {Columns({done->lo, width})});
      }
      SmallVector<Columns> corners;
      if (done && done->lo)
        corners.push_back(Columns({0, done->lo}));
      if (done && done->hi)
        corners.push_back(Columns({across - done->hi, done->hi}));
      for (const Direction &d : directions)
        if (d.size && !corners.empty())
          exchange(result, d, corners);
      // Later (lower) dimensions carry this one's halos too: in pieces
      // after the first such dimension, whole after more.
      offsets[sp.dim] = 0;
      sizes[sp.dim] = extent;
      if (!done && sp.lo + sp.hi > 0)
        done = sp;
      else if (done)
        done.reset();
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  /// What a rank contributes to a broadcast whose root is known only at
  /// run time: its tensor on the root, zeros elsewhere, so that a sum over
  /// the group is the root's values (but turns -0.0 into +0.0); it moves an
  /// all-reduce's bytes instead of a broadcast's. Over no axes each rank is
  /// its own root, and contributes its tensor.
  FailureOr<Value> rootContribution(Operation *op, Value input,
                                    FlatSymbolRefAttr gridAttr,
                                    ArrayRef<int16_t> axes,
                                    ArrayRef<int64_t> staticRoot,
                                    ValueRange dynamicRoot) {
    Location loc = op->getLoc();
    auto type = dyn_cast<RankedTensorType>(input.getType());
    if (!type || !type.hasStaticShape() ||
        !isa<FloatType, IntegerType>(type.getElementType()))
      return op->emitError()
             << "cannot convert '" << op->getName()
             << "' with a dynamic root on " << input.getType()
             << ": it needs a statically shaped tensor of integers or floats";
    shard::GridOp grid = lookupGrid(op, gridAttr);
    if (!grid)
      return op->emitError() << "refers to unknown grid " << gridAttr;
    // Over no axes each rank is its own root.
    if (axes.empty())
      return input;
    if (staticRoot.size() != axes.size())
      return op->emitError()
             << "has " << staticRoot.size() << " root coordinates for "
             << axes.size() << " grid axes";
    SmallVector<OpFoldResult> root =
        getMixedValues(staticRoot, dynamicRoot, rewriter);
    auto indices = shard::ProcessMultiIndexOp::create(
        rewriter, loc, grid.getSymName(), SmallVector<shard::GridAxis>(axes));
    Value isRoot = arith::ConstantIntOp::create(rewriter, loc, 1, 1);
    for (auto [coordinate, wanted] : llvm::zip(indices.getResults(), root)) {
      Value want = getValueOrCreateConstantIndexOp(rewriter, loc, wanted);
      if (!want.getType().isIndex())
        want = arith::IndexCastOp::create(rewriter, loc,
                                          rewriter.getIndexType(), want);
      Value same = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::eq, coordinate, want);
      isRoot = arith::AndIOp::create(rewriter, loc, isRoot, same);
    }
    Value zeros = arith::ConstantOp::create(rewriter, loc, type,
                                            rewriter.getZeroAttr(type));
    return arith::SelectOp::create(rewriter, loc, isRoot, input, zeros)
        .getResult();
  }

  /// The sum of `value` over the group.
  Value sumOverGroup(Location loc, Value value, FlatSymbolRefAttr grid,
                     DenseI16ArrayAttr axes) {
    return AllReduceOp::create(
        rewriter, loc, value.getType(), grid, axes, value,
        ReductionKindAttr::get(rewriter.getContext(), ReductionKind::Sum));
  }

  /// A device's shard shape as index arithmetic: along a dimension split
  /// over some grid axes into n shards, dim / n, plus one on the last
  /// dim % n shards (upstream's rule for uneven splits); other dimensions
  /// whole. The sharding must come from a 'shard.sharding' op without halos
  /// or explicit offsets.
  LogicalResult convert(shard::ShardShapeOp op) {
    Location loc = op.getLoc();
    auto sharding = op.getSharding().getDefiningOp<shard::ShardingOp>();
    if (!sharding)
      return op.emitError() << "cannot convert 'shard.shard_shape': its "
                               "sharding must come from a 'shard.sharding' op";
    if (!sharding.getStaticHaloSizes().empty() ||
        !sharding.getDynamicHaloSizes().empty() ||
        !sharding.getStaticShardedDimsOffsets().empty() ||
        !sharding.getDynamicShardedDimsOffsets().empty())
      return op.emitError() << "cannot convert 'shard.shard_shape' of a "
                               "sharding with halos or explicit offsets";
    shard::GridOp grid = lookupGrid(op, sharding.getGridAttr());
    if (!grid || ShapedType::isDynamicShape(grid.getShape()))
      return op.emitError() << "cannot convert 'shard.shard_shape': its grid "
                               "must exist and have a static shape";
    SmallVector<OpFoldResult> dims =
        getMixedValues(op.getDims(), op.getDimsDynamic(), rewriter);
    SmallVector<OpFoldResult> device =
        getMixedValues(op.getDevice(), op.getDeviceDynamic(), rewriter);
    if (static_cast<int64_t>(device.size()) != grid.getRank())
      return op.emitError()
             << "has a device index of " << device.size()
             << " coordinates on a rank-" << grid.getRank() << " grid";
    if (op.getNumResults() != dims.size())
      return op.emitError() << "has " << op.getNumResults() << " results for "
                            << dims.size() << " dimensions";
    ArrayRef<shard::GridAxesAttr> split = sharding.getSplitAxes().getAxes();
    for (shard::GridAxesAttr axes : split.take_front(dims.size()))
      for (int16_t axis : axes.asArrayRef())
        if (axis < 0 || axis >= grid.getRank())
          return op.emitError() << "splits along grid axis " << axis
                                << ", which the grid does not have";
    auto index = [&](OpFoldResult v) {
      return getValueOrCreateConstantIndexOp(rewriter, loc, v);
    };
    auto constant = [&](int64_t v) {
      return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
    };
    SmallVector<Value> sizes;
    for (auto [i, dimValue] : llvm::enumerate(dims)) {
      Value dim = index(dimValue);
      if (i >= split.size() || split[i].empty()) {
        sizes.push_back(dim);
        continue;
      }
      int64_t n = 1;
      Value position = constant(0);
      for (int16_t axis : split[i].asArrayRef()) {
        int64_t size = grid.getShape()[axis];
        n *= size;
        position = arith::AddIOp::create(
            rewriter, loc,
            arith::MulIOp::create(rewriter, loc, position, constant(size)),
            index(device[axis]));
      }
      Value shards = constant(n);
      Value base = arith::DivUIOp::create(rewriter, loc, dim, shards);
      Value rest = arith::RemUIOp::create(rewriter, loc, dim, shards);
      Value firstLonger = arith::SubIOp::create(rewriter, loc, shards, rest);
      Value longer = arith::CmpIOp::create(
          rewriter, loc, arith::CmpIPredicate::uge, position, firstLonger);
      Value extra = arith::SelectOp::create(rewriter, loc, longer, constant(1),
                                            constant(0));
      sizes.push_back(arith::AddIOp::create(rewriter, loc, base, extra));
    }
    // The sharding, unused now, goes with the other dead ones.
    rewriter.replaceOp(op, sizes);
    return success();
  }

  /// An all-reduce of `input` (its elements converted to the result's
  /// first) that replaces `op`'s `resultValue`. A sum over the group that
  /// each rank then slices is a reduce-scatter: partitioning writes one for
  /// a partial sum that becomes split (a rowwise layer under sequence
  /// parallelism).
  LogicalResult convertReduction(Operation *op, Value inputValue,
                                 Value resultValue, FlatSymbolRefAttr grid,
                                 DenseI16ArrayAttr axes,
                                 shard::ReductionKind reduction) {
    auto inType = dyn_cast<RankedTensorType>(inputValue.getType());
    auto outType = dyn_cast<RankedTensorType>(resultValue.getType());
    if (!inType || !outType)
      return op->emitError() << "cannot convert '" << op->getName() << "' on "
                             << inputValue.getType()
                             << ": dist collectives take ranked tensors";
    bool average;
    FailureOr<ReductionKind> kind = mapReduction(op, reduction, average);
    if (failed(kind))
      return failure();
    int64_t group = groupSizeOf(op, grid, axes.asArrayRef());
    if (average && ShapedType::isDynamic(group))
      return op->emitError() << "cannot convert an average over a group of "
                                "dynamic size";
    Value input = castElements(rewriter, op->getLoc(), inputValue,
                               outType.getElementType());
    auto kindAttr = ReductionKindAttr::get(rewriter.getContext(), *kind);
    auto slice = resultValue.hasOneUse()
                     ? dyn_cast<shard::AllSliceOp>(*resultValue.user_begin())
                     : shard::AllSliceOp();
    if (slice && *kind == ReductionKind::Sum && !average &&
        slice.getGridAttr() == grid &&
        slice.getGridAxes() == axes.asArrayRef() && outType.hasStaticShape() &&
        cast<ShapedType>(slice.getResult().getType()).hasStaticShape()) {
      rewriter.setInsertionPoint(slice);
      Value result = ReduceScatterOp::create(
          rewriter, slice.getLoc(), slice.getResult().getType(), grid, axes,
          input,
          rewriter.getI64IntegerAttr(slice.getSliceAxis().getSExtValue()),
          kindAttr);
      rewriter.replaceOp(slice, result);
      rewriter.eraseOp(op);
      return success();
    }
    Value result = AllReduceOp::create(rewriter, op->getLoc(), outType, grid,
                                       axes, input, kindAttr);
    if (average)
      result = divideByGroup(rewriter, op->getLoc(), result, group);
    rewriter.replaceOp(op, result);
    return success();
  }

  LogicalResult convert(shard::ReduceScatterOp op) {
    auto outType = cast<RankedTensorType>(op.getResult().getType());
    bool average;
    FailureOr<ReductionKind> kind =
        mapReduction(op, op.getReduction(), average);
    if (failed(kind))
      return failure();
    int64_t group = groupSizeOf(op, op.getGridAttr(), op.getGridAxes());
    if (average && ShapedType::isDynamic(group))
      return op.emitError() << "cannot convert an average over a group of "
                               "dynamic size";
    Value input = castElements(rewriter, op.getLoc(), op.getInput(),
                               outType.getElementType());
    Value result = ReduceScatterOp::create(
        rewriter, op.getLoc(), outType, op.getGridAttr(), op.getGridAxesAttr(),
        input, rewriter.getI64IntegerAttr(op.getScatterAxis().getSExtValue()),
        ReductionKindAttr::get(rewriter.getContext(), *kind));
    if (average)
      result = divideByGroup(rewriter, op.getLoc(), result, group);
    rewriter.replaceOp(op, result);
    return success();
  }

  /// `all_slice` moves nothing: each rank keeps its block of a value it
  /// already holds, at its linear position in the group.
  LogicalResult convert(shard::AllSliceOp op) {
    Location loc = op.getLoc();
    auto inType = cast<RankedTensorType>(op.getInput().getType());
    auto outType = cast<RankedTensorType>(op.getResult().getType());
    int64_t dim = op.getSliceAxis().getSExtValue();
    shard::GridOp grid = lookupGrid(op, op.getGridAttr());
    if (!grid)
      return op.emitError() << "refers to unknown grid " << op.getGridAttr();
    ArrayRef<int16_t> axes = op.getGridAxes();
    for (int16_t axis : axes)
      if (axis < 0 || axis >= grid.getRank() ||
          ShapedType::isDynamic(grid.getShape()[axis]))
        return op.emitError()
               << "cannot convert 'shard.all_slice' over grid axis " << axis
               << ": it must exist and have a static size";
    // Over no axes each rank is its own group: the slice is the input.
    if (axes.empty() && inType == outType) {
      rewriter.replaceOp(op, op.getInput());
      return success();
    }
    int64_t group = getGroupSize(grid, axes);
    auto indices = shard::ProcessMultiIndexOp::create(rewriter, loc,
                                                      grid.getSymName(), axes);
    // Row-major position over the listed axes.
    Value position = arith::ConstantIndexOp::create(rewriter, loc, 0);
    for (auto [axis, index] : llvm::zip(axes, indices.getResults())) {
      Value size =
          arith::ConstantIndexOp::create(rewriter, loc, grid.getShape()[axis]);
      position = arith::AddIOp::create(
          rewriter, loc, arith::MulIOp::create(rewriter, loc, position, size),
          index);
    }
    SmallVector<OpFoldResult> offsets(inType.getRank(),
                                      rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> sizes;
    for (int64_t i = 0; i < inType.getRank(); ++i) {
      if (!outType.isDynamicDim(i)) {
        sizes.push_back(rewriter.getIndexAttr(outType.getDimSize(i)));
        continue;
      }
      Value full = tensor::DimOp::create(rewriter, loc, op.getInput(), i);
      if (i == dim)
        full = arith::DivUIOp::create(
            rewriter, loc, full,
            arith::ConstantIndexOp::create(rewriter, loc, group));
      sizes.push_back(full);
    }
    Value blockSize =
        getValueOrCreateConstantIndexOp(rewriter, loc, sizes[dim]);
    offsets[dim] =
        arith::MulIOp::create(rewriter, loc, position, blockSize).getResult();
    SmallVector<OpFoldResult> strides(inType.getRank(),
                                      rewriter.getIndexAttr(1));
    Value slice = tensor::ExtractSliceOp::create(
        rewriter, loc, outType, op.getInput(), offsets, sizes, strides);
    rewriter.replaceOp(op, slice);
    return success();
  }

private:
  RewriterBase &rewriter;
  ImportState &state;
};

/// One shard op to dist, through the importer's overload for its type.
template <typename ShardOpT>
struct ImportPattern : OpConversionPattern<ShardOpT> {
  ImportPattern(MLIRContext *context, ImportState &state)
      : OpConversionPattern<ShardOpT>(context), state(state) {}

  LogicalResult
  matchAndRewrite(ShardOpT op, typename ShardOpT::Adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(CollectiveImporter(rewriter, state).convert(op)))
      return failure();
    ++state.converted;
    return success();
  }

private:
  ImportState &state;
};

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Whether `op` is an elementwise sum of its two inputs (identity maps,
/// every loop parallel, the body one addf of the block arguments).
static bool isElementwiseSum(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op->getNumResults() != 1 || !op.hasPureTensorSemantics() ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  Block *body = op.getBody();
  auto yield = cast<linalg::YieldOp>(body->getTerminator());
  auto add = yield.getValues()[0].getDefiningOp<arith::AddFOp>();
  if (!add || &body->front() != add.getOperation())
    return false;
  Value a = body->getArgument(0), b = body->getArgument(1);
  return (add.getLhs() == a && add.getRhs() == b) ||
         (add.getLhs() == b && add.getRhs() == a);
}

/// The sum of two partial sums each reduced over the same group is one
/// reduction of their sum: reduce(a) + reduce(b) = reduce(a + b). A
/// backward gives such sums wherever an activation fed several split
/// contractions (q, k and v; gate and up): their input gradients are
/// partial, and partitioning reduces each before the sum, where Megatron
/// reduces once.
static void sumBeforeReducing(ModuleOp module) {
  // The reduction behind `value`, through reshapes of an all-reduce's
  // result (each the only use of what it reads), which `chain` collects
  // from the reduction outwards.
  auto reduced = [](Value value,
                    SmallVectorImpl<Operation *> &chain) -> Operation * {
    chain.clear();
    Operation *def = value.getDefiningOp();
    while (def && def->hasOneUse() &&
           isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
      chain.push_back(def);
      def = def->getOperand(0).getDefiningOp();
    }
    std::reverse(chain.begin(), chain.end());
    if (!def || !def->hasOneUse())
      return nullptr;
    if (auto reduce = dyn_cast<AllReduceOp>(def))
      return reduce.getReduction() == ReductionKind::Sum ? def : nullptr;
    if (auto scatter = dyn_cast<ReduceScatterOp>(def))
      return chain.empty() && scatter.getReduction() == ReductionKind::Sum
                 ? def
                 : nullptr;
    return nullptr;
  };
  bool changed = true;
  while (changed) {
    changed = false;
    module.walk([&](linalg::GenericOp op) {
      if (!isElementwiseSum(op))
        return WalkResult::advance();
      SmallVector<Operation *> chainA, chainB;
      Operation *a = reduced(op.getDpsInputs()[0], chainA);
      Operation *b = reduced(op.getDpsInputs()[1], chainB);
      if (!a || !b || a == b || a->getName() != b->getName() ||
          a->getAttrDictionary() != b->getAttrDictionary())
        return WalkResult::advance();
      OpBuilder builder(op);
      Location loc = op.getLoc();
      // Each reduction's input, reshaped as its result was.
      auto reshaped = [&](Operation *reduction,
                          ArrayRef<Operation *> chain) -> Value {
        Value value = reduction->getOperand(0);
        for (Operation *reshape : chain) {
          IRMapping map;
          map.map(reshape->getOperand(0), value);
          value = builder.clone(*reshape, map)->getResult(0);
        }
        return value;
      };
      Value inA = reshaped(a, chainA), inB = reshaped(b, chainB);
      if (inA.getType() != inB.getType())
        return WalkResult::advance();
      auto inType = cast<RankedTensorType>(inA.getType());
      Value init = tensor::EmptyOp::create(builder, loc, inType.getShape(),
                                           inType.getElementType());
      IRMapping map;
      map.map(op.getDpsInputs()[0], inA);
      map.map(op.getDpsInputs()[1], inB);
      map.map(op.getDpsInits()[0], init);
      Operation *sum = builder.clone(*op, map);
      sum->getResult(0).setType(inType);
      // The reduction again, over the sum.
      Operation *reduction = builder.clone(*a);
      reduction->setOperand(0, sum->getResult(0));
      reduction->setLoc(loc);
      if (isa<AllReduceOp>(a))
        reduction->getResult(0).setType(inType);
      op->getResult(0).replaceAllUsesWith(reduction->getResult(0));
      op->erase();
      for (auto *chain : {&chainA, &chainB})
        for (Operation *reshape : llvm::reverse(*chain))
          reshape->erase();
      a->erase();
      b->erase();
      changed = true;
      return WalkResult::interrupt();
    });
  }
}

struct ImportShardPass : public braid::impl::ImportShardBase<ImportShardPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Every grid first: sizes below divide by its axes and unroll over its
    // ranks.
    bool badGrid = false;
    module.walk([&](shard::GridOp grid) {
      badGrid |=
          failed(verifyGridShape(grid, [&] { return grid.emitOpError(); }));
    });
    if (badGrid)
      return signalPassFailure();
    bool globalView = false;
    // A sharding that only shard_shape reads is SPMD arithmetic, not an
    // annotation to partition.
    module.walk([&](Operation *op) {
      bool annotation =
          isa<shard::ShardOp>(op) ||
          (isa<shard::ShardingOp>(op) &&
           !llvm::all_of(op->getUsers(), llvm::IsaPred<shard::ShardShapeOp>));
      if (annotation) {
        globalView = true;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if ((partition == braid::PartitionMode::Auto && globalView) ||
        partition == braid::PartitionMode::Always) {
      if (failed(partitionGlobalView(module)))
        return signalPassFailure();
    }
    // braid-prepare-import kept batch dimensions apart for partitioning.
    if (failed(braid::foldBatchMatmuls(module))) {
      module.emitError() << "braid-import-shard: folding the batch matmuls "
                            "back did not converge";
      return signalPassFailure();
    }

    if (failed(importCollectives(module)))
      return signalPassFailure();

    // Partitioning reshards the zero fills frontends share between ops: a
    // collective that only moves a fill's constant is that fill of its
    // result's shape. (Collectives of tensor.empty fold as a
    // canonicalization; reductions of a fill do not: they combine it.)
    module.walk([&](Operation *op) {
      if (!isa<AllGatherOp, AllToAllOp, ShiftOp, BroadcastOp>(op))
        return;
      auto collective = cast<CollectiveOpInterface>(op);
      auto fill = collective.getInput().getDefiningOp<linalg::FillOp>();
      RankedTensorType type = collective.getCollectiveResult().getType();
      // A fill's values do not depend on what it fills.
      if (!fill || !fill.hasPureTensorSemantics() || !type.hasStaticShape())
        return;
      OpBuilder b(op);
      Value empty = tensor::EmptyOp::create(b, op->getLoc(), type.getShape(),
                                            type.getElementType());
      Value filled =
          linalg::FillOp::create(b, op->getLoc(), fill.getInputs()[0], empty)
              .getResult(0);
      op->getResult(0).replaceAllUsesWith(filled);
      op->erase();
    });

    sumBeforeReducing(module);

    // Sharding values that annotated nothing are dead now, and partitioning
    // leaves casts between identical types behind.
    module.walk([&](Operation *op) {
      if (isa<shard::ShardingOp>(op) && op->use_empty()) {
        op->erase();
        return;
      }
      if (auto cast = dyn_cast<tensor::CastOp>(op))
        if (cast.getSource().getType() == cast.getType()) {
          cast.replaceAllUsesWith(cast.getSource());
          cast->erase();
        }
    });
  }

  /// Converts the shard ops partitioning left (and those of SPMD input)
  /// to dist, one pattern per op. What must be gone afterwards is every
  /// shard op but the grids, the rank queries (convert-xfer-to-runtime
  /// lowers them) and sharding values a program hands on as data (a
  /// function may return one): an op no pattern knows is a located error
  /// at the op (`shard.neighbors_linear_indices` went through unconverted
  /// before the target said so). The driver stops at the first op it
  /// cannot convert; a pattern that declines says why itself, so the
  /// driver's own "failed to legalize" for that op is left out.
  LogicalResult importCollectives(ModuleOp module) {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalDialect<shard::ShardDialect>();
    target.addLegalOp<shard::GridOp, shard::ProcessMultiIndexOp,
                      shard::ProcessLinearIndexOp, shard::GridShapeOp,
                      shard::ShardingOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    ImportState state;
    RewritePatternSet patterns(context);
    patterns.add<
        ImportPattern<shard::AllGatherOp>, ImportPattern<shard::GatherOp>,
        ImportPattern<shard::AllReduceOp>, ImportPattern<shard::ReduceOp>,
        ImportPattern<shard::ReduceScatterOp>, ImportPattern<shard::AllToAllOp>,
        ImportPattern<shard::ShiftOp>, ImportPattern<shard::BroadcastOp>,
        ImportPattern<shard::ScatterOp>, ImportPattern<shard::AllSliceOp>,
        ImportPattern<shard::UpdateHaloOp>, ImportPattern<shard::ShardShapeOp>,
        ImportPattern<shard::SendOp>, ImportPattern<shard::RecvOp>,
        ImportPattern<shard::GetShardingOp>, ImportPattern<shard::ShardOp>>(
        context, state);
    ConversionConfig config;
    config.foldingMode = DialectConversionFoldingMode::Never;
    bool reported = false;
    ScopedDiagnosticHandler handler(context, [&](Diagnostic &diag) {
      if (diag.getSeverity() != DiagnosticSeverity::Error)
        return failure();
      if (reported && StringRef(diag.str()).starts_with("failed to legalize"))
        return success();
      reported = true;
      return failure();
    });
    LogicalResult result =
        applyPartialConversion(module, target, std::move(patterns), config);
    numConverted += state.converted;
    return result;
  }

  /// Rejects annotations that upstream partitioning would silently
  /// mistranslate: grid axes that do not exist, and static
  /// dimensions that do not divide evenly over their ranks (upstream
  /// truncates the shard size).
  LogicalResult validateShardings(ModuleOp module) {
    WalkResult result = module.walk([&](shard::ShardOp op) {
      auto shardingOp = op.getSharding().getDefiningOp<shard::ShardingOp>();
      if (!shardingOp)
        return WalkResult::advance();
      shard::GridOp grid = lookupGrid(op, shardingOp.getGridAttr());
      if (!grid) {
        shardingOp.emitError()
            << "sharding refers to unknown grid " << shardingOp.getGridAttr();
        return WalkResult::interrupt();
      }
      if (!shardingOp.getStaticShardedDimsOffsets().empty())
        return WalkResult::advance();
      auto type = cast<RankedTensorType>(op.getResult().getType());
      for (auto [dim, axesAttr] :
           llvm::enumerate(shardingOp.getSplitAxes().getAxes())) {
        ArrayRef<int16_t> axes = axesAttr.asArrayRef();
        // An empty entry splits nothing (`[[]]` on a rank-0 tensor).
        if (axes.empty())
          continue;
        for (int16_t axis : axes) {
          if (axis < 0 || axis >= grid.getRank()) {
            shardingOp.emitError()
                << "sharding splits dimension " << dim << " over grid axis "
                << axis << ", but grid " << shardingOp.getGridAttr() << " has "
                << grid.getRank() << " axes";
            return WalkResult::interrupt();
          }
        }
        if (static_cast<int64_t>(dim) >= type.getRank()) {
          op.emitError() << "sharding splits dimension " << dim << " of a rank-"
                         << type.getRank() << " tensor";
          return WalkResult::interrupt();
        }
        int64_t size = type.getDimSize(dim);
        int64_t ranks = getGroupSize(grid, axes);
        if (!ShapedType::isDynamic(size) && !ShapedType::isDynamic(ranks) &&
            ranks > 0 && size % ranks != 0) {
          op.emitError() << "dimension " << dim << " of size " << size
                         << " does not divide evenly over the " << ranks
                         << " ranks it is split over (give "
                            "sharded_dims_offsets for uneven shards)";
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }

  /// Runs upstream propagation and partitioning on a copy of the module, one
  /// function at a time inside a crash-recovery context: upstream aborts or
  /// crashes on some inputs, which must become a diagnostic here.
  LogicalResult partitionGlobalView(ModuleOp module) {
    MLIRContext *context = &getContext();
    if (failed(validateShardings(module)))
      return failure();
    DenseMap<StringAttr, FunctionPlacements> placements;
    module.walk([&](func::FuncOp func) {
      placements[func.getSymNameAttr()] = collectPlacements(func);
    });

    OwningOpRef<ModuleOp> copy = module.clone();
    // The stages, each a pass of its own (docs/rationale/import.md):
    // propagation backward first (upstream's default), or forward first
    // where the inputs' shardings should decide (a training step on a data
    // axis: see kForwardFirstAttr).
    auto stages = [&](shard::TraversalOrder order) {
      auto pm = std::make_unique<PassManager>(context,
                                              func::FuncOp::getOperationName());
      pm->addPass(shard::createShardingPropagation({order}));
      pm->addPass(braid::createPreparePartition());
      pm->addPass(shard::createPartition());
      pm->addPass(braid::createOffsetGlobalIndices());
      return pm;
    };
    std::unique_ptr<PassManager> backwardFirst =
        stages(shard::TraversalOrder::BackwardForward);
    std::unique_ptr<PassManager> forwardFirst =
        stages(shard::TraversalOrder::ForwardBackward);
    auto pipeline = [&](func::FuncOp func) {
      bool forward = func->hasAttr(kForwardFirstAttr);
      func->removeAttr(kForwardFirstAttr);
      return (forward ? forwardFirst : backwardFirst)->run(func);
    };

    llvm::CrashRecoveryContext::Enable();
    for (func::FuncOp func : copy->getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      // Diagnostics point at the user's function, not at the copy.
      Location loc = func.getLoc();
      if (auto original = module.lookupSymbol<func::FuncOp>(func.getSymName()))
        loc = original.getLoc();
      LogicalResult result = failure();
      llvm::CrashRecoveryContext recovery;
      if (!recovery.RunSafely([&] { result = pipeline(func); })) {
        // The copy may be half-rewritten; never touch it again.
        (void)copy.release();
        return emitError(loc)
               << "upstream sharding propagation/partitioning crashed on "
                  "function '"
               << func.getSymName()
               << "' (an upstream shard bug); annotate the intermediate "
                  "values with shard.shard or hand over the SPMD form";
      }
      if (failed(result))
        return emitError(loc)
               << "upstream sharding propagation/partitioning failed on "
                  "function '"
               << func.getSymName() << "'";
      ++numPartitionedFunctions;
    }

    // Adopt the partitioned functions.
    Block *body = module.getBody();
    for (Operation &op : llvm::make_early_inc_range(*body))
      op.erase();
    body->getOperations().splice(body->end(), copy->getBody()->getOperations());

    StringAttr placementName =
        StringAttr::get(context, DistDialect::getPlacementAttrName());
    for (func::FuncOp func : module.getOps<func::FuncOp>()) {
      auto it = placements.find(func.getSymNameAttr());
      if (it == placements.end())
        continue;
      for (auto [index, placement] : it->second.args)
        if (index < func.getNumArguments())
          func.setArgAttr(index, placementName, placement);
      for (auto [index, placement] : it->second.results)
        if (index < func.getNumResults())
          func.setResultAttr(index, placementName, placement);
    }
    return success();
  }
};

} // namespace
