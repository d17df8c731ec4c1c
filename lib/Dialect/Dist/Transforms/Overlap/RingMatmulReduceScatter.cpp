//===- RingMatmulReduceScatter.cpp - ring_matmul_rs ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A contraction whose result is reduce-scattered becomes a ring in which
// each step computes the partial block destined for the next peer, adds the
// partial sum that arrived, and forwards it: the transfers hide behind the
// compute of the following block.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

std::optional<unsigned> overlap::scatterLoop(linalg::LinalgOp producer,
                                             int64_t dim, std::string &reason) {
  AffineMap map = producer.getIndexingMapMatchingResult(producer->getResult(0));
  auto expr = dyn_cast<AffineDimExpr>(map.getResult(dim));
  if (!expr) {
    reason = "dimension " + std::to_string(dim) + " of the result of '" +
             producer->getName().getStringRef().str() +
             "' is not indexed by a plain loop";
    return std::nullopt;
  }
  if (producer.getIteratorTypesArray()[expr.getPosition()] !=
      utils::IteratorType::parallel) {
    reason = "dimension " + std::to_string(dim) + " is a reduction of '" +
             producer->getName().getStringRef().str() + "'";
    return std::nullopt;
  }
  return expr.getPosition();
}

linalg::LinalgOp overlap::soleProducer(Value value, Block *block,
                                       std::string &reason) {
  auto producer = value.getDefiningOp<linalg::LinalgOp>();
  if (!producer) {
    reason = "its input is not computed by a linalg op";
    return {};
  }
  std::string name = "'" + producer->getName().getStringRef().str() + "'";
  if (!producer.hasPureTensorSemantics() || producer->getNumResults() != 1) {
    reason = name + " is not a single-result op on tensors";
    return {};
  }
  if (!value.hasOneUse()) {
    reason = "the result of " + name + " has other uses";
    return {};
  }
  if (producer->getBlock() != block) {
    reason = name + " is in another block";
    return {};
  }
  if (std::string empty = schedule::emptyLoop(producer); !empty.empty()) {
    reason = name + " computes no elements (" + empty + ")";
    return {};
  }
  return producer;
}

linalg::LinalgOp overlap::reducingProducer(Value value, Block *block,
                                           std::string &reason) {
  linalg::LinalgOp producer = soleProducer(value, block, reason);
  if (producer && producer.getNumReductionLoops() == 0) {
    reason = "its input is not computed by a contraction";
    return {};
  }
  return producer;
}

bool overlap::isBitwise(ReductionKind kind) {
  return kind == ReductionKind::BitAnd || kind == ReductionKind::BitOr ||
         kind == ReductionKind::BitXor;
}

FailureOr<MatmulReduceScatter>
overlap::matchMatmulReduceScatter(ReduceScatterOp op, std::string &reason) {
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  linalg::LinalgOp producer =
      reducingProducer(op.getInput(), op->getBlock(), reason);
  if (!producer)
    return failure();
  std::optional<unsigned> loop = scatterLoop(producer, op.getDim(), reason);
  if (!loop)
    return failure();
  if (isBitwise(op.getReduction())) {
    reason = "bitwise reductions are not decomposed";
    return failure();
  }
  MatmulReduceScatter match;
  match.scatter = op;
  match.producer = producer;
  match.loop = *loop;
  match.blockSize = op.getResult().getType().getDimSize(op.getDim());
  match.ring = *ring;
  return match;
}

FailureOr<Value> overlap::buildRingReduceScatter(
    RewriterBase &rewriter, Location loc, linalg::LinalgOp producer,
    unsigned loop, int64_t dim, int64_t blockSize, const Ring &ring,
    ReductionKind kind, RingOptions options) {
  int64_t n = ring.groupSize, pieces = options.pieces();
  if (blockSize % pieces != 0)
    return failure();
  int64_t pieceSize = blockSize / pieces;
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);

  SmallVector<Value> acc(pieces);
  SmallVector<std::pair<Value, Value>> inFlight(pieces);
  for (int64_t step = 0; step < n; ++step) {
    for (int64_t p = 0; p < options.subChunks; ++p) {
      for (int64_t d = 0; d < options.directions(); ++d) {
        int64_t direction = d == 0 ? 1 : -1;
        int64_t q = d * options.subChunks + p;
        // The block whose partial sum this rank forwards at this step; after
        // n - 1 steps it is this rank's own.
        Value block =
            ringIndex(rewriter, loc, position, -direction * (step + 1), n);
        Value offset =
            affineIndex(rewriter, loc, block, blockSize, q * pieceSize);
        FailureOr<Chunk> part =
            computeChunk(rewriter, producer, loop, offset, pieceSize, {}, {});
        if (failed(part))
          return failure();
        if (step == 0) {
          acc[q] = part->value;
        } else {
          Value arrived = waitFor(rewriter, loc, inFlight[q]);
          FailureOr<Value> sum =
              combine(rewriter, loc, kind, arrived, part->value);
          if (failed(sum))
            return failure();
          acc[q] = *sum;
        }
        if (step < n - 1)
          inFlight[q] = startShift(rewriter, loc, acc[q], ring.grid, ring.axis,
                                   direction, step);
      }
    }
  }
  auto type = cast<RankedTensorType>(producer->getResult(0).getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = blockSize;
  Value result =
      tensor::EmptyOp::create(rewriter, loc, shape, type.getElementType());
  for (int64_t q = 0; q < pieces; ++q)
    result = insertAlong(rewriter, loc, acc[q], result, dim,
                         rewriter.getIndexAttr(q * pieceSize));
  return result;
}

LogicalResult overlap::decomposeMatmulReduceScatter(RewriterBase &rewriter,
                                                    MatmulReduceScatter match,
                                                    RingOptions options) {
  rewriter.setInsertionPoint(match.scatter);
  FailureOr<Value> block = buildRingReduceScatter(
      rewriter, match.scatter.getLoc(), match.producer, match.loop,
      match.scatter.getDim(), match.blockSize, match.ring,
      match.scatter.getReduction(), options);
  if (failed(block))
    return failure();
  rewriter.replaceOp(match.scatter, *block);
  rewriter.eraseOp(match.producer);
  return success();
}

//===- The pattern --------------------------------------------------------===//

/// ring_matmul_rs (ring_matmul_rs_bidir): one candidate per ring layout.
static void proposeRingMatmulReduceScatter(ReduceScatterOp scatter, Site site,
                                           Context &context,
                                           SmallVectorImpl<Candidate> &out,
                                           std::string &why) {
  FailureOr<MatmulReduceScatter> match = matchMatmulReduceScatter(scatter, why);
  if (failed(match))
    return;
  double blockBytes = tensorBytes(scatter.getResult());
  for (RingOptions options : context.ringLayouts(match->blockSize)) {
    Candidate c = ringCandidate(site, context, "ring_matmul_rs", options,
                                match->producer, match->loop, blockBytes, true);
    c.apply = [m = *match, options](RewriterBase &r, FollowUps &) {
      return decomposeMatmulReduceScatter(r, m, options);
    };
    out.push_back(std::move(c));
  }
}

std::unique_ptr<OverlapPattern>
overlap::createRingMatmulReduceScatterPattern() {
  return makePattern<ReduceScatterOp>(Family::Fused, "ring",
                                      proposeRingMatmulReduceScatter);
}
