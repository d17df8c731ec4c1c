//===- DirectExchange.cpp - Whole collectives as direct transfers ---------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The symmetric form of a collective that no schedule decomposes (kept
// whole, or made asynchronous): each rank sends straight to every peer, one
// shift per peer offset k = 1 .. n-1, all posted where the collective starts
// and waited where it is waited, then assembles or reduces what arrived.
// The shifts are marked `dist.symmetric`, so that braid-symmetric-transfers
// turns each into a put into the peer's slot with its own data and credit
// flags: direct puts, n - 1 per rank, with no intermediate hop.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "braid/Dialect/Dist/Transforms/CostModel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace braid;
using namespace braid::dist;
using namespace braid::dist::schedule;

namespace {

/// Above this many bytes an all-reduce moves as a reduce-scatter then an
/// all-gather (2 (n-1)/n of the tensor per rank) rather than one shot
/// (n - 1 times the tensor), when its leading dimension splits evenly.
constexpr int64_t oneShotAllReduceBytes = 64 * 1024;

/// The collective's kind-specific attributes, for its sync and start forms.
struct Shape {
  int64_t dim = 0, concatDim = 0; // all_gather, reduce_scatter; all_to_all
  ReductionKind reduction = ReductionKind::Sum;
};

std::optional<Shape> shapeOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<Shape>>(op)
      .Case<AllGatherOp, AllGatherStartOp>([](auto g) {
        return Shape{static_cast<int64_t>(g.getDim()), 0, {}};
      })
      .Case<ReduceScatterOp, ReduceScatterStartOp>([](auto r) {
        return Shape{static_cast<int64_t>(r.getDim()), 0, r.getReduction()};
      })
      .Case<AllReduceOp, AllReduceStartOp>([](auto r) {
        return Shape{0, 0, r.getReduction()};
      })
      .Case<AllToAllOp, AllToAllStartOp>([](auto a) {
        return Shape{static_cast<int64_t>(a.getSplitDim()),
                     static_cast<int64_t>(a.getConcatDim()),
                     {}};
      })
      .Case<ShiftOp, ShiftStartOp>([](auto) { return Shape{}; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The wait of a start op's token, in its block.
WaitOp waitOf(Operation *start) {
  Value token = start->getResult(0);
  if (!token.hasOneUse())
    return {};
  auto wait = dyn_cast<WaitOp>(*token.user_begin());
  return wait && wait->getBlock() == start->getBlock() ? wait : WaitOp();
}

/// Posts a marked shift of `value` by +k (k = 1 .. n-1) for each value.
SmallVector<std::pair<Value, Value>> postShifts(OpBuilder &b, Location loc,
                                                const Ring &ring,
                                                ArrayRef<Value> values,
                                                int64_t firstStep) {
  SmallVector<std::pair<Value, Value>> started;
  for (auto [i, value] : llvm::enumerate(values)) {
    int64_t k = static_cast<int64_t>(i) + 1;
    started.push_back(startShift(b, loc, value, ring.grid, ring.axis, k,
                                 firstStep + static_cast<int64_t>(i)));
    started.back().first.getDefiningOp()->setAttr(
        DistDialect::getSymmetricAttrName(), b.getUnitAttr());
  }
  return started;
}

SmallVector<Value> waitAll(OpBuilder &b, Location loc,
                           ArrayRef<std::pair<Value, Value>> started) {
  SmallVector<Value> received;
  for (const auto &s : started)
    received.push_back(waitFor(b, loc, s));
  return received;
}

OpFoldResult blockOffset(OpBuilder &b, Location loc, Value position,
                         int64_t delta, int64_t n, int64_t size) {
  return affineIndex(b, loc, ringIndex(b, loc, position, delta, n), size, 0);
}

/// Block `position + delta` of `value` along `dim`, in n blocks.
Value block(OpBuilder &b, Location loc, Value value, int64_t dim,
            Value position, int64_t delta, int64_t n) {
  int64_t size = cast<RankedTensorType>(value.getType()).getDimSize(dim) / n;
  return sliceAlong(b, loc, value, dim,
                    blockOffset(b, loc, position, delta, n, size), size);
}

/// Puts `own` and what arrived from rank position - k (received[k - 1])
/// into their places along `dim` of a new tensor of `type`.
Value assemble(OpBuilder &b, Location loc, RankedTensorType type, int64_t dim,
               Value own, ArrayRef<Value> received, Value position, int64_t n) {
  int64_t size = cast<RankedTensorType>(own.getType()).getDimSize(dim);
  Value result =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  result = insertAlong(b, loc, own, result, dim,
                       blockOffset(b, loc, position, 0, n, size));
  for (auto [i, value] : llvm::enumerate(received))
    result = insertAlong(
        b, loc, value, result, dim,
        blockOffset(b, loc, position, -static_cast<int64_t>(i) - 1, n, size));
  return result;
}

FailureOr<Value> reduceAll(OpBuilder &b, Location loc, ReductionKind kind,
                           Value own, ArrayRef<Value> received) {
  Value acc = own;
  for (Value value : received) {
    FailureOr<Value> next = combine(b, loc, kind, acc, value);
    if (failed(next))
      return failure();
    acc = *next;
  }
  return acc;
}

} // namespace

LogicalResult overlap::matchDirectExchange(CollectiveOpInterface op,
                                           std::string &why) {
  Operation *raw = op.getOperation();
  std::optional<Shape> shape = shapeOf(raw);
  if (!shape) {
    why = isa<BroadcastOp, BroadcastStartOp>(raw)
              ? "a broadcast's peer is its root, at an offset that depends "
                "on the rank, which transfers of static offsets cannot "
                "express"
              : "no direct form for " + op.getCollectiveKind().str();
    return failure();
  }
  FailureOr<Ring> ring = matchRing(op, why);
  if (failed(ring))
    return failure();
  if (op.isAsync() && !waitOf(raw)) {
    why = "its wait is not in the block that starts it";
    return failure();
  }
  StringRef kind = op.getCollectiveKind();
  if ((kind == "reduce_scatter" || kind == "all_reduce") &&
      isBitwise(shape->reduction)) {
    why = "a bitwise reduction, which the direct form does not combine";
    return failure();
  }
  return success();
}

LogicalResult overlap::directExchange(RewriterBase &rewriter,
                                      CollectiveOpInterface op, bool oneShot) {
  std::string why;
  if (failed(matchDirectExchange(op, why)))
    return failure();
  Operation *raw = op.getOperation();
  Shape shape = *shapeOf(raw);
  StringRef kind = op.getCollectiveKind();
  Ring ring = *matchRing(op, why);
  int64_t n = ring.groupSize;
  Location loc = raw->getLoc();
  Value input = op.getInput();
  auto resultType = op.getCollectiveResult().getType();

  // A shift is one channel already.
  if (kind == "shift") {
    rewriter.modifyOpInPlace(raw, [&] {
      raw->setAttr(DistDialect::getSymmetricAttrName(), rewriter.getUnitAttr());
    });
    return success();
  }

  WaitOp wait = op.isAsync() ? waitOf(raw) : WaitOp();
  rewriter.setInsertionPoint(raw);
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);

  // What each rank sends to position + k, posted where the collective
  // starts.
  auto inputType = cast<RankedTensorType>(input.getType());
  bool twoPhase = kind == "all_reduce" && !oneShot && inputType.getRank() > 0 &&
                  inputType.getDimSize(0) % n == 0 &&
                  tensorBytes(input) > oneShotAllReduceBytes;
  bool blocks = kind == "reduce_scatter" || kind == "all_to_all" || twoPhase;
  SmallVector<Value> sent;
  for (int64_t k = 1; k < n; ++k)
    sent.push_back(blocks
                       ? block(rewriter, loc, input, shape.dim, position, k, n)
                       : input);
  SmallVector<std::pair<Value, Value>> started =
      postShifts(rewriter, loc, ring, sent, /*firstStep=*/0);

  // Where the result is needed: at the wait, or right here.
  if (wait)
    rewriter.setInsertionPoint(wait);
  SmallVector<Value> received = waitAll(rewriter, loc, started);
  Value result;
  if (kind == "all_gather") {
    result = assemble(rewriter, loc, resultType, shape.dim, input, received,
                      position, n);
  } else if (kind == "all_to_all") {
    Value own = block(rewriter, loc, input, shape.dim, position, 0, n);
    result = assemble(rewriter, loc, resultType, shape.concatDim, own, received,
                      position, n);
  } else {
    Value own =
        blocks ? block(rewriter, loc, input, shape.dim, position, 0, n) : input;
    FailureOr<Value> reduced =
        reduceAll(rewriter, loc, shape.reduction, own, received);
    if (failed(reduced))
      return failure();
    result = *reduced;
    if (twoPhase) {
      // Then every rank's reduced block to every peer.
      SmallVector<Value> again(n - 1, result);
      SmallVector<std::pair<Value, Value>> gathered =
          postShifts(rewriter, loc, ring, again, /*firstStep=*/n - 1);
      result = assemble(rewriter, loc, resultType, 0, result,
                        waitAll(rewriter, loc, gathered), position, n);
    }
  }
  if (wait) {
    rewriter.replaceOp(wait, result);
    rewriter.eraseOp(raw);
  } else {
    rewriter.replaceOp(raw, result);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reshapes after a reduction
//===----------------------------------------------------------------------===//

namespace {

/// The reshape that directly and only consumes `value`, if any.
Operation *singleReshapeUser(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  Operation *user = *value.user_begin();
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user) ? user
                                                                   : nullptr;
}

/// For a reduce-scatter along `dim` whose result `expand` reshapes: the
/// dimension of the expanded shape that the scatter becomes, when the
/// rows of the group of `dim` are blocks of one of its dimensions (every
/// dimension of the group before it has size 1).
std::optional<int64_t> scatteredDim(tensor::ExpandShapeOp expand, int64_t dim) {
  auto groups = expand.getReassociationIndices();
  if (dim >= static_cast<int64_t>(groups.size()))
    return std::nullopt;
  auto shape = expand.getResultType().getShape();
  for (int64_t d : groups[dim]) {
    if (shape[d] != 1)
      return d;
  }
  return groups[dim].back();
}

} // namespace

Operation *overlap::userAfterReshapes(CollectiveOpInterface op,
                                      std::string &why) {
  Value value = op.getCollectiveResult();
  std::optional<int64_t> dim;
  if (auto rs = dyn_cast<ReduceScatterOp>(op.getOperation()))
    dim = static_cast<int64_t>(rs.getDim());
  while (Operation *reshape = singleReshapeUser(value)) {
    if (dim) {
      auto expand = dyn_cast<tensor::ExpandShapeOp>(reshape);
      std::optional<int64_t> next =
          expand ? scatteredDim(expand, *dim) : std::nullopt;
      if (!next) {
        why = "the reshape after the reduce-scatter ('" +
              reshape->getName().getStringRef().str() +
              "') does not keep its rows as blocks of one dimension";
        return nullptr;
      }
      dim = next;
    }
    if (!cast<RankedTensorType>(reshape->getResult(0).getType())
             .hasStaticShape()) {
      why = "a reshape after it is dynamic";
      return nullptr;
    }
    value = reshape->getResult(0);
  }
  if (!value.hasOneUse()) {
    why = value.use_empty() ? "its result is unused"
                            : "its result has several uses, so its sum "
                              "would be a kernel of its own";
    return nullptr;
  }
  return *value.user_begin();
}

CollectiveOpInterface overlap::hoistReshapes(RewriterBase &rewriter,
                                             CollectiveOpInterface op) {
  while (Operation *reshape = singleReshapeUser(op.getCollectiveResult())) {
    Operation *raw = op.getOperation();
    rewriter.setInsertionPoint(raw);
    auto resultType = cast<RankedTensorType>(reshape->getResult(0).getType());
    auto inputType = cast<RankedTensorType>(op.getInput().getType());
    Value input;
    IntegerAttr newDim;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(reshape)) {
      SmallVector<int64_t> shape(resultType.getShape());
      if (auto rs = dyn_cast<ReduceScatterOp>(raw)) {
        int64_t dim = *scatteredDim(expand, rs.getDim());
        shape[dim] *= inputType.getDimSize(rs.getDim()) /
                      rs.getResult().getType().getDimSize(rs.getDim());
        newDim = rewriter.getI64IntegerAttr(dim);
      }
      input = tensor::ExpandShapeOp::create(
          rewriter, expand.getLoc(),
          RankedTensorType::get(shape, inputType.getElementType()),
          op.getInput(), expand.getReassociationIndices());
    } else {
      auto collapse = cast<tensor::CollapseShapeOp>(reshape);
      input = tensor::CollapseShapeOp::create(
          rewriter, collapse.getLoc(), op.getInput(),
          collapse.getReassociationIndices());
    }
    Operation *moved = rewriter.clone(*raw);
    moved->setOperand(0, input);
    moved->getResult(0).setType(resultType);
    if (newDim)
      moved->setAttr("dim", newDim);
    rewriter.replaceOp(reshape, moved->getResults());
    rewriter.eraseOp(raw);
    op = cast<CollectiveOpInterface>(moved);
  }
  return op;
}
