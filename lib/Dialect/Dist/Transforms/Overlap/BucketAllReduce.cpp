//===- BucketAllReduce.cpp - bucket_ar: small all-reduces as one -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A data-parallel training step all-reduces every gradient, and most
// gradients are small (norm weights, biases): an all-reduce of a few
// kilobytes costs its latency, not its bytes. As PyTorch DDP and Megatron
// do with gradient buckets, all-reduces of one group, reduction and element
// type travel together: their inputs are copied into one flat buffer, one
// all-reduce of it is started as soon as the last input is ready and waited
// right before the first use of any result, and each result is read back as
// a slice of it.
//
// Members are taken in program order from the anchor (the first of them the
// driver meets) while no result of those taken so far is used, as long as
// the bucket stays latency-bound (its all-reduce at most twice its latency)
// or within `bucket-bytes`. Any all-reduce of the group qualifies, not only
// gradients: the criterion is what is computed (independent reductions of the
// same group) and what it costs.
//
//===----------------------------------------------------------------------===//

#include "Pattern.h"
#include "Selection.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;

namespace {

/// The all-reduces that travel together, in program order (the anchor
/// first), and where their results are first used.
struct Bucket {
  SmallVector<AllReduceOp> members;
  int64_t elements = 0;
  double bytes = 0;
  /// Their all-reduces one by one, as the library would run them.
  double separate = 0;
  /// The first op of the block that uses a member's result.
  Operation *firstUse = nullptr;
};

} // namespace

/// Whether `other` reduces the way `anchor` does: the same grid, axes,
/// reduction and element type, on a static shape.
static bool reducesAlike(AllReduceOp anchor, AllReduceOp other) {
  auto type = dyn_cast<RankedTensorType>(other.getInput().getType());
  return type && type.hasStaticShape() &&
         type.getElementType() ==
             cast<RankedTensorType>(anchor.getInput().getType())
                 .getElementType() &&
         other.getGridAttr() == anchor.getGridAttr() &&
         other.getAxesAttr() == anchor.getAxesAttr() &&
         other.getReductionAttr() == anchor.getReductionAttr();
}

/// Adds the ops of `block` that use `value` (or contain a use of it) to
/// `users`.
static void addUsers(Value value, Block *block,
                     llvm::SmallPtrSetImpl<Operation *> &users) {
  for (Operation *user : value.getUsers())
    if (Operation *ancestor = block->findAncestorOpInBlock(*user))
      users.insert(ancestor);
}

/// Whether `bytes` may travel in a bucket: at most `bucket-bytes`, or
/// with the model's cap (0), while their all-reduce costs at most twice its
/// latency.
static bool fits(double bytes, Site site, const Context &context) {
  int64_t cap = context.options.bucketBytes;
  if (cap > 0)
    return bytes <= static_cast<double>(cap);
  const CostModel &model = context.model;
  return model.collectiveTime("all_reduce", bytes, site.groupSize, site.link) <=
         2 * model.collectiveTime("all_reduce", 0, site.groupSize, site.link);
}

/// Whether `op` would take a schedule of its own over a seat in a bucket:
/// a fused or in-kernel form the selection policy picks (one the options
/// force, or under auto one predicted faster). The anchor's own forms
/// compete with the bucket in the selection; a later member's are only
/// asked here.
static bool decidedAlone(AllReduceOp op, Context &context) {
  Site site = siteOf(op, context);
  Proposals own;
  proposeFamily(Family::Fused, site, context, own.fused, own.whyFused);
  proposeInKernel(site, context, own.inKernel, own.whyNotInKernel);
  return select(own, context).chosen != nullptr;
}

/// Gathers the anchor's bucket: later all-reduces that reduce alike and do
/// not take a schedule of their own, the bucket still fitting with each,
/// taken until an op uses a result of the bucket so far (later inputs may
/// depend on it).
static Bucket collect(AllReduceOp anchor, Site site, Context &context) {
  Bucket bucket;
  Block *block = anchor->getBlock();
  llvm::SmallPtrSet<Operation *, 16> users;
  auto take = [&](AllReduceOp op) {
    double bytes = commBytes(op);
    bucket.members.push_back(op);
    bucket.elements += cast<RankedTensorType>(op.getType()).getNumElements();
    bucket.bytes += bytes;
    bucket.separate += context.model.collectiveTime("all_reduce", bytes,
                                                    site.groupSize, site.link);
    addUsers(op.getResult(), block, users);
  };
  take(anchor);
  Operation *it = anchor->getNextNode();
  for (; it && !users.contains(it); it = it->getNextNode())
    if (auto other = dyn_cast<AllReduceOp>(it))
      if (reducesAlike(anchor, other) &&
          fits(bucket.bytes + commBytes(other), site, context) &&
          !decidedAlone(other, context))
        take(other);
  bucket.firstUse = it ? it : block->getTerminator();
  return bucket;
}

/// `value` as a 1-D tensor, or back from one to `type`.
static Value flatten(OpBuilder &b, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getRank() == 1)
    return value;
  auto flat =
      RankedTensorType::get({type.getNumElements()}, type.getElementType());
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, flat, value,
                                         ArrayRef<ReassociationIndices>{});
  auto all = llvm::to_vector<2>(llvm::seq<int64_t>(0, type.getRank()));
  return tensor::CollapseShapeOp::create(b, loc, value,
                                         ArrayRef<ReassociationIndices>{all});
}
static Value unflatten(OpBuilder &b, Location loc, Value flat,
                       RankedTensorType type) {
  if (type.getRank() == 1)
    return flat;
  if (type.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, flat,
                                           ArrayRef<ReassociationIndices>{});
  auto all = llvm::to_vector<2>(llvm::seq<int64_t>(0, type.getRank()));
  return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

/// Rewrites the bucket: the inputs copied into one buffer where the last
/// member was, one all-reduce of it, each result a slice of it read back
/// before the first use. Returns the new all-reduce.
static Operation *rewrite(RewriterBase &rewriter, const Bucket &bucket) {
  AllReduceOp anchor = bucket.members.front();
  AllReduceOp last = bucket.members.back();
  SmallVector<Location> locs;
  for (AllReduceOp op : bucket.members)
    locs.push_back(op.getLoc());
  Location loc = rewriter.getFusedLoc(locs);
  Type element =
      cast<RankedTensorType>(anchor.getInput().getType()).getElementType();
  auto flatType = RankedTensorType::get({bucket.elements}, element);

  rewriter.setInsertionPoint(last);
  Value buffer =
      tensor::EmptyOp::create(rewriter, loc, flatType.getShape(), element);
  int64_t offset = 0;
  for (AllReduceOp op : bucket.members) {
    Value flat = flatten(rewriter, op.getLoc(), op.getInput());
    int64_t size = cast<RankedTensorType>(flat.getType()).getNumElements();
    buffer = tensor::InsertSliceOp::create(
        rewriter, op.getLoc(), flat, buffer,
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(size)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
    offset += size;
  }
  OperationState state(loc, anchor->getName());
  state.addOperands(buffer);
  state.addAttributes(anchor->getAttrs());
  state.addTypes(flatType);
  Operation *reduced = rewriter.create(state);

  rewriter.setInsertionPoint(bucket.firstUse);
  offset = 0;
  for (AllReduceOp op : bucket.members) {
    auto type = cast<RankedTensorType>(op.getType());
    int64_t size = type.getNumElements();
    Value slice = tensor::ExtractSliceOp::create(
        rewriter, op.getLoc(), RankedTensorType::get({size}, element),
        reduced->getResult(0),
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(offset)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(size)},
        ArrayRef<OpFoldResult>{rewriter.getIndexAttr(1)});
    offset += size;
    rewriter.replaceOp(op, unflatten(rewriter, op.getLoc(), slice, type));
  }
  return reduced;
}

/// bucket_ar: the all-reduce and the later ones it is bucketed with, one
/// all-reduce started early and waited late.
static void proposeBucketAllReduce(AllReduceOp anchor, Site site,
                                   Context &context,
                                   SmallVectorImpl<Candidate> &out,
                                   std::string &why) {
  if (ShapedType::isDynamic(site.groupSize)) {
    why = "the group size is dynamic";
    return;
  }
  if (!reducesAlike(anchor, anchor)) {
    why = "its shape is not static";
    return;
  }
  if (context.options.bucketBytes < 0) {
    why = "bucket-bytes=-1";
    return;
  }
  const CostModel &model = context.model;
  if (!fits(commBytes(anchor), site, context)) {
    why = context.options.bucketBytes > 0
              ? "it is larger than bucket-bytes"
              : "it is bandwidth-bound (" + us(site.comm) + ", of which " +
                    us(model.collectiveTime("all_reduce", 0, site.groupSize,
                                            site.link)) +
                    " latency)";
    return;
  }
  Bucket bucket = collect(anchor, site, context);
  if (bucket.members.size() < 2) {
    why = "no later all_reduce of its group, reduction and element type "
          "that fits its bucket and takes no schedule of its own has its "
          "input ready before this result is used";
    return;
  }
  // Compute between the last member and the first use overlaps the
  // bucket; the copies in and out stream its bytes twice.
  SmallVector<Operation *> between;
  for (Operation *it = bucket.members.back()->getNextNode();
       it && it != bucket.firstUse; it = it->getNextNode())
    between.push_back(it);
  Underneath under = computeUnderneath(between, context);
  double comm = model.collectiveTime("all_reduce", bucket.bytes, site.groupSize,
                                     site.link);
  Candidate c;
  c.strategy = "bucket_ar";
  c.family = Family::Async;
  c.chunks = 1;
  c.compute = under.time;
  c.serial = under.time + bucket.separate;
  c.overlapped =
      context.asyncTime(under.time, comm) + 2 * model.streamTime(bucket.bytes);
  std::string others;
  for (AllReduceOp op : ArrayRef(bucket.members).drop_front()) {
    c.partners.push_back(op);
    others += (others.empty() ? "" : ", ") + formatLoc(op.getLoc());
  }
  c.describe = [others, n = bucket.members.size(),
                bytes = bucket.bytes](raw_ostream &os) {
    os << "; " << n << " all_reduces in one bucket of "
       << static_cast<int64_t>(bytes) << " bytes, with " << others;
  };
  nameUnderneath(c, under);
  c.apply = [bucket](RewriterBase &rewriter, FollowUps &followUps) {
    followUps.async.push_back(rewrite(rewriter, bucket));
    return success();
  };
  out.push_back(std::move(c));
}

std::unique_ptr<OverlapPattern> overlap::createBucketAllReducePattern() {
  return makePattern<AllReduceOp>(Family::Async, "bucket",
                                  proposeBucketAllReduce);
}
