//===- DistOps.cpp - Dist operations ----------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

#include <limits>

using namespace mlir;
using namespace braid::dist;

#include "braid/Dialect/Dist/IR/DistInterfaces.cpp.inc"

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `reduce = sum`: the reduction kind as a bare keyword.
static ParseResult parseReduction(OpAsmParser &parser,
                                  ReductionKindAttr &reduction) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<ReductionKind> kind = symbolizeReductionKind(keyword);
  if (!kind)
    return parser.emitError(loc)
           << "unknown reduction '" << keyword
           << "', expected sum, max, min, product, bitand, bitor or bitxor";
  reduction = ReductionKindAttr::get(parser.getContext(), *kind);
  return success();
}

static void printReduction(OpAsmPrinter &printer, Operation *,
                           ReductionKindAttr reduction) {
  printer << stringifyReductionKind(reduction.getValue());
}

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

/// Axes must be non-negative and distinct; they are checked against the
/// grid's rank in verifySymbolUses.
static LogicalResult verifyAxes(Operation *op, ArrayRef<int16_t> axes) {
  llvm::SmallSet<int16_t, 4> seen;
  for (int16_t axis : axes) {
    if (axis < 0)
      return op->emitOpError() << "grid axis " << axis << " is negative";
    if (!seen.insert(axis).second)
      return op->emitOpError() << "grid axis " << axis << " is listed twice";
  }
  return success();
}

static LogicalResult verifyElementTypesAndRank(Operation *op,
                                               RankedTensorType input,
                                               RankedTensorType result) {
  if (input.getElementType() != result.getElementType())
    return op->emitOpError()
           << "result element type " << result.getElementType()
           << " differs from input element type " << input.getElementType();
  if (input.getRank() != result.getRank())
    return op->emitOpError() << "result rank " << result.getRank()
                             << " differs from input rank " << input.getRank();
  return success();
}

static LogicalResult verifyDimInRange(Operation *op, StringRef name,
                                      int64_t dim, RankedTensorType type) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError()
           << name << " " << dim << " is out of range for a rank-"
           << type.getRank() << " tensor";
  return success();
}

/// Dimensions other than `skip` (and `skip2`) must agree where both static.
static LogicalResult verifyOtherDimsEqual(Operation *op, RankedTensorType input,
                                          RankedTensorType result, int64_t skip,
                                          int64_t skip2 = -1) {
  for (int64_t i = 0, e = input.getRank(); i < e; ++i) {
    if (i == skip || i == skip2)
      continue;
    int64_t a = input.getDimSize(i), b = result.getDimSize(i);
    if (!ShapedType::isDynamic(a) && !ShapedType::isDynamic(b) && a != b)
      return op->emitOpError() << "result dimension " << i << " has size " << b
                               << " but the input's has size " << a;
  }
  return success();
}

static LogicalResult verifyReduction(Operation *op, ReductionKind kind,
                                     Type elementType) {
  if (!isReductionLegalFor(kind, elementType))
    return op->emitOpError()
           << "reduction '" << stringifyReductionKind(kind)
           << "' is not defined for element type " << elementType;
  return success();
}

/// Checks `size` (a dimension of the input) divides by `groupSize`.
static LogicalResult verifyDivisible(Operation *op, StringRef what, int64_t dim,
                                     int64_t size, int64_t groupSize) {
  if (ShapedType::isDynamic(size) || ShapedType::isDynamic(groupSize))
    return success();
  if (size % groupSize != 0)
    return op->emitOpError()
           << what << " dimension " << dim << " has size " << size
           << ", which is not divisible by the group size " << groupSize;
  return success();
}

static LogicalResult verifyExpectedSize(Operation *op, StringRef what,
                                        int64_t dim, int64_t actual,
                                        int64_t expected) {
  if (ShapedType::isDynamic(actual) || ShapedType::isDynamic(expected))
    return success();
  if (actual != expected)
    return op->emitOpError() << what << " dimension " << dim << " has size "
                             << actual << ", expected " << expected;
  return success();
}

static int64_t mulDyn(int64_t a, int64_t b) {
  if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b))
    return ShapedType::kDynamic;
  return a * b;
}

static int64_t divDyn(int64_t a, int64_t b) {
  if (ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || b == 0)
    return ShapedType::kDynamic;
  return a / b;
}

LogicalResult
braid::dist::verifyGridShape(shard::GridOp grid,
                             function_ref<InFlightDiagnostic()> emitError) {
  // Upstream's verifier rejects negative sizes; an axis of size 0 has no
  // ranks to run on, and every group over it would divide by zero.
  uint64_t ranks = 1;
  bool overflow = false;
  for (auto [axis, size] : llvm::enumerate(grid.getShape())) {
    if (ShapedType::isDynamic(size))
      continue;
    if (size < 1)
      return emitError() << "axis " << axis << " has size " << size
                         << "; every grid axis needs at least one rank";
    ranks =
        llvm::SaturatingMultiply(ranks, static_cast<uint64_t>(size), &overflow);
  }
  if (ranks > static_cast<uint64_t>(kMaxGridRanks)) {
    InFlightDiagnostic diag = emitError() << "spans ";
    if (overflow)
      diag << "more than " << std::numeric_limits<uint64_t>::max();
    else
      diag << ranks;
    return diag << " ranks; Braid compiles for grids of at most "
                << kMaxGridRanks << " ranks";
  }
  return success();
}

LogicalResult braid::dist::verifyGridUse(Operation *op,
                                         FlatSymbolRefAttr gridAttr,
                                         ArrayRef<int16_t> axes,
                                         SymbolTableCollection &symbolTable,
                                         int64_t &groupSize) {
  auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(op, gridAttr);
  if (!grid)
    return op->emitOpError()
           << "refers to " << gridAttr << ", which is not a 'shard.grid'";
  for (int16_t axis : axes)
    if (axis >= grid.getRank())
      return op->emitOpError()
             << "grid axis " << axis << " does not exist: grid " << gridAttr
             << " has " << grid.getRank() << " axes";
  if (failed(verifyGridShape(grid, [&] {
        return op->emitOpError() << "grid " << gridAttr << ": ";
      })))
    return failure();
  groupSize = getGroupSize(grid, axes);
  return success();
}

//===----------------------------------------------------------------------===//
// Per-kind rules, shared by the synchronous op and its start op.
//===----------------------------------------------------------------------===//

template <typename OpTy> static LogicalResult verifyAllGatherLike(OpTy op) {
  RankedTensorType in = op.getInput().getType();
  RankedTensorType out = op.getCollectiveResult().getType();
  int64_t dim = op.getDim();
  if (failed(verifyAxes(op, op.getAxes())) ||
      failed(verifyElementTypesAndRank(op, in, out)) ||
      failed(verifyDimInRange(op, "gather dimension", dim, in)))
    return failure();
  return verifyOtherDimsEqual(op, in, out, dim);
}

template <typename OpTy>
static LogicalResult verifyAllGatherOnGrid(OpTy op, int64_t groupSize) {
  int64_t dim = op.getDim();
  return verifyExpectedSize(
      op, "gathered", dim, op.getCollectiveResult().getType().getDimSize(dim),
      mulDyn(op.getInput().getType().getDimSize(dim), groupSize));
}

template <typename OpTy> static LogicalResult verifyReduceScatterLike(OpTy op) {
  RankedTensorType in = op.getInput().getType();
  RankedTensorType out = op.getCollectiveResult().getType();
  int64_t dim = op.getDim();
  if (failed(verifyAxes(op, op.getAxes())) ||
      failed(verifyElementTypesAndRank(op, in, out)) ||
      failed(verifyDimInRange(op, "scatter dimension", dim, in)) ||
      failed(verifyReduction(op, op.getReduction(), in.getElementType())))
    return failure();
  return verifyOtherDimsEqual(op, in, out, dim);
}

template <typename OpTy>
static LogicalResult verifyReduceScatterOnGrid(OpTy op, int64_t groupSize) {
  int64_t dim = op.getDim();
  int64_t inSize = op.getInput().getType().getDimSize(dim);
  if (failed(verifyDivisible(op, "scattered", dim, inSize, groupSize)))
    return failure();
  return verifyExpectedSize(op, "scattered", dim,
                            op.getCollectiveResult().getType().getDimSize(dim),
                            divDyn(inSize, groupSize));
}

template <typename OpTy> static LogicalResult verifyAllReduceLike(OpTy op) {
  if (failed(verifyAxes(op, op.getAxes())))
    return failure();
  return verifyReduction(op, op.getReduction(),
                         op.getInput().getType().getElementType());
}

template <typename OpTy> static LogicalResult verifyAllToAllLike(OpTy op) {
  RankedTensorType in = op.getInput().getType();
  RankedTensorType out = op.getCollectiveResult().getType();
  if (failed(verifyAxes(op, op.getAxes())) ||
      failed(verifyElementTypesAndRank(op, in, out)) ||
      failed(verifyDimInRange(op, "split dimension", op.getSplitDim(), in)) ||
      failed(verifyDimInRange(op, "concat dimension", op.getConcatDim(), in)))
    return failure();
  return verifyOtherDimsEqual(op, in, out, op.getSplitDim(), op.getConcatDim());
}

template <typename OpTy>
static LogicalResult verifyAllToAllOnGrid(OpTy op, int64_t groupSize) {
  RankedTensorType in = op.getInput().getType();
  RankedTensorType out = op.getCollectiveResult().getType();
  int64_t split = op.getSplitDim(), concat = op.getConcatDim();
  if (failed(
          verifyDivisible(op, "split", split, in.getDimSize(split), groupSize)))
    return failure();
  if (split == concat)
    return verifyExpectedSize(op, "result", split, out.getDimSize(split),
                              in.getDimSize(split));
  if (failed(verifyExpectedSize(op, "split", split, out.getDimSize(split),
                                divDyn(in.getDimSize(split), groupSize))))
    return failure();
  return verifyExpectedSize(op, "concatenated", concat, out.getDimSize(concat),
                            mulDyn(in.getDimSize(concat), groupSize));
}

template <typename OpTy> static LogicalResult verifyShiftLike(OpTy op) {
  if (failed(verifyAxes(op, op.getAxes())))
    return failure();
  if (op.getAxes().size() != 1)
    return op.emitOpError()
           << "shifts along exactly one grid axis, got " << op.getAxes().size();
  return success();
}

template <typename OpTy> static LogicalResult verifyBroadcastLike(OpTy op) {
  if (failed(verifyAxes(op, op.getAxes())))
    return failure();
  if (op.getRoot().size() != op.getAxes().size())
    return op.emitOpError() << "root has " << op.getRoot().size()
                            << " coordinates but the group spans "
                            << op.getAxes().size() << " axes";
  for (int64_t coordinate : op.getRoot())
    if (coordinate < 0)
      return op.emitOpError()
             << "root coordinate " << coordinate << " is negative";
  return success();
}

template <typename OpTy>
static LogicalResult verifyBroadcastOnGrid(OpTy op,
                                           SymbolTableCollection &table) {
  auto grid =
      table.lookupNearestSymbolFrom<shard::GridOp>(op, op.getGridAttr());
  for (auto [axis, coordinate] : llvm::zip(op.getAxes(), op.getRoot())) {
    int64_t size = grid.getShape()[axis];
    if (!ShapedType::isDynamic(size) && coordinate >= size)
      return op.emitOpError() << "root coordinate " << coordinate
                              << " is out of range for grid axis " << axis
                              << " of size " << size;
  }
  return success();
}

/// Each token has exactly one use, a `dist.wait` in the same block that also
/// takes the future; the future has no other use.
static LogicalResult verifyTokenUse(Operation *start, Value token,
                                    Value future) {
  if (token.use_empty())
    return start->emitOpError() << "token is never waited";
  if (!token.hasOneUse())
    return start->emitOpError()
           << "token is waited more than once ("
           << std::distance(token.use_begin(), token.use_end()) << " uses)";
  Operation *user = *token.user_begin();
  auto wait = dyn_cast<WaitOp>(user);
  if (!wait)
    return start->emitOpError() << "token must be consumed by 'dist.wait', "
                                   "not by '"
                                << user->getName() << "'";
  if (wait->getBlock() != start->getBlock())
    return start->emitOpError()
           << "token must be waited in the block of its start";
  for (Operation *futureUser : future.getUsers())
    if (futureUser != user)
      return start->emitOpError()
             << "future is used by '" << futureUser->getName()
             << "'; only its 'dist.wait' may use it";
  return success();
}

//===----------------------------------------------------------------------===//
// Op hooks. Each kind's synchronous and start op share the rules above.
//===----------------------------------------------------------------------===//

#define DIST_COLLECTIVE_HOOKS(OP, LOCAL, ONGRID)                               \
  LogicalResult OP::verifySymbolUses(SymbolTableCollection &symbolTable) {     \
    int64_t groupSize;                                                         \
    if (failed(verifyGridUse(*this, getGridAttr(), getAxes(), symbolTable,     \
                             groupSize)))                                      \
      return failure();                                                        \
    (void)groupSize;                                                           \
    return ONGRID;                                                             \
  }

#define DIST_SYNC_VERIFY(OP, LOCAL)                                            \
  LogicalResult OP::verify() { return LOCAL(*this); }

#define DIST_START_VERIFY(OP, LOCAL)                                           \
  LogicalResult OP::verify() {                                                 \
    if (failed(LOCAL(*this)))                                                  \
      return failure();                                                        \
    return verifyTokenUse(*this, getToken(), getFuture());                     \
  }

DIST_SYNC_VERIFY(AllGatherOp, verifyAllGatherLike)
DIST_START_VERIFY(AllGatherStartOp, verifyAllGatherLike)
DIST_COLLECTIVE_HOOKS(AllGatherOp, , verifyAllGatherOnGrid(*this, groupSize))
DIST_COLLECTIVE_HOOKS(AllGatherStartOp, ,
                      verifyAllGatherOnGrid(*this, groupSize))

DIST_SYNC_VERIFY(ReduceScatterOp, verifyReduceScatterLike)
DIST_START_VERIFY(ReduceScatterStartOp, verifyReduceScatterLike)
DIST_COLLECTIVE_HOOKS(ReduceScatterOp, ,
                      verifyReduceScatterOnGrid(*this, groupSize))
DIST_COLLECTIVE_HOOKS(ReduceScatterStartOp, ,
                      verifyReduceScatterOnGrid(*this, groupSize))

DIST_SYNC_VERIFY(AllReduceOp, verifyAllReduceLike)
DIST_START_VERIFY(AllReduceStartOp, verifyAllReduceLike)
DIST_COLLECTIVE_HOOKS(AllReduceOp, , success())
DIST_COLLECTIVE_HOOKS(AllReduceStartOp, , success())

DIST_SYNC_VERIFY(AllToAllOp, verifyAllToAllLike)
DIST_START_VERIFY(AllToAllStartOp, verifyAllToAllLike)
DIST_COLLECTIVE_HOOKS(AllToAllOp, , verifyAllToAllOnGrid(*this, groupSize))
DIST_COLLECTIVE_HOOKS(AllToAllStartOp, , verifyAllToAllOnGrid(*this, groupSize))

DIST_SYNC_VERIFY(ShiftOp, verifyShiftLike)
DIST_START_VERIFY(ShiftStartOp, verifyShiftLike)
DIST_COLLECTIVE_HOOKS(ShiftOp, , success())
DIST_COLLECTIVE_HOOKS(ShiftStartOp, , success())

DIST_SYNC_VERIFY(BroadcastOp, verifyBroadcastLike)
DIST_START_VERIFY(BroadcastStartOp, verifyBroadcastLike)
DIST_COLLECTIVE_HOOKS(BroadcastOp, , verifyBroadcastOnGrid(*this, symbolTable))
DIST_COLLECTIVE_HOOKS(BroadcastStartOp, ,
                      verifyBroadcastOnGrid(*this, symbolTable))

#undef DIST_COLLECTIVE_HOOKS
#undef DIST_SYNC_VERIFY
#undef DIST_START_VERIFY

//===----------------------------------------------------------------------===//
// WaitOp
//===----------------------------------------------------------------------===//

CollectiveOpInterface WaitOp::getStart() {
  return dyn_cast_or_null<CollectiveOpInterface>(getToken().getDefiningOp());
}

LogicalResult WaitOp::verify() {
  CollectiveOpInterface start = getStart();
  if (!start || start.getAsyncToken() != getToken())
    return emitOpError() << "token must come directly from a 'dist.*_start' op";
  if (start.getCollectiveResult() != getFuture())
    return emitOpError() << "future must be the second result of the start "
                            "op that produced the token";
  if (start->getBlock() != (*this)->getBlock())
    return emitOpError() << "must be in the block of its start op";
  return success();
}

//===----------------------------------------------------------------------===//
// AnnotateOp
//===----------------------------------------------------------------------===//

LogicalResult AnnotateOp::verify() {
  PlacementAttr placement = getPlacement();
  RankedTensorType type = getInput().getType();
  for (auto [index, axis] : llvm::enumerate(placement.getAxes())) {
    if (axis.kind == PlacementKind::Shard && axis.dim >= type.getRank())
      return emitOpError() << "grid axis " << index << " shards dimension "
                           << axis.dim << " of a rank-" << type.getRank()
                           << " tensor";
    if (axis.kind == PlacementKind::Partial &&
        !isReductionLegalFor(axis.reduction, type.getElementType()))
      return emitOpError() << "partial<"
                           << stringifyReductionKind(axis.reduction)
                           << "> is not defined for " << type.getElementType();
  }
  return success();
}

LogicalResult AnnotateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  PlacementAttr placement = getPlacement();
  auto grid = symbolTable.lookupNearestSymbolFrom<shard::GridOp>(
      *this, placement.getGrid());
  if (!grid)
    return emitOpError() << "placement refers to " << placement.getGrid()
                         << ", which is not a 'shard.grid'";
  if (static_cast<int64_t>(placement.getAxes().size()) != grid.getRank())
    return emitOpError() << "placement has " << placement.getAxes().size()
                         << " entries but grid " << placement.getGrid()
                         << " has " << grid.getRank() << " axes";
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalization
//===----------------------------------------------------------------------===//

/// A collective that moves nothing: a group of one rank, or a shift by a
/// multiple of the ring length.
static bool isTrivialCollective(CollectiveOpInterface op) {
  if (op.getInput().getType() != op.getCollectiveResult().getType())
    return false;
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  if (!grid)
    return false;
  int64_t groupSize = getGroupSize(grid, op.getAxes());
  if (groupSize == 1)
    return true;
  if (ShapedType::isDynamic(groupSize))
    return false;
  if (auto shift = dyn_cast<ShiftOp>(op.getOperation()))
    return shift.getOffset() % groupSize == 0;
  if (auto shift = dyn_cast<ShiftStartOp>(op.getOperation()))
    return shift.getOffset() % groupSize == 0;
  return false;
}

namespace {
/// Replaces a collective over a one-rank group with its input.
template <typename OpTy>
struct FoldTrivialCollective : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!isTrivialCollective(cast<CollectiveOpInterface>(op.getOperation())))
      return rewriter.notifyMatchFailure(op, "moves data between ranks");
    rewriter.replaceOp(op, op.getInput());
    return success();
  }
};

/// A collective of a `tensor.empty` (partitioning reshards the placeholder
/// inits frontends share between ops) moves undefined values: its result is
/// a placeholder too.
template <typename OpTy>
struct FoldPlaceholderCollective : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    auto collective = cast<CollectiveOpInterface>(op.getOperation());
    RankedTensorType type = collective.getCollectiveResult().getType();
    if (!collective.getInput().template getDefiningOp<tensor::EmptyOp>() ||
        !type.hasStaticShape())
      return rewriter.notifyMatchFailure(op, "moves defined values");
    rewriter.replaceOpWithNewOp<tensor::EmptyOp>(op, type.getShape(),
                                                 type.getElementType());
    return success();
  }
};

/// The single `dist.wait` of a start op, or null.
static WaitOp getSoleWait(Value token) {
  if (!token.hasOneUse())
    return {};
  return dyn_cast<WaitOp>(*token.user_begin());
}

/// Removes a trivial start and its wait.
template <typename OpTy>
struct FoldTrivialStart : public OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    WaitOp wait = getSoleWait(op.getToken());
    if (!wait || wait.getFuture() != op.getFuture() ||
        !isTrivialCollective(cast<CollectiveOpInterface>(op.getOperation())))
      return failure();
    rewriter.replaceOp(wait, op.getInput());
    rewriter.eraseOp(op);
    return success();
  }
};

/// A start whose wait is the very next op overlaps nothing: use the
/// synchronous op.
template <typename StartOpTy, typename SyncOpTy>
struct StartThenWaitToSync : public OpRewritePattern<StartOpTy> {
  using OpRewritePattern<StartOpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(StartOpTy op,
                                PatternRewriter &rewriter) const override {
    WaitOp wait = getSoleWait(op.getToken());
    if (!wait || wait.getFuture() != op.getFuture() ||
        op->getNextNode() != wait.getOperation())
      return failure();
    rewriter.setInsertionPoint(wait);
    auto sync = SyncOpTy::create(rewriter, op.getLoc(),
                                 TypeRange{op.getFuture().getType()},
                                 op->getOperands(), op->getAttrs());
    rewriter.replaceOp(wait, sync->getResults());
    rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

#define DIST_CANONICALIZERS(SYNC, START)                                       \
  void SYNC::getCanonicalizationPatterns(RewritePatternSet &results,           \
                                         MLIRContext *context) {               \
    results.add<FoldTrivialCollective<SYNC>, FoldPlaceholderCollective<SYNC>>( \
        context);                                                              \
  }                                                                            \
  void START::getCanonicalizationPatterns(RewritePatternSet &results,          \
                                          MLIRContext *context) {              \
    results.add<FoldTrivialStart<START>, StartThenWaitToSync<START, SYNC>>(    \
        context);                                                              \
  }

DIST_CANONICALIZERS(AllGatherOp, AllGatherStartOp)
DIST_CANONICALIZERS(ReduceScatterOp, ReduceScatterStartOp)
DIST_CANONICALIZERS(AllReduceOp, AllReduceStartOp)
DIST_CANONICALIZERS(AllToAllOp, AllToAllStartOp)
DIST_CANONICALIZERS(ShiftOp, ShiftStartOp)
DIST_CANONICALIZERS(BroadcastOp, BroadcastStartOp)

#undef DIST_CANONICALIZERS

#define GET_OP_CLASSES
#include "braid/Dialect/Dist/IR/DistOps.cpp.inc"
