//===- ListCollectives.cpp - Report the collectives of a function -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

namespace braid::dist {
#define GEN_PASS_DEF_LISTCOLLECTIVES
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;

namespace {

/// Bytes of a statically shaped tensor, or -1.
static int64_t tensorBytes(RankedTensorType type) {
  if (!type.hasStaticShape())
    return -1;
  int64_t bits = type.getElementTypeBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

/// Bytes one rank receives in a collective over `group` ranks.
static int64_t receivedBytes(CollectiveOpInterface op, int64_t group) {
  int64_t in = tensorBytes(op.getInput().getType());
  int64_t out = tensorBytes(op.getCollectiveResult().getType());
  if (in < 0 || out < 0 || group <= 0)
    return -1;
  StringRef kind = op.getCollectiveKind();
  if (kind == "all_gather")
    return out - in;
  if (kind == "reduce_scatter" || kind == "all_to_all")
    return in / group * (group - 1);
  if (kind == "all_reduce")
    return 2 * in / group * (group - 1);
  return in; // shift, broadcast
}

static std::string describeProducer(Value value) {
  if (isa<BlockArgument>(value))
    return "a function argument";
  return "'" + value.getDefiningOp()->getName().getStringRef().str() + "'";
}

struct ListCollectivesPass
    : public braid::dist::impl::ListCollectivesBase<ListCollectivesPass> {
  void runOnOperation() override {
    getOperation()->walk([&](CollectiveOpInterface op) {
      ++numCollectives;
      shard::GridOp grid = lookupGrid(op, op.getGridAttr());
      int64_t group =
          grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
      InFlightDiagnostic remark = op->emitRemark();
      remark << op.getCollectiveKind() << (op.isAsync() ? " (async)" : "")
             << " on " << op.getGridAttr() << " axes [";
      llvm::interleaveComma(op.getAxes(), remark);
      remark << "] (";
      if (ShapedType::isDynamic(group))
        remark << "? ranks";
      else
        remark << group << " ranks";
      remark << "): " << op.getInput().getType() << " -> "
             << op.getCollectiveResult().getType();
      int64_t bytes =
          ShapedType::isDynamic(group) ? -1 : receivedBytes(op, group);
      if (bytes >= 0)
        remark << ", receives " << schedule::formatBytes(bytes) << " per rank";
      remark << "; input from " << describeProducer(op.getInput());
      Value result = op.isAsync() ? Value() : op.getCollectiveResult();
      if (op.isAsync())
        if (auto wait = dyn_cast<WaitOp>(*op.getAsyncToken().user_begin()))
          result = wait.getResult();
      if (result && !result.use_empty()) {
        remark << ", result used by ";
        llvm::interleaveComma(result.getUsers(), remark, [&](Operation *user) {
          remark << "'" << user->getName() << "'";
        });
      } else {
        remark << ", result unused";
      }
    });
  }
};

} // namespace
