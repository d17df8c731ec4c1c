//===- RingMatmulAllReduce.cpp - rs_ring_ag, rs_ring_ew_ag -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// all_reduce(contraction) becomes the ring reduce-scatter fused with the
// contraction, then an all-gather. Elementwise work that follows the
// all-reduce (bias, residual, activation, scaling, casts) moves between the
// two, on 1/n of the data, but only when every other value it reads is
// proven replicated along the all-reduce's axes: a rank then computes on its
// block exactly what the unsplit program computes there. Anything unproven
// stays after the all-gather, with a remark saying why.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

static std::string opName(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

FailureOr<Ring> overlap::reducingRing(AllReduceOp op, std::string &reason) {
  if (isBitwise(op.getReduction())) {
    reason = "bitwise reductions are not decomposed";
    return failure();
  }
  return matchRing(op, reason);
}

RowChain overlap::matchRowChain(AllReduceOp op, Value rows, int64_t dim,
                                ReplicationAnalysis &replication,
                                bool severalExits) {
  RowChain match;
  // The row-wise work that may move across: every linalg op after the
  // all-reduce that reads its rows (or rows computed from them) row by
  // row, in program order; then trimmed until its values are used only
  // after it (and, unless `severalExits`, only one of them).
  Block *block = op->getBlock();
  DenseMap<Value, int64_t> rowDim; // Value of the chain -> its rows' dim.
  // The last op of the block that uses a value of the chain: the scan
  // stops there, so that it stays linear in a program of many layers.
  Operation *horizon = op;
  auto add = [&](Value value, int64_t d) {
    rowDim[value] = d;
    for (Operation *user : value.getUsers())
      if (Operation *top = block->findAncestorOpInBlock(*user);
          top && horizon->isBeforeInBlock(top))
        horizon = top;
  };
  add(rows, dim);
  auto note = [&](const std::string &why) {
    if (match.stop.empty())
      match.stop = why;
  };
  for (Operation *next = op->getNextNode();
       next && !horizon->isBeforeInBlock(next); next = next->getNextNode()) {
    bool reads = llvm::any_of(next->getOperands(),
                              [&](Value v) { return rowDim.count(v); });
    if (!reads)
      continue;
    auto linalgOp = dyn_cast<linalg::LinalgOp>(next);
    if (!linalgOp || !schedule::isMemoryBound(next) ||
        next->getNumResults() != 1) {
      if (!isa<func::ReturnOp>(next))
        note(opName(next) + " is not a memory-bound linalg op on tensors");
      continue;
    }
    // One loop indexes the rows of every operand from the chain, and it
    // is parallel and a dimension of the result.
    std::optional<unsigned> loop;
    std::string why;
    for (OpOperand &use : next->getOpOperands()) {
      auto found = rowDim.find(use.get());
      if (found == rowDim.end())
        continue;
      if (linalgOp.isDpsInit(&use)) {
        why = opName(next) + " accumulates into the reduced value";
        break;
      }
      std::optional<unsigned> l =
          loopOfOperandDim(linalgOp, use, found->second);
      if (!l || (loop && *l != *loop)) {
        why = opName(next) + " does not read the reduced value row by row "
                             "(it reshapes or transposes the scattered "
                             "dimension)";
        break;
      }
      loop = l;
    }
    std::optional<int64_t> resultDim =
        why.empty() ? resultDimOfLoop(linalgOp, *loop) : std::nullopt;
    if (why.empty() && (linalgOp.getIteratorTypesArray()[*loop] !=
                            utils::IteratorType::parallel ||
                        !resultDim))
      why = opName(next) + " reduces along the scattered dimension";
    if (why.empty()) {
      for (OpOperand &other : next->getOpOperands()) {
        if (rowDim.count(other.get()))
          continue;
        if (linalgOp.isDpsInit(&other) &&
            !linalgOp.payloadUsesValueFromOperand(&other))
          continue;
        std::string unproven;
        if (!replication.isReplicated(other.get(), op.getGridAttr(),
                                      op.getAxes(), unproven)) {
          why = "operand #" + std::to_string(other.getOperandNumber()) +
                " of " + opName(next) +
                " is not proven replicated along grid axis " +
                std::to_string(op.getAxes()[0]) + ": " + unproven;
          break;
        }
      }
    }
    if (!why.empty()) {
      note(why);
      continue;
    }
    match.ops.push_back(linalgOp);
    match.loops.push_back(*loop);
    add(next->getResult(0), *resultDim);
  }

  // Trim from the end until the values used after the chain (one, unless
  // `severalExits`) are used only by ops that all come after its last op.
  while (true) {
    llvm::SmallPtrSet<Operation *, 8> inChain;
    for (linalg::LinalgOp c : match.ops)
      inChain.insert(c);
    SmallVector<Value> exits;
    bool late = true;
    Operation *lastOp =
        match.ops.empty() ? op.getOperation() : match.ops.back();
    auto consider = [&](Value v) {
      bool used = false;
      for (Operation *user : v.getUsers()) {
        if (inChain.contains(user))
          continue;
        used = true;
        Operation *top = block->findAncestorOpInBlock(*user);
        if (!top || !lastOp->isBeforeInBlock(top))
          late = false;
      }
      if (used)
        exits.push_back(v);
    };
    consider(rows);
    for (linalg::LinalgOp c : match.ops)
      consider(c->getResult(0));
    bool reducedLeaves = !match.ops.empty() && llvm::is_contained(exits, rows);
    bool one = exits.size() <= 1 && !reducedLeaves;
    if (match.ops.empty() || (late && (one || severalExits))) {
      if (exits.empty())
        exits.push_back(rows);
      match.exits = exits;
      for (Value exit : exits)
        match.exitDims.push_back(rowDim.lookup(exit));
      break;
    }
    note(!one && !severalExits
             ? "several values of the work after it are used later (only "
               "one is gathered back)"
             : "a use of the work after it comes before the work ends");
    match.ops.pop_back();
    match.loops.pop_back();
  }
  return match;
}

DenseMap<Value, Value> overlap::chainOnBlock(RewriterBase &rewriter,
                                             Location loc,
                                             const RowChain &chain, Value rows,
                                             Value block, Value offset,
                                             int64_t blockSize) {
  DenseMap<Value, Value> blocks;
  blocks[rows] = block;
  for (auto [op, loop] : llvm::zip(chain.ops, chain.loops)) {
    SmallVector<std::pair<unsigned, Value>> replacements;
    for (OpOperand &use : op->getOpOperands())
      if (Value b = blocks.lookup(use.get()))
        replacements.push_back({use.getOperandNumber(), b});
    FailureOr<Chunk> chunk =
        computeChunk(rewriter, op, loop, offset, blockSize, replacements, {});
    if (failed(chunk))
      return DenseMap<Value, Value>();
    blocks[op->getResult(0)] = chunk->value;
  }
  return blocks;
}

FailureOr<MatmulAllReduce>
overlap::matchMatmulAllReduce(AllReduceOp op, ReplicationAnalysis &replication,
                              std::string &reason) {
  FailureOr<Ring> ring = reducingRing(op, reason);
  if (failed(ring))
    return failure();
  linalg::LinalgOp producer =
      reducingProducer(op.getInput(), op->getBlock(), reason);
  if (!producer)
    return failure();
  MatmulAllReduce match;
  match.reduce = op;
  match.producer = producer;
  match.ring = *ring;
  // Scatter along the first result dimension that is a parallel loop and
  // divides by the group size; the leading one keeps blocks contiguous.
  auto type = op.getInput().getType();
  std::string why;
  bool found = false;
  for (int64_t dim = 0; dim < type.getRank() && !found; ++dim) {
    if (type.getDimSize(dim) % ring->groupSize != 0)
      continue;
    if (std::optional<unsigned> loop = scatterLoop(producer, dim, why)) {
      match.loop = *loop;
      match.dim = dim;
      match.blockSize = type.getDimSize(dim) / ring->groupSize;
      found = true;
    }
  }
  if (!found) {
    reason = "no result dimension of " + opName(producer) +
             " is a parallel loop divisible by the group size " +
             std::to_string(ring->groupSize);
    return failure();
  }

  RowChain chain = matchRowChain(op, op.getResult(), match.dim, replication,
                                 /*severalExits=*/false);
  match.chain = std::move(chain.ops);
  match.chainLoops = std::move(chain.loops);
  match.chainStop = std::move(chain.stop);
  match.exit = chain.exits.front();
  match.exitDim = chain.exitDims.front();
  return match;
}

FailureOr<AllGatherOp> overlap::decomposeMatmulAllReduce(RewriterBase &rewriter,
                                                         MatmulAllReduce match,
                                                         RingOptions options) {
  // Every operand of the moved work dominates the last op of the chain.
  Operation *last = match.chain.empty() ? match.reduce.getOperation()
                                        : match.chain.back().getOperation();
  rewriter.setInsertionPoint(last);
  Location loc = match.reduce.getLoc();
  FailureOr<Value> block = buildRingReduceScatter(
      rewriter, loc, match.producer, match.loop, match.dim, match.blockSize,
      match.ring, match.reduce.getReduction(), options);
  if (failed(block))
    return failure();

  // The chain on this rank's block only.
  Value position =
      groupPosition(rewriter, loc, match.ring.grid, match.ring.axis);
  Value offset = affineIndex(rewriter, loc, position, match.blockSize, 0);
  RowChain chain{match.chain, match.chainLoops, {match.exit}, {}, {}};
  DenseMap<Value, Value> blocks =
      chainOnBlock(rewriter, loc, chain, match.reduce.getResult(), *block,
                   offset, match.blockSize);
  if (blocks.empty())
    return failure();

  Value current = blocks.lookup(match.exit);
  auto blockType = cast<RankedTensorType>(current.getType());
  SmallVector<int64_t> shape(blockType.getShape());
  shape[match.exitDim] *= match.ring.groupSize;
  auto gathered = AllGatherOp::create(
      rewriter, loc, RankedTensorType::get(shape, blockType.getElementType()),
      match.ring.grid, rewriter.getDenseI16ArrayAttr({match.ring.axis}),
      current, rewriter.getI64IntegerAttr(match.exitDim));
  rewriter.replaceAllUsesWith(match.exit, gathered);
  for (linalg::LinalgOp op : llvm::reverse(match.chain))
    rewriter.eraseOp(op);
  rewriter.eraseOp(match.reduce);
  rewriter.eraseOp(match.producer);
  return gathered;
}

//===- The pattern --------------------------------------------------------===//

/// rs_ring_ag / rs_ring_ew_ag: the reduce-scatter ring, the row-wise chain
/// on 1/n of the rows, then the all-gather (made asynchronous once every
/// schedule is decided).
static void proposeRingMatmulAllReduce(AllReduceOp reduce, Site site,
                                       Context &context,
                                       SmallVectorImpl<Candidate> &out,
                                       std::string &why) {
  FailureOr<MatmulAllReduce> match =
      matchMatmulAllReduce(reduce, context.replication, why);
  if (failed(match))
    return;
  if (!match->chainStop.empty())
    reduce->emitRemark() << "elementwise work stays after the all-reduce: "
                         << match->chainStop;
  const CostModel &cost = context.model;
  int64_t n = site.groupSize;
  double chainFull = 0, chainPart = 0;
  for (linalg::LinalgOp e : match->chain) {
    chainFull += cost.computeTime(e);
    chainPart += cost.computeTime(e, 1.0 / n);
  }
  double gather =
      cost.collectiveTime("all_gather", tensorBytes(match->exit), n, site.link);
  double blockBytes = tensorBytes(reduce.getInput()) / n;
  for (RingOptions options : context.ringLayouts(match->blockSize)) {
    // The reduce-scatter ring, then the chain on 1/n, then the gather.
    Candidate c = ringCandidate(
        site, context, match->chain.empty() ? "rs_ring_ag" : "rs_ring_ew_ag",
        options, match->producer, match->loop, blockBytes, true);
    c.compute += chainFull;
    c.serial = c.compute + site.comm;
    c.overlapped = c.overlapped + chainPart + gather;
    c.apply = [m = *match, options](RewriterBase &r, FollowUps &followUps) {
      FailureOr<AllGatherOp> gather = decomposeMatmulAllReduce(r, m, options);
      if (failed(gather))
        return failure();
      // The all-gather the rewrite leaves overlaps what follows it.
      followUps.async.push_back(*gather);
      return success();
    };
    out.push_back(std::move(c));
  }
}

std::unique_ptr<OverlapPattern> overlap::createRingMatmulAllReducePattern() {
  return makePattern<AllReduceOp>(Family::Fused, "ring",
                                  proposeRingMatmulAllReduce);
}
