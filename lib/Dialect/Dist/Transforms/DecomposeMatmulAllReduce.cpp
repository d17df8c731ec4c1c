//===- DecomposeMatmulAllReduce.cpp - All-reduce as RS ring + work + AG ---===//
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

#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

static std::string opName(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

FailureOr<MatmulAllReduce>
overlap::matchMatmulAllReduce(AllReduceOp op, ReplicationAnalysis &replication,
                              std::string &reason) {
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  if (isBitwise(op.getReduction())) {
    reason = "bitwise reductions are not decomposed";
    return failure();
  }
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

  // The row-wise work that may move across: every linalg op after the
  // all-reduce that reads its rows (or rows computed from them) row by
  // row, in program order; then trimmed until one value of it is used
  // after it.
  Block *block = op->getBlock();
  DenseMap<Value, int64_t> rowDim; // Value of the chain -> its rows' dim.
  // The last op of the block that uses a value of the chain: the scan
  // stops there, so that it stays linear in a program of many layers.
  Operation *horizon = op;
  auto add = [&](Value value, int64_t dim) {
    rowDim[value] = dim;
    for (Operation *user : value.getUsers())
      if (Operation *top = block->findAncestorOpInBlock(*user);
          top && horizon->isBeforeInBlock(top))
        horizon = top;
  };
  add(op.getResult(), match.dim);
  auto note = [&](const std::string &why) {
    if (match.chainStop.empty())
      match.chainStop = why;
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
    match.chain.push_back(linalgOp);
    match.chainLoops.push_back(*loop);
    add(next->getResult(0), *resultDim);
  }

  // Trim from the end until one value is used after the chain, by ops
  // that all come after its last op.
  while (true) {
    llvm::SmallPtrSet<Operation *, 8> inChain;
    for (linalg::LinalgOp c : match.chain)
      inChain.insert(c);
    SmallVector<Value> exits;
    bool late = true;
    Operation *lastOp =
        match.chain.empty() ? op.getOperation() : match.chain.back();
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
    consider(op.getResult());
    for (linalg::LinalgOp c : match.chain)
      consider(c->getResult(0));
    bool reducedLeaves =
        !match.chain.empty() && llvm::is_contained(exits, op.getResult());
    if (match.chain.empty() || (exits.size() <= 1 && late && !reducedLeaves)) {
      match.exit = exits.empty() ? Value(op.getResult()) : exits.front();
      break;
    }
    note(exits.size() > 1 || reducedLeaves
             ? "several values of the work after it are used later (only "
               "one is gathered back)"
             : "a use of the work after it comes before the work ends");
    match.chain.pop_back();
    match.chainLoops.pop_back();
  }
  match.exitDim = rowDim.lookup(match.exit);
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
  DenseMap<Value, Value> blocks;
  blocks[match.reduce.getResult()] = *block;
  for (auto [op, loop] : llvm::zip(match.chain, match.chainLoops)) {
    SmallVector<std::pair<unsigned, Value>> replacements;
    for (OpOperand &use : op->getOpOperands())
      if (Value b = blocks.lookup(use.get()))
        replacements.push_back({use.getOperandNumber(), b});
    FailureOr<Chunk> chunk = computeChunk(rewriter, op, loop, offset,
                                          match.blockSize, replacements, {});
    if (failed(chunk))
      return failure();
    blocks[op->getResult(0)] = chunk->value;
  }

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
