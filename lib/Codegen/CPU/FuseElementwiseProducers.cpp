//===- FuseElementwiseProducers.cpp - producers into consumers --*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_FUSEELEMENTWISEPRODUCERS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Whether the producer of `operand` folds into its consumer: an
/// elementwise generic used once, by a generic that is not a contraction.
bool fusable(OpOperand *operand) {
  auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
  auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer || !producer->hasOneUse())
    return false;
  if (producer.getNumParallelLoops() != producer.getNumLoops())
    return false;
  return !linalg::isaContractionOpInterface(consumer);
}

/// Fuses one fusable producer into a consumer generic. Upstream's pattern
/// set is not used: it also rewrites outputs the payload does not read into
/// fresh empty tensors, which undoes slices of one buffer that the program
/// meant (the fp8 all-gather's encoded chunks).
struct FuseProducer : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp consumer,
                                PatternRewriter &rewriter) const override {
    for (OpOperand &operand : consumer->getOpOperands()) {
      if (!fusable(&operand) || !linalg::areElementwiseOpsFusable(&operand))
        continue;
      Operation *producer = operand.get().getDefiningOp();
      FailureOr<linalg::ElementwiseOpFusionResult> fused =
          linalg::fuseElementwiseOps(rewriter, &operand);
      if (failed(fused))
        continue;
      for (auto [original, replacement] : fused->replacements)
        rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
          return use.getOwner() != fused->fusedOp;
        });
      // Erased here, not left to the driver: a body with side effects (a
      // gather's bounds assertion) keeps an unused generic alive, which
      // would be fused again without end.
      if (consumer->use_empty())
        rewriter.eraseOp(consumer);
      if (producer->use_empty())
        rewriter.eraseOp(producer);
      return success();
    }
    return failure();
  }
};

/// A comparison of a widened float with a constant that the narrower type
/// holds exactly compares the narrower value: `extf` is exact and keeps
/// the order (and NaNs), so every predicate gives the same result. torch's
/// safe softmax tests f32 scores against -inf as f64 (a Python float), which
/// made its kernel's vector loop half as wide.
struct NarrowWidenedComparison : OpRewritePattern<arith::CmpFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::CmpFOp cmp,
                                PatternRewriter &rewriter) const override {
    for (unsigned side : {0u, 1u}) {
      auto ext = cmp->getOperand(side).getDefiningOp<arith::ExtFOp>();
      FloatAttr constant;
      if (!ext ||
          !matchPattern(cmp->getOperand(1 - side), m_Constant(&constant)))
        continue;
      auto narrow = cast<FloatType>(ext.getIn().getType());
      APFloat value = constant.getValue();
      bool losesInfo = false;
      if (value.convert(narrow.getFloatSemantics(),
                        APFloat::rmNearestTiesToEven,
                        &losesInfo) != APFloat::opOK ||
          losesInfo)
        continue;
      Value exact = arith::ConstantOp::create(
          rewriter, cmp.getLoc(), narrow, rewriter.getFloatAttr(narrow, value));
      Value x = ext.getIn();
      rewriter.modifyOpInPlace(cmp, [&] {
        cmp->setOperand(side, x);
        cmp->setOperand(1 - side, exact);
      });
      return success();
    }
    return failure();
  }
};

struct FuseElementwiseProducersPass
    : public braid::impl::FuseElementwiseProducersBase<
          FuseElementwiseProducersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FuseProducer, NarrowWidenedComparison>(&getContext());
    // Only the fusions and the narrowed comparisons: no folding around
    // them either.
    GreedyRewriteConfig config;
    config.enableFolding(false).enableConstantCSE(false);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config))) {
      getOperation()->emitError()
          << "braid-fuse-elementwise-producers did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
