//===- ApplyParallelPlan.cpp - Per-weight plans to shard annotations -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Turns a tensor-parallel plan given per function argument, in the style of
// PyTorch's parallelize_module (colwise, rowwise, replicate, sequence), into
// the shard.shard annotations of upstream's global view, with DTensor's
// layouts:
//
//   colwise   the weight is split along the output features of the
//             contraction it feeds (a bias: along its only dimension); the
//             contraction's activation is replicated, its result split along
//             the same features.
//   rowwise   the weight is split along the contraction's reduction
//             dimension; the activation arrives split the same way, and the
//             partial sums are reduced to a replicated result (an
//             all-reduce, or a reduce-scatter when a sequence-split value
//             follows: braid-import-shard fuses the reduction and the
//             slice).
//   replicate the value is the same on every rank.
//   sequence  an activation split along its sequence dimension (the second
//             to last): sequence parallelism.
//
// Weights are traced to their contractions through linalg.transpose, so
// both PyTorch's [out, in] layout and [in, out] work.
//
//===----------------------------------------------------------------------===//

#include "ImportPatterns.h"
#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace braid {
#define GEN_PASS_DEF_APPLYPARALLELPLAN
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

constexpr StringLiteral kPlanAttr = "braid.parallel";
constexpr StringLiteral kGridAttr = "braid.grid";
constexpr StringLiteral kAxisAttr = "braid.grid_axis";
constexpr StringLiteral kLikeAttr = "braid.sharded_like";
constexpr StringLiteral kBackwardAttr = "braid.backward";
constexpr StringLiteral kDataAxisAttr = "braid.data_axis";
constexpr StringLiteral kBatchAttr = "braid.batch";
/// A function's grid axis that splits the experts of the arguments marked
/// kExpertsAttr (expert parallelism beside the plan's tensor parallelism).
constexpr StringLiteral kExpertAxisAttr = "braid.expert_axis";
/// An expert weight ([experts, ...]) whose experts the expert axis splits.
constexpr StringLiteral kExpertsAttr = "braid.experts";

/// Where a plan splits a tensor: one dimension along the plan's axis, or
/// none (replicated); for an activation on a grid with a data axis, its
/// leading (batch) dimension along that axis too; and on a grid with an
/// expert axis, the experts' dimension of an expert weight, of the
/// operands of its contractions and of their results along that axis.
struct Layout {
  std::optional<int64_t> dim;
  bool batch = false;
  std::optional<int64_t> expertDim;
  bool operator==(const Layout &other) const {
    return dim == other.dim && batch == other.batch &&
           expertDim == other.expertDim;
  }
};

/// A contraction a weight reaches, and the dimension of the weight (as the
/// function receives it) that each of the contraction's operand dimensions
/// comes from.
struct Use {
  linalg::LinalgOp op;
  unsigned operand;
  /// permutation[j]: the argument dimension behind operand dimension j.
  SmallVector<int64_t> permutation;
};

class PlanBuilder {
public:
  PlanBuilder(func::FuncOp func, FlatSymbolRefAttr grid, int16_t axis,
              int64_t ranks, std::optional<int16_t> dataAxis, int64_t dataRanks,
              std::optional<int16_t> expertAxis, bool backward)
      : func(func), grid(grid), axis(axis), ranks(ranks), dataAxis(dataAxis),
        dataRanks(dataRanks), expertAxis(expertAxis), backward(backward) {}

  LogicalResult run();

  /// Whether dispatchByAllToAll annotated a dispatch: the function's
  /// propagation then runs forward first, so that the routing stays on
  /// each rank's tokens.
  bool dispatches() const { return !dispatched.empty(); }

private:
  Value sharding(Location loc, Layout layout, OpBuilder &b) {
    // Replicated is one empty group ([[]]), which prints in a form the
    // parser reads back, unlike no groups at all. The data axis splits the
    // batch, outermost: where the plan splits dimension 0 too (tokens or
    // heads flattened with the batch), the batch's blocks are the major
    // ones.
    // The expert axis splits the experts, outermost where the plan splits
    // the same dimension.
    std::optional<int64_t> experts =
        expertAxis ? layout.expertDim : std::nullopt;
    int64_t size = std::max<int64_t>(layout.dim ? *layout.dim + 1 : 1,
                                     experts ? *experts + 1 : 1);
    SmallVector<SmallVector<int16_t>> groups(size);
    if (layout.batch && dataAxis)
      groups.front().push_back(*dataAxis);
    if (experts)
      groups[*experts].push_back(*expertAxis);
    if (layout.dim)
      groups[*layout.dim].push_back(axis);
    SmallVector<shard::GridAxesAttr> split;
    for (ArrayRef<int16_t> group : groups)
      split.push_back(shard::GridAxesAttr::get(b.getContext(), group));
    return shard::ShardingOp::create(b, loc, grid, split).getResult();
  }

  /// Annotates `value` with `layout` after its definition and redirects its
  /// uses to the annotation, which it returns.
  Value annotateResult(Value value, Layout layout, bool forUsers = false) {
    OpBuilder b(func.getContext());
    b.setInsertionPointAfterValue(value);
    Value s = sharding(value.getLoc(), layout, b);
    auto annotated =
        shard::ShardOp::create(b, value.getLoc(), value, s, forUsers);
    value.replaceAllUsesExcept(annotated.getResult(), annotated);
    return annotated.getResult();
  }

  /// Annotates operand `index` of `op` for that use only.
  void annotateOperand(Operation *op, unsigned index, Layout layout) {
    OpBuilder b(op);
    Value value = op->getOperand(index);
    Value s = sharding(op->getLoc(), layout, b);
    auto annotated = shard::ShardOp::create(b, op->getLoc(), value, s,
                                            /*annotate_for_users=*/true);
    op->setOperand(index, annotated.getResult());
  }

  /// Annotates a function argument: a weight for all its users (they are
  /// the contractions the plan names), an activation as the layout it
  /// arrives in (`forUsers` false), which leaves its users free to take it
  /// otherwise (a rotary table read next to split heads).
  void annotateArgument(BlockArgument arg, Layout layout,
                        bool forUsers = true) {
    OpBuilder b = OpBuilder::atBlockBegin(arg.getOwner());
    Value s = sharding(arg.getLoc(), layout, b);
    auto annotated = shard::ShardOp::create(b, arg.getLoc(), arg, s,
                                            /*annotate_for_users=*/forUsers);
    arg.replaceAllUsesExcept(annotated.getResult(), annotated);
  }

  /// The experts' dimension (0) of an argument marked braid.experts on a
  /// grid with an expert axis.
  std::optional<int64_t> expertsOf(BlockArgument arg) {
    if (expertAxis && func.getArgAttr(arg.getArgNumber(), kExpertsAttr))
      return 0;
    return std::nullopt;
  }

  void annotateResidual(Value value);
  LogicalResult collectUses(BlockArgument arg, SmallVectorImpl<Use> &uses);
  LogicalResult planPacked(BlockArgument arg);
  LogicalResult planExperts(BlockArgument arg);
  void dispatchByAllToAll(linalg::LinalgOp op, unsigned operand,
                          int64_t expertDim);
  void annotateCombine(Value value, int64_t dim, bool onExpertAxis = false);
  LogicalResult planWeight(BlockArgument arg, StringRef style);

  func::FuncOp func;
  FlatSymbolRefAttr grid;
  int16_t axis;
  /// The size of `axis` (dynamic when the grid does not say).
  int64_t ranks;
  /// The grid axis that splits the batch (braid.data_axis; data
  /// parallelism), and its size: the activations the plan annotates are
  /// split along their leading dimension on it, weights are replicated.
  std::optional<int16_t> dataAxis;
  int64_t dataRanks;
  /// The grid axis that splits the experts of the weights marked
  /// braid.experts (braid.expert_axis), beside the plan's split of their
  /// features.
  std::optional<int16_t> expertAxis;
  /// Whether the function holds a backward too (braid.backward): a weight's
  /// first contraction in program order is the forward's, which the plan
  /// describes; later ones reading it along another dimension compute
  /// gradients, and take the weight's layout as propagation gives it.
  bool backward;
  /// Whether the activations are sequence-split with a batch of one (every
  /// sequence-split argument's dimensions before the sequence are 1), so
  /// that the token dimension of a contraction on them is the sequence.
  bool sequenceTokens = false;
  /// The transposes dispatchByAllToAll annotated.
  llvm::DenseSet<Operation *> dispatched;
};

/// How diagnostics name an argument: its location's name (the parameter
/// `layers.0.mlp.up_proj.weight`, as the PyTorch front door names them),
/// else its position.
std::string nameOf(BlockArgument arg) {
  if (auto name = dyn_cast<NameLoc>(arg.getLoc()))
    return ("'" + name.getName().getValue() + "' (argument #" +
            Twine(arg.getArgNumber()) + ")")
        .str();
  return ("argument #" + Twine(arg.getArgNumber())).str();
}

LogicalResult PlanBuilder::collectUses(BlockArgument arg,
                                       SmallVectorImpl<Use> &uses) {
  auto type = cast<RankedTensorType>(arg.getType());
  SmallVector<std::pair<Value, SmallVector<int64_t>>> worklist;
  worklist.push_back(
      {arg, llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()))});
  while (!worklist.empty()) {
    auto [value, permutation] = worklist.pop_back_val();
    for (OpOperand &operand : value.getUses()) {
      Operation *user = operand.getOwner();
      if (auto transpose = dyn_cast<linalg::TransposeOp>(user)) {
        if (operand.get() != transpose.getInput())
          continue;
        SmallVector<int64_t> next;
        for (int64_t p : transpose.getPermutation())
          next.push_back(permutation[p]);
        worklist.push_back({transpose->getResult(0), next});
        continue;
      }
      // Elementwise work on the weight alone (the f32 upcast torch writes
      // before a bf16 addmm): the same dimensions on the other side.
      if (auto generic = dyn_cast<linalg::GenericOp>(user);
          generic && generic.getNumDpsInputs() == 1 &&
          generic.getNumDpsInits() == 1 && generic.isDpsInput(&operand) &&
          generic.getNumLoops() == generic.getNumParallelLoops() &&
          llvm::all_of(generic.getIndexingMapsArray(),
                       [](AffineMap map) { return map.isIdentity(); })) {
        worklist.push_back({generic->getResult(0), permutation});
        continue;
      }
      auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
      if (linalgOp && linalg::isaContractionOpInterface(linalgOp) &&
          linalgOp.isDpsInput(&operand))
        uses.push_back({linalgOp, operand.getOperandNumber(), permutation});
    }
  }
  return success();
}

/// The combine of the experts' outputs: following `value` (split by
/// experts along `dim`) through elementwise work (the routing weights),
/// reshapes that keep the experts outermost and gathers within each
/// expert (the capacity export's) to the op that sums over the experts (a
/// reduction, or a contraction over [experts x rows]), whose operand is
/// annotated split too, so that each rank sums its experts and the partial
/// sums are reduced (an all-reduce, HuggingFace's AllReduceEP) rather than
/// the outputs gathered.
void PlanBuilder::annotateCombine(Value value, int64_t dim, bool onExpertAxis) {
  // The experts split along the plan's axis, or along the expert axis.
  auto split = [&](int64_t d) {
    return onExpertAxis ? Layout{std::nullopt, false, d} : Layout{d};
  };
  for (int depth = 0; depth < 8; ++depth) {
    OpOperand *next = nullptr;
    for (OpOperand &use : value.getUses())
      if (isa<linalg::LinalgOp, tensor::CollapseShapeOp>(use.getOwner()) &&
          !next)
        next = &use;
    if (!next) {
      // A gather within each expert (the capacity export's combine): a
      // generic whose body reads the experts' outputs at the index of one
      // of its parallel loops along the expert dimension computes each
      // rank's experts' part along that loop.
      for (OpOperand &use : value.getUses()) {
        auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
        auto holder = extract
                          ? dyn_cast<linalg::GenericOp>(extract->getParentOp())
                          : linalg::GenericOp();
        if (!holder || holder->getNumResults() != 1 ||
            dim >= static_cast<int64_t>(extract.getIndices().size()))
          continue;
        auto index = extract.getIndices()[dim].getDefiningOp<linalg::IndexOp>();
        if (!index || index->getParentOp() != holder ||
            holder.getIteratorTypesArray()[index.getDim()] !=
                utils::IteratorType::parallel)
          continue;
        AffineMap out = holder.getIndexingMapMatchingResult(
            cast<OpResult>(holder->getResult(0)));
        for (auto [j, e] : llvm::enumerate(out.getResults()))
          if (auto d = dyn_cast<AffineDimExpr>(e);
              d && d.getPosition() == index.getDim()) {
            value = annotateResult(holder->getResult(0),
                                   split(static_cast<int64_t>(j)));
            dim = j;
            next = &use;
          }
        if (next)
          break;
      }
      if (!next)
        return;
      continue;
    }
    if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(next->getOwner())) {
      // Split blocks of the experts stay blocks of a group they lead.
      std::optional<int64_t> outDim;
      for (auto [j, group] :
           llvm::enumerate(collapse.getReassociationIndices()))
        if (group.front() == dim)
          outDim = j;
      if (!outDim)
        return;
      value = collapse.getResult();
      dim = *outDim;
      continue;
    }
    auto linalgOp = cast<linalg::LinalgOp>(next->getOwner());
    if (!linalgOp.isDpsInput(next) || linalgOp->getNumResults() != 1)
      return;
    auto expr = dyn_cast<AffineDimExpr>(
        linalgOp.getMatchingIndexingMap(next).getResult(dim));
    if (!expr)
      return;
    unsigned loop = expr.getPosition();
    if (linalgOp.getIteratorTypesArray()[loop] ==
        utils::IteratorType::reduction) {
      annotateOperand(linalgOp, next->getOperandNumber(), split(dim));
      return;
    }
    if (!isa<linalg::GenericOp>(linalgOp))
      return;
    AffineMap out = linalgOp.getIndexingMapMatchingResult(
        cast<OpResult>(linalgOp->getResult(0)));
    std::optional<int64_t> outDim;
    for (auto [j, e] : llvm::enumerate(out.getResults()))
      if (auto d = dyn_cast<AffineDimExpr>(e); d && d.getPosition() == loop)
        outDim = j;
    if (!outDim)
      return;
    value = linalgOp->getResult(0);
    dim = *outDim;
  }
}

/// experts (HuggingFace's grouped_gemm): whole experts on each rank, the
/// weight split along its leading (expert) dimension. The contractions it
/// reaches (through views that keep the expert dimension: transposes,
/// reshapes and slices of other dimensions, casts) compute each rank's
/// experts: their other operand and their result are split along the same
/// expert loop, which leaves the combine over experts a partial sum.
LogicalResult PlanBuilder::planExperts(BlockArgument arg) {
  auto type = cast<RankedTensorType>(arg.getType());
  if (type.getRank() < 2)
    return emitError(arg.getLoc())
           << nameOf(arg) << " is split by experts but has rank "
           << type.getRank() << "; expert weights are [experts, ...]";
  SmallVector<std::pair<Value, int64_t>> worklist{{arg, 0}};
  bool reached = false;
  while (!worklist.empty()) {
    auto [value, dim] = worklist.pop_back_val();
    for (OpOperand &operand : value.getUses()) {
      Operation *user = operand.getOwner();
      if (auto transpose = dyn_cast<linalg::TransposeOp>(user)) {
        if (operand.get() != transpose.getInput())
          continue;
        for (auto [j, p] : llvm::enumerate(transpose.getPermutation()))
          if (p == dim)
            worklist.push_back({transpose->getResult(0), j});
        continue;
      }
      if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user)) {
        ReassociationIndices group = expand.getReassociationIndices()[dim];
        if (group.size() == 1)
          worklist.push_back({expand.getResult(), group.front()});
        continue;
      }
      if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(user)) {
        // The expert dimension with only unit dimensions before it in its
        // group (a part taken out of [experts, 1, ...]).
        RankedTensorType src = collapse.getSrcType();
        for (auto [index, group] :
             llvm::enumerate(collapse.getReassociationIndices()))
          if (llvm::is_contained(group, dim) &&
              llvm::all_of(group,
                           [&](int64_t d) {
                             return d == dim || src.getDimSize(d) == 1 ||
                                    d > dim;
                           }) &&
              llvm::all_of(group, [&](int64_t d) {
                return d <= dim || src.getDimSize(d) == 1;
              }))
            worklist.push_back({collapse.getResult(), int64_t(index)});
        continue;
      }
      if (auto slice = dyn_cast<tensor::ExtractSliceOp>(user)) {
        llvm::SmallBitVector dropped = slice.getDroppedDims();
        if (dropped.test(dim) || slice.getStaticSizes()[dim] !=
                                     slice.getSourceType().getDimSize(dim))
          continue;
        int64_t kept = 0;
        for (int64_t d = 0; d < dim; ++d)
          kept += !dropped.test(d);
        worklist.push_back({slice.getResult(), kept});
        continue;
      }
      auto linalgOp = dyn_cast<linalg::LinalgOp>(user);
      if (!linalgOp || !linalgOp.isDpsInput(&operand))
        continue;
      auto loopAt = [&](AffineMap map, int64_t d) -> std::optional<unsigned> {
        if (auto e = dyn_cast<AffineDimExpr>(map.getResult(d)))
          return e.getPosition();
        return std::nullopt;
      };
      std::optional<unsigned> loop =
          loopAt(linalgOp.getMatchingIndexingMap(&operand), dim);
      if (!loop)
        continue;
      auto positionIn = [&](AffineMap m) -> std::optional<int64_t> {
        for (auto [j, expr] : llvm::enumerate(m.getResults()))
          if (auto d = dyn_cast<AffineDimExpr>(expr);
              d && d.getPosition() == *loop)
            return j;
        return std::nullopt;
      };
      if (!linalg::isaContractionOpInterface(linalgOp)) {
        std::optional<int64_t> out;
        if (linalgOp->getNumResults() == 1)
          out = positionIn(linalgOp.getIndexingMapMatchingResult(
              cast<OpResult>(linalgOp->getResult(0))));
        if (!out)
          continue;
        // Elementwise work on the weight alone (an upcast): follow it.
        if (linalgOp.getNumDpsInputs() == 1) {
          worklist.push_back({linalgOp->getResult(0), *out});
          continue;
        }
        // Elementwise work with other operands that keeps the expert
        // dimension (gpt-oss's expert biases added to each expert's
        // product): its result holds this rank's experts too.
        if (linalgOp.getNumParallelLoops() == linalgOp.getNumLoops()) {
          annotateResult(linalgOp->getResult(0), Layout{*out});
          reached = true;
        }
        continue;
      }
      // A contraction over the experts' batch loop.
      unsigned other = operand.getOperandNumber() == 0 ? 1 : 0;
      std::optional<int64_t> otherDim = positionIn(
          linalgOp.getMatchingIndexingMap(&linalgOp->getOpOperand(other)));
      std::optional<int64_t> resultDim =
          positionIn(linalgOp.getIndexingMapMatchingResult(
              cast<OpResult>(linalgOp->getResult(0))));
      if (!otherDim || !resultDim)
        return emitError(user->getLoc())
               << nameOf(arg)
               << " is split by experts, but this contraction does not "
                  "keep the expert dimension of its operands and result";
      dispatchByAllToAll(linalgOp, other, *otherDim);
      annotateOperand(linalgOp, other, Layout{otherDim});
      Value split = annotateResult(linalgOp->getResult(0), Layout{resultDim});
      annotateCombine(split, *resultDim);
      reached = true;
    }
  }
  if (!reached)
    return emitError(arg.getLoc())
           << nameOf(arg)
           << " is split by experts but reaches no contraction that keeps "
              "the expert dimension (a batch matmul over experts)";
  annotateArgument(arg, Layout{0});
  return success();
}

/// Under sequence parallelism, the rows that operand `operand` of the
/// expert contraction `op` reads (split by experts along `expertDim`)
/// that arrive as [groups, experts, capacity, ...] transposed to
/// [experts, groups, ...] and collapsed to [experts, groups x capacity,
/// ...] (Braid's export of HuggingFace experts with a capacity per rank's
/// tokens) were computed on each rank's tokens: the groups split like the
/// tokens, the experts like the weights. The transpose's input is
/// annotated as computed, split along the groups, and read split along
/// the experts, so that partitioning reshards it there, by one all-to-all
/// (the dispatch), where propagation would otherwise meet both splits in
/// the transpose and fail, or gather every token to every rank.
void PlanBuilder::dispatchByAllToAll(linalg::LinalgOp op, unsigned operand,
                                     int64_t expertDim) {
  Value rows = op->getOperand(operand);
  auto collapse = rows.getDefiningOp<tensor::CollapseShapeOp>();
  if (!sequenceTokens || !collapse)
    return;
  // The operand's rows: the dimension, other than the experts', of a
  // parallel loop that the result keeps.
  AffineMap map = op.getMatchingIndexingMap(&op->getOpOperand(operand));
  AffineMap resultMap =
      op.getIndexingMapMatchingResult(cast<OpResult>(op->getResult(0)));
  std::optional<int64_t> rowsDim;
  for (auto [d, expr] : llvm::enumerate(map.getResults())) {
    auto loop = dyn_cast<AffineDimExpr>(expr);
    if (static_cast<int64_t>(d) == expertDim || !loop || rowsDim)
      continue;
    if (op.getIteratorTypesArray()[loop.getPosition()] ==
            utils::IteratorType::parallel &&
        resultMap.getResultPosition(loop))
      rowsDim = d;
  }
  SmallVector<ReassociationIndices> groups = collapse.getReassociationIndices();
  if (!rowsDim || expertDim >= static_cast<int64_t>(groups.size()) ||
      groups[expertDim].size() != 1)
    return;
  // The token groups: the outermost dimension of more than one element
  // that the rows collapse.
  RankedTensorType collapsed = collapse.getSrcType();
  const ReassociationIndices &rowGroup = groups[*rowsDim];
  const int64_t *groupDim = llvm::find_if(
      rowGroup, [&](int64_t d) { return collapsed.getDimSize(d) != 1; });
  auto transpose = collapse.getSrc().getDefiningOp<linalg::TransposeOp>();
  if (groupDim == rowGroup.end() || !transpose ||
      dispatched.contains(transpose))
    return;
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t inExperts = perm[groups[expertDim].front()];
  int64_t inGroups = perm[*groupDim];
  auto type = cast<RankedTensorType>(transpose.getInput().getType());
  if (ShapedType::isDynamic(ranks) || type.isDynamicDim(inGroups) ||
      type.getDimSize(inGroups) % ranks != 0 || type.isDynamicDim(inExperts) ||
      type.getDimSize(inExperts) % ranks != 0)
    return;
  dispatched.insert(transpose);
  annotateResult(transpose.getInput(), Layout{inGroups});
  annotateOperand(transpose, 0, Layout{inExperts});
}

/// packed_colwise (HuggingFace's layout of [gate; up] projections): the
/// output features, dimension rank - 2, hold parts stacked one after the
/// other, and each part is split separately, so that a rank holds
/// [gate_r; up_r]. No block split of that dimension says so; the parts
/// must be taken apart first (an expand_shape into [parts, features],
/// which Braid's dense experts write), and the expand is marked
/// `braid.packed`: its sharding model splits the features of each part.
LogicalResult PlanBuilder::planPacked(BlockArgument arg) {
  auto type = cast<RankedTensorType>(arg.getType());
  int64_t dim = type.getRank() - 2;
  if (dim < 0)
    return emitError(arg.getLoc())
           << nameOf(arg) << " is packed_colwise but has rank "
           << type.getRank();
  SmallVector<tensor::ExpandShapeOp> expands;
  for (Operation *user : arg.getUsers()) {
    auto expand = dyn_cast<tensor::ExpandShapeOp>(user);
    ReassociationIndices group;
    if (expand)
      group = expand.getReassociationIndices()[dim];
    if (!expand || group.size() != 2 ||
        expand.getResultType().getDimSize(group[0]) < 2)
      return emitError(user->getLoc())
             << nameOf(arg)
             << " is packed_colwise but is used whole here: split the "
                "packed dimension into its parts first (tensor.expand_shape "
                "to [parts, features]), as Braid's export of HuggingFace "
                "experts does, or use colwise_gather_output";
    expands.push_back(expand);
  }
  for (tensor::ExpandShapeOp expand : expands)
    expand->setAttr("braid.packed", UnitAttr::get(expand.getContext()));
  annotateArgument(arg, Layout{dim, false, expertsOf(arg)});
  return success();
}

/// Follows a sequence-split contraction result through reshapes and
/// elementwise ops to the residual add it feeds (an elementwise op with two
/// operands of its result's shape) and annotates that sum sequence-split.
/// Upstream's propagation runs backward first: without this, the replicated
/// activation the next colwise contraction takes floods back through its
/// norm into the residual stream, which is then gathered and kept whole.
void PlanBuilder::annotateResidual(Value value) {
  Value current = value;
  while (current.hasOneUse()) {
    Operation *user = *current.getUsers().begin();
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user)) {
      current = user->getResult(0);
      continue;
    }
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || generic->getNumResults() != 1 ||
        generic.getNumParallelLoops() != generic.getNumLoops())
      return;
    Value result = generic->getResult(0);
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type || type.getRank() < 2)
      return;
    unsigned full = llvm::count_if(generic.getDpsInputs(), [&](Value input) {
      return input.getType() == type;
    });
    if (full >= 2) {
      annotateResult(result, Layout{type.getRank() - 2, dataAxis.has_value()});
      return;
    }
    current = result;
  }
}

LogicalResult PlanBuilder::planWeight(BlockArgument arg, StringRef style) {
  auto type = cast<RankedTensorType>(arg.getType());
  Location loc = arg.getLoc();
  SmallVector<Use> uses;
  if (failed(collectUses(arg, uses)))
    return failure();
  if (uses.empty()) {
    // A bias: only colwise splits it (rowwise layers add theirs after the
    // reduction, replicated).
    if (style == "colwise" && type.getRank() == 1) {
      annotateArgument(arg, Layout{0});
      return success();
    }
    return emitError(loc) << nameOf(arg) << " is " << style
                          << " but reaches no contraction (linalg.matmul and "
                             "the like, through linalg.transpose)"
                          << (type.getRank() == 1
                                  ? "; a rowwise layer's bias is replicate"
                                  : "");
  }

  if (backward)
    llvm::stable_sort(uses, [](const Use &a, const Use &b) {
      return a.op->getBlock() == b.op->getBlock() &&
             a.op->isBeforeInBlock(b.op);
    });
  std::optional<int64_t> argDim;
  for (Use &use : uses) {
    // In a function with its backward, a contraction after the forward's
    // is a gradient's when it reads the weight along another role: the
    // dimension the plan split is then a reduction (a colwise weight's
    // input gradient, partial sums reduced) or an output feature (a
    // rowwise weight's, split like the forward's activation).
    bool gradient = backward && argDim.has_value();
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(use.op);
    if (failed(dims) && gradient)
      continue;
    if (failed(dims))
      return emitError(use.op->getLoc())
             << "cannot tell the dimensions of this contraction apart";
    AffineMap map =
        use.op.getMatchingIndexingMap(&use.op->getOpOperand(use.operand));
    auto isK = [&](unsigned pos) { return llvm::is_contained(dims->k, pos); };
    auto isMN = [&](unsigned pos) {
      return llvm::is_contained(dims->m, pos) ||
             llvm::is_contained(dims->n, pos);
    };
    // The loop dimension to split: an output feature (m or n) for colwise,
    // the reduction (k) for rowwise.
    std::optional<unsigned> loopDim, operandDim;
    StringRef role = style;
    for (auto [j, expr] : llvm::enumerate(map.getResults())) {
      auto d = dyn_cast<AffineDimExpr>(expr);
      if (!d)
        continue;
      unsigned pos = d.getPosition();
      if (gradient) {
        if (use.permutation[j] == *argDim && (isK(pos) || isMN(pos))) {
          loopDim = pos;
          operandDim = j;
          role = isK(pos) ? "rowwise" : "colwise";
        }
        continue;
      }
      if ((style == "rowwise" && isK(pos)) ||
          (style != "rowwise" && isMN(pos))) {
        if (loopDim)
          return emitError(use.op->getLoc())
                 << nameOf(arg) << " is " << style
                 << " but has several candidate "
                 << "dimensions in this contraction";
        loopDim = pos;
        operandDim = j;
      }
    }
    if (!loopDim && gradient)
      continue;
    if (!loopDim)
      return emitError(use.op->getLoc())
             << nameOf(arg) << " is " << style
             << " but this contraction gives it no "
             << (style == "rowwise" ? "reduction" : "output-feature")
             << " dimension";
    int64_t dim = use.permutation[*operandDim];
    if (argDim && *argDim != dim)
      return emitError(loc) << nameOf(arg)
                            << " feeds contractions that split it along "
                               "different dimensions (a function that holds "
                               "its backward is marked braid.backward)";
    argDim = dim;

    // The other operand (the activation) and the result.
    unsigned other = use.operand == 0 ? 1 : 0;
    AffineMap otherMap =
        use.op.getMatchingIndexingMap(&use.op->getOpOperand(other));
    AffineMap resultMap = use.op.getIndexingMapMatchingResult(
        cast<OpResult>(use.op->getResult(0)));
    auto positionIn = [&](AffineMap m) -> std::optional<int64_t> {
      for (auto [j, expr] : llvm::enumerate(m.getResults()))
        if (auto d = dyn_cast<AffineDimExpr>(expr))
          if (d.getPosition() == *loopDim)
            return j;
      return std::nullopt;
    };
    bool batch = dataAxis.has_value();
    // An expert weight's experts: the positions of its expert loop in the
    // other operand and the result, split along the expert axis.
    std::optional<int64_t> otherExperts, resultExperts;
    if (expertsOf(arg)) {
      std::optional<unsigned> expertLoop;
      for (auto [j, expr] : llvm::enumerate(map.getResults()))
        if (auto d = dyn_cast<AffineDimExpr>(expr);
            d && use.permutation[j] == 0)
          expertLoop = d.getPosition();
      auto at = [&](AffineMap m) -> std::optional<int64_t> {
        for (auto [j, expr] : llvm::enumerate(m.getResults()))
          if (auto d = dyn_cast<AffineDimExpr>(expr);
              d && expertLoop && d.getPosition() == *expertLoop)
            return j;
        return std::nullopt;
      };
      otherExperts = at(otherMap);
      resultExperts = at(resultMap);
      if (!otherExperts || !resultExperts)
        return emitError(use.op->getLoc())
               << nameOf(arg)
               << " holds experts split along the expert axis, but this "
                  "contraction does not keep the expert dimension of its "
                  "operands and result (a batch matmul over experts)";
    }
    if (role != "rowwise") {
      annotateOperand(use.op, other, Layout{std::nullopt, batch, otherExperts});
      Value split =
          annotateResult(use.op->getResult(0),
                         Layout{positionIn(resultMap), batch, resultExperts});
      // colwise_gather (HuggingFace's colwise_gather_output): the split
      // output is all-gathered for what follows.
      if (role == "colwise_gather")
        annotateResult(split, Layout{std::nullopt, batch, resultExperts});
    } else if (resultExperts) {
      // Each rank's experts' partial sums: reduced over the plan's axis
      // here (braid-sink-all-reduce moves that sum after the combine), and
      // the combine over the experts leaves partial sums over the expert
      // axis.
      annotateOperand(use.op, other,
                      Layout{positionIn(otherMap), batch, otherExperts});
      Value reduced = annotateResult(
          use.op->getResult(0), Layout{std::nullopt, batch, resultExperts});
      annotateCombine(reduced, *resultExperts, /*onExpertAxis=*/true);
    } else {
      // The partial sums are reduced to a replicated result. Under
      // sequence parallelism the next sequence-split value slices it, which
      // braid-import-shard turns into a reduce-scatter (upstream cannot
      // partition a contraction whose result is split along a dimension its
      // operands are not).
      annotateOperand(use.op, other, Layout{positionIn(otherMap), batch});
      Value reduced =
          annotateResult(use.op->getResult(0), Layout{std::nullopt, batch});
      // Under sequence parallelism over one sequence, the result's token
      // dimension is the sequence: split it here, so that the reduction is
      // a reduce-scatter whatever follows (the residual stream between two
      // decoder layers stays split; left replicated, propagation gathers the
      // residual to meet it and the next layer runs tensor parallel).
      auto resultType = dyn_cast<RankedTensorType>(reduced.getType());
      if (sequenceTokens && resultType && resultType.getRank() >= 2)
        annotateResidual(annotateResult(reduced,
                                        Layout{resultType.getRank() - 2, batch},
                                        /*forUsers=*/true));
    }
  }
  annotateArgument(arg, Layout{argDim, false, expertsOf(arg)});
  return success();
}

} // namespace

/// The dimension the "sequence" layout splits: the last of token ids,
/// positions and masks (integers or booleans of rank 1 or 2: [batch, seq]),
/// the second to last of anything else ([batch, seq, hidden]); -1 when the
/// tensor has too few dimensions.
static int64_t sequenceDim(RankedTensorType type) {
  bool tokens = type.getElementType().isIntOrIndex() && type.getRank() <= 2;
  return type.getRank() - (tokens ? 1 : 2);
}

LogicalResult PlanBuilder::run() {
  auto styleOf = [](Attribute attr) -> std::optional<StringRef> {
    if (auto text = dyn_cast_or_null<StringAttr>(attr))
      return text.getValue();
    return std::nullopt;
  };
  auto checkStyle = [&](Location loc, Attribute attr,
                        bool isResult) -> FailureOr<StringRef> {
    std::optional<StringRef> style = styleOf(attr);
    bool known =
        style &&
        (*style == "replicate" || *style == "sequence" ||
         (!isResult && (*style == "colwise" || *style == "rowwise" ||
                        *style == "colwise_gather" ||
                        *style == "packed_colwise" || *style == "experts")));
    if (!known)
      return emitError(loc)
             << kPlanAttr << " must be a string: "
             << (isResult ? "replicate or sequence"
                          : "colwise, colwise_gather, packed_colwise, experts, "
                            "rowwise, replicate or sequence")
             << ", got " << attr;
    return *style;
  };

  for (BlockArgument arg : func.getArguments()) {
    std::optional<StringRef> style =
        styleOf(func.getArgAttr(arg.getArgNumber(), kPlanAttr));
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!style || *style != "sequence" || !type || sequenceDim(type) < 0)
      continue;
    // One sequence per rank: a batch split over the data axis counts as
    // one sequence where each rank holds one.
    int64_t sequences = 1;
    for (int64_t size : type.getShape().take_front(sequenceDim(type)))
      sequences *= size;
    if (dataAxis && func.getArgAttr(arg.getArgNumber(), kBatchAttr))
      sequences /= dataRanks;
    bool single = sequences == 1;
    if (!single) {
      sequenceTokens = false;
      break;
    }
    sequenceTokens = true;
  }

  for (BlockArgument arg : func.getArguments()) {
    Attribute attr = func.getArgAttr(arg.getArgNumber(), kPlanAttr);
    if (!attr && func.getArgAttr(arg.getArgNumber(), kExpertsAttr))
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kExpertsAttr << " but has no "
             << kPlanAttr << " (the style that splits each expert's features)";
    if (!attr)
      continue;
    FailureOr<StringRef> style = checkStyle(arg.getLoc(), attr, false);
    if (failed(style))
      return failure();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type)
      return emitError(arg.getLoc())
             << nameOf(arg) << " has a plan but type " << arg.getType()
             << "; plans apply to ranked tensors";
    bool batch =
        static_cast<bool>(func.getArgAttr(arg.getArgNumber(), kBatchAttr));
    if (batch && !dataAxis)
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kBatchAttr
             << " but the function has no " << kDataAxisAttr;
    if (batch && *style != "replicate" && *style != "sequence")
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kBatchAttr << " but is "
             << *style << "; the batch of activations (replicate or "
             << "sequence) is split, weights are replicated over the data "
             << "axis";
    bool experts =
        static_cast<bool>(func.getArgAttr(arg.getArgNumber(), kExpertsAttr));
    if (experts && !expertAxis)
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kExpertsAttr
             << " but the function has no " << kExpertAxisAttr;
    if (experts && *style != "colwise" && *style != "rowwise" &&
        *style != "packed_colwise")
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kExpertsAttr << " but is "
             << *style
             << "; on a grid with an expert axis the plan splits each "
                "expert's features (colwise, packed_colwise or rowwise) and "
                "the expert axis the experts";
    if (experts && type.getRank() < 2)
      return emitError(arg.getLoc())
             << nameOf(arg) << " is marked " << kExpertsAttr << " but has rank "
             << type.getRank() << "; expert weights are [experts, ...]";
    if (expertAxis && *style == "experts")
      return emitError(arg.getLoc())
             << nameOf(arg)
             << " is split by experts along the plan's axis on a grid with "
                "an expert axis; give a tensor-parallel plan there, whose "
                "expert weights the expert axis splits";
    if (dataAxis && *style == "experts")
      return emitError(arg.getLoc())
             << nameOf(arg)
             << " is split by experts on a grid with a data axis, which "
                "the plan does not support (the experts' tokens are not "
                "batch-major)";
    if (*style == "replicate") {
      annotateArgument(arg, Layout{std::nullopt, batch}, /*forUsers=*/false);
    } else if (*style == "experts") {
      // Whole experts on each rank: the leading (expert) dimension.
      if (type.getRank() < 2)
        return emitError(arg.getLoc())
               << nameOf(arg) << " is split by experts but has rank "
               << type.getRank() << "; expert weights are [experts, ...]";
      if (failed(planExperts(arg)))
        return failure();
    } else if (*style == "packed_colwise") {
      if (failed(planPacked(arg)))
        return failure();
    } else if (*style == "sequence") {
      if (sequenceDim(type) < 0)
        return emitError(arg.getLoc())
               << nameOf(arg) << " is sequence-split but has rank "
               << type.getRank()
               << "; the sequence dimension is the second to last (the last "
                  "of integer ids and masks of rank 1 or 2)";
      annotateArgument(arg, Layout{sequenceDim(type), batch},
                       /*forUsers=*/false);
    } else if (failed(planWeight(arg, *style))) {
      return failure();
    }
    func.removeArgAttr(arg.getArgNumber(), kPlanAttr);
    func.removeArgAttr(arg.getArgNumber(), kBatchAttr);
    func.removeArgAttr(arg.getArgNumber(), kExpertsAttr);
  }

  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    Attribute attr = func.getResultAttr(i, kPlanAttr);
    if (!attr)
      continue;
    FailureOr<StringRef> style = checkStyle(func.getLoc(), attr, true);
    if (failed(style))
      return failure();
    auto type = dyn_cast<RankedTensorType>(func.getResultTypes()[i]);
    if (!type || (*style == "sequence" && sequenceDim(type) < 0))
      return emitError(func.getLoc())
             << "result #" << i << " cannot be " << *style;
    Layout layout;
    if (*style == "sequence")
      layout.dim = sequenceDim(type);
    layout.batch = static_cast<bool>(func.getResultAttr(i, kBatchAttr));
    if (layout.batch && !dataAxis)
      return emitError(func.getLoc())
             << "result #" << i << " is marked " << kBatchAttr
             << " but the function has no " << kDataAxisAttr;
    for (auto ret : llvm::to_vector(func.getOps<func::ReturnOp>())) {
      OpBuilder b(ret);
      Value s = sharding(ret.getLoc(), layout, b);
      auto annotated =
          shard::ShardOp::create(b, ret.getLoc(), ret.getOperand(i), s);
      ret->setOperand(i, annotated.getResult());
    }
    func.removeResultAttr(i, StringAttr::get(func.getContext(), kPlanAttr));
    func.removeResultAttr(i, StringAttr::get(func.getContext(), kBatchAttr));
  }

  // Results laid out like an argument (a parameter's gradient like the
  // parameter): the argument's own annotation.
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i) {
    auto index = func.getResultAttr(i, kLikeAttr);
    if (!index)
      continue;
    auto number = dyn_cast<IntegerAttr>(index);
    if (!number || number.getInt() < 0 ||
        number.getInt() >= func.getNumArguments())
      return emitError(func.getLoc())
             << kLikeAttr << " of result #" << i
             << " must be an argument's number, got " << index;
    BlockArgument arg = func.getArgument(number.getInt());
    auto users = arg.getUsers();
    auto annotation = llvm::find_if(users, llvm::IsaPred<shard::ShardOp>);
    if (annotation == users.end())
      return emitError(func.getLoc()) << "result #" << i << " is sharded like "
                                      << nameOf(arg) << ", which has no plan";
    if (arg.getType() != func.getResultTypes()[i])
      return emitError(func.getLoc())
             << "result #" << i << " has type " << func.getResultTypes()[i]
             << " but is sharded like an argument of type " << arg.getType();
    Value sharding = cast<shard::ShardOp>(*annotation).getSharding();
    for (auto ret : llvm::to_vector(func.getOps<func::ReturnOp>())) {
      OpBuilder b(ret);
      auto annotated =
          shard::ShardOp::create(b, ret.getLoc(), ret.getOperand(i), sharding);
      ret->setOperand(i, annotated.getResult());
    }
    func.removeResultAttr(i, StringAttr::get(func.getContext(), kLikeAttr));
  }
  return success();
}

namespace {

struct ApplyParallelPlanPass
    : public braid::impl::ApplyParallelPlanBase<ApplyParallelPlanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (func.isExternal())
        continue;
      bool hasPlan = false;
      for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
        hasPlan |= static_cast<bool>(func.getArgAttr(i, kPlanAttr));
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
        hasPlan |= static_cast<bool>(func.getResultAttr(i, kPlanAttr)) ||
                   static_cast<bool>(func.getResultAttr(i, kLikeAttr));
      if (!hasPlan)
        continue;

      // The grid: braid.grid, or the module's only one.
      FlatSymbolRefAttr gridRef =
          func->getAttrOfType<FlatSymbolRefAttr>(kGridAttr);
      shard::GridOp grid;
      if (gridRef) {
        grid = module.lookupSymbol<shard::GridOp>(gridRef);
        if (!grid) {
          func.emitError() << kGridAttr << " names " << gridRef
                           << ", which is not a shard.grid";
          return signalPassFailure();
        }
      } else {
        auto grids = llvm::to_vector(module.getOps<shard::GridOp>());
        if (grids.size() != 1) {
          func.emitError() << "a parallel plan needs its grid: the module has "
                           << grids.size() << " shard.grid ops; name one with "
                           << kGridAttr << " = @name";
          return signalPassFailure();
        }
        grid = grids.front();
        gridRef = FlatSymbolRefAttr::get(grid.getSymNameAttr());
      }
      int64_t axis = 0;
      if (auto axisAttr = func->getAttrOfType<IntegerAttr>(kAxisAttr))
        axis = axisAttr.getInt();
      if (axis < 0 || axis >= grid.getRank()) {
        func.emitError() << kAxisAttr << " = " << axis << " is not an axis of "
                         << gridRef << " (rank " << grid.getRank() << ")";
        return signalPassFailure();
      }
      std::optional<int16_t> dataAxis;
      int64_t dataRanks = 1;
      if (Attribute attr = func->getAttr(kDataAxisAttr)) {
        auto data = dyn_cast<IntegerAttr>(attr);
        if (!data || data.getInt() < 0 || data.getInt() >= grid.getRank() ||
            data.getInt() == axis) {
          func.emitError() << kDataAxisAttr << " = " << attr
                           << " is not an axis of " << gridRef << " (rank "
                           << grid.getRank() << ") other than the plan's ("
                           << axis << ")";
          return signalPassFailure();
        }
        dataAxis = static_cast<int16_t>(data.getInt());
        dataRanks = grid.getShape()[*dataAxis];
        if (ShapedType::isDynamic(dataRanks) || dataRanks < 1) {
          func.emitError() << kDataAxisAttr << " names axis " << *dataAxis
                           << " of " << gridRef << ", which has no static size";
          return signalPassFailure();
        }
      }
      std::optional<int16_t> expertAxis;
      if (Attribute attr = func->getAttr(kExpertAxisAttr)) {
        auto experts = dyn_cast<IntegerAttr>(attr);
        if (!experts || experts.getInt() < 0 ||
            experts.getInt() >= grid.getRank() || experts.getInt() == axis ||
            (dataAxis && experts.getInt() == *dataAxis)) {
          func.emitError() << kExpertAxisAttr << " = " << attr
                           << " is not an axis of " << gridRef << " (rank "
                           << grid.getRank()
                           << ") other than the plan's and the data axis";
          return signalPassFailure();
        }
        expertAxis = static_cast<int16_t>(experts.getInt());
        if (dataAxis) {
          // The experts' batch matmuls would take the data axis on their
          // experts dimension (the leading one, where the batch is).
          func.emitError() << kExpertAxisAttr << " and " << kDataAxisAttr
                           << " together are not supported: the experts' "
                              "tokens are not batch-major";
          return signalPassFailure();
        }
      }
      bool backward = func->hasAttr(kBackwardAttr);
      if (expertAxis && backward) {
        func.emitError() << kExpertAxisAttr
                         << " on a function that holds its backward: expert "
                            "parallelism beside the plan is built for "
                            "inference only";
        return signalPassFailure();
      }
      PlanBuilder builder(func, gridRef, axis, grid.getShape()[axis], dataAxis,
                          dataRanks, expertAxis, backward);
      if (failed(builder.run()))
        return signalPassFailure();
      if ((dataAxis && backward) || builder.dispatches())
        func->setAttr(braid::kForwardFirstAttr,
                      UnitAttr::get(func.getContext()));
      func->removeAttr(kBackwardAttr);
      func->removeAttr(kGridAttr);
      func->removeAttr(kAxisAttr);
      func->removeAttr(kDataAxisAttr);
      func->removeAttr(kExpertAxisAttr);
      ++numPlannedFunctions;
    }
  }
};

} // namespace
