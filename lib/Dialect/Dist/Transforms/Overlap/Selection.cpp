//===- Selection.cpp - Which schedule a collective takes --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// fuse-collectives=force (or one-shot, two-shot) takes the in-kernel form
// with the best gain; overlap=force the first fused schedule that applies,
// else micro-batches, else the asynchronous form; auto the candidate with
// the best predicted gain over all families, if it beats serial by more
// than 1%. Ring attention, when proposed, is taken before any of these
// (its pattern gates itself).
//
//===----------------------------------------------------------------------===//

#include "Selection.h"

#include "Transport.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

bool overlap::proposeFamily(Family family, Site site, Context &context,
                            SmallVectorImpl<Candidate> &out, std::string &why) {
  size_t before = out.size();
  SmallVector<std::pair<StringRef, std::string>> reasons;
  for (const std::unique_ptr<OverlapPattern> &pattern : registeredPatterns()) {
    if (pattern->family() != family || !pattern->anchorsOn(site.op))
      continue;
    std::string reason;
    pattern->propose(site, context, out, reason);
    reasons.push_back({pattern->label(), std::move(reason)});
  }
  if (out.size() == before && !reasons.empty()) {
    if (reasons.size() == 1) {
      why = reasons.front().second;
    } else {
      why.clear();
      for (auto &[label, reason] : reasons)
        why += (why.empty() ? "" : "; ") + label.str() + ": " + reason;
    }
  }
  return !reasons.empty();
}

/// Whether any pattern of `family` anchors on `op`.
static bool anyAnchors(Family family, CollectiveOpInterface op) {
  return llvm::any_of(registeredPatterns(),
                      [&](const std::unique_ptr<OverlapPattern> &pattern) {
                        return pattern->family() == family &&
                               pattern->anchorsOn(op);
                      });
}

void overlap::proposeInKernel(Site site, Context &context,
                              SmallVectorImpl<Candidate> &out,
                              std::string &why) {
  if (!anyAnchors(Family::InKernel, site.op))
    return;
  if (std::optional<LinkFigures> link = inKernelLink(site.op, context, why)) {
    site.link = *link;
    proposeFamily(Family::InKernel, site, context, out, why);
  }
}

Proposals overlap::proposeAll(Site site, Context &context) {
  Proposals p;
  if (!ShapedType::isDynamic(site.groupSize)) {
    if (!proposeFamily(Family::Fused, site, context, p.fused, p.whyFused))
      p.whyFused = "no fused schedule exists for " +
                   CollectiveOpInterface(site.op).getCollectiveKind().str();
    std::string whyMicro;
    proposeFamily(Family::MicroBatch, site, context, p.micro, whyMicro);
  } else {
    p.whyFused = "the group size is dynamic";
  }
  proposeFamily(Family::Async, site, context, p.async, p.whyAsync);
  proposeInKernel(site, context, p.inKernel, p.whyNotInKernel);
  return p;
}

Choice overlap::select(const Proposals &p, const Context &context) {
  Choice choice;
  const Candidate *inKernel = nullptr;
  for (const Candidate &c : p.inKernel)
    if (!inKernel || c.gain() > inKernel->gain())
      inKernel = &c;
  auto notFused = [&] {
    return p.whyFused.empty() ? p.whyAsync : p.whyFused + "; " + p.whyAsync;
  };
  if (inKernel && context.forcesInKernel()) {
    choice.chosen = inKernel;
  } else if (context.options.mode == braid::OverlapMode::Force) {
    // The first layout of the first kind that applies.
    for (auto *list : {&p.fused, &p.micro, &p.async})
      if (!list->empty()) {
        choice.chosen = &list->front();
        break;
      }
    if (!choice.chosen)
      choice.declined = notFused();
  } else {
    const Candidate *best = nullptr;
    for (auto *list : {&p.fused, &p.micro, &p.async, &p.inKernel})
      for (const Candidate &c : *list)
        if (!best || c.gain() > best->gain())
          best = &c;
    if (best && Context::worthIt(best->serial, best->overlapped)) {
      choice.chosen = best;
    } else if (best) {
      choice.best = best;
      choice.declined = "no schedule is predicted faster: best is " +
                        best->strategy + " at " + us(best->overlapped) +
                        " against " + us(best->serial) + " serial";
    } else {
      choice.declined = notFused();
    }
  }
  if (!choice.chosen && !p.whyNotInKernel.empty())
    choice.declined += "; not in a kernel: " + p.whyNotInKernel;
  return choice;
}

std::string overlap::chosenReason(const Candidate &chosen, const Proposals &p,
                                  const Context &context) {
  std::string reason;
  if (chosen.always)
    reason = chosen.because + "; ";
  else if (chosen.inKernel() && context.forcesInKernel())
    reason = std::string("fuse-collectives=") +
             braid::options::spelling(context.options.fuseCollectives) + "; ";
  else if (context.options.mode == braid::OverlapMode::Force)
    reason = "overlap=force; ";
  reason += "predicted " + us(chosen.serial) + " serial, " +
            us(chosen.overlapped) + " overlapped";
  if (!chosen.inKernel() && !p.whyNotInKernel.empty())
    reason += "; not in a kernel: " + p.whyNotInKernel;
  if (!p.whyFused.empty() && !chosen.fused())
    reason += "; not fused: " + p.whyFused;
  return reason;
}
