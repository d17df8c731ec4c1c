//===- Async.cpp - async: start collectives early, wait late ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A collective that no schedule fuses with compute still overlaps whatever
// does not depend on it: its start moves up to just after its input is
// defined (but not above an earlier collective), its wait down to just
// before its first use. Only SSA dependencies constrain the motion; every
// rank runs the same program, so the order of collectives stays the same on
// all of them.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

AsyncPlacement overlap::planAsync(CollectiveOpInterface op) {
  AsyncPlacement placement;
  Block *block = op->getBlock();
  // Walks from the collective only as far as its bounds (no op order
  // queries, which every rewrite of the block invalidates: with one per
  // collective they made the pass quadratic in the program).
  Operation *def = op.getInput().getDefiningOp();
  Operation *defined = def ? block->findAncestorOpInBlock(*def) : nullptr;
  // Collectives keep their relative order, which keeps traces and the
  // runtime's posting order the same as in the input: the start goes after
  // the input's definition or the previous collective, whichever is later.
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode())
    if (prev == defined || isa<CollectiveOpInterface>(prev)) {
      placement.startAfter = prev;
      break;
    }
  llvm::SmallPtrSet<Operation *, 8> users;
  for (Operation *user : op.getCollectiveResult().getUsers())
    if (Operation *ancestor = block->findAncestorOpInBlock(*user))
      users.insert(ancestor);
  for (Operation *next = op->getNextNode(); next && !users.empty();
       next = next->getNextNode())
    if (users.contains(next)) {
      placement.waitBefore = next;
      break;
    }
  if (!placement.waitBefore)
    placement.waitBefore = block->getTerminator();
  Operation *first = placement.startAfter ? placement.startAfter->getNextNode()
                                          : &block->front();
  for (Operation *it = first; it && it != placement.waitBefore;
       it = it->getNextNode())
    if (it != op.getOperation())
      placement.overlapped.push_back(it);
  return placement;
}

void overlap::makeAsync(RewriterBase &rewriter, CollectiveOpInterface op,
                        const AsyncPlacement &placement) {
  Operation *raw = op.getOperation();
  if (placement.startAfter)
    rewriter.setInsertionPointAfter(placement.startAfter);
  else
    rewriter.setInsertionPointToStart(raw->getBlock());
  OperationState state(raw->getLoc(),
                       (raw->getName().getStringRef() + "_start").str());
  state.addOperands(op.getInput());
  state.addAttributes(raw->getAttrs());
  state.addTypes(
      {TokenType::get(raw->getContext()), op.getCollectiveResult().getType()});
  Operation *start = rewriter.create(state);
  rewriter.setInsertionPoint(placement.waitBefore);
  Value ready = WaitOp::create(rewriter, raw->getLoc(),
                               op.getCollectiveResult().getType(),
                               start->getResult(0), start->getResult(1));
  rewriter.replaceOp(raw, ready);
}

//===- The pattern --------------------------------------------------------===//

/// async: the collective stays whole, started right after its input and
/// waited right before its first use (once every schedule is decided).
static void proposeAsync(CollectiveOpInterface, Site site, Context &context,
                         SmallVectorImpl<Candidate> &out, std::string &why) {
  AsyncPlacement placement = planAsync(site.op);
  Underneath under = computeUnderneath(placement.overlapped, context);
  if (under.ops == 0) {
    why = "no independent computation to overlap it with";
    return;
  }
  Candidate c;
  c.strategy = "async";
  c.family = Family::Async;
  c.compute = under.time;
  c.serial = under.time + site.comm;
  c.overlapped = context.asyncTime(under.time, site.comm);
  c.chunks = 1;
  nameUnderneath(c, under);
  c.apply = [op = site.op.getOperation()](RewriterBase &,
                                          FollowUps &followUps) {
    followUps.async.push_back(op);
    return success();
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createAsyncPattern() {
  return makePattern<>(Family::Async, "async", proposeAsync);
}
