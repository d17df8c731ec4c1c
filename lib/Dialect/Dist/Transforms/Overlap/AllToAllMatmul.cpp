//===- AllToAllMatmul.cpp - a2a_dispatch, a2a_combine ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Expert parallelism exchanges tokens with all_to_all before the expert
// computation (dispatch) and after it (combine). Both become per-peer
// exchanges (one shift by t positions for each t in 1..n-1), so that:
// - dispatch: the computation on the block a rank keeps starts at once, and
//   each arriving block is computed on while later ones are still in flight;
// - combine: the block for each peer is sent as soon as it is computed,
//   while the blocks for the following peers are computed.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

/// Whether `value` is available before `point` (in its block), or can be
/// made so by moving the side-effect-free ops that compute it there
/// (`move` does so): a later contraction's weight, viewed after the first
/// contraction the rows feed.
static bool availableBefore(Value value, Operation *point,
                            RewriterBase *move = nullptr, int depth = 0) {
  Operation *def = value.getDefiningOp();
  if (!def || def->getBlock() != point->getBlock() ||
      def->isBeforeInBlock(point))
    return true;
  // Linalg ops on tensors compute their regions on elements alone.
  auto linalgOp = dyn_cast<linalg::LinalgOp>(def);
  bool regionsPure = def->getNumRegions() == 0 ||
                     (linalgOp && linalgOp.hasPureTensorSemantics());
  if (def == point || depth > 8 || !regionsPure || !isMemoryEffectFree(def))
    return false;
  for (Value operand : def->getOperands())
    if (!availableBefore(operand, point, move, depth + 1))
      return false;
  if (move)
    move->moveOpBefore(def, point);
  return true;
}

/// `data`, a peer's block of the value `view` reads, through `view` (a
/// linalg.transpose, tensor.collapse_shape or tensor.expand_shape) as the
/// whole value went: the block differs from the whole along one dimension,
/// which an expand gives to the outermost dimension of more than one
/// element of its group.
static Value applyView(RewriterBase &rewriter, Location loc, Operation *view,
                       Value data) {
  auto type = cast<RankedTensorType>(data.getType());
  if (auto transpose = dyn_cast<linalg::TransposeOp>(view)) {
    SmallVector<int64_t> shape;
    for (int64_t p : transpose.getPermutation())
      shape.push_back(type.getDimSize(p));
    Value init =
        tensor::EmptyOp::create(rewriter, loc, shape, type.getElementType());
    return linalg::TransposeOp::create(rewriter, loc, data, init,
                                       transpose.getPermutation())
        ->getResult(0);
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(view))
    return tensor::CollapseShapeOp::create(rewriter, loc, data,
                                           collapse.getReassociationIndices());
  auto expand = cast<tensor::ExpandShapeOp>(view);
  SmallVector<int64_t> shape(expand.getResultType().getShape());
  for (auto [source, group] :
       llvm::enumerate(expand.getReassociationIndices())) {
    int64_t rest = 1;
    const int64_t *outer =
        llvm::find_if(group, [&](int64_t d) { return shape[d] != 1; });
    if (outer == group.end())
      continue;
    for (int64_t d : group)
      if (d != *outer)
        rest *= shape[d];
    shape[*outer] = type.getDimSize(source) / rest;
  }
  return tensor::ExpandShapeOp::create(
      rewriter, loc, RankedTensorType::get(shape, type.getElementType()), data,
      expand.getReassociationIndices());
}

/// The group of `groups` holding `dim` when `dim` is its outermost
/// dimension of more than one element (`shape` the side the groups index
/// into), and the product of the group's dimensions inside it; a block of
/// `dim` is then a block of the group's collapsed dimension.
static std::optional<std::pair<int64_t, int64_t>>
outermostInGroup(ArrayRef<ReassociationIndices> groups, ArrayRef<int64_t> shape,
                 int64_t dim) {
  for (auto [index, group] : llvm::enumerate(groups)) {
    if (!llvm::is_contained(group, dim))
      continue;
    int64_t inner = 1;
    for (int64_t d : group) {
      if (d < dim && shape[d] != 1)
        return std::nullopt;
      if (d > dim)
        inner *= shape[d];
    }
    if (ShapedType::isDynamic(inner))
      return std::nullopt;
    return std::make_pair(static_cast<int64_t>(index), inner);
  }
  return std::nullopt;
}

FailureOr<AllToAllMatmul> overlap::matchAllToAllMatmul(AllToAllOp op,
                                                       std::string &reason) {
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  AllToAllMatmul match;
  match.exchange = op;
  match.ring = *ring;

  // Dispatch: the exchanged value feeds one contraction, directly or
  // through views that keep each peer's block contiguous along one
  // dimension (the rows of HuggingFace experts with a capacity per rank's
  // tokens: [groups, experts, ...] transposed and collapsed).
  Value result = op.getResult();
  int64_t dim = op.getConcatDim();
  while (result.hasOneUse()) {
    Operation *user = *result.getUsers().begin();
    if (user->getBlock() != op->getBlock())
      break;
    if (auto transpose = dyn_cast<linalg::TransposeOp>(user)) {
      if (transpose.getInput() != result)
        break;
      dim = llvm::find(transpose.getPermutation(), dim) -
            transpose.getPermutation().begin();
    } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(user)) {
      auto at = outermostInGroup(collapse.getReassociationIndices(),
                                 collapse.getSrcType().getShape(), dim);
      if (!at)
        break;
      dim = at->first;
      match.scale *= at->second;
    } else {
      break;
    }
    match.views.push_back(user);
    result = user->getResult(0);
  }
  // The contractions it feeds (several: HuggingFace's gate and up
  // projections read the same rows), each along a parallel loop.
  for (OpOperand &use : result.getUses()) {
    auto consumer = dyn_cast<linalg::LinalgOp>(use.getOwner());
    std::string empty = consumer ? emptyLoop(consumer) : "";
    std::optional<unsigned> loop;
    if (!empty.empty()) {
      reason = "'" + consumer->getName().getStringRef().str() +
               "' computes no elements (" + empty + ")";
    } else if (consumer && consumer.getNumReductionLoops() > 0 &&
               consumer.hasPureTensorSemantics() &&
               consumer->getNumResults() == 1 && consumer.isDpsInput(&use) &&
               consumer->getBlock() == op->getBlock()) {
      loop = loopOfOperandDim(consumer, use, dim);
      if (!loop ||
          consumer.getIteratorTypesArray()[*loop] !=
              utils::IteratorType::parallel ||
          !resultDimOfLoop(consumer, *loop)) {
        loop.reset();
        reason = "the concatenated dimension is not a parallel loop of '" +
                 consumer->getName().getStringRef().str() + "'";
      }
    }
    if (!loop) {
      match.feeds.clear();
      break;
    }
    match.feeds.push_back({consumer, use.getOperandNumber(), *loop});
  }
  // In program order. Every block computes every contraction where the
  // first of them was: what the later ones read must be there by then.
  llvm::sort(match.feeds,
             [](const AllToAllMatmul::Feed &a, const AllToAllMatmul::Feed &b) {
               return a.op->isBeforeInBlock(b.op);
             });
  Operation *first =
      match.feeds.empty() ? nullptr : match.feeds.front().op.getOperation();
  bool available = true;
  for (const AllToAllMatmul::Feed &feed : match.feeds)
    for (Value operand : feed.op->getOperands())
      if (available && !availableBefore(operand, first)) {
        reason = "'" + feed.op->getName().getStringRef().str() +
                 "' reads a value computed with side effects after '" +
                 first->getName().getStringRef().str() + "'";
        available = false;
      }
  if (!available)
    match.feeds.clear();
  if (!match.feeds.empty()) {
    match.compute = match.feeds.front().op;
    match.dispatch = true;
    return match;
  }

  // Combine: the exchanged value is computed by one contraction, directly
  // or through views that keep each peer's block contiguous (the experts'
  // outputs expanded to [experts, ranks, capacity, ...] and transposed).
  match.views.clear();
  match.scale = 1;
  Value source = op.getInput();
  dim = op.getSplitDim();
  while (Operation *def = source.getDefiningOp()) {
    if (!source.hasOneUse() || def->getBlock() != op->getBlock())
      break;
    Value from;
    if (auto transpose = dyn_cast<linalg::TransposeOp>(def)) {
      dim = transpose.getPermutation()[dim];
      from = transpose.getInput();
    } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
      auto at = outermostInGroup(expand.getReassociationIndices(),
                                 expand.getResultType().getShape(), dim);
      if (!at)
        break;
      dim = at->first;
      match.scale *= at->second;
      from = expand.getSrc();
    } else {
      break;
    }
    match.views.push_back(def);
    source = from;
  }
  std::reverse(match.views.begin(), match.views.end());
  std::string why;
  linalg::LinalgOp producer = soleProducer(source, op->getBlock(), why);
  if (producer && producer.getNumReductionLoops() > 0) {
    if (std::optional<unsigned> loop = scatterLoop(producer, dim, why)) {
      match.compute = producer;
      match.dispatch = false;
      match.loop = *loop;
      return match;
    }
  }
  if (reason.empty())
    reason = "neither feeds nor is fed by a linalg computation per block (" +
             why + ")";
  return failure();
}

LogicalResult overlap::decomposeAllToAllMatmul(RewriterBase &rewriter,
                                               AllToAllMatmul match) {
  AllToAllOp op = match.exchange;
  const Ring &ring = match.ring;
  int64_t n = ring.groupSize;
  int64_t split = op.getSplitDim(), concat = op.getConcatDim();
  auto inType = op.getInput().getType();
  auto outType = op.getResult().getType();
  int64_t splitBlock = inType.getDimSize(split) / n;
  int64_t concatBlock = outType.getDimSize(concat) / n;
  Location loc = op.getLoc();

  if (match.dispatch) {
    // Before the first contraction the rows feed (feeds are in program
    // order), with what the later ones read.
    Operation *first = match.feeds.front().op;
    for (const AllToAllMatmul::Feed &feed : match.feeds)
      for (Value operand : feed.op->getOperands())
        (void)availableBefore(operand, first, &rewriter);
    rewriter.setInsertionPoint(first);
    Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
    Value input = op.getInput();
    auto block = [&](int64_t delta) {
      Value index = ringIndex(rewriter, loc, position, delta, n);
      return sliceAlong(rewriter, loc, input, split,
                        affineIndex(rewriter, loc, index, splitBlock, 0),
                        splitBlock);
    };
    // Post every exchange first: the one with the peer t positions away
    // sends it the block it needs and receives the block meant for us.
    SmallVector<std::pair<Value, Value>> started;
    for (int64_t t = 1; t < n; ++t)
      started.push_back(
          startShift(rewriter, loc, block(t), ring.grid, ring.axis, t, t));
    // A peer's block through the views the whole result went through.
    auto view = [&](Value data) {
      for (Operation *v : match.views)
        data = applyView(rewriter, loc, v, data);
      return data;
    };
    int64_t rows = concatBlock * match.scale;
    SmallVector<Value> accs;
    for (AllToAllMatmul::Feed &feed : match.feeds)
      accs.push_back(feed.op.getDpsInitOperand(0)->get());
    auto computeOn = [&](Value data, int64_t delta) -> LogicalResult {
      Value owner = ringIndex(rewriter, loc, position, delta, n);
      Value rowsData = view(data);
      for (auto [feed, acc] : llvm::zip(match.feeds, accs)) {
        FailureOr<Chunk> chunk =
            computeChunk(rewriter, feed.op, feed.loop,
                         affineIndex(rewriter, loc, owner, rows, 0), rows,
                         {{feed.operand, rowsData}}, acc);
        if (failed(chunk))
          return failure();
        acc = insertChunk(rewriter, loc, *chunk, acc);
      }
      return success();
    };
    if (failed(computeOn(block(0), 0)))
      return failure();
    for (int64_t t = 1; t < n; ++t)
      if (failed(computeOn(waitFor(rewriter, loc, started[t - 1]), -t)))
        return failure();
    for (auto [feed, acc] : llvm::zip(match.feeds, accs))
      rewriter.replaceOp(feed.op, acc);
    for (Operation *v : llvm::reverse(match.views))
      rewriter.eraseOp(v);
    rewriter.eraseOp(op);
    return success();
  }

  linalg::LinalgOp producer = match.compute;
  rewriter.setInsertionPoint(op);
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
  int64_t rows = splitBlock * match.scale;
  auto computeFor = [&](int64_t delta) -> FailureOr<Value> {
    Value dest = ringIndex(rewriter, loc, position, delta, n);
    FailureOr<Chunk> chunk =
        computeChunk(rewriter, producer, match.loop,
                     affineIndex(rewriter, loc, dest, rows, 0), rows, {}, {});
    if (failed(chunk))
      return failure();
    // Through the views the whole result went through.
    Value block = chunk->value;
    for (Operation *v : match.views)
      block = applyView(rewriter, loc, v, block);
    return block;
  };
  // Each peer's block leaves as soon as it is computed.
  SmallVector<std::pair<Value, Value>> started;
  for (int64_t t = 1; t < n; ++t) {
    FailureOr<Value> block = computeFor(t);
    if (failed(block))
      return failure();
    started.push_back(
        startShift(rewriter, loc, *block, ring.grid, ring.axis, t, t));
  }
  FailureOr<Value> own = computeFor(0);
  if (failed(own))
    return failure();
  Value result = tensor::EmptyOp::create(rewriter, loc, outType.getShape(),
                                         outType.getElementType());
  auto place = [&](Value block, int64_t delta) {
    Value owner = ringIndex(rewriter, loc, position, delta, n);
    result = insertAlong(rewriter, loc, block, result, concat,
                         affineIndex(rewriter, loc, owner, concatBlock, 0));
  };
  place(*own, 0);
  for (int64_t t = 1; t < n; ++t)
    place(waitFor(rewriter, loc, started[t - 1]), -t);
  rewriter.replaceOp(op, result);
  for (Operation *v : llvm::reverse(match.views))
    rewriter.eraseOp(v);
  rewriter.eraseOp(producer);
  return success();
}

//===- The pattern --------------------------------------------------------===//

/// a2a_dispatch / a2a_combine: per-peer exchanges pipelined with the
/// computation on the blocks.
static void proposeAllToAllMatmul(AllToAllOp exchange, Site site,
                                  Context &context,
                                  SmallVectorImpl<Candidate> &out,
                                  std::string &why) {
  FailureOr<AllToAllMatmul> match = matchAllToAllMatmul(exchange, why);
  if (failed(match))
    return;
  const CostModel &cost = context.model;
  int64_t n = site.groupSize;
  double compute = 0, piece = 0;
  if (match->dispatch) {
    for (const AllToAllMatmul::Feed &feed : match->feeds) {
      compute += cost.computeTime(feed.op);
      piece += cost.computeTime(feed.op, 1.0 / n, feed.loop);
    }
  } else {
    compute = cost.computeTime(match->compute);
    piece = cost.computeTime(match->compute, 1.0 / n, match->loop);
  }
  Candidate c;
  c.strategy = match->dispatch ? "a2a_dispatch" : "a2a_combine";
  c.with = nameOf(match->compute);
  c.chunks = n;
  c.compute = compute;
  c.serial = compute + site.comm;
  c.overlapped = context.pipeline(piece, n, site.comm / (n - 1), n - 1);
  c.apply = [m = *match](RewriterBase &r, FollowUps &) {
    return decomposeAllToAllMatmul(r, m);
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createAllToAllMatmulPattern() {
  return makePattern<AllToAllOp>(Family::Fused, "per peer",
                                 proposeAllToAllMatmul);
}
