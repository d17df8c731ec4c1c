//===- OneShot.cpp - one_shot_ar, one_shot_rs ------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// An all-reduce (or reduce-scatter) whose result feeds a memory-bound chain
// is summed inside the chain's kernel: each rank puts its whole partial (a
// reduce-scatter: each peer's block of it) into every peer's symmetric
// slot, and the kernel that memory-bound fusion makes of the chain reads
// the slots. The reduced tensor is never written and read back.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

/// one_shot_ar, one_shot_rs: the sum inside the kernel of the chain after
/// the collective, from the partials every peer put into this rank's slots.
static void proposeOneShot(CollectiveOpInterface op, Site site,
                           Context &context, SmallVectorImpl<Candidate> &out,
                           std::string &why) {
  bool scatters = isa<ReduceScatterOp>(op.getOperation());
  // A reduce-scatter has this one form under every fuse-collectives mode.
  if (!scatters &&
      context.options.fuseCollectives == braid::FuseCollectivesMode::TwoShot) {
    why = "fuse-collectives=two-shot";
    return;
  }
  // Reshapes in between (a frontend's 2-D matmul result back to its 3-D
  // activations) move above the collective.
  Operation *user = userAfterReshapes(op, why);
  if (!user)
    return;
  if (user->getBlock() != op->getBlock() || !schedule::isMemoryBound(user)) {
    why = "'" + nameOf(user) +
          "' is not a memory-bound linalg op on static tensors that the sum "
          "could join";
    return;
  }
  int64_t n = site.groupSize;
  double bytes = tensorBytes(op.getInput());
  // An all-reduce sends the whole partial to every peer; a reduce-scatter
  // sends each peer its block, as its ring does.
  double sent = scatters ? (n - 1) * bytes / n : (n - 1) * bytes;
  double received = scatters ? bytes / n : bytes;
  Candidate c;
  c.strategy = scatters ? "one_shot_rs" : "one_shot_ar";
  c.family = Family::InKernel;
  c.with = nameOf(user);
  c.chunks = n - 1;
  c.kernel =
      "the kernel of '" + nameOf(user) + "' at " + formatLoc(user->getLoc());
  // The reduced tensor is never written and read back. The link carries
  // n - 1 copies of an all-reduce's partial instead of the ring's
  // 2 (n - 1) / n, and a reduce-scatter's blocks as its ring does.
  c.saving =
      "moves " + schedule::formatBytes(sent) +
      " per rank to the peers (a ring " +
      (scatters ? "reduce-scatter: " : "all-reduce: ") +
      schedule::formatBytes((scatters ? 1.0 : 2.0) * (n - 1) / n * bytes) +
      ") and saves writing and reading back " +
      schedule::formatBytes(received) + " of the reduced tensor";
  c.serial = site.comm;
  // The puts to the n - 1 peers, then the kernel reading n partials where
  // the unfused chain reads the reduced tensor, which the library's
  // collective no longer writes.
  c.overlapped =
      site.link.latency + sent / site.link.bandwidth +
      context.model.streamTime(std::max<double>(0, (n - 2) * received));
  c.apply = [op](RewriterBase &rewriter, FollowUps &) {
    return directExchange(rewriter, hoistReshapes(rewriter, op),
                          /*oneShot=*/true);
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createOneShotPattern() {
  return makePattern<AllReduceOp, ReduceScatterOp>(Family::InKernel, "one shot",
                                                   proposeOneShot);
}
