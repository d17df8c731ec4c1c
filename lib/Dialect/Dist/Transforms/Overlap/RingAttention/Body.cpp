//===- Body.cpp - Reading the bodies of the softmax's generics -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::overlap::attention;

std::string attention::quoted(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

Value attention::throughCasts(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

bool attention::isArg(Value value, linalg::GenericOp op, unsigned operand) {
  return throughCasts(value) == op.getBody()->getArgument(operand);
}

bool attention::combinesArgs(Operation *op, linalg::GenericOp generic,
                             unsigned a, unsigned b) {
  if (!op || op->getNumOperands() != 2)
    return false;
  Value x = op->getOperand(0), y = op->getOperand(1);
  return (isArg(x, generic, a) && isArg(y, generic, b)) ||
         (isArg(x, generic, b) && isArg(y, generic, a));
}

bool attention::isZeroFill(Value value) {
  // Slices and reshapes of zeros are zeros (partitioning leaves a slice of
  // the whole zero fill for a rank's heads).
  auto fill = schedule::throughViews(value).getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

bool attention::isElementwiseOn(linalg::GenericOp op, unsigned operand) {
  if (!op || op->getNumResults() != 1 || !op.hasPureTensorSemantics() ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumDpsInits() != 1)
    return false;
  return op.getIndexingMapsArray()[operand].isIdentity() &&
         op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity();
}

bool attention::isRowReduction(linalg::GenericOp op, unsigned loop) {
  if (!op || op->getNumResults() != 1 || op.getNumDpsInputs() != 1 ||
      !op.hasPureTensorSemantics() || op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray()[loop] != utils::IteratorType::reduction)
    return false;
  return op.getIndexingMapsArray()[0].isIdentity() &&
         !op.getMatchingIndexingMap(op.getDpsInitOperand(0))
              .isFunctionOfDim(loop);
}

std::optional<double> attention::floatConstant(Value value) {
  FloatAttr number;
  if (matchPattern(value, m_Constant(&number)))
    return number.getValueAsDouble();
  return std::nullopt;
}

bool attention::isMaxCombiner(linalg::GenericOp op) {
  if (combinesArgs(yielded<arith::MaximumFOp>(op), op, 0, 1) ||
      combinesArgs(yielded<arith::MaxNumFOp>(op), op, 0, 1))
    return true;
  auto select = yielded<arith::SelectOp>(op);
  auto cmp = select ? select.getCondition().getDefiningOp<arith::CmpFOp>()
                    : arith::CmpFOp();
  if (!cmp || !combinesArgs(cmp, op, 0, 1))
    return false;
  using P = arith::CmpFPredicate;
  P pred = cmp.getPredicate();
  bool greater =
      pred == P::OGT || pred == P::OGE || pred == P::UGT || pred == P::UGE;
  bool less =
      pred == P::OLT || pred == P::OLE || pred == P::ULT || pred == P::ULE;
  if (!greater && !less)
    return false;
  // select(a > b, a, b), or select(a < b, b, a).
  Value larger = greater ? cmp.getLhs() : cmp.getRhs();
  Value smaller = greater ? cmp.getRhs() : cmp.getLhs();
  return throughCasts(select.getTrueValue()) == throughCasts(larger) &&
         throughCasts(select.getFalseValue()) == throughCasts(smaller);
}

/// Whether `value` is the constant 1.
static bool isOne(Value value) {
  std::optional<double> c = floatConstant(throughCasts(value));
  return c && *c == 1.0;
}

bool attention::isReciprocal(linalg::GenericOp op) {
  if (!op || op.getNumDpsInputs() != 1 || !isElementwiseOn(op, 0))
    return false;
  auto div = yielded<arith::DivFOp>(op);
  return div && isOne(div.getLhs()) && isArg(div.getRhs(), op, 0);
}

std::optional<unsigned> attention::quotientDenominator(linalg::GenericOp op,
                                                       unsigned numerator,
                                                       bool &byReciprocal) {
  byReciprocal = false;
  auto argNumber = [&](Value value) -> std::optional<unsigned> {
    auto arg = dyn_cast<BlockArgument>(throughCasts(value));
    if (!arg || arg.getOwner() != op.getBody() ||
        arg.getArgNumber() >= op.getNumDpsInputs() ||
        arg.getArgNumber() == numerator)
      return std::nullopt;
    return arg.getArgNumber();
  };
  if (auto div = yielded<arith::DivFOp>(op))
    return isArg(div.getLhs(), op, numerator) ? argNumber(div.getRhs())
                                              : std::nullopt;
  auto mul = yielded<arith::MulFOp>(op);
  if (!mul)
    return std::nullopt;
  for (unsigned side = 0; side < 2; ++side) {
    if (!isArg(mul->getOperand(side), op, numerator))
      continue;
    Value other = throughCasts(mul->getOperand(1 - side));
    if (auto inverse = other.getDefiningOp<arith::DivFOp>())
      return isOne(inverse.getLhs()) ? argNumber(inverse.getRhs())
                                     : std::nullopt;
    byReciprocal = true;
    return argNumber(other);
  }
  return std::nullopt;
}

namespace {

/// The c of a body value computing c (s - m) from block arguments `s` and
/// `m` of `op`: s - m, a product or quotient of it by a constant, or
/// c s - c m.
std::optional<double> differenceFactor(Value value, linalg::GenericOp op,
                                       unsigned s, unsigned m, int depth = 0) {
  value = throughCasts(value);
  if (depth > 4)
    return std::nullopt;
  auto scaled = [&](Value v, unsigned arg) -> std::optional<double> {
    if (isArg(v, op, arg))
      return 1.0;
    auto mul = throughCasts(v).getDefiningOp<arith::MulFOp>();
    for (unsigned side = 0; mul && side < 2; ++side)
      if (isArg(mul->getOperand(side), op, arg))
        return floatConstant(throughCasts(mul->getOperand(1 - side)));
    return std::nullopt;
  };
  if (auto sub = value.getDefiningOp<arith::SubFOp>()) {
    std::optional<double> a = scaled(sub.getLhs(), s);
    std::optional<double> b = scaled(sub.getRhs(), m);
    if (a && b && *a == *b)
      return *a;
    return std::nullopt;
  }
  if (auto mul = value.getDefiningOp<arith::MulFOp>())
    for (unsigned side = 0; side < 2; ++side)
      if (std::optional<double> c =
              floatConstant(throughCasts(mul->getOperand(side))))
        if (std::optional<double> inner = differenceFactor(
                mul->getOperand(1 - side), op, s, m, depth + 1))
          return *c * *inner;
  if (auto div = value.getDefiningOp<arith::DivFOp>())
    if (std::optional<double> c = floatConstant(throughCasts(div.getRhs())))
      if (std::optional<double> inner =
              differenceFactor(div.getLhs(), op, s, m, depth + 1))
        return *c != 0 ? std::optional<double>(*inner / *c) : std::nullopt;
  return std::nullopt;
}

/// The exponential a body yields, of what argument, and its base's
/// natural log (1 for exp, ln 2 for exp2).
std::optional<std::pair<Value, double>> exponential(linalg::GenericOp op) {
  if (auto exp = yielded<math::ExpOp>(op))
    return std::make_pair(exp.getOperand(), 1.0);
  if (auto exp2 = yielded<math::Exp2Op>(op))
    return std::make_pair(exp2.getOperand(), std::log(2.0));
  return std::nullopt;
}

} // namespace

std::optional<double> attention::exponentFactor(linalg::GenericOp exp,
                                                unsigned scores, unsigned max,
                                                linalg::GenericOp then) {
  std::optional<double> factor;
  if (!then) {
    std::optional<std::pair<Value, double>> e = exponential(exp);
    if (!e)
      return std::nullopt;
    if (std::optional<double> c = differenceFactor(e->first, exp, scores, max))
      factor = *c * e->second;
  } else {
    auto yield = cast<linalg::YieldOp>(exp.getBody()->getTerminator());
    std::optional<double> d =
        differenceFactor(yield.getValues()[0], exp, scores, max);
    std::optional<std::pair<Value, double>> e = exponential(then);
    // Its argument: the difference, or a multiple of it.
    std::optional<double> c;
    if (e && isArg(e->first, then, 0)) {
      c = 1.0;
    } else if (auto mul =
                   e ? throughCasts(e->first).getDefiningOp<arith::MulFOp>()
                     : arith::MulFOp()) {
      for (unsigned side = 0; side < 2 && !c; ++side)
        if (isArg(mul->getOperand(side), then, 0))
          c = floatConstant(throughCasts(mul->getOperand(1 - side)));
    }
    if (d && c)
      factor = *d * *c * e->second;
  }
  if (!factor || !(*factor > 0) || !std::isfinite(*factor))
    return std::nullopt;
  return factor;
}
