//===- Pattern.cpp - What every overlap pattern shares ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Pattern.h"

#include "llvm/Support/Format.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

OverlapPattern::~OverlapPattern() = default;

ArrayRef<std::unique_ptr<OverlapPattern>> overlap::registeredPatterns() {
  static const std::vector<std::unique_ptr<OverlapPattern>> patterns = [] {
    std::vector<std::unique_ptr<OverlapPattern>> all;
#define BRAID_OVERLAP_PATTERN(Name) all.push_back(create##Name##Pattern());
#include "Patterns.def"
#undef BRAID_OVERLAP_PATTERN
    return all;
  }();
  return patterns;
}

LinkFigures Context::link(CollectiveOpInterface op) const {
  return model.link(op, op.getGridAttr(), op.getAxes());
}

double Context::asyncTime(double compute, double comm) const {
  return std::max(compute * (1 + model.getTarget().overlapInterference), comm);
}

double Context::pipeline(double pieceCompute, int64_t pieces, double stepComm,
                         int64_t steps) const {
  double compute =
      pieceCompute * pieces * (1 + model.getTarget().overlapInterference);
  return std::max(compute, steps * stepComm + pieceCompute);
}

SmallVector<RingOptions> Context::ringLayouts(int64_t chunkSize) const {
  SmallVector<RingOptions> layouts;
  SmallVector<int64_t> subs = options.subChunks > 0
                                  ? SmallVector<int64_t>{options.subChunks}
                                  : SmallVector<int64_t>{1, 2, 4};
  SmallVector<bool> dirs;
  if (options.bidirectional != braid::Bidirectional::On)
    dirs.push_back(false);
  if (options.bidirectional != braid::Bidirectional::Off)
    dirs.push_back(true);
  for (bool bidir : dirs)
    for (int64_t k : subs) {
      RingOptions layout{k, bidir};
      if (chunkSize % layout.pieces() == 0)
        layouts.push_back(layout);
    }
  return layouts;
}

bool Context::forcesInKernel() const {
  return options.fuseCollectives != braid::FuseCollectivesMode::Auto &&
         options.fuseCollectives != braid::FuseCollectivesMode::Off;
}

std::string overlap::formatLoc(Location loc) {
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

std::string overlap::us(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.1f us", seconds * 1e6);
  return text;
}

std::string overlap::nameOf(Operation *op) {
  return op->getName().getStringRef().str();
}

std::string overlap::presetName(braid::TargetPreset preset) {
  return preset == braid::TargetPreset::Auto ? "cpu"
                                             : braid::options::spelling(preset);
}

int64_t overlap::groupSizeOf(CollectiveOpInterface op) {
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  return grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
}

double overlap::commBytes(CollectiveOpInterface op) {
  if (isa<AllGatherOp>(op.getOperation()))
    return tensorBytes(op.getCollectiveResult());
  return tensorBytes(op.getInput());
}

Site overlap::siteOf(CollectiveOpInterface op, const Context &context) {
  Site site{op, groupSizeOf(op), 0, context.link(op)};
  if (!ShapedType::isDynamic(site.groupSize))
    site.comm = context.model.collectiveTime(
        op.getCollectiveKind(), commBytes(op), site.groupSize, site.link);
  return site;
}

Underneath overlap::computeUnderneath(ArrayRef<Operation *> between,
                                      const Context &context) {
  Underneath under;
  double longest = 0;
  for (Operation *op : between) {
    if (!isa<linalg::LinalgOp>(op))
      continue;
    double time = context.model.computeTime(op);
    under.time += time;
    ++under.ops;
    if (!under.longest || time > longest) {
      under.longest = op;
      longest = time;
    }
  }
  return under;
}

void overlap::nameUnderneath(Candidate &candidate, const Underneath &under) {
  if (!under.longest)
    return;
  candidate.with = nameOf(under.longest);
  std::string text = "; under " + std::to_string(under.ops) +
                     " ops, the longest '" + candidate.with + "' at " +
                     formatLoc(under.longest->getLoc());
  std::function<void(raw_ostream &)> before = candidate.describe;
  candidate.describe = [before, text](raw_ostream &os) {
    os << text;
    if (before)
      before(os);
  };
}

Candidate overlap::ringCandidate(Site site, const Context &context,
                                 StringRef strategy, RingOptions options,
                                 Operation *computeOp, unsigned loop,
                                 double chunkBytes, bool reduces) {
  const CostModel &cost = context.model;
  int64_t n = site.groupSize;
  int64_t pieces = options.pieces();
  double pieceBytes = chunkBytes / pieces;
  double piece = cost.computeTime(computeOp, 1.0 / (n * pieces), loop);
  if (reduces)
    piece += cost.streamTime(3 * pieceBytes);
  double step = options.subChunks * cost.messageTime(pieceBytes, site.link);
  Candidate c;
  c.strategy = (strategy + (options.bidirectional ? "_bidir" : "")).str();
  c.with = nameOf(computeOp);
  c.chunks = n * pieces;
  c.compute = cost.computeTime(computeOp);
  c.serial = c.compute + site.comm;
  c.overlapped = context.pipeline(piece, n * pieces, step, n - 1);
  return c;
}
