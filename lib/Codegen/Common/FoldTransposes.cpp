//===- FoldTransposes.cpp - Transposes read in place ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-fold-transposes: a contraction reading a linalg.transpose's result
// reads the transpose's input through the composed indexing map instead,
// so that the GEMM library takes it transposed and no copy is made.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_FOLDTRANSPOSES
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Whether `transpose` swaps its last two dimensions only: the transposes
/// a GEMM library reads in place (A or B, batch first). Others (attention's
/// [s, h, d] -> [h, s, d]) would leave layouts the GEMM matching refuses.
bool swapsLastTwo(linalg::TransposeOp transpose) {
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  int64_t rank = permutation.size();
  if (rank < 2)
    return false;
  for (int64_t i = 0; i < rank - 2; ++i)
    if (permutation[i] != i)
      return false;
  return permutation[rank - 2] == rank - 1 && permutation[rank - 1] == rank - 2;
}

bool isContractionOnTensors(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         linalg::isaContractionOpInterface(linalgOp);
}

/// contraction(..., transpose(x), ...) -> a generic contraction reading x
/// through its operand's map composed with the permutation.
struct FoldTransposedOperand
    : public OpInterfaceRewritePattern<linalg::LinalgOp> {
  FoldTransposedOperand(MLIRContext *context, llvm::Statistic &folded)
      : OpInterfaceRewritePattern(context), folded(folded) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!isContractionOnTensors(op) || op->getNumRegions() != 1)
      return failure();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<Value> inputs = op.getDpsInputs();
    bool changed = false;
    for (OpOperand *input : op.getDpsInputOperands()) {
      auto transpose = input->get().getDefiningOp<linalg::TransposeOp>();
      if (!transpose || !swapsLastTwo(transpose))
        continue;
      // The transpose's result index i is its input's index perm[i].
      AffineMap map = op.getMatchingIndexingMap(input);
      ArrayRef<int64_t> permutation = transpose.getPermutation();
      SmallVector<AffineExpr> results(permutation.size());
      for (auto [i, p] : llvm::enumerate(permutation))
        results[p] = map.getResult(i);
      unsigned index = input->getOperandNumber();
      maps[index] = AffineMap::get(map.getNumDims(), map.getNumSymbols(),
                                   results, op.getContext());
      inputs[index] = transpose.getInput();
      changed = true;
      ++folded;
    }
    if (!changed)
      return failure();
    auto generic = linalg::GenericOp::create(
        rewriter, op.getLoc(), op->getResultTypes(), inputs, op.getDpsInits(),
        maps, op.getIteratorTypesArray());
    rewriter.cloneRegionBefore(op->getRegion(0), generic.getRegion(),
                               generic.getRegion().begin());
    generic->setDiscardableAttrs(op->getDiscardableAttrDictionary());
    rewriter.replaceOp(op, generic->getResults());
    return success();
  }

  llvm::Statistic &folded;
};

/// The transpose of its last two dimensions that `view` (a slice or a
/// reshape) reads, where only contractions read the view: moved after the
/// view, the transpose then folds into them. Null otherwise.
linalg::TransposeOp transposeUnder(Operation *view) {
  auto transpose = view->getOperand(0).getDefiningOp<linalg::TransposeOp>();
  if (!transpose || !transpose.hasPureTensorSemantics() ||
      !swapsLastTwo(transpose) || view->use_empty() ||
      !llvm::all_of(view->getUsers(), isContractionOnTensors))
    return {};
  return transpose;
}

/// extract_slice(transpose(x)) with unit strides, read only by
/// contractions -> transpose(extract_slice(x)), which then folds.
struct SliceBeforeTranspose : public OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::ExtractSliceOp slice,
                                PatternRewriter &rewriter) const override {
    linalg::TransposeOp transpose = transposeUnder(slice);
    if (!transpose ||
        slice.getType().getRank() != slice.getSourceType().getRank() ||
        !llvm::all_of(slice.getStaticStrides(),
                      [](int64_t stride) { return stride == 1; }))
      return failure();
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
    SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
    SmallVector<OpFoldResult> inOffsets(offsets.size()), inSizes(sizes.size());
    for (auto [i, p] : llvm::enumerate(permutation)) {
      inOffsets[p] = offsets[i];
      inSizes[p] = sizes[i];
    }
    SmallVector<OpFoldResult> strides(offsets.size(), rewriter.getIndexAttr(1));
    Location loc = slice.getLoc();
    Value part = tensor::ExtractSliceOp::create(
        rewriter, loc, transpose.getInput(), inOffsets, inSizes, strides);
    Value init = tensor::EmptyOp::create(rewriter, loc, sizes,
                                         slice.getType().getElementType());
    rewriter.replaceOpWithNewOp<linalg::TransposeOp>(slice, part, init,
                                                     permutation);
    return success();
  }
};

/// collapse_shape(transpose(x)) that merges leading dimensions only, read
/// only by contractions -> transpose(collapse_shape(x)), which then folds
/// (a packed expert weight's part, [experts, 1, out, in] transposed and
/// collapsed into a batch matmul's [experts, in, out] operand).
struct CollapseBeforeTranspose
    : public OpRewritePattern<tensor::CollapseShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(tensor::CollapseShapeOp collapse,
                                PatternRewriter &rewriter) const override {
    linalg::TransposeOp transpose = transposeUnder(collapse);
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    if (!transpose || groups.size() < 2 ||
        groups[groups.size() - 1].size() != 1 ||
        groups[groups.size() - 2].size() != 1)
      return failure();
    // The last two dimensions are groups of their own, so the leading
    // groups are the same before the transpose.
    Location loc = collapse.getLoc();
    Value merged = tensor::CollapseShapeOp::create(
        rewriter, loc, transpose.getInput(), groups);
    auto type = collapse.getResultType();
    Value init = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
    SmallVector<int64_t> permutation =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    std::swap(permutation[type.getRank() - 2], permutation[type.getRank() - 1]);
    rewriter.replaceOpWithNewOp<linalg::TransposeOp>(collapse, merged, init,
                                                     permutation);
    return success();
  }
};

struct FoldTransposesPass
    : public braid::impl::FoldTransposesBase<FoldTransposesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposedOperand>(&getContext(), numFolded);
    patterns.add<SliceBeforeTranspose, CollapseBeforeTranspose>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError()
          << getArgument() << ": the rewrites did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
