//===- PolynomialMath.cpp - math ops as polynomials on CPUs -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_POLYNOMIALMATH
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Marks the math ops the program holds before the approximations, which
/// keep their own semantics.
constexpr llvm::StringLiteral kOwnOp = "braid.own_op";

/// An approximation's `math.fma`: a multiply and an add that LLVM may fuse
/// (`contract`), so that a CPU without FMA (the x86-64 baseline) runs two
/// vector instructions instead of a libm call per lane.
struct ContractFma : OpRewritePattern<math::FmaOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FmaOp op,
                                PatternRewriter &rewriter) const override {
    if (op->hasAttr(kOwnOp))
      return failure();
    auto contract = arith::FastMathFlags::contract;
    Value product = arith::MulFOp::create(rewriter, op.getLoc(), op.getA(),
                                          op.getB(), contract);
    rewriter.replaceOpWithNewOp<arith::AddFOp>(op, product, op.getC(),
                                               contract);
    return success();
  }
};

/// An approximation's f32 `math.floor` through an i32 round trip, which
/// SSE2 vectorizes (LLVM's floor needs SSE4.1, else one libm call per lane):
/// for |x| < 2^23, t = float(int(x)) minus one where t > x, with x's sign;
/// larger magnitudes (and NaN) are integral already.
struct FloorThroughInt : OpRewritePattern<math::FloorOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(math::FloorOp op,
                                PatternRewriter &rewriter) const override {
    Type type = op.getType();
    if (op->hasAttr(kOwnOp) || !getElementTypeOrSelf(type).isF32())
      return failure();
    Location loc = op.getLoc();
    Type intType = rewriter.getI32Type();
    if (auto vector = dyn_cast<VectorType>(type))
      intType = vector.clone(intType);
    auto splat = [&](float value) -> Value {
      Attribute attr = rewriter.getF32FloatAttr(value);
      if (auto shaped = dyn_cast<ShapedType>(type))
        attr = DenseElementsAttr::get(shaped, attr);
      return arith::ConstantOp::create(rewriter, loc, cast<TypedAttr>(attr));
    };
    Value x = op.getOperand();
    Value truncated = arith::SIToFPOp::create(
        rewriter, loc, type,
        arith::FPToSIOp::create(rewriter, loc, intType, x));
    Value above = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OGT, truncated, x);
    Value floor = arith::SubFOp::create(
        rewriter, loc, truncated,
        arith::SelectOp::create(rewriter, loc, above, splat(1.0f),
                                splat(0.0f)));
    floor = math::CopySignOp::create(rewriter, loc, floor, x);
    Value small = arith::CmpFOp::create(
        rewriter, loc, arith::CmpFPredicate::OLT,
        math::AbsFOp::create(rewriter, loc, x), splat(8388608.0f));
    rewriter.replaceOpWithNewOp<arith::SelectOp>(op, small, floor, x);
    return success();
  }
};

struct PolynomialMathPass
    : public braid::impl::PolynomialMathBase<PolynomialMathPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    root->walk([&](Operation *op) {
      if (isa<math::FmaOp, math::FloorOp>(op))
        op->setAttr(kOwnOp, UnitAttr::get(op->getContext()));
    });
    RewritePatternSet patterns(&getContext());
    // Upstream's f32 approximations (exp, expm1, log, log1p, log2, tanh,
    // erf, sin, cos, atan, atan2, cbrt, ...) and the expansions they rely
    // on, on scalars and vectors; then their fma and floor in forms every
    // x86-64 vectorizes.
    populateMathPolynomialApproximationPatterns(patterns);
    patterns.add<ContractFma, FloorThroughInt>(&getContext());
    if (failed(applyPatternsGreedily(root, std::move(patterns)))) {
      root->emitError() << getArgument() << ": the rewrites did not converge";
      signalPassFailure();
    }
    root->walk([&](Operation *op) { op->removeAttr(kOwnOp); });
  }
};

} // namespace
