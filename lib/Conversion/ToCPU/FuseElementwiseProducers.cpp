//===- FuseElementwiseProducers.cpp - producers into consumers --*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_FUSEELEMENTWISEPRODUCERS
#include "braid/Conversion/Passes.h.inc"
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

struct FuseElementwiseProducersPass
    : public braid::impl::FuseElementwiseProducersBase<
          FuseElementwiseProducersPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, fusable);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
