//===- Overlap.cpp - Choose and apply overlapped schedules ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/CostModel.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>
#include <functional>

namespace braid::dist {
#define GEN_PASS_DEF_OVERLAP
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

namespace {

/// One schedule that applies to a collective, with its prediction.
struct Candidate {
  std::string strategy;
  std::string with; ///< The compute op it overlaps, if any.
  int64_t chunks = 0;
  bool fused = true; ///< Fused with compute (else made asynchronous).
  /// The collective is computed inside the kernel of `kernel`; `saving`
  /// says what that moves and saves, for the remark.
  bool inKernel = false;
  std::string kernel, saving;
  /// Picked whenever it applies (ring attention: its memory alone
  /// justifies it), in auto and force alike.
  bool always = false;
  /// Ring attention: the gather of v that travels with the keys, and the
  /// score bytes a rank holds whole against per ring step.
  Operation *partner = nullptr;
  double scoreBytes = 0, stepScoreBytes = 0;
  /// Ring attention: pieces its mask fills whole (causal) are skipped;
  /// each rank also scores the rows of the block it holds (balanced), or
  /// why not under a causal mask.
  bool skipsMasked = false, balanced = false;
  std::string unbalanced;
  double compute = 0, serial = 0, overlapped = 0;
  std::function<LogicalResult(RewriterBase &)> apply;
  double gain() const { return serial - overlapped; }
};

/// One record of the report: a collective of the input and what became of
/// it.
struct Record {
  std::string function, kind, loc, decision, with, strategy, reason;
  /// How often the function runs per run of the program: a layer function
  /// (braid-outline-layers) once per call.
  int64_t calls = 1;
  /// The format the collective sends in, when quantized; its bound on the
  /// relative error of each element.
  std::string quantized;
  double quantizationError = 0;
  /// fp8: the absolute bound, as a fraction of the chunk's largest
  /// magnitude, for values below the smallest normal.
  double quantizationAbsolute = 0;
  int64_t chunks = 0;
  double compute = 0, comm = 0, serial = 0, overlapped = 0;
  /// "symmetric" or "two-sided".
  std::string transport = "two-sided";
  /// fuse-collectives: computed inside the kernel `kernel` names.
  bool inKernel = false;
  std::string kernel;
  /// ring_attention: the scores a rank would hold whole, and per step;
  /// whether pieces its mask fills whole are skipped; whether the ring is
  /// balanced, or why not under a causal mask.
  double scoreBytes = 0, stepScoreBytes = 0;
  bool skipsMasked = false, balanced = false;
  std::string unbalanced;
};

/// Collects the ring shifts a rewrite creates, to mark their transport.
struct ShiftCollector : public RewriterBase::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (isa<ShiftOp, ShiftStartOp>(op))
      shifts.insert(op);
    else if (isa<CollectiveOpInterface>(op))
      collectives.insert(op);
  }
  void notifyOperationErased(Operation *op) override {
    shifts.remove(op);
    collectives.remove(op);
  }
  llvm::SetVector<Operation *> shifts;
  /// Other collectives the rewrite made (a micro-batch's, the all-gather
  /// after a ring reduce-scatter): whole, unless comm=symmetric moves them.
  llvm::SetVector<Operation *> collectives;
};

/// Records how a collective's transfers travel, and why, in its report
/// record and its remark.
void noteTransport(Record &record, llvm::raw_ostream &remark, bool symmetric,
                   StringRef why) {
  record.transport = symmetric ? "symmetric" : "two-sided";
  record.reason += ("; transport " + record.transport + ": " + why).str();
  remark << "; transfers " << record.transport << " (" << why << ")";
}

std::string formatLoc(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (isa<FileLineColLoc>(inner))
        return formatLoc(inner);
  if (auto named = dyn_cast<NameLoc>(loc))
    return formatLoc(named.getChildLoc());
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

std::string us(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.1f us", seconds * 1e6);
  return text;
}

std::string nameOf(Operation *op) { return op->getName().getStringRef().str(); }

/// Bytes a collective moves, as collectiveTime expects them.
double commBytes(CollectiveOpInterface op) {
  if (isa<AllGatherOp>(op.getOperation()))
    return tensorBytes(op.getCollectiveResult());
  return tensorBytes(op.getInput());
}

int64_t groupSizeOf(CollectiveOpInterface op) {
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  return grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
}

bool sharesMemory(CollectiveOpInterface op, std::string &why);

struct OverlapPass : public braid::dist::impl::OverlapBase<OverlapPass> {
  using Base::Base;

  void setReportOptions(std::string json) { reportOptions = std::move(json); }

  void runOnOperation() override;

private:
  /// The ring layouts to consider for a chunk of `chunkSize` rows.
  SmallVector<RingOptions> ringLayouts(int64_t chunkSize) const;

  /// Compute and a transfer in flight at once: the longer of the two, the
  /// compute slowed by the overlap's interference.
  double asyncTime(double compute, double comm) const {
    return std::max(compute * (1 + model->getTarget().overlapInterference),
                    comm);
  }

  /// Ring pipeline prediction: `pieceCompute` per piece, `pieces` pieces in
  /// all, `steps` transfer steps of `stepComm` each.
  double pipeline(double pieceCompute, int64_t pieces, double stepComm,
                  int64_t steps) const {
    double compute =
        pieceCompute * pieces * (1 + model->getTarget().overlapInterference);
    return std::max(compute, steps * stepComm + pieceCompute);
  }

  void addFusedCandidates(CollectiveOpInterface op, double comm,
                          LinkFigures link, SmallVector<Candidate, 2> &out,
                          std::string &why);
  /// ring_attention for a gather of k or v, or why not (empty when no
  /// softmax over the gathered keys follows).
  std::optional<Candidate> attentionCandidate(AllGatherOp gather,
                                              LinkFigures link,
                                              std::string &why) const;
  void addMicroBatchCandidates(CollectiveOpInterface op, double comm,
                               LinkFigures link, SmallVector<Candidate, 2> &out,
                               std::string &why);
  void addAsyncCandidate(CollectiveOpInterface op, double comm,
                         SmallVector<Candidate, 2> &out, std::string &why);
  /// fuse-collectives: an all-reduce or reduce-scatter summed in the
  /// kernel of the chain after it (one_shot_ar, one_shot_rs, two_shot_ar),
  /// or an all-gather written into the peers' buffers by the kernel of the
  /// chain before it (push_ag_matmul); or why not (when none applies).
  void addInKernelCandidates(CollectiveOpInterface op, double libraryComm,
                             SmallVector<Candidate, 2> &out, std::string &why);
  /// one_shot_ar, one_shot_rs: the whole partial (a reduce-scatter: each
  /// peer's block of it) to every peer, summed in the chain's kernel.
  std::optional<Candidate> oneShotCandidate(CollectiveOpInterface op,
                                            double libraryComm,
                                            LinkFigures link,
                                            std::string &why) const;
  /// push_ag_matmul: the kernel that computes the gathered chunk stores it
  /// into every peer's buffer; the contraction takes each chunk as it
  /// lands.
  std::optional<Candidate> pushCandidate(AllGatherOp op, double libraryComm,
                                         LinkFigures link,
                                         std::string &why) const;
  /// two_shot_ar: the peers' blocks summed in the kernel of the chain on
  /// this rank's rows, whose results then go to every peer.
  std::optional<Candidate> twoShotCandidate(AllReduceOp op, double libraryComm,
                                            LinkFigures link, std::string &why);

  /// fuse-collectives=force, one-shot or two-shot.
  bool forcesInKernel() const {
    return fuseCollectives != braid::FuseCollectivesMode::Auto &&
           fuseCollectives != braid::FuseCollectivesMode::Off;
  }

  void processFunction(FunctionOpInterface function);
  /// A stencil after a halo exchange computes its interior while the halos
  /// travel (under auto when that is predicted faster): the shifts then
  /// have work to hide behind, which their asynchronous form uses.
  LogicalResult overlapHalos(FunctionOpInterface function);
  /// Whether the shifts of `chosen`'s schedule for `op` go one-sided, and
  /// why (for the remark and the report).
  bool chooseSymmetric(CollectiveOpInterface op, const Candidate &chosen,
                       std::string &why) const;
  /// comm=symmetric: whether a collective that stays whole moves by direct
  /// puts (the sweep at the end of the function rewrites it), and why;
  /// `why` stays empty for the other comm modes, which keep the library's
  /// collective.
  bool wholeSymmetric(CollectiveOpInterface op, std::string &why) const;
  /// Appends a whole collective's transport to its record and remark.
  void noteWholeTransport(CollectiveOpInterface op, Record &record,
                          llvm::raw_ostream &remark) const;
  /// With quantize-all-gather=bf16: an f32 all-gather sends bf16 instead.
  AllGatherOp quantize(AllGatherOp gather);
  LogicalResult writeReport();

  std::optional<CostModel> model;
  /// The pipeline's options, for the report (a JSON object), or empty.
  std::string reportOptions;

  /// The preset's name; `auto` outside a pipeline that resolves it is cpu.
  std::string presetName() const {
    return preset == braid::TargetPreset::Auto
               ? "cpu"
               : braid::options::spelling(preset.getValue());
  }
  ReplicationAnalysis replication;
  std::vector<Record> records;
  /// Runs per program run of each function reached from a public one
  /// through calls (a layer function: its number of calls).
  DenseMap<Operation *, int64_t> runs;
  void countRuns(ModuleOp module, ArrayRef<FunctionOpInterface> functions);
  int64_t runsOf(FunctionOpInterface function) const {
    return runs.lookup_or(function, 1);
  }
  /// Collectives to make asynchronous once every fused rewrite is done, so
  /// that their waits land before the final first uses: those the model
  /// chose `async` for, and those the rewrites create (the all-gather after
  /// a ring reduce-scatter), which are not reported separately.
  SmallVector<Operation *> deferredAsync;
  /// The all-gathers of two_shot_ar, moved by direct puts once every
  /// collective is decided (until then they prove their results
  /// replicated for the collectives after them).
  SmallVector<Operation *> deferredDirect;
  IRRewriter *rewriter = nullptr;
};

void OverlapPass::addInKernelCandidates(CollectiveOpInterface op,
                                        double libraryComm,
                                        SmallVector<Candidate, 2> &out,
                                        std::string &why) {
  bool scatters = isa<ReduceScatterOp>(op.getOperation());
  auto gather = dyn_cast<AllGatherOp>(op.getOperation());
  if (!scatters && !gather && !isa<AllReduceOp>(op.getOperation()))
    return;
  if (fuseCollectives == braid::FuseCollectivesMode::Off) {
    why = "fuse-collectives=off";
    return;
  }
  if (comm == braid::CommMode::TwoSided) {
    why = gather ? "the kernel stores into the peers' symmetric memory, and "
                   "comm=two-sided"
                 : "the kernel reads the partials from symmetric memory, and "
                   "comm=two-sided";
    return;
  }
  if (!sharesMemory(op, why))
    return;
  const TargetDescription &target = model->getTarget();
  if (comm == braid::CommMode::Auto && !forcesInKernel() &&
      !target.oneSidedLink) {
    why = "preset '" + target.name +
          "' has no measured one-sided link (comm=symmetric or "
          "fuse-collectives=force use one)";
    return;
  }
  std::string reason;
  if (failed(overlap::matchDirectExchange(op, reason))) {
    why = "no symmetric form: " + reason;
    return;
  }
  LinkFigures link = target.oneSidedLink
                         ? *target.oneSidedLink
                         : model->link(op, op.getGridAttr(), op.getAxes());
  // An all-gather has one form, which every fuse-collectives mode keeps.
  if (gather) {
    if (std::optional<Candidate> push =
            pushCandidate(gather, libraryComm, link, why))
      out.push_back(std::move(*push));
    return;
  }
  // fuse-collectives=one-shot or two-shot leaves an all-reduce only that
  // form; a reduce-scatter has one.
  std::string whyNotOne = "fuse-collectives=two-shot",
              whyNotTwo = "fuse-collectives=one-shot";
  if (scatters || fuseCollectives != braid::FuseCollectivesMode::TwoShot)
    if (std::optional<Candidate> one =
            oneShotCandidate(op, libraryComm, link, whyNotOne))
      out.push_back(std::move(*one));
  auto reduce = dyn_cast<AllReduceOp>(op.getOperation());
  if (reduce && fuseCollectives != braid::FuseCollectivesMode::OneShot)
    if (std::optional<Candidate> two =
            twoShotCandidate(reduce, libraryComm, link, whyNotTwo))
      out.push_back(std::move(*two));
  if (out.empty())
    why = scatters ? whyNotOne
                   : "one shot: " + whyNotOne + "; two shot: " + whyNotTwo;
}

std::optional<Candidate> OverlapPass::pushCandidate(AllGatherOp op,
                                                    double libraryComm,
                                                    LinkFigures link,
                                                    std::string &why) const {
  FailureOr<AllGatherMatmul> match = overlap::matchAllGatherMatmul(op, why);
  if (failed(match))
    return std::nullopt;
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
    return std::nullopt;
  }
  const CostModel &cost = *model;
  int64_t n = match->ring.groupSize;
  double chunk = tensorBytes(op.getInput());
  Candidate c;
  c.strategy = "push_ag_matmul";
  c.with = nameOf(match->consumer);
  c.chunks = n - 1;
  c.inKernel = true;
  c.kernel = "the kernel of '" + nameOf(producer) + "' at " +
             formatLoc(producer->getLoc());
  c.saving = "stores " + schedule::formatBytes((n - 1) * chunk) +
             " per rank straight into the peers' gather buffers in one round "
             "(a ring forwards the same bytes in " +
             std::to_string(n - 1) + " steps, copying what it received)";
  c.compute = cost.computeTime(match->consumer);
  c.serial = c.compute + libraryComm;
  // Every peer's chunk travels at once, one latency; the contraction's
  // own chunk runs meanwhile and each other chunk as it lands (each chunk
  // reading the whole of what the gathered loop does not index).
  double piece = cost.computeTime(match->consumer, 1.0 / n, match->loop);
  c.overlapped =
      std::max(n * piece * (1 + cost.getTarget().overlapInterference),
               link.latency + (n - 1) * chunk / link.bandwidth + piece);
  AllGatherMatmul m = *match;
  c.apply = [m](RewriterBase &rewriter) {
    RingOptions direct;
    direct.direct = true;
    return overlap::decomposeAllGatherMatmul(rewriter, m, direct);
  };
  return c;
}

std::optional<Candidate> OverlapPass::twoShotCandidate(AllReduceOp op,
                                                       double libraryComm,
                                                       LinkFigures link,
                                                       std::string &why) {
  FailureOr<overlap::TwoShotAllReduce> match =
      overlap::matchTwoShotAllReduce(op, replication, why);
  if (failed(match))
    return std::nullopt;
  const CostModel &cost = *model;
  int64_t n = match->ring.groupSize;
  double bytes = tensorBytes(op.getInput());
  double exits = 0;
  for (Value exit : match->chain.exits)
    exits += tensorBytes(exit);
  double chainFull = 0, chainPart = 0;
  for (linalg::LinalgOp e : match->chain.ops) {
    chainFull += cost.computeTime(e);
    chainPart += cost.computeTime(e, 1.0 / n);
  }
  // Each peer gets its block of the partial, then every block of each
  // value the chain leaves.
  double sent = (n - 1) * (bytes + exits) / n;
  Operation *head = match->chain.ops.front();
  Candidate c;
  c.strategy = "two_shot_ar";
  c.with = nameOf(head);
  c.chunks = (n - 1) * (1 + static_cast<int64_t>(match->chain.exits.size()));
  c.inKernel = true;
  c.kernel =
      "the kernel of '" + nameOf(head) + "' at " + formatLoc(head->getLoc());
  c.saving = "moves " + schedule::formatBytes(sent) +
             " per rank to the peers (a ring all-reduce: " +
             schedule::formatBytes(2.0 * (n - 1) / n * bytes) + "), runs " +
             std::to_string(match->chain.ops.size()) +
             " ops of the chain on 1/" + std::to_string(n) +
             " of the rows and gathers back " +
             std::to_string(match->chain.exits.size()) + " of its values";
  c.compute = chainFull;
  c.serial = libraryComm + chainFull;
  // Two rounds of puts; the kernel reads n partial blocks where the
  // unfused chain reads one, runs on 1/n of the rows, and what arrives is
  // assembled into the gathered values.
  c.overlapped = 2 * link.latency + sent / link.bandwidth +
                 cost.streamTime(std::max<double>(0, (n - 2) * bytes / n)) +
                 chainPart + cost.streamTime(2 * exits * (n - 1) / n);
  c.apply = [op, this](RewriterBase &rewriter) -> LogicalResult {
    FailureOr<SmallVector<AllGatherOp>> gathers =
        overlap::decomposeTwoShotAllReduce(rewriter, op, replication);
    if (failed(gathers))
      return failure();
    for (AllGatherOp gather : *gathers)
      deferredDirect.push_back(gather);
    return success();
  };
  return c;
}

std::optional<Candidate> OverlapPass::oneShotCandidate(CollectiveOpInterface op,
                                                       double libraryComm,
                                                       LinkFigures link,
                                                       std::string &why) const {
  bool scatters = isa<ReduceScatterOp>(op.getOperation());
  // Reshapes in between (a frontend's 2-D matmul result back to its 3-D
  // activations) move above the collective.
  Operation *user = overlap::userAfterReshapes(op, why);
  if (!user)
    return std::nullopt;
  if (user->getBlock() != op->getBlock() || !schedule::isMemoryBound(user)) {
    why = "'" + nameOf(user) +
          "' is not a memory-bound linalg op on static tensors that the sum "
          "could join";
    return std::nullopt;
  }
  int64_t n = groupSizeOf(op);
  double bytes = tensorBytes(op.getInput());
  // An all-reduce sends the whole partial to every peer; a reduce-scatter
  // sends each peer its block, as its ring does.
  double sent = scatters ? (n - 1) * bytes / n : (n - 1) * bytes;
  double received = scatters ? bytes / n : bytes;
  Candidate c;
  c.strategy = scatters ? "one_shot_rs" : "one_shot_ar";
  c.with = nameOf(user);
  c.chunks = n - 1;
  c.inKernel = true;
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
  c.serial = libraryComm;
  // The puts to the n - 1 peers, then the kernel reading n partials where
  // the unfused chain reads the reduced tensor, which the library's
  // collective no longer writes.
  c.overlapped = link.latency + sent / link.bandwidth +
                 model->streamTime(std::max<double>(0, (n - 2) * received));
  c.apply = [op](RewriterBase &rewriter) {
    return overlap::directExchange(
        rewriter, overlap::hoistReshapes(rewriter, op), /*oneShot=*/true);
  };
  return c;
}

std::optional<Candidate>
OverlapPass::attentionCandidate(AllGatherOp gather, LinkFigures link,
                                std::string &why) const {
  bool looksLike = false;
  FailureOr<RingAttention> match =
      overlap::matchRingAttention(gather, looksLike, why);
  if (failed(match)) {
    if (!looksLike)
      why.clear();
    return std::nullopt;
  }
  match->pieceSize = overlap::attentionPieceSize(match->chunk, subChunks);
  if (match->pieceSize == 0) {
    why = "its block of " + std::to_string(match->chunk) +
          " keys does not split into " + std::to_string(subChunks) +
          " pieces (sub-chunks)";
    return std::nullopt;
  }
  const CostModel &cost = *model;
  int64_t n = match->ring.groupSize;
  SmallVector<Operation *> ops{match->scores, match->max, match->exp,
                               match->sum,    match->div, match->output};
  for (const AttentionPrefix &p : match->scoreOps)
    if (isa<linalg::LinalgOp>(p.op))
      ops.push_back(p.op);
  if (match->expThen)
    ops.push_back(match->expThen);
  Candidate c;
  c.strategy = "ring_attention";
  c.with = nameOf(match->output);
  c.chunks = n * (match->chunk / match->pieceSize);
  c.always = true;
  c.partner = gather == match->keys ? match->values : match->keys;
  for (Operation *op : ops)
    c.compute += cost.computeTime(op);
  double keys = tensorBytes(match->keys.getInput());
  double values = tensorBytes(match->values.getInput());
  double comm = cost.collectiveTime("all_gather", keys * n, n, link) +
                cost.collectiveTime("all_gather", values * n, n, link);
  c.serial = c.compute + comm;
  // Balanced: each rank also scores the rows of the block it holds against
  // its own keys, q travelling with k and v and the partials coming back.
  bool causal = match->mask.has_value();
  bool wanted = balanceAttention == braid::BalanceAttention::On ||
                (balanceAttention == braid::BalanceAttention::Auto && causal);
  if (!wanted)
    c.unbalanced = causal ? "balance-attention=off" : "";
  else if (n < 3)
    c.unbalanced = "on 2 ranks it saves no step";
  else if (!match->helperBlocker.empty())
    c.unbalanced = match->helperBlocker;
  else
    c.balanced = match->balance = true;
  // The model prices every block on every rank, as it does the skip: on
  // CPU ranks the ring measured slower than the gathers even balanced
  // (bench/cpu/README.md), and no GPU has timed it. Balanced, q travels
  // with k and v and the partials come back after n / 2 + 1 steps.
  double stepBytes = keys + values;
  int64_t steps = n;
  double returned = 0;
  if (c.balanced) {
    for (OpOperand *input : match->scores.getDpsInputOperands())
      if (input->getOperandNumber() != match->keysOperand)
        stepBytes += tensorBytes(input->get());
    steps = n / 2 + 1;
    returned = cost.messageTime(tensorBytes(match->output->getResult(0)) +
                                    2 * tensorBytes(match->max->getResult(0)),
                                link);
  }
  c.overlapped =
      pipeline(c.compute / n, n, cost.messageTime(stepBytes, link), steps - 1) +
      returned;
  c.scoreBytes = tensorBytes(match->scores->getResult(0));
  c.stepScoreBytes = c.scoreBytes / (n * (match->chunk / match->pieceSize));
  c.skipsMasked = causal;
  RingAttention m = *match;
  c.apply = [m](RewriterBase &r) { return decomposeRingAttention(r, m); };
  return c;
}

SmallVector<RingOptions> OverlapPass::ringLayouts(int64_t chunkSize) const {
  SmallVector<RingOptions> layouts;
  SmallVector<int64_t> subs = subChunks > 0 ? SmallVector<int64_t>{subChunks}
                                            : SmallVector<int64_t>{1, 2, 4};
  SmallVector<bool> dirs;
  if (bidirectional != braid::Bidirectional::On)
    dirs.push_back(false);
  if (bidirectional != braid::Bidirectional::Off)
    dirs.push_back(true);
  for (bool bidir : dirs)
    for (int64_t k : subs) {
      RingOptions options{k, bidir};
      if (chunkSize % options.pieces() == 0)
        layouts.push_back(options);
    }
  return layouts;
}

void OverlapPass::addFusedCandidates(CollectiveOpInterface op, double comm,
                                     LinkFigures link,
                                     SmallVector<Candidate, 2> &out,
                                     std::string &why) {
  const CostModel &cost = *model;
  Operation *raw = op.getOperation();
  int64_t n = groupSizeOf(op);
  // A ring of n steps over n * pieces pieces of `computeOp`'s work along
  // its `loop`, each step moving a piece of a `chunkBytes` chunk; reducing
  // rings also add what arrives to each piece (read two, write one).
  auto ring = [&](StringRef base, RingOptions options, Operation *computeOp,
                  unsigned loop, double chunkBytes, bool reduces) {
    int64_t pieces = options.pieces();
    double pieceBytes = chunkBytes / pieces;
    double piece = cost.computeTime(computeOp, 1.0 / (n * pieces), loop);
    if (reduces)
      piece += cost.streamTime(3 * pieceBytes);
    double step = options.subChunks * cost.messageTime(pieceBytes, link);
    Candidate c;
    c.strategy = (base + (options.bidirectional ? "_bidir" : "")).str();
    c.with = nameOf(computeOp);
    c.chunks = n * pieces;
    c.compute = cost.computeTime(computeOp);
    c.serial = c.compute + comm;
    c.overlapped = pipeline(piece, n * pieces, step, n - 1);
    return c;
  };

  if (auto gather = dyn_cast<AllGatherOp>(raw)) {
    FailureOr<AllGatherMatmul> match = matchAllGatherMatmul(gather, why);
    if (failed(match))
      return;
    double chunkBytes = tensorBytes(gather.getInput());
    for (RingOptions options : ringLayouts(match->chunkSize)) {
      Candidate c = ring("ring_ag_matmul", options, match->consumer,
                         match->loop, chunkBytes, /*reduces=*/false);
      AllGatherMatmul m = *match;
      c.apply = [m, options](RewriterBase &r) mutable {
        return decomposeAllGatherMatmul(r, m, options);
      };
      out.push_back(std::move(c));
    }
    if (out.empty())
      why = "the local chunk of " + std::to_string(match->chunkSize) +
            " rows does not split into the requested pieces";
    return;
  }

  if (auto scatter = dyn_cast<ReduceScatterOp>(raw)) {
    FailureOr<MatmulReduceScatter> match =
        matchMatmulReduceScatter(scatter, why);
    if (failed(match))
      return;
    double blockBytes = tensorBytes(scatter.getResult());
    for (RingOptions options : ringLayouts(match->blockSize)) {
      Candidate c = ring("ring_matmul_rs", options, match->producer,
                         match->loop, blockBytes, /*reduces=*/true);
      MatmulReduceScatter m = *match;
      c.apply = [m, options](RewriterBase &r) mutable {
        return decomposeMatmulReduceScatter(r, m, options);
      };
      out.push_back(std::move(c));
    }
    return;
  }

  if (auto reduce = dyn_cast<AllReduceOp>(raw)) {
    FailureOr<MatmulAllReduce> match =
        matchMatmulAllReduce(reduce, replication, why);
    if (failed(match))
      return;
    if (!match->chainStop.empty())
      reduce->emitRemark() << "elementwise work stays after the all-reduce: "
                           << match->chainStop;
    double chainFull = 0, chainPart = 0;
    for (linalg::LinalgOp e : match->chain) {
      chainFull += cost.computeTime(e);
      chainPart += cost.computeTime(e, 1.0 / n);
    }
    double gather =
        cost.collectiveTime("all_gather", tensorBytes(match->exit), n, link);
    double blockBytes = tensorBytes(reduce.getInput()) / n;
    for (RingOptions options : ringLayouts(match->blockSize)) {
      // The reduce-scatter ring, then the chain on 1/n, then the gather.
      Candidate c =
          ring(match->chain.empty() ? "rs_ring_ag" : "rs_ring_ew_ag", options,
               match->producer, match->loop, blockBytes, /*reduces=*/true);
      c.compute += chainFull;
      c.serial = c.compute + comm;
      c.overlapped = c.overlapped + chainPart + gather;
      MatmulAllReduce m = *match;
      c.apply = [m, options, this](RewriterBase &r) mutable {
        FailureOr<AllGatherOp> gather = decomposeMatmulAllReduce(r, m, options);
        if (failed(gather))
          return failure();
        // The all-gather the rewrite leaves overlaps what follows it.
        deferredAsync.push_back(*gather);
        return success();
      };
      out.push_back(std::move(c));
    }
    return;
  }

  if (auto exchange = dyn_cast<AllToAllOp>(raw)) {
    FailureOr<AllToAllMatmul> match = matchAllToAllMatmul(exchange, why);
    if (failed(match))
      return;
    double compute = cost.computeTime(match->compute);
    double piece = cost.computeTime(match->compute, 1.0 / n, match->loop);
    Candidate c;
    c.strategy = match->dispatch ? "a2a_dispatch" : "a2a_combine";
    c.with = nameOf(match->compute);
    c.chunks = n;
    c.compute = compute;
    c.serial = compute + comm;
    c.overlapped = pipeline(piece, n, comm / (n - 1), n - 1);
    AllToAllMatmul m = *match;
    c.apply = [m](RewriterBase &r) mutable {
      return decomposeAllToAllMatmul(r, m);
    };
    out.push_back(std::move(c));
    return;
  }
  why = "no fused schedule exists for " + op.getCollectiveKind().str();
}

void OverlapPass::addMicroBatchCandidates(CollectiveOpInterface op, double comm,
                                          LinkFigures link,
                                          SmallVector<Candidate, 2> &out,
                                          std::string &why) {
  SmallVector<int64_t> counts = microBatches > 0
                                    ? SmallVector<int64_t>{microBatches}
                                    : SmallVector<int64_t>{2, 3, 4};
  int64_t n = groupSizeOf(op);
  for (int64_t parts : counts) {
    FailureOr<MicroBatch> match = matchMicroBatch(op, parts, why);
    if (failed(match))
      continue;
    double compute = model->computeTime(match->producer);
    double piece =
        model->computeTime(match->producer, 1.0 / parts, match->loop);
    double part = model->collectiveTime(op.getCollectiveKind(),
                                        commBytes(op) / parts, n, link);
    Candidate c;
    c.strategy = "micro_batch";
    c.with = nameOf(match->producer);
    c.chunks = parts;
    c.compute = compute;
    c.serial = compute + comm;
    c.overlapped = piece + (parts - 1) * asyncTime(piece, part) + part;
    MicroBatch m = *match;
    c.apply = [m, parts](RewriterBase &r) mutable {
      return splitMicroBatches(r, m, parts);
    };
    out.push_back(std::move(c));
  }
}

void OverlapPass::addAsyncCandidate(CollectiveOpInterface op, double comm,
                                    SmallVector<Candidate, 2> &out,
                                    std::string &why) {
  AsyncPlacement placement = planAsync(op);
  double between = 0;
  int64_t computeOps = 0;
  for (Operation *other : placement.overlapped)
    if (isa<linalg::LinalgOp>(other)) {
      between += model->computeTime(other);
      ++computeOps;
    }
  if (computeOps == 0) {
    why = "no independent computation to overlap it with";
    return;
  }
  Candidate c;
  c.strategy = "async";
  c.fused = false;
  c.compute = between;
  c.serial = between + comm;
  c.overlapped = asyncTime(between, comm);
  c.chunks = 1;
  c.apply = [op, this](RewriterBase &) mutable {
    deferredAsync.push_back(op);
    return success();
  };
  out.push_back(std::move(c));
}

/// An elementwise linalg.generic converting `input` to `elementType`.
static Value convertElements(OpBuilder &b, Location loc, Value input,
                             Type elementType) {
  auto type = cast<RankedTensorType>(input.getType());
  auto resultType = type.clone(elementType);
  Value init =
      tensor::EmptyOp::create(b, loc, resultType.getShape(), elementType);
  SmallVector<AffineMap> maps(2, b.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, resultType, input, init, maps, iterators,
      [&](OpBuilder &nested, Location nestedLoc, ValueRange args) {
        Value converted =
            elementType.getIntOrFloatBitWidth() <
                    type.getElementType().getIntOrFloatBitWidth()
                ? arith::TruncFOp::create(nested, nestedLoc, elementType,
                                          args[0])
                      .getResult()
                : arith::ExtFOp::create(nested, nestedLoc, elementType, args[0])
                      .getResult();
        linalg::YieldOp::create(nested, nestedLoc, converted);
      });
  return generic.getResult(0);
}

AllGatherOp OverlapPass::quantize(AllGatherOp gather) {
  auto type = cast<RankedTensorType>(gather.getInput().getType());
  if (!type.getElementType().isF32())
    return gather;
  OpBuilder b(gather);
  Location loc = gather.getLoc();
  Type bf16 = b.getBF16Type();
  Value narrow = convertElements(b, loc, gather.getInput(), bf16);
  auto resultType = cast<RankedTensorType>(gather.getResult().getType());
  auto sent =
      AllGatherOp::create(b, loc, resultType.clone(bf16), gather.getGridAttr(),
                          gather.getAxesAttr(), narrow, gather.getDimAttr());
  // Named matmuls take the bf16 value as it is (they extend each element
  // as they multiply, accumulating in f32), so the fused schedules still
  // see an all-gather feeding a contraction; anything else reads it
  // extended back to f32.
  Value widened;
  for (OpOperand &use : llvm::make_early_inc_range(gather->getUses())) {
    Operation *user = use.getOwner();
    auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
    if (isa<linalg::MatmulOp, linalg::BatchMatmulOp>(user) &&
        linalgOp.isDpsInput(&use)) {
      // A named op's body is typed by its operands: build it anew.
      SmallVector<Value> inputs(linalgOp.getDpsInputs());
      inputs[use.getOperandNumber()] = sent.getResult();
      OpBuilder at(user);
      Operation *rebuilt;
      if (auto matmul = dyn_cast<linalg::MatmulOp>(user))
        rebuilt = linalg::MatmulOp::create(
            at, matmul.getLoc(), matmul->getResultTypes(), inputs,
            matmul.getDpsInits(), linalg::getPrunedAttributeList(matmul));
      else
        rebuilt = linalg::BatchMatmulOp::create(
            at, user->getLoc(), user->getResultTypes(), inputs,
            linalgOp.getDpsInits(),
            linalg::getPrunedAttributeList(cast<linalg::BatchMatmulOp>(user)));
      user->replaceAllUsesWith(rebuilt->getResults());
      user->erase();
      continue;
    }
    if (!widened) {
      b.setInsertionPointAfter(sent);
      widened =
          convertElements(b, loc, sent.getResult(), type.getElementType());
    }
    use.set(widened);
  }
  gather->erase();
  return sent;
}

LogicalResult OverlapPass::overlapHalos(FunctionOpInterface function) {
  SmallVector<linalg::LinalgOp> consumers;
  function->walk([&](linalg::LinalgOp op) { consumers.push_back(op); });
  for (linalg::LinalgOp op : consumers) {
    std::string why;
    FailureOr<HaloInterior> match = overlap::matchHaloInterior(op, why);
    if (failed(match)) {
      if (!why.empty())
        emitRemark(op.getLoc()) << "halo exchange not overlapped: " << why;
      continue;
    }
    std::string name = nameOf(op);
    Location loc = op.getLoc();
    HaloInterior m = *match;
    // Under auto, as the asynchronous form the shifts then take is
    // judged: the interior's compute against the exchange, with the
    // overlap's interference and the frame's extra kernels.
    int64_t inside = 1, all = 1;
    for (size_t i = 0; i < m.loops.size(); ++i) {
      inside *= m.rows[i];
      all *= m.extent[i];
    }
    // Each shift's asynchronous form is judged by its own transfer.
    double exchange = 0;
    for (ShiftOp shift : m.shifts)
      exchange = std::max(
          exchange, model->messageTime(tensorBytes(shift.getInput()),
                                       model->link(shift, shift.getGridAttr(),
                                                   shift.getAxes())));
    double interior = model->computeTime(op, double(inside) / all);
    double serial = interior + exchange;
    double overlapped =
        asyncTime(interior, exchange) +
        2.0 * m.loops.size() * model->getTarget().launchOverhead;
    if (mode != braid::OverlapMode::Force &&
        serial - overlapped <= 0.01 * serial) {
      emitRemark(loc) << "halo exchange not overlapped: the interior of '"
                      << name << "' predicted " << us(overlapped)
                      << " with the exchange overlapped (its extra kernels "
                         "included) against "
                      << us(serial) << " serial";
      continue;
    }
    if (failed(overlap::splitHaloInterior(*rewriter, m))) {
      return emitError(loc) << "braid-overlap: the halo interior split failed";
    }
    std::string box, loops;
    for (size_t i = 0; i < m.loops.size(); ++i) {
      box += (i ? " x " : "") + std::to_string(m.first[i]) + ".." +
             std::to_string(m.first[i] + m.rows[i]) + " of " +
             std::to_string(m.extent[i]);
      loops += (i ? ", " : "") + std::to_string(m.loops[i]);
    }
    emitRemark(loc) << "'" << name << "' computes iterations " << box
                    << " along loop" << (m.loops.size() > 1 ? "s " : " ")
                    << loops
                    << " (which read no halo row) before the halo exchange "
                       "completes, the other "
                    << all - inside << " after it";
  }
  return success();
}

/// Erases the all-gathers of `collectives` that nothing reads any more,
/// once the ops without effect that read them and are unused are gone
/// (rotary tables partitioning gathered back, whose readers moved before
/// another gather); their entries become null. Every rank drops the same
/// ones.
static void dropUnreadGathers(SmallVectorImpl<CollectiveOpInterface> &list) {
  // Users first; never a collective, which the list may hold.
  std::function<void(Operation *)> eraseDeadUsers = [&](Operation *op) {
    for (Operation *user : llvm::make_early_inc_range(op->getUsers())) {
      if (isa<CollectiveOpInterface>(user))
        continue;
      eraseDeadUsers(user);
      if (isOpTriviallyDead(user))
        user->erase();
    }
  };
  for (CollectiveOpInterface &op : list) {
    auto gather =
        dyn_cast_if_present<AllGatherOp>(op ? op.getOperation() : nullptr);
    if (!gather)
      continue;
    eraseDeadUsers(gather);
    if (!gather->use_empty())
      continue;
    emitRemark(gather.getLoc())
        << "all_gather removed: nothing reads its result any more";
    gather->erase();
    op = nullptr;
  }
}

void OverlapPass::processFunction(FunctionOpInterface function) {
  SmallVector<CollectiveOpInterface> collectives;
  function->walk([&](CollectiveOpInterface op) {
    if (!op.isAsync())
      collectives.push_back(op);
  });
  // Row-local work after an all-gather (a norm, its weight, a reshape)
  // runs before it, on 1/n of the data, so that the gather feeds the
  // matmul. Every gather first: ring attention matches both of k and v.
  if (mode != braid::OverlapMode::Off) {
    SmallVector<CollectiveOpInterface> added;
    for (CollectiveOpInterface &op : collectives) {
      auto gather = dyn_cast<AllGatherOp>(op.getOperation());
      if (!gather)
        continue;
      int64_t moved = 0;
      double before = tensorBytes(gather.getResult());
      Location loc = gather.getLoc();
      FailureOr<SmallVector<AllGatherOp>> sunk = overlap::sinkAllGather(
          gather, replication, model ? &*model : nullptr, moved);
      if (failed(sunk))
        continue;
      replication.invalidate();
      if (sunk->empty()) {
        // Everything after it took this rank's block back.
        op = nullptr;
        emitRemark(loc) << "all_gather removed: the " << moved
                        << " row-local ops after it moved before it, and "
                           "what followed them read only this rank's block";
        continue;
      }
      op = sunk->front();
      llvm::append_range(added, llvm::drop_begin(*sunk));
      InFlightDiagnostic remark = emitRemark(loc);
      remark << "all_gather moved after the " << moved
             << " row-local ops that followed it (their other operands are "
                "replicated): they run on 1/"
             << groupSizeOf(op) << " of the rows";
      if (sunk->size() > 1) {
        double after = 0;
        for (AllGatherOp value : *sunk)
          after += tensorBytes(value.getResult());
        remark << "; " << sunk->size()
               << " values are gathered after them instead of one ("
               << schedule::formatBytes(after) << " instead of "
               << schedule::formatBytes(before) << ")";
      }
    }
    llvm::append_range(collectives, added);
    dropUnreadGathers(collectives);
    replication.invalidate();
  }
  if (mode != braid::OverlapMode::Off && failed(overlapHalos(function)))
    return signalPassFailure();
  for (size_t index = 0; index < collectives.size(); ++index) {
    CollectiveOpInterface op = collectives[index];
    // Taken by an earlier one's schedule (v's gather in ring attention).
    if (!op)
      continue;
    Record record;
    record.function = function.getName().str();
    record.calls = runsOf(function);
    record.kind = op.getCollectiveKind().str();
    record.loc = formatLoc(op.getLoc());
    // Ring attention takes both gathers whenever it applies; they are not
    // quantized.
    std::optional<Candidate> attention;
    if (auto gather = dyn_cast<AllGatherOp>(op.getOperation());
        gather && mode != braid::OverlapMode::Off &&
        !ShapedType::isDynamic(groupSizeOf(op))) {
      std::string why;
      attention = attentionCandidate(
          gather, model->link(op, op.getGridAttr(), op.getAxes()), why);
      // Under auto it must be predicted faster, or save a rank from
      // holding more scores than kScoreBudget; force always takes it.
      constexpr double kScoreBudget = 256.0 * (1 << 20);
      if (attention && mode != braid::OverlapMode::Force &&
          attention->gain() <= 0.01 * attention->serial &&
          attention->scoreBytes <= kScoreBudget) {
        why = "predicted " + us(attention->overlapped) + " against " +
              us(attention->serial) + " for the gathers and the whole rows, " +
              "and the " + schedule::formatBytes(attention->scoreBytes) +
              " of scores a rank holds fit the " +
              schedule::formatBytes(kScoreBudget) + " budget";
        attention.reset();
      }
      if (!attention && !why.empty())
        emitRemark(op.getLoc()) << "not ring attention: " << why;
    }
    if (auto gather = dyn_cast<AllGatherOp>(op.getOperation());
        gather && !attention &&
        quantizeAllGather == braid::QuantizeMode::Bf16 &&
        cast<RankedTensorType>(gather.getInput().getType())
            .getElementType()
            .isF32()) {
      op = quantize(gather);
      replication.invalidate();
      record.quantized = "bf16";
      // Round to nearest: half a unit in the last of bf16's 8 bits.
      record.quantizationError = std::ldexp(1.0, -8);
      op->emitRemark() << "all_gather sends bf16 instead of f32 "
                          "(quantize-all-gather=bf16): relative error of "
                          "each element at most 2^-8";
    } else if (gather && !attention &&
               quantizeAllGather == braid::QuantizeMode::Fp8) {
      Type element =
          cast<RankedTensorType>(gather.getInput().getType()).getElementType();
      FailureOr<AllGatherOp> sent = overlap::quantizeAllGatherFp8(gather);
      if (succeeded(sent)) {
        op = *sent;
        replication.invalidate();
        record.quantized = "fp8-e4m3";
        // Nearest of e4m3's 3 mantissa bits: half a unit, 2^-4 relative;
        // below its smallest normal (2^-6 of 448 after scaling) the spacing
        // is 2^-9, so at most 2^-10 / 448 of the chunk's largest magnitude
        // absolute.
        record.quantizationError = std::ldexp(1.0, -4);
        record.quantizationAbsolute = std::ldexp(1.0, -10) / 448.0;
        op->emitRemark()
            << "all_gather sends fp8 (e4m3) with one scale per rank's chunk "
               "instead of "
            << element
            << " (quantize-all-gather=fp8): each element within 2^-4 "
               "relative, or 2^-10/448 of its chunk's largest magnitude";
      } else {
        gather->emitRemark() << "all_gather not quantized: fp8 needs a "
                                "statically shaped f32, bf16 or f16 tensor";
      }
    }
    int64_t n = groupSizeOf(op);
    LinkFigures link = model->link(op, op.getGridAttr(), op.getAxes());
    record.comm = ShapedType::isDynamic(n)
                      ? 0
                      : model->collectiveTime(op.getCollectiveKind(),
                                              commBytes(op), n, link);
    record.serial = record.overlapped = record.comm;

    if (mode == braid::OverlapMode::Off) {
      record.decision = "kept";
      record.reason = "overlap=off";
      std::string text;
      llvm::raw_string_ostream remark(text);
      remark << op.getCollectiveKind() << " kept whole: overlap=off";
      noteWholeTransport(op, record, remark);
      op->emitRemark() << text;
      ++numKept;
      records.push_back(record);
      continue;
    }

    SmallVector<Candidate, 2> fused, micro, async;
    std::string whyFused, whyMicro, whyAsync;
    if (!ShapedType::isDynamic(n)) {
      addFusedCandidates(op, record.comm, link, fused, whyFused);
      addMicroBatchCandidates(op, record.comm, link, micro, whyMicro);
    } else {
      whyFused = "the group size is dynamic";
    }
    addAsyncCandidate(op, record.comm, async, whyAsync);
    std::string whyNotInKernel;
    SmallVector<Candidate, 2> inKernelList;
    addInKernelCandidates(op, record.comm, inKernelList, whyNotInKernel);
    // fuse-collectives=force picks the in-kernel form with the best gain;
    // overlap=force forces the overlap schedules as before; auto weighs
    // them against those by their gain.
    const Candidate *inKernel = nullptr;
    for (const Candidate &c : inKernelList)
      if (!inKernel || c.gain() > inKernel->gain())
        inKernel = &c;

    const Candidate *chosen = nullptr;
    std::string declined;
    if (attention) {
      chosen = &*attention;
    } else if (inKernel && forcesInKernel()) {
      chosen = inKernel;
    } else if (mode == braid::OverlapMode::Force) {
      // The first layout of the first kind that applies: a fused schedule,
      // else micro-batches, else the asynchronous form.
      for (auto *list : {&fused, &micro, &async})
        if (!list->empty()) {
          chosen = &list->front();
          break;
        }
      if (!chosen)
        declined = whyFused.empty() ? whyAsync : whyFused + "; " + whyAsync;
    } else {
      const Candidate *best = nullptr;
      for (auto *list : {&fused, &micro, &async, &inKernelList})
        for (const Candidate &c : *list)
          if (!best || c.gain() > best->gain())
            best = &c;
      if (best && best->gain() > 0.01 * best->serial) {
        chosen = best;
      } else if (best) {
        declined = "no schedule is predicted faster: best is " +
                   best->strategy + " at " + us(best->overlapped) +
                   " against " + us(best->serial) + " serial";
        record.with = best->with;
        record.compute = best->compute;
        record.serial = record.overlapped = best->serial;
      } else {
        declined = whyFused.empty() ? whyAsync : whyFused + "; " + whyAsync;
      }
    }

    if (!chosen) {
      if (!whyNotInKernel.empty())
        declined += "; not in a kernel: " + whyNotInKernel;
      record.decision = "kept";
      record.reason = declined;
      std::string text;
      llvm::raw_string_ostream remark(text);
      remark << op.getCollectiveKind() << " kept whole: " << declined;
      noteWholeTransport(op, record, remark);
      op->emitRemark() << text;
      ++numKept;
      records.push_back(record);
      continue;
    }
    record.decision = chosen->fused ? "fused" : "async";
    record.with = chosen->with;
    record.strategy = chosen->strategy;
    record.chunks = chosen->chunks;
    record.compute = chosen->compute;
    record.serial = chosen->serial;
    record.overlapped = chosen->overlapped;
    record.inKernel = chosen->inKernel;
    record.kernel = chosen->kernel;
    record.scoreBytes = chosen->scoreBytes;
    record.stepScoreBytes = chosen->stepScoreBytes;
    record.skipsMasked = chosen->skipsMasked;
    record.balanced = chosen->balanced;
    record.unbalanced = chosen->unbalanced;
    record.reason =
        (chosen->always && mode == braid::OverlapMode::Force ? "overlap=force; "
         : chosen->always ? (chosen->gain() > 0.01 * chosen->serial
                                 ? "predicted faster; "
                                 : "its scores exceed the budget a rank may "
                                   "hold whole; ")
         : chosen->inKernel && forcesInKernel()
             ? std::string("fuse-collectives=") +
                   braid::options::spelling(fuseCollectives.getValue()) + "; "
         : mode == braid::OverlapMode::Force ? "overlap=force; "
                                             : "") +
        std::string("predicted ") + us(chosen->serial) + " serial, " +
        us(chosen->overlapped) + " overlapped";
    if (!chosen->inKernel && !whyNotInKernel.empty())
      record.reason += "; not in a kernel: " + whyNotInKernel;
    if (!whyFused.empty() && !chosen->fused)
      record.reason += "; not fused: " + whyFused;
    std::string text;
    llvm::raw_string_ostream remark(text);
    bool gathers = isa<AllGatherOp>(op.getOperation());
    if (chosen->inKernel)
      remark << op.getCollectiveKind()
             << (gathers ? " written into every peer's buffer by "
                         : " summed inside ")
             << chosen->kernel << " as " << chosen->strategy << " ("
             << chosen->chunks << " puts): ";
    else if (chosen->fused)
      remark << op.getCollectiveKind() << " fused with '" << chosen->with
             << "' as " << chosen->strategy << " (" << chosen->chunks
             << " chunks): ";
    else
      remark << op.getCollectiveKind() << " made asynchronous: ";
    remark << "predicted " << us(chosen->serial) << " serial, "
           << us(chosen->overlapped) << " overlapped";
    if (!chosen->fused && !whyFused.empty())
      remark << "; not fused: " << whyFused;
    if (chosen->partner)
      remark << "; with the all_gather at "
             << formatLoc(chosen->partner->getLoc())
             << " in the same ring; a rank holds "
             << schedule::formatBytes(chosen->stepScoreBytes)
             << " of scores per step instead of "
             << schedule::formatBytes(chosen->scoreBytes)
             << (chosen->skipsMasked ? "; skips the pieces its mask fills whole"
                                     : "")
             << (chosen->balanced ? "; balanced: each rank also scores the "
                                    "rows of the block it holds"
                 : chosen->unbalanced.empty()
                     ? ""
                     : "; not balanced: " + chosen->unbalanced);
    if (chosen->inKernel) {
      remark << "; " << chosen->saving;
    } else if (!whyNotInKernel.empty() && !chosen->partner) {
      remark << "; not in a kernel: " << whyNotInKernel;
    }
    // Decided before the rewrite erases the collective; applies only if
    // the schedule has ring shifts.
    std::string whyTransport =
        !chosen->inKernel ? ""
        : gathers         ? "the kernel stores its rows into the peers' "
                            "symmetric slots"
                          : "the kernel sums the partials the peers put into "
                            "this rank's symmetric slots";
    bool symmetric =
        chosen->inKernel || chooseSymmetric(op, *chosen, whyTransport);
    // The asynchronous form keeps the collective whole.
    if (!chosen->fused && chosen->strategy == "async")
      noteWholeTransport(op, record, remark);
    Location loc = op.getLoc();
    // The partner gather is reported with the schedule that takes it.
    std::optional<Record> partnerRecord;
    if (chosen->partner) {
      for (CollectiveOpInterface &later : collectives)
        if (later && later.getOperation() == chosen->partner)
          later = {};
      partnerRecord = record;
      partnerRecord->loc = formatLoc(chosen->partner->getLoc());
      partnerRecord->reason = "travels in the ring_attention of the "
                              "all_gather at " +
                              record.loc;
    }
    ShiftCollector collector;
    rewriter->setListener(&collector);
    LogicalResult applied = chosen->apply(*rewriter);
    rewriter->setListener(nullptr);
    if (failed(applied)) {
      emitError(loc) << "braid-overlap: the " << chosen->strategy
                     << " rewrite failed";
      return signalPassFailure();
    }
    if (!collector.shifts.empty()) {
      noteTransport(record, remark, symmetric, whyTransport);
      if (symmetric)
        for (Operation *shift : collector.shifts)
          shift->setAttr(DistDialect::getSymmetricAttrName(),
                         rewriter->getUnitAttr());
    }
    // Whole collectives the rewrite made move as the sweep decides.
    if (comm == braid::CommMode::Symmetric && !collector.collectives.empty()) {
      std::string why;
      bool all = llvm::all_of(collector.collectives, [&](Operation *made) {
        return wholeSymmetric(cast<CollectiveOpInterface>(made), why);
      });
      if (collector.shifts.empty() || !all)
        noteTransport(record, remark, all, why);
    }
    emitRemark(loc) << text;
    chosen->fused ? ++numFused : ++numAsync;
    replication.invalidate();
    records.push_back(record);
    if (partnerRecord) {
      partnerRecord->transport = record.transport;
      records.push_back(*partnerRecord);
      ++numFused;
    }
  }

  // Start early, wait late, now that the schedules around are final.
  for (Operation *op : deferredAsync) {
    auto collective = cast<CollectiveOpInterface>(op);
    AsyncPlacement placement = planAsync(collective);
    if (llvm::any_of(placement.overlapped,
                     [](Operation *o) { return isa<linalg::LinalgOp>(o); }))
      makeAsync(*rewriter, collective, placement);
  }
  deferredAsync.clear();
  for (Operation *op : deferredDirect)
    if (failed(overlap::directExchange(*rewriter,
                                       cast<CollectiveOpInterface>(op)))) {
      op->emitError() << "braid-overlap: the direct exchange of this "
                         "all_gather failed";
      return signalPassFailure();
    }
  deferredDirect.clear();

  // comm=symmetric: every collective still whole, synchronous or started,
  // moves by direct puts where it has that form (the records said so).
  if (comm == braid::CommMode::Symmetric) {
    SmallVector<CollectiveOpInterface> whole;
    function->walk([&](CollectiveOpInterface op) {
      if (!op->hasAttr(DistDialect::getSymmetricAttrName()))
        whole.push_back(op);
    });
    for (CollectiveOpInterface op : whole) {
      std::string why;
      if (wholeSymmetric(op, why) &&
          failed(overlap::directExchange(*rewriter, op))) {
        op->emitError() << "braid-overlap: the direct exchange of this "
                        << op.getCollectiveKind() << " failed";
        return signalPassFailure();
      }
    }
  }
}

/// Whether the group of `op` may share memory: not when `dist.topology`
/// makes one of its axes a network link (the group spans nodes).
bool sharesMemory(CollectiveOpInterface op, std::string &why) {
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  auto topology =
      grid ? grid->getAttrOfType<ArrayAttr>(DistDialect::getTopologyAttrName())
           : ArrayAttr();
  for (int16_t axis : op.getAxes()) {
    if (!topology || axis >= static_cast<int64_t>(topology.size()))
      continue;
    auto link = dyn_cast<LinkAttr>(topology[axis]);
    if (link && link.getLinkClass() == LinkClass::Network) {
      why = "grid axis " + std::to_string(axis) +
            " is a network link (dist.topology): the group spans nodes and "
            "shares no memory";
      return false;
    }
  }
  return true;
}

bool OverlapPass::wholeSymmetric(CollectiveOpInterface op,
                                 std::string &why) const {
  if (comm != braid::CommMode::Symmetric)
    return false;
  if (!sharesMemory(op, why))
    return false;
  std::string reason;
  if (failed(overlap::matchDirectExchange(op, reason))) {
    why = "no symmetric form: " + reason;
    return false;
  }
  int64_t peers = groupSizeOf(op) - 1;
  if (isa<ShiftOp, ShiftStartOp>(op.getOperation()))
    why = "comm=symmetric; a put to the peer";
  else
    why = "comm=symmetric; direct puts to the " + std::to_string(peers) +
          (peers == 1 ? " peer" : " peers");
  return true;
}

void OverlapPass::noteWholeTransport(CollectiveOpInterface op, Record &record,
                                     llvm::raw_ostream &remark) const {
  std::string why;
  bool symmetric = wholeSymmetric(op, why);
  if (!why.empty())
    noteTransport(record, remark, symmetric, why);
}

bool OverlapPass::chooseSymmetric(CollectiveOpInterface op,
                                  const Candidate &chosen,
                                  std::string &why) const {
  if (comm == braid::CommMode::TwoSided) {
    why = "comm=two-sided";
    return false;
  }
  if (!sharesMemory(op, why))
    return false;
  switch (comm) {
  case braid::CommMode::TwoSided:
    return false;
  case braid::CommMode::Symmetric:
    why = "comm=symmetric";
    return true;
  case braid::CommMode::Auto:
    break;
  }
  const TargetDescription &target = model->getTarget();
  if (!target.oneSidedLink) {
    why = "preset '" + target.name +
          "' has no measured one-sided link (comm=symmetric forces them)";
    return false;
  }
  // Each ring step moves a piece: the steps' latencies and the bytes
  // (about the collective's larger side) at each transport's bandwidth.
  double bytes = std::max(tensorBytes(op.getInput()),
                          tensorBytes(op.getCollectiveResult()));
  int64_t steps = std::max<int64_t>(chosen.chunks, 1);
  LinkFigures twoSided = model->link(op, op.getGridAttr(), op.getAxes());
  const LinkFigures &oneSidedLink = *target.oneSidedLink;
  double a = steps * twoSided.latency + bytes / twoSided.bandwidth;
  double b = steps * oneSidedLink.latency + bytes / oneSidedLink.bandwidth;
  if (b < a) {
    why =
        "predicted " + us(b) + " of transfers against " + us(a) + " two-sided";
    return true;
  }
  why = "one-sided predicted no faster (" + us(b) + " against " + us(a) + ")";
  return false;
}

LogicalResult OverlapPass::writeReport() {
  if (report.empty())
    return success();
  std::string message;
  std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(report, &message);
  if (!file)
    return getOperation().emitError()
           << "braid-overlap: cannot write the report: " << message;
  // Written in a fixed key order, times in microseconds with one decimal.
  llvm::json::OStream json(file->os(), /*IndentSize=*/2);
  auto time = [&](StringRef key, double seconds) {
    json.attributeBegin(key);
    json.rawValue(llvm::formatv("{0:f1}", seconds * 1e6).str());
    json.attributeEnd();
  };
  auto optional = [&](StringRef key, const std::string &value) {
    if (value.empty())
      json.attribute(key, nullptr);
    else
      json.attribute(key, value);
  };
  json.object([&] {
    json.attribute("target_preset", presetName());
    json.attribute("mode", braid::options::spelling(mode.getValue()));
    if (!reportOptions.empty()) {
      json.attributeBegin("options");
      json.rawValue(reportOptions);
      json.attributeEnd();
    }
    json.attributeArray("collectives", [&] {
      for (const Record &r : records)
        json.object([&] {
          json.attribute("kind", r.kind);
          json.attribute("loc", r.loc);
          json.attribute("function", r.function);
          json.attribute("calls", r.calls);
          json.attribute("decision", r.decision);
          optional("with", r.with);
          optional("strategy", r.strategy);
          json.attribute("chunks", r.chunks);
          if (r.scoreBytes > 0)
            json.attributeObject("scores", [&] {
              json.attribute("materialized_bytes", r.scoreBytes);
              json.attribute("per_step_bytes", r.stepScoreBytes);
              json.attribute("skips_masked", r.skipsMasked);
              json.attribute("balanced", r.balanced);
              if (!r.unbalanced.empty())
                json.attribute("not_balanced", r.unbalanced);
            });
          json.attribute("transport", r.transport);
          if (r.inKernel) {
            json.attribute("in_kernel", true);
            json.attribute("kernel", r.kernel);
          }
          json.attribute("reason", r.reason);
          json.attributeObject("predicted", [&] {
            time("compute_us", r.compute);
            time("comm_us", r.comm);
            time("serial_us", r.serial);
            time("overlapped_us", r.overlapped);
          });
          if (!r.quantized.empty())
            json.attributeObject("quantized", [&] {
              json.attribute("format", r.quantized);
              json.attribute("max_relative_error", r.quantizationError);
              if (r.quantizationAbsolute > 0)
                json.attribute("max_absolute_error_over_chunk_amax",
                               r.quantizationAbsolute);
            });
        });
    });
  });
  file->os() << "\n";
  file->keep();
  return success();
}

void OverlapPass::countRuns(ModuleOp module,
                            ArrayRef<FunctionOpInterface> functions) {
  // A public function runs once; a private one as often as all its callers'
  // calls together (memoized; a recursion deeper than 16 counts once).
  std::function<int64_t(FunctionOpInterface, unsigned)> count =
      [&](FunctionOpInterface function, unsigned depth) -> int64_t {
    if (auto it = runs.find(function); it != runs.end())
      return it->second;
    if (!function.isPrivate() || depth > 16)
      return 1;
    int64_t total = 0;
    if (auto uses = SymbolTable::getSymbolUses(function, module))
      for (const SymbolTable::SymbolUse &use : *uses)
        if (auto caller = use.getUser()->getParentOfType<FunctionOpInterface>())
          total += count(caller, depth + 1);
    return runs[function] = std::max<int64_t>(total, 1);
  };
  for (FunctionOpInterface function : functions)
    count(function, 0);
}

void OverlapPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto bad = [&](const Twine &what) {
    module.emitError() << "braid-overlap: " << what;
    signalPassFailure();
  };
  if (microBatches < 0 || microBatches == 1)
    return bad("micro-batches must be 0 (the model picks) or at least 2");
  if (subChunks < 0)
    return bad("sub-chunks must be 0 (the model picks) or positive");
  std::optional<TargetDescription> target =
      TargetDescription::preset(presetName());
  if (!target)
    return bad("no cost model figures for preset '" + presetName() + "'");
  if (peakTflops > 0) {
    double scale = target->peakFlops32 / target->peakFlops16;
    target->peakFlops16 = peakTflops * 1e12;
    target->peakFlops32 = peakTflops * 1e12 * scale;
  }
  if (memoryBandwidth > 0)
    target->memoryBandwidth = memoryBandwidth * 1e9;
  if (linkBandwidth > 0)
    target->defaultLink.bandwidth = linkBandwidth * 1e9;
  if (linkLatency >= 0)
    target->defaultLink.latency = linkLatency * 1e-6;
  model.emplace(*target);

  IRRewriter rewriterInstance(&getContext());
  rewriter = &rewriterInstance;
  SmallVector<FunctionOpInterface> functions;
  module.walk([&](FunctionOpInterface f) { functions.push_back(f); });
  countRuns(module, functions);
  for (FunctionOpInterface function : functions)
    processFunction(function);
  if (failed(writeReport()))
    signalPassFailure();
}

} // namespace

std::unique_ptr<Pass> braid::dist::createOverlap(const OverlapOptions &options,
                                                 std::string reportOptions) {
  auto pass = std::make_unique<OverlapPass>(options);
  pass->setReportOptions(std::move(reportOptions));
  return pass;
}
