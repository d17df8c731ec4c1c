//===- PushAllGatherMatmul.cpp - push_ag_matmul ----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// An all-gather whose input a memory-bound op computes and whose result
// feeds a contraction: the local chunk goes to every peer at once (one
// marked shift per peer offset) and the contraction takes each chunk as it
// lands, its own first (the direct form of ring_ag_matmul's rewrite);
// braid-fuse-puts then has the producing kernel store the chunk into the
// peers' slots itself.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

/// push_ag_matmul: the producing kernel writes each chunk into every
/// peer's slot.
static void proposePushAllGatherMatmul(AllGatherOp op, Site site,
                                       Context &context,
                                       SmallVectorImpl<Candidate> &out,
                                       std::string &why) {
  FailureOr<AllGatherMatmul> match = matchAllGatherMatmul(op, why);
  if (failed(match))
    return;
  // Through reshapes (torch-mlir's 3-D activations flattened for the
  // matmul): they leave a contiguous buffer's bytes in place.
  Value input = op.getInput();
  while (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
      input.getDefiningOp()))
    input = input.getDefiningOp()->getOperand(0);
  Operation *producer = input.getDefiningOp();
  if (!producer || producer->getBlock() != op->getBlock() ||
      !schedule::isMemoryBound(producer)) {
    why = "its input is not computed by a memory-bound linalg op in its "
          "block, whose kernel could store it into the peers' buffers";
    return;
  }
  const CostModel &cost = context.model;
  int64_t n = match->ring.groupSize;
  double chunk = tensorBytes(op.getInput());
  Candidate c;
  c.strategy = "push_ag_matmul";
  c.family = Family::InKernel;
  c.with = nameOf(match->consumer);
  c.chunks = n - 1;
  c.kernel = "the kernel of '" + nameOf(producer) + "' at " +
             formatLoc(producer->getLoc());
  c.saving = "stores " + schedule::formatBytes((n - 1) * chunk) +
             " per rank straight into the peers' gather buffers in one round "
             "(a ring forwards the same bytes in " +
             std::to_string(n - 1) + " steps, copying what it received)";
  c.compute = cost.computeTime(match->consumer);
  c.serial = c.compute + site.comm;
  // Every peer's chunk travels at once, one latency; the contraction's own
  // chunk runs meanwhile and each other chunk as it lands (each chunk
  // reading the whole of what the gathered loop does not index).
  double piece = cost.computeTime(match->consumer, 1.0 / n, match->loop);
  c.overlapped = std::max(
      n * piece * (1 + cost.getTarget().overlapInterference),
      site.link.latency + (n - 1) * chunk / site.link.bandwidth + piece);
  c.apply = [m = *match](RewriterBase &rewriter, FollowUps &) {
    RingOptions direct;
    direct.direct = true;
    return decomposeAllGatherMatmul(rewriter, m, direct);
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createPushAllGatherMatmulPattern() {
  return makePattern<AllGatherOp>(Family::InKernel, "push",
                                  proposePushAllGatherMatmul);
}
