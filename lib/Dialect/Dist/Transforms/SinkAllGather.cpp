//===- SinkAllGather.cpp - Row-local work moved before all-gathers -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Partitioning places an all-gather where the first value needs to be
// whole, which under sequence parallelism is often before a norm (its
// squares, reduction, scaling and weight multiply) or a reshape that the
// next matmul reads. All of that is row-local: computed on this rank's rows
// and gathered afterwards it gives the same values, costs 1/n of the work,
// and leaves the gather feeding the matmul directly, which is what the ring
// schedules need.
//
// The region moved is the set of ops downstream of the gather whose every
// gathered-dependent operand follows the gathered dimension through a
// parallel loop, whose other operands are replicated and constant along
// that loop, and whose inits are placeholders (tensor.empty, or a fill of
// one). The region is moved only when exactly one of its values is used
// outside it: one gather after, one before, never more communication.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"

#include "braid/Dialect/Dist/Transforms/CostModel.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace braid::dist;

namespace {

/// A placeholder init: tensor.empty, or a fill of one with a scalar, seen
/// through reshapes. Returns whether it is one, and the fill's value (null
/// for an empty).
bool isPlaceholder(Value value, Value *fillValue = nullptr) {
  while (Operation *op = value.getDefiningOp()) {
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op)) {
      value = op->getOperand(0);
      continue;
    }
    if (isa<tensor::EmptyOp>(op))
      return true;
    auto fill = dyn_cast<linalg::FillOp>(op);
    if (!fill || !fill.hasPureTensorSemantics() ||
        !isPlaceholder(fill.getOutputs()[0]))
      return false;
    if (fillValue)
      *fillValue = fill.getInputs()[0];
    return true;
  }
  return false;
}

struct SinkRegion {
  AllGatherOp gather;
  int64_t group;
  /// Ops of the region in block order.
  llvm::SetVector<Operation *> ops;
  /// The gathered dimension of each value of the region (the gather's
  /// result included).
  DenseMap<Value, int64_t> dims;

  /// The gathered dimension of `op`'s result if `op` can join, else none.
  std::optional<int64_t> join(Operation *op, ReplicationAnalysis &replication);
};

std::optional<int64_t> SinkRegion::join(Operation *op,
                                        ReplicationAnalysis &replication) {
  if (op->getBlock() != gather->getBlock() || op->getNumResults() != 1)
    return std::nullopt;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    auto it = dims.find(collapse.getSrc());
    if (it == dims.end())
      return std::nullopt;
    RankedTensorType type = collapse.getSrcType();
    for (auto [index, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      if (!llvm::is_contained(group, it->second))
        continue;
      // The gathered dimension must be the outermost one of its group that
      // varies: then the collapsed dimension is gathered blockwise too.
      for (int64_t d : group) {
        if (d == it->second)
          return static_cast<int64_t>(index);
        if (type.getDimSize(d) != 1)
          return std::nullopt;
      }
    }
    return std::nullopt;
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    auto it = dims.find(expand.getSrc());
    if (it == dims.end())
      return std::nullopt;
    RankedTensorType type = expand.getResultType();
    ReassociationIndices indices = expand.getReassociationIndices()[it->second];
    for (int64_t d : indices)
      if (type.getDimSize(d) != 1)
        return type.getDimSize(d) % group == 0 ? std::optional<int64_t>(d)
                                               : std::nullopt;
    return std::nullopt;
  }
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || !generic.hasPureTensorSemantics() ||
      generic.getNumDpsInits() != 1)
    return std::nullopt;
  std::optional<unsigned> loop;
  for (OpOperand &operand : op->getOpOperands()) {
    auto it = dims.find(operand.get());
    if (it == dims.end())
      continue;
    AffineMap map = generic.getMatchingIndexingMap(&operand);
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(it->second));
    if (!dim || (loop && *loop != dim.getPosition()))
      return std::nullopt;
    loop = dim.getPosition();
  }
  if (!loop ||
      generic.getIteratorTypesArray()[*loop] != utils::IteratorType::parallel)
    return std::nullopt;
  std::string why;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    if (dims.count(input->get()))
      continue;
    // Other inputs: the same on every rank, and for every row.
    if (generic.getMatchingIndexingMap(input).isFunctionOfDim(*loop) ||
        !replication.isReplicated(input->get(), gather.getGridAttr(),
                                  gather.getAxes(), why))
      return std::nullopt;
  }
  OpOperand *init = generic.getDpsInitOperand(0);
  if (!dims.count(init->get()) && !isPlaceholder(init->get()))
    return std::nullopt;
  AffineMap initMap = generic.getMatchingIndexingMap(init);
  for (auto [index, expr] : llvm::enumerate(initMap.getResults()))
    if (auto dim = dyn_cast<AffineDimExpr>(expr);
        dim && dim.getPosition() == *loop)
      return static_cast<int64_t>(index);
  return std::nullopt;
}

/// `type` with dimension `dim` divided by `group`.
RankedTensorType localType(RankedTensorType type, int64_t dim, int64_t group) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= group;
  return RankedTensorType::get(shape, type.getElementType());
}

} // namespace

FailureOr<AllGatherOp> overlap::sinkAllGather(AllGatherOp gather,
                                              ReplicationAnalysis &replication,
                                              int64_t &moved) {
  moved = 0;
  auto gathered = cast<RankedTensorType>(gather.getResult().getType());
  auto input = cast<RankedTensorType>(gather.getInput().getType());
  if (!gathered.hasStaticShape() || !input.hasStaticShape())
    return failure();
  SinkRegion region{gather,
                    gathered.getDimSize(gather.getDim()) /
                        std::max<int64_t>(1, input.getDimSize(gather.getDim())),
                    {},
                    {}};
  region.dims[gather.getResult()] = gather.getDim();

  // Grow the region in block order from the gather.
  for (Operation *op = gather->getNextNode(); op; op = op->getNextNode()) {
    bool reads = llvm::any_of(op->getOperands(),
                              [&](Value v) { return region.dims.count(v); });
    if (!reads)
      continue;
    std::optional<int64_t> dim = region.join(op, replication);
    if (!dim)
      continue;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.hasStaticShape() ||
        type.getDimSize(*dim) % region.group != 0)
      continue;
    region.ops.insert(op);
    region.dims[op->getResult(0)] = *dim;
  }

  // The values used outside the region: exactly one, which the gather
  // then carries.
  SmallVector<Value> cut;
  for (auto &[value, dim] : region.dims)
    for (Operation *user : value.getUsers())
      if (!region.ops.contains(user)) {
        cut.push_back(value);
        break;
      }
  if (cut.size() != 1 || cut.front() == gather.getResult())
    return failure();
  Value out = cut.front();
  // Never more bytes on the wire: a broadcast (GQA's k/v repeated over the
  // q heads) or a widening cast stays after the gather.
  if (tensorBytes(out) > tensorBytes(gather.getResult()))
    return failure();

  IRRewriter rewriter(gather.getContext());
  IRMapping mapping;
  mapping.map(gather.getResult(), gather.getInput());
  for (Operation *op : region.ops) {
    rewriter.setInsertionPoint(op);
    // Placeholder inits of local shape.
    if (auto generic = dyn_cast<linalg::GenericOp>(op)) {
      Value init = generic.getDpsInits()[0];
      if (!region.dims.count(init)) {
        auto type = cast<RankedTensorType>(init.getType());
        int64_t dim = region.dims.lookup(op->getResult(0));
        RankedTensorType local = localType(type, dim, region.group);
        Value empty = tensor::EmptyOp::create(
            rewriter, op->getLoc(), local.getShape(), local.getElementType());
        Value fillValue;
        (void)isPlaceholder(init, &fillValue);
        if (fillValue)
          empty =
              linalg::FillOp::create(rewriter, op->getLoc(), fillValue, empty)
                  .getResult(0);
        mapping.map(init, empty);
      }
    }
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    RankedTensorType local =
        localType(type, region.dims.lookup(op->getResult(0)), region.group);
    Operation *clone;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op))
      clone = tensor::ExpandShapeOp::create(rewriter, op->getLoc(), local,
                                            mapping.lookup(expand.getSrc()),
                                            expand.getReassociationIndices());
    else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      clone = tensor::CollapseShapeOp::create(
          rewriter, op->getLoc(), local, mapping.lookup(collapse.getSrc()),
          collapse.getReassociationIndices());
    else {
      clone = rewriter.clone(*op, mapping);
      clone->getResult(0).setType(local);
    }
    mapping.map(op->getResult(0), clone->getResult(0));
    ++moved;
  }
  Operation *last = mapping.lookup(out).getDefiningOp();
  rewriter.setInsertionPointAfter(last);
  auto sunk = AllGatherOp::create(
      rewriter, gather.getLoc(), out.getType(), gather.getGridAttr(),
      gather.getAxesAttr(), mapping.lookup(out),
      rewriter.getI64IntegerAttr(region.dims.lookup(out)));
  sunk->setDiscardableAttrs(gather->getDiscardableAttrDictionary());
  rewriter.replaceAllUsesWith(out, sunk.getResult());
  for (Operation *op : llvm::reverse(region.ops))
    if (op->use_empty())
      rewriter.eraseOp(op);
  if (gather->use_empty())
    rewriter.eraseOp(gather);
  return sunk;
}
