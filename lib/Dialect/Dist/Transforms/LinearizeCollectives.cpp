//===- LinearizeCollectives.cpp - Collectives on contiguous blocks -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace braid::dist {
#define GEN_PASS_DEF_LINEARIZECOLLECTIVES
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;

namespace {

using Reassociation = SmallVector<ReassociationIndices>;

/// Product of the sizes before `dim` (static shapes only).
static int64_t prefixProduct(RankedTensorType type, int64_t dim) {
  int64_t product = 1;
  for (int64_t i = 0; i < dim; ++i)
    product *= type.getDimSize(i);
  return product;
}

static RankedTensorType withShape(RankedTensorType type,
                                  ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, type.getElementType());
}

/// [.., S, ..] -> [.., n, S/n, ..] at `dim`.
static Value splitDim(OpBuilder &b, Location loc, Value value, int64_t dim,
                      int64_t n) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = type.getDimSize(dim) / n;
  shape.insert(shape.begin() + dim, n);
  Reassociation groups;
  for (int64_t i = 0, j = 0; i < type.getRank(); ++i) {
    if (i == dim) {
      groups.push_back({j, j + 1});
      j += 2;
    } else {
      groups.push_back({j++});
    }
  }
  return tensor::ExpandShapeOp::create(b, loc, withShape(type, shape), value,
                                       groups);
}

/// [.., a, b, ..] -> [.., a*b, ..] merging `dim` and `dim + 1`.
static Value mergeDims(OpBuilder &b, Location loc, Value value, int64_t dim) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] *= shape[dim + 1];
  shape.erase(shape.begin() + dim + 1);
  Reassociation groups;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < dim)
      groups.push_back({i});
    else if (i == dim)
      groups.push_back({i, i + 1});
    else
      groups.push_back({i + 1});
  }
  return tensor::CollapseShapeOp::create(b, loc, withShape(type, shape), value,
                                         groups);
}

/// Applies `permutation` (result dim i = input dim permutation[i]). When only
/// unit dimensions change places the data does not move, so a reshape
/// replaces the transpose.
static Value permute(OpBuilder &b, Location loc, Value value,
                     ArrayRef<int64_t> permutation) {
  auto type = cast<RankedTensorType>(value.getType());
  if (llvm::is_sorted(permutation))
    return value;
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(type.getDimSize(p));
  SmallVector<int64_t> nonUnit;
  for (int64_t p : permutation)
    if (type.getDimSize(p) != 1)
      nonUnit.push_back(p);
  if (llvm::is_sorted(nonUnit)) {
    // Same element order: collapse everything, then expand to the new shape.
    int64_t total = type.getNumElements();
    auto flat = withShape(type, {total});
    Reassociation all(1);
    for (int64_t i = 0; i < type.getRank(); ++i)
      all[0].push_back(i);
    Value collapsed = tensor::CollapseShapeOp::create(b, loc, flat, value, all);
    Reassociation back(1);
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
      back[0].push_back(i);
    return tensor::ExpandShapeOp::create(b, loc, withShape(type, shape),
                                         collapsed, back);
  }
  Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  return linalg::TransposeOp::create(b, loc, value, init, permutation)
      ->getResult(0);
}

/// Moves dimension `dim` to the front.
static Value moveDimToFront(OpBuilder &b, Location loc, Value value,
                            int64_t dim) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> permutation{dim};
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim)
      permutation.push_back(i);
  return permute(b, loc, value, permutation);
}

/// Moves the leading dimension to position `dim`.
static Value moveFrontDimTo(OpBuilder &b, Location loc, Value value,
                            int64_t dim) {
  int64_t rank = cast<RankedTensorType>(value.getType()).getRank();
  SmallVector<int64_t> permutation;
  for (int64_t i = 1; i <= dim; ++i)
    permutation.push_back(i);
  permutation.push_back(0);
  for (int64_t i = dim + 1; i < rank; ++i)
    permutation.push_back(i);
  return permute(b, loc, value, permutation);
}

/// Adds a leading unit dimension.
static Value addLeadingUnitDim(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape{1};
  llvm::append_range(shape, type.getShape());
  Reassociation groups{{0, 1}};
  for (int64_t i = 1; i < type.getRank(); ++i)
    groups.push_back({i + 1});
  if (type.getRank() == 0)
    groups.clear();
  return tensor::ExpandShapeOp::create(b, loc, withShape(type, shape), value,
                                       groups);
}

/// Drops a leading unit dimension.
static Value dropLeadingUnitDim(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  Reassociation groups;
  if (type.getRank() > 1) {
    groups.push_back({0, 1});
    for (int64_t i = 2; i < type.getRank(); ++i)
      groups.push_back({i});
  }
  return tensor::CollapseShapeOp::create(
      b, loc, withShape(type, type.getShape().drop_front()), value, groups);
}

/// How one collective is rewritten: the input it takes instead, the result
/// type of the rewritten op, and what turns that result into the original.
struct Plan {
  Value input;
  RankedTensorType resultType;
  std::function<Value(OpBuilder &, Location, Value)> finish;
  /// Attribute overrides for the rewritten op.
  SmallVector<NamedAttribute> attrs;
};

class Linearizer {
public:
  explicit Linearizer(MLIRContext *context) : rewriter(context) {}

  LogicalResult run(CollectiveOpInterface op) {
    shard::GridOp grid = lookupGrid(op, op.getGridAttr());
    int64_t n = grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
    Operation *raw = op.getOperation();

    std::optional<Plan> plan;
    rewriter.setInsertionPoint(raw);
    Location loc = op.getLoc();
    if (auto gather = dyn_cast<AllGatherOp>(raw))
      plan = planAllGather(loc, op, gather.getDim(), n);
    else if (auto gather = dyn_cast<AllGatherStartOp>(raw))
      plan = planAllGather(loc, op, gather.getDim(), n);
    else if (auto scatter = dyn_cast<ReduceScatterOp>(raw))
      plan = planReduceScatter(loc, op, scatter.getDim(), n);
    else if (auto scatter = dyn_cast<ReduceScatterStartOp>(raw))
      plan = planReduceScatter(loc, op, scatter.getDim(), n);
    else if (auto a2a = dyn_cast<AllToAllOp>(raw))
      plan = planAllToAll(loc, op, a2a.getSplitDim(), a2a.getConcatDim(), n);
    else if (auto a2a = dyn_cast<AllToAllStartOp>(raw))
      plan = planAllToAll(loc, op, a2a.getSplitDim(), a2a.getConcatDim(), n);
    if (failedPlan)
      return failure();
    if (!plan)
      return success();

    // Re-create the collective on the new input and result type.
    Operation *clone = rewriter.clone(*raw);
    clone->setOperand(0, plan->input);
    for (NamedAttribute attr : plan->attrs)
      clone->setAttr(attr.getName(), attr.getValue());
    auto newOp = cast<CollectiveOpInterface>(clone);
    newOp.getCollectiveResult().setType(plan->resultType);

    if (!op.isAsync()) {
      rewriter.setInsertionPointAfter(clone);
      Value result = plan->finish(rewriter, loc, newOp.getCollectiveResult());
      rewriter.replaceOp(raw, result);
      return success();
    }
    auto wait = cast<WaitOp>(*op.getAsyncToken().user_begin());
    rewriter.setInsertionPoint(wait);
    auto newWait =
        WaitOp::create(rewriter, wait.getLoc(), plan->resultType,
                       newOp.getAsyncToken(), newOp.getCollectiveResult());
    Value result = plan->finish(rewriter, wait.getLoc(), newWait.getResult());
    rewriter.replaceOp(wait, result);
    rewriter.eraseOp(raw);
    return success();
  }

private:
  bool requireStatic(CollectiveOpInterface op, int64_t n) {
    if (op.getInput().getType().hasStaticShape() &&
        op.getCollectiveResult().getType().hasStaticShape() &&
        !ShapedType::isDynamic(n))
      return true;
    op->emitError() << op.getCollectiveKind()
                    << " along a dimension with larger dimensions before it "
                       "needs static shapes and group size to be lowered";
    failedPlan = true;
    return false;
  }

  NamedAttribute dimAttr(StringRef name) {
    return rewriter.getNamedAttr(name, rewriter.getI64IntegerAttr(0));
  }

  /// Whether an all-gather or reduce-scatter along `dim` needs its blocks
  /// moved: along dimension 0, or behind a unit prefix, they are contiguous
  /// already. Notes a failed plan when the shapes are not static.
  bool blocksApart(CollectiveOpInterface op, int64_t dim, int64_t n) {
    auto inType = op.getInput().getType();
    if (dim == 0 ||
        (inType.hasStaticShape() && prefixProduct(inType, dim) == 1))
      return false;
    return requireStatic(op, n);
  }

  std::optional<Plan> planAllGather(Location loc, CollectiveOpInterface op,
                                    int64_t dim, int64_t n) {
    if (!blocksApart(op, dim, n))
      return std::nullopt;
    auto inType = op.getInput().getType();
    SmallVector<int64_t> shape{n};
    llvm::append_range(shape, inType.getShape());
    return Plan{addLeadingUnitDim(rewriter, loc, op.getInput()),
                withShape(inType, shape),
                [dim](OpBuilder &b, Location loc, Value gathered) {
                  return mergeDims(b, loc,
                                   moveFrontDimTo(b, loc, gathered, dim), dim);
                },
                {dimAttr("dim")}};
  }

  std::optional<Plan> planReduceScatter(Location loc, CollectiveOpInterface op,
                                        int64_t dim, int64_t n) {
    if (!blocksApart(op, dim, n))
      return std::nullopt;
    Value split = splitDim(rewriter, loc, op.getInput(), dim, n);
    Value input = moveDimToFront(rewriter, loc, split, dim);
    SmallVector<int64_t> shape(
        cast<RankedTensorType>(input.getType()).getShape());
    shape[0] = 1;
    return Plan{input,
                withShape(op.getInput().getType(), shape),
                [](OpBuilder &b, Location loc, Value scattered) {
                  return dropLeadingUnitDim(b, loc, scattered);
                },
                {dimAttr("dim")}};
  }

  std::optional<Plan> planAllToAll(Location loc, CollectiveOpInterface op,
                                   int64_t split, int64_t concat, int64_t n) {
    auto inType = op.getInput().getType();
    auto outType = op.getCollectiveResult().getType();
    if (split == 0 && concat == 0)
      return std::nullopt;
    if (inType.hasStaticShape() && outType.hasStaticShape() &&
        prefixProduct(inType, split) == 1 &&
        prefixProduct(outType, concat) == 1 && split == concat)
      return std::nullopt;
    if (!requireStatic(op, n))
      return std::nullopt;
    Plan plan;
    Value blocks = splitDim(rewriter, loc, op.getInput(), split, n);
    plan.input = moveDimToFront(rewriter, loc, blocks, split);
    plan.resultType = cast<RankedTensorType>(plan.input.getType());
    plan.attrs.push_back(dimAttr("split_dim"));
    plan.attrs.push_back(dimAttr("concat_dim"));
    plan.finish = [concat](OpBuilder &b, Location loc, Value exchanged) {
      return mergeDims(b, loc, moveFrontDimTo(b, loc, exchanged, concat),
                       concat);
    };
    return plan;
  }

  IRRewriter rewriter;
  bool failedPlan = false;
};

struct LinearizeCollectivesPass
    : public braid::dist::impl::LinearizeCollectivesBase<
          LinearizeCollectivesPass> {
  void runOnOperation() override {
    SmallVector<CollectiveOpInterface> ops;
    getOperation()->walk([&](CollectiveOpInterface op) { ops.push_back(op); });
    // Collectives that no schedule numbered get their position in the
    // function, so that every transfer has a name at run time.
    StringRef step = DistDialect::getStepAttrName();
    for (auto [index, op] : llvm::enumerate(ops))
      if (!op->hasAttr(step))
        op->setAttr(
            step, IntegerAttr::get(IntegerType::get(&getContext(), 64), index));
    Linearizer linearizer(&getContext());
    bool failed = false;
    for (CollectiveOpInterface op : ops)
      failed |= mlir::failed(linearizer.run(op));
    if (failed)
      signalPassFailure();
  }
};

} // namespace
