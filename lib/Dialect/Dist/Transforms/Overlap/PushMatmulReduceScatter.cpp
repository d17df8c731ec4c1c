//===- PushMatmulReduceScatter.cpp - push_matmul_rs ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A contraction whose result is reduce-scattered, computed block by block:
// the partial of the block a peer owns goes to that peer's symmetric slot
// as soon as it is computed (one marked shift per peer offset), the block
// of the nearest peer first and this rank's own last, and each rank sums
// the partials that arrived with its own. The direct form of
// ring_matmul_rs: no partial sum is forwarded, and a rank's link carries
// only its own partials. braid-fuse-puts then has the contraction of each
// block store into the owner's slot itself, and on the cuda target with
// generated GEMMs braid-kernel-signals makes the blocks one persistent
// kernel whose last tile of each block raises its owner's flag (FLUX's and
// TileLink's reduce-scatter producer).
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

/// This rank's reduced block of `m`'s result: each block's partial
/// computed on its own, a peer's sent to it right away, the partials that
/// arrived summed with this rank's.
static FailureOr<Value> buildPushReduceScatter(RewriterBase &rewriter,
                                               MatmulReduceScatter m) {
  Location loc = m.scatter.getLoc();
  int64_t n = m.ring.groupSize;
  Value position = groupPosition(rewriter, loc, m.ring.grid, m.ring.axis);
  // Each block's partial gets a buffer of its own, filled right before its
  // contraction when the op's init is a fill, which the contraction can
  // write in the owner's slot instead. The placeholders are told apart by
  // an attribute: CSE would merge them, and their fills, into one buffer
  // each contraction copies. An init with values (a bias) is sliced, as
  // the ring does.
  Value init = m.producer.getDpsInitOperand(0)->get();
  // The import's choice of a rowwise projection's init by rank (the bias
  // on one rank only), where both ranks' are the same value.
  if (auto choice = init.getDefiningOp<scf::IfOp>();
      choice && choice.getNumRegions() == 2 &&
      !choice.getElseRegion().empty()) {
    unsigned i = cast<OpResult>(init).getResultNumber();
    Value then = choice.thenYield().getOperand(i);
    if (then == choice.elseYield().getOperand(i) &&
        !choice->isAncestor(then.getParentRegion()->getParentOp()))
      init = then;
  }
  auto initType = cast<RankedTensorType>(init.getType());
  SmallVector<int64_t> shape(initType.getShape());
  shape[m.scatter.getDim()] = m.blockSize;
  linalg::FillOp fill;
  bool placeholder = isPlaceholder(init, &fill, /*throughSlices=*/true);
  auto partial = [&](int64_t delta) -> FailureOr<Value> {
    Value block = ringIndex(rewriter, loc, position, delta, n);
    OpFoldResult offset = affineIndex(rewriter, loc, block, m.blockSize, 0);
    Value initSource;
    if (placeholder) {
      auto empty = tensor::EmptyOp::create(rewriter, loc, shape,
                                           initType.getElementType());
      empty->setAttr("braid.partial", rewriter.getI64IntegerAttr(delta));
      initSource = empty;
    }
    FailureOr<Chunk> chunk = computeChunk(rewriter, m.producer, m.loop, offset,
                                          m.blockSize, {}, initSource, fill);
    if (failed(chunk))
      return failure();
    return chunk->value;
  };
  SmallVector<std::pair<Value, Value>> started;
  for (int64_t k = 1; k < n; ++k) {
    FailureOr<Value> part = partial(k);
    if (failed(part))
      return failure();
    started.push_back(
        startShift(rewriter, loc, *part, m.ring.grid, m.ring.axis, k, k - 1));
    started.back().first.getDefiningOp()->setAttr(
        DistDialect::getSymmetricAttrName(), rewriter.getUnitAttr());
  }
  FailureOr<Value> acc = partial(0);
  if (failed(acc))
    return failure();
  // The partial of rank position - k arrives over the shift by +k.
  for (const auto &s : started) {
    FailureOr<Value> sum = combine(rewriter, loc, m.scatter.getReduction(),
                                   *acc, waitFor(rewriter, loc, s));
    if (failed(sum))
      return failure();
    acc = *sum;
  }
  return *acc;
}

/// push_matmul_rs: each block's partial stored into its owner's slot as
/// soon as it is computed.
static void proposePushMatmulReduceScatter(ReduceScatterOp scatter, Site site,
                                           Context &context,
                                           SmallVectorImpl<Candidate> &out,
                                           std::string &why) {
  // fuse-collectives=one-shot and two-shot name the form they want.
  if (context.options.fuseCollectives == braid::FuseCollectivesMode::OneShot ||
      context.options.fuseCollectives == braid::FuseCollectivesMode::TwoShot) {
    why = std::string("fuse-collectives=") +
          braid::options::spelling(context.options.fuseCollectives);
    return;
  }
  FailureOr<MatmulReduceScatter> match = matchMatmulReduceScatter(scatter, why);
  if (failed(match))
    return;
  const CostModel &cost = context.model;
  int64_t n = match->ring.groupSize;
  double block = tensorBytes(scatter.getResult());
  Candidate c;
  c.strategy = "push_matmul_rs";
  c.family = Family::InKernel;
  c.with = nameOf(match->producer);
  c.chunks = n - 1;
  c.action = "sent block by block to its owners as computed by";
  c.kernel = "the block contractions of '" + nameOf(match->producer) + "' at " +
             formatLoc(match->producer->getLoc());
  c.saving = "stores each of the " + std::to_string(n - 1) + " peers' " +
             schedule::formatBytes(block) +
             " partial straight into its slot as it is computed, one hop "
             "(a ring forwards partial sums in " +
             std::to_string(n - 1) + " steps, adding each)";
  c.compute = cost.computeTime(match->producer);
  c.serial = c.compute + site.comm;
  // Every block's partial leaves as soon as it is computed, the peers'
  // first: the link carries them while the next blocks compute, and the
  // last peer's travels during this rank's own. Then the n - 1 partials
  // that arrived are read on top of this rank's own (by the kernel of the
  // chain after the sum, where there is one).
  double piece = cost.computeTime(match->producer, 1.0 / n, match->loop) *
                 (1 + cost.getTarget().overlapInterference);
  double message = block / site.link.bandwidth;
  c.overlapped =
      std::max({n * piece, (n - 1) * piece + site.link.latency + message,
                piece + site.link.latency + (n - 1) * message}) +
      cost.streamTime((n - 1) * block);
  c.apply = [m = *match](RewriterBase &rewriter, FollowUps &) {
    rewriter.setInsertionPoint(m.scatter);
    FailureOr<Value> reduced = buildPushReduceScatter(rewriter, m);
    if (failed(reduced))
      return failure();
    rewriter.replaceOp(m.scatter, *reduced);
    rewriter.eraseOp(m.producer);
    return success();
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern>
overlap::createPushMatmulReduceScatterPattern() {
  return makePattern<ReduceScatterOp>(Family::InKernel, "push",
                                      proposePushMatmulReduceScatter);
}
