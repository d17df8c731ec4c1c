//===- Contractions.cpp - GEMMs and epilogues for cuBLASLt ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "ToGPU.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace braid::togpu {

/// Whether `op`'s payload is exactly acc + cast(a) * cast(b): the
/// contraction interface also lets other single-operand ops through (an
/// exp on an operand, a negation of the sum), which cuBLASLt does not do.
static bool isPlainMultiplyAdd(linalg::LinalgOp op) {
  Block &body = op->getRegion(0).front();
  if (body.getNumArguments() != 3)
    return false;
  auto through = [](Value value) {
    if (auto ext = value.getDefiningOp<arith::ExtFOp>())
      return ext.getIn();
    return value;
  };
  auto add = body.getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body.getArgument(2);
  Value product = add.getLhs() == acc   ? add.getRhs()
                  : add.getRhs() == acc ? add.getLhs()
                                        : Value();
  auto mul = product ? product.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  Value lhs = through(mul.getLhs()), rhs = through(mul.getRhs());
  bool operands = (lhs == body.getArgument(0) && rhs == body.getArgument(1)) ||
                  (lhs == body.getArgument(1) && rhs == body.getArgument(0));
  // Nothing else: the casts, the product, the sum.
  size_t ops = std::distance(body.without_terminator().begin(),
                             body.without_terminator().end());
  size_t casts = (mul.getLhs() != lhs) + (mul.getRhs() != rhs);
  return operands && ops == 2 + casts;
}

FailureOr<GemmMatch> matchGemm(linalg::LinalgOp op, std::string &why) {
  auto fail = [&](const Twine &reason) {
    why = reason.str();
    return failure();
  };
  if (!linalg::isaContractionOpInterface(op) || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1)
    return fail("not a multiply-add contraction of two operands");
  if (!isPlainMultiplyAdd(op))
    return fail("its payload does more than accumulate a product of the "
                "(extended) operands");
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.size() > 1)
    return fail("needs exactly one M, N and K dimension and at most one "
                "batch dimension");
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(ranges))
    return fail("dynamic sizes");
  GemmMatch match;
  match.mDim = dims->m[0];
  match.nDim = dims->n[0];
  match.kDim = dims->k[0];
  if (!dims->batch.empty()) {
    match.batchDim = dims->batch[0];
    match.batch = ranges[match.batchDim];
  }
  match.m = ranges[match.mDim];
  match.n = ranges[match.nDim];
  match.k = ranges[match.kDim];

  // Each operand's map: (batch?, row, column) with the batch first.
  auto layout = [&](OpOperand *operand, unsigned rowDim, unsigned colDim,
                    bool &transposed) -> bool {
    AffineMap map = op.getMatchingIndexingMap(operand);
    SmallVector<unsigned> results;
    for (AffineExpr expr : map.getResults()) {
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim)
        return false;
      results.push_back(dim.getPosition());
    }
    unsigned offset = match.batchDim != ~0u ? 1 : 0;
    if (results.size() != 2 + offset ||
        (offset && results[0] != match.batchDim))
      return false;
    if (results[offset] == rowDim && results[offset + 1] == colDim)
      transposed = false;
    else if (results[offset] == colDim && results[offset + 1] == rowDim)
      transposed = true;
    else
      return false;
    return true;
  };
  bool transC = false;
  if (!layout(op.getDpsInputOperand(0), match.mDim, match.kDim, match.transA) ||
      !layout(op.getDpsInputOperand(1), match.kDim, match.nDim, match.transB) ||
      !layout(op.getDpsInitOperand(0), match.mDim, match.nDim, transC) ||
      transC)
    return fail("operand layouts other than (batch, rows, columns)");

  Type aType = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
  Type bType = getElementTypeOrSelf(op.getDpsInputOperand(1)->get());
  Type cType = getElementTypeOrSelf(op.getDpsInitOperand(0)->get());
  if (aType != bType || !runtimeDType(aType) ||
      !(cType == aType || cType.isF32()))
    return fail("element types other than f32, f16 or bf16 inputs "
                "accumulating into f32 or the input type");
  for (Value operand : op->getOperands()) {
    auto type = dyn_cast<MemRefType>(operand.getType());
    if (!type)
      return fail("not on buffers");
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return fail("an operand's innermost stride is not 1");
  }
  return match;
}

/// Evaluates the scalar payload of `op` in double precision with its block
/// arguments bound to `args` (null for the output); nullopt when it holds an
/// op this evaluator does not know. Casts are exact here.
static std::optional<double>
evaluatePayload(linalg::GenericOp op, ArrayRef<std::optional<double>> args) {
  Block &body = op.getRegion().front();
  DenseMap<Value, double> values;
  for (auto [arg, value] : llvm::zip(body.getArguments(), args))
    if (value)
      values[arg] = *value;
  auto get = [&](Value v) -> std::optional<double> {
    auto it = values.find(v);
    if (it != values.end())
      return it->second;
    FloatAttr constant;
    if (matchPattern(v, m_Constant(&constant)))
      return constant.getValueAsDouble();
    return std::nullopt;
  };
  for (Operation &inner : body.without_terminator()) {
    SmallVector<double> in;
    for (Value operand : inner.getOperands()) {
      std::optional<double> value = get(operand);
      if (!value && !isa<arith::ConstantOp>(inner))
        return std::nullopt;
      if (value)
        in.push_back(*value);
    }
    std::optional<double> out =
        llvm::TypeSwitch<Operation *, std::optional<double>>(&inner)
            .Case([&](arith::ConstantOp c) -> std::optional<double> {
              if (auto f = dyn_cast<FloatAttr>(c.getValue()))
                return f.getValueAsDouble();
              return std::nullopt;
            })
            .Case([&](arith::AddFOp) { return in[0] + in[1]; })
            .Case([&](arith::SubFOp) { return in[0] - in[1]; })
            .Case([&](arith::MulFOp) { return in[0] * in[1]; })
            .Case([&](arith::DivFOp) { return in[0] / in[1]; })
            .Case([&](arith::NegFOp) { return -in[0]; })
            .Case<arith::MaximumFOp, arith::MaxNumFOp>(
                [&](Operation *) { return std::max(in[0], in[1]); })
            .Case<arith::MinimumFOp, arith::MinNumFOp>(
                [&](Operation *) { return std::min(in[0], in[1]); })
            .Case<arith::ExtFOp, arith::TruncFOp>(
                [&](Operation *) { return in[0]; })
            .Case([&](math::TanhOp) { return std::tanh(in[0]); })
            .Case([&](math::ExpOp) { return std::exp(in[0]); })
            .Case([&](math::ErfOp) { return std::erf(in[0]); })
            .Case([&](math::SqrtOp) { return std::sqrt(in[0]); })
            .Case([&](arith::SelectOp) -> std::optional<double> {
              // Conditions are evaluated as 0 / 1 by cmpf below.
              return in[0] != 0 ? in[1] : in[2];
            })
            .Case([&](arith::CmpFOp cmp) -> std::optional<double> {
              switch (cmp.getPredicate()) {
              case arith::CmpFPredicate::OGT:
              case arith::CmpFPredicate::UGT:
                return in[0] > in[1];
              case arith::CmpFPredicate::OGE:
              case arith::CmpFPredicate::UGE:
                return in[0] >= in[1];
              case arith::CmpFPredicate::OLT:
              case arith::CmpFPredicate::ULT:
                return in[0] < in[1];
              case arith::CmpFPredicate::OLE:
              case arith::CmpFPredicate::ULE:
                return in[0] <= in[1];
              default:
                return std::nullopt;
              }
            })
            .Default([](Operation *) { return std::nullopt; });
    if (!out || inner.getNumResults() != 1)
      return std::nullopt;
    values[inner.getResult(0)] = *out;
  }
  return get(body.getTerminator()->getOperand(0));
}

static double activate(Activation activation, double x) {
  switch (activation) {
  case Activation::None:
    return x;
  case Activation::Relu:
    return std::max(x, 0.0);
  case Activation::Gelu: // the tanh approximation cuBLASLt computes
    return 0.5 * x *
           (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  }
  llvm_unreachable("unknown activation");
}

std::optional<Epilogue> matchEpilogue(linalg::GenericOp generic,
                                      Value accumulator) {
  if (generic.getNumDpsInits() != 1 || generic.getNumLoops() != 2 ||
      generic.getNumParallelLoops() != 2 || generic.getNumDpsInputs() > 2)
    return std::nullopt;
  MLIRContext *context = generic.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(2, context);
  AffineMap columns =
      AffineMap::get(2, 0, getAffineDimExpr(1, context), context);
  Epilogue epilogue;
  epilogue.op = generic;
  int accumulatorIndex = -1;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    AffineMap map = generic.getMatchingIndexingMap(input);
    if (input->get() == accumulator && map == identity)
      accumulatorIndex = input->getOperandNumber();
    else if (map == columns && !epilogue.bias)
      epilogue.bias = input->get();
    else
      return std::nullopt;
  }
  OpOperand &init = generic.getDpsInitsMutable()[0];
  if (accumulatorIndex < 0 ||
      generic.getMatchingIndexingMap(&init) != identity ||
      generic.payloadUsesValueFromOperand(&init))
    return std::nullopt;
  Type outType = getElementTypeOrSelf(init.get());
  if (epilogue.bias && getElementTypeOrSelf(epilogue.bias) != outType)
    return std::nullopt;

  // Wide enough that clamps (ReLU6, a saturating min) do not pass for an
  // activation.
  const double samples[] = {-1e5, -64.0, -8.5, -3.1, -1.7, -0.6, -0.05, 0.0,
                            0.3,  0.9,   2.4,  7.5,  64.0, 1e3,  1e5};
  const double biases[] = {0.0, 0.375, -1.25};
  for (Activation activation :
       {Activation::None, Activation::Gelu, Activation::Relu}) {
    bool matches = true;
    for (double x : samples) {
      for (double b : biases) {
        if (!epilogue.bias && b != 0.0)
          continue;
        SmallVector<std::optional<double>> args(3);
        args[accumulatorIndex] = x;
        if (epilogue.bias)
          args[1 - accumulatorIndex] = b;
        std::optional<double> got = evaluatePayload(generic, args);
        double want = activate(activation, x + b);
        if (!got ||
            std::abs(*got - want) > 1e-6 * std::max(1.0, std::abs(want))) {
          matches = false;
          break;
        }
      }
      if (!matches)
        break;
    }
    if (matches) {
      epilogue.activation = activation;
      return epilogue;
    }
  }
  return std::nullopt;
}

} // namespace braid::togpu
