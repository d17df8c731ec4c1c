//===- Body.cpp - Reading the bodies of the softmax's generics -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/IR/Matchers.h"

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
  auto fill = value.getDefiningOp<linalg::FillOp>();
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
