//===- NarrowFloatBits.cpp - bf16/f16 moved as i16 bits ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace braid {
#define GEN_PASS_DEF_NARROWFLOATBITS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

bool isNarrowFloat(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isBF16() || element.isF16();
}

/// `type` with i16 elements.
Type bitsOf(Type type) {
  Type i16 = IntegerType::get(type.getContext(), 16);
  if (auto vector = dyn_cast<VectorType>(type))
    return vector.clone(i16);
  return i16;
}

/// An op that only moves bf16|f16 values or lanes, on their i16 bits:
/// select(c, a, b) -> bitcast(select(c, bits(a), bits(b))), and the same
/// for insertelement, extractelement and shufflevector (a broadcast is an
/// insertelement and a shufflevector). The x86 backend legalizes a bf16
/// shuffle by widening to f32 and rounding back, through a call of
/// __truncsfbf2, which the artifact cannot resolve: a bf16 fill vectorized
/// as a broadcast failed to load.
template <typename OpTy> struct MoveBits : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    Type type = op->getResult(0).getType();
    if (!isNarrowFloat(type))
      return failure();
    Location loc = op.getLoc();
    IRMapping bits;
    for (Value operand : op->getOperands())
      if (isNarrowFloat(operand.getType()))
        bits.map(operand, LLVM::BitcastOp::create(
                              rewriter, loc, bitsOf(operand.getType()), operand)
                              .getResult());
    Operation *moved = rewriter.clone(*op, bits);
    moved->getResult(0).setType(bitsOf(type));
    rewriter.replaceOpWithNewOp<LLVM::BitcastOp>(op, type, moved->getResult(0));
    return success();
  }
};

/// store(bitcast(x : i16s) : bf16|f16) -> store(x).
struct StoreBits : OpRewritePattern<LLVM::StoreOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LLVM::StoreOp op,
                                PatternRewriter &rewriter) const override {
    auto cast = op.getValue().getDefiningOp<LLVM::BitcastOp>();
    if (!cast || !isNarrowFloat(cast.getType()) ||
        cast.getArg().getType() != bitsOf(cast.getType()))
      return failure();
    rewriter.modifyOpInPlace(
        op, [&] { op.getValueMutable().assign(cast.getArg()); });
    return success();
  }
};

/// bitcast(load : bf16|f16) : i16s, its only use -> load : i16s.
struct LoadBits : OpRewritePattern<LLVM::BitcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LLVM::BitcastOp op,
                                PatternRewriter &rewriter) const override {
    auto load = op.getArg().getDefiningOp<LLVM::LoadOp>();
    if (!load || !load->hasOneUse() || !isNarrowFloat(load.getType()) ||
        op.getType() != bitsOf(load.getType()))
      return failure();
    Operation *bits = rewriter.clone(*load);
    bits->getResult(0).setType(op.getType());
    rewriter.replaceOp(op, bits->getResults());
    rewriter.eraseOp(load);
    return success();
  }
};

struct NarrowFloatBitsPass
    : public braid::impl::NarrowFloatBitsBase<NarrowFloatBitsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MoveBits<LLVM::SelectOp>, MoveBits<LLVM::InsertElementOp>,
                 MoveBits<LLVM::ExtractElementOp>,
                 MoveBits<LLVM::ShuffleVectorOp>, StoreBits, LoadBits>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns)))) {
      getOperation()->emitError()
          << getArgument() << ": the rewrites did not converge";
      signalPassFailure();
    }
  }
};

} // namespace
