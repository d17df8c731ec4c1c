//===- Selection.h - Which schedule a collective takes ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to braid-overlap. The registered patterns propose candidates by
// family; the policy picks one, or keeps the collective whole and says why.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_SELECTION_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_SELECTION_H

#include "Pattern.h"

namespace braid::dist::overlap {

/// What the patterns propose for one collective, by family, and why each
/// family proposes nothing.
struct Proposals {
  llvm::SmallVector<Candidate, 2> fused, micro, async, inKernel;
  std::string whyFused, whyAsync, whyNotInKernel;
};

/// Asks the patterns of `family` that anchor on the site's collective.
/// When none proposes anything, `why` is the one pattern's reason, or each
/// one's named by its label ("one shot: ...; two shot: ..."). Returns
/// whether any pattern of the family anchors on it.
bool proposeFamily(Family family, Site site, Context &context,
                   llvm::SmallVectorImpl<Candidate> &out, std::string &why);

/// The in-kernel family on the one-sided link `op` would use, if it has
/// one (else `why` says why not).
void proposeInKernel(Site site, Context &context,
                     llvm::SmallVectorImpl<Candidate> &out, std::string &why);

/// Every family but ring attention's, which the driver asks first.
Proposals proposeAll(Site site, Context &context);

/// The policy's pick, or why none (`best`: the best candidate that was not
/// predicted faster, for the record).
struct Choice {
  const Candidate *chosen = nullptr;
  const Candidate *best = nullptr;
  std::string declined;
};
Choice select(const Proposals &proposals, const Context &context);

/// The record's reason for taking `chosen`.
std::string chosenReason(const Candidate &chosen, const Proposals &proposals,
                         const Context &context);

} // namespace braid::dist::overlap

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_SELECTION_H
