//===- Schedule.cpp - Building blocks of overlapped schedules ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "llvm/Support/Format.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::schedule;

Value schedule::groupPosition(OpBuilder &b, Location loc,
                              FlatSymbolRefAttr grid, int16_t axis) {
  return shard::ProcessMultiIndexOp::create(b, loc, grid.getValue(),
                                            ArrayRef<shard::GridAxis>{axis})
      .getResult()[0];
}

Value schedule::ringIndex(OpBuilder &b, Location loc, Value position,
                          int64_t delta, int64_t n) {
  int64_t shift = ((delta % n) + n) % n;
  if (shift == 0)
    return position;
  Value sum = arith::AddIOp::create(
      b, loc, position, arith::ConstantIndexOp::create(b, loc, shift));
  return arith::RemUIOp::create(b, loc, sum,
                                arith::ConstantIndexOp::create(b, loc, n));
}

Value schedule::affineIndex(OpBuilder &b, Location loc, Value index,
                            int64_t scale, int64_t add) {
  Value result = index;
  if (scale != 1)
    result = arith::MulIOp::create(
        b, loc, result, arith::ConstantIndexOp::create(b, loc, scale));
  if (add != 0)
    result = arith::AddIOp::create(b, loc, result,
                                   arith::ConstantIndexOp::create(b, loc, add));
  return result;
}

std::optional<unsigned> schedule::loopOfOperandDim(linalg::LinalgOp op,
                                                   OpOperand &operand,
                                                   int64_t dim) {
  AffineMap map = op.getMatchingIndexingMap(&operand);
  if (dim >= map.getNumResults())
    return std::nullopt;
  if (auto expr = dyn_cast<AffineDimExpr>(map.getResult(dim)))
    return expr.getPosition();
  return std::nullopt;
}

std::optional<int64_t> schedule::resultDimOfLoop(linalg::LinalgOp op,
                                                 unsigned loop) {
  if (op->getNumResults() != 1)
    return std::nullopt;
  AffineMap map = op.getIndexingMapMatchingResult(op->getResult(0));
  for (auto [i, expr] : llvm::enumerate(map.getResults()))
    if (auto dim = dyn_cast<AffineDimExpr>(expr);
        dim && dim.getPosition() == loop)
      return static_cast<int64_t>(i);
  return std::nullopt;
}

SmallVector<unsigned> schedule::parallelLoopsOnlyIn(linalg::LinalgOp op,
                                                    OpOperand &in,
                                                    OpOperand &notIn) {
  AffineMap inMap = op.getMatchingIndexingMap(&in);
  AffineMap notInMap = op.getMatchingIndexingMap(&notIn);
  SmallVector<unsigned> loops;
  for (unsigned loop = 0; loop < op.getNumLoops(); ++loop) {
    AffineExpr dim = getAffineDimExpr(loop, op->getContext());
    if (op.getIteratorTypesArray()[loop] == utils::IteratorType::parallel &&
        inMap.getResultPosition(dim) && !notInMap.getResultPosition(dim))
      loops.push_back(loop);
  }
  return loops;
}

Value schedule::throughViews(Value value, bool slices) {
  while (Operation *op = value.getDefiningOp()) {
    if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op) &&
        !(slices && isa<tensor::ExtractSliceOp>(op)))
      break;
    value = op->getOperand(0);
  }
  return value;
}

bool schedule::isPlaceholder(Value value, linalg::FillOp *fill,
                             bool throughSlices) {
  Operation *op = throughViews(value, throughSlices).getDefiningOp();
  if (isa_and_nonnull<tensor::EmptyOp>(op))
    return true;
  auto fillOp = dyn_cast_if_present<linalg::FillOp>(op);
  if (!fillOp || !fillOp.hasPureTensorSemantics() ||
      !isPlaceholder(fillOp.getOutputs()[0], nullptr, throughSlices))
    return false;
  if (fill)
    *fill = fillOp;
  return true;
}

Value schedule::freshPlaceholder(OpBuilder &b, Location loc, Value init,
                                 RankedTensorType type) {
  Value empty =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  linalg::FillOp fill;
  (void)isPlaceholder(init, &fill, /*throughSlices=*/true);
  if (!fill)
    return empty;
  return linalg::FillOp::create(b, loc, fill.getInputs(), ValueRange{empty})
      .getResult(0);
}

bool schedule::accumulatesIntoInit(linalg::LinalgOp op) {
  return linalg::isaContractionOpInterface(op);
}

namespace {
/// The offsets, sizes and strides of the part of `type`'s shape that starts
/// at `offset` along `dim` and is `size` long there, whole elsewhere.
struct Along {
  SmallVector<OpFoldResult> offsets, sizes, strides;
  SmallVector<int64_t> shape;
  Along(OpBuilder &b, RankedTensorType type, int64_t dim, OpFoldResult offset,
        int64_t size)
      : offsets(type.getRank(), b.getIndexAttr(0)),
        strides(type.getRank(), b.getIndexAttr(1)), shape(type.getShape()) {
    shape[dim] = size;
    for (int64_t extent : shape)
      sizes.push_back(b.getIndexAttr(extent));
    offsets[dim] = offset;
  }
};
} // namespace

Value schedule::sliceAlong(OpBuilder &b, Location loc, Value value, int64_t dim,
                           OpFoldResult offset, int64_t size) {
  auto type = cast<RankedTensorType>(value.getType());
  Along part(b, type, dim, offset, size);
  return tensor::ExtractSliceOp::create(
      b, loc, RankedTensorType::get(part.shape, type.getElementType()), value,
      part.offsets, part.sizes, part.strides);
}

Value schedule::insertAlong(OpBuilder &b, Location loc, Value chunk, Value dest,
                            int64_t dim, OpFoldResult offset) {
  auto type = cast<RankedTensorType>(chunk.getType());
  Along part(b, type, dim, offset, type.getDimSize(dim));
  return tensor::InsertSliceOp::create(b, loc, chunk, dest, part.offsets,
                                       part.sizes, part.strides);
}

FailureOr<Chunk>
schedule::computeChunk(RewriterBase &rewriter, linalg::LinalgOp op,
                       unsigned loop, OpFoldResult offset, int64_t size,
                       ArrayRef<std::pair<unsigned, Value>> replacements,
                       Value initSource, linalg::FillOp initFill) {
  return computeChunk(rewriter, op, LoopPart{loop, offset, size}, replacements,
                      initSource, initFill);
}

FailureOr<Chunk>
schedule::computeChunk(RewriterBase &rewriter, linalg::LinalgOp op,
                       ArrayRef<LoopPart> parts,
                       ArrayRef<std::pair<unsigned, Value>> replacements,
                       Value initSource, linalg::FillOp initFill) {
  // Upstream tiling reads a size of 0 as "this loop is not tiled", and
  // crashes on such a chunk; the matchers decline empty ops before this.
  if (llvm::any_of(parts, [](const LoopPart &p) { return p.size <= 0; }) ||
      !emptyLoop(op).empty())
    return rewriter.notifyMatchFailure(op, "a chunk without elements");
  auto tiling = cast<TilingInterface>(op.getOperation());
  Location loc = op.getLoc();
  SmallVector<Range> domain = tiling.getIterationDomain(rewriter);
  SmallVector<OpFoldResult> offsets, sizes;
  for (Range &range : domain) {
    offsets.push_back(range.offset);
    sizes.push_back(range.size);
  }
  for (const LoopPart &part : parts) {
    offsets[part.loop] = part.offset;
    sizes[part.loop] = rewriter.getIndexAttr(part.size);
  }
  FailureOr<TilingResult> tiled =
      tiling.getTiledImplementation(rewriter, offsets, sizes);
  if (failed(tiled) || tiled->tiledOps.size() != 1 ||
      tiled->tiledValues.size() != 1)
    return rewriter.notifyMatchFailure(op, "cannot compute a chunk of it");
  Operation *tiledOp = tiled->tiledOps.front();
  auto replaceOperand = [&](unsigned index, Value value) -> LogicalResult {
    Value old = tiledOp->getOperand(index);
    if (old.getType() != value.getType())
      return rewriter.notifyMatchFailure(op, "chunk operand type mismatch");
    rewriter.modifyOpInPlace(tiledOp,
                             [&] { tiledOp->setOperand(index, value); });
    if (Operation *def = old.getDefiningOp(); def && def->use_empty())
      rewriter.eraseOp(def);
    return success();
  };
  for (auto [index, value] : replacements)
    if (failed(replaceOperand(index, value)))
      return failure();
  Chunk chunk;
  chunk.value = tiledOp->getResult(0);
  if (failed(tiling.getResultTilePosition(
          rewriter, 0, offsets, sizes, chunk.resultOffsets, chunk.resultSizes)))
    return rewriter.notifyMatchFailure(op, "no result tile position");
  if (initSource) {
    auto dps = cast<DestinationStyleOpInterface>(tiledOp);
    OpOperand *init = dps.getDpsInitOperand(0);
    auto initType = cast<RankedTensorType>(init->get().getType());
    SmallVector<OpFoldResult> strides(initType.getRank(),
                                      rewriter.getIndexAttr(1));
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(tiledOp);
    Value slice = initSource;
    if (initSource.getType() != initType)
      slice = tensor::ExtractSliceOp::create(rewriter, loc, initType,
                                             initSource, chunk.resultOffsets,
                                             chunk.resultSizes, strides);
    if (initFill)
      slice = linalg::FillOp::create(rewriter, initFill.getLoc(),
                                     initFill.getInputs(), ValueRange{slice})
                  .getResult(0);
    if (failed(replaceOperand(init->getOperandNumber(), slice)))
      return failure();
  }
  return chunk;
}

Value schedule::insertChunk(OpBuilder &b, Location loc, const Chunk &chunk,
                            Value dest) {
  auto type = cast<RankedTensorType>(dest.getType());
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, chunk.value, dest,
                                       chunk.resultOffsets, chunk.resultSizes,
                                       strides);
}

FailureOr<Value> schedule::combine(OpBuilder &b, Location loc,
                                   ReductionKind kind, Value lhs, Value rhs) {
  ValueRange inputs{lhs, rhs};
  ValueRange outputs{lhs};
  switch (kind) {
  case ReductionKind::Sum:
    return linalg::AddOp::create(b, loc, inputs, outputs)->getResult(0);
  case ReductionKind::Max:
    return linalg::MaxOp::create(b, loc, inputs, outputs)->getResult(0);
  case ReductionKind::Min:
    return linalg::MinOp::create(b, loc, inputs, outputs)->getResult(0);
  case ReductionKind::Product:
    return linalg::MulOp::create(b, loc, inputs, outputs)->getResult(0);
  default:
    return failure();
  }
}

std::pair<Value, Value> schedule::startShift(OpBuilder &b, Location loc,
                                             Value value,
                                             FlatSymbolRefAttr grid,
                                             int16_t axis, int64_t offset,
                                             int64_t step) {
  auto start = ShiftStartOp::create(
      b, loc, TokenType::get(b.getContext()), value.getType(), grid,
      b.getDenseI16ArrayAttr({axis}), value, b.getI64IntegerAttr(offset));
  start->setAttr(DistDialect::getStepAttrName(), b.getI64IntegerAttr(step));
  return {start.getToken(), start.getFuture()};
}

Value schedule::waitFor(OpBuilder &b, Location loc,
                        std::pair<Value, Value> started) {
  return WaitOp::create(b, loc, started.second.getType(), started.first,
                        started.second);
}

std::string schedule::emptyLoop(linalg::LinalgOp op) {
  for (auto [loop, size] : llvm::enumerate(op.getStaticLoopRanges()))
    if (size == 0)
      return "loop " + std::to_string(loop) + " has extent 0";
  return "";
}

FailureOr<Ring> schedule::matchRing(CollectiveOpInterface op,
                                    std::string &reason) {
  RankedTensorType input = op.getInput().getType();
  if (!input.hasStaticShape() ||
      !op.getCollectiveResult().getType().hasStaticShape()) {
    reason = "dynamic shapes";
    return failure();
  }
  // Nothing to move: chunks of it would be empty, and so would the
  // symmetric buffers of a direct exchange.
  for (RankedTensorType type : {input, op.getCollectiveResult().getType()})
    if (type.getNumElements() == 0) {
      reason.clear();
      llvm::raw_string_ostream os(reason);
      os << "it moves no elements (" << type << ")";
      return failure();
    }
  if (op.getAxes().size() != 1) {
    reason = "ring schedules run along one grid axis, this group spans " +
             std::to_string(op.getAxes().size());
    return failure();
  }
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  int64_t n = grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
  if (ShapedType::isDynamic(n) || n < 2) {
    reason = ShapedType::isDynamic(n) ? "the group size is dynamic"
                                      : "the group has a single rank";
    return failure();
  }
  if (n > kMaxScheduleRanks) {
    reason = "the group has " + std::to_string(n) +
             " ranks; schedules take a step or a transfer per rank, and "
             "are built for groups of at most " +
             std::to_string(kMaxScheduleRanks);
    return failure();
  }
  return Ring{op.getGridAttr(), op.getAxes()[0], n};
}

bool schedule::isMemoryBound(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalgOp.hasPureTensorSemantics() ||
      !isa<TilingInterface>(op) || linalgOp.getNumLoops() == 0)
    return false;
  if (linalg::isaContractionOpInterface(linalgOp) ||
      linalg::isaConvolutionOpInterface(linalgOp) ||
      isa<linalg::TransposeOp>(op))
    return false;
  if (!llvm::all_of(linalgOp.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isProjectedPermutation(); }))
    return false;
  if (linalgOp.getIteratorTypesArray().front() != utils::IteratorType::parallel)
    return false;
  return llvm::all_of(linalgOp.getStaticLoopRanges(), [](int64_t size) {
    return !ShapedType::isDynamic(size) && size > 0;
  });
}

std::string schedule::formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.1f ", bytes) << units[unit];
  return text;
}
