//===- ShardingModels.cpp - Sharding models for tensor reshapes & co -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Upstream `shard` has no sharding model for the tensor ops frontends emit
// around every contraction and attention: reshapes (3-D activations folded
// to 2-D for a matmul, hidden split into heads), slices and concatenations
// along unsplit dimensions (RoPE's halves, packed projections), pads. Its
// propagation stops at them ("sharding interface is not implemented"). These
// external models let a split pass through each of them whenever the split
// stays a block split on both sides, and otherwise ask for the dimension
// replicated, so that partitioning gathers before the op rather than
// computing on the wrong rows.
//
// Each model describes its op in one way: a space of "loops" (the dimensions
// of the finer-grained tensor) and, for each tensor operand and result, the
// loop each of its dimensions follows. A loop may be split when every tensor
// that holds it has a dimension following it, its size divides over the
// group, and the op does not cut it (a slice that starts inside it). The
// four ShardingInterface methods then work the same for every op; partition
// rebuilds the op with local shapes.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/ShardToDist/ShardingModels.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// How an op's tensors follow its loops.
struct LoopSpace {
  /// Loop sizes.
  SmallVector<int64_t> sizes;
  /// Per operand, then per result: for a tensor, the loop each dimension
  /// follows (nullopt: a dimension that never splits, such as a dropped
  /// unit dimension); empty for non-tensor values.
  SmallVector<SmallVector<std::optional<int64_t>>> follows;
  /// Loops the op cuts (a slice starting or ending inside them): never
  /// split.
  SmallVector<bool> cut;
  /// Per operand, then per result: the loops the tensor holds data of
  /// (whether or not a dimension follows them).
  SmallVector<SmallVector<bool>> holds;

  /// One loop per dimension of `shape`, of its size; `numValues` operands
  /// and results, none following a loop yet.
  void init(ArrayRef<int64_t> shape, unsigned numValues) {
    int64_t numLoops = shape.size();
    sizes.assign(shape.begin(), shape.end());
    cut.assign(numLoops, false);
    follows.assign(numValues, {});
    holds.assign(numValues, SmallVector<bool>(numLoops, false));
  }
  /// Value `v` has one dimension per loop, in order.
  void identity(unsigned v) {
    follows[v].clear();
    for (int64_t l = 0, e = sizes.size(); l < e; ++l) {
      follows[v].push_back(l);
      holds[v][l] = true;
    }
  }
};

/// Split axes per dimension of a sharding, padded to `rank`.
SmallVector<SmallVector<GridAxis>> splitAxesOf(const Sharding &sharding,
                                               int64_t rank) {
  SmallVector<SmallVector<GridAxis>> axes(rank);
  if (!sharding)
    return axes;
  for (auto [d, attr] : llvm::enumerate(sharding.getSplitAxes()))
    if (static_cast<int64_t>(d) < rank)
      axes[d] = llvm::to_vector(attr.asArrayRef());
  return axes;
}

Sharding makeSharding(FlatSymbolRefAttr grid,
                      SmallVector<SmallVector<GridAxis>> axes,
                      MLIRContext *context) {
  if (axes.empty())
    axes.emplace_back();
  removeTrailingEmptySubArray(axes);
  SmallVector<GridAxesAttr> attrs;
  for (auto &a : axes)
    attrs.push_back(GridAxesAttr::get(context, a));
  return Sharding::get(grid, attrs);
}

/// The common part of every model: the four propagation methods from a
/// LoopSpace, which `Derived::describe(op, space)` fills, and partition
/// through `Derived::rebuild`.
template <typename Derived, typename Op>
struct LoopSpaceModel : public ShardingInterface::ExternalModel<Derived, Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    LoopSpace space = spaceOf(op);
    return SmallVector<utils::IteratorType>(space.sizes.size(),
                                            utils::IteratorType::parallel);
  }

  /// The values of `op` in LoopSpace order: operands, then results.
  static SmallVector<Value> valuesOf(Operation *op) {
    SmallVector<Value> values(op->getOperands());
    llvm::append_range(values, op->getResults());
    return values;
  }

  static LoopSpace spaceOf(Operation *op) {
    LoopSpace space;
    Derived::describe(cast<Op>(op), space);
    return space;
  }

  /// Whether loop `l` may be split over `axes` of `grid`.
  static bool splittable(Operation *op, const LoopSpace &space, int64_t l,
                         FlatSymbolRefAttr grid, ArrayRef<GridAxis> axes) {
    if (space.cut[l])
      return false;
    for (auto [v, follows] : llvm::enumerate(space.follows)) {
      if (follows.empty() || !space.holds[v][l])
        continue;
      if (!llvm::is_contained(follows, std::optional<int64_t>(l)))
        return false;
    }
    auto gridOp = SymbolTable::lookupNearestSymbolFrom<GridOp>(op, grid);
    if (!gridOp)
      return false;
    int64_t group = collectiveProcessGroupSize(axes, gridOp);
    int64_t size = space.sizes[l];
    return !ShapedType::isDynamic(group) && !ShapedType::isDynamic(size) &&
           group > 0 && size % group == 0;
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    LoopSpace space = spaceOf(op);
    std::vector<Sharding> given(operandShardings.begin(),
                                operandShardings.end());
    given.insert(given.end(), resultShardings.begin(), resultShardings.end());
    FlatSymbolRefAttr grid;
    SmallVector<std::optional<SmallVector<GridAxis>>> loops(space.sizes.size());
    bool any = false;
    for (auto [v, sharding] : llvm::enumerate(given)) {
      if (!sharding || space.follows[v].empty())
        continue;
      // Halos and uneven shards are not block splits.
      if (!sharding.getStaticHaloSizes().empty() ||
          !sharding.getStaticShardedDimsOffsets().empty() ||
          !sharding.getDynamicHaloSizes().empty() ||
          !sharding.getDynamicShardedDimsOffsets().empty())
        return failure();
      if (grid && grid != sharding.getGridAttr())
        return failure();
      grid = sharding.getGridAttr();
      any = true;
      auto axes = splitAxesOf(sharding, space.follows[v].size());
      for (auto [d, dimAxes] : llvm::enumerate(axes)) {
        if (dimAxes.empty())
          continue;
        std::optional<int64_t> l = space.follows[v][d];
        // A split the op cannot keep: that tensor is resharded instead.
        if (!l || !splittable(op, space, *l, grid, dimAxes))
          continue;
        if (loops[*l] && *loops[*l] != dimAxes)
          return failure();
        loops[*l] = dimAxes;
      }
    }
    if (!any)
      return ShardingOption::makeEmpty();
    ShardingArray array;
    for (auto &axes : loops)
      array.push_back(axes ? *axes : SmallVector<GridAxis>());
    removeTrailingEmptySubArray(array);
    return ShardingOption(array, grid);
  }

  /// The sharding of value `v` (a tensor) under `option`.
  static Sharding shardingOf(Operation *op, const LoopSpace &space, unsigned v,
                             const ShardingOption &option) {
    SmallVector<SmallVector<GridAxis>> axes;
    for (std::optional<int64_t> l : space.follows[v]) {
      if (l && *l < static_cast<int64_t>(option.shardingArray.size()))
        axes.push_back(option.shardingArray[*l]);
      else
        axes.emplace_back();
    }
    return makeSharding(option.grid, axes, op->getContext());
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    LoopSpace space = spaceOf(op);
    std::vector<Sharding> result;
    for (auto [v, value] : llvm::enumerate(valuesOf(op))) {
      if (!isa<RankedTensorType>(value.getType())) {
        if (!value.getType().isIntOrIndexOrFloat())
          return failure();
        result.emplace_back();
        continue;
      }
      result.push_back(shardingOf(op, space, v, option));
    }
    return result;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    LoopSpace space = spaceOf(op);
    unsigned numOperands = op->getNumOperands();
    for (OpResult result : op->getResults())
      maybeInsertTargetShardingAnnotation(
          shardingOf(op, space, numOperands + result.getResultNumber(), option),
          result, b);
    for (OpOperand &operand : op->getOpOperands()) {
      if (!isa<RankedTensorType>(operand.get().getType()))
        continue;
      OpBuilder::InsertionGuard guard(b);
      maybeInsertSourceShardingAnnotation(
          shardingOf(op, space, operand.getOperandNumber(), option), operand,
          b);
    }
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    SmallVector<Type> localTypes;
    for (auto [result, sharding] :
         llvm::zip_equal(op->getResults(), resultShardings))
      localTypes.push_back(shardType(
          result.getType(),
          getGridOrNull(op, sharding.getGridAttr(), symbolTable), sharding));
    FailureOr<Operation *> local = Derived::rebuild(
        cast<Op>(op), partitionedOperands, localTypes, partitionMap, builder);
    if (failed(local))
      return failure();
    partitionMap.map(op->getResults(), (*local)->getResults());
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

/// expand_shape and collapse_shape: the loops are the dimensions of the
/// expanded tensor. A collapsed dimension follows the first loop of its
/// group that is not a unit dimension (the outermost one that varies), so
/// that hidden -> [heads, head_dim] splits heads, and [1, seq] -> seq splits
/// seq; an inner loop of a group ([batch, seq] -> tokens with batch > 1 and
/// seq split) is no block of the collapsed dimension and cannot split. An
/// expand marked braid.packed splits the innermost instead (packed parts).
template <typename Op> void describeReshape(Op op, LoopSpace &space) {
  RankedTensorType expanded = std::is_same_v<Op, tensor::ExpandShapeOp>
                                  ? op.getResultType()
                                  : op.getSrcType();
  int64_t loops = expanded.getRank();
  space.init(expanded.getShape(), op->getNumOperands() + 1);
  unsigned expandedValue =
      std::is_same_v<Op, tensor::ExpandShapeOp> ? op->getNumOperands() : 0;
  unsigned collapsedValue =
      std::is_same_v<Op, tensor::ExpandShapeOp> ? 0 : op->getNumOperands();
  space.identity(expandedValue);
  // braid.packed (braid-apply-parallel-plan's packed_colwise): a collapsed
  // dimension of parts stacked one after the other, each split separately,
  // follows the innermost dimension of its group (the features of each
  // part), not the outermost (the parts).
  bool packed = op->hasAttr("braid.packed");
  for (const ReassociationIndices &group : op.getReassociationIndices()) {
    std::optional<int64_t> lead;
    auto order = llvm::to_vector(group);
    if (packed)
      std::reverse(order.begin(), order.end());
    for (int64_t l : order)
      if (expanded.getDimSize(l) != 1) {
        lead = l;
        break;
      }
    if (!lead && !group.empty())
      lead = group.front();
    space.follows[collapsedValue].push_back(lead);
    for (int64_t l : group)
      space.holds[collapsedValue][l] = true;
  }
}

/// expand_shape and collapse_shape, rebuilt with the local result type. An
/// expansion needs static local sizes (its output shape is not operands).
template <typename Op>
struct ReshapeModel : public LoopSpaceModel<ReshapeModel<Op>, Op> {
  static void describe(Op op, LoopSpace &space) { describeReshape(op, space); }
  static FailureOr<Operation *> rebuild(Op op, ArrayRef<Value> operands,
                                        ArrayRef<Type> types, IRMapping &,
                                        OpBuilder &builder) {
    auto type = cast<RankedTensorType>(types[0]);
    if (std::is_same_v<Op, tensor::ExpandShapeOp> && !type.hasStaticShape())
      return op.emitOpError()
             << "cannot be partitioned with dynamic sizes (" << type << ")";
    return Op::create(builder, op.getLoc(), type, operands[0],
                      op.getReassociationIndices())
        .getOperation();
  }
};

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

/// Whether a slice of `size` elements at `offset` (stride `stride`) covers
/// a dimension of `full` elements whole.
bool coversWhole(OpFoldResult offset, OpFoldResult size, OpFoldResult stride,
                 int64_t full) {
  std::optional<int64_t> o = getConstantIntValue(offset);
  std::optional<int64_t> s = getConstantIntValue(size);
  std::optional<int64_t> t = getConstantIntValue(stride);
  return o && s && t && *o == 0 && *t == 1 && *s == full &&
         !ShapedType::isDynamic(full);
}

/// extract_slice and insert_slice: the loops are the dimensions of the
/// whole tensor (the source of an extract, the destination of an insert);
/// the slice follows the ones it does not drop. A loop the slice does not
/// cover whole is cut: splitting it would move slice boundaries across
/// ranks (RoPE's halves along head_dim, a packed projection's parts), so
/// it stays whole.
template <typename Op>
void describeSlice(Op op, RankedTensorType whole, RankedTensorType slice,
                   unsigned wholeValue, unsigned sliceValue,
                   ArrayRef<unsigned> alsoWhole, LoopSpace &space) {
  int64_t loops = whole.getRank();
  space.init(whole.getShape(), op->getNumOperands() + op->getNumResults());
  space.identity(wholeValue);
  for (unsigned v : alsoWhole)
    space.identity(v);
  llvm::SmallBitVector dropped = op.getDroppedDims();
  SmallVector<OpFoldResult> offsets = op.getMixedOffsets();
  SmallVector<OpFoldResult> sizes = op.getMixedSizes();
  SmallVector<OpFoldResult> strides = op.getMixedStrides();
  for (int64_t l = 0; l < loops; ++l) {
    space.cut[l] =
        !coversWhole(offsets[l], sizes[l], strides[l], whole.getDimSize(l));
    space.holds[sliceValue][l] = true;
    if (!dropped.test(l))
      space.follows[sliceValue].push_back(l);
  }
  (void)slice;
}

/// The offsets, sizes and strides of `op` in the local program: dynamic
/// values through `map`, and the loops whose local size differs from the
/// global one (split loops, which the slice covers whole) at the local size.
struct LocalSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
};
template <typename Op>
LocalSlice localSlice(Op op, RankedTensorType globalWhole,
                      RankedTensorType localWhole, IRMapping &map,
                      OpBuilder &builder) {
  LocalSlice local{op.getMixedOffsets(), op.getMixedSizes(),
                   op.getMixedStrides()};
  for (int64_t l = 0; l < globalWhole.getRank(); ++l)
    if (globalWhole.getDimSize(l) != localWhole.getDimSize(l))
      local.sizes[l] = builder.getIndexAttr(localWhole.getDimSize(l));
  for (auto *list : {&local.offsets, &local.sizes, &local.strides})
    for (OpFoldResult &ofr : *list)
      if (auto value = dyn_cast<Value>(ofr))
        ofr = map.lookupOrDefault(value);
  return local;
}

struct ExtractSliceModel
    : public LoopSpaceModel<ExtractSliceModel, tensor::ExtractSliceOp> {
  static void describe(tensor::ExtractSliceOp op, LoopSpace &space) {
    // Operand 0 is the source; index operands (dynamic offsets, sizes,
    // strides) have no tensor dimensions.
    describeSlice(op, op.getSourceType(), op.getResultType(), 0,
                  op->getNumOperands(), {}, space);
  }
  static FailureOr<Operation *> rebuild(tensor::ExtractSliceOp op,
                                        ArrayRef<Value> operands,
                                        ArrayRef<Type> types, IRMapping &map,
                                        OpBuilder &builder) {
    LocalSlice local =
        localSlice(op, op.getSourceType(),
                   cast<RankedTensorType>(operands[0].getType()), map, builder);
    return tensor::ExtractSliceOp::create(
               builder, op.getLoc(), cast<RankedTensorType>(types[0]),
               operands[0], local.offsets, local.sizes, local.strides)
        .getOperation();
  }
};

struct InsertSliceModel
    : public LoopSpaceModel<InsertSliceModel, tensor::InsertSliceOp> {
  static void describe(tensor::InsertSliceOp op, LoopSpace &space) {
    // Operands: source (the slice), dest (the whole), then indices; the
    // result is the whole.
    describeSlice(op, op.getDestType(), op.getSourceType(), 1, 0,
                  {op->getNumOperands()}, space);
  }
  static FailureOr<Operation *> rebuild(tensor::InsertSliceOp op,
                                        ArrayRef<Value> operands,
                                        ArrayRef<Type> types, IRMapping &map,
                                        OpBuilder &builder) {
    LocalSlice local =
        localSlice(op, op.getDestType(),
                   cast<RankedTensorType>(operands[1].getType()), map, builder);
    return tensor::InsertSliceOp::create(builder, op.getLoc(), operands[0],
                                         operands[1], local.offsets,
                                         local.sizes, local.strides)
        .getOperation();
  }
};

//===----------------------------------------------------------------------===//
// Concatenation and padding
//===----------------------------------------------------------------------===//

/// concat: every input and the result follow the loops one to one; the
/// concatenated dimension is cut.
struct ConcatModel : public LoopSpaceModel<ConcatModel, tensor::ConcatOp> {
  static void describe(tensor::ConcatOp op, LoopSpace &space) {
    space.init(op.getResultType().getShape(), op->getNumOperands() + 1);
    for (unsigned v = 0; v <= op->getNumOperands(); ++v)
      space.identity(v);
    space.cut[op.getDim()] = true;
  }
  static FailureOr<Operation *> rebuild(tensor::ConcatOp op,
                                        ArrayRef<Value> operands,
                                        ArrayRef<Type> types, IRMapping &,
                                        OpBuilder &builder) {
    return tensor::ConcatOp::create(builder, op.getLoc(), types[0], op.getDim(),
                                    operands)
        .getOperation();
  }
};

/// pad: source and result follow the loops; a padded dimension is cut.
struct PadModel : public LoopSpaceModel<PadModel, tensor::PadOp> {
  static void describe(tensor::PadOp op, LoopSpace &space) {
    RankedTensorType type = op.getResultType();
    space.init(type.getShape(), op->getNumOperands() + 1);
    space.identity(0);
    space.identity(op->getNumOperands());
    for (int64_t l = 0; l < type.getRank(); ++l) {
      std::optional<int64_t> low = getConstantIntValue(op.getMixedLowPad()[l]);
      std::optional<int64_t> high =
          getConstantIntValue(op.getMixedHighPad()[l]);
      space.cut[l] = !low || !high || *low != 0 || *high != 0;
    }
  }
  static FailureOr<Operation *> rebuild(tensor::PadOp op, ArrayRef<Value>,
                                        ArrayRef<Type> types, IRMapping &map,
                                        OpBuilder &builder) {
    // Split dimensions have no padding: the op is the same on local shapes.
    Operation *local = builder.clone(*op, map);
    local->getResult(0).setType(types[0]);
    return local;
  }
};

} // namespace

void braid::registerShardingModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, tensor::TensorDialect *) {
    tensor::ExpandShapeOp::attachInterface<ReshapeModel<tensor::ExpandShapeOp>>(
        *context);
    tensor::CollapseShapeOp::attachInterface<
        ReshapeModel<tensor::CollapseShapeOp>>(*context);
    tensor::ExtractSliceOp::attachInterface<ExtractSliceModel>(*context);
    tensor::InsertSliceOp::attachInterface<InsertSliceModel>(*context);
    tensor::ConcatOp::attachInterface<ConcatModel>(*context);
    tensor::PadOp::attachInterface<PadModel>(*context);
  });
}
