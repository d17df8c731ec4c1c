//===- RoundWideToBF16.cpp - f64 to bf16 without a libgcc helper -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_ROUNDWIDETOBF16
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// `type` (a float or a vector of them) with element type `element`.
Type withElement(Type type, Type element) {
  if (auto shaped = dyn_cast<ShapedType>(type))
    return shaped.clone(element);
  return element;
}

Value splat(PatternRewriter &rewriter, Location loc, Type type,
            TypedAttr scalar) {
  Attribute attr = scalar;
  if (auto shaped = dyn_cast<ShapedType>(type))
    attr = DenseElementsAttr::get(shaped, scalar);
  return arith::ConstantOp::create(rewriter, loc, cast<TypedAttr>(attr));
}

struct RoundWideToBF16Pattern : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type resultElement = getElementTypeOrSelf(op.getType());
    Type sourceElement = getElementTypeOrSelf(op.getIn().getType());
    if (!resultElement.isBF16() || sourceElement.getIntOrFloatBitWidth() <= 32)
      return failure();
    Location loc = op.getLoc();
    // A constant: the correctly rounded bf16 constant.
    FloatAttr constant;
    if (matchPattern(op.getIn(), m_Constant(&constant))) {
      APFloat value = constant.getValue();
      bool losesInfo = false;
      value.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven,
                    &losesInfo);
      rewriter.replaceOp(op,
                         splat(rewriter, loc, op.getType(),
                               rewriter.getFloatAttr(resultElement, value)));
      return success();
    }
    Type f32 = withElement(op.getIn().getType(), rewriter.getF32Type());
    Type i32 = withElement(op.getIn().getType(), rewriter.getI32Type());
    Value x = op.getIn();
    // The nearest f32, and whether it is exact.
    Value nearest = arith::TruncFOp::create(rewriter, loc, f32, x);
    Value back = arith::ExtFOp::create(rewriter, loc, x.getType(), nearest);
    Value inexact = arith::CmpFOp::create(rewriter, loc,
                                          arith::CmpFPredicate::UNE, back, x);
    // Its bits, one ulp further from zero or nearer to it, towards x.
    Value bits = arith::BitcastOp::create(rewriter, loc, i32, nearest);
    Value one = splat(rewriter, loc, i32, rewriter.getI32IntegerAttr(1));
    Value lowBit = arith::AndIOp::create(rewriter, loc, bits, one);
    Value zero = splat(rewriter, loc, i32, rewriter.getI32IntegerAttr(0));
    Value even = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                       lowBit, zero);
    Value backSize = math::AbsFOp::create(rewriter, loc, back);
    Value size = math::AbsFOp::create(rewriter, loc, x);
    Value above = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OGT, backSize, size);
    Value nearer = arith::SubIOp::create(rewriter, loc, bits, one);
    Value further = arith::AddIOp::create(rewriter, loc, bits, one);
    Value towards =
        arith::SelectOp::create(rewriter, loc, above, nearer, further);
    Value move = arith::AndIOp::create(rewriter, loc, inexact, even);
    Value odd = arith::BitcastOp::create(
        rewriter, loc, f32,
        arith::SelectOp::create(rewriter, loc, move, towards, bits));
    rewriter.replaceOpWithNewOp<arith::TruncFOp>(op, op.getType(), odd);
    return success();
  }
};

struct RoundWideToBF16Pass
    : public braid::impl::RoundWideToBF16Base<RoundWideToBF16Pass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RoundWideToBF16Pattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError()
          << getArgument() << ": the rewrites did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
