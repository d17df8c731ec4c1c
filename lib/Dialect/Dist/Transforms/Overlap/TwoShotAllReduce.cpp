//===- TwoShotAllReduce.cpp - two_shot_ar ----------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// all_reduce -> row-wise chain in two shots: each peer gets its block of
// the partial (a direct reduce-scatter), the peers' blocks are summed in
// the kernel of the chain on this rank's rows, and every value the chain
// leaves goes back to every peer by direct puts. The chain's other
// operands must be proven replicated, as for rs_ring_ew_ag.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

FailureOr<TwoShotAllReduce>
overlap::matchTwoShotAllReduce(AllReduceOp op, ReplicationAnalysis &replication,
                               std::string &reason) {
  FailureOr<Ring> ring = reducingRing(op, reason);
  if (failed(ring))
    return failure();
  // The rows the chain reads: the all-reduce's result, or the reshapes of
  // it that hoistReshapes moves above it.
  Value rows = op.getResult();
  while (
      rows.hasOneUse() &&
      isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(*rows.user_begin()))
    rows = rows.user_begin()->getResult(0);
  auto type = cast<RankedTensorType>(rows.getType());
  if (!type.hasStaticShape()) {
    reason = "its rows are not statically shaped";
    return failure();
  }
  // The first dimension that is not 1 is split, so that each rank's block
  // is contiguous (the sequence, when the batch is 1).
  int64_t n = ring->groupSize;
  int64_t dim = 0;
  while (dim + 1 < type.getRank() && type.getDimSize(dim) == 1)
    ++dim;
  if (type.getRank() == 0 || type.getDimSize(dim) % n != 0) {
    reason =
        "its leading rows do not split into " + std::to_string(n) + " blocks";
    return failure();
  }
  TwoShotAllReduce match;
  match.reduce = op;
  match.ring = *ring;
  match.dim = dim;
  match.blockSize = type.getDimSize(dim) / n;
  match.chain = matchRowChain(op, rows, dim, replication,
                              /*severalExits=*/true);
  if (match.chain.ops.empty()) {
    reason = "no row-wise work on its rows follows it" +
             (match.chain.stop.empty() ? std::string()
                                       : " (" + match.chain.stop + ")");
    return failure();
  }
  return match;
}

FailureOr<SmallVector<AllGatherOp>>
overlap::decomposeTwoShotAllReduce(RewriterBase &rewriter, AllReduceOp reduce,
                                   ReplicationAnalysis &analysis) {
  // The reshapes move above the all-reduce first; the chain is then read
  // off the rewritten IR.
  auto hoisted = cast<AllReduceOp>(
      hoistReshapes(rewriter, cast<CollectiveOpInterface>(*reduce))
          .getOperation());
  // The reshapes it erased may be in the analysis' cache.
  analysis.invalidate();
  std::string why;
  FailureOr<TwoShotAllReduce> match =
      matchTwoShotAllReduce(hoisted, analysis, why);
  if (failed(match))
    return failure();
  const RowChain &chain = match->chain;
  Ring ring = match->ring;
  int64_t n = ring.groupSize;
  Location loc = hoisted.getLoc();
  rewriter.setInsertionPoint(chain.ops.back());
  Value input = hoisted.getInput();
  auto inputType = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> blockShape(inputType.getShape());
  blockShape[match->dim] = match->blockSize;
  auto scatter = ReduceScatterOp::create(
      rewriter, loc,
      RankedTensorType::get(blockShape, inputType.getElementType()),
      hoisted.getGridAttr(), hoisted.getAxesAttr(), input,
      rewriter.getI64IntegerAttr(match->dim), hoisted.getReductionAttr());
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
  Value offset = affineIndex(rewriter, loc, position, match->blockSize, 0);
  DenseMap<Value, Value> blocks =
      chainOnBlock(rewriter, loc, chain, hoisted.getResult(),
                   scatter.getResult(), offset, match->blockSize);
  if (blocks.empty())
    return failure();

  // Each value used after the chain comes back whole, from every rank's
  // block.
  SmallVector<AllGatherOp> gathers;
  for (auto [exit, exitDim] : llvm::zip(chain.exits, chain.exitDims)) {
    Value current = blocks.lookup(exit);
    auto blockType = cast<RankedTensorType>(current.getType());
    SmallVector<int64_t> shape(blockType.getShape());
    shape[exitDim] *= n;
    auto gathered = AllGatherOp::create(
        rewriter, loc, RankedTensorType::get(shape, blockType.getElementType()),
        ring.grid, rewriter.getDenseI16ArrayAttr({ring.axis}), current,
        rewriter.getI64IntegerAttr(exitDim));
    rewriter.replaceAllUsesWith(exit, gathered);
    gathers.push_back(gathered);
  }
  for (linalg::LinalgOp op : llvm::reverse(chain.ops))
    rewriter.eraseOp(op);
  rewriter.eraseOp(hoisted);

  // The peers' partial blocks are summed in the chain's kernel (one shot
  // of blocks).
  if (failed(directExchange(rewriter, scatter, /*oneShot=*/true)))
    return failure();
  return gathers;
}

//===- The pattern --------------------------------------------------------===//

/// two_shot_ar: each peer's block of the partial summed inside the kernel of
/// the row-wise chain on this rank's rows, then what the chain leaves put to
/// every peer.
static void proposeTwoShotAllReduce(AllReduceOp op, Site site, Context &context,
                                    SmallVectorImpl<Candidate> &out,
                                    std::string &why) {
  if (context.options.fuseCollectives == braid::FuseCollectivesMode::OneShot) {
    why = "fuse-collectives=one-shot";
    return;
  }
  FailureOr<TwoShotAllReduce> match =
      matchTwoShotAllReduce(op, context.replication, why);
  if (failed(match))
    return;
  const CostModel &cost = context.model;
  int64_t n = match->ring.groupSize;
  double bytes = tensorBytes(op.getInput());
  double exits = 0;
  for (Value exit : match->chain.exits)
    exits += tensorBytes(exit);
  double chainFull = 0, chainPart = 0;
  for (linalg::LinalgOp e : match->chain.ops) {
    chainFull += cost.computeTime(e);
    chainPart += cost.computeTime(e, 1.0 / n);
  }
  // Each peer gets its block of the partial, then every block of each
  // value the chain leaves.
  double sent = (n - 1) * (bytes + exits) / n;
  Operation *head = match->chain.ops.front();
  Candidate c;
  c.strategy = "two_shot_ar";
  c.family = Family::InKernel;
  c.with = nameOf(head);
  c.chunks = (n - 1) * (1 + static_cast<int64_t>(match->chain.exits.size()));
  c.kernel =
      "the kernel of '" + nameOf(head) + "' at " + formatLoc(head->getLoc());
  c.saving = "moves " + schedule::formatBytes(sent) +
             " per rank to the peers (a ring all-reduce: " +
             schedule::formatBytes(2.0 * (n - 1) / n * bytes) + "), runs " +
             std::to_string(match->chain.ops.size()) +
             " ops of the chain on 1/" + std::to_string(n) +
             " of the rows and gathers back " +
             std::to_string(match->chain.exits.size()) + " of its values";
  c.compute = chainFull;
  c.serial = site.comm + chainFull;
  // Two rounds of puts; the kernel reads n partial blocks where the
  // unfused chain reads one, runs on 1/n of the rows, and what arrives
  // is assembled into the gathered values.
  LinkFigures link = site.link;
  c.overlapped = 2 * link.latency + sent / link.bandwidth +
                 cost.streamTime(std::max<double>(0, (n - 2) * bytes / n)) +
                 chainPart + cost.streamTime(2 * exits * (n - 1) / n);
  ReplicationAnalysis *replication = &context.replication;
  c.apply = [op, replication](RewriterBase &rewriter,
                              FollowUps &followUps) -> LogicalResult {
    FailureOr<SmallVector<AllGatherOp>> gathers =
        decomposeTwoShotAllReduce(rewriter, op, *replication);
    if (failed(gathers))
      return failure();
    for (AllGatherOp gather : *gathers)
      followUps.direct.push_back(gather);
    return success();
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createTwoShotAllReducePattern() {
  return makePattern<AllReduceOp>(Family::InKernel, "two shot",
                                  proposeTwoShotAllReduce);
}
