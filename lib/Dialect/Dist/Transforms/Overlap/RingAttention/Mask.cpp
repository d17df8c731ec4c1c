//===- Mask.cpp - A causal mask as a comparison of indices -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A mask fills whole blocks of scores when it is an affine comparison of
// the score op's indices (and index values defined outside it, such as the
// rank's position): the ring then skips a piece of keys where the mask
// holds at every point. HF's mask, a tensor built from iotas of the
// positions, is read through the generics, reshapes, slices and fills that
// compute it.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::overlap::attention;

namespace {

/// An index value as an affine form: a constant, a coefficient per loop of
/// the score op (through linalg.index, in its body or in the bodies of
/// the generics computing a tensor it reads) and per index value defined
/// outside those bodies; `nonNegative` when every term is.
struct IndexForm {
  int64_t constant = 0;
  SmallVector<int64_t> loops;
  SmallVector<std::pair<Value, int64_t>> symbols;
  bool nonNegative = true;

  void add(const IndexForm &other, int64_t times) {
    constant += times * other.constant;
    for (auto [mine, theirs] : llvm::zip(loops, other.loops))
      mine += times * theirs;
    for (auto [value, coefficient] : other.symbols) {
      auto *at =
          llvm::find_if(symbols, [&](auto &s) { return s.first == value; });
      if (at == symbols.end())
        symbols.push_back({value, times * coefficient});
      else
        at->second += times * coefficient;
    }
    nonNegative = nonNegative && other.nonNegative && times >= 0;
  }
};

/// `cmp(lhs, rhs)` as e >= 0 over `loops` loops: a - b - 1 for a > b,
/// a - b for a >= b, with the sides swapped for < and <=; none for == and
/// != and for unsigned comparisons of sides that may be negative.
std::optional<IndexForm> comparisonForm(arith::CmpIPredicate pred,
                                        const IndexForm &lhs,
                                        const IndexForm &rhs, unsigned loops) {
  using P = arith::CmpIPredicate;
  bool isUnsigned =
      pred == P::ugt || pred == P::uge || pred == P::ult || pred == P::ule;
  if (pred == P::eq || pred == P::ne ||
      (isUnsigned && !(lhs.nonNegative && rhs.nonNegative)))
    return std::nullopt;
  bool greater =
      pred == P::sgt || pred == P::sge || pred == P::ugt || pred == P::uge;
  bool strict =
      pred == P::sgt || pred == P::slt || pred == P::ugt || pred == P::ult;
  IndexForm e;
  e.loops.assign(loops, 0);
  e.add(greater ? lhs : rhs, 1);
  e.add(greater ? rhs : lhs, -1);
  e.constant -= strict ? 1 : 0;
  return e;
}

/// Where e >= 0 fails: -e - 1 >= 0.
IndexForm negated(const IndexForm &e) {
  IndexForm result;
  result.loops.assign(e.loops.size(), 0);
  result.add(e, -1);
  result.constant -= 1;
  return result;
}

std::optional<AttentionMask> maskWhere(const IndexForm &e,
                                       linalg::GenericOp op) {
  AttentionMask mask;
  mask.constant = e.constant;
  mask.loops = e.loops;
  mask.symbols = e.symbols;
  mask.extents = op.getStaticLoopRanges();
  if (llvm::any_of(mask.extents, ShapedType::isDynamic))
    return std::nullopt;
  // The bound is computed where the score op is: a term defined in a
  // function a call was followed into cannot be.
  for (auto [symbol, coefficient] : e.symbols)
    if (coefficient != 0 &&
        !symbol.getParentRegion()->isAncestor(op->getParentRegion()))
      return std::nullopt;
  return mask;
}

/// Whether `value` is a constant of at most -1e30 (or -inf): a masked
/// score's fill.
bool isMaskFill(double value) { return value <= -1e30; }

/// The elements of the tensors a score op reads, as scalars at a point of
/// its loops: a generic's loops are affine forms in those loops, and a
/// tensor's element is followed through generics (their yields), reshapes,
/// slices, fills and splat constants to a scalar.
class TensorElements {
public:
  explicit TensorElements(unsigned loops) : numLoops(loops) {}

  /// A body's scalar, with that body's loops as forms in the score op's.
  struct Where {
    mutable linalg::GenericOp op; ///< Null: defined outside any body.
    SmallVector<IndexForm> loops;
    /// An element known only as an index form (of a gathered tensor of
    /// positions), with no scalar value.
    std::optional<IndexForm> form = std::nullopt;
  };

  Where at(linalg::GenericOp op) const {
    Where where{op, {}};
    for (unsigned i = 0; i < numLoops; ++i) {
      where.loops.push_back(constant(0));
      where.loops.back().loops[i] = 1;
    }
    return where;
  }

protected:
  unsigned numLoops;
  /// The values a called function's arguments stand for, from the calls
  /// followed into it (an argument bound to two values proves nothing).
  DenseMap<Value, Value> callArguments;

  /// An integer or index scalar as an affine form.
  virtual std::optional<IndexForm> index(Value value, const Where &where,
                                         int depth = 0) = 0;

  /// `value`, or what it stands for when it is an argument of a function
  /// a call was followed into.
  Value outside(Value value) const {
    return callArguments.lookup(value) ? callArguments.lookup(value) : value;
  }

  IndexForm constant(int64_t c) const {
    IndexForm form;
    form.loops.assign(numLoops, 0);
    form.constant = c;
    form.nonNegative = c >= 0;
    return form;
  }

  /// A splat constant read by a body or defined outside.
  std::optional<Attribute> splatAt(Value value, const Where &where) {
    if (auto arg = dyn_cast<BlockArgument>(value);
        arg && where.op && arg.getOwner()->getParentOp() == where.op &&
        arg.getArgNumber() < where.op.getNumDpsInputs())
      value = where.op.getDpsInputOperand(arg.getArgNumber())->get();
    DenseElementsAttr dense;
    if (matchPattern(value, m_Constant(&dense)) && dense.isSplat())
      return dense.getSplatValue<Attribute>();
    return std::nullopt;
  }

  /// The scalar a body's block argument (an input's element) or a tensor
  /// element comes from, and where: the yield of the generic computing
  /// it, or a fill's value.
  std::optional<std::pair<Value, Where>> element(Value value,
                                                 const Where &where) {
    auto arg = dyn_cast<BlockArgument>(value);
    if (!arg || !where.op || arg.getOwner()->getParentOp() != where.op ||
        arg.getArgNumber() >= where.op.getNumDpsInputs())
      return std::nullopt;
    OpOperand *input = where.op.getDpsInputOperand(arg.getArgNumber());
    SmallVector<IndexForm> indices;
    for (AffineExpr expr :
         where.op.getMatchingIndexingMap(input).getResults()) {
      if (auto dim = dyn_cast<AffineDimExpr>(expr))
        indices.push_back(where.loops[dim.getPosition()]);
      else if (auto c = dyn_cast<AffineConstantExpr>(expr))
        indices.push_back(constant(c.getValue()));
      else
        return std::nullopt;
    }
    return tensorElement(input->get(), indices, 0);
  }

  std::optional<std::pair<Value, Where>>
  tensorElement(Value tensor, SmallVector<IndexForm> indices, int depth);

private:
  /// A result of a call: what the callee returns, its arguments standing
  /// for the call's operands (a model's layers outlined into functions
  /// return the positions they gathered).
  std::optional<std::pair<Value, Where>>
  calledElement(func::CallOp call, OpResult result,
                SmallVector<IndexForm> indices, int depth);

  /// An element of an all-gather over one axis of positions: when rank
  /// r's block holds a * (l + b * r) + c at its index l along the gathered
  /// dimension (b the block's size; HF's positions, an iota offset by the
  /// rank's block, are a = 1, c = 0), the gathered tensor holds a * g + c
  /// at g, on every rank. Read off the source at l = 0 and l = 1; any
  /// other position in c must be along another axis of the grid, which
  /// the group's ranks share.
  std::optional<std::pair<Value, Where>>
  gatheredElement(AllGatherOp gather, SmallVector<IndexForm> indices,
                  int depth);
};

std::optional<std::pair<Value, TensorElements::Where>>
TensorElements::tensorElement(Value tensor, SmallVector<IndexForm> indices,
                              int depth) {
  tensor = outside(tensor);
  auto type = dyn_cast<RankedTensorType>(tensor.getType());
  Operation *def = tensor.getDefiningOp();
  if (!type || !type.hasStaticShape() || !def || depth > 32)
    return std::nullopt;
  if (auto generic = dyn_cast<linalg::GenericOp>(def)) {
    if (generic->getNumResults() != 1 ||
        generic.getNumParallelLoops() != generic.getNumLoops() ||
        !generic.getMatchingIndexingMap(generic.getDpsInitOperand(0))
             .isIdentity())
      return std::nullopt;
    auto yield = cast<linalg::YieldOp>(generic.getBody()->getTerminator());
    return std::make_pair(yield.getValues()[0], Where{generic, indices});
  }
  if (auto fill = dyn_cast<linalg::FillOp>(def))
    return std::make_pair(fill.getInputs()[0], Where{});
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    if (!slice.hasUnitStride() ||
        slice.getSourceType().getRank() != static_cast<int64_t>(indices.size()))
      return std::nullopt;
    for (auto [index, offset] : llvm::zip(indices, slice.getMixedOffsets())) {
      if (auto attr = dyn_cast<Attribute>(offset)) {
        index.constant += cast<IntegerAttr>(attr).getInt();
      } else {
        IndexForm symbol = constant(0);
        symbol.symbols.push_back({cast<Value>(offset), 1});
        symbol.nonNegative = false;
        index.add(symbol, 1);
      }
    }
    return tensorElement(slice.getSource(), indices, depth + 1);
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
    // A source index is its group's indices in row-major order.
    SmallVector<IndexForm> source;
    for (const ReassociationIndices &group : expand.getReassociationIndices()) {
      IndexForm index = constant(0);
      int64_t stride = 1;
      for (int64_t d : llvm::reverse(group)) {
        index.add(indices[d], stride);
        stride *= type.getDimSize(d);
      }
      source.push_back(index);
    }
    return tensorElement(expand.getSrc(), source, depth + 1);
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    // Only groups of unit dims but at most one, which takes the index.
    auto sourceType = collapse.getSrcType();
    SmallVector<IndexForm> source(sourceType.getRank(), constant(0));
    for (auto [i, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      int64_t wide = -1;
      for (int64_t d : group)
        if (sourceType.getDimSize(d) != 1) {
          if (wide >= 0)
            return std::nullopt;
          wide = d;
        }
      source[wide >= 0 ? wide : group.front()] = indices[i];
    }
    return tensorElement(collapse.getSrc(), source, depth + 1);
  }
  if (auto call = dyn_cast<func::CallOp>(def))
    return calledElement(call, cast<OpResult>(tensor), indices, depth);
  if (auto gather = dyn_cast<AllGatherOp>(def))
    return gatheredElement(gather, indices, depth);
  return std::nullopt;
}

std::optional<std::pair<Value, TensorElements::Where>>
TensorElements::calledElement(func::CallOp call, OpResult result,
                              SmallVector<IndexForm> indices, int depth) {
  Value returned = returnedBy(call, result, callArguments);
  if (!returned)
    return std::nullopt;
  return tensorElement(returned, indices, depth + 1);
}

std::optional<std::pair<Value, TensorElements::Where>>
TensorElements::gatheredElement(AllGatherOp gather,
                                SmallVector<IndexForm> indices, int depth) {
  if (gather.getAxes().size() != 1 ||
      gather.getInput().getType().getDimSize(gather.getDim()) < 1)
    return std::nullopt;
  int16_t axis = gather.getAxes().front();
  int64_t dim = gather.getDim();
  int64_t block = gather.getInput().getType().getDimSize(dim);
  auto at = [&](int64_t l) -> std::optional<IndexForm> {
    SmallVector<IndexForm> local = indices;
    local[dim] = constant(l);
    auto source = tensorElement(gather.getInput(), local, depth + 1);
    if (!source)
      return std::nullopt;
    if (source->second.form)
      return source->second.form;
    return index(source->first, source->second, depth + 1);
  };
  // The term of this rank's position along the gathered axis.
  auto isPosition = [&](Value value, bool gathered) {
    auto result = dyn_cast<OpResult>(value);
    auto multi = result
                     ? dyn_cast<shard::ProcessMultiIndexOp>(result.getOwner())
                     : nullptr;
    if (!multi || multi.getGridAttr() != gather.getGridAttr())
      return false;
    ArrayRef<int16_t> axes = multi.getAxes();
    int64_t along = axes.empty() ? result.getResultNumber()
                                 : axes[result.getResultNumber()];
    return (along == axis) == gathered;
  };
  // The position terms of the element read must be the source block's
  // rank's: indices that themselves hold this rank's position along the
  // gathered axis (reading row p of a gathered tensor) would be taken
  // for it.
  for (auto [d, read] : llvm::enumerate(indices))
    if (static_cast<int64_t>(d) != dim &&
        llvm::any_of(read.symbols, [&](auto &s) {
          return s.second != 0 && isPosition(s.first, true);
        }))
      return std::nullopt;
  std::optional<IndexForm> first = at(0);
  if (!first)
    return std::nullopt;
  IndexForm form = *first; // Terms of every kind are non-negative if
  form.symbols.clear();    // `first` is, the position's included.
  int64_t scaled = 0;      // a * b
  for (auto [value, coefficient] : first->symbols) {
    if (coefficient == 0)
      continue;
    if (isPosition(value, true))
      scaled += coefficient;
    else if (isPosition(value, false))
      form.symbols.push_back({value, coefficient});
    else
      return std::nullopt;
  }
  if (scaled % block != 0)
    return std::nullopt;
  int64_t slope = scaled / block;
  if (block > 1) {
    std::optional<IndexForm> second = at(1);
    if (!second)
      return std::nullopt;
    IndexForm step = *second;
    step.add(*first, -1);
    if (step.constant != slope ||
        llvm::any_of(step.loops, [](int64_t c) { return c != 0; }) ||
        llvm::any_of(step.symbols, [](auto &s) { return s.second != 0; }))
      return std::nullopt;
  }
  form.add(indices[dim], slope);
  return std::make_pair(Value(), Where{{}, {}, form});
}

/// The elements of a mask tensor as the score op reads them, so that HF's
/// mask, built from iotas of the positions, reads as a comparison of the
/// score op's indices.
class MaskElements : public TensorElements {
public:
  using TensorElements::TensorElements;

  /// A condition: holds iff `e >= 0` (`exact`), only where `e >= 0` (a
  /// conjunction with a condition that does not read as one: HF's
  /// same-document mask of packed sequences), or always.
  struct Condition {
    bool always = false;
    IndexForm e;
    bool exact = true;
  };
  /// A float that is `whenTrue` where `condition` holds, else `whenFalse`.
  struct Choice {
    Condition condition;
    double whenTrue = 0, whenFalse = 0;
  };

  std::optional<Choice> choice(Value value, const Where &where, int depth = 0) {
    if (depth > 32)
      return std::nullopt;
    if (auto splat = splatAt(value, where))
      return fromAttr(*splat);
    std::optional<std::pair<Value, Where>> source = element(value, where);
    if (source)
      return source->first ? choice(source->first, source->second, depth + 1)
                           : std::nullopt;
    FloatAttr number;
    if (matchPattern(value, m_Constant(&number)))
      return Choice{
          {true, {}}, number.getValueAsDouble(), number.getValueAsDouble()};
    Operation *def = value.getDefiningOp();
    if (isa_and_nonnull<arith::ExtFOp, arith::TruncFOp>(def))
      return choice(def->getOperand(0), where, depth + 1);
    auto select = dyn_cast_or_null<arith::SelectOp>(def);
    if (!select)
      return std::nullopt;
    auto holds = condition(select.getCondition(), where, depth + 1);
    auto a = choice(select.getTrueValue(), where, depth + 1);
    auto b = choice(select.getFalseValue(), where, depth + 1);
    if (!holds || !a || !b || !a->condition.always || !b->condition.always ||
        a->whenTrue != a->whenFalse || b->whenTrue != b->whenFalse)
      return std::nullopt;
    return Choice{*holds, a->whenTrue, b->whenTrue};
  }

  std::optional<IndexForm> index(Value value, const Where &where,
                                 int depth = 0) override {
    if (depth > 32)
      return std::nullopt;
    value = outside(value);
    if (auto source = element(value, where))
      return source->second.form
                 ? source->second.form
                 : index(source->first, source->second, depth + 1);
    if (auto splat = splatAt(value, where))
      if (auto integer = dyn_cast<IntegerAttr>(*splat))
        return constant(integer.getInt());
    IntegerAttr number;
    if (matchPattern(value, m_Constant(&number)))
      return constant(number.getInt());
    Operation *def = value.getDefiningOp();
    if (auto loop = dyn_cast_or_null<linalg::IndexOp>(def))
      return loop->getParentOp() == where.op.getOperation()
                 ? std::optional<IndexForm>(where.loops[loop.getDim()])
                 : std::nullopt;
    if (isa_and_nonnull<arith::IndexCastOp, arith::IndexCastUIOp,
                        arith::ExtSIOp>(def))
      return index(def->getOperand(0), where, depth + 1);
    if (auto extract = dyn_cast_or_null<tensor::ExtractOp>(def)) {
      // An element of a tensor the body reads (torch-mlir's gather of a
      // position from an iota).
      SmallVector<IndexForm> indices;
      for (Value i : extract.getIndices()) {
        std::optional<IndexForm> form = index(i, where, depth + 1);
        if (!form)
          return std::nullopt;
        indices.push_back(*form);
      }
      auto source = tensorElement(extract.getTensor(), indices, 0);
      if (!source)
        return std::nullopt;
      return source->second.form
                 ? source->second.form
                 : index(source->first, source->second, depth + 1);
    }
    if (auto select = dyn_cast_or_null<arith::SelectOp>(def)) {
      // torch's wrap of a negative index, select(i < 0, i + n, i), of an i
      // that is never negative: i.
      auto test = select.getCondition().getDefiningOp<arith::CmpIOp>();
      if (!test || test.getPredicate() != arith::CmpIPredicate::slt ||
          test.getLhs() != select.getFalseValue() ||
          !matchPattern(test.getRhs(), m_Zero()))
        return std::nullopt;
      std::optional<IndexForm> kept =
          index(select.getFalseValue(), where, depth + 1);
      if (!kept || !kept->nonNegative)
        return std::nullopt;
      return kept;
    }
    if (isa_and_nonnull<arith::AddIOp, arith::SubIOp>(def)) {
      auto lhs = index(def->getOperand(0), where, depth + 1);
      auto rhs = index(def->getOperand(1), where, depth + 1);
      if (!lhs || !rhs)
        return std::nullopt;
      lhs->add(*rhs, isa<arith::AddIOp>(def) ? 1 : -1);
      return lhs;
    }
    if (isa_and_nonnull<arith::MulIOp>(def))
      for (unsigned side = 0; side < 2; ++side) {
        IntegerAttr factor;
        if (!matchPattern(def->getOperand(side), m_Constant(&factor)))
          continue;
        auto other = index(def->getOperand(1 - side), where, depth + 1);
        if (!other)
          return std::nullopt;
        IndexForm form = constant(0);
        form.add(*other, factor.getInt());
        return form;
      }
    // Any other value defined outside the bodies is an opaque term,
    // non-negative when it is a position.
    bool inside = where.op && def && where.op->isProperAncestor(def);
    if (auto arg = dyn_cast<BlockArgument>(value))
      inside = where.op && arg.getOwner()->getParentOp() == where.op;
    if (inside)
      return std::nullopt;
    IndexForm form = constant(0);
    form.symbols.push_back({value, 1});
    form.nonNegative = isa_and_nonnull<shard::ProcessMultiIndexOp>(def);
    return form;
  }

  /// An i1 scalar as a condition.
  std::optional<Condition> condition(Value value, const Where &where,
                                     int depth = 0) {
    if (depth > 32)
      return std::nullopt;
    if (auto source = element(value, where))
      return source->first ? condition(source->first, source->second, depth + 1)
                           : std::nullopt;
    std::optional<Attribute> splat = splatAt(value, where);
    IntegerAttr flag;
    if (splat)
      flag = dyn_cast<IntegerAttr>(*splat);
    else
      matchPattern(value, m_Constant(&flag));
    if (flag)
      return flag.getValue().isOne() ? std::optional<Condition>(Condition{true})
                                     : std::nullopt;
    Operation *def = value.getDefiningOp();
    if (auto cmp = dyn_cast_or_null<arith::CmpIOp>(def)) {
      auto lhs = index(cmp.getLhs(), where, depth + 1);
      auto rhs = index(cmp.getRhs(), where, depth + 1);
      if (!lhs || !rhs)
        return std::nullopt;
      auto e = comparisonForm(cmp.getPredicate(), *lhs, *rhs, numLoops);
      return e ? std::optional<Condition>(Condition{false, *e}) : std::nullopt;
    }
    if (isa_and_nonnull<arith::XOrIOp>(def)) {
      // With true: a negation, of an exact condition only.
      auto a = condition(def->getOperand(0), where, depth + 1);
      auto b = condition(def->getOperand(1), where, depth + 1);
      if (!a || !b || a->always == b->always)
        return std::nullopt;
      const Condition &negatedSide = a->always ? *b : *a;
      if (!negatedSide.exact)
        return std::nullopt;
      return Condition{false, negated(negatedSide.e)};
    }
    if (isa_and_nonnull<arith::AndIOp>(def)) {
      auto a = condition(def->getOperand(0), where, depth + 1);
      auto b = condition(def->getOperand(1), where, depth + 1);
      if (a && a->always)
        return b;
      if (b && b->always)
        return a;
      // A conjunction holds only where each side does: the first side
      // that reads as a comparison bounds it (causal and same-document).
      std::optional<Condition> side = a ? a : b;
      if (side)
        side->exact = false;
      return side;
    }
    return std::nullopt;
  }

private:
  static std::optional<Choice> fromAttr(Attribute attr) {
    if (auto f = dyn_cast<FloatAttr>(attr))
      return Choice{{true, {}}, f.getValueAsDouble(), f.getValueAsDouble()};
    return std::nullopt;
  }
};

} // namespace

/// The mask `op` applies, masked where e >= 0: when it yields a constant of
/// at most -1e30 (or -inf) where an affine comparison of indices holds
/// and its score otherwise, or adds to the score a mask tensor that is 0
/// where such a comparison holds and such a constant elsewhere (HF's
/// causal mask, built from iotas of the positions). A mask that keeps the
/// scores where the comparison and another condition both hold (HF's
/// causal and same-document mask of a LlamaModel) is masked where e >= 0
/// and maybe elsewhere too; with a fill of -inf, the keys masked for every
/// row of a block are still skipped exactly.
std::optional<AttentionMask> attention::blockMask(linalg::GenericOp op) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  Value yielded = throughCasts(yield.getValues()[0]);
  MaskElements elements(op.getNumLoops());
  if (auto add = yielded.getDefiningOp<arith::AddFOp>()) {
    for (Value side : {add.getLhs(), add.getRhs()}) {
      auto mask = elements.choice(throughCasts(side), elements.at(op));
      if (!mask || mask->condition.always)
        continue;
      const auto &kept = mask->condition;
      if (mask->whenTrue == 0 && isMaskFill(mask->whenFalse) &&
          (kept.exact || std::isinf(mask->whenFalse)))
        return maskWhere(negated(kept.e), op);
      if (mask->whenFalse == 0 && isMaskFill(mask->whenTrue) && kept.exact)
        return maskWhere(kept.e, op);
    }
    return std::nullopt;
  }
  auto select = yielded.getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  auto fillOf = [](Value v) -> std::optional<double> {
    FloatAttr fill;
    if (matchPattern(v, m_Constant(&fill)) &&
        isMaskFill(fill.getValueAsDouble()))
      return fill.getValueAsDouble();
    return std::nullopt;
  };
  std::optional<double> trueFill = fillOf(select.getTrueValue());
  std::optional<double> falseFill = fillOf(select.getFalseValue());
  bool whenTrue = trueFill.has_value();
  if (!whenTrue && !falseFill)
    return std::nullopt;
  auto holds = elements.condition(select.getCondition(), elements.at(op));
  if (!holds || holds->always)
    return std::nullopt;
  // A condition known only to bound where it holds gives the keys that
  // are masked, not those that are not: only as the kept scores' condition
  // and with a fill of -inf (a row its other side masks whole then has no
  // score left, skipped keys or not).
  if (!holds->exact && (whenTrue || !std::isinf(*falseFill)))
    return std::nullopt;
  // Masked where the condition fails: -e - 1 >= 0.
  return maskWhere(whenTrue ? holds->e : negated(holds->e), op);
}
