//===- Contractions.cpp - GEMMs and epilogues for cuBLASLt ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include "braid/Dialect/Xfer/IR/XferOps.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace braid::codegen {

/// Runtime codes of element types (braid_rt_dtype).
std::optional<int64_t> runtimeDType(Type type) {
  if (type.isF32())
    return BRAID_RT_F32;
  if (type.isF16())
    return BRAID_RT_F16;
  if (type.isBF16())
    return BRAID_RT_BF16;
  return std::nullopt;
}

int64_t elementBytes(Type type) {
  return (static_cast<int64_t>(type.getIntOrFloatBitWidth()) + 7) / 8;
}

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

/// An index constant.
static Value constantIndex(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

/// The allocation `value` is a view of, if any: for a buffer of the memory
/// plan, its view of the arena.
Operation *allocationOf(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (isa<gpu::AllocOp, memref::AllocOp>(def) ||
        braid::xfer::getArenaBytes(value))
      return def;
    if (auto metadata = dyn_cast<memref::ExtractStridedMetadataOp>(def)) {
      value = metadata.getSource();
      continue;
    }
    if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
      value = view.getViewSource();
      continue;
    }
    return nullptr;
  }
  return nullptr;
}

/// A buffer of its own: an allocation, or a buffer of the memory plan (a
/// view of an arena, braid-plan-memory).
static bool isOwnBuffer(Value value) {
  return value.getDefiningOp<memref::AllocOp>() ||
         braid::xfer::getArenaBytes(value);
}

bool mayShareBytes(Value a, Value b) {
  Operation *x = allocationOf(a), *y = allocationOf(b);
  if (!x || !y)
    return false;
  return x == y ||
         braid::xfer::arenaBytesOverlap(x->getResult(0), y->getResult(0));
}

func::FuncOp declareRuntime(ModuleOp module, StringRef name, unsigned numArgs) {
  if (auto existing = module.lookupSymbol<func::FuncOp>(name))
    return existing;
  OpBuilder b(module.getContext());
  b.setInsertionPointToStart(module.getBody());
  SmallVector<Type> args(numArgs, b.getI64Type());
  auto function = func::FuncOp::create(b, module.getLoc(), name,
                                       b.getFunctionType(args, {}));
  function.setPrivate();
  return function;
}

/// Whether `copy` copies zeros: its source an allocation whose one writer
/// before it is a zero linalg.fill, every other user before it a copy out
/// of it, and whatever else uses it (the last product may start from it in
/// place, and it is freed) after `copy`. (CSE makes one fill of
/// the zeros that several products start from; bufferization copies it for
/// each but the last.)
static bool copiesZeros(memref::CopyOp copy) {
  Value buffer = copy.getSource();
  if (!isOwnBuffer(buffer))
    return false;
  bool filled = false;
  for (Operation *user : buffer.getUsers()) {
    if (user == copy.getOperation())
      continue;
    // Where `user` is, seen from the copy's block (it may be nested).
    Operation *at = copy->getBlock()->findAncestorOpInBlock(*user);
    bool before = at && at->isBeforeInBlock(copy);
    bool after = at && !before;
    if (auto fill = dyn_cast<linalg::FillOp>(user); fill && before) {
      if (fill.getOutputs()[0] != buffer ||
          !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
        return false;
      filled = true;
      continue;
    }
    auto other = dyn_cast<memref::CopyOp>(user);
    if (other && other.getSource() == buffer)
      continue;
    if (!after)
      return false;
  }
  return filled;
}

Operation *zeroFillBefore(linalg::LinalgOp op) {
  Value output = op.getDpsInitOperand(0)->get();
  for (Operation *previous = op->getPrevNode(); previous;
       previous = previous->getPrevNode()) {
    if (auto fill = dyn_cast<linalg::FillOp>(previous)) {
      bool zero = matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
      return zero && fill.getOutputs()[0] == output ? fill.getOperation()
                                                    : nullptr;
    }
    if (auto copy = dyn_cast<memref::CopyOp>(previous)) {
      if (copy.getTarget() == output)
        return copiesZeros(copy) ? copy.getOperation() : nullptr;
      if (isOwnBuffer(copy.getTarget()))
        continue; // another product's copy of the zeros
      return nullptr;
    }
    if (auto call = dyn_cast<func::CallOp>(previous)) {
      if (call.getCallee() == "braid_rt_coord" ||
          call.getCallee() == "braid_rt_group")
        continue;
      return nullptr;
    }
    if (!isMemoryEffectFree(previous) &&
        !isa<memref::AllocOp, memref::AllocaOp>(previous))
      return nullptr;
  }
  return nullptr;
}

linalg::GenericOp readerAfter(linalg::LinalgOp op) {
  Value accumulator = op.getDpsInitOperand(0)->get();
  if (!isOwnBuffer(accumulator))
    return {};
  linalg::GenericOp reader;
  for (Operation *user : accumulator.getUsers()) {
    if (user == op.getOperation() ||
        isa<linalg::FillOp, memref::DeallocOp,
            memref::ExtractAlignedPointerAsIndexOp>(user))
      continue;
    // What the product accumulates onto, copied in before it (a
    // memref.copy, or the linalg.copy braid-map-to-gpu makes of one).
    auto copy = dyn_cast<memref::CopyOp>(user);
    auto linalgCopy = dyn_cast<linalg::CopyOp>(user);
    if (((copy && copy.getTarget() == accumulator) ||
         (linalgCopy && linalgCopy.getOutputs()[0] == accumulator)) &&
        user->getBlock() == op->getBlock() && user->isBeforeInBlock(op))
      continue;
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || reader)
      return {};
    reader = generic;
  }
  if (!reader)
    return {};
  for (Operation *next = op->getNextNode(); next; next = next->getNextNode()) {
    if (next == reader.getOperation())
      return reader;
    if (!isMemoryEffectFree(next) && !isa<memref::AllocOp>(next))
      return {};
  }
  return {};
}

/// The epilogue right after the product `op` (pure ops and allocations
/// between), when the product's buffer has no other reader, so that
/// cuBLASLt may write the epilogue's output instead.
std::optional<Epilogue> epilogueAfter(linalg::LinalgOp op) {
  Value accumulator = op.getDpsInitOperand(0)->get();
  linalg::GenericOp reader = readerAfter(op);
  if (!reader)
    return std::nullopt;
  std::optional<Epilogue> epilogue = matchEpilogue(reader, accumulator);
  if (!epilogue)
    return std::nullopt;
  // cuBLASLt writes a 2-D output with unit inner stride, in f32 or the
  // inputs' type.
  auto out = dyn_cast<MemRefType>(reader.getDpsInits()[0].getType());
  Type inputType = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!out || out.getRank() != 2 ||
      failed(out.getStridesAndOffset(strides, offset)) || strides.back() != 1 ||
      !(out.getElementType().isF32() || out.getElementType() == inputType))
    return std::nullopt;
  // cuBLASLt must not write what it reads (the memory plan may have given
  // the output the bytes of an input whose last reader was the product:
  // folded, the product writes them while it reads).
  Value written = reader.getDpsInits()[0];
  for (Value read : {op.getDpsInputOperand(0)->get(),
                     op.getDpsInputOperand(1)->get(), epilogue->bias})
    if (read && (read == written || mayShareBytes(read, written)))
      return std::nullopt;
  if (epilogue->bias) {
    auto bias = dyn_cast<MemRefType>(epilogue->bias.getType());
    if (!bias || bias.getRank() != 1 ||
        failed(bias.getStridesAndOffset(strides, offset)) ||
        strides.back() != 1)
      return std::nullopt;
  }
  return epilogue;
}

/// What a braid_rt_epilogue applies, for remarks and trace names.
static const char *epilogueName(int64_t code) {
  static const char *names[] = {"cast",        "bias", "bias + GELU",
                                "bias + ReLU", "GELU", "ReLU"};
  return code >= 0 && code < 6 ? names[code] : "epilogue";
}

static void emitGemm(linalg::LinalgOp op, const GemmMatch &match,
                     bool accumulate, Epilogue *epilogue) {
  Location loc = op.getLoc();
  // With an epilogue, at its place: its output may be allocated after the
  // product (only pure ops and allocations are between).
  OpBuilder b(epilogue ? epilogue->op.getOperation() : op.getOperation());
  Type i64 = b.getI64Type();
  auto toI64 = [&](Value value) -> Value {
    return arith::IndexCastOp::create(b, loc, i64, value);
  };
  auto constant = [&](int64_t value) -> Value {
    return arith::ConstantIntOp::create(b, loc, i64, value);
  };
  // (address, leading dimension, batch stride, dtype) of an operand.
  auto describe = [&](Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(
        b, loc, metadata.getBaseBuffer());
    Value offsetBytes = arith::MulIOp::create(
        b, loc, metadata.getOffset(),
        constantIndex(b, loc, elementBytes(type.getElementType())));
    Value address = arith::AddIOp::create(b, loc, base, offsetBytes);
    auto strides = metadata.getStrides();
    int64_t rank = type.getRank();
    Value leading = rank >= 2 ? strides[rank - 2] : constantIndex(b, loc, 0);
    Value batchStride = rank == 3 ? strides[0] : constantIndex(b, loc, 0);
    return SmallVector<Value>{toI64(address), toI64(leading),
                              toI64(batchStride),
                              constant(*runtimeDType(type.getElementType()))};
  };
  SmallVector<Value> a = describe(op.getDpsInputOperand(0)->get());
  SmallVector<Value> bm = describe(op.getDpsInputOperand(1)->get());
  // With an epilogue cuBLASLt writes the epilogue's output directly.
  SmallVector<Value> c = describe(
      epilogue ? epilogue->op->getOperand(epilogue->op->getNumOperands() - 1)
               : op.getDpsInitOperand(0)->get());
  SmallVector<Value> args = {constant(match.m), constant(match.n),
                             constant(match.k), constant(match.batch)};
  llvm::append_range(args, a);
  args.push_back(constant(match.transA));
  llvm::append_range(args, bm);
  args.push_back(constant(match.transB));
  llvm::append_range(args, c);
  args.push_back(constant(accumulate));
  args.push_back(constant(epilogue ? epilogue->code() : 0));
  args.push_back(epilogue && epilogue->bias ? describe(epilogue->bias)[0]
                                            : constant(0));
  args.push_back(constant(-1));
  func::FuncOp callee = declareRuntime(op->getParentOfType<ModuleOp>(),
                                       "braid_rt_gemm", args.size());
  auto call = func::CallOp::create(b, loc, callee, args);

  // What the trace and the profile call it: its shape, types and epilogue.
  auto elementOf = [](Value buffer) {
    return cast<MemRefType>(buffer.getType()).getElementType();
  };
  Type inType = elementOf(op.getDpsInputOperand(0)->get());
  Type outType = elementOf(op.getDpsInitOperand(0)->get());
  if (epilogue)
    outType = elementOf(epilogue->op.getDpsInitOperand(0)->get());
  std::string name;
  llvm::raw_string_ostream os(name);
  os << "gemm " << match.m << "x" << match.n << "x" << match.k;
  if (match.batch != 1)
    os << " batch " << match.batch;
  os << " " << inType;
  if (outType != inType)
    os << "->" << outType;
  if (epilogue)
    os << " + " << epilogueName(epilogue->code());
  int64_t elements = match.batch * (match.m * match.k + match.k * match.n);
  braid::xfer::setTraceEvent(call, name,
                             elements * elementBytes(inType) +
                                 match.batch * match.m * match.n *
                                     elementBytes(outType),
                             2 * match.batch * match.m * match.n * match.k);
}

std::string describeGemm(const GemmMatch &match) {
  std::string text = std::to_string(match.m) + "x" + std::to_string(match.n) +
                     "x" + std::to_string(match.k);
  if (match.batch > 1)
    text += " in " + std::to_string(match.batch) + " batches";
  if (match.transA || match.transB)
    text += std::string(", reading ") +
            (match.transA && match.transB ? "A and B"
             : match.transA               ? "A"
                                          : "B") +
            " transposed";
  return text;
}

LogicalResult replaceWithGemm(linalg::LinalgOp op, StringRef library,
                              std::string &why) {
  FailureOr<GemmMatch> match = matchGemm(op, why);
  if (failed(match))
    return failure();
  // A zero fill right before only makes the product start from zero: the
  // library does that with beta = 0, without the extra pass over C. (With
  // k = 0 there is no product to start from zero: keep it.)
  Operation *zeros = match->k > 0 ? zeroFillBefore(op) : nullptr;
  bool fill = zeros;
  if (zeros)
    zeros->erase();
  // Then the elementwise work on the product can be the library's epilogue,
  // written straight to its own output.
  std::optional<Epilogue> epilogue;
  if (fill && match->batch == 1)
    epilogue = epilogueAfter(op);
  emitGemm(op, *match, /*accumulate=*/!fill, epilogue ? &*epilogue : nullptr);
  auto remark = op->emitRemark();
  remark << "runs on " << library << ": " << describeGemm(*match);
  if (epilogue) {
    remark << ", with the " << epilogueName(epilogue->code())
           << " after it as its epilogue, writing "
           << getElementTypeOrSelf(epilogue->op.getDpsInits()[0]);
    epilogue->op->erase();
  }
  remark << (fill ? ", beta = 0 (its zero fill folded)"
                  : ", beta = 1 (accumulating into its output)");
  op->erase();
  return success();
}

} // namespace braid::codegen
