//===- Driver.cpp - braid-overlap: collect, propose, select, apply -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// For each function: the halo stage, then every collective in program
// order: ring attention first (it takes k's and v's gathers together),
// then every other family of patterns; the selection policy picks one (or
// keeps the collective whole), the driver applies it, records the decision
// and emits its remark. What the rewrites leave for later (asynchronous
// starts, direct exchanges) is finished once the function's schedules are
// final; with comm=symmetric, every collective still whole then moves by
// direct puts.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"
#include "Report.h"
#include "Selection.h"
#include "Transport.h"

#include "braid/Dialect/Dist/Transforms/Replication.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/SymbolTable.h"

#include <functional>

namespace braid::dist {
#define GEN_PASS_DEF_OVERLAP
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

namespace {

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

struct OverlapPass : public braid::dist::impl::OverlapBase<OverlapPass> {
  using Base::Base;

  void setReportOptions(std::string json) { reportOptions = std::move(json); }

  void runOnOperation() override;

private:
  /// The pass's options as the patterns read them.
  OverlapOptions options() const;
  std::string presetName() const {
    return overlap::presetName(preset.getValue());
  }

  LogicalResult processFunction(FunctionOpInterface function, Context &context);
  /// Decides `collectives[index]`, applies the choice and records it;
  /// later entries that its schedule takes along become null.
  LogicalResult decide(FunctionOpInterface function, Context &context,
                       MutableArrayRef<CollectiveOpInterface> collectives,
                       size_t index, FollowUps &followUps);
  /// The ring attention a gather takes part in, if its pattern proposes
  /// it (a remark says why not when a softmax follows).
  std::optional<Candidate> proposeAttention(CollectiveOpInterface op,
                                            Context &context);
  /// Keeps `op` whole: its record and remark.
  void keep(CollectiveOpInterface op, Record record, StringRef why,
            const Context &context);
  /// Applies `chosen` to `op`: the record, the remark, the transport.
  LogicalResult apply(CollectiveOpInterface op, const Candidate &chosen,
                      const Proposals &proposals, Record record,
                      Context &context, FollowUps &followUps);
  /// Starts early and waits late what the rewrites asked, and moves their
  /// all-gathers by direct puts; with comm=symmetric, every collective
  /// still whole.
  LogicalResult finish(FunctionOpInterface function, const Context &context,
                       FollowUps &followUps);

  /// The pipeline's options, for the report (a JSON object), or empty.
  std::string reportOptions;
  ReplicationAnalysis replication;
  std::vector<Record> records;
  /// Runs per program run of each function reached from a public one
  /// through calls (a layer function: its number of calls).
  DenseMap<Operation *, int64_t> runs;
  void countRuns(ModuleOp module, ArrayRef<FunctionOpInterface> functions);
  IRRewriter *rewriter = nullptr;
};

OverlapOptions OverlapPass::options() const {
  OverlapOptions o;
  o.mode = mode;
  o.preset = preset;
  o.report = report;
  o.subChunks = subChunks;
  o.bidirectional = bidirectional;
  o.balanceAttention = balanceAttention;
  o.microBatches = microBatches;
  o.bucketBytes = bucketBytes;
  o.peakTflops = peakTflops;
  o.memoryBandwidth = memoryBandwidth;
  o.linkBandwidth = linkBandwidth;
  o.linkLatency = linkLatency;
  o.comm = comm;
  o.fuseCollectives = fuseCollectives;
  return o;
}

LogicalResult OverlapPass::processFunction(FunctionOpInterface function,
                                           Context &context) {
  SmallVector<CollectiveOpInterface> collectives;
  function->walk([&](CollectiveOpInterface op) {
    if (!op.isAsync())
      collectives.push_back(op);
  });
  if (mode != braid::OverlapMode::Off &&
      failed(overlapHalos(function, context, *rewriter)))
    return failure();
  FollowUps followUps;
  for (size_t index = 0; index < collectives.size(); ++index)
    // Null: taken by an earlier one's schedule (v's gather in ring
    // attention).
    if (collectives[index] &&
        failed(decide(function, context, collectives, index, followUps)))
      return failure();
  return finish(function, context, followUps);
}

std::optional<Candidate> OverlapPass::proposeAttention(CollectiveOpInterface op,
                                                       Context &context) {
  if (mode == braid::OverlapMode::Off || ShapedType::isDynamic(groupSizeOf(op)))
    return std::nullopt;
  Site site{op, groupSizeOf(op), 0, context.link(op)};
  SmallVector<Candidate, 1> out;
  std::string why;
  proposeFamily(Family::Attention, site, context, out, why);
  if (out.empty()) {
    if (!why.empty())
      emitRemark(op.getLoc()) << "not ring attention: " << why;
    return std::nullopt;
  }
  return std::move(out.front());
}

LogicalResult
OverlapPass::decide(FunctionOpInterface function, Context &context,
                    MutableArrayRef<CollectiveOpInterface> collectives,
                    size_t index, FollowUps &followUps) {
  CollectiveOpInterface op = collectives[index];
  Record record;
  record.function = function.getName().str();
  record.calls = runs.lookup_or(function, 1);
  record.kind = op.getCollectiveKind().str();
  record.loc = formatLoc(op.getLoc());
  // Sent in fewer bits (braid-quantize-all-gather).
  if (auto format =
          op->getAttrOfType<StringAttr>(DistDialect::getQuantizedAttrName())) {
    record.quantized = format.getValue().str();
    quantizationBounds(record.quantized, record.quantizationError,
                       record.quantizationAbsolute);
    // Reported: the attribute has done its work.
    op->removeAttr(DistDialect::getQuantizedAttrName());
  }
  // Ring attention takes both gathers whenever it applies.
  std::optional<Candidate> attention = proposeAttention(op, context);
  Site site = siteOf(op, context);
  record.comm = site.comm;
  record.serial = record.overlapped = record.comm;
  if (mode == braid::OverlapMode::Off) {
    keep(op, std::move(record), "overlap=off", context);
    return success();
  }
  Proposals proposals = proposeAll(site, context);
  Choice choice;
  if (attention)
    choice.chosen = &*attention;
  else
    choice = select(proposals, context);
  if (choice.chosen) {
    // The collectives it takes along are reported with it, not decided.
    for (CollectiveOpInterface &later : collectives.drop_front(index + 1))
      if (later &&
          llvm::is_contained(choice.chosen->partners, later.getOperation()))
        later = {};
    return apply(op, *choice.chosen, proposals, std::move(record), context,
                 followUps);
  }
  if (choice.best) {
    record.with = choice.best->with;
    record.compute = choice.best->compute;
    record.serial = record.overlapped = choice.best->serial;
  }
  keep(op, std::move(record), choice.declined, context);
  return success();
}

void OverlapPass::keep(CollectiveOpInterface op, Record record, StringRef why,
                       const Context &context) {
  record.decision = "kept";
  record.reason = why.str();
  std::string text;
  llvm::raw_string_ostream remark(text);
  remark << op.getCollectiveKind() << " kept whole: " << why;
  noteWholeTransport(op, context, record, remark);
  op->emitRemark() << text;
  ++numKept;
  records.push_back(std::move(record));
}

LogicalResult OverlapPass::apply(CollectiveOpInterface op,
                                 const Candidate &chosen,
                                 const Proposals &proposals, Record record,
                                 Context &context, FollowUps &followUps) {
  record.decision = chosen.fused() ? "fused" : "async";
  record.with = chosen.with;
  record.strategy = chosen.strategy;
  record.chunks = chosen.chunks;
  record.compute = chosen.compute;
  record.serial = chosen.serial;
  record.overlapped = chosen.overlapped;
  record.inKernel = chosen.inKernel();
  record.kernel = chosen.kernel;
  record.details = chosen.details;
  record.reason = chosenReason(chosen, proposals, context);
  std::string text;
  llvm::raw_string_ostream remark(text);
  bool gathers = isa<AllGatherOp>(op.getOperation());
  if (chosen.inKernel())
    remark << op.getCollectiveKind() << " "
           << (!chosen.action.empty() ? chosen.action
               : gathers              ? "written into every peer's buffer by"
                                      : "summed inside")
           << " " << chosen.kernel << " as " << chosen.strategy << " ("
           << chosen.chunks << " puts): ";
  else if (chosen.fused())
    remark << op.getCollectiveKind() << " fused with '" << chosen.with
           << "' as " << chosen.strategy << " (" << chosen.chunks
           << " chunks): ";
  else
    remark << op.getCollectiveKind() << " made asynchronous: ";
  remark << "predicted " << us(chosen.serial) << " serial, "
         << us(chosen.overlapped) << " overlapped";
  if (!chosen.fused() && !proposals.whyFused.empty())
    remark << "; not fused: " << proposals.whyFused;
  if (chosen.describe)
    chosen.describe(remark);
  if (chosen.inKernel())
    remark << "; " << chosen.saving;
  else if (!proposals.whyNotInKernel.empty() && chosen.partners.empty())
    remark << "; not in a kernel: " << proposals.whyNotInKernel;
  // Decided before the rewrite erases the collective; applies only if the
  // schedule has ring shifts.
  std::string whyTransport =
      !chosen.inKernel() ? ""
      : gathers          ? "the kernel stores its rows into the peers' "
                           "symmetric slots"
                         : "the kernel sums the partials the peers put into "
                           "this rank's symmetric slots";
  bool symmetric =
      chosen.inKernel() || chooseSymmetric(op, chosen, context, whyTransport);
  // The asynchronous form keeps the collective whole.
  if (!chosen.fused())
    noteWholeTransport(op, context, record, remark);
  Location loc = op.getLoc();
  std::vector<Record> partnerRecords;
  for (Operation *partner : chosen.partners) {
    Record &taken = partnerRecords.emplace_back(record);
    taken.kind = cast<CollectiveOpInterface>(partner).getCollectiveKind().str();
    taken.loc = formatLoc(partner->getLoc());
    taken.reason = "travels in the " + chosen.strategy + " of the " +
                   record.kind + " at " + record.loc;
    partner->emitRemark() << taken.kind << " " << taken.reason;
  }
  ShiftCollector collector;
  rewriter->setListener(&collector);
  LogicalResult applied = chosen.apply(*rewriter, followUps);
  rewriter->setListener(nullptr);
  if (failed(applied))
    return emitError(loc) << "braid-overlap: the " << chosen.strategy
                          << " rewrite failed";
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
      return wholeSymmetric(cast<CollectiveOpInterface>(made), context, why);
    });
    if (collector.shifts.empty() || !all)
      noteTransport(record, remark, all, why);
  }
  emitRemark(loc) << text;
  replication.invalidate();
  std::string transport = record.transport;
  records.push_back(std::move(record));
  for (Record &taken : partnerRecords) {
    taken.transport = transport;
    records.push_back(std::move(taken));
  }
  (chosen.fused() ? numFused : numAsync) += 1 + partnerRecords.size();
  return success();
}

LogicalResult OverlapPass::finish(FunctionOpInterface function,
                                  const Context &context,
                                  FollowUps &followUps) {
  // Start early, wait late, now that the schedules around are final.
  for (Operation *op : followUps.async) {
    auto collective = cast<CollectiveOpInterface>(op);
    AsyncPlacement placement = planAsync(collective);
    if (llvm::any_of(placement.overlapped,
                     [](Operation *o) { return isa<linalg::LinalgOp>(o); }))
      makeAsync(*rewriter, collective, placement);
  }
  for (Operation *op : followUps.direct)
    if (failed(directExchange(*rewriter, cast<CollectiveOpInterface>(op))))
      return op->emitError() << "braid-overlap: the direct exchange of this "
                                "all_gather failed";
  if (comm != braid::CommMode::Symmetric)
    return success();
  // comm=symmetric: every collective still whole, synchronous or started,
  // moves by direct puts where it has that form (the records said so).
  SmallVector<CollectiveOpInterface> whole;
  function->walk([&](CollectiveOpInterface op) {
    if (!op->hasAttr(DistDialect::getSymmetricAttrName()))
      whole.push_back(op);
  });
  for (CollectiveOpInterface op : whole) {
    std::string why;
    if (wholeSymmetric(op, context, why) &&
        failed(directExchange(*rewriter, op)))
      return op->emitError() << "braid-overlap: the direct exchange of this "
                             << op.getCollectiveKind() << " failed";
  }
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
  if (bucketBytes < -1)
    return bad("bucket-bytes must be -1 (no buckets), 0 (the model picks) "
               "or positive");
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
  CostModel model(*target);
  OverlapOptions settings = options();
  Context context(settings, model, replication);

  IRRewriter rewriterInstance(&getContext());
  rewriter = &rewriterInstance;
  SmallVector<FunctionOpInterface> functions;
  module.walk([&](FunctionOpInterface f) { functions.push_back(f); });
  countRuns(module, functions);
  for (FunctionOpInterface function : functions)
    if (failed(processFunction(function, context)))
      return signalPassFailure();
  if (report.empty())
    return;
  ReportHeader header{presetName(), braid::options::spelling(mode.getValue()),
                      reportOptions};
  std::string error = writeReport(report, header, records);
  if (!error.empty()) {
    module.emitError() << "braid-overlap: cannot write the report: " << error;
    signalPassFailure();
  }
}

} // namespace

std::unique_ptr<Pass> braid::dist::createOverlap(const OverlapOptions &options,
                                                 std::string reportOptions) {
  auto pass = std::make_unique<OverlapPass>(options);
  pass->setReportOptions(std::move(reportOptions));
  return pass;
}
