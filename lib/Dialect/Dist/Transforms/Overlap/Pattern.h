//===- Pattern.h - One overlapped schedule as a unit ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to braid-overlap. A pattern is one schedule a collective can
// take (ring_ag_matmul, one_shot_ar, ring_attention, ...). Its file owns
// everything about it: the matcher, the cost prediction, the rewrite, and
// what its remark and report record say beyond the common fields. The
// driver (Driver.cpp) asks every registered pattern for candidates, the
// selection policy (Selection.cpp) picks one, and the driver applies it and
// records the decision (Report.h).
//
// A new pattern is a file that defines its propose function and
// `createXPattern()` returning `makePattern<Anchor>(...)` of it, a line in
// Patterns.def, a line in CMakeLists.txt, a lit test under
// test/Dialect/Dist/Transforms/Overlap/ and an end-to-end module under
// test/lib/e2e_patterns/ (docs/Design.md, "Adding a schedule").
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_PATTERN_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_PATTERN_H

#include "../Schedule.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/CostModel.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SmallVector.h"

#include <functional>
#include <memory>
#include <string>

namespace llvm::json {
class OStream;
} // namespace llvm::json

namespace braid::dist {
class ReplicationAnalysis;
} // namespace braid::dist

namespace braid::dist::overlap {

using schedule::RingOptions;

/// What every pattern reads: the pass's options, the cost model, and the
/// replication proofs (which a rewrite invalidates).
class Context {
public:
  Context(const OverlapOptions &options, const CostModel &model,
          ReplicationAnalysis &replication)
      : options(options), model(model), replication(replication) {}

  const OverlapOptions &options;
  const CostModel &model;
  ReplicationAnalysis &replication;

  /// The two-sided link of `op`'s group.
  LinkFigures link(CollectiveOpInterface op) const;
  /// Compute and a transfer in flight at once: the longer of the two, the
  /// compute slowed by the overlap's interference.
  double asyncTime(double compute, double comm) const;
  /// Ring pipeline prediction: `pieceCompute` per piece, `pieces` pieces in
  /// all, `steps` transfer steps of `stepComm` each.
  double pipeline(double pieceCompute, int64_t pieces, double stepComm,
                  int64_t steps) const;
  /// The ring layouts (sub-chunks, directions) to consider for a chunk of
  /// `chunkSize` rows, as the options allow.
  llvm::SmallVector<RingOptions> ringLayouts(int64_t chunkSize) const;
  /// fuse-collectives=force, one-shot or two-shot.
  bool forcesInKernel() const;
  /// Predicted faster: a gain above 1% of the serial time.
  static bool worthIt(double serial, double overlapped) {
    return serial - overlapped > 0.01 * serial;
  }
};

/// What a rewrite leaves for the driver to finish once every collective of
/// the function is decided.
struct FollowUps {
  /// Collectives to start early and wait late, once the schedules around
  /// them are final: those the model chose `async` for, and those a
  /// rewrite creates (the all-gather after a ring reduce-scatter).
  llvm::SmallVector<mlir::Operation *> async;
  /// All-gathers moved by direct puts once every collective is decided
  /// (until then they prove their results replicated for later ones).
  llvm::SmallVector<mlir::Operation *> direct;
};

/// How the selection policy treats a pattern's candidates
/// (Selection.cpp): ring attention is taken whenever it is proposed;
/// fuse-collectives=force takes the best in-kernel form; overlap=force the
/// first fused schedule, else micro-batches, else async; auto the best
/// gain of all.
enum class Family { Attention, Fused, MicroBatch, Async, InKernel };

/// One schedule that applies to a collective, with its prediction.
struct Candidate {
  std::string strategy;
  std::string with; ///< The compute op it overlaps, if any.
  int64_t chunks = 0;
  Family family = Family::Fused;
  /// In-kernel forms: the kernel the collective is computed inside, and
  /// what that moves and saves, for the remark.
  std::string kernel, saving;
  /// What the remark says the in-kernel form does with the collective
  /// before `kernel`, where not its kind's usual phrase.
  std::string action;
  double compute = 0, serial = 0, overlapped = 0;
  double gain() const { return serial - overlapped; }
  bool fused() const { return family != Family::Async; }
  bool inKernel() const { return family == Family::InKernel; }
  /// Later collectives the schedule takes along (ring attention's gather
  /// of v, the other all-reduces of a bucket): each reported with it, and
  /// skipped by the driver.
  llvm::SmallVector<mlir::Operation *, 1> partners;
  /// Taken whenever proposed, under auto and force alike; `because` then
  /// says why (the start of the record's reason).
  bool always = false;
  std::string because;
  /// The pattern's own record fields (written after "chunks") and remark
  /// text (after the prediction), if any.
  std::function<void(llvm::json::OStream &)> details;
  std::function<void(llvm::raw_ostream &)> describe;
  std::function<mlir::LogicalResult(mlir::RewriterBase &, FollowUps &)> apply;
};

/// Where a pattern is asked: the collective, its group's size, the library
/// collective's predicted time, and the link the schedule would use (for
/// in-kernel forms, the one-sided link).
struct Site {
  CollectiveOpInterface op;
  int64_t groupSize = 0;
  double comm = 0;
  LinkFigures link;
};
/// `op`'s site on its two-sided link (comm 0 for a dynamic group).
Site siteOf(CollectiveOpInterface op, const Context &context);

class OverlapPattern {
public:
  OverlapPattern(Family family, llvm::StringRef label)
      : kind(family), name(label) {}
  virtual ~OverlapPattern();
  Family family() const { return kind; }
  /// Names the pattern's reason when several of a family apply to one
  /// collective ("one shot").
  llvm::StringRef label() const { return name; }
  /// Whether it is a schedule of `op`'s kind of collective at all: if
  /// not, it is not asked, and its family says so.
  virtual bool anchorsOn(CollectiveOpInterface op) const = 0;
  /// Appends its candidates for `site`, or says in `why` why none applies.
  virtual void propose(Site site, Context &context,
                       llvm::SmallVectorImpl<Candidate> &out,
                       std::string &why) const = 0;

private:
  Family kind;
  llvm::StringRef name;
};

/// A pattern of the collectives `Anchors` (of every collective when none
/// is named).
template <typename... Anchors> class PatternOf : public OverlapPattern {
public:
  using OverlapPattern::OverlapPattern;
  bool anchorsOn(CollectiveOpInterface op) const final {
    if constexpr (sizeof...(Anchors) == 0)
      return true;
    else
      return llvm::isa<Anchors...>(op.getOperation());
  }
};

/// The op a pattern's propose function takes: its one anchor's class, or
/// the collective interface for several or none.
template <typename... Anchors> struct AnchorOf {
  using type = CollectiveOpInterface;
};
template <typename Anchor> struct AnchorOf<Anchor> { using type = Anchor; };

/// A pattern that is its propose function: appends its candidates for the
/// anchor at `site`, or says in `why` why none applies.
template <typename... Anchors>
class FunctionPattern final : public PatternOf<Anchors...> {
public:
  using Anchor = typename AnchorOf<Anchors...>::type;
  using Propose = void (*)(Anchor, Site, Context &,
                           llvm::SmallVectorImpl<Candidate> &, std::string &);
  FunctionPattern(Family family, llvm::StringRef label, Propose propose)
      : PatternOf<Anchors...>(family, label), fn(propose) {}
  void propose(Site site, Context &context,
               llvm::SmallVectorImpl<Candidate> &out,
               std::string &why) const override {
    fn(llvm::cast<Anchor>(site.op.getOperation()), site, context, out, why);
  }

private:
  Propose fn;
};

/// The pattern of the collectives `Anchors` (every one when none is named)
/// whose candidates `propose` gives: what a pattern file's create function
/// returns.
template <typename... Anchors>
std::unique_ptr<OverlapPattern>
makePattern(Family family, llvm::StringRef label,
            typename FunctionPattern<Anchors...>::Propose propose) {
  return std::make_unique<FunctionPattern<Anchors...>>(family, label, propose);
}

/// Every registered pattern (Patterns.def), in the order candidates are
/// proposed and ties are broken.
llvm::ArrayRef<std::unique_ptr<OverlapPattern>> registeredPatterns();

#define BRAID_OVERLAP_PATTERN(Name)                                            \
  std::unique_ptr<OverlapPattern> create##Name##Pattern();
#include "Patterns.def"
#undef BRAID_OVERLAP_PATTERN

//===- Shared by the patterns ---------------------------------------------===//

/// "file:line:col" of a location, through fused and named locations.
std::string formatLoc(mlir::Location loc);
/// Seconds as "12.3 us".
std::string us(double seconds);
/// The op's name ("linalg.matmul").
std::string nameOf(mlir::Operation *op);
/// The cost model's preset name for `preset`; `auto` outside a pipeline
/// that resolves it is cpu.
std::string presetName(braid::TargetPreset preset);
/// The group size of a collective, or ShapedType::kDynamic.
int64_t groupSizeOf(CollectiveOpInterface op);
/// Bytes a collective moves, as CostModel::collectiveTime expects them.
double commBytes(CollectiveOpInterface op);

/// The compute a collective in flight runs under: the linalg ops among
/// those between its start and its wait, their predicted time, and the
/// longest of them.
struct Underneath {
  double time = 0;
  int64_t ops = 0;
  mlir::Operation *longest = nullptr;
};
Underneath computeUnderneath(llvm::ArrayRef<mlir::Operation *> between,
                             const Context &context);
/// Names the longest op `under` holds as the candidate's `with`, and in
/// its remark.
void nameUnderneath(Candidate &candidate, const Underneath &under);

/// A ring of n steps over n * pieces pieces of `computeOp`'s work along its
/// `loop`, each step moving a piece of a `chunkBytes` chunk; a reducing
/// ring also adds what arrives to each piece (reads two, writes one).
Candidate ringCandidate(Site site, const Context &context,
                        llvm::StringRef strategy, RingOptions options,
                        mlir::Operation *computeOp, unsigned loop,
                        double chunkBytes, bool reduces);

} // namespace braid::dist::overlap

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_PATTERN_H
