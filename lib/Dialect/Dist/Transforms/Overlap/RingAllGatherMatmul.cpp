//===- RingAllGatherMatmul.cpp - ring_ag_matmul ----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// all_gather(x) feeding a contraction becomes a ring: at step s a rank
// computes on the chunk it holds (its own at s = 0) while forwarding that
// chunk to its neighbour, so that after n steps it has computed on every
// chunk and each transfer but the last hid behind a chunk of compute. The
// gathered dimension may index a parallel loop of the consumer (the rows of
// `A` in `A @ B`: each chunk yields a block of the result) or its reduction
// loop (the columns of `A`: each chunk adds a partial product).
//
// The direct form (push_ag_matmul) sends the local chunk to every peer at
// once, one shift per peer offset, and computes on each peer's chunk as it
// arrives, nearest first: one round of transfers instead of n - 1, each
// from the chunk its producer just wrote (braid-fuse-puts then has that
// producer's kernel store it into the peers' slots itself).
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

FailureOr<AllGatherMatmul> overlap::matchAllGatherMatmul(AllGatherOp op,
                                                         std::string &reason) {
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  Value gathered = op.getResult();
  linalg::LinalgOp consumer;
  OpOperand *use = nullptr;
  // The first linalg reader in program order (use lists are in no
  // particular order).
  for (OpOperand &candidate : gathered.getUses())
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(candidate.getOwner()))
      if (linalgOp.isDpsInput(&candidate) &&
          (!consumer || (linalgOp->getBlock() == consumer->getBlock() &&
                         linalgOp->isBeforeInBlock(consumer)))) {
        consumer = linalgOp;
        use = &candidate;
      }
  if (!consumer) {
    reason = "its result feeds no linalg computation";
    return failure();
  }
  std::string name = "'" + consumer->getName().getStringRef().str() + "'";
  if (consumer.getNumReductionLoops() == 0) {
    reason = "its consumer " + name + " is not a contraction";
    return failure();
  }
  if (!consumer.hasPureTensorSemantics() || consumer->getNumResults() != 1) {
    reason = name + " is not a single-result op on tensors";
    return failure();
  }
  if (consumer->getBlock() != op->getBlock()) {
    reason = name + " is in another block";
    return failure();
  }
  if (std::string empty = emptyLoop(consumer); !empty.empty()) {
    reason = name + " computes no elements (" + empty + ")";
    return failure();
  }
  for (OpOperand &other : gathered.getUses()) {
    if (&other == use)
      continue;
    if (other.getOwner() == consumer.getOperation()) {
      reason = name + " uses the gathered value twice";
      return failure();
    }
    if (other.getOwner()->getBlock() != consumer->getBlock() ||
        !consumer->isBeforeInBlock(other.getOwner())) {
      reason = "another use of the gathered value precedes " + name;
      return failure();
    }
  }
  int64_t dim = op.getDim();
  std::optional<unsigned> loop = loopOfOperandDim(consumer, *use, dim);
  if (!loop) {
    reason = "the gathered dimension is not indexed by a plain loop of " + name;
    return failure();
  }
  AllGatherMatmul match;
  match.gather = op;
  match.consumer = consumer;
  match.operand = use->getOperandNumber();
  match.loop = *loop;
  match.chunkSize = op.getInput().getType().getDimSize(dim);
  match.ring = *ring;
  utils::IteratorType iterator = consumer.getIteratorTypesArray()[*loop];
  if (iterator == utils::IteratorType::reduction) {
    if (!accumulatesIntoInit(consumer)) {
      reason = "chunks along a reduction loop need a contraction, " + name +
               " is not one";
      return failure();
    }
    match.reductionLoop = true;
  } else if (!resultDimOfLoop(consumer, *loop)) {
    reason = "the gathered dimension does not reach the result of " + name;
    return failure();
  }
  return match;
}

LogicalResult overlap::decomposeAllGatherMatmul(RewriterBase &rewriter,
                                                AllGatherMatmul match,
                                                RingOptions options) {
  const Ring &ring = match.ring;
  int64_t n = ring.groupSize, pieces = options.pieces();
  if (match.chunkSize % pieces != 0)
    return rewriter.notifyMatchFailure(match.gather, "chunk not divisible");
  if (options.direct && pieces != 1)
    return rewriter.notifyMatchFailure(
        match.gather, "a direct all-gather sends whole chunks");
  int64_t pieceSize = match.chunkSize / pieces;
  int64_t dim = match.gather.getDim();
  linalg::LinalgOp consumer = match.consumer;
  Location loc = match.gather.getLoc();
  rewriter.setInsertionPoint(consumer);

  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
  Value local = match.gather.getInput();
  Value gathered = match.gather.getResult();
  bool assemble = !gathered.hasOneUse();
  Value assembled;
  if (assemble) {
    auto type = cast<RankedTensorType>(gathered.getType());
    assembled = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                        type.getElementType());
  }
  Value acc = consumer.getDpsInitOperand(0)->get();
  // A fill of the accumulator that only the consumer reads moves to the
  // chunks: each parallel chunk fills its own block (together they cover
  // the result), a reduction ring fills once right before its first chunk.
  // Either way the fill comes right before a product, where the cuda
  // target folds a zero fill into the GEMM (beta = 0) as it does for the
  // serial program, instead of a fill kernel and accumulating GEMMs.
  auto fill = acc.getDefiningOp<linalg::FillOp>();
  if (fill && (!acc.hasOneUse() || fill->getBlock() != consumer->getBlock()))
    fill = {};
  if (fill)
    acc = fill.getOutputs()[0];
  bool firstChunk = true;

  // Piece q of a chunk: direction q / subChunks, sub-chunk q % subChunks.
  SmallVector<Value> current;
  for (int64_t q = 0; q < pieces; ++q)
    current.push_back(sliceAlong(rewriter, loc, local, dim,
                                 rewriter.getIndexAttr(q * pieceSize),
                                 pieceSize));
  SmallVector<std::pair<Value, Value>> inFlight(pieces);
  // Direct: the chunk of the rank `k` back arrives by the shift of offset k.
  SmallVector<std::pair<Value, Value>> direct;
  if (options.direct)
    for (int64_t k = 1; k < n; ++k)
      direct.push_back(
          startShift(rewriter, loc, local, ring.grid, ring.axis, k, k - 1));
  for (int64_t step = 0; step < n; ++step) {
    for (int64_t p = 0; p < options.subChunks; ++p) {
      for (int64_t d = 0; d < options.directions(); ++d) {
        int64_t direction = d == 0 ? 1 : -1;
        int64_t q = d * options.subChunks + p;
        if (step > 0)
          current[q] = waitFor(rewriter, loc,
                               options.direct ? direct[step - 1] : inFlight[q]);
        if (step < n - 1 && !options.direct)
          inFlight[q] = startShift(rewriter, loc, current[q], ring.grid,
                                   ring.axis, direction, step);
        // The chunk held at this step came from `direction * step` ranks
        // back along the ring.
        Value owner = ringIndex(rewriter, loc, position, -direction * step, n);
        Value offset =
            affineIndex(rewriter, loc, owner, match.chunkSize, q * pieceSize);
        bool refill = fill && (!match.reductionLoop || firstChunk);
        FailureOr<Chunk> chunk =
            computeChunk(rewriter, consumer, match.loop, offset, pieceSize,
                         {{match.operand, current[q]}}, acc,
                         refill ? fill : linalg::FillOp());
        if (failed(chunk))
          return failure();
        firstChunk = false;
        acc = match.reductionLoop ? chunk->value
                                  : insertChunk(rewriter, loc, *chunk, acc);
        if (assemble)
          assembled =
              insertAlong(rewriter, loc, current[q], assembled, dim, offset);
      }
    }
  }
  rewriter.replaceOp(consumer, acc);
  if (fill)
    rewriter.eraseOp(fill);
  if (assemble)
    rewriter.replaceOp(match.gather, assembled);
  else
    rewriter.eraseOp(match.gather);
  return success();
}

//===- The pattern --------------------------------------------------------===//

/// ring_ag_matmul (ring_ag_matmul_bidir on two rings): one candidate per
/// ring layout the chunk splits into.
static void proposeRingAllGatherMatmul(AllGatherOp gather, Site site,
                                       Context &context,
                                       SmallVectorImpl<Candidate> &out,
                                       std::string &why) {
  FailureOr<AllGatherMatmul> match = matchAllGatherMatmul(gather, why);
  if (failed(match))
    return;
  double chunkBytes = tensorBytes(gather.getInput());
  size_t before = out.size();
  for (RingOptions options : context.ringLayouts(match->chunkSize)) {
    Candidate c =
        ringCandidate(site, context, "ring_ag_matmul", options, match->consumer,
                      match->loop, chunkBytes, false);
    c.apply = [m = *match, options](RewriterBase &r, FollowUps &) {
      return decomposeAllGatherMatmul(r, m, options);
    };
    out.push_back(std::move(c));
  }
  if (out.size() == before)
    why = "the local chunk of " + std::to_string(match->chunkSize) +
          " rows does not split into the requested pieces";
}

std::unique_ptr<OverlapPattern> overlap::createRingAllGatherMatmulPattern() {
  return makePattern<AllGatherOp>(Family::Fused, "ring",
                                  proposeRingAllGatherMatmul);
}
