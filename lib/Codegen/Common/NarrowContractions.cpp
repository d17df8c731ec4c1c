//===- NarrowContractions.cpp - Contractions read narrow operands -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-narrow-contractions: a contraction in f32 whose two operands are
// bf16 (or f16) values widened to f32, moved (reshapes, transposes,
// broadcasts) and scaled by constants, reads the narrow values instead,
// moved the same way, and scales its result by the product of the
// constants. What frontends emit for bf16 attention (PyTorch's math
// attention widens q and k and scales each by the root of the scale before
// Q K^T) then runs as a bf16 GEMM with f32 accumulation (AMX on CPUs that
// have it, tensor cores on GPUs) instead of an f32 one, and moves half the
// bytes.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace braid {
#define GEN_PASS_DEF_NARROWCONTRACTIONS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// A single-input, single-output generic on tensors whose loops are all
/// parallel.
bool isUnaryParallel(linalg::GenericOp op) {
  return op.getNumDpsInputs() == 1 && op.getNumDpsInits() == 1 &&
         op.hasPureTensorSemantics() &&
         op.getNumParallelLoops() == op.getNumLoops();
}

bool hasIdentityMaps(linalg::GenericOp op) {
  return llvm::all_of(op.getIndexingMapsArray(),
                      [](AffineMap map) { return map.isIdentity(); });
}

/// The value of a float constant, through float casts (each rounding as
/// the cast does), or nothing.
std::optional<double> constantValue(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (isa<arith::TruncFOp, arith::ExtFOp>(def)) {
    std::optional<double> source = constantValue(def->getOperand(0));
    if (!source)
      return std::nullopt;
    auto type = cast<FloatType>(def->getResult(0).getType());
    APFloat rounded(*source);
    bool lost = false;
    rounded.convert(type.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &lost);
    return rounded.convertToDouble();
  }
  FloatAttr attr;
  if (matchPattern(value, m_Constant(&attr)))
    return attr.getValueAsDouble();
  return std::nullopt;
}

/// What an operand of the contraction is made of: the narrow value it
/// widens, the ops that move it (from the contraction outwards) and the
/// constant it is scaled by.
struct Widened {
  Value narrow;
  SmallVector<Operation *> moves;
  double scale = 1.0;
};

/// `value` traced back through single-use reshapes, transposes,
/// broadcasts (a generic yielding its input) and multiplications by a
/// constant to a generic widening bf16 or f16 to f32; nothing (with `why`
/// set when the trace reached a widening) otherwise.
std::optional<Widened> traceWidened(Value value, std::string &why) {
  Widened found;
  while (Operation *def = value.getDefiningOp()) {
    if (!def->hasOneUse()) {
      why = "an op between the operand and its widening has other uses";
      return std::nullopt;
    }
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp,
            linalg::TransposeOp>(def)) {
      found.moves.push_back(def);
      value = def->getOperand(0);
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(def);
    if (!generic || !isUnaryParallel(generic))
      return std::nullopt;
    Block *body = generic.getBody();
    auto yield = cast<linalg::YieldOp>(body->getTerminator());
    Value yielded = yield.getValues()[0];
    Value in = body->getArgument(0);
    Value input = generic.getDpsInputs()[0];
    // A broadcast or copy: yields its input.
    if (yielded == in && generic.getIndexingMapsArray().back().isIdentity() &&
        generic.getIndexingMapsArray().front().isProjectedPermutation()) {
      found.moves.push_back(def);
      value = input;
      continue;
    }
    if (!hasIdentityMaps(generic))
      return std::nullopt;
    // x * c (either order).
    if (auto mul = yielded.getDefiningOp<arith::MulFOp>()) {
      Value other = mul.getLhs() == in   ? mul.getRhs()
                    : mul.getRhs() == in ? mul.getLhs()
                                         : Value();
      std::optional<double> c = other ? constantValue(other) : std::nullopt;
      if (!c)
        return std::nullopt;
      found.scale *= *c;
      value = input;
      continue;
    }
    // The widening itself.
    auto ext = yielded.getDefiningOp<arith::ExtFOp>();
    if (ext && ext.getIn() == in && ext.getType().isF32() &&
        &body->front() == ext.getOperation() &&
        (ext.getIn().getType().isBF16() || ext.getIn().getType().isF16())) {
      found.narrow = input;
      return found;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// `op` (a move) applied to `value`, whose element type is narrower.
Value moveNarrow(OpBuilder &b, Operation *op, Value value) {
  Location loc = op->getLoc();
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  auto narrowType = resultType.clone(element);
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
    return tensor::CollapseShapeOp::create(b, loc, narrowType, value,
                                           collapse.getReassociationIndices());
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
    return tensor::ExpandShapeOp::create(b, loc, narrowType, value,
                                         expand.getReassociationIndices(),
                                         expand.getMixedOutputShape());
  Value init = tensor::EmptyOp::create(b, loc, narrowType.getShape(), element);
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op))
    return linalg::TransposeOp::create(b, loc, value, init,
                                       transpose.getPermutation())
        .getResult()[0];
  auto generic = cast<linalg::GenericOp>(op);
  return linalg::GenericOp::create(
             b, loc, narrowType, value, init, generic.getIndexingMapsArray(),
             generic.getIteratorTypesArray(),
             [](OpBuilder &nb, Location nloc, ValueRange args) {
               linalg::YieldOp::create(nb, nloc, args[0]);
             })
      .getResult(0);
}

struct NarrowContractionsPass
    : public braid::impl::NarrowContractionsBase<NarrowContractionsPass> {
  void runOnOperation() override {
    // Each contraction once: the rewrite makes no new candidates.
    SmallVector<linalg::LinalgOp> contractions;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureTensorSemantics() && op->getNumRegions() == 1 &&
          op.getNumDpsInputs() == 2 && op.getNumDpsInits() == 1 &&
          linalg::isaContractionOpInterface(op))
        contractions.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : contractions)
      if (succeeded(narrow(op, rewriter)))
        ++numNarrowed;
  }

  static LogicalResult narrow(linalg::LinalgOp op, RewriterBase &rewriter) {
    Type f32 = rewriter.getF32Type();
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    if (resultType.getElementType() != f32)
      return failure();
    for (Value input : op.getDpsInputs())
      if (cast<RankedTensorType>(input.getType()).getElementType() != f32)
        return failure();
    std::string whyA, whyB;
    std::optional<Widened> a = traceWidened(op.getDpsInputs()[0], whyA);
    std::optional<Widened> b = traceWidened(op.getDpsInputs()[1], whyB);
    if (!a || !b) {
      // Say why only where an operand is a widened narrow value.
      std::string why = !whyA.empty() ? whyA : whyB;
      if (why.empty() && (a || b))
        why = std::string("operand ") + (a ? "1" : "0") +
              " is not a widened bf16 or f16 value";
      if (!why.empty())
        op->emitRemark() << "contraction left in f32: " << why;
      return failure();
    }
    Type narrow = cast<RankedTensorType>(a->narrow.getType()).getElementType();
    if (cast<RankedTensorType>(b->narrow.getType()).getElementType() !=
        narrow) {
      op->emitRemark() << "contraction left in f32: its operands widen "
                          "different types";
      return failure();
    }
    Location loc = op.getLoc();
    rewriter.setInsertionPoint(op);
    SmallVector<Value> inputs;
    for (const Widened *w : {&*a, &*b}) {
      Value value = w->narrow;
      for (Operation *move : llvm::reverse(w->moves))
        value = moveNarrow(rewriter, move, value);
      inputs.push_back(value);
    }
    // Its own zero fill where it starts from one, right before it: a fill
    // shared with other products would be kept as a kernel of its own for
    // the last of them, not folded into the GEMM's beta = 0.
    Value init = op.getDpsInits()[0];
    if (auto fill = init.getDefiningOp<linalg::FillOp>()) {
      Value empty =
          tensor::EmptyOp::create(rewriter, loc, resultType.getShape(), f32);
      init = linalg::FillOp::create(rewriter, loc, fill.getInputs()[0], empty)
                 .getResult(0);
    }
    // The same contraction on the narrow values, each widened where it is
    // read (exact: a product of two bf16 or f16 values fits in f32).
    Block *payload = &op->getRegion(0).front();
    auto product = linalg::GenericOp::create(
        rewriter, loc, resultType, inputs, init, op.getIndexingMapsArray(),
        op.getIteratorTypesArray(),
        [&](OpBuilder &nb, Location nloc, ValueRange args) {
          IRMapping map;
          map.map(payload->getArgument(0),
                  arith::ExtFOp::create(nb, nloc, f32, args[0]));
          map.map(payload->getArgument(1),
                  arith::ExtFOp::create(nb, nloc, f32, args[1]));
          map.map(payload->getArgument(2), args[2]);
          for (Operation &inner : payload->without_terminator())
            nb.clone(inner, map);
          auto yield = cast<linalg::YieldOp>(payload->getTerminator());
          linalg::YieldOp::create(nb, nloc,
                                  map.lookupOrDefault(yield.getValues()[0]));
        });
    // The moves and widenings it replaces go with it (single uses).
    SmallVector<Operation *> dead;
    for (Value input : op.getDpsInputs())
      dead.push_back(input.getDefiningOp());
    rewriter.replaceOp(op, product.getResult(0));
    // The constants, applied once to the result: (a c1)(b c2) summed is
    // (a b summed) (c1 c2), the same up to f32 rounding. After the
    // reshapes that alone read the result, so that the multiplication
    // meets the elementwise op after them, whose kernel takes it in.
    double scale = static_cast<double>(static_cast<float>(
        static_cast<float>(a->scale) * static_cast<float>(b->scale)));
    if (scale != 1.0) {
      Value scaled = product.getResult(0);
      while (scaled.hasOneUse() &&
             isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
                 *scaled.getUsers().begin()))
        scaled = scaled.getUsers().begin()->getResult(0);
      auto type = cast<RankedTensorType>(scaled.getType());
      rewriter.setInsertionPointAfterValue(scaled);
      Value empty =
          tensor::EmptyOp::create(rewriter, loc, type.getShape(), f32);
      Value c = arith::ConstantOp::create(
          rewriter, loc, rewriter.getF32FloatAttr(static_cast<float>(scale)));
      AffineMap identity = rewriter.getMultiDimIdentityMap(type.getRank());
      SmallVector<utils::IteratorType> parallel(type.getRank(),
                                                utils::IteratorType::parallel);
      auto multiply = linalg::GenericOp::create(
          rewriter, loc, type, scaled, empty,
          ArrayRef<AffineMap>{identity, identity}, parallel,
          [&](OpBuilder &nb, Location nloc, ValueRange args) {
            linalg::YieldOp::create(
                nb, nloc,
                arith::MulFOp::create(nb, nloc, args[0], c).getResult());
          });
      rewriter.replaceAllUsesExcept(scaled, multiply.getResult(0), multiply);
    }
    while (!dead.empty()) {
      Operation *def = dead.pop_back_val();
      if (!def || !def->use_empty() || !isOpTriviallyDead(def))
        continue;
      for (Value operand : def->getOperands())
        dead.push_back(operand.getDefiningOp());
      rewriter.eraseOp(def);
    }
    return success();
  }
};

} // namespace
