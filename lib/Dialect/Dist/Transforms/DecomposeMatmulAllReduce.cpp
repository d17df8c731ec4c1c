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

  // The elementwise chain that may move across.
  Value value = op.getResult();
  while (true) {
    if (!value.hasOneUse()) {
      if (!value.use_empty() && match.chain.empty())
        match.chainStop = "the all-reduce result has several uses";
      break;
    }
    OpOperand &use = *value.use_begin();
    auto next = dyn_cast<linalg::LinalgOp>(use.getOwner());
    if (!next || !next.hasPureTensorSemantics() ||
        next->getBlock() != op->getBlock()) {
      if (!isa<func::ReturnOp>(use.getOwner()))
        match.chainStop = opName(use.getOwner()) +
                          " is not an elementwise linalg op on tensors";
      break;
    }
    if (!next.isDpsInput(&use) || !isElementwiseIn(next, use)) {
      match.chainStop = opName(next) + " is not elementwise in the reduced "
                                       "value (it reduces or reshapes it)";
      break;
    }
    std::string unproven;
    for (OpOperand &other : next->getOpOperands()) {
      if (&other == &use)
        continue;
      if (other.get() == value) {
        unproven = opName(next) + " reads the reduced value twice";
        break;
      }
      if (next.isDpsInit(&other) && !next.payloadUsesValueFromOperand(&other))
        continue;
      std::string why;
      if (!replication.isReplicated(other.get(), op.getGridAttr(), op.getAxes(),
                                    why)) {
        unproven = "operand #" + std::to_string(other.getOperandNumber()) +
                   " of " + opName(next) +
                   " is not proven replicated along grid axis " +
                   std::to_string(op.getAxes()[0]) + ": " + why;
        break;
      }
    }
    if (!unproven.empty()) {
      match.chainStop = unproven;
      break;
    }
    match.chain.push_back(next);
    value = next->getResult(0);
  }
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
  Value current = *block;
  Value chained = match.reduce.getResult();
  for (linalg::LinalgOp op : match.chain) {
    unsigned operand = 0;
    for (OpOperand &use : op->getOpOperands())
      if (use.get() == chained)
        operand = use.getOperandNumber();
    FailureOr<Chunk> chunk =
        computeChunk(rewriter, op, match.dim, offset, match.blockSize,
                     {{operand, current}}, {});
    if (failed(chunk))
      return failure();
    current = chunk->value;
    chained = op->getResult(0);
  }

  auto blockType = cast<RankedTensorType>(current.getType());
  SmallVector<int64_t> shape(blockType.getShape());
  shape[match.dim] *= match.ring.groupSize;
  auto gathered = AllGatherOp::create(
      rewriter, loc, RankedTensorType::get(shape, blockType.getElementType()),
      match.ring.grid, rewriter.getDenseI16ArrayAttr({match.ring.axis}),
      current, rewriter.getI64IntegerAttr(match.dim));
  rewriter.replaceAllUsesWith(chained, gathered);
  for (linalg::LinalgOp op : llvm::reverse(match.chain))
    rewriter.eraseOp(op);
  rewriter.eraseOp(match.reduce);
  rewriter.eraseOp(match.producer);
  return gathered;
}
