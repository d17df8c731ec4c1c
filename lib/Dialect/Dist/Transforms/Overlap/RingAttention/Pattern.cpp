//===- Pattern.cpp - ring_attention: its price, gate and record -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The gathers of k and v feeding softmax(s(q, k)) v become one ring with an
// online softmax (Match.cpp matches, Rewrite.cpp rewrites). Under auto the
// ring is taken when predicted faster, or when the scores a rank would hold
// whole exceed a budget; under force always. Its record adds "scores".
//
//===----------------------------------------------------------------------===//

#include "../Pattern.h"
#include "RingAttention.h"

#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

namespace {

/// Scores a rank may hold whole before the ring is taken under auto even
/// when it is not predicted faster.
constexpr double kScoreBudget = 256.0 * (1 << 20);

/// What ring attention adds to its record and remark.
struct ScoreDetails {
  /// The scores a rank would hold whole, and per ring step.
  double bytes = 0, stepBytes = 0;
  /// Pieces its mask fills whole are skipped; whether the ring is
  /// balanced, or why not under a causal mask.
  bool skipsMasked = false, balanced = false;
  std::string unbalanced;
  std::string partnerLoc;

  void write(llvm::json::OStream &json) const {
    if (bytes <= 0)
      return;
    json.attributeObject("scores", [&] {
      json.attribute("materialized_bytes", bytes);
      json.attribute("per_step_bytes", stepBytes);
      json.attribute("skips_masked", skipsMasked);
      json.attribute("balanced", balanced);
      if (!unbalanced.empty())
        json.attribute("not_balanced", unbalanced);
    });
  }
  void describe(llvm::raw_ostream &remark) const {
    remark << "; with the all_gather at " << partnerLoc
           << " in the same ring; a rank holds "
           << schedule::formatBytes(stepBytes)
           << " of scores per step instead of " << schedule::formatBytes(bytes)
           << (skipsMasked ? "; skips the pieces its mask fills whole" : "")
           << (balanced ? "; balanced: each rank also scores the rows of the "
                          "block it holds"
               : unbalanced.empty() ? ""
                                    : "; not balanced: " + unbalanced);
  }
};

} // namespace

/// Whether the ring is balanced, or why not (empty when no causal mask asks
/// for it).
static bool balances(RingAttention &match, const Context &context,
                     std::string &why) {
  bool causal = match.mask.has_value();
  braid::BalanceAttention option = context.options.balanceAttention;
  bool wanted = option == braid::BalanceAttention::On ||
                (option == braid::BalanceAttention::Auto && causal);
  if (!wanted)
    why = causal ? "balance-attention=off" : "";
  else if (match.ring.groupSize < 3)
    why = "on 2 ranks it saves no step";
  else if (!match.helperBlocker.empty())
    why = match.helperBlocker;
  else
    return match.balance = true;
  return false;
}

static void proposeRingAttention(AllGatherOp gather, Site site,
                                 Context &context,
                                 SmallVectorImpl<Candidate> &out,
                                 std::string &why) {
  bool looksLike = false;
  FailureOr<RingAttention> match = matchRingAttention(gather, looksLike, why);
  if (failed(match)) {
    if (!looksLike)
      why.clear();
    return;
  }
  int64_t subChunks = context.options.subChunks;
  match->pieceSize = attentionPieceSize(match->chunk, subChunks);
  if (match->pieceSize == 0) {
    why = "its block of " + std::to_string(match->chunk) +
          " keys does not split into " + std::to_string(subChunks) +
          " pieces (sub-chunks)";
    return;
  }
  const CostModel &cost = context.model;
  int64_t n = match->ring.groupSize;
  SmallVector<Operation *> ops{match->scores, match->max, match->exp,
                               match->sum, match->output};
  if (match->div)
    ops.insert(ops.begin() + 4, match->div);
  for (const AttentionPrefix &p : match->scoreOps)
    if (isa<linalg::LinalgOp>(p.op))
      ops.push_back(p.op);
  for (Operation *op : std::initializer_list<Operation *>{
           match->expThen, match->reciprocal, match->divAfter})
    if (op)
      ops.push_back(op);
  Candidate c;
  c.strategy = "ring_attention";
  c.family = Family::Attention;
  c.with = nameOf(match->output);
  c.chunks = n * (match->chunk / match->pieceSize);
  c.always = true;
  c.partners.push_back(gather == match->keys ? match->values : match->keys);
  for (Operation *op : ops)
    c.compute += cost.computeTime(op);
  double keys = tensorBytes(match->keys.getInput());
  double values = tensorBytes(match->values.getInput());
  double comm = cost.collectiveTime("all_gather", keys * n, n, site.link) +
                cost.collectiveTime("all_gather", values * n, n, site.link);
  c.serial = c.compute + comm;
  ScoreDetails details;
  details.balanced = balances(*match, context, details.unbalanced);
  // The model prices every block on every rank, as it does the skip: on
  // CPU ranks the ring measured slower than the gathers even balanced
  // (bench/cpu/README.md), and no GPU has timed it. Balanced, q travels
  // with k and v and the partials come back after n / 2 + 1 steps.
  double stepBytes = keys + values;
  int64_t steps = n;
  double returned = 0;
  if (details.balanced) {
    for (OpOperand *input : match->scores.getDpsInputOperands())
      if (input->getOperandNumber() != match->keysOperand)
        stepBytes += tensorBytes(input->get());
    steps = n / 2 + 1;
    returned = cost.messageTime(tensorBytes(match->output->getResult(0)) +
                                    2 * tensorBytes(match->max->getResult(0)),
                                site.link);
  }
  c.overlapped =
      context.pipeline(c.compute / n, n, cost.messageTime(stepBytes, site.link),
                       steps - 1) +
      returned;
  details.bytes = tensorBytes(match->scores->getResult(0));
  details.stepBytes = details.bytes / (n * (match->chunk / match->pieceSize));
  details.skipsMasked = match->mask.has_value();
  details.partnerLoc = formatLoc(c.partners.front()->getLoc());
  // Under auto it must be predicted faster, or save a rank from holding
  // more scores than the budget; force always takes it.
  bool force = context.options.mode == braid::OverlapMode::Force;
  bool faster = Context::worthIt(c.serial, c.overlapped);
  if (!force && !faster && details.bytes <= kScoreBudget) {
    why = "predicted " + us(c.overlapped) + " against " + us(c.serial) +
          " for the gathers and the whole rows, and the " +
          schedule::formatBytes(details.bytes) +
          " of scores a rank holds fit the " +
          schedule::formatBytes(kScoreBudget) + " budget";
    return;
  }
  c.because = force    ? "overlap=force"
              : faster ? "predicted faster"
                       : "its scores exceed the budget a rank may hold whole";
  c.details = [details](llvm::json::OStream &json) { details.write(json); };
  c.describe = [details](llvm::raw_ostream &remark) {
    details.describe(remark);
  };
  c.apply = [m = *match](RewriterBase &r, FollowUps &) {
    return decomposeRingAttention(r, m);
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createRingAttentionPattern() {
  return makePattern<AllGatherOp>(Family::Attention, "ring attention",
                                  proposeRingAttention);
}
