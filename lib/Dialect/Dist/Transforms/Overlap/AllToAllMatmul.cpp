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

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

FailureOr<AllToAllMatmul> overlap::matchAllToAllMatmul(AllToAllOp op,
                                                       std::string &reason) {
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  AllToAllMatmul match;
  match.exchange = op;
  match.ring = *ring;

  // Dispatch: the exchanged value feeds one contraction.
  Value result = op.getResult();
  if (result.hasOneUse()) {
    OpOperand &use = *result.use_begin();
    auto consumer = dyn_cast<linalg::LinalgOp>(use.getOwner());
    std::string empty = consumer ? emptyLoop(consumer) : "";
    if (!empty.empty())
      reason = "'" + consumer->getName().getStringRef().str() +
               "' computes no elements (" + empty + ")";
    else if (consumer && consumer.getNumReductionLoops() > 0 &&
             consumer.hasPureTensorSemantics() &&
             consumer->getNumResults() == 1 && consumer.isDpsInput(&use) &&
             consumer->getBlock() == op->getBlock()) {
      std::optional<unsigned> loop =
          loopOfOperandDim(consumer, use, op.getConcatDim());
      if (loop &&
          consumer.getIteratorTypesArray()[*loop] ==
              utils::IteratorType::parallel &&
          resultDimOfLoop(consumer, *loop)) {
        match.compute = consumer;
        match.dispatch = true;
        match.operand = use.getOperandNumber();
        match.loop = *loop;
        return match;
      }
      reason = "the concatenated dimension is not a parallel loop of '" +
               consumer->getName().getStringRef().str() + "'";
    }
  }

  // Combine: the exchanged value is computed by one contraction.
  std::string why;
  linalg::LinalgOp producer = soleProducer(op.getInput(), op->getBlock(), why);
  if (producer && producer.getNumReductionLoops() > 0) {
    if (std::optional<unsigned> loop =
            scatterLoop(producer, op.getSplitDim(), why)) {
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
    linalg::LinalgOp consumer = match.compute;
    rewriter.setInsertionPoint(consumer);
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
    Value acc = consumer.getDpsInitOperand(0)->get();
    auto computeOn = [&](Value data, int64_t delta) -> LogicalResult {
      Value owner = ringIndex(rewriter, loc, position, delta, n);
      FailureOr<Chunk> chunk =
          computeChunk(rewriter, consumer, match.loop,
                       affineIndex(rewriter, loc, owner, concatBlock, 0),
                       concatBlock, {{match.operand, data}}, acc);
      if (failed(chunk))
        return failure();
      acc = insertChunk(rewriter, loc, *chunk, acc);
      return success();
    };
    if (failed(computeOn(block(0), 0)))
      return failure();
    for (int64_t t = 1; t < n; ++t)
      if (failed(computeOn(waitFor(rewriter, loc, started[t - 1]), -t)))
        return failure();
    rewriter.replaceOp(consumer, acc);
    rewriter.eraseOp(op);
    return success();
  }

  linalg::LinalgOp producer = match.compute;
  rewriter.setInsertionPoint(op);
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
  auto computeFor = [&](int64_t delta) -> FailureOr<Value> {
    Value dest = ringIndex(rewriter, loc, position, delta, n);
    FailureOr<Chunk> chunk = computeChunk(
        rewriter, producer, match.loop,
        affineIndex(rewriter, loc, dest, splitBlock, 0), splitBlock, {}, {});
    if (failed(chunk))
      return failure();
    return chunk->value;
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
  double compute = cost.computeTime(match->compute);
  double piece = cost.computeTime(match->compute, 1.0 / n, match->loop);
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
