//===- VectorizeKernels.cpp - vector loops for CPU kernels ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cpu target's elementwise and row-reduction linalg ops (what
// braid-fuse-memory-bound leaves in each kernel) as vector loops along their
// innermost dimension; see the pass description in Passes.td.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"

namespace braid {
#define GEN_PASS_DEF_VECTORIZEKERNELS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// How one operand is read along the innermost dimension.
enum class Access {
  Scalar,    ///< not a buffer: the same value for every iteration
  Invariant, ///< a buffer the innermost dimension does not index
  Contiguous ///< a buffer whose last, unit-stride dimension it indexes
};

/// What the rewrite needs to know about one op; built by `analyze`.
struct Plan {
  linalg::LinalgOp op;
  unsigned innermost = 0;
  bool reduction = false;
  int64_t lanes = 0;
  /// Vectors per iteration of the first loop (1: one loop of `lanes`).
  int64_t interleave = 1;
  SmallVector<Access> access; // per operand (inputs, then inits)
  /// Payload values the same for every innermost index (computed as
  /// scalars, once per vector): from constants, outer loop indices and
  /// operands the innermost loop does not index. A gather's load at a
  /// uniform position in all but its last index, and the innermost index
  /// in that one, is a vector load; a bounds assertion on uniform values
  /// (torch-mlir's gathers check each index) stays a scalar assertion.
  llvm::DenseSet<Value> uniform;
  // Reductions: the combiner and what the vector of partials folds with.
  Operation *combiner = nullptr;
  vector::CombiningKind kind = vector::CombiningKind::ADD;
  TypedAttr neutral;
};

bool hasUnitInnerStride(MemRefType type) {
  if (type.getRank() == 0)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  return strides.back() == 1;
}

bool vectorizableElement(Type type) { return type.isIntOrIndexOrFloat(); }

/// Bits of an integer, index (64, as lowered) or float type.
int64_t bitsOf(Type type) {
  return type.isIndex() ? 64 : type.getIntOrFloatBitWidth();
}

/// Success with `plan` filled in, or failure where `op` stays scalar (each
/// reason a comment).
LogicalResult analyze(linalg::LinalgOp op, int64_t vectorBytes,
                      int64_t interleave, Plan &plan) {
  if (!op.hasPureBufferSemantics())
    return failure(); // not on buffers
  unsigned loops = op.getNumLoops();
  if (loops == 0 || op->getNumRegions() != 1 || !op.getBlock())
    return failure(); // no loops
  plan.op = op;
  plan.innermost = loops - 1;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned i = 0; i + 1 < loops; ++i)
    if (iterators[i] != utils::IteratorType::parallel)
      return failure(); // a reduction outside the innermost loop
  plan.reduction = iterators.back() == utils::IteratorType::reduction;

  // Every map result is a loop dimension or a constant; the innermost
  // dimension, when it indexes an operand, is its last, unit-stride one.
  int64_t widest = 8;
  for (OpOperand &operand : op->getOpOperands()) {
    Type type = operand.get().getType();
    auto memref = dyn_cast<MemRefType>(type);
    if (!memref) {
      if (!vectorizableElement(type))
        return failure(); // a scalar operand of no vector type
      plan.access.push_back(Access::Scalar);
      widest = std::max(widest, bitsOf(type));
      continue;
    }
    Type element = memref.getElementType();
    if (!vectorizableElement(element))
      return failure(); // elements of no vector type
    widest = std::max(widest, bitsOf(element));
    AffineMap map = op.getMatchingIndexingMap(&operand);
    Access access = Access::Invariant;
    for (auto [pos, expr] : llvm::enumerate(map.getResults())) {
      if (isa<AffineConstantExpr>(expr))
        continue;
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim)
        return failure(); // an indexing map with a compound expression
      if (dim.getPosition() != plan.innermost)
        continue;
      if (pos + 1 != map.getNumResults() || !hasUnitInnerStride(memref))
        return failure(); // the innermost loop strides through an operand
      access = Access::Contiguous;
    }
    // A memref of i1 holds a byte per element, a vector of i1 a bit: a
    // boolean input along the innermost loop is loaded as bytes and
    // truncated (readBytes); none is stored so. One read or written once
    // per row (a row's flag, a reduction's accumulator) is a scalar load
    // or store, broadcast or reduced.
    bool init = op.isDpsInit(&operand);
    if (access == Access::Contiguous && bitsOf(element) % 8 != 0 &&
        (init || !element.isInteger(1)))
      return failure(); // sub-byte elements written along the innermost loop
    if (init && plan.reduction && access == Access::Contiguous)
      return failure(); // a reduction writes along its reduced dimension
    if (init && !plan.reduction && access != Access::Contiguous)
      return failure(); // an output the innermost loop does not index
    plan.access.push_back(access);
  }

  // The payload: elementwise ops (all of which have vector forms), the
  // loop indices (a causal mask compares positions): the innermost one a
  // vector of consecutive indices, the others scalars; gathers along the
  // innermost loop and assertions on uniform values.
  Block &body = *op.getBlock();
  for (auto [i, arg] : llvm::enumerate(body.getArguments()))
    if (i < plan.access.size() && plan.access[i] != Access::Contiguous &&
        !(plan.reduction && i >= op.getNumDpsInputs()))
      plan.uniform.insert(arg); // (a reduction's accumulator varies)
  auto isUniform = [&](Value v) {
    return plan.uniform.contains(v) || v.getParentRegion() != &op->getRegion(0);
  };
  for (Operation &inner : body.without_terminator()) {
    bool uniform = llvm::all_of(inner.getOperands(), isUniform);
    if (auto index = dyn_cast<linalg::IndexOp>(inner))
      uniform = index.getDim() != plan.innermost;
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      // A gather: uniform in every index but the last, the innermost
      // loop's index in that one, along a unit-stride dimension.
      ValueRange at = load.getIndices();
      auto innermost = at.empty() ? linalg::IndexOp()
                                  : at.back().getDefiningOp<linalg::IndexOp>();
      bool gather = innermost && innermost.getDim() == plan.innermost &&
                    llvm::all_of(at.drop_back(), isUniform) &&
                    hasUnitInnerStride(load.getMemRefType()) &&
                    isUniform(load.getMemRef());
      if (!uniform && !gather)
        return failure(); // a load at a position that varies otherwise
    } else if (isa<cf::AssertOp>(inner)) {
      if (!uniform)
        return failure(); // an assertion on values that vary
    } else if (inner.getNumRegions() != 0 ||
               !(isa<arith::ConstantOp, linalg::IndexOp>(inner) ||
                 (inner.hasTrait<OpTrait::Elementwise>() &&
                  inner.hasTrait<OpTrait::Vectorizable>()))) {
      return failure(); // a payload op without a vector form
    }
    if (uniform)
      for (Value result : inner.getResults())
        plan.uniform.insert(result);
    for (Type type : inner.getResultTypes()) {
      if (!vectorizableElement(type))
        return failure(); // a payload value of no vector type
      widest = std::max(widest, bitsOf(type));
    }
  }
  if (plan.reduction) {
    if (op.getNumDpsInits() != 1)
      return failure(); // a reduction with several outputs
    SmallVector<Operation *> combiners;
    BlockArgument acc = body.getArgument(op.getNumDpsInputs());
    if (!matchReduction(op.getRegionOutputArgs(), 0, combiners) ||
        combiners.size() != 1 || !acc.hasOneUse())
      return failure(); // not a reduction by one combiner
    plan.combiner = combiners.front();
    std::optional<vector::CombiningKind> kind =
        linalg::getCombinerOpKind(plan.combiner);
    std::optional<TypedAttr> neutral = arith::getNeutralElement(plan.combiner);
    if (!kind || !neutral)
      return failure(); // a combiner without a vector reduction
    plan.kind = *kind;
    plan.neutral = *neutral;
  }

  plan.lanes = vectorBytes * 8 / widest;
  if (plan.lanes < 2)
    return failure(); // vectors of fewer than two elements
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (!ShapedType::isDynamic(ranges.back()) && ranges.back() < plan.lanes)
    return failure(); // an innermost extent under one vector
  // Several vectors per iteration where one would wait on its own chain:
  // a reduction's accumulator, and payloads with a math function (exp,
  // tanh, erf: a long polynomial) that LLVM does not unroll.
  bool chained = plan.reduction;
  op.getBlock()->walk([&](Operation *inner) {
    if (isa<math::MathDialect>(inner->getDialect()))
      chained = true;
  });
  if (chained)
    plan.interleave = std::max<int64_t>(1, interleave);
  return success();
}

/// Builds the rewrite of one op, at its position.
class Rewriter {
public:
  Rewriter(const Plan &plan) : plan(plan), op(plan.op), b(op) {}

  void run() {
    Location loc = op.getLoc();
    SmallVector<Range> ranges = op.createLoopRanges(b, loc);
    SmallVector<Value> ivs;
    buildOuter(ranges, 0, ivs);
    op->erase();
  }

private:
  const Plan &plan;
  linalg::LinalgOp op;
  OpBuilder b;
  /// Lanes of the vectors being built: the plan's, or that many times its
  /// interleave.
  int64_t width = plan.lanes;

  Value index(int64_t v) {
    return arith::ConstantIndexOp::create(b, op.getLoc(), v);
  }

  void buildOuter(ArrayRef<Range> ranges, unsigned dim,
                  SmallVector<Value> &ivs) {
    Location loc = op.getLoc();
    if (dim == plan.innermost) {
      buildInner(ranges[dim], ivs);
      return;
    }
    Value lb = getValueOrCreateConstantIndexOp(b, loc, ranges[dim].offset);
    Value ub = getValueOrCreateConstantIndexOp(b, loc, ranges[dim].size);
    Value step = getValueOrCreateConstantIndexOp(b, loc, ranges[dim].stride);
    auto loop = scf::ForOp::create(b, loc, lb, ub, step);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(loop.getBody()->getTerminator());
    ivs.push_back(loop.getInductionVar());
    buildOuter(ranges, dim + 1, ivs);
    ivs.pop_back();
  }

  /// Indices of `operand` at the outer `ivs` and innermost index `inner`.
  SmallVector<Value> indices(OpOperand &operand, ArrayRef<Value> ivs,
                             Value inner) {
    SmallVector<Value> result;
    for (AffineExpr expr : op.getMatchingIndexingMap(&operand).getResults()) {
      if (auto c = dyn_cast<AffineConstantExpr>(expr)) {
        result.push_back(index(c.getValue()));
        continue;
      }
      unsigned pos = cast<AffineDimExpr>(expr).getPosition();
      result.push_back(pos == plan.innermost ? inner : ivs[pos]);
    }
    return result;
  }

  Type vectorOf(Type type) { return VectorType::get({width}, type); }

  /// The scalars of the operands the innermost loop does not index, in
  /// block-argument order (null for the others and a reduction's
  /// accumulator): what uniform payload ops read.
  SmallVector<Value> uniformArgs(ArrayRef<Value> scalars) {
    SmallVector<Value> result;
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      bool varies = plan.access[i] == Access::Contiguous ||
                    (plan.reduction && op.isDpsInit(&operand));
      result.push_back(varies ? Value() : scalars[i]);
    }
    return result;
  }

  Value broadcast(Value scalar) {
    return vector::BroadcastOp::create(b, op.getLoc(),
                                       vectorOf(scalar.getType()), scalar);
  }

  /// The payload, cloned on `args` (vectors of `plan.lanes` or scalars)
  /// at the outer `ivs` and innermost index `at` (the first of a vector's);
  /// returns the yielded values. `scalarArgs`, for a vector payload with
  /// uniform ops, gives them the scalars of the operands the innermost
  /// loop does not index.
  SmallVector<Value> payload(ArrayRef<Value> args, bool vector,
                             ArrayRef<Value> ivs, Value at,
                             ArrayRef<Value> scalarArgs = {}) {
    Block &body = *op.getBlock();
    IRMapping map;
    map.map(body.getArguments(), args);
    IRMapping uniformMap;
    if (!scalarArgs.empty())
      for (auto [arg, scalar] : llvm::zip(body.getArguments(), scalarArgs))
        if (scalar && plan.uniform.contains(arg))
          uniformMap.map(arg, scalar);
    for (Operation &inner : body.without_terminator()) {
      if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
        map.map(index.getResult(), loopIndex(index.getDim(), ivs, at, vector));
        continue;
      }
      if (auto div = dyn_cast<arith::DivFOp>(inner);
          div && div.getType().isF32() && plan.uniform.contains(div.getRhs()) &&
          !plan.uniform.contains(div.getResult())) {
        // An f32 quotient by a value the same along the row (a softmax's
        // sum): a product with its reciprocal, which LLVM computes once
        // per row, as torch's CPU softmax does (the HF layer's softmax
        // kernel spent about a fifth of its samples in its division loop).
        Value divisor = vector ? uniformMap.lookupOrNull(div.getRhs())
                               : map.lookupOrDefault(div.getRhs());
        if (divisor) {
          Location loc = div.getLoc();
          Value numerator = map.lookupOrDefault(div.getLhs());
          if (vector && !isa<VectorType>(numerator.getType()))
            numerator = broadcast(numerator); // captured from outside
          auto [scale, reciprocal] = scaledReciprocal(divisor, loc);
          Value scaled = arith::MulFOp::create(
              b, loc, numerator, vector ? broadcast(scale) : scale);
          map.map(div.getResult(),
                  arith::MulFOp::create(b, loc, scaled,
                                        vector ? broadcast(reciprocal)
                                               : reciprocal));
          continue;
        }
      }
      if (!vector) {
        b.clone(inner, map);
        continue;
      }
      if ((inner.getNumResults() != 0 &&
           plan.uniform.contains(inner.getResult(0))) ||
          isa<cf::AssertOp>(inner)) {
        // Uniform: a scalar op on the scalars of its operands.
        Operation *clone = b.clone(inner, map);
        for (OpOperand &operand : clone->getOpOperands())
          if (Value scalar = uniformMap.lookupOrNull(
                  inner.getOperand(operand.getOperandNumber())))
            operand.set(scalar);
        for (auto [from, to] :
             llvm::zip(inner.getResults(), clone->getResults()))
          uniformMap.map(from, to);
        continue;
      }
      if (auto load = dyn_cast<memref::LoadOp>(inner)) {
        // A gather along the innermost loop: the vector from the row at
        // the uniform indices, from the innermost index on.
        SmallVector<Value> where;
        for (Value index : load.getIndices().drop_back())
          where.push_back(map.lookupOrDefault(index));
        where.push_back(at);
        map.map(load.getResult(),
                vector::LoadOp::create(
                    b, load.getLoc(),
                    cast<VectorType>(vectorOf(load.getType())),
                    map.lookupOrDefault(load.getMemRef()), where));
        continue;
      }
      if (auto constant = dyn_cast<arith::ConstantOp>(inner)) {
        map.map(constant.getResult(), broadcast(b.clone(inner)->getResult(0)));
        continue;
      }
      // Elementwise ops apply to vectors as they are: the same op, with
      // vector operands (scalars from outside broadcast) and results.
      SmallVector<Value> operands;
      for (Value operand : inner.getOperands()) {
        Value mapped = map.lookupOrDefault(operand);
        operands.push_back(
            isa<VectorType>(mapped.getType()) ? mapped : broadcast(mapped));
      }
      Operation *clone = b.clone(inner);
      clone->setOperands(operands);
      for (OpResult result : clone->getResults())
        result.setType(vectorOf(result.getType()));
      map.map(inner.getResults(), clone->getResults());
    }
    SmallVector<Value> yielded;
    for (Value value : body.getTerminator()->getOperands()) {
      Value mapped = map.lookupOrDefault(value);
      if (vector && !isa<VectorType>(mapped.getType()))
        mapped = broadcast(mapped);
      yielded.push_back(mapped);
    }
    return yielded;
  }

  /// x / d as (x * s) * (1 / (d * s)): s a power of two that keeps d * s
  /// normal and its reciprocal finite (2^64 for |d| < 2^-120, 2^-64 for
  /// |d| > 2^120, else 1), so that the product is within 1.5 ulp of the
  /// quotient for every d (a subnormal d's reciprocal alone overflows),
  /// and 0, infinities and NaNs give what the division gives. Returns s
  /// and the reciprocal, scalars computed once per row.
  std::pair<Value, Value> scaledReciprocal(Value d, Location loc) {
    auto f32 = [&](float v) {
      return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v));
    };
    Value magnitude =
        arith::MaximumFOp::create(b, loc, d, arith::NegFOp::create(b, loc, d));
    Value small = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                        magnitude, f32(0x1p-120f));
    Value large = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                        magnitude, f32(0x1p120f));
    Value scale = arith::SelectOp::create(
        b, loc, small, f32(0x1p64f),
        arith::SelectOp::create(b, loc, large, f32(0x1p-64f), f32(1.0f)));
    Value reciprocal = arith::DivFOp::create(
        b, loc, f32(1.0f), arith::MulFOp::create(b, loc, d, scale));
    return {scale, reciprocal};
  }

  /// A vector of the booleans of `memref` (a byte each) from `at` on: the
  /// bytes loaded through the buffer's address and truncated to i1 (a
  /// vector.load of i1 would read bits).
  Value readBytes(Value memref, ArrayRef<Value> at) {
    Location loc = op.getLoc();
    auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
    Value offset = meta.getOffset();
    for (auto [index, stride] : llvm::zip(at, meta.getStrides()))
      offset = arith::AddIOp::create(
          b, loc, offset, arith::MulIOp::create(b, loc, index, stride));
    Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
    Value address = arith::IndexCastOp::create(
        b, loc, b.getI64Type(), arith::AddIOp::create(b, loc, base, offset));
    Value pointer = LLVM::IntToPtrOp::create(
        b, loc, LLVM::LLVMPointerType::get(b.getContext()), address);
    Value bytes = LLVM::LoadOp::create(
        b, loc, VectorType::get({width}, b.getI8Type()), pointer,
        /*alignment=*/1);
    return arith::TruncIOp::create(b, loc, vectorOf(b.getI1Type()), bytes);
  }

  /// Loop `dim`'s index: an outer loop's induction variable, or the
  /// innermost index `at` (as a vector, `at` + [0, lanes)).
  Value loopIndex(uint64_t dim, ArrayRef<Value> ivs, Value at, bool vector) {
    if (dim != plan.innermost)
      return ivs[dim];
    if (!vector)
      return at;
    SmallVector<APInt> lanes;
    for (int64_t i = 0; i < width; ++i)
      lanes.push_back(APInt(64, i));
    auto type = cast<VectorType>(vectorOf(b.getIndexType()));
    Value step = arith::ConstantOp::create(b, op.getLoc(), type,
                                           DenseElementsAttr::get(type, lanes));
    return arith::AddIOp::create(b, op.getLoc(), broadcast(at), step);
  }

  /// Loads of every input (and, for elementwise ops, every init) at
  /// innermost index `inner`: vectors of contiguous operands, and the
  /// hoisted broadcasts or scalars of the others.
  SmallVector<Value> reads(ArrayRef<Value> ivs, Value inner, bool vector,
                           ArrayRef<Value> invariant) {
    SmallVector<Value> args;
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (plan.reduction && op.isDpsInit(&operand))
        continue; // the accumulator, passed by the caller
      if (plan.access[i] != Access::Contiguous) {
        args.push_back(invariant[i]);
        continue;
      }
      SmallVector<Value> at = indices(operand, ivs, inner);
      Type element = getElementTypeOrSelf(operand.get().getType());
      if (vector && element.isInteger(1))
        args.push_back(readBytes(operand.get(), at));
      else if (vector)
        args.push_back(vector::LoadOp::create(
            b, op.getLoc(), cast<VectorType>(vectorOf(element)), operand.get(),
            at));
      else
        args.push_back(
            memref::LoadOp::create(b, op.getLoc(), operand.get(), at));
    }
    return args;
  }

  void buildInner(const Range &range, ArrayRef<Value> ivs) {
    Location loc = op.getLoc();
    // Operands the innermost loop does not index: loaded once.
    SmallVector<Value> scalars(op->getNumOperands());
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (plan.access[i] == Access::Contiguous ||
          (plan.reduction && op.isDpsInit(&operand)))
        continue;
      Value scalar = operand.get();
      if (plan.access[i] == Access::Invariant)
        scalar = memref::LoadOp::create(b, loc, operand.get(),
                                        indices(operand, ivs, Value()));
      scalars[i] = scalar;
    }
    Value lb = getValueOrCreateConstantIndexOp(b, loc, range.offset);
    Value size = getValueOrCreateConstantIndexOp(b, loc, range.size);
    Value extent = arith::SubIOp::create(b, loc, size, lb);
    Value one = index(1);
    // [lb, size) in vectors of each width in turn, as many as fit, then one
    // element at a time: the interleaved vectors' loop ends where the
    // extent's remainder by their width starts, the next where its
    // remainder by its own width does.
    SmallVector<int64_t, 2> widths;
    if (plan.interleave > 1)
      widths.push_back(plan.lanes * plan.interleave);
    widths.push_back(plan.lanes);
    auto splitFor = [&](int64_t w) {
      return arith::SubIOp::create(
          b, loc, size, arith::RemUIOp::create(b, loc, extent, index(w)));
    };
    // The broadcasts of the operands the innermost loop does not index, at
    // the current width.
    auto broadcasts = [&] {
      SmallVector<Value> vectors(op->getNumOperands());
      for (auto [i, scalar] : llvm::enumerate(scalars))
        if (scalar)
          vectors[i] = broadcast(scalar);
      return vectors;
    };

    if (!plan.reduction) {
      auto store = [&](ArrayRef<Value> values, Value inner, bool vector) {
        for (auto [value, init] : llvm::zip(values, op.getDpsInitsMutable())) {
          SmallVector<Value> at = indices(init, ivs, inner);
          if (vector)
            vector::StoreOp::create(b, loc, value, init.get(), at);
          else
            memref::StoreOp::create(b, loc, value, init.get(), at);
        }
      };
      Value from = lb;
      for (int64_t w : widths) {
        width = w;
        SmallVector<Value> vectors = broadcasts();
        Value to = splitFor(w);
        auto loop = scf::ForOp::create(b, loc, from, to, index(w));
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(loop.getBody()->getTerminator());
        Value j = loop.getInductionVar();
        store(payload(reads(ivs, j, true, vectors), true, ivs, j,
                      uniformArgs(scalars)),
              j, true);
        from = to;
      }
      auto rest = scf::ForOp::create(b, loc, from, size, one);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(rest.getBody()->getTerminator());
      Value j = rest.getInductionVar();
      store(payload(reads(ivs, j, false, scalars), false, ivs, j), j, false);
      return;
    }

    OpOperand &init = op.getDpsInitsMutable()[0];
    SmallVector<Value> at = indices(init, ivs, Value());
    Value start = memref::LoadOp::create(b, loc, init.get(), at);
    // The loops' bodies are built with `b`, at the body builder's point.
    auto reduce = [&](Value from, Value to, Value step, Value start,
                      bool vector, ArrayRef<Value> vectors) {
      return scf::ForOp::create(
          b, loc, from, to, step, ValueRange{start},
          [&](OpBuilder &inner, Location, Value j, ValueRange carried) {
            OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(inner.getInsertionBlock(),
                                inner.getInsertionPoint());
            SmallVector<Value> args =
                reads(ivs, j, vector, vector ? vectors : scalars);
            args.push_back(carried.front());
            scf::YieldOp::create(
                b, loc,
                payload(args, vector, ivs, j,
                        vector ? uniformArgs(scalars) : SmallVector<Value>())
                    .front());
          });
    };
    // Each width's vector of partial results starts at the neutral element
    // and is folded into the running value after its loop.
    Value combined = start;
    Value from = lb;
    for (int64_t w : widths) {
      width = w;
      SmallVector<Value> vectors = broadcasts();
      Value zeros = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              cast<ShapedType>(vectorOf(plan.neutral.getType())),
              cast<Attribute>(plan.neutral)));
      Value to = splitFor(w);
      auto loop = reduce(from, to, index(w), zeros, /*vector=*/true, vectors);
      combined =
          vector::ReductionOp::create(b, loc, plan.kind, loop.getResult(0),
                                      combined, arith::FastMathFlags::reassoc);
      from = to;
    }
    auto rest = reduce(from, size, one, combined, /*vector=*/false, {});
    memref::StoreOp::create(b, loc, rest.getResult(0), init.get(), at);
  }
};

struct VectorizeKernelsPass
    : public braid::impl::VectorizeKernelsBase<VectorizeKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (vectorBytes <= 0)
      return;
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) { ops.push_back(op); });
    for (linalg::LinalgOp op : ops) {
      Plan plan;
      if (failed(analyze(op, vectorBytes, interleave, plan))) {
        ++numScalar;
        continue;
      }
      Rewriter(plan).run();
      ++numVectorized;
      if (plan.reduction)
        ++numReductions;
    }
  }
};

} // namespace
