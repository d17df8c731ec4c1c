//===- DeviceLoops.cpp - Linalg ops as loops of GPU threads -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "GPU.h"

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

namespace braid::codegen {

/// Whether `op` sits in device code already.
bool inDeviceCode(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() != nullptr;
}

namespace {

/// The combiner of a reduction payload: the op producing the yielded value
/// that takes the output's block argument as one operand, when every thread
/// can reduce a slice and the block combine the partial results.
struct Combiner {
  Operation *op = nullptr;
  Value other; // the payload value it folds in
  gpu::AllReduceOperation kind;
  double identity;
};

std::optional<Combiner> matchCombiner(linalg::LinalgOp op) {
  if (op.getNumDpsInits() != 1)
    return std::nullopt;
  Block &body = op->getRegion(0).front();
  BlockArgument out = body.getArgument(op.getNumDpsInputs());
  if (!out.getType().isF32() || !out.hasOneUse())
    return std::nullopt;
  Value yielded = body.getTerminator()->getOperand(0);
  Operation *combine = yielded.getDefiningOp();
  if (!combine || combine->getBlock() != &body || !yielded.hasOneUse() ||
      combine->getNumOperands() != 2)
    return std::nullopt;
  Combiner result;
  result.op = combine;
  if (combine->getOperand(0) == out)
    result.other = combine->getOperand(1);
  else if (combine->getOperand(1) == out)
    result.other = combine->getOperand(0);
  else
    return std::nullopt;
  double inf = std::numeric_limits<double>::infinity();
  bool known = llvm::TypeSwitch<Operation *, bool>(combine)
                   .Case([&](arith::AddFOp) {
                     result.kind = gpu::AllReduceOperation::ADD;
                     result.identity = 0.0;
                     return true;
                   })
                   .Case([&](arith::MulFOp) {
                     result.kind = gpu::AllReduceOperation::MUL;
                     result.identity = 1.0;
                     return true;
                   })
                   .Case([&](arith::MaximumFOp) {
                     result.kind = gpu::AllReduceOperation::MAXIMUMF;
                     result.identity = -inf;
                     return true;
                   })
                   .Case([&](arith::MaxNumFOp) {
                     result.kind = gpu::AllReduceOperation::MAXNUMF;
                     result.identity = -inf;
                     return true;
                   })
                   .Case([&](arith::MinimumFOp) {
                     result.kind = gpu::AllReduceOperation::MINIMUMF;
                     result.identity = inf;
                     return true;
                   })
                   .Case([&](arith::MinNumFOp) {
                     result.kind = gpu::AllReduceOperation::MINNUMF;
                     result.identity = inf;
                     return true;
                   })
                   .Default([](Operation *) { return false; });
  if (!known)
    return std::nullopt;
  return result;
}

/// How an op's operands are read in vectors of `width` elements along
/// its innermost loop: streamed (contiguous along it), or one scalar per
/// vector (not indexed by it).
struct VectorPlan {
  int64_t width = 1;
  unsigned innermost = 0;
  SmallVector<bool> streamed; // per operand
};

std::optional<VectorPlan> planVectors(linalg::LinalgOp op,
                                      ArrayRef<int64_t> ranges) {
  VectorPlan plan;
  plan.innermost = ranges.size() - 1;
  int64_t widest = 0;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    bool streamed = false;
    if (type) {
      AffineMap map = op.getMatchingIndexingMap(&operand);
      if (map.isFunctionOfDim(plan.innermost)) {
        // Contiguous: the last index is the innermost loop alone, which
        // no other index uses, over a unit-stride dimension.
        auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
        if (!last || last.getPosition() != plan.innermost)
          return std::nullopt;
        for (AffineExpr expr : map.getResults().drop_back())
          if (expr.isFunctionOfDim(plan.innermost))
            return std::nullopt;
        SmallVector<int64_t> strides;
        int64_t offset;
        Type element = type.getElementType();
        if (failed(type.getStridesAndOffset(strides, offset)) ||
            strides.back() != 1 || !element.isIntOrFloat() ||
            element.getIntOrFloatBitWidth() < 8)
          return std::nullopt;
        streamed = true;
        widest = std::max(widest, elementBytes(element));
      }
    }
    plan.streamed.push_back(streamed);
  }
  if (widest == 0)
    return std::nullopt;
  plan.width = 16 / widest;
  if (plan.width < 2 || ranges[plan.innermost] % plan.width != 0)
    return std::nullopt;
  // Static outer strides must keep every row's start aligned.
  for (auto [operand, streamed] :
       llvm::zip(op->getOpOperands(), plan.streamed)) {
    if (!streamed)
      continue;
    auto type = cast<MemRefType>(operand.get().getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    (void)type.getStridesAndOffset(strides, offset);
    for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
      if (!ShapedType::isDynamic(stride) && stride % plan.width != 0)
        return std::nullopt;
  }
  return plan;
}

/// Emits device code for linalg ops: loops over an op's iteration space
/// shared by `numThreads` threads, thread `threadId` taking every
/// numThreads-th point of the parallel dimensions (consecutive threads take
/// consecutive innermost elements, so accesses coalesce).
class DeviceEmitter {
public:
  DeviceEmitter(OpBuilder &builder, Location loc, IRMapping &mapping)
      : b(builder), loc(loc), mapping(mapping) {}

  LogicalResult emit(linalg::LinalgOp op, Value threadId, Value numThreads,
                     bool cooperative) {
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (ShapedType::isDynamicShape(ranges))
      return op->emitError()
             << "the cuda target needs static shapes; this op has a "
                "dynamic iteration space";
    SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
    par.clear();
    red.clear();
    for (auto [dim, iterator] : llvm::enumerate(iterators))
      (iterator == utils::IteratorType::parallel ? par : red).push_back(dim);
    for (OpOperand &init : op.getDpsInitsMutable()) {
      AffineMap map = op.getMatchingIndexingMap(&init);
      for (unsigned dim : red)
        if (map.isFunctionOfDim(dim))
          return op->emitError()
                 << "cannot generate a GPU kernel: an output is indexed by a "
                    "reduction dimension";
    }
    parExtents.clear();
    for (unsigned dim : par)
      parExtents.push_back(ranges[dim]);
    redExtents.clear();
    for (unsigned dim : red)
      redExtents.push_back(ranges[dim]);
    int64_t points = 1;
    for (int64_t e : parExtents)
      points *= e;
    if (points == 0 || llvm::is_contained(redExtents, 0))
      return success(); // nothing to compute (an empty reduction keeps the
                        // initial value)

    if (cooperative && trailingReductions(ranges.size()) &&
        reductionSize() >= 32)
      if (std::optional<Combiner> combiner = matchCombiner(op))
        return emitCooperative(op, *combiner, ranges, points, threadId,
                               numThreads),
               success();

    // Elementwise work over contiguous rows moves 16 bytes per access when
    // every buffer it streams is aligned for that (checked at run time, the
    // same for all threads); otherwise one element at a time.
    if (red.empty()) {
      if (std::optional<VectorPlan> plan = planVectors(op, ranges)) {
        Value aligned = alignmentCheck(op, *plan);
        auto branch = scf::IfOp::create(b, loc, aligned, /*withElse=*/true);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(&branch.getThenRegion().front());
        emitVectorized(op, *plan, points, threadId, numThreads);
        b.setInsertionPointToStart(&branch.getElseRegion().front());
        emitElementwise(op, ranges, points, threadId, numThreads);
        return success();
      }
    }
    emitElementwise(op, ranges, points, threadId, numThreads);
    return success();
  }

private:
  /// Whether every streamed buffer starts, and every row of it starts, on a
  /// boundary of its vector's size (an i1, uniform across the block).
  Value alignmentCheck(linalg::LinalgOp op, const VectorPlan &plan) {
    Value ok = arith::ConstantIntOp::create(b, loc, 1, 1);
    Value zero = index(0);
    for (auto [operand, streamed] :
         llvm::zip(op->getOpOperands(), plan.streamed)) {
      if (!streamed)
        continue;
      Value buffer = mapping.lookupOrDefault(operand.get());
      auto type = cast<MemRefType>(buffer.getType());
      int64_t bytes = elementBytes(type.getElementType());
      auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
      Value base = memref::ExtractAlignedPointerAsIndexOp::create(
          b, loc, metadata.getBaseBuffer());
      Value start = arith::AddIOp::create(
          b, loc, base,
          arith::MulIOp::create(b, loc, metadata.getOffset(), index(bytes)));
      auto divisible = [&](Value value, int64_t by) {
        Value rest = arith::RemUIOp::create(b, loc, value, index(by));
        return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rest,
                                     zero);
      };
      ok = arith::AndIOp::create(b, loc, ok,
                                 divisible(start, plan.width * bytes));
      for (Value stride : metadata.getStrides().drop_back())
        ok = arith::AndIOp::create(b, loc, ok, divisible(stride, plan.width));
    }
    return ok;
  }

  /// The op a vector of `width` innermost elements at a time: vector loads
  /// and stores, the payload once per lane.
  void emitVectorized(linalg::LinalgOp op, const VectorPlan &plan,
                      int64_t points, Value threadId, Value numThreads) {
    SmallVector<int64_t> extents(parExtents);
    extents.back() /= plan.width;
    auto loop = scf::ForOp::create(b, loc, threadId, index(points / plan.width),
                                   numThreads);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> ivs(par.size());
    for (auto [dim, iv] :
         llvm::zip(par, delinearize(loop.getInductionVar(), extents)))
      ivs[dim] = iv;
    ivs[plan.innermost] =
        arith::MulIOp::create(b, loc, ivs[plan.innermost], index(plan.width));

    // Operands: a vector each for the streamed ones, a scalar otherwise.
    unsigned numInputs = op.getNumDpsInputs();
    SmallVector<Value> loaded;
    SmallVector<SmallVector<Value>> at;
    for (auto [operand, streamed] :
         llvm::zip(op->getOpOperands(), plan.streamed)) {
      Value value = mapping.lookupOrDefault(operand.get());
      at.emplace_back();
      if (!isa<MemRefType>(value.getType())) {
        loaded.push_back(value);
        continue;
      }
      at.back() = apply(op.getMatchingIndexingMap(&operand), ivs);
      bool isInit = operand.getOperandNumber() >= numInputs;
      if (isInit && !op.payloadUsesValueFromOperand(&operand)) {
        loaded.push_back(Value());
        continue;
      }
      loaded.push_back(load(value, at.back(), streamed ? plan.width : 1));
    }

    // The payload per lane.
    SmallVector<SmallVector<Value>> lanes(op.getNumDpsInits());
    for (int64_t lane = 0; lane < plan.width; ++lane) {
      SmallVector<Value> laneIvs = laneOf(ivs, plan.innermost, lane);
      SmallVector<Value> args;
      for (Value value : loaded)
        args.push_back(element(value, lane));
      IRMapping local = inlinePayload(op, laneIvs, args);
      for (auto [index, value] : llvm::enumerate(
               op->getRegion(0).front().getTerminator()->getOperands()))
        lanes[index].push_back(local.lookupOrDefault(value));
    }
    for (auto [index, init] : llvm::enumerate(op.getDpsInitsMutable())) {
      Value buffer = mapping.lookupOrDefault(init.get());
      auto type = cast<MemRefType>(buffer.getType());
      auto vectorType = VectorType::get({plan.width}, type.getElementType());
      Value result =
          vector::FromElementsOp::create(b, loc, vectorType, lanes[index]);
      vector::StoreOp::create(b, loc, result, buffer, at[numInputs + index],
                              /*nontemporal=*/false,
                              vectorAlignment(type, plan.width));
    }
  }

  /// A whole vector's alignment in `buffer`'s elements.
  static llvm::MaybeAlign vectorAlignment(MemRefType buffer, int64_t width) {
    return llvm::MaybeAlign(width * elementBytes(buffer.getElementType()));
  }

  /// `width` elements of `buffer` from `at` on, as an aligned vector, or the
  /// one element at `at` when `width` is 1.
  Value load(Value buffer, ArrayRef<Value> at, int64_t width) {
    auto type = cast<MemRefType>(buffer.getType());
    if (width == 1)
      return memref::LoadOp::create(b, loc, buffer, at);
    return vector::LoadOp::create(
        b, loc, VectorType::get({width}, type.getElementType()), buffer, at,
        /*nontemporal=*/false, vectorAlignment(type, width));
  }

  /// Element `lane` of a vector load's value; a scalar (or null) as it is.
  Value element(Value value, int64_t lane) {
    if (!value || !isa<VectorType>(value.getType()))
      return value;
    return vector::ExtractOp::create(b, loc, value, lane);
  }

  /// `ivs` with `lane` added to loop `dim`.
  SmallVector<Value> laneOf(ArrayRef<Value> ivs, unsigned dim, int64_t lane) {
    SmallVector<Value> result(ivs);
    if (lane)
      result[dim] = arith::AddIOp::create(b, loc, ivs[dim], index(lane));
    return result;
  }

  /// One output element per thread and iteration, reductions sequential.
  void emitElementwise(linalg::LinalgOp op, ArrayRef<int64_t> ranges,
                       int64_t points, Value threadId, Value numThreads) {
    auto loop = scf::ForOp::create(b, loc, threadId, index(points), numThreads);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    SmallVector<Value> ivs(ranges.size());
    SmallVector<Value> parIvs = delinearize(loop.getInductionVar(), parExtents);
    for (auto [dim, iv] : llvm::zip(par, parIvs))
      ivs[dim] = iv;

    SmallVector<Value> outBuffers;
    SmallVector<Value> initial;
    SmallVector<SmallVector<Value>> indices;
    for (OpOperand &init : op.getDpsInitsMutable()) {
      Value buffer = mapping.lookupOrDefault(init.get());
      SmallVector<Value> at = apply(op.getMatchingIndexingMap(&init), ivs);
      outBuffers.push_back(buffer);
      indices.push_back(at);
      bool read = op.payloadUsesValueFromOperand(&init) || !red.empty();
      initial.push_back(read ? memref::LoadOp::create(b, loc, buffer, at)
                             : Value());
    }
    SmallVector<Value> results = reduceNest(op, ivs, 0, initial);
    for (auto [value, buffer, at] : llvm::zip(results, outBuffers, indices))
      memref::StoreOp::create(b, loc, value, buffer, at);
  }

  Value index(int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  SmallVector<Value> delinearize(Value linear, ArrayRef<int64_t> extents) {
    SmallVector<Value> result(extents.size());
    for (size_t i = extents.size(); i-- > 0;) {
      if (i == 0) {
        result[i] = linear;
        break;
      }
      Value extent = index(extents[i]);
      result[i] = arith::RemUIOp::create(b, loc, linear, extent);
      linear = arith::DivUIOp::create(b, loc, linear, extent);
    }
    return result;
  }

  SmallVector<Value> apply(AffineMap map, ArrayRef<Value> ivs) {
    std::optional<SmallVector<Value, 8>> values =
        affine::expandAffineMap(b, loc, map, ivs);
    assert(values && "projected indexing maps always expand");
    return SmallVector<Value>(values->begin(), values->end());
  }

  /// The block arguments of `op`'s payload at point `ivs`: loaded inputs
  /// (scalars as they are), then `outputs`.
  SmallVector<Value> payloadArgs(linalg::LinalgOp op, ArrayRef<Value> ivs,
                                 ValueRange outputs) {
    SmallVector<Value> args;
    for (OpOperand *input : op.getDpsInputOperands()) {
      Value value = mapping.lookupOrDefault(input->get());
      if (isa<MemRefType>(value.getType()))
        value = memref::LoadOp::create(
            b, loc, value, apply(op.getMatchingIndexingMap(input), ivs));
      args.push_back(value);
    }
    llvm::append_range(args, outputs);
    return args;
  }

  /// Clones `op`'s payload (except `skip`) at point `ivs`; returns the
  /// mapping of payload values.
  IRMapping inlinePayload(linalg::LinalgOp op, ArrayRef<Value> ivs,
                          ArrayRef<Value> args, Operation *skip = nullptr) {
    Block &body = op->getRegion(0).front();
    IRMapping local = mapping;
    for (auto [arg, value] : llvm::zip(body.getArguments(), args))
      if (value)
        local.map(arg, value);
    for (Operation &inner : body.without_terminator()) {
      if (&inner == skip)
        continue;
      if (auto indexOp = dyn_cast<linalg::IndexOp>(inner)) {
        local.map(indexOp.getResult(), ivs[indexOp.getDim()]);
        continue;
      }
      b.clone(inner, local);
    }
    return local;
  }

  /// The reduction loops from dimension red[level] inwards, carrying the
  /// outputs' values; returns their final values.
  SmallVector<Value> reduceNest(linalg::LinalgOp op, SmallVector<Value> &ivs,
                                unsigned level, ValueRange carried) {
    if (level == red.size()) {
      IRMapping local = inlinePayload(op, ivs, payloadArgs(op, ivs, carried));
      SmallVector<Value> yielded;
      for (Value value :
           op->getRegion(0).front().getTerminator()->getOperands())
        yielded.push_back(local.lookupOrDefault(value));
      return yielded;
    }
    auto loop = scf::ForOp::create(b, loc, index(0), index(redExtents[level]),
                                   index(1), carried);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    ivs[red[level]] = loop.getInductionVar();
    SmallVector<Value> inner =
        reduceNest(op, ivs, level + 1, loop.getRegionIterArgs());
    scf::YieldOp::create(b, loc, inner);
    return SmallVector<Value>(loop.getResults());
  }

  /// One output element after another, each reduced by all threads: a
  /// strided partial per thread, then one block-wide combine.
  void emitCooperative(linalg::LinalgOp op, const Combiner &combiner,
                       ArrayRef<int64_t> ranges, int64_t points, Value threadId,
                       Value numThreads) {
    // A row's elements stream in 16-byte vectors when the reduction runs
    // along the contiguous dimension and the buffers are aligned.
    std::optional<VectorPlan> plan = planVectors(op, ranges);
    Value aligned = plan ? alignmentCheck(op, *plan) : Value();
    auto rows = scf::ForOp::create(b, loc, index(0), index(points), index(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(rows.getBody());
    SmallVector<Value> ivs(par.size() + red.size());
    for (auto [dim, iv] :
         llvm::zip(par, delinearize(rows.getInductionVar(), parExtents)))
      ivs[dim] = iv;
    Type f32 = b.getF32Type();
    Value identity = arith::ConstantOp::create(
        b, loc, b.getFloatAttr(f32, combiner.identity));
    Value partial;
    if (plan) {
      auto branch = scf::IfOp::create(b, loc, TypeRange{f32}, aligned,
                                      /*withElseRegion=*/true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&branch.getThenRegion().front());
      scf::YieldOp::create(b, loc,
                           vectorSlice(op, combiner, *plan, ivs, identity,
                                       threadId, numThreads));
      b.setInsertionPointToStart(&branch.getElseRegion().front());
      scf::YieldOp::create(
          b, loc,
          scalarSlice(op, combiner, ivs, identity, threadId, numThreads));
      partial = branch.getResult(0);
    } else {
      partial = scalarSlice(op, combiner, ivs, identity, threadId, numThreads);
    }
    Value total = gpu::AllReduceOp::create(b, loc, partial,
                                           gpu::AllReduceOperationAttr::get(
                                               b.getContext(), combiner.kind),
                                           /*uniform=*/true)
                      .getResult();
    Value first = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                        threadId, index(0));
    auto ifFirst = scf::IfOp::create(b, loc, first, /*withElseRegion=*/false);
    {
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(&ifFirst.getThenRegion().front());
      OpOperand &init = op.getDpsInitsMutable()[0];
      Value buffer = mapping.lookupOrDefault(init.get());
      SmallVector<Value> at = apply(op.getMatchingIndexingMap(&init), ivs);
      Value old = memref::LoadOp::create(b, loc, buffer, at);
      memref::StoreOp::create(b, loc, combine(combiner, old, total), buffer,
                              at);
    }
    // The next row's reduction reuses gpu.all_reduce's shared buffer, which
    // the threads may still be reading this row's total from.
    gpu::BarrierOp::create(b, loc);
  }

  /// Whether the reduction loops are the innermost ones, in order (a row,
  /// or a whole tensor), so that one linear index walks them row-major.
  bool trailingReductions(size_t numLoops) const {
    if (red.empty())
      return false;
    for (auto [i, dim] : llvm::enumerate(red))
      if (dim != numLoops - red.size() + i)
        return false;
    return true;
  }

  int64_t reductionSize() const {
    int64_t size = 1;
    for (int64_t extent : redExtents)
      size *= extent;
    return size;
  }

  /// Sets the reduction loops' indices from one linear index over them.
  void setReductionIvs(SmallVector<Value> &ivs, Value linear) {
    for (auto [dim, iv] : llvm::zip(red, delinearize(linear, redExtents)))
      ivs[dim] = iv;
  }

  /// This thread's partial of the row at `ivs`: every numThreads-th
  /// element, one at a time.
  Value scalarSlice(linalg::LinalgOp op, const Combiner &combiner,
                    SmallVector<Value> &ivs, Value identity, Value threadId,
                    Value numThreads) {
    auto slice = scf::ForOp::create(b, loc, threadId, index(reductionSize()),
                                    numThreads, ValueRange{identity});
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(slice.getBody());
    setReductionIvs(ivs, slice.getInductionVar());
    SmallVector<Value> args = payloadArgs(op, ivs, ValueRange{Value()});
    IRMapping local = inlinePayload(op, ivs, args, combiner.op);
    Value partial = combine(combiner, slice.getRegionIterArgs()[0],
                            local.lookupOrDefault(combiner.other));
    scf::YieldOp::create(b, loc, partial);
    return slice.getResult(0);
  }

  /// The same in vectors: thread t takes elements [t * w, t * w + w), then
  /// the next numThreads * w, with one vector load per streamed input.
  Value vectorSlice(linalg::LinalgOp op, const Combiner &combiner,
                    const VectorPlan &plan, SmallVector<Value> &ivs,
                    Value identity, Value threadId, Value numThreads) {
    Value width = index(plan.width);
    auto slice = scf::ForOp::create(
        b, loc, arith::MulIOp::create(b, loc, threadId, width),
        index(reductionSize()),
        arith::MulIOp::create(b, loc, numThreads, width), ValueRange{identity});
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(slice.getBody());
    // A vector starts at a multiple of the width, which divides the
    // innermost extent: it never crosses into the next row.
    setReductionIvs(ivs, slice.getInductionVar());
    SmallVector<Value> loaded;
    for (auto [input, streamed] :
         llvm::zip(op.getDpsInputOperands(), plan.streamed)) {
      Value value = mapping.lookupOrDefault(input->get());
      if (!isa<MemRefType>(value.getType())) {
        loaded.push_back(value);
        continue;
      }
      loaded.push_back(load(value, apply(op.getMatchingIndexingMap(input), ivs),
                            streamed ? plan.width : 1));
    }
    Value accumulator = slice.getRegionIterArgs()[0];
    for (int64_t lane = 0; lane < plan.width; ++lane) {
      SmallVector<Value> laneIvs = laneOf(ivs, red.back(), lane);
      SmallVector<Value> args;
      for (Value value : loaded)
        args.push_back(element(value, lane));
      args.push_back(Value()); // the output: the combiner alone reads it
      IRMapping local = inlinePayload(op, laneIvs, args, combiner.op);
      accumulator =
          combine(combiner, accumulator, local.lookupOrDefault(combiner.other));
    }
    scf::YieldOp::create(b, loc, accumulator);
    return slice.getResult(0);
  }

  Value combine(const Combiner &combiner, Value lhs, Value rhs) {
    OperationState state(loc, combiner.op->getName());
    state.addOperands({lhs, rhs});
    state.addTypes(lhs.getType());
    state.addAttributes(combiner.op->getAttrs());
    return b.create(state)->getResult(0);
  }

  OpBuilder &b;
  Location loc;
  IRMapping &mapping;
  SmallVector<unsigned> par, red;
  SmallVector<int64_t> parExtents, redExtents;
};

} // namespace

int64_t threadLoopTrips(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (ShapedType::isDynamicShape(ranges))
    return 0;
  int64_t points = 1;
  bool reduces = false;
  for (auto [range, iterator] : llvm::zip(ranges, op.getIteratorTypesArray())) {
    if (iterator == utils::IteratorType::parallel)
      points *= range;
    else
      reduces = true;
  }
  // Elementwise work takes a vector per iteration when it can (the
  // element-at-a-time fallback strides over the same grid).
  if (!reduces && points > 0)
    if (std::optional<VectorPlan> plan = planVectors(op, ranges))
      return points / plan->width;
  return points;
}

bool hasBlockCombiner(linalg::LinalgOp op) {
  return matchCombiner(op).has_value();
}

LogicalResult emitDeviceLoops(OpBuilder &b, Location loc, IRMapping &mapping,
                              linalg::LinalgOp op, Value threadId,
                              Value numThreads, bool cooperative) {
  DeviceEmitter emitter(b, loc, mapping);
  return emitter.emit(op, threadId, numThreads, cooperative);
}

} // namespace braid::codegen
