//===- MapToGPU.cpp - Compute of a bufferized program onto a GPU -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// After bufferization and the runtime calls for transfers, a program is host
// code over buffers: linalg ops, fused kernels (scf.forall {braid.kernel}),
// copies, allocations. This pass decides where each piece runs on the cuda
// target: contractions on cuBLASLt through the runtime, fused kernels as one
// block per row tile, everything else as grid-stride kernels; buffers that
// device work touches are allocated on the device.
//
// Every device operation of a rank is ordered on its compute stream by the
// runtime (gpu.launch and gpu.alloc without async tokens lower to
// mgpuStreamCreate/mgpuStreamSynchronize, which the Braid runtime maps to
// that stream and a no-op), so host code only enqueues.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/TypeSwitch.h"

#include <optional>

namespace braid {
#define GEN_PASS_DEF_MAPTOGPU
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

constexpr int64_t kMaxGridBlocks = int64_t(1) << 20;
constexpr int64_t kSharedAlignment = 16;

/// Runtime codes of element types (braid_rt_dtype).
std::optional<int64_t> runtimeDType(Type type) {
  if (type.isF32())
    return 0;
  if (type.isF16())
    return 2;
  if (type.isBF16())
    return 3;
  return std::nullopt;
}

int64_t elementBytes(Type type) {
  return (static_cast<int64_t>(type.getIntOrFloatBitWidth()) + 7) / 8;
}

/// Whether `op` sits in device code already.
bool inDeviceCode(Operation *op) {
  return op->getParentOfType<gpu::LaunchOp>() != nullptr;
}

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
      auto type = dyn_cast<MemRefType>(value.getType());
      if (!type) {
        loaded.push_back(value);
        continue;
      }
      at.back() = apply(op.getMatchingIndexingMap(&operand), ivs);
      bool isInit = operand.getOperandNumber() >= numInputs;
      if (isInit && !op.payloadUsesValueFromOperand(&operand)) {
        loaded.push_back(Value());
        continue;
      }
      if (!streamed) {
        loaded.push_back(memref::LoadOp::create(b, loc, value, at.back()));
        continue;
      }
      int64_t bytes = elementBytes(type.getElementType());
      auto vectorType = VectorType::get({plan.width}, type.getElementType());
      loaded.push_back(vector::LoadOp::create(
          b, loc, vectorType, value, at.back(), /*nontemporal=*/false,
          llvm::MaybeAlign(plan.width * bytes)));
    }

    // The payload per lane.
    SmallVector<SmallVector<Value>> lanes(op.getNumDpsInits());
    Value first = ivs[plan.innermost];
    for (int64_t lane = 0; lane < plan.width; ++lane) {
      SmallVector<Value> laneIvs(ivs);
      laneIvs[plan.innermost] =
          lane ? Value(arith::AddIOp::create(b, loc, first, index(lane)))
               : first;
      SmallVector<Value> args;
      for (auto [value, streamed] : llvm::zip(loaded, plan.streamed))
        args.push_back(
            value && streamed && isa<VectorType>(value.getType())
                ? Value(vector::ExtractOp::create(b, loc, value, lane))
                : value);
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
      vector::StoreOp::create(
          b, loc, result, buffer, at[numInputs + index], /*nontemporal=*/false,
          llvm::MaybeAlign(plan.width * elementBytes(type.getElementType())));
    }
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
      auto type = dyn_cast<MemRefType>(value.getType());
      if (!type) {
        loaded.push_back(value);
        continue;
      }
      SmallVector<Value> at = apply(op.getMatchingIndexingMap(input), ivs);
      if (!streamed) {
        loaded.push_back(memref::LoadOp::create(b, loc, value, at));
        continue;
      }
      auto vectorType = VectorType::get({plan.width}, type.getElementType());
      loaded.push_back(vector::LoadOp::create(
          b, loc, vectorType, value, at, /*nontemporal=*/false,
          llvm::MaybeAlign(plan.width * elementBytes(type.getElementType()))));
    }
    Value accumulator = slice.getRegionIterArgs()[0];
    Value first = ivs[red.back()];
    for (int64_t lane = 0; lane < plan.width; ++lane) {
      SmallVector<Value> laneIvs(ivs);
      laneIvs[red.back()] =
          lane ? Value(arith::AddIOp::create(b, loc, first, index(lane)))
               : first;
      SmallVector<Value> args;
      for (Value value : loaded)
        args.push_back(
            isa<VectorType>(value.getType())
                ? Value(vector::ExtractOp::create(b, loc, value, lane))
                : value);
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

/// The contraction `op` as braid_rt_gemm arguments, or why it is not one.
struct GemmMatch {
  unsigned batchDim = ~0u, mDim = 0, nDim = 0, kDim = 0;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

/// Whether `op`'s payload is exactly acc + cast(a) * cast(b): the
/// contraction interface also lets other single-operand ops through (an
/// exp on an operand, a negation of the sum), which cuBLASLt does not do.
bool isPlainMultiplyAdd(linalg::LinalgOp op) {
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
std::optional<double> evaluatePayload(linalg::GenericOp op,
                                      ArrayRef<std::optional<double>> args) {
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

/// cuBLASLt epilogue codes (braid_rt_gemm): activation only, and with bias.
enum class Activation { None, Gelu, Relu };

double activate(Activation activation, double x) {
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

/// The epilogue a GEMM's result feeds: `generic` reads the GEMM's output
/// `accumulator` (identity map), optionally a bias along the columns, and
/// writes act(accumulator + bias) to its own 2-D output. The activation is
/// recognized by evaluating the payload, so any spelling of GELU (tanh
/// form), ReLU or none matches, and an erf GELU does not.
struct Epilogue {
  linalg::GenericOp op;
  Value bias; // null without
  Activation activation = Activation::None;
  int64_t code() const {
    int64_t base = activation == Activation::None   ? 0
                   : activation == Activation::Gelu ? 1
                                                    : 2;
    if (bias)
      return base + 1;               // 1 bias, 2 bias + GELU, 3 bias + ReLU
    return base == 0 ? 0 : base + 3; // 4 GELU, 5 ReLU
  }
};

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

struct MapToGPUPass : public braid::impl::MapToGPUBase<MapToGPUPass> {
  using Base::Base;

  /// Fills and epilogues folded into the products next to them (erased;
  /// compared by address only).
  SmallVector<Operation *> erasedOps;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Block reductions work on whole warps; CUDA allows 1024 threads.
    if (blockSize < 32 || blockSize > 1024 || blockSize % 32 != 0) {
      module.emitError() << "braid-map-to-gpu: block-size must be a multiple "
                            "of 32 from 32 to 1024, got "
                         << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    if (sharedMemoryLimit < 0) {
      module.emitError() << "braid-map-to-gpu: shared-memory-limit must not "
                            "be negative";
      return signalPassFailure();
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    for (auto function : module.getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      if (failed(mapFunction(function)))
        return signalPassFailure();
    }
  }

private:
  LogicalResult mapFunction(func::FuncOp function) {
    OpBuilder b(&getContext());
    // Copies are linalg copies, so that one emitter covers them.
    SmallVector<memref::CopyOp> copies;
    function.walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    for (memref::CopyOp copy : copies) {
      if (copy.getSource() != copy.getTarget()) {
        b.setInsertionPoint(copy);
        linalg::CopyOp::create(b, copy.getLoc(), copy.getSource(),
                               copy.getTarget());
      }
      copy.erase();
    }

    SmallVector<scf::ForallOp> kernels;
    function.walk([&](scf::ForallOp forall) {
      if (forall->hasAttr("braid.kernel"))
        kernels.push_back(forall);
    });
    for (scf::ForallOp kernel : kernels)
      if (failed(mapKernel(kernel)))
        return failure();

    // Contractions first: one may absorb the zero fill before it.
    SmallVector<linalg::LinalgOp> contractions, others;
    function.walk([&](linalg::LinalgOp op) {
      if (inDeviceCode(op))
        return;
      (linalg::isaContractionOpInterface(op) ? contractions : others)
          .push_back(op);
    });
    for (linalg::LinalgOp op : contractions)
      if (failed(mapHostOp(op)))
        return failure();
    others.erase(llvm::remove_if(others,
                                 [&](linalg::LinalgOp op) {
                                   return llvm::is_contained(erasedOps,
                                                             op.getOperation());
                                 }),
                 others.end());
    erasedOps.clear();
    for (linalg::LinalgOp op : others)
      if (failed(mapHostOp(op)))
        return failure();

    return placeBuffers(function);
  }

  Value index(OpBuilder &b, Location loc, int64_t value) {
    return arith::ConstantIndexOp::create(b, loc, value);
  }

  /// A fused kernel: one block per iteration.
  LogicalResult mapKernel(scf::ForallOp kernel) {
    Location loc = kernel.getLoc();
    if (!kernel.getOutputs().empty())
      return kernel.emitError() << "a fused kernel with shared outputs "
                                   "cannot be mapped to the GPU";
    ArrayRef<int64_t> lbs = kernel.getStaticLowerBound();
    ArrayRef<int64_t> ubs = kernel.getStaticUpperBound();
    ArrayRef<int64_t> steps = kernel.getStaticStep();
    if (ShapedType::isDynamicShape(lbs) || ShapedType::isDynamicShape(ubs) ||
        ShapedType::isDynamicShape(steps))
      return kernel.emitError()
             << "the cuda target needs fused kernels with static bounds";
    SmallVector<int64_t> trips;
    int64_t blocks = 1;
    for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps)) {
      trips.push_back(ub > lb ? (ub - lb + step - 1) / step : 0);
      blocks *= trips.back();
    }
    if (blocks == 0) {
      kernel.erase();
      return success();
    }
    if (blocks > std::numeric_limits<int32_t>::max())
      return kernel.emitError() << "a fused kernel of " << blocks
                                << " tiles exceeds the GPU's grid";

    // Scratch: every alloca of the tile, carved out of shared memory.
    Block *body = kernel.getBody();
    int64_t sharedBytes = 0;
    SmallVector<std::pair<memref::AllocaOp, int64_t>> scratch;
    for (Operation &op : body->without_terminator()) {
      auto alloca = dyn_cast<memref::AllocaOp>(op);
      if (!alloca)
        continue;
      MemRefType type = alloca.getType();
      if (!type.hasStaticShape() || !type.getLayout().isIdentity() ||
          !type.getElementType().isIntOrFloat())
        return alloca.emitError() << "fused-kernel scratch must be a static, "
                                     "identity-layout buffer of integers or "
                                     "floats";
      scratch.push_back({alloca, sharedBytes});
      int64_t bytes =
          type.getNumElements() * elementBytes(type.getElementType());
      sharedBytes +=
          (bytes + kSharedAlignment - 1) / kSharedAlignment * kSharedAlignment;
    }
    // Each block reduction adds a small static buffer of its own (a word
    // per warp); leave room for those.
    int64_t reductionBytes = 0;
    body->walk([&](linalg::LinalgOp op) {
      if (op.getNumReductionLoops() > 0)
        reductionBytes += 32 * 4;
    });
    if (sharedBytes + reductionBytes > sharedMemoryLimit)
      return kernel.emitError()
             << "this fused kernel needs " << sharedBytes + reductionBytes
             << " bytes of shared memory per tile, more than the "
             << static_cast<int64_t>(sharedMemoryLimit)
             << " the target allows; fuse with a smaller row tile";

    OpBuilder b(kernel);
    Value one = index(b, loc, 1);
    Value sharedSize = sharedBytes ? Value(arith::ConstantIntOp::create(
                                         b, loc, b.getI32Type(), sharedBytes))
                                   : Value();
    auto launch =
        gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                              index(b, loc, blockSize), one, one, sharedSize);
    Block &launchBody = launch.getBody().front();
    b.setInsertionPointToStart(&launchBody);
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);

    IRMapping mapping;
    // Iteration of this block: the block id delinearized over the trips.
    Value linear = launch.getBlockIds().x;
    SmallVector<Value> ivs(trips.size());
    for (size_t i = trips.size(); i-- > 0;) {
      Value position = linear;
      if (i > 0) {
        Value trip = index(b, loc, trips[i]);
        position = arith::RemUIOp::create(b, loc, linear, trip);
        linear = arith::DivUIOp::create(b, loc, linear, trip);
      }
      Value scaled =
          arith::MulIOp::create(b, loc, position, index(b, loc, steps[i]));
      ivs[i] = arith::AddIOp::create(b, loc, scaled, index(b, loc, lbs[i]));
    }
    for (auto [iv, value] : llvm::zip(kernel.getInductionVars(), ivs))
      mapping.map(iv, value);

    auto workgroup =
        gpu::AddressSpaceAttr::get(&getContext(), gpu::AddressSpace::Workgroup);
    if (sharedBytes) {
      auto bytesType = MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                                       MemRefLayoutAttrInterface(), workgroup);
      Value base = gpu::DynamicSharedMemoryOp::create(b, loc, bytesType);
      for (auto [alloca, offset] : scratch) {
        MemRefType type = alloca.getType();
        auto shared = MemRefType::get(type.getShape(), type.getElementType(),
                                      MemRefLayoutAttrInterface(), workgroup);
        Value view = memref::ViewOp::create(
            b, loc, shared, base, index(b, loc, offset), ValueRange{});
        mapping.map(alloca.getResult(), view);
      }
    }

    Value threadId = launch.getThreadIds().x;
    Value numThreads = launch.getBlockSize().x;
    DeviceEmitter emitter(b, loc, mapping);
    for (Operation &op : body->without_terminator()) {
      if (isa<memref::AllocaOp>(op))
        continue;
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
        if (!linalgOp.hasPureBufferSemantics())
          return op.emitError() << "expected a bufferized op in a fused kernel";
        if (failed(emitter.emit(linalgOp, threadId, numThreads,
                                /*cooperative=*/true)))
          return failure();
        // The tile's ops hand data to each other through shared or global
        // memory, written and read by different threads.
        gpu::BarrierOp::create(b, loc);
        continue;
      }
      if (isa<ViewLikeOpInterface>(op) || isMemoryEffectFree(&op)) {
        if (op.getNumRegions() != 0)
          return op.emitError() << "cannot be part of a GPU kernel";
        Operation *clone = b.clone(op, mapping);
        // Views of scratch live in shared memory too.
        if (auto view = dyn_cast<ViewLikeOpInterface>(clone)) {
          auto source = dyn_cast<MemRefType>(view.getViewSource().getType());
          for (Value result : clone->getResults()) {
            auto type = dyn_cast<MemRefType>(result.getType());
            if (source && type &&
                type.getMemorySpace() != source.getMemorySpace())
              result.setType(
                  MemRefType::get(type.getShape(), type.getElementType(),
                                  type.getLayout(), source.getMemorySpace()));
          }
        }
        continue;
      }
      return op.emitError() << "cannot be part of a GPU kernel on the cuda "
                               "target";
    }
    ++numKernels;
    kernel.erase();
    return success();
  }

  /// A linalg op in host code: cuBLASLt for contractions that qualify, a
  /// grid-stride kernel otherwise.
  LogicalResult mapHostOp(linalg::LinalgOp op) {
    Location loc = op.getLoc();
    if (!op.hasPureBufferSemantics())
      return op->emitError() << "expected a bufferized op";
    bool contraction = linalg::isaContractionOpInterface(op);
    std::string why;
    if (contraction) {
      FailureOr<GemmMatch> match = matchGemm(op, why);
      if (succeeded(match)) {
        // A zero fill right before only makes the product start from zero:
        // cuBLASLt does that with beta = 0, without the extra pass over C.
        // (With k = 0 there is no product to start from zero: keep it.)
        linalg::FillOp fill = match->k > 0 ? zeroFillBefore(op) : nullptr;
        // Then the elementwise work on the product can be cuBLASLt's
        // epilogue, written straight to its own output.
        std::optional<Epilogue> epilogue;
        if (fill && match->batch == 1)
          epilogue = epilogueAfter(op);
        emitGemm(op, *match, /*accumulate=*/!fill,
                 epilogue ? &*epilogue : nullptr);
        if (fill) {
          erasedOps.push_back(fill);
          fill->erase();
        }
        auto remark = op->emitRemark();
        remark << "runs on cuBLASLt: " << match->m << "x" << match->n << "x"
               << match->k
               << (match->batch > 1
                       ? " in " + std::to_string(match->batch) + " batches"
                       : std::string());
        if (epilogue) {
          static const char *names[] = {"cast",        "bias", "bias + GELU",
                                        "bias + ReLU", "GELU", "ReLU"};
          remark << ", with the " << names[epilogue->code()]
                 << " after it as its epilogue, writing "
                 << getElementTypeOrSelf(epilogue->op.getDpsInits()[0]);
          erasedOps.push_back(epilogue->op);
          epilogue->op->erase();
        }
        ++numGemms;
        op->erase();
        return success();
      }
    }
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (ShapedType::isDynamicShape(ranges))
      return op->emitError()
             << "the cuda target needs static shapes; this op has a dynamic "
                "iteration space";
    int64_t points = 1;
    for (auto [dim, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::parallel)
        points *= ranges[dim];
    if (contraction)
      op->emitRemark() << "runs as a generated kernel, not on cuBLASLt: "
                       << why;
    if (points == 0) {
      op->erase();
      return success();
    }
    // A reduction to a few values over many elements (a tensor's largest
    // magnitude, say) is one block of 1024 threads reducing together;
    // one thread per output would leave the GPU idle.
    int64_t reduced = 1;
    for (auto [dim, iterator] : llvm::enumerate(op.getIteratorTypesArray()))
      if (iterator == utils::IteratorType::reduction)
        reduced *= ranges[dim];
    bool oneBlock = points <= 64 && reduced >= 8 * blockSize &&
                    matchCombiner(op).has_value();
    OpBuilder b(op);
    Value one = index(b, loc, 1);
    int64_t blocks = oneBlock ? 1
                              : std::min((points + blockSize - 1) / blockSize,
                                         kMaxGridBlocks);
    int64_t threads = oneBlock ? 1024 : static_cast<int64_t>(blockSize);
    auto launch =
        gpu::LaunchOp::create(b, loc, index(b, loc, blocks), one, one,
                              index(b, loc, threads), one, one, Value());
    b.setInsertionPointToStart(&launch.getBody().front());
    gpu::TerminatorOp terminator = gpu::TerminatorOp::create(b, loc);
    b.setInsertionPoint(terminator);
    Value blockStart = arith::MulIOp::create(b, loc, launch.getBlockIds().x,
                                             launch.getBlockSize().x);
    Value threadId =
        arith::AddIOp::create(b, loc, blockStart, launch.getThreadIds().x);
    Value numThreads = arith::MulIOp::create(b, loc, launch.getGridSize().x,
                                             launch.getBlockSize().x);
    IRMapping mapping;
    DeviceEmitter emitter(b, loc, mapping);
    if (failed(emitter.emit(op, threadId, numThreads, oneBlock)))
      return failure();
    ++numKernels;
    op->erase();
    return success();
  }

  /// The fill of `op`'s output with zeros that comes right before it, with
  /// nothing between that could touch the buffer (pure ops, allocations,
  /// grid queries).
  static linalg::FillOp zeroFillBefore(linalg::LinalgOp op) {
    Value output = op.getDpsInitOperand(0)->get();
    for (Operation *previous = op->getPrevNode(); previous;
         previous = previous->getPrevNode()) {
      if (auto fill = dyn_cast<linalg::FillOp>(previous)) {
        bool zero = matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
        return zero && fill.getOutputs()[0] == output ? fill : linalg::FillOp();
      }
      if (auto call = dyn_cast<func::CallOp>(previous)) {
        if (call.getCallee() == "braid_rt_coord" ||
            call.getCallee() == "braid_rt_group")
          continue;
        return {};
      }
      if (!isMemoryEffectFree(previous) &&
          !isa<memref::AllocOp, memref::AllocaOp>(previous))
        return {};
    }
    return {};
  }

  /// The epilogue right after the product `op` (pure ops and allocations
  /// between), when the product's buffer has no other reader, so that
  /// cuBLASLt may write the epilogue's output instead.
  static std::optional<Epilogue> epilogueAfter(linalg::LinalgOp op) {
    Value accumulator = op.getDpsInitOperand(0)->get();
    if (!accumulator.getDefiningOp<memref::AllocOp>())
      return std::nullopt;
    linalg::GenericOp reader;
    for (Operation *user : accumulator.getUsers()) {
      if (user == op.getOperation() ||
          isa<linalg::FillOp, memref::DeallocOp,
              memref::ExtractAlignedPointerAsIndexOp>(user))
        continue;
      auto generic = dyn_cast<linalg::GenericOp>(user);
      if (!generic || reader)
        return std::nullopt;
      reader = generic;
    }
    for (Operation *next = op->getNextNode(); next;
         next = next->getNextNode()) {
      if (next == reader.getOperation()) {
        std::optional<Epilogue> epilogue = matchEpilogue(reader, accumulator);
        if (!epilogue)
          return std::nullopt;
        // cuBLASLt writes a 2-D output with unit inner stride, in f32 or
        // the inputs' type.
        auto out = dyn_cast<MemRefType>(reader.getDpsInits()[0].getType());
        Type inputType = getElementTypeOrSelf(op.getDpsInputOperand(0)->get());
        SmallVector<int64_t> strides;
        int64_t offset;
        if (!out || out.getRank() != 2 ||
            failed(out.getStridesAndOffset(strides, offset)) ||
            strides.back() != 1 ||
            !(out.getElementType().isF32() ||
              out.getElementType() == inputType))
          return std::nullopt;
        // cuBLASLt must not write what it reads.
        Operation *written = allocationOf(reader.getDpsInits()[0]);
        for (Value read : {op.getDpsInputOperand(0)->get(),
                           op.getDpsInputOperand(1)->get(), epilogue->bias})
          if (read && (read == reader.getDpsInits()[0] ||
                       (written && allocationOf(read) == written)))
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
      if (!isMemoryEffectFree(next) && !isa<memref::AllocOp>(next))
        return std::nullopt;
    }
    return std::nullopt;
  }

  void emitGemm(linalg::LinalgOp op, const GemmMatch &match, bool accumulate,
                Epilogue *epilogue) {
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
          index(b, loc, elementBytes(type.getElementType())));
      Value address = arith::AddIOp::create(b, loc, base, offsetBytes);
      auto strides = metadata.getStrides();
      int64_t rank = type.getRank();
      Value leading = rank >= 2 ? strides[rank - 2] : index(b, loc, 0);
      Value batchStride = rank == 3 ? strides[0] : index(b, loc, 0);
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
    func::FuncOp callee = declareRuntime(b, "braid_rt_gemm", args.size());
    func::CallOp::create(b, loc, callee, args);
  }

  func::FuncOp declareRuntime(OpBuilder &b, StringRef name, unsigned numArgs) {
    ModuleOp module = getOperation();
    if (auto existing = module.lookupSymbol<func::FuncOp>(name))
      return existing;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<Type> args(numArgs, b.getI64Type());
    auto function = func::FuncOp::create(b, module.getLoc(), name,
                                         b.getFunctionType(args, {}));
    function.setPrivate();
    return function;
  }

  /// Whether `value`, a buffer, is only ever used by host code that keeps
  /// bookkeeping in it (loads, stores, deallocation, calls).
  static bool onlyHostBookkeeping(Value value) {
    for (Operation *user : value.getUsers()) {
      if (inDeviceCode(user))
        return false;
      if (auto cast = dyn_cast<memref::CastOp>(user)) {
        if (!onlyHostBookkeeping(cast.getResult()))
          return false;
        continue;
      }
      if (!isa<memref::LoadOp, memref::StoreOp, memref::DeallocOp,
               memref::DimOp, func::CallOp>(user))
        return false;
    }
    return true;
  }

  /// The allocation `value` is a view of, if any.
  static Operation *allocationOf(Value value) {
    while (Operation *def = value.getDefiningOp()) {
      if (isa<gpu::AllocOp, memref::AllocOp>(def))
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

  LogicalResult placeBuffers(func::FuncOp function) {
    MLIRContext *context = &getContext();
    auto tokenType = gpu::AsyncTokenType::get(context);
    SmallVector<memref::AllocOp> allocs;
    function.walk([&](memref::AllocOp alloc) {
      if (!inDeviceCode(alloc) && !onlyHostBookkeeping(alloc.getResult()))
        allocs.push_back(alloc);
    });
    OpBuilder b(context);
    for (memref::AllocOp alloc : allocs) {
      Location loc = alloc.getLoc();
      b.setInsertionPoint(alloc);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto device = gpu::AllocOp::create(
          b, loc, alloc.getType(), tokenType, ValueRange{ready},
          alloc.getDynamicSizes(), alloc.getSymbolOperands(),
          /*hostShared=*/false);
      gpu::WaitOp::create(b, loc, Type(), ValueRange{device.getAsyncToken()});
      alloc.getResult().replaceAllUsesWith(device.getMemref());
      alloc.erase();
    }
    // Constants (memref.get_global, host memory) that device code or the
    // runtime reads get a device copy for the function's run.
    SmallVector<memref::GetGlobalOp> globals;
    function.walk([&](memref::GetGlobalOp global) {
      if (!inDeviceCode(global) && !onlyHostBookkeeping(global.getResult()))
        globals.push_back(global);
    });
    for (memref::GetGlobalOp global : globals) {
      Location loc = global.getLoc();
      if (global->getBlock() != &function.getBody().front())
        return global.emitError()
               << "the cuda target copies constants to the device at the "
                  "function's entry; this one is inside control flow";
      b.setInsertionPointAfter(global);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto device = gpu::AllocOp::create(b, loc, global.getType(), tokenType,
                                         ValueRange{ready}, ValueRange(),
                                         ValueRange(), /*hostShared=*/false);
      auto copy = gpu::MemcpyOp::create(b, loc, tokenType,
                                        ValueRange{device.getAsyncToken()},
                                        device.getMemref(), global.getResult());
      gpu::WaitOp::create(b, loc, Type(), ValueRange{copy.getAsyncToken()});
      global.getResult().replaceAllUsesExcept(device.getMemref(), copy);
      bool returned = false;
      for (OpOperand &use : device.getMemref().getUses())
        returned |= isa<func::ReturnOp>(use.getOwner());
      if (returned)
        continue; // the caller frees results
      for (Block &block : function.getBody())
        if (auto ret = dyn_cast<func::ReturnOp>(block.getTerminator())) {
          b.setInsertionPoint(ret);
          Value done = gpu::WaitOp::create(b, loc, tokenType, ValueRange())
                           .getAsyncToken();
          auto free = gpu::DeallocOp::create(
              b, loc, tokenType, ValueRange{done}, device.getMemref());
          gpu::WaitOp::create(b, loc, Type(), ValueRange{free.getAsyncToken()});
        }
    }
    SmallVector<memref::DeallocOp> deallocs;
    WalkResult untraced = function.walk([&](memref::DeallocOp dealloc) {
      Operation *allocation = allocationOf(dealloc.getMemref());
      if (isa_and_nonnull<gpu::AllocOp>(allocation)) {
        deallocs.push_back(dealloc);
        return WalkResult::advance();
      }
      if (isa_and_nonnull<memref::AllocOp>(allocation))
        return WalkResult::advance(); // host bookkeeping
      // A buffer chosen by control flow: it could be on either side.
      dealloc.emitError() << "the cuda target cannot tell whether this "
                             "buffer is on the device or the host";
      return WalkResult::interrupt();
    });
    if (untraced.wasInterrupted())
      return failure();
    for (memref::DeallocOp dealloc : deallocs) {
      Location loc = dealloc.getLoc();
      b.setInsertionPoint(dealloc);
      Value ready =
          gpu::WaitOp::create(b, loc, tokenType, ValueRange()).getAsyncToken();
      auto free = gpu::DeallocOp::create(b, loc, tokenType, ValueRange{ready},
                                         dealloc.getMemref());
      gpu::WaitOp::create(b, loc, Type(), ValueRange{free.getAsyncToken()});
      dealloc.erase();
    }
    // Host code must not touch device buffers (it would read them before
    // the device wrote them, or fault).
    WalkResult result = function.walk([&](Operation *op) {
      if (inDeviceCode(op) || !isa<memref::LoadOp, memref::StoreOp>(op))
        return WalkResult::advance();
      Value buffer = isa<memref::LoadOp>(op)
                         ? cast<memref::LoadOp>(op).getMemRef()
                         : cast<memref::StoreOp>(op).getMemRef();
      if (isa_and_nonnull<gpu::AllocOp>(allocationOf(buffer))) {
        op->emitError() << "host code accesses a device buffer; the cuda "
                           "target runs all compute on the GPU";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};

} // namespace
