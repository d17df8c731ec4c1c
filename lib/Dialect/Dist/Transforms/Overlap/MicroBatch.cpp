//===- MicroBatch.cpp - micro_batch ----------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// When a collective needs the whole of the computation before it (an
// all-reduce after a row-parallel matmul feeding a norm), no finer schedule
// exists; splitting the computation and the collective along a dimension
// that nothing in between reduces over makes independent micro-batches, and
// each micro-batch's collective runs while the next one computes (the ISO,
// NanoFlow and Domino idea).
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

/// Dimensions of the input that the collective leaves in place.
static SmallVector<int64_t> freeDims(CollectiveOpInterface op) {
  SmallVector<int64_t> dims;
  Operation *raw = op.getOperation();
  for (int64_t d = 0; d < op.getInput().getType().getRank(); ++d) {
    uint64_t dim = d;
    if (auto g = dyn_cast<AllGatherOp>(raw); g && g.getDim() == dim)
      continue;
    if (auto s = dyn_cast<ReduceScatterOp>(raw); s && s.getDim() == dim)
      continue;
    if (auto a = dyn_cast<AllToAllOp>(raw);
        a && (a.getSplitDim() == dim || a.getConcatDim() == dim))
      continue;
    dims.push_back(d);
  }
  return dims;
}

FailureOr<MicroBatch> overlap::matchMicroBatch(CollectiveOpInterface op,
                                               int64_t parts,
                                               std::string &reason) {
  if (op.isAsync()) {
    reason = "it is already asynchronous";
    return failure();
  }
  if (!op.getInput().getType().hasStaticShape() ||
      !op.getCollectiveResult().getType().hasStaticShape()) {
    reason = "dynamic shapes";
    return failure();
  }
  linalg::LinalgOp producer =
      soleProducer(op.getInput(), op->getBlock(), reason);
  if (!producer)
    return failure();
  auto type = op.getInput().getType();
  for (int64_t dim : freeDims(op)) {
    if (type.getDimSize(dim) % parts != 0)
      continue;
    std::string why;
    if (std::optional<unsigned> loop = scatterLoop(producer, dim, why))
      return MicroBatch{op, producer, *loop, dim};
  }
  reason = "no dimension the collective leaves alone is a parallel loop of '" +
           producer->getName().getStringRef().str() + "' divisible into " +
           std::to_string(parts) + " parts";
  return failure();
}

LogicalResult overlap::splitMicroBatches(RewriterBase &rewriter,
                                         MicroBatch match, int64_t parts) {
  Operation *op = match.collective.getOperation();
  Location loc = op->getLoc();
  rewriter.setInsertionPoint(op);
  auto inType = match.collective.getInput().getType();
  auto outType = match.collective.getCollectiveResult().getType();
  int64_t size = inType.getDimSize(match.dim) / parts;
  SmallVector<int64_t> sliceShape(outType.getShape());
  sliceShape[match.dim] = size;
  auto sliceType = RankedTensorType::get(sliceShape, outType.getElementType());
  OperationName startName((op->getName().getStringRef() + "_start").str(),
                          op->getContext());

  // Compute micro-batch b, start its collective, go on with b + 1.
  SmallVector<std::pair<Value, Value>> started;
  for (int64_t b = 0; b < parts; ++b) {
    FailureOr<Chunk> chunk =
        computeChunk(rewriter, match.producer, match.loop,
                     rewriter.getIndexAttr(b * size), size, {}, {});
    if (failed(chunk))
      return failure();
    OperationState state(loc, startName);
    state.addOperands(chunk->value);
    state.addAttributes(op->getAttrs());
    state.addTypes({TokenType::get(op->getContext()), sliceType});
    Operation *start = rewriter.create(state);
    started.push_back({start->getResult(0), start->getResult(1)});
  }
  Value result = tensor::EmptyOp::create(rewriter, loc, outType.getShape(),
                                         outType.getElementType());
  for (int64_t b = 0; b < parts; ++b)
    result = insertAlong(rewriter, loc, waitFor(rewriter, loc, started[b]),
                         result, match.dim, rewriter.getIndexAttr(b * size));
  rewriter.replaceOp(op, result);
  rewriter.eraseOp(match.producer);
  return success();
}

//===- The pattern --------------------------------------------------------===//

/// micro_batch: one candidate per count of micro-batches (2, 3 and 4, or
/// the one micro-batches= asks for).
static void proposeMicroBatch(CollectiveOpInterface, Site site,
                              Context &context, SmallVectorImpl<Candidate> &out,
                              std::string &why) {
  int64_t requested = context.options.microBatches;
  SmallVector<int64_t> counts = requested > 0 ? SmallVector<int64_t>{requested}
                                              : SmallVector<int64_t>{2, 3, 4};
  const CostModel &cost = context.model;
  CollectiveOpInterface op = site.op;
  for (int64_t parts : counts) {
    FailureOr<MicroBatch> match = matchMicroBatch(op, parts, why);
    if (failed(match))
      continue;
    double compute = cost.computeTime(match->producer);
    double piece = cost.computeTime(match->producer, 1.0 / parts, match->loop);
    double part =
        cost.collectiveTime(op.getCollectiveKind(), commBytes(op) / parts,
                            site.groupSize, site.link);
    Candidate c;
    c.strategy = "micro_batch";
    c.family = Family::MicroBatch;
    c.with = nameOf(match->producer);
    c.chunks = parts;
    c.compute = compute;
    c.serial = compute + site.comm;
    c.overlapped = piece + (parts - 1) * context.asyncTime(piece, part) + part;
    c.apply = [m = *match, parts](RewriterBase &r, FollowUps &) {
      return splitMicroBatches(r, m, parts);
    };
    out.push_back(std::move(c));
  }
}

std::unique_ptr<OverlapPattern> overlap::createMicroBatchPattern() {
  return makePattern<>(Family::MicroBatch, "micro-batches", proposeMicroBatch);
}
