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
// parallel loop, whose other operands are replicated and either constant
// along that loop or read at the row's position (then sliced to this
// rank's block), and whose inits are placeholders (tensor.empty, or a fill
// of one). Under context parallelism that takes in the k and v projections
// and the rotary embedding. Each value of the region used outside it is
// gathered instead, when together they are no more bytes than the gather
// moved or the work moved saves more than the extra bytes cost.
//
//===----------------------------------------------------------------------===//

#include "Overlap/Decompositions.h"
#include "Overlap/Pattern.h"

#include "braid/Dialect/Dist/Transforms/CostModel.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

namespace braid::dist {
#define GEN_PASS_DEF_SINKALLGATHER
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;

namespace {

struct SinkRegion {
  AllGatherOp gather;
  int64_t group;
  /// Ops of the region in block order.
  llvm::SetVector<Operation *> ops;
  /// The gathered dimension of each value of the region (the gather's
  /// result included).
  DenseMap<Value, int64_t> dims;
  /// A replicated operand that a region op reads along the gathered loop
  /// (rotary tables, per-position biases): its operand number and the
  /// dimension that loop indexes. Before the gather it is read as this
  /// rank's block of that dimension, or, when it is the same along it (a
  /// bias broadcast over the rows), as its first rows.
  struct RowOperand {
    unsigned operand;
    int64_t dim;
    bool uniform;
  };
  DenseMap<Operation *, SmallVector<RowOperand>> slices;
  /// A gathered dimension folded with others by a collapse ([batch, seq,
  /// ...] into [batch * seq * ...], as projections read activations): of
  /// `outer * full * inner` elements, the gathered `full` in between. Its
  /// local rows are not one block of the whole, but every op that treats
  /// rows independently computes them all the same, and an expand that
  /// separates `full` again gives a plain gathered dimension.
  struct Fold {
    int64_t outer = 1, full = 1, inner = 1;
    bool operator==(const Fold &other) const {
      return outer == other.outer && full == other.full && inner == other.inner;
    }
    bool operator!=(const Fold &other) const { return !(*this == other); }
  };
  DenseMap<Value, Fold> folds;

  /// The gathered dimension of `op`'s result if `op` can join, else none;
  /// in `fold` whether that dimension is folded, and how.
  std::optional<int64_t> join(Operation *op, ReplicationAnalysis &replication,
                              std::optional<Fold> &fold);

private:
  std::optional<int64_t> joinLinalg(linalg::LinalgOp op,
                                    ReplicationAnalysis &replication,
                                    std::optional<Fold> &fold);
  /// The fold of region value `value`, if it is folded.
  std::optional<Fold> foldOf(Value value) const {
    auto it = folds.find(value);
    return it == folds.end() ? std::nullopt : std::optional<Fold>(it->second);
  }
  /// Whether `value` is computed from the gather's result or from a later
  /// collective's.
  bool reachedByGather(Value value);
  llvm::SmallPtrSet<Operation *, 32> reached;
  bool reachedComputed = false;
};

bool SinkRegion::reachedByGather(Value value) {
  // Once, forward through the block: the ops after the gather that read,
  // directly or inside their regions, its result or a reached op's. The
  // results of later collectives count as reached too: slicing one (an
  // all-reduced value, to add to the rows) would take its elementwise
  // work out of that collective's own schedule.
  if (!reachedComputed) {
    reachedComputed = true;
    reached.insert(gather);
    for (Operation *op = gather->getNextNode(); op; op = op->getNextNode()) {
      if (isa<CollectiveOpInterface>(op)) {
        reached.insert(op);
        continue;
      }
      llvm::SetVector<Value> used(llvm::from_range, op->getOperands());
      getUsedValuesDefinedAbove(op->getRegions(), used);
      if (llvm::any_of(used, [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && reached.contains(def);
          }))
        reached.insert(op);
    }
  }
  Operation *def = value.getDefiningOp();
  return def && reached.contains(def);
}

/// When `value` is an all-gather along dimension `dim` over the same group
/// as `gather`, seen through reshapes that keep that dimension whole and
/// outermost in its group (a rotary table partitioning split and gathered
/// back), the reshapes from the gather outwards, each with the dimension
/// its input gathers along; else nothing.
std::optional<SmallVector<std::pair<Operation *, int64_t>>>
blockGatherChain(Value value, int64_t dim, AllGatherOp gather) {
  SmallVector<std::pair<Operation *, int64_t>> chain;
  while (Operation *def = value.getDefiningOp()) {
    if (auto other = dyn_cast<AllGatherOp>(def)) {
      if (other == gather || static_cast<int64_t>(other.getDim()) != dim ||
          other.getGridAttr() != gather.getGridAttr() ||
          other.getAxes() != gather.getAxes())
        return std::nullopt;
      std::reverse(chain.begin(), chain.end());
      return chain;
    }
    // The source dimension `dim` comes from, when the dimensions grouped
    // with it before it are all of size 1.
    std::optional<int64_t> from;
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
      for (int64_t d : collapse.getReassociationIndices()[dim]) {
        if (collapse.getSrcType().getDimSize(d) != 1) {
          from = d;
          break;
        }
      }
    } else if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
      for (auto [src, group] :
           llvm::enumerate(expand.getReassociationIndices())) {
        if (!llvm::is_contained(group, dim))
          continue;
        for (int64_t d : group) {
          if (d == dim)
            from = src;
          if (d == dim || expand.getResultType().getDimSize(d) != 1)
            break;
        }
      }
    }
    if (!from)
      return std::nullopt;
    chain.emplace_back(def, dim);
    value = def->getOperand(0);
    dim = *from;
  }
  return std::nullopt;
}

/// This rank's block of `value` (see blockGatherChain): the gather's input
/// through the same reshapes on local shapes.
Value blockGatherInput(OpBuilder &b, Location loc,
                       ArrayRef<std::pair<Operation *, int64_t>> chain,
                       Value value, int64_t group) {
  Operation *first = chain.empty()
                         ? value.getDefiningOp()
                         : chain.front().first->getOperand(0).getDefiningOp();
  Value block = cast<AllGatherOp>(first).getInput();
  for (auto [op, dim] : chain) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] /= group;
    auto local = RankedTensorType::get(shape, type.getElementType());
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
      block = tensor::CollapseShapeOp::create(
          b, loc, local, block, collapse.getReassociationIndices());
    else
      block = tensor::ExpandShapeOp::create(
          b, loc, local, block,
          cast<tensor::ExpandShapeOp>(op).getReassociationIndices());
  }
  return block;
}

/// Whether all of `values` are static in the sense of `getConstantIntValue`.
bool allConstant(ArrayRef<OpFoldResult> values) {
  return llvm::all_of(values, [](OpFoldResult value) {
    return getConstantIntValue(value).has_value();
  });
}

std::optional<int64_t> SinkRegion::join(Operation *op,
                                        ReplicationAnalysis &replication,
                                        std::optional<Fold> &fold) {
  fold.reset();
  if (op->getBlock() != gather->getBlock() || op->getNumResults() != 1)
    return std::nullopt;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    auto it = dims.find(collapse.getSrc());
    if (it == dims.end() || foldOf(collapse.getSrc()))
      return std::nullopt;
    RankedTensorType type = collapse.getSrcType();
    for (auto [index, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      if (!llvm::is_contained(group, it->second))
        continue;
      // When the gathered dimension is the outermost one of its group that
      // varies, the collapsed dimension is gathered blockwise too; else it
      // is folded.
      Fold folded;
      folded.full = type.getDimSize(it->second);
      bool before = true;
      for (int64_t d : group) {
        if (d == it->second)
          before = false;
        else
          (before ? folded.outer : folded.inner) *= type.getDimSize(d);
      }
      if (folded.outer != 1)
        fold = folded;
      return static_cast<int64_t>(index);
    }
    return std::nullopt;
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    auto it = dims.find(expand.getSrc());
    if (it == dims.end())
      return std::nullopt;
    RankedTensorType type = expand.getResultType();
    ReassociationIndices indices = expand.getReassociationIndices()[it->second];
    if (std::optional<Fold> folded = foldOf(expand.getSrc())) {
      // Plain again where one dimension of the group is the gathered one,
      // with the folded outer and inner extents on either side of it.
      int64_t outer = 1;
      for (auto [position, d] : llvm::enumerate(indices)) {
        int64_t inner = 1;
        for (int64_t e : ArrayRef<int64_t>(indices).drop_front(position + 1))
          inner *= type.getDimSize(e);
        if (outer == folded->outer && type.getDimSize(d) == folded->full &&
            inner == folded->inner)
          return d;
        outer *= type.getDimSize(d);
      }
      return std::nullopt;
    }
    for (int64_t d : indices)
      if (type.getDimSize(d) != 1)
        return type.getDimSize(d) % group == 0 ? std::optional<int64_t>(d)
                                               : std::nullopt;
    return std::nullopt;
  }
  // A static slice of other dimensions (the halves rotary embedding
  // rotates), whole along the gathered one.
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto it = dims.find(slice.getSource());
    if (it == dims.end() ||
        slice.getResultType().getRank() != slice.getSourceType().getRank())
      return std::nullopt;
    SmallVector<OpFoldResult> offsets = slice.getMixedOffsets(),
                              sizes = slice.getMixedSizes(),
                              strides = slice.getMixedStrides();
    if (!allConstant(offsets) || !allConstant(sizes) || !allConstant(strides))
      return std::nullopt;
    int64_t d = it->second;
    if (*getConstantIntValue(offsets[d]) != 0 ||
        *getConstantIntValue(strides[d]) != 1 ||
        *getConstantIntValue(sizes[d]) != slice.getSourceType().getDimSize(d))
      return std::nullopt;
    fold = foldOf(slice.getSource());
    return d;
  }
  // Pieces joined along another dimension, every one of them gathered.
  if (auto concat = dyn_cast<tensor::ConcatOp>(op)) {
    std::optional<int64_t> d;
    for (Value input : concat.getInputs()) {
      auto it = dims.find(input);
      if (it == dims.end() || (d && *d != it->second) ||
          foldOf(input) != foldOf(concat.getInputs().front()))
        return std::nullopt;
      d = it->second;
    }
    if (!d || static_cast<int64_t>(concat.getDim()) == *d)
      return std::nullopt;
    fold = foldOf(concat.getInputs().front());
    return d;
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return joinLinalg(linalgOp, replication, fold);
  return std::nullopt;
}

/// Whether `value` is the same along dimension `dim`: a broadcast along it
/// (a generic yielding an input whose map does not read that loop, such as
/// a bias repeated for every row), a splat constant or a fill.
bool sameAlong(Value value, int64_t dim) {
  DenseElementsAttr constant;
  if ((matchPattern(value, m_Constant(&constant)) && constant.isSplat()) ||
      value.getDefiningOp<linalg::FillOp>())
    return true;
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic->getNumResults() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops() ||
      !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
           .isIdentity())
    return false;
  auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
  auto arg = dyn_cast<BlockArgument>(yield.getValues()[0]);
  if (!arg || arg.getOwner() != generic.getBody() ||
      arg.getArgNumber() >= generic.getNumDpsInputs())
    return false;
  return !generic
              .getMatchingIndexingMap(
                  generic.getDpsInputOperand(arg.getArgNumber()))
              .isFunctionOfDim(dim);
}

std::optional<int64_t> SinkRegion::joinLinalg(linalg::LinalgOp op,
                                              ReplicationAnalysis &replication,
                                              std::optional<Fold> &fold) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1)
    return std::nullopt;
  std::optional<unsigned> loop;
  int64_t extent = 0;
  bool first = true;
  for (OpOperand &operand : op->getOpOperands()) {
    auto it = dims.find(operand.get());
    if (it == dims.end())
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    auto dim = dyn_cast<AffineDimExpr>(map.getResult(it->second));
    if (!dim || (loop && *loop != dim.getPosition()))
      return std::nullopt;
    // Every gathered operand folded alike, or none.
    if (!first && foldOf(operand.get()) != fold)
      return std::nullopt;
    fold = foldOf(operand.get());
    first = false;
    loop = dim.getPosition();
    extent =
        cast<RankedTensorType>(operand.get().getType()).getDimSize(it->second);
  }
  if (!loop ||
      op.getIteratorTypesArray()[*loop] != utils::IteratorType::parallel)
    return std::nullopt;
  // Before the gather the loop counts this rank's rows from 0.
  bool readsIndex = false;
  op->walk(
      [&](linalg::IndexOp index) { readsIndex |= index.getDim() == *loop; });
  if (readsIndex)
    return std::nullopt;
  std::string why;
  SmallVector<RowOperand> sliced;
  for (OpOperand *input : op.getDpsInputOperands()) {
    if (dims.count(input->get()))
      continue;
    // Other inputs: the same on every rank, and either the same for every
    // row or read at the row's own position along one of their dimensions
    // spanning all rows (then sliced to this rank's block).
    if (!replication.isReplicated(input->get(), gather.getGridAttr(),
                                  gather.getAxes(), why))
      return std::nullopt;
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isFunctionOfDim(*loop))
      continue;
    std::optional<int64_t> at;
    for (auto [index, expr] : llvm::enumerate(map.getResults())) {
      if (!expr.isFunctionOfDim(*loop))
        continue;
      auto dim = dyn_cast<AffineDimExpr>(expr);
      if (!dim || at)
        return std::nullopt;
      at = index;
    }
    // Not a value the gather's result reaches, which would have to be
    // gathered whole first. One that is the same along the rows may be
    // read along folded rows too.
    auto type = dyn_cast<RankedTensorType>(input->get().getType());
    if (!type || !type.hasStaticShape() || type.getDimSize(*at) != extent)
      return std::nullopt;
    bool uniform = sameAlong(input->get(), *at);
    if (uniform ? reachedByGather(input->get())
                : fold || gather.getAxes().size() != 1 ||
                      (reachedByGather(input->get()) &&
                       !blockGatherChain(input->get(), *at, gather)))
      return std::nullopt;
    sliced.push_back({input->getOperandNumber(), *at, uniform});
  }
  OpOperand *init = op.getDpsInitOperand(0);
  if (!dims.count(init->get()) && !schedule::isPlaceholder(init->get()))
    return std::nullopt;
  AffineMap initMap = op.getMatchingIndexingMap(init);
  for (auto [index, expr] : llvm::enumerate(initMap.getResults()))
    if (auto dim = dyn_cast<AffineDimExpr>(expr);
        dim && dim.getPosition() == *loop) {
      if (!sliced.empty())
        slices[op] = std::move(sliced);
      return static_cast<int64_t>(index);
    }
  return std::nullopt;
}

/// Whether `slice` takes, from `gather`'s result, exactly this rank's block
/// (what the gather's input holds): the block along the gathered dimension
/// at the rank's position along the gather's one axis times the block,
/// every other dimension whole. Partitioning writes such slices after a
/// value it computed whole.
bool isOwnBlock(tensor::ExtractSliceOp slice, AllGatherOp gather) {
  auto local = cast<RankedTensorType>(gather.getInput().getType());
  int64_t dim = gather.getDim();
  if (gather.getAxes().size() != 1 || slice.getResultType() != local ||
      !slice.hasUnitStride())
    return false;
  SmallVector<OpFoldResult> offsets = slice.getMixedOffsets();
  for (auto [d, offset] : llvm::enumerate(offsets))
    if (static_cast<int64_t>(d) != dim && !isConstantIntValue(offset, 0))
      return false;
  auto product = dyn_cast_if_present<Value>(offsets[dim]);
  auto muli = product ? product.getDefiningOp<arith::MulIOp>() : nullptr;
  if (!muli)
    return false;
  for (unsigned side = 0; side < 2; ++side) {
    auto index =
        muli->getOperand(side).getDefiningOp<shard::ProcessMultiIndexOp>();
    std::optional<int64_t> block =
        getConstantIntValue(muli->getOperand(1 - side));
    if (index && block && *block == local.getDimSize(dim) &&
        index.getGrid() == gather.getGridAttr().getValue() &&
        ArrayRef<int16_t>(index.getAxes()) == gather.getAxes())
      return true;
  }
  return false;
}

/// `type` with dimension `dim` divided by `group`.
RankedTensorType localType(RankedTensorType type, int64_t dim, int64_t group) {
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= group;
  return RankedTensorType::get(shape, type.getElementType());
}

} // namespace

/// Grows `region` from its gather in block order and returns the values
/// used after it, each to be gathered, or failure when nothing can move.
/// An op that makes more bytes than it reads from the region (a broadcast,
/// such as GQA's repeat of k and v over the q heads, or a widening cast)
/// stays after the gather, and so does everything that reads it: gathering
/// its operands instead moves fewer bytes. Contractions and casts are
/// exempt with `widen` (an FFN's up projection makes more than it reads,
/// and its down projection less again; a value upcast for some work is
/// often rounded back), and the values' total decides.
static FailureOr<SmallVector<Value>>
growRegion(SinkRegion &region, ReplicationAnalysis &replication,
           const CostModel *cost, bool widen) {
  AllGatherOp gather = region.gather;
  region.dims[gather.getResult()] = gather.getDim();
  for (Operation *op = gather->getNextNode(); op; op = op->getNextNode()) {
    llvm::SetVector<Value> inside;
    for (Value operand : op->getOperands())
      if (region.dims.count(operand))
        inside.insert(operand);
    if (inside.empty())
      continue;
    std::optional<SinkRegion::Fold> fold;
    std::optional<int64_t> dim = region.join(op, replication, fold);
    if (!dim)
      continue;
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.hasStaticShape() ||
        type.getDimSize(*dim) % region.group != 0)
      continue;
    double read = 0;
    int64_t readElements = 0;
    for (Value value : inside) {
      read += tensorBytes(value);
      readElements = std::max<int64_t>(
          readElements, cast<ShapedType>(value.getType()).getNumElements());
    }
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    bool contraction = linalgOp && linalg::isaContractionOpInterface(linalgOp);
    // A widening cast (k upcast for its rotary embedding, then rounded
    // back) makes no more elements than it reads; a broadcast does.
    bool cast = type.getNumElements() <= readElements;
    if (tensorBytes(op->getResult(0)) > read &&
        !(widen && (contraction || cast)))
      continue;
    region.ops.insert(op);
    region.dims[op->getResult(0)] = *dim;
    if (fold)
      region.folds[op->getResult(0)] = *fold;
  }

  // The values used outside the region, in block order: each is gathered
  // afterwards.
  SmallVector<Value> cut;
  auto usedOutside = [&](Value value) {
    return llvm::any_of(value.getUsers(), [&](Operation *user) {
      return !region.ops.contains(user);
    });
  };
  if (usedOutside(gather.getResult()))
    return failure();
  // A folded value is not one block per rank, so no gather assembles it:
  // the op making one that is used afterwards stays after the gather, and
  // so does what reads it.
  for (bool pruned = true; pruned;) {
    pruned = false;
    for (Operation *op : region.ops) {
      if (!region.folds.count(op->getResult(0)) ||
          !usedOutside(op->getResult(0)))
        continue;
      llvm::SmallPtrSet<Operation *, 8> dropped{op};
      for (Operation *later : region.ops)
        if (llvm::any_of(later->getOperands(), [&](Value v) {
              return v.getDefiningOp() && dropped.contains(v.getDefiningOp());
            }))
          dropped.insert(later);
      region.ops.remove_if([&](Operation *o) { return dropped.contains(o); });
      for (Operation *o : dropped) {
        region.dims.erase(o->getResult(0));
        region.folds.erase(o->getResult(0));
      }
      pruned = true;
      break;
    }
  }
  if (region.ops.empty() || usedOutside(gather.getResult()))
    return failure();
  double cutBytes = 0;
  for (Operation *op : region.ops)
    if (usedOutside(op->getResult(0))) {
      cut.push_back(op->getResult(0));
      cutBytes += tensorBytes(cut.back());
    }
  if (cut.empty())
    return failure();
  // Never more bytes on the wire than the gather moved, unless for less
  // time: when the work moved (contractions with replicated weights, such
  // as k and v projected from gathered rows without GQA) saves more than
  // the extra transfer is predicted to cost.
  double gatherBytes = tensorBytes(gather.getResult());
  if (cutBytes > gatherBytes) {
    if (!cost)
      return failure();
    LinkFigures link =
        cost->link(gather, gather.getGridAttr(), gather.getAxes());
    double extra =
        cost->collectiveTime("all_gather", cutBytes, region.group, link) -
        cost->collectiveTime("all_gather", gatherBytes, region.group, link);
    // Each op still runs (and pays its launch), on 1/n of the rows.
    double saved = 0;
    for (Operation *op : region.ops)
      saved += cost->computeTime(op) -
               cost->computeTime(op, 1.0 / static_cast<double>(region.group));
    if (saved <= extra)
      return failure();
  }
  return cut;
}

FailureOr<SmallVector<AllGatherOp>>
overlap::sinkAllGather(AllGatherOp gather, ReplicationAnalysis &replication,
                       const CostModel *cost, int64_t &moved) {
  moved = 0;
  auto gathered = cast<RankedTensorType>(gather.getResult().getType());
  auto input = cast<RankedTensorType>(gather.getInput().getType());
  if (!gathered.hasStaticShape() || !input.hasStaticShape())
    return failure();
  int64_t group = gathered.getDimSize(gather.getDim()) /
                  std::max<int64_t>(1, input.getDimSize(gather.getDim()));
  // Widening contractions and casts first; without them when that moves
  // too many bytes.
  std::optional<SinkRegion> chosen;
  SmallVector<Value> cut;
  for (bool widen : {true, false}) {
    chosen.emplace();
    chosen->gather = gather;
    chosen->group = group;
    FailureOr<SmallVector<Value>> values =
        growRegion(*chosen, replication, cost, widen);
    if (succeeded(values)) {
      cut = std::move(*values);
      break;
    }
    chosen.reset();
  }
  if (!chosen)
    return failure();
  SinkRegion &region = *chosen;

  IRRewriter rewriter(gather.getContext());
  IRMapping mapping;
  mapping.map(gather.getResult(), gather.getInput());
  for (Operation *op : region.ops) {
    rewriter.setInsertionPoint(op);
    int64_t dim = region.dims.lookup(op->getResult(0));
    // Placeholder inits of local shape.
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      Value init = linalgOp.getDpsInits()[0];
      if (!region.dims.count(init)) {
        auto type = cast<RankedTensorType>(init.getType());
        mapping.map(init, schedule::freshPlaceholder(
                              rewriter, op->getLoc(), init,
                              localType(type, dim, region.group)));
      }
    }
    // Replicated operands read along the rows: this rank's block of them.
    SmallVector<std::pair<Value, Value>> restore;
    for (auto [number, operandDim, uniform] : region.slices.lookup(op)) {
      Value whole = op->getOperand(number);
      restore.emplace_back(whole, mapping.lookupOrNull(whole));
      int64_t size =
          cast<RankedTensorType>(whole.getType()).getDimSize(operandDim) /
          region.group;
      if (uniform) {
        mapping.map(whole, schedule::sliceAlong(
                               rewriter, op->getLoc(), whole, operandDim,
                               rewriter.getIndexAttr(0), size));
        continue;
      }
      if (auto chain = blockGatherChain(whole, operandDim, gather)) {
        mapping.map(whole, blockGatherInput(rewriter, op->getLoc(), *chain,
                                            whole, region.group));
        continue;
      }
      Value position = schedule::groupPosition(
          rewriter, op->getLoc(), gather.getGridAttr(), gather.getAxes()[0]);
      Value offset =
          schedule::affineIndex(rewriter, op->getLoc(), position, size, 0);
      mapping.map(whole, schedule::sliceAlong(rewriter, op->getLoc(), whole,
                                              operandDim, offset, size));
    }
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    RankedTensorType local = localType(type, dim, region.group);
    Operation *clone;
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
      clone = tensor::ExpandShapeOp::create(rewriter, op->getLoc(), local,
                                            mapping.lookup(expand.getSrc()),
                                            expand.getReassociationIndices());
    } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
      clone = tensor::CollapseShapeOp::create(
          rewriter, op->getLoc(), local, mapping.lookup(collapse.getSrc()),
          collapse.getReassociationIndices());
    } else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      SmallVector<OpFoldResult> sizes = slice.getMixedSizes();
      sizes[dim] = rewriter.getIndexAttr(local.getDimSize(dim));
      clone = tensor::ExtractSliceOp::create(
          rewriter, op->getLoc(), local, mapping.lookup(slice.getSource()),
          slice.getMixedOffsets(), sizes, slice.getMixedStrides());
    } else {
      clone = rewriter.clone(*op, mapping);
      clone->getResult(0).setType(local);
    }
    for (auto [whole, previous] : restore) {
      if (previous)
        mapping.map(whole, previous);
      else
        mapping.erase(whole);
    }
    mapping.map(op->getResult(0), clone->getResult(0));
    ++moved;
  }
  SmallVector<AllGatherOp> sunk;
  for (Value out : cut) {
    Operation *last = mapping.lookup(out).getDefiningOp();
    rewriter.setInsertionPointAfter(last);
    auto after = AllGatherOp::create(
        rewriter, gather.getLoc(), out.getType(), gather.getGridAttr(),
        gather.getAxesAttr(), mapping.lookup(out),
        rewriter.getI64IntegerAttr(region.dims.lookup(out)));
    after->setDiscardableAttrs(gather->getDiscardableAttrDictionary());
    rewriter.replaceAllUsesWith(out, after.getResult());
    // What only took this rank's block back reads the local value.
    for (OpOperand &use : llvm::make_early_inc_range(after->getUses()))
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(use.getOwner());
          slice && isOwnBlock(slice, after))
        rewriter.replaceOp(slice, after.getInput());
    if (after->use_empty())
      rewriter.eraseOp(after);
    else
      sunk.push_back(after);
  }
  for (Operation *op : llvm::reverse(region.ops))
    if (op->use_empty())
      rewriter.eraseOp(op);
  if (gather->use_empty())
    rewriter.eraseOp(gather);
  return sunk;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

/// Erases the all-gathers of `gathers` that nothing reads any more, once
/// the ops without effect that read them and are unused are gone (rotary
/// tables partitioning gathered back, whose readers moved before another
/// gather). Every rank drops the same ones.
void dropUnreadGathers(ArrayRef<AllGatherOp> gathers) {
  // Users first; never a collective.
  std::function<void(Operation *)> eraseDeadUsers = [&](Operation *op) {
    for (Operation *user : llvm::make_early_inc_range(op->getUsers())) {
      if (isa<CollectiveOpInterface>(user))
        continue;
      eraseDeadUsers(user);
      if (isOpTriviallyDead(user))
        user->erase();
    }
  };
  for (AllGatherOp gather : gathers) {
    eraseDeadUsers(gather);
    if (!gather->use_empty())
      continue;
    emitRemark(gather.getLoc())
        << "all_gather removed: nothing reads its result any more";
    gather->erase();
  }
}

struct SinkAllGatherPass
    : public braid::dist::impl::SinkAllGatherBase<SinkAllGatherPass> {
  using Base::Base;

  void runOnOperation() override {
    std::string name = overlap::presetName(preset.getValue());
    std::optional<TargetDescription> target = TargetDescription::preset(name);
    if (!target) {
      getOperation().emitError()
          << "braid-sink-all-gather: no cost model figures for preset '" << name
          << "'";
      return signalPassFailure();
    }
    CostModel model(*target);
    ReplicationAnalysis replication;
    getOperation().walk([&](FunctionOpInterface function) {
      sinkIn(function, model, replication);
    });
  }

private:
  /// Every gather of `function`, in program order; then the gathers left
  /// unread (the new ones included) are dropped.
  void sinkIn(FunctionOpInterface function, const CostModel &model,
              ReplicationAnalysis &replication);
};

void SinkAllGatherPass::sinkIn(FunctionOpInterface function,
                               const CostModel &model,
                               ReplicationAnalysis &replication) {
  SmallVector<AllGatherOp> gathers, kept;
  function->walk([&](AllGatherOp gather) { gathers.push_back(gather); });
  SmallVector<AllGatherOp> added;
  for (AllGatherOp gather : gathers) {
    int64_t moved = 0;
    double before = tensorBytes(gather.getResult());
    Location loc = gather.getLoc();
    FailureOr<SmallVector<AllGatherOp>> sunk =
        overlap::sinkAllGather(gather, replication, &model, moved);
    if (failed(sunk)) {
      kept.push_back(gather);
      continue;
    }
    replication.invalidate();
    if (sunk->empty()) {
      // Everything after it took this rank's block back.
      emitRemark(loc) << "all_gather removed: the " << moved
                      << " row-local ops after it moved before it, and "
                         "what followed them read only this rank's block";
      continue;
    }
    kept.push_back(sunk->front());
    llvm::append_range(added, llvm::drop_begin(*sunk));
    InFlightDiagnostic remark = emitRemark(loc);
    remark << "all_gather moved after the " << moved
           << " row-local ops that followed it (their other operands are "
              "replicated): they run on 1/"
           << overlap::groupSizeOf(sunk->front()) << " of the rows";
    if (sunk->size() > 1) {
      double after = 0;
      for (AllGatherOp value : *sunk)
        after += tensorBytes(value.getResult());
      remark << "; " << sunk->size()
             << " values are gathered after them instead of one ("
             << schedule::formatBytes(after) << " instead of "
             << schedule::formatBytes(before) << ")";
    }
  }
  llvm::append_range(kept, added);
  dropUnreadGathers(kept);
  replication.invalidate();
}

} // namespace
