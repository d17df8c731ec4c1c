//===- PrepareImport.cpp - What frontends emit, made partitionable -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// torch-mlir's linalg for real models has shapes upstream sharding cannot
// take, which braid-prepare-import rewrites before propagation:
//
//  - keepdim reductions and their broadcast reads: indexing maps with a
//    constant (`(d0, d1, d2) -> (d0, d1, 0)` into a tensor<BxSx1>), which
//    upstream's linalg model rejects. The unit dimension is collapsed away
//    around the op, so the maps are projected permutations again.
//  - batch matmuls over batch and heads folded into one dimension
//    (collapse_shape [[0, 1], ...] -> batch_matmul -> expand_shape, a
//    transpose after the collapse moved before it): with
//    heads split and a batch above one, the folded dimension is no block
//    split. The batch dimensions stay apart in one contraction (a generic),
//    which ImportShard turns back into a batch matmul on local shapes.
//  - math.fpowi with a constant exponent (x.pow(2) of RMSNorm, GPT-2's
//    gelu_new), which no lowering takes: multiplications.
//  - results of a generic that nothing reads (the argmax torch-mlir computes
//    beside a softmax's max): erased, since partitioning needs a sharding
//    for every result.
//  - placeholders (tensor.empty, zero fills) shared by several ops: one per
//    use, so that each takes its op's sharding.
//  - linalg.softmax, which neither upstream's partitioning nor any lowering
//    takes: its decomposition into max, exp, sum and divide generics (the
//    form the ring attention rewrite matches).
//  - one value read by an op through two indexing maps (an iota as a causal
//    mask's row and column index): the second read takes a copy of the
//    generator, since partitioning gives both reads one sharding.
//  - splat constants that slices are inserted into (a backward's
//    slice_backward: the gradient of a slice written into zeros): a fill
//    of an empty tensor per insert, which takes the insert's sharding,
//    where a constant stays whole and forces its users to gather.
//
//===----------------------------------------------------------------------===//

#include "ImportPatterns.h"

#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_PREPAREIMPORT
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

constexpr StringLiteral kBatchedAttr = "braid.batch_matmul";

/// Reassociation collapsing the dimensions `drop` (unit dimensions) of a
/// rank-`rank` tensor away: each kept dimension groups with the dropped ones
/// that follow it; leading dropped ones join the first group.
SmallVector<ReassociationIndices> dropping(int64_t rank,
                                           const llvm::SmallBitVector &drop) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices leading;
  for (int64_t d = 0; d < rank; ++d) {
    if (drop.test(d)) {
      if (groups.empty())
        leading.push_back(d);
      else
        groups.back().push_back(d);
      continue;
    }
    groups.emplace_back(leading);
    leading.clear();
    groups.back().push_back(d);
  }
  return groups;
}

/// The dimensions a map reads at constant 0 of a tensor whose size there is
/// 1.
llvm::SmallBitVector constantUnitDims(AffineMap map, RankedTensorType type) {
  llvm::SmallBitVector drop(type.getRank());
  for (auto [d, expr] : llvm::enumerate(map.getResults()))
    if (auto c = dyn_cast<AffineConstantExpr>(expr))
      if (c.getValue() == 0 && type.getDimSize(d) == 1)
        drop.set(d);
  return drop;
}

AffineMap withoutResults(AffineMap map, const llvm::SmallBitVector &drop) {
  SmallVector<AffineExpr> kept;
  for (auto [d, expr] : llvm::enumerate(map.getResults()))
    if (!drop.test(d))
      kept.push_back(expr);
  return AffineMap::get(map.getNumDims(), map.getNumSymbols(), kept,
                        map.getContext());
}

/// A generic that reads or writes unit dimensions at constant 0 (keepdim
/// reductions and broadcasts) becomes one on the tensors without them.
struct FoldConstantUnitDims : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return failure();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<llvm::SmallBitVector> drops;
    bool any = false;
    for (OpOperand &operand : op->getOpOperands()) {
      auto type = dyn_cast<RankedTensorType>(operand.get().getType());
      if (!type) {
        drops.emplace_back();
        continue;
      }
      drops.push_back(constantUnitDims(maps[operand.getOperandNumber()], type));
      any |= drops.back().any();
    }
    if (!any)
      return failure();

    Location loc = op.getLoc();
    auto collapse = [&](Value value,
                        const llvm::SmallBitVector &drop) -> Value {
      if (!drop.any())
        return value;
      auto type = cast<RankedTensorType>(value.getType());
      return tensor::CollapseShapeOp::create(rewriter, loc, value,
                                             dropping(type.getRank(), drop))
          .getResult();
    };
    SmallVector<Value> inputs, inits;
    SmallVector<AffineMap> newMaps;
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      Value value = collapse(operand.get(), drops[i]);
      (op.isDpsInit(&operand) ? inits : inputs).push_back(value);
      newMaps.push_back(drops[i].any() ? withoutResults(maps[i], drops[i])
                                       : maps[i]);
    }
    SmallVector<Type> resultTypes;
    for (Value init : inits)
      resultTypes.push_back(init.getType());
    auto generic =
        linalg::GenericOp::create(rewriter, loc, resultTypes, inputs, inits,
                                  newMaps, op.getIteratorTypesArray());
    generic->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.inlineRegionBefore(op.getRegion(), generic.getRegion(),
                                generic.getRegion().end());
    SmallVector<Value> results;
    for (auto [index, result] : llvm::enumerate(generic->getResults())) {
      OpOperand *init = op.getDpsInitOperand(index);
      const llvm::SmallBitVector &drop = drops[init->getOperandNumber()];
      auto type = cast<RankedTensorType>(op->getResult(index).getType());
      if (!drop.any()) {
        results.push_back(result);
        continue;
      }
      results.push_back(
          tensor::ExpandShapeOp::create(rewriter, loc, type, result,
                                        dropping(type.getRank(), drop))
              .getResult());
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// A collapse_shape that folds the leading `batch` dimensions of a rank
/// batch + 2 tensor into one, keeping the last two.
std::optional<int64_t> foldedBatch(tensor::CollapseShapeOp collapse) {
  SmallVector<ReassociationIndices> groups = collapse.getReassociationIndices();
  if (groups.size() != 3 || groups[1].size() != 1 || groups[2].size() != 1 ||
      groups[0].size() < 2)
    return std::nullopt;
  return static_cast<int64_t>(groups[0].size());
}

/// `value`, of shape [batch..., x, y], with its batch dimensions merged
/// into `target` (coarser, by merging neighbours: [2, 2, 2] into [2, 4]), or
/// null when they do not merge so.
Value mergeBatch(PatternRewriter &rewriter, Location loc, Value value,
                 ArrayRef<int64_t> target) {
  auto type = cast<RankedTensorType>(value.getType());
  int64_t batch = type.getRank() - 2;
  ArrayRef<int64_t> shape = type.getShape().take_front(batch);
  if (shape == target)
    return value;
  SmallVector<ReassociationIndices> groups;
  int64_t d = 0;
  for (int64_t size : target) {
    ReassociationIndices group;
    int64_t product = 1;
    while (d < batch && product < size) {
      product *= shape[d];
      group.push_back(d++);
    }
    if (product != size || group.empty())
      return {};
    groups.push_back(group);
  }
  if (d != batch)
    return {};
  groups.push_back({batch});
  groups.push_back({batch + 1});
  return tensor::CollapseShapeOp::create(rewriter, loc, value, groups);
}

/// transpose(collapse(x)) as collapse(transpose(x)): each group of folded
/// dimensions moves as a block. A backward's batch matmuls read their
/// folded operands transposed (the gradient of q k^T takes k^T's
/// transpose), which UnfoldBatchMatmul then sees folded directly.
struct TransposeOfCollapse : public OpRewritePattern<linalg::TransposeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto collapse = op.getInput().getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse || !op.hasPureTensorSemantics() ||
        !collapse.getSrcType().hasStaticShape())
      return failure();
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    if (llvm::all_of(groups, [](const ReassociationIndices &group) {
          return group.size() == 1;
        }))
      return failure();
    SmallVector<int64_t> permutation, shape;
    SmallVector<ReassociationIndices> moved;
    ArrayRef<int64_t> source = collapse.getSrcType().getShape();
    for (int64_t p : op.getPermutation()) {
      ReassociationIndices group;
      for (int64_t d : groups[p]) {
        group.push_back(permutation.size());
        permutation.push_back(d);
        shape.push_back(source[d]);
      }
      moved.push_back(group);
    }
    Location loc = op.getLoc();
    Value init = tensor::EmptyOp::create(
        rewriter, loc, shape, collapse.getSrcType().getElementType());
    Value transposed = linalg::TransposeOp::create(
                           rewriter, loc, collapse.getSrc(), init, permutation)
                           ->getResult(0);
    rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
        op, op->getResult(0).getType(), transposed, moved);
    return success();
  }
};

/// collapse -> batch_matmul (-> expand) over folded batch dimensions: one
/// contraction with the batch dimensions apart, marked so that ImportShard
/// folds them again on local shapes. Operands whose batch dimensions are
/// folded from different factorizations (attention's probabilities over
/// [batch, heads] and GQA's values over [batch, kv heads, repeats]) meet
/// at the coarser one.
struct UnfoldBatchMatmul : public OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::BatchMatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.hasUserDefinedMaps())
      return failure();
    auto a = op.getDpsInputs()[0].getDefiningOp<tensor::CollapseShapeOp>();
    auto b = op.getDpsInputs()[1].getDefiningOp<tensor::CollapseShapeOp>();
    if (!a || !b)
      return failure();
    std::optional<int64_t> batchA = foldedBatch(a), batchB = foldedBatch(b);
    if (!batchA || !batchB)
      return failure();
    RankedTensorType aType = a.getSrcType(), bType = b.getSrcType();
    if (!aType.hasStaticShape() || !bType.hasStaticShape())
      return failure();
    // The coarser batch factorization of the two.
    ArrayRef<int64_t> target = *batchA <= *batchB
                                   ? aType.getShape().take_front(*batchA)
                                   : bType.getShape().take_front(*batchB);
    Location loc = op.getLoc();
    Value aSrc = mergeBatch(rewriter, loc, a.getSrc(), target);
    Value bSrc = mergeBatch(rewriter, loc, b.getSrc(), target);
    if (!aSrc || !bSrc)
      return failure();
    int64_t batch = target.size();

    MLIRContext *context = rewriter.getContext();
    auto initType = cast<RankedTensorType>(op.getDpsInits()[0].getType());
    SmallVector<int64_t> shape(target);
    shape.push_back(initType.getDimSize(1));
    shape.push_back(initType.getDimSize(2));
    auto type = RankedTensorType::get(shape, initType.getElementType());
    SmallVector<ReassociationIndices> groups = {
        llvm::to_vector(llvm::seq<int64_t>(0, batch)), {batch}, {batch + 1}};
    Value init = tensor::ExpandShapeOp::create(rewriter, loc, type,
                                               op.getDpsInits()[0], groups);
    // Loops: the batch dimensions, m, n, k.
    int64_t loops = batch + 3;
    SmallVector<AffineExpr> dims;
    for (int64_t i = 0; i < loops; ++i)
      dims.push_back(getAffineDimExpr(i, context));
    SmallVector<AffineExpr> lead(dims.begin(), dims.begin() + batch);
    AffineExpr m = dims[batch], n = dims[batch + 1], k = dims[batch + 2];
    auto mapOf = [&](AffineExpr x, AffineExpr y) {
      SmallVector<AffineExpr> results(lead);
      results.push_back(x);
      results.push_back(y);
      return AffineMap::get(loops, 0, results, context);
    };
    SmallVector<utils::IteratorType> iterators(loops - 1,
                                               utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, TypeRange{type}, ValueRange{aSrc, bSrc},
        ValueRange{init}, {mapOf(m, k), mapOf(k, n), mapOf(m, n)}, iterators);
    rewriter.cloneRegionBefore(op->getRegion(0), generic.getRegion(),
                               generic.getRegion().end());
    generic->setAttr(kBatchedAttr, rewriter.getUnitAttr());
    Value folded = tensor::CollapseShapeOp::create(
        rewriter, loc, initType, generic.getResult(0), groups);
    // An expand of the result that undoes the folding takes the generic's
    // result directly.
    for (OpOperand &use :
         llvm::make_early_inc_range(op->getResult(0).getUses()))
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(use.getOwner()))
        if (expand.getResultType() == type &&
            expand.getReassociationIndices() == groups)
          rewriter.replaceOp(expand, generic.getResult(0));
    rewriter.replaceOp(op, folded);
    return success();
  }
};

/// The marked contraction on local shapes, as a batch matmul again (what
/// the GEMM libraries and the overlap schedules take).
struct FoldBatchMatmul : public OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op->hasAttr(kBatchedAttr) || !op.hasPureTensorSemantics() ||
        op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1)
      return failure();
    auto types = llvm::map_to_vector(op->getOperands(), [](Value v) {
      return cast<RankedTensorType>(v.getType());
    });
    int64_t batch = types[0].getRank() - 2;
    if (!llvm::all_of(types,
                      [](RankedTensorType t) { return t.hasStaticShape(); }))
      return failure();
    ReassociationIndices lead = llvm::to_vector(llvm::seq<int64_t>(0, batch));
    SmallVector<ReassociationIndices> groups = {lead, {batch}, {batch + 1}};
    Location loc = op.getLoc();
    SmallVector<Value> folded;
    for (Value operand : op->getOperands())
      folded.push_back(
          tensor::CollapseShapeOp::create(rewriter, loc, operand, groups));
    auto matmul = linalg::BatchMatmulOp::create(
        rewriter, loc, TypeRange{folded[2].getType()},
        ValueRange{folded[0], folded[1]}, ValueRange{folded[2]});
    rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
        op, op->getResult(0).getType(), matmul.getResult(0), groups);
    return success();
  }
};

/// One placeholder per use: frontends share a tensor.empty (or a zero fill
/// of one) among ops that partitioning splits differently, and upstream
/// propagation annotates a shared placeholder for one use only, leaving the
/// others without a sharding. A placeholder costs nothing to repeat (CSE
/// merges what stays identical after the import).
void unsharePlaceholders(Operation *root) {
  OpBuilder builder(root->getContext());
  auto unshare = [&](Operation *op) {
    for (OpOperand &use :
         llvm::make_early_inc_range(llvm::drop_begin(op->getUses()))) {
      builder.setInsertionPoint(use.getOwner());
      use.set(builder.clone(*op)->getResult(0));
    }
  };
  // Fills first: their clones then share the empty, which the second walk
  // splits again.
  root->walk([&](linalg::FillOp fill) {
    // (Not an unused fill: dropping the first of no uses is undefined.)
    if (fill.hasPureTensorSemantics() && !fill->hasOneUse() &&
        !fill->use_empty())
      unshare(fill);
  });
  root->walk([&](tensor::EmptyOp empty) {
    if (!empty->hasOneUse() && !empty->use_empty())
      unshare(empty);
  });
}

struct PrepareImportPass
    : public braid::impl::PrepareImportBase<PrepareImportPass> {
  void runOnOperation() override {
    // Decomposed first: its generics share one placeholder, which the
    // unsharing below gives each its own.
    SmallVector<linalg::SoftmaxOp> softmaxes;
    getOperation()->walk(
        [&](linalg::SoftmaxOp op) { softmaxes.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::SoftmaxOp op : softmaxes) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> parts = op.decomposeOperation(rewriter);
      if (failed(parts)) {
        op.emitError("cannot decompose this linalg.softmax");
        return signalPassFailure();
      }
      rewriter.replaceOp(op, *parts);
    }
    fillInsertDestinations();
    unsharePlaceholders(getOperation());
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldConstantUnitDims, TransposeOfCollapse, UnfoldBatchMatmul>(
        &getContext());
    math::populateExpansionPatterns(patterns, {"fpowi"});
    // Results nobody reads (the argmax beside a softmax's max) would have no
    // sharding, which upstream partitioning cannot take.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    // Reshapes of reshapes and fills of reshaped empties fold away.
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError()
          << getArgument() << ": the rewrites did not converge";
      return signalPassFailure();
    }
    splitTwiceReadGenerators();
  }

  /// Each insert_slice into a splat constant inserts into a fill of its
  /// own instead.
  void fillInsertDestinations() {
    getOperation()->walk([](tensor::InsertSliceOp insert) {
      auto constant = insert.getDest().getDefiningOp<arith::ConstantOp>();
      auto splat =
          constant ? dyn_cast<SplatElementsAttr>(constant.getValue()) : nullptr;
      if (!splat)
        return;
      OpBuilder b(insert);
      RankedTensorType type = insert.getDestType();
      Value value = arith::ConstantOp::create(
          b, constant.getLoc(),
          cast<TypedAttr>(splat.getSplatValue<Attribute>()));
      Value empty = tensor::EmptyOp::create(
          b, constant.getLoc(), type.getShape(), type.getElementType());
      Value fill =
          linalg::FillOp::create(b, constant.getLoc(), value, empty).result();
      insert.getDestMutable().set(fill);
    });
  }

  /// An op that reads one tensor through two operands with different
  /// indexing maps (a causal mask comparing an iota as its row index with
  /// the same iota as its column index) needs two shardings of one value
  /// when its loops split differently, and upstream partitioning gives
  /// both operands the first one (a shape error, or wrong values). Where
  /// the value is generated from nothing (an iota: a generic with no
  /// inputs, into placeholders; a constant), the second operand reads a
  /// copy of the generator, which takes its own sharding.
  void splitTwiceReadGenerators() {
    SmallVector<linalg::LinalgOp> ops;
    getOperation()->walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops) {
      SmallVector<OpOperand *> inputs = op.getDpsInputOperands();
      for (size_t j = 1; j < inputs.size(); ++j) {
        Value value = inputs[j]->get();
        bool earlier = llvm::any_of(
            ArrayRef<OpOperand *>(inputs).take_front(j), [&](OpOperand *i) {
              return i->get() == value &&
                     op.getMatchingIndexingMap(i) !=
                         op.getMatchingIndexingMap(inputs[j]);
            });
        Operation *def = value.getDefiningOp();
        if (!earlier || !def)
          continue;
        auto generator = dyn_cast<linalg::LinalgOp>(def);
        bool fromNothing =
            isa<arith::ConstantOp>(def) ||
            (generator && generator.getNumDpsInputs() == 0 &&
             llvm::all_of(generator.getDpsInits(), [](Value init) {
               return init.getDefiningOp<tensor::EmptyOp>();
             }));
        if (!fromNothing)
          continue;
        OpBuilder b(op);
        IRMapping mapping;
        if (generator)
          for (Value init : generator.getDpsInits())
            mapping.map(init, b.clone(*init.getDefiningOp())->getResult(0));
        Operation *copy = b.clone(*def, mapping);
        inputs[j]->set(
            copy->getResult(cast<OpResult>(value).getResultNumber()));
      }
    }
  }
};

} // namespace

LogicalResult braid::foldBatchMatmuls(Operation *root) {
  RewritePatternSet patterns(root->getContext());
  patterns.add<FoldBatchMatmul>(root->getContext());
  return applyPatternsGreedily(root, std::move(patterns));
}
