//===- Transport.h - How a schedule's transfers travel ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to braid-overlap. The `comm` option and the preset decide
// whether transfers go two-sided (send/receive) or as puts into symmetric
// memory; each decision is written into the record and the remark with
// its reason.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_TRANSPORT_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_TRANSPORT_H

#include "Pattern.h"
#include "Report.h"

#include <optional>

namespace braid::dist::overlap {

/// Whether the group of `op` may share memory: not when `dist.topology`
/// makes one of its axes a network link (the group spans nodes).
bool sharesMemory(CollectiveOpInterface op, std::string &why);

/// The link an in-kernel form of `op` would use (the preset's one-sided
/// link, or the group's), or nothing and why no in-kernel form applies:
/// fuse-collectives=off, comm=two-sided, a group that spans nodes, a
/// preset without a one-sided link under auto, no symmetric form.
std::optional<LinkFigures> inKernelLink(CollectiveOpInterface op,
                                        const Context &context,
                                        std::string &why);

/// Whether the shifts of `chosen`'s schedule for `op` go one-sided, and
/// why.
bool chooseSymmetric(CollectiveOpInterface op, const Candidate &chosen,
                     const Context &context, std::string &why);

/// comm=symmetric: whether a collective that stays whole moves by direct
/// puts (the sweep at the end of the function rewrites it), and why; `why`
/// stays empty for the other comm modes, which keep the library's
/// collective.
bool wholeSymmetric(CollectiveOpInterface op, const Context &context,
                    std::string &why);

/// Records how a collective's transfers travel, and why, in its record and
/// its remark.
void noteTransport(Record &record, llvm::raw_ostream &remark, bool symmetric,
                   llvm::StringRef why);

/// Appends a whole collective's transport to its record and remark.
void noteWholeTransport(CollectiveOpInterface op, const Context &context,
                        Record &record, llvm::raw_ostream &remark);

} // namespace braid::dist::overlap

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_TRANSPORT_H
