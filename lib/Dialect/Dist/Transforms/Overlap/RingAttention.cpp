//===- RingAttention.cpp - Online-softmax ring over gathered k and v -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Context parallelism gathers k and v along the sequence and computes
// softmax(s(q, k)) v, with s the scores of q against every key (a product,
// then a scale, a mask, any elementwise work). The two gathers would make
// two rings of their own, but each rank would still hold all its scores,
// (N / p) x N per head. Blockwise with an online softmax, a rank keeps per
// row a running max m and sum l and a rescaled partial output o, and at
// each ring step takes the k and v block at hand (its own first):
//
//   s_b = s(q, k_b)                    (the score ops, on the block's keys)
//   m'  = max(m, rowmax(s_b))
//   e_b = exp(s_b - m')
//   a   = exp(m - m')
//   l   = l * a + rowsum(e_b)
//   o   = o * a + e_b v_b
//
// and at the end divides o by l. This is the original computation with its
// sums reassociated (docs/Rationale.md has the tolerance argument). Every
// block op is the original op computed for the block's keys
// (schedule::computeChunk), so masks through linalg.index see global key
// positions and a mask tensor is sliced.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include <limits>

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

namespace {

std::string nameOf(Operation *op) {
  return "'" + op->getName().getStringRef().str() + "'";
}

/// `value` inside a body, through float extensions and truncations.
Value throughCasts(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isa<arith::ExtFOp, arith::TruncFOp>(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// The op defining the yielded value of a single-result generic, through
/// casts, if it is an `OpTy`.
template <typename OpTy> OpTy yielded(linalg::GenericOp op) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  return throughCasts(yield.getValues()[0]).getDefiningOp<OpTy>();
}

bool isArg(Value value, linalg::GenericOp op, unsigned operand) {
  return throughCasts(value) == op.getBody()->getArgument(operand);
}

/// Whether binary `op` combines block arguments `a` and `b` of `generic`,
/// in either order.
bool combinesArgs(Operation *op, linalg::GenericOp generic, unsigned a,
                  unsigned b) {
  if (!op || op->getNumOperands() != 2)
    return false;
  Value x = op->getOperand(0), y = op->getOperand(1);
  return (isArg(x, generic, a) && isArg(y, generic, b)) ||
         (isArg(x, generic, b) && isArg(y, generic, a));
}

bool isZeroFill(Value value) {
  auto fill = value.getDefiningOp<linalg::FillOp>();
  return fill && matchPattern(fill.getInputs()[0], m_AnyZeroFloat());
}

/// A generic elementwise in `operand` (an identity map, like its result,
/// every loop parallel), single-result, on tensors.
bool isElementwiseOn(linalg::GenericOp op, unsigned operand) {
  if (!op || op->getNumResults() != 1 || !op.hasPureTensorSemantics() ||
      op.getNumParallelLoops() != op.getNumLoops() || op.getNumDpsInits() != 1)
    return false;
  return op.getIndexingMapsArray()[operand].isIdentity() &&
         op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity();
}

/// A reduction generic of one input (identity map) into one init, every
/// loop parallel but `loop`, which its result does not index.
bool isRowReduction(linalg::GenericOp op, unsigned loop) {
  if (!op || op->getNumResults() != 1 || op.getNumDpsInputs() != 1 ||
      !op.hasPureTensorSemantics() || op.getNumReductionLoops() != 1 ||
      op.getIteratorTypesArray()[loop] != utils::IteratorType::reduction)
    return false;
  return op.getIndexingMapsArray()[0].isIdentity() &&
         !op.getMatchingIndexingMap(op.getDpsInitOperand(0))
              .isFunctionOfDim(loop);
}

/// A generic testing each element of its one input for -inf (torch's
/// safe softmax, through float extensions).
bool isMinusInfTest(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || !isElementwiseOn(op, 0) ||
      !getElementTypeOrSelf(op->getResult(0).getType()).isInteger(1))
    return false;
  auto cmp = yielded<arith::CmpFOp>(op);
  if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::OEQ)
    return false;
  FloatAttr low;
  for (unsigned side = 0; side < 2; ++side)
    if (isArg(cmp->getOperand(side), op, 0) &&
        matchPattern(cmp->getOperand(1 - side), m_Constant(&low)))
      return low.getValue().isInfinity() && low.getValue().isNegative();
  return false;
}

/// Whether `op` selects 0 where `flag` (a row tensor, read through
/// `rows`) holds and its operand `probs` elsewhere.
bool isSafeSelect(linalg::GenericOp op, unsigned probs, Value flag,
                  AffineMap rows) {
  if (!isElementwiseOn(op, probs) || op.getNumDpsInputs() > 3)
    return false;
  auto select = yielded<arith::SelectOp>(op);
  if (!select || !isArg(select.getFalseValue(), op, probs))
    return false;
  Value zero = select.getTrueValue();
  if (!matchPattern(zero, m_AnyZeroFloat())) {
    auto arg = dyn_cast<BlockArgument>(zero);
    if (!arg || arg.getOwner() != op.getBody() ||
        arg.getArgNumber() >= op.getNumDpsInputs())
      return false;
    // A splat or fill of 0, or a slice of one (the sinking of row-local
    // work slices the select's operands to the rank's rows).
    Value source = op.getDpsInputOperand(arg.getArgNumber())->get();
    while (auto slice = source.getDefiningOp<tensor::ExtractSliceOp>())
      source = slice.getSource();
    DenseElementsAttr constant;
    auto splat =
        matchPattern(source, m_Constant(&constant)) && constant.isSplat()
            ? dyn_cast<FloatAttr>(constant.getSplatValue<Attribute>())
            : FloatAttr();
    if (!(splat && splat.getValue().isZero()) && !isZeroFill(source))
      return false;
  }
  auto cond = dyn_cast<BlockArgument>(select.getCondition());
  if (!cond || cond.getOwner() != op.getBody() ||
      cond.getArgNumber() >= op.getNumDpsInputs())
    return false;
  OpOperand *flagUse = op.getDpsInputOperand(cond.getArgNumber());
  return flagUse->get() == flag && op.getMatchingIndexingMap(flagUse) == rows;
}

/// The dimension of a row tensor each of `rowsMap`'s results indexes in
/// the result of `op`, through `op`'s map of `operand` (an identity view
/// of the score dims): the map from `op`'s result dims to the row dims, or
/// null when a row dim does not reach the result.
AffineMap rowsInResult(linalg::LinalgOp op, unsigned operand,
                       AffineMap rowsMap) {
  AffineMap operandMap = op.getIndexingMapsArray()[operand];
  AffineMap resultMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  SmallVector<AffineExpr> exprs;
  MLIRContext *ctx = op->getContext();
  for (AffineExpr row : rowsMap.getResults()) {
    auto scoreDim = dyn_cast<AffineDimExpr>(row);
    if (!scoreDim)
      return {};
    auto loop =
        dyn_cast<AffineDimExpr>(operandMap.getResult(scoreDim.getPosition()));
    if (!loop)
      return {};
    std::optional<unsigned> at =
        resultMap.getResultPosition(getAffineDimExpr(loop.getPosition(), ctx));
    if (!at)
      return {};
    exprs.push_back(getAffineDimExpr(*at, ctx));
  }
  return AffineMap::get(resultMap.getNumResults(), 0, exprs, ctx);
}

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
  return mask;
}

/// Whether `value` is a constant of at most -1e30 (or -inf): a masked
/// score's fill.
bool isMaskFill(double value) { return value <= -1e30; }

/// The elements of a mask tensor as the score op reads them: what each
/// scalar of the ops computing it is at a point of the score op's loops.
/// A generic's loops are affine forms in those loops; a tensor's element
/// is followed through generics (their yields), reshapes, slices, fills
/// and splat constants to a scalar, so that HF's mask, built from iotas of
/// the positions, reads as a comparison of the score op's indices.
class MaskElements {
public:
  explicit MaskElements(unsigned loops) : numLoops(loops) {}

  /// A condition: holds iff `e >= 0`, or always.
  struct Condition {
    bool always = false;
    IndexForm e;
  };
  /// A float that is `whenTrue` where `condition` holds, else `whenFalse`.
  struct Choice {
    Condition condition;
    double whenTrue = 0, whenFalse = 0;
  };
  /// A body's scalar, with that body's loops as forms in the score op's.
  struct Where {
    mutable linalg::GenericOp op; ///< Null: defined outside any body.
    SmallVector<IndexForm> loops;
  };

  Where at(linalg::GenericOp op) const {
    Where where{op, {}};
    for (unsigned i = 0; i < numLoops; ++i) {
      where.loops.push_back(constant(0));
      where.loops.back().loops[i] = 1;
    }
    return where;
  }

  std::optional<Choice> choice(Value value, const Where &where, int depth = 0) {
    if (depth > 32)
      return std::nullopt;
    if (auto splat = splatAt(value, where))
      return fromAttr(*splat);
    std::optional<std::pair<Value, Where>> source = element(value, where);
    if (source)
      return choice(source->first, source->second, depth + 1);
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

  /// An integer or index scalar as an affine form.
  std::optional<IndexForm> index(Value value, const Where &where,
                                 int depth = 0) {
    if (depth > 32)
      return std::nullopt;
    if (auto source = element(value, where))
      return index(source->first, source->second, depth + 1);
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
      return condition(source->first, source->second, depth + 1);
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
    if (isa_and_nonnull<arith::AndIOp, arith::XOrIOp>(def)) {
      auto a = condition(def->getOperand(0), where, depth + 1);
      auto b = condition(def->getOperand(1), where, depth + 1);
      if (!a || !b)
        return std::nullopt;
      if (isa<arith::XOrIOp>(def)) // With true: a negation.
        return a->always == b->always
                   ? std::nullopt
                   : std::optional<Condition>(
                         Condition{false, negated(a->always ? b->e : a->e)});
      return a->always ? b : b->always ? a : std::nullopt;
    }
    return std::nullopt;
  }

private:
  unsigned numLoops;

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

  static std::optional<Choice> fromAttr(Attribute attr) {
    if (auto f = dyn_cast<FloatAttr>(attr))
      return Choice{{true, {}}, f.getValueAsDouble(), f.getValueAsDouble()};
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
  tensorElement(Value tensor, SmallVector<IndexForm> indices, int depth) {
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
      if (!slice.hasUnitStride() || slice.getSourceType().getRank() !=
                                        static_cast<int64_t>(indices.size()))
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
      for (const ReassociationIndices &group :
           expand.getReassociationIndices()) {
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
    return std::nullopt;
  }
};

/// The mask `op` applies, masked iff e >= 0: when it yields a constant of
/// at most -1e30 (or -inf) where an affine comparison of indices holds
/// and its score otherwise, or adds to the score a mask tensor that is 0
/// where such a comparison holds and such a constant elsewhere (HF's
/// causal mask, built from iotas of the positions).
std::optional<AttentionMask> blockMask(linalg::GenericOp op) {
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  Value yielded = throughCasts(yield.getValues()[0]);
  MaskElements elements(op.getNumLoops());
  if (auto add = yielded.getDefiningOp<arith::AddFOp>()) {
    for (Value side : {add.getLhs(), add.getRhs()}) {
      auto mask = elements.choice(throughCasts(side), elements.at(op));
      if (!mask || mask->condition.always)
        continue;
      if (mask->whenTrue == 0 && isMaskFill(mask->whenFalse))
        return maskWhere(negated(mask->condition.e), op);
      if (mask->whenFalse == 0 && isMaskFill(mask->whenTrue))
        return maskWhere(mask->condition.e, op);
    }
    return std::nullopt;
  }
  auto select = yielded.getDefiningOp<arith::SelectOp>();
  if (!select)
    return std::nullopt;
  auto isFill = [](Value v) {
    FloatAttr fill;
    return matchPattern(v, m_Constant(&fill)) &&
           isMaskFill(fill.getValueAsDouble());
  };
  bool whenTrue = isFill(select.getTrueValue());
  if (!whenTrue && !isFill(select.getFalseValue()))
    return std::nullopt;
  auto holds = elements.condition(select.getCondition(), elements.at(op));
  if (!holds || holds->always)
    return std::nullopt;
  // Masked where the condition fails: -e - 1 >= 0.
  return maskWhere(whenTrue ? holds->e : negated(holds->e), op);
}

/// Where a value the attention reads comes from, for a rank computing
/// another rank's rows (the balanced ring's helper): the same on every rank
/// of the ring, a function of the rank's position along it (computed again
/// for the other rank's position), or neither as far as can be told.
enum class Origin { Invariant, Position, Unknown };

class Origins {
public:
  explicit Origins(const Ring &ring) : ring(ring) {}

  /// Whether `value` is this rank's position along the ring's axis.
  bool isPosition(Value value) const {
    auto result = dyn_cast<OpResult>(value);
    if (!result)
      return false;
    Operation *def = result.getOwner();
    if (auto multi = dyn_cast<shard::ProcessMultiIndexOp>(def)) {
      ArrayRef<int16_t> axes = multi.getAxes();
      int64_t axis = axes.empty() ? result.getResultNumber()
                                  : axes[result.getResultNumber()];
      return multi.getGridAttr() == ring.grid && axis == ring.axis;
    }
    if (auto linear = dyn_cast<shard::ProcessLinearIndexOp>(def)) {
      auto grid =
          SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(def, ring.grid);
      return linear.getGridAttr() == ring.grid && grid && grid.getRank() == 1;
    }
    return false;
  }

  Origin of(Value value, int depth = 0) {
    if (auto it = known.find(value); it != known.end())
      return it->second;
    Origin origin = Origin::Unknown;
    Operation *def = value.getDefiningOp();
    if (!def || depth > 64) {
      origin = Origin::Unknown; // An argument: it may differ between ranks.
    } else if (isPosition(value)) {
      origin = Origin::Position;
    } else if (auto multi = dyn_cast<shard::ProcessMultiIndexOp>(def)) {
      // The position along another axis, which the owner shares.
      origin = multi.getGridAttr() == ring.grid ? Origin::Invariant
                                                : Origin::Unknown;
    } else if (def->hasTrait<OpTrait::ConstantLike>()) {
      origin = Origin::Invariant;
    } else if (isa_and_nonnull<DistDialect, shard::ShardDialect>(
                   def->getDialect()) ||
               !isMemoryEffectFree(def)) {
      origin = Origin::Unknown;
    } else {
      origin = Origin::Invariant;
      SetVector<Value> read(def->operand_begin(), def->operand_end());
      getUsedValuesDefinedAbove(def->getRegions(), read);
      for (Value v : read) {
        Origin o = of(v, depth + 1);
        if (o == Origin::Unknown) {
          origin = o;
          break;
        }
        if (o == Origin::Position)
          origin = o;
      }
    }
    known[value] = origin;
    return origin;
  }

private:
  const Ring &ring;
  DenseMap<Value, Origin> known;
};

/// What each op of the attention's chain reads besides the chain itself
/// (the scores' product reads q and the keys; q travels with the keys when
/// a rank computes another's rows): operands and values captured in bodies.
SmallVector<std::pair<Operation *, SetVector<Value>>>
chainReads(RingAttention &m) {
  SmallVector<std::pair<Operation *, SmallVector<unsigned>>> chain;
  SmallVector<unsigned> inputs;
  for (OpOperand *input : m.scores.getDpsInputOperands())
    inputs.push_back(input->getOperandNumber());
  chain.push_back({m.scores, inputs});
  for (const AttentionPrefix &p : m.scoreOps)
    chain.push_back({p.op, {p.operand}});
  chain.push_back({m.max, {0}});
  chain.push_back({m.exp, {m.expScores, m.expMax}});
  if (m.expThen)
    chain.push_back({m.expThen, {0}});
  chain.push_back({m.sum, {0}});
  chain.push_back({m.output, {m.probsOperand, m.valuesOperand}});
  SmallVector<std::pair<Operation *, SetVector<Value>>> reads;
  for (auto &[op, flows] : chain) {
    SetVector<Value> read;
    for (OpOperand &operand : op->getOpOperands())
      if (!llvm::is_contained(flows, operand.getOperandNumber()))
        read.insert(operand.get());
    getUsedValuesDefinedAbove(op->getRegions(), read);
    reads.push_back({op, std::move(read)});
  }
  return reads;
}

/// Why a rank cannot compute another rank's rows of `m` (empty when it
/// can); records the values the chain reads that depend on the position.
std::string checkHelper(RingAttention &m) {
  Origins origins(m.ring);
  SetVector<Value> positional;
  for (auto &[op, read] : chainReads(m))
    for (Value value : read) {
      Origin origin = origins.of(value);
      if (origin == Origin::Unknown) {
        std::string what;
        if (auto arg = dyn_cast<BlockArgument>(value))
          what = "argument #" + std::to_string(arg.getArgNumber());
        else
          what = "the result of " + nameOf(value.getDefiningOp());
        return nameOf(op) + " reads " + what +
               ", which may differ between ranks (neither a constant nor "
               "computed from the rank's position)";
      }
      if (origin == Origin::Position)
        positional.insert(value);
    }
  m.positional.assign(positional.begin(), positional.end());
  return "";
}

} // namespace

/// The keys' dimension after reshape `op` of a tensor whose keys'
/// dimension is `dim`: a collapse folding it only with unit dimensions, or
/// an expand keeping one non-unit dimension of its group; nullopt for any
/// other op.
static std::optional<int64_t> reshapedKeyDim(Operation *op, int64_t dim) {
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    ArrayRef<int64_t> source = shapeOf(collapse.getSrc());
    for (auto [g, group] : llvm::enumerate(collapse.getReassociationIndices()))
      if (llvm::is_contained(group, dim))
        return llvm::all_of(
                   group, [&](int64_t d) { return d == dim || source[d] == 1; })
                   ? std::optional<int64_t>(g)
                   : std::nullopt;
    return std::nullopt;
  }
  auto expand = dyn_cast<tensor::ExpandShapeOp>(op);
  if (!expand ||
      dim >= static_cast<int64_t>(expand.getReassociationIndices().size()))
    return std::nullopt;
  ArrayRef<int64_t> result = shapeOf(expand.getResult());
  SmallVector<int64_t> wide;
  for (int64_t d : expand.getReassociationIndices()[dim])
    if (result[d] != 1)
      wide.push_back(d);
  return wide.size() == 1 ? std::optional<int64_t>(wide.front()) : std::nullopt;
}

/// The ops between a gather and the product reading it that keep each
/// key separate (GQA's broadcast of k/v over the q heads and the reshape
/// folding the copies into the heads, a transpose of k; any linalg op
/// whose loops are all parallel): the
/// ring applies them to each block instead, so that it carries the
/// gathered tensor as it is. Returns the product's use and the dimension
/// of its operand that the keys index.
static std::pair<OpOperand *, int64_t>
followPrefix(Value value, int64_t dim, SmallVectorImpl<AttentionPrefix> &out) {
  while (value.hasOneUse()) {
    OpOperand &use = *value.getUses().begin();
    Operation *user = use.getOwner();
    if (auto generic = dyn_cast<linalg::LinalgOp>(user);
        generic && generic.getNumReductionLoops() == 0 &&
        generic->getNumResults() == 1 && generic.isDpsInput(&use) &&
        generic.hasPureTensorSemantics()) {
      std::optional<unsigned> loop = loopOfOperandDim(generic, use, dim);
      std::optional<int64_t> next =
          loop ? resultDimOfLoop(generic, *loop) : std::nullopt;
      if (!next)
        break;
      out.push_back({generic, use.getOperandNumber(), *loop, *next});
      value = generic->getResult(0);
      dim = *next;
      continue;
    }
    if (std::optional<int64_t> next = reshapedKeyDim(user, dim)) {
      out.push_back({user, 0, 0, *next});
      value = user->getResult(0);
      dim = *next;
      continue;
    }
    break;
  }
  if (!value.hasOneUse())
    return {nullptr, dim};
  return {&*value.getUses().begin(), dim};
}

/// The gather `value` is computed from through prefix ops, if any.
static AllGatherOp gatherBehind(Value value) {
  for (int hops = 0; hops < 8; ++hops) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return {};
    if (auto gather = dyn_cast<AllGatherOp>(def))
      return gather;
    if (isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def)) {
      value = def->getOperand(0);
      continue;
    }
    auto generic = dyn_cast<linalg::LinalgOp>(def);
    if (!generic || generic.getNumDpsInputs() != 1 ||
        generic.getNumReductionLoops() != 0)
      return {};
    value = generic.getDpsInputOperand(0)->get();
  }
  return {};
}

FailureOr<RingAttention> overlap::matchRingAttention(AllGatherOp op,
                                                     bool &looksLike,
                                                     std::string &reason) {
  looksLike = false;
  SmallVector<AttentionPrefix> prefix;
  auto [gatheredUse, gatheredDim] =
      followPrefix(op.getResult(), op.getDim(), prefix);
  if (!gatheredUse)
    return failure();
  Value gathered = gatheredUse->get();
  auto user = dyn_cast<linalg::LinalgOp>(gatheredUse->getOwner());
  if (!user || !user.isDpsInput(gatheredUse))
    return failure();
  std::optional<unsigned> loop =
      loopOfOperandDim(user, *gatheredUse, gatheredDim);
  if (!loop)
    return failure();

  // Seen from the values: the probabilities' product with v. Walk back to
  // the scores and match from the keys.
  if (user.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction) {
    for (OpOperand *input : user.getDpsInputOperands()) {
      if (input->get() == gathered)
        continue;
      Value value = input->get();
      // Back through the cast, the division, the exponentials and the
      // score ops to the product whose operand is a gather.
      for (int hops = 0; hops < 16; ++hops) {
        if (isa_and_nonnull<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(
                value.getDefiningOp())) {
          value = value.getDefiningOp()->getOperand(0);
          continue;
        }
        auto def = value.getDefiningOp<linalg::LinalgOp>();
        if (!def || def.getNumDpsInputs() == 0)
          break;
        for (OpOperand *defInput : def.getDpsInputOperands())
          if (auto keys = gatherBehind(defInput->get());
              keys && keys != op && def.getNumReductionLoops() > 0) {
            FailureOr<RingAttention> match =
                matchRingAttention(keys, looksLike, reason);
            if (succeeded(match) && match->values != op) {
              reason = "the product with the keys' softmax reads another "
                       "value than this gather";
              return failure();
            }
            return match;
          }
        value = def.getDpsInputOperand(0)->get();
      }
    }
    return failure();
  }

  // From the keys: the scores' product.
  RingAttention m;
  m.keys = op;
  m.keysPrefix = prefix;
  m.scores = user;
  m.keysOperand = gatheredUse->getOperandNumber();
  m.keyLoop = *loop;
  std::optional<int64_t> keyDim = resultDimOfLoop(user, *loop);
  if (!keyDim || user->getNumResults() != 1 || !user.hasPureTensorSemantics() ||
      user.getNumReductionLoops() == 0)
    return failure();
  m.keyDim = *keyDim;

  // The score ops, elementwise along the keys, up to the value that both
  // the row max and the exponentials read.
  Value scores = user->getResult(0);
  while (scores.hasOneUse()) {
    OpOperand &use = *scores.getUses().begin();
    auto next = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (next && isElementwiseOn(next, use.getOperandNumber())) {
      m.scoreOps.push_back({next, use.getOperandNumber(),
                            static_cast<unsigned>(m.keyDim), m.keyDim});
    } else if (std::optional<int64_t> dim =
                   reshapedKeyDim(use.getOwner(), m.keyDim)) {
      m.scoreOps.push_back({use.getOwner(), 0, 0, *dim});
      m.keyDim = *dim;
    } else {
      return failure();
    }
    scores = use.getOwner()->getResult(0);
  }
  linalg::GenericOp max, exp, flagTest;
  unsigned expScores = 0;
  for (OpOperand &use : scores.getUses()) {
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (generic && !max && isRowReduction(generic, m.keyDim) &&
        (combinesArgs(yielded<arith::MaximumFOp>(generic), generic, 0, 1) ||
         combinesArgs(yielded<arith::MaxNumFOp>(generic), generic, 0, 1))) {
      max = generic;
    } else if (generic && !flagTest && isMinusInfTest(generic)) {
      flagTest = generic;
    } else if (generic && !exp) {
      exp = generic;
      expScores = use.getOperandNumber();
    } else {
      return failure();
    }
  }
  if (!max || !exp)
    return failure();
  // From here on it is a softmax over the keys: what refuses it says why.
  looksLike = true;
  auto refuse = [&](const Twine &why) {
    reason = why.str();
    return failure();
  };
  FailureOr<Ring> ring = matchRing(op, reason);
  if (failed(ring))
    return failure();
  m.ring = *ring;
  m.chunk = op.getInput().getType().getDimSize(op.getDim());
  m.max = max;
  AffineMap rows = max.getMatchingIndexingMap(max.getDpsInitOperand(0));

  // torch's safe softmax: whether every score of a row is -inf, reduced
  // over the keys with `and` from true.
  if (flagTest) {
    Value tested = flagTest->getResult(0);
    auto all = tested.hasOneUse()
                   ? dyn_cast<linalg::GenericOp>(*tested.getUsers().begin())
                   : linalg::GenericOp();
    BoolAttr start;
    if (!all || !isRowReduction(all, m.keyDim) ||
        !combinesArgs(yielded<arith::AndIOp>(all), all, 0, 1) ||
        all.getMatchingIndexingMap(all.getDpsInitOperand(0)) != rows)
      return refuse("the scores' test against -inf is not and-reduced over "
                    "the keys like the max");
    auto fill = all.getDpsInitOperand(0)->get().getDefiningOp<linalg::FillOp>();
    if (!fill || !matchPattern(fill.getInputs()[0], m_Constant(&start)) ||
        !start.getValue())
      return refuse("the and-reduction of the -inf test does not start "
                    "from true");
    m.flagTest = flagTest;
    m.flagAll = all;
  }

  // exp(s - max), as one op or a difference and its exponential.
  Value maxValue = max->getResult(0);
  if (!maxValue.hasOneUse() || *maxValue.getUsers().begin() != exp)
    return refuse("the row max is used besides the exponentials");
  m.exp = exp;
  m.expScores = expScores;
  m.expMax = maxValue.getUses().begin()->getOperandNumber();
  auto diff = yielded<arith::SubFOp>(exp);
  if (auto expOp = yielded<math::ExpOp>(exp)) {
    diff = expOp.getOperand().getDefiningOp<arith::SubFOp>();
  } else if (Value d = exp->getResult(0); d.hasOneUse()) {
    auto then = dyn_cast<linalg::GenericOp>(*d.getUsers().begin());
    auto expOp = then && then.getNumDpsInputs() == 1 && isElementwiseOn(then, 0)
                     ? yielded<math::ExpOp>(then)
                     : math::ExpOp();
    if (expOp && isArg(expOp.getOperand(), then, 0))
      m.expThen = then;
    else
      diff = {};
  } else {
    diff = {};
  }
  if (!isElementwiseOn(exp, expScores) ||
      exp.getIndexingMapsArray()[m.expMax] != rows || !diff ||
      !isArg(diff.getLhs(), exp, expScores) ||
      !isArg(diff.getRhs(), exp, m.expMax))
    return refuse("no exp(s - max) over the scores follows their row max");

  // Their row sum, and the division by it.
  Value exps = (m.expThen ? m.expThen : exp)->getResult(0);
  linalg::GenericOp sum, div;
  for (OpOperand &use : exps.getUses()) {
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (generic && isRowReduction(generic, m.keyDim) && !sum)
      sum = generic;
    else if (generic && !div && generic.getNumDpsInputs() == 2)
      div = generic, m.divExps = use.getOperandNumber();
    else
      return refuse("the exponentials are used besides their sum and the "
                    "division by it");
  }
  if (!sum || !div)
    return refuse("the exponentials are not divided by their row sum");
  m.sum = sum;
  m.div = div;
  if (!combinesArgs(yielded<arith::AddFOp>(sum), sum, 0, 1) ||
      sum.getMatchingIndexingMap(sum.getDpsInitOperand(0)) != rows)
    return refuse("the exponentials' reduction is not a row sum like the max");
  if (!isZeroFill(sum.getDpsInitOperand(0)->get()))
    return refuse("the row sum does not start from zero");
  Value sums = sum->getResult(0);
  if (!sums.hasOneUse() || *sums.getUsers().begin() != div)
    return refuse("the row sum is used besides the division");
  m.divSum = 1 - m.divExps;
  auto quotient = yielded<arith::DivFOp>(div);
  if (!isElementwiseOn(div, m.divExps) ||
      div.getIndexingMapsArray()[m.divSum] != rows || !quotient ||
      !isArg(quotient.getLhs(), div, m.divExps) ||
      !isArg(quotient.getRhs(), div, m.divSum))
    return refuse("the exponentials are not divided by their row sum");

  // The safe softmax's select of 0 for the rows masked whole, an optional
  // conversion, then the product with v along the keys.
  Value probs = div->getResult(0);
  if (!probs.hasOneUse())
    return refuse("the probabilities are used besides their product with v");
  OpOperand *probsUse = &*probs.getUses().begin();
  if (m.flagAll) {
    auto select = dyn_cast<linalg::GenericOp>(probsUse->getOwner());
    if (!m.flagAll->hasOneUse())
      return refuse("the rows' flag of scores all -inf is used besides the "
                    "select of 0");
    if (!select || !isSafeSelect(select, probsUse->getOperandNumber(),
                                 m.flagAll->getResult(0), rows))
      return refuse("the rows whose scores are all -inf are not given 0 "
                    "after the division");
    m.safeSelect = select;
    probs = select->getResult(0);
    if (!probs.hasOneUse())
      return refuse("the probabilities are used besides their product with v");
    probsUse = &*probs.getUses().begin();
  } else if (flagTest) {
    return refuse("the scores' test against -inf is used elsewhere");
  }
  if (auto convert = dyn_cast<linalg::GenericOp>(probsUse->getOwner());
      convert && convert.getNumDpsInputs() == 1 &&
      isElementwiseOn(convert, 0) &&
      isArg(cast<linalg::YieldOp>(convert.getBody()->getTerminator())
                .getValues()[0],
            convert, 0)) {
    m.convert = convert;
    probs = convert->getResult(0);
    if (!probs.hasOneUse())
      return refuse("the probabilities are used besides their product with v");
    probsUse = &*probs.getUses().begin();
  }
  // torch-mlir folds batch and heads before a batch matmul: the rows then
  // fold alike.
  int64_t probsKeyDim = m.keyDim;
  AffineMap probsRows = rows;
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(probsUse->getOwner())) {
    std::optional<int64_t> dim = reshapedKeyDim(collapse, m.keyDim);
    auto groups = collapse.getReassociationIndices();
    AffineMap projection =
        AffineMap::getMultiDimIdentityMap(rows.getNumDims(), rows.getContext())
            .dropResult(m.keyDim);
    if (!dim || groups[*dim].size() != 1 || rows != projection ||
        !collapse->hasOneUse())
      return refuse("the probabilities are reshaped before their product "
                    "other than by folding dims apart from the keys");
    for (const ReassociationIndices &group : groups) {
      if (group.front() == m.keyDim)
        continue;
      ReassociationIndices rowGroup;
      for (int64_t d : group)
        rowGroup.push_back(d > m.keyDim ? d - 1 : d);
      m.rowGroups.push_back(rowGroup);
    }
    m.probsCollapse = collapse;
    probsKeyDim = *dim;
    probsRows =
        AffineMap::getMultiDimIdentityMap(groups.size(), rows.getContext())
            .dropResult(probsKeyDim);
    probsUse = &*collapse->getUses().begin();
  }
  auto output = dyn_cast<linalg::LinalgOp>(probsUse->getOwner());
  if (!output || !linalg::isaContractionOpInterface(output) ||
      output->getNumResults() != 1 || !output.hasPureTensorSemantics())
    return refuse("the probabilities do not feed a contraction");
  m.output = output;
  m.probsOperand = probsUse->getOperandNumber();
  auto probsLoop = dyn_cast<AffineDimExpr>(
      output.getIndexingMapsArray()[m.probsOperand].getResult(probsKeyDim));
  if (!probsLoop || output.getIteratorTypesArray()[probsLoop.getPosition()] !=
                        utils::IteratorType::reduction)
    return refuse(nameOf(output) + " does not sum the probabilities over "
                                   "the keys");
  m.valueLoop = probsLoop.getPosition();
  if (!isZeroFill(output.getDpsInitOperand(0)->get()))
    return refuse("the product with v does not start from zero");
  for (OpOperand *input : output.getDpsInputOperands()) {
    if (input == probsUse)
      continue;
    auto values = gatherBehind(input->get());
    SmallVector<AttentionPrefix> valuesPrefix;
    auto [valuesUse, valuesDim] =
        values ? followPrefix(values.getResult(), values.getDim(), valuesPrefix)
               : std::pair<OpOperand *, int64_t>{nullptr, 0};
    if (!values || valuesUse != input)
      return refuse("the probabilities multiply a value that is not an "
                    "all-gather along the sequence read only there");
    m.valuesPrefix = valuesPrefix;
    std::optional<unsigned> along = loopOfOperandDim(output, *input, valuesDim);
    if (!along || *along != m.valueLoop)
      return refuse("v is gathered along another dimension than the keys' "
                    "the probabilities are summed over");
    if (values.getGridAttr() != op.getGridAttr() ||
        values.getAxes() != op.getAxes() ||
        values.getInput().getType().getDimSize(values.getDim()) != m.chunk)
      return refuse("k and v are gathered over different groups or blocks");

    m.values = values;
    m.valuesOperand = input->getOperandNumber();
  }
  if (!m.values)
    return refuse(nameOf(output) + " reads no gathered v");
  m.rowsInOutput = rowsInResult(output, m.probsOperand, probsRows);
  if (!m.rowsInOutput)
    return refuse("a row of the scores does not reach the output");
  // The block ops are rebuilt where the product with v was.
  SmallVector<Operation *> ops{user, max, exp, sum, div};
  for (const AttentionPrefix &p : m.scoreOps)
    ops.push_back(p.op);
  for (Operation *op : std::initializer_list<Operation *>{
           m.expThen, m.flagTest, m.flagAll, m.safeSelect, m.probsCollapse})
    if (op)
      ops.push_back(op);
  if (llvm::any_of(ops, [&](Operation *o) {
        return o->getBlock() != output->getBlock();
      }))
    return refuse("the attention spans several blocks");
  if (!m.scoreOps.empty())
    if (auto last = dyn_cast<linalg::GenericOp>(m.scoreOps.back().op))
      m.mask = blockMask(last);
  m.helperBlocker = checkHelper(m);
  return m;
}

int64_t overlap::attentionPieceSize(int64_t chunk, int64_t pieces) {
  if (pieces > 0)
    return chunk % pieces == 0 ? chunk / pieces : 0;
  // Enough keys per piece for the products to run near their peak, few
  // enough that the scores of one piece stay O(rows x head_dim).
  constexpr int64_t kMaxKeys = 512;
  for (int64_t size = std::min(chunk, kMaxKeys); size > 1; --size)
    if (chunk % size == 0)
      return size;
  return 1;
}

namespace {

/// A generic over `init`'s shape computing `body(args as f32)` into
/// `init`'s element type; `inputs` come with their maps from `init`'s dims.
Value rowwise(OpBuilder &b, Location loc, Value init,
              ArrayRef<std::pair<Value, AffineMap>> inputs,
              function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
  auto type = cast<RankedTensorType>(init.getType());
  SmallVector<Value> values;
  SmallVector<AffineMap> maps;
  for (auto [value, map] : inputs) {
    values.push_back(value);
    maps.push_back(map);
  }
  maps.push_back(b.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  Type f32 = b.getF32Type();
  auto generic = linalg::GenericOp::create(
      b, loc, type, values, init, maps, iterators,
      [&](OpBuilder &nested, Location at, ValueRange args) {
        SmallVector<Value> wide;
        for (Value arg : args.drop_back())
          wide.push_back(arg.getType() == f32
                             ? arg
                             : arith::ExtFOp::create(nested, at, f32, arg));
        Value result = body(nested, at, wide);
        Type element = type.getElementType();
        if (element != f32)
          result = arith::TruncFOp::create(nested, at, element, result);
        linalg::YieldOp::create(nested, at, result);
      });
  return generic.getResult(0);
}

Value emptyLike(OpBuilder &b, Location loc, Value value, Type element = {}) {
  auto type = cast<RankedTensorType>(value.getType());
  return tensor::EmptyOp::create(b, loc, type.getShape(),
                                 element ? element : type.getElementType());
}

} // namespace

namespace {

/// `value` computed again with `owner` for the rank's position along the
/// ring (the values a rank that computes another rank's rows reads for
/// that rank); `map` collects what is computed.
Value atPosition(RewriterBase &rewriter, Origins &origins, Value value,
                 Value owner, IRMapping &map) {
  if (Value known = map.lookupOrNull(value))
    return known;
  if (origins.of(value) != Origin::Position)
    return value;
  if (origins.isPosition(value)) {
    map.map(value, owner);
    return owner;
  }
  Operation *def = value.getDefiningOp();
  SetVector<Value> read(def->operand_begin(), def->operand_end());
  getUsedValuesDefinedAbove(def->getRegions(), read);
  for (Value v : read)
    atPosition(rewriter, origins, v, owner, map);
  rewriter.clone(*def, map);
  return map.lookup(value);
}

} // namespace

LogicalResult overlap::decomposeRingAttention(RewriterBase &rewriter,
                                              RingAttention m) {
  const Ring &ring = m.ring;
  int64_t n = ring.groupSize;
  Location loc = m.keys.getLoc();
  rewriter.setInsertionPoint(m.output);
  Value position = groupPosition(rewriter, loc, ring.grid, ring.axis);
  MLIRContext *ctx = rewriter.getContext();
  unsigned rowRank =
      cast<RankedTensorType>(m.max->getResult(0).getType()).getRank();
  AffineMap sameRows = AffineMap::getMultiDimIdentityMap(rowRank, ctx);
  // A tensor read whole by a generic over its own shape.
  auto whole = [&](Value v) -> std::pair<Value, AffineMap> {
    return {v, AffineMap::getMultiDimIdentityMap(
                   cast<RankedTensorType>(v.getType()).getRank(), ctx)};
  };
  Type probsElement =
      getElementTypeOrSelf(m.output->getOperand(m.probsOperand).getType());
  // A row tensor (max, sum) as the output's rows see it: folded like the
  // probabilities before their product.
  auto rowsOfOutput = [&](Value rowTensor) -> Value {
    if (m.rowGroups.empty())
      return rowTensor;
    return tensor::CollapseShapeOp::create(rewriter, loc, rowTensor,
                                           m.rowGroups);
  };
  float lowest = -std::numeric_limits<float>::infinity();
  auto index = [&](int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  };

  // The mask's e (masked iff e >= 0) bounded over a piece of keys from
  // `start`: its least value over every point (a piece masked whole when
  // >= 0), or with `rowsAtMost` its largest over the rows of its least
  // over the keys (every row has a key left when < 0); `pred` compares
  // it with 0. `rows` maps the rank's position to another rank's, whose
  // rows are bounded instead.
  auto maskBound = [&](Value start, bool rowsAtMost, arith::CmpIPredicate pred,
                       IRMapping *rows) -> Value {
    const AttentionMask &mask = *m.mask;
    auto plus = [&](Value a, Value b) {
      return arith::AddIOp::create(rewriter, loc, a, b).getResult();
    };
    auto times = [&](Value a, int64_t c) {
      return c == 1 ? a
                    : arith::MulIOp::create(rewriter, loc, a, index(c))
                          .getResult();
    };
    int64_t constant = mask.constant;
    for (auto [loop, coefficient] : llvm::enumerate(mask.loops))
      if (static_cast<int64_t>(loop) != m.keyDim &&
          (coefficient > 0) == rowsAtMost)
        constant += coefficient * (mask.extents[loop] - 1);
    int64_t key = mask.loops[m.keyDim];
    if (key < 0)
      constant += key * (m.pieceSize - 1);
    Value bound = index(constant);
    if (key != 0)
      bound = plus(bound, times(start, key));
    for (auto [symbol, coefficient] : mask.symbols)
      if (coefficient != 0)
        bound = plus(bound, times(rows ? rows->lookupOrDefault(symbol) : symbol,
                                  coefficient));
    return arith::CmpIOp::create(rewriter, loc, pred, bound, index(0));
  };

  // One op of the chain on the keys [offset, offset + pieceSize), for this
  // rank's rows or, through `rows`, for another rank's: a copy of the op
  // that reads that rank's q and values computed for its position.
  auto chunk = [&](linalg::LinalgOp op, unsigned loop, OpFoldResult offset,
                   ArrayRef<std::pair<unsigned, Value>> replacements,
                   Value init, IRMapping *rows) -> FailureOr<Value> {
    Operation *copy = nullptr;
    if (rows) {
      IRMapping map = *rows; // The copy's own values stay out of `rows`.
      copy = rewriter.clone(*op, map);
      op = cast<linalg::LinalgOp>(copy);
    }
    FailureOr<Chunk> c = computeChunk(rewriter, op, loop, offset, m.pieceSize,
                                      replacements, init);
    if (copy)
      rewriter.eraseOp(copy);
    if (failed(c))
      return failure();
    return c->value;
  };

  // Ops that keep the keys apart, on a piece: what reads the gathered k
  // and v before the products (GQA: its kv heads repeated for the q
  // heads), or the score ops after the product (for the rows of `rows`).
  auto through = [&](Value block, OpFoldResult offset,
                     ArrayRef<AttentionPrefix> prefix,
                     IRMapping *rows) -> FailureOr<Value> {
    for (const AttentionPrefix &p : prefix) {
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(p.op)) {
        FailureOr<Value> next = chunk(linalgOp, p.loop, offset,
                                      {{p.operand, block}}, Value(), rows);
        if (failed(next))
          return failure();
        block = *next;
        continue;
      }
      auto type = cast<RankedTensorType>(p.op->getResult(0).getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[p.dim] = m.pieceSize;
      auto pieceType = type.clone(shape);
      if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(p.op))
        block =
            tensor::CollapseShapeOp::create(rewriter, loc, pieceType, block,
                                            collapse.getReassociationIndices());
      else
        block = tensor::ExpandShapeOp::create(
            rewriter, loc, pieceType, block,
            cast<tensor::ExpandShapeOp>(p.op).getReassociationIndices());
    }
    return block;
  };

  /// A set of rows' running max, sum and rescaled output.
  struct State {
    Value max, sums, out;
  };
  auto rowsTimes = [](OpBuilder &b, Location at, ValueRange args) -> Value {
    return arith::MulFOp::create(b, at, args[0], args[1]);
  };
  // The max as exp subtracts it: 0 for a row whose scores so far are all
  // -inf, so that exp gives 0 rather than exp(-inf + inf).
  auto safeOf = [&](Value max) {
    return rowwise(
        rewriter, loc, emptyLike(rewriter, loc, max), {{max, sameRows}},
        [&](OpBuilder &b, Location at, ValueRange args) {
          Value low =
              arith::ConstantOp::create(b, at, b.getF32FloatAttr(lowest));
          Value zero = arith::ConstantOp::create(b, at, b.getF32FloatAttr(0));
          Value none = arith::CmpFOp::create(b, at, arith::CmpFPredicate::OEQ,
                                             args[0], low);
          return arith::SelectOp::create(b, at, none, zero, args[0]);
        });
  };
  // exp(old - safe): what rows kept under `old` are scaled by.
  auto scaleOf = [&](Value old, Value safe) {
    return rowwise(rewriter, loc, emptyLike(rewriter, loc, old),
                   {{old, sameRows}, {safe, sameRows}},
                   [](OpBuilder &b, Location at, ValueRange args) {
                     Value d = arith::SubFOp::create(b, at, args[0], args[1]);
                     return math::ExpOp::create(b, at, d);
                   });
  };

  // Scores the block of keys and values of rank `owner` for this rank's
  // rows, or through `rows` for another rank's, into `state` (none: the
  // rows' first block), a piece of keys at a time, its pieces [begin, end).
  // Under a causal mask, a piece whose keys are masked for every row is
  // skipped once `covered` (the rows' own first piece left every row a key
  // that is not) and a state is at hand: this rank's first piece never is,
  // and another rank's rows start from `nothingScored`.
  int64_t pieces = m.chunk / m.pieceSize;
  auto attend = [&](std::optional<State> state, Value keys, Value values,
                    Value owner, Value covered, IRMapping *rows, int64_t begin,
                    int64_t end) -> FailureOr<State> {
    for (int64_t piece = begin; piece < end; ++piece) {
      bool first = !state;
      Value offsetValue =
          affineIndex(rewriter, loc, owner, m.chunk, piece * m.pieceSize);
      OpFoldResult offset = offsetValue;
      scf::IfOp skipped;
      if (covered && state) {
        Value skip =
            arith::AndIOp::create(rewriter, loc, covered,
                                  maskBound(offsetValue, /*rowsAtMost=*/false,
                                            arith::CmpIPredicate::sge, rows));
        SmallVector<Value, 3> kept{state->max, state->sums, state->out};
        skipped = scf::IfOp::create(rewriter, loc, ValueRange(kept).getTypes(),
                                    skip, /*withElseRegion=*/true);
        rewriter.setInsertionPointToStart(skipped.thenBlock());
        scf::YieldOp::create(rewriter, loc, kept);
        rewriter.setInsertionPointToStart(skipped.elseBlock());
      }
      Value keyPiece = keys, valuePiece = values;
      if (m.pieceSize != m.chunk) {
        keyPiece =
            sliceAlong(rewriter, loc, keys, m.keys.getDim(),
                       rewriter.getIndexAttr(piece * m.pieceSize), m.pieceSize);
        valuePiece =
            sliceAlong(rewriter, loc, values, m.values.getDim(),
                       rewriter.getIndexAttr(piece * m.pieceSize), m.pieceSize);
      }
      FailureOr<Value> keysIn =
          through(keyPiece, offset, m.keysPrefix, /*rows=*/nullptr);
      FailureOr<Value> valuesIn =
          through(valuePiece, offset, m.valuesPrefix, /*rows=*/nullptr);
      if (failed(keysIn) || failed(valuesIn))
        return failure();
      keyPiece = *keysIn;
      valuePiece = *valuesIn;
      FailureOr<Value> scores =
          chunk(m.scores, m.keyLoop, offset, {{m.keysOperand, keyPiece}},
                Value(), rows);
      if (succeeded(scores))
        scores = through(*scores, offset, m.scoreOps, rows);
      if (failed(scores))
        return failure();
      FailureOr<Value> newMax = chunk(m.max, m.keyDim, offset, {{0, *scores}},
                                      first ? Value() : state->max, rows);
      if (failed(newMax))
        return failure();
      Value safeMax = safeOf(*newMax);
      FailureOr<Value> exps =
          chunk(m.exp, m.keyDim, offset,
                {{m.expScores, *scores}, {m.expMax, safeMax}}, Value(), rows);
      if (succeeded(exps) && m.expThen)
        exps = chunk(m.expThen, m.keyDim, offset, {{0, *exps}}, Value(), rows);
      if (failed(exps))
        return failure();
      Value scale = first ? Value() : scaleOf(state->max, safeMax);
      Value sumInit;
      if (!first)
        sumInit =
            rowwise(rewriter, loc, emptyLike(rewriter, loc, state->sums),
                    {{state->sums, sameRows}, {scale, sameRows}}, rowsTimes);
      FailureOr<Value> newSums =
          chunk(m.sum, m.keyDim, offset, {{0, *exps}}, sumInit, rows);
      if (failed(newSums))
        return failure();
      Value probs = *exps;
      if (getElementTypeOrSelf(probs.getType()) != probsElement)
        probs = rowwise(
            rewriter, loc, emptyLike(rewriter, loc, probs, probsElement),
            {whole(probs)},
            [](OpBuilder &, Location, ValueRange args) { return args[0]; });
      if (m.probsCollapse)
        probs = tensor::CollapseShapeOp::create(
            rewriter, loc, probs, m.probsCollapse.getReassociationIndices());
      Value outInit;
      if (!first)
        outInit =
            rowwise(rewriter, loc, emptyLike(rewriter, loc, state->out),
                    {whole(state->out), {rowsOfOutput(scale), m.rowsInOutput}},
                    rowsTimes);
      FailureOr<Value> newOut =
          chunk(m.output, m.valueLoop, offset,
                {{m.probsOperand, probs}, {m.valuesOperand, valuePiece}},
                outInit, rows);
      if (failed(newOut))
        return failure();
      state = State{*newMax, *newSums, *newOut};
      if (skipped) {
        scf::YieldOp::create(rewriter, loc,
                             ValueRange{state->max, state->sums, state->out});
        rewriter.setInsertionPointAfter(skipped);
        state = State{skipped.getResult(0), skipped.getResult(1),
                      skipped.getResult(2)};
      }
    }
    return *state;
  };

  // Rows nothing was scored for yet, as the rescaling reads a state: a max
  // of -inf (exp(-inf - m) = 0 scales the zeros away), not the max op's
  // init, which is only its reduction's identity (NaN for the maxnumf of a
  // decomposed linalg.softmax). Fills of their own: a partial's buffers
  // travel while later steps run, so they must not be the ones the ops'
  // shared inits bufferize to (written again in place before the transfer
  // is done).
  auto nothingScored = [&]() -> State {
    auto filled = [&](Value like, TypedAttr value) {
      Value constant = arith::ConstantOp::create(rewriter, loc, value);
      return linalg::FillOp::create(rewriter, loc, constant,
                                    emptyLike(rewriter, loc, like))
          .getResult(0);
    };
    auto zero = [&](Value like) {
      return filled(like, rewriter.getZeroAttr(getElementTypeOrSelf(like)));
    };
    Value max = m.max->getResult(0);
    auto element = cast<FloatType>(getElementTypeOrSelf(max));
    APFloat none = APFloat::getInf(element.getFloatSemantics(),
                                   /*Negative=*/true);
    return State{filled(max, rewriter.getFloatAttr(element, none)),
                 zero(m.sum->getResult(0)), zero(m.output->getResult(0))};
  };

  // Two sets of partial results for the same rows, over disjoint keys.
  auto merge = [&](const State &a, const State &b) -> State {
    Value max =
        rowwise(rewriter, loc, emptyLike(rewriter, loc, a.max),
                {{a.max, sameRows}, {b.max, sameRows}},
                [](OpBuilder &bb, Location at, ValueRange args) -> Value {
                  return arith::MaximumFOp::create(bb, at, args[0], args[1]);
                });
    Value safe = safeOf(max);
    Value scaleA = scaleOf(a.max, safe), scaleB = scaleOf(b.max, safe);
    auto sumOfProducts = [](OpBuilder &bb, Location at,
                            ValueRange args) -> Value {
      Value x = arith::MulFOp::create(bb, at, args[0], args[1]);
      Value y = arith::MulFOp::create(bb, at, args[2], args[3]);
      return arith::AddFOp::create(bb, at, x, y);
    };
    Value sums = rowwise(rewriter, loc, emptyLike(rewriter, loc, a.sums),
                         {{a.sums, sameRows},
                          {scaleA, sameRows},
                          {b.sums, sameRows},
                          {scaleB, sameRows}},
                         sumOfProducts);
    Value out = rowwise(rewriter, loc, emptyLike(rewriter, loc, a.out),
                        {whole(a.out),
                         {rowsOfOutput(scaleA), m.rowsInOutput},
                         whole(b.out),
                         {rowsOfOutput(scaleB), m.rowsInOutput}},
                        sumOfProducts);
    return State{max, sums, out};
  };

  // The balanced ring: at step d a rank holds the k, v and q of rank
  // r - d. It scores its own rows against those keys (below the diagonal
  // when r >= d) and, for d < n - d, the rows of rank r - d against its
  // own keys (below the diagonal when r < d), returning that partial by
  // a shift of -d. Every pair of blocks is scored once, by n / 2 + 1 steps.
  // At d = n / 2 (n even) the pair is the same both ways: with several
  // pieces of keys the holder scores the first half of them and the
  // owner of the keys the second half, so that no rank idles.
  bool balance = m.balance && n > 2;
  int64_t steps = balance ? n / 2 + 1 : n;
  bool splitLast = balance && n % 2 == 0 && pieces > 1;
  auto helps = [&](int64_t d) {
    return balance && d >= 1 && (d < n - d || (splitLast && d == n - d));
  };
  // The pieces of the held block a rank scores for its own rows at step d.
  auto ownEnd = [&](int64_t d) {
    return splitLast && d == n - d ? pieces / 2 : pieces;
  };
  SmallVector<unsigned> qOperands;
  SmallVector<Value> qHeld;
  for (OpOperand *input : m.scores.getDpsInputOperands())
    if (input->getOperandNumber() != m.keysOperand) {
      qOperands.push_back(input->getOperandNumber());
      qHeld.push_back(input->get());
    }
  SmallVector<std::pair<Value, Value>> qInFlight(qHeld.size());
  Origins origins(ring);

  Value ownKeys = m.keys.getInput(), ownValues = m.values.getInput();
  Value keys = ownKeys, values = ownValues;
  std::pair<Value, Value> keysInFlight, valuesInFlight;
  Value covered;
  std::optional<State> state;
  SmallVector<std::array<std::pair<Value, Value>, 3>> returning;
  for (int64_t step = 0; step < steps; ++step) {
    if (step > 0) {
      keys = waitFor(rewriter, loc, keysInFlight);
      values = waitFor(rewriter, loc, valuesInFlight);
      if (helps(step))
        for (auto [held, inFlight] : llvm::zip(qHeld, qInFlight))
          held = waitFor(rewriter, loc, inFlight);
    }
    if (step < steps - 1) {
      keysInFlight = startShift(rewriter, loc, keys, ring.grid, ring.axis,
                                /*offset=*/1, step);
      valuesInFlight = startShift(rewriter, loc, values, ring.grid, ring.axis,
                                  /*offset=*/1, step);
      if (helps(step + 1))
        for (auto [held, inFlight] : llvm::zip(qHeld, qInFlight))
          inFlight = startShift(rewriter, loc, held, ring.grid, ring.axis,
                                /*offset=*/1, step);
    }
    if (step == 0 && m.mask)
      covered =
          maskBound(affineIndex(rewriter, loc, position, m.chunk, 0),
                    /*rowsAtMost=*/true, arith::CmpIPredicate::slt, nullptr);
    // The block held at this step came from `step` ranks back; its keys
    // are taken `m.pieceSize` at a time, so that a rank holds the scores
    // of one piece at a time.
    Value owner = ringIndex(rewriter, loc, position, -step, n);
    FailureOr<State> next = attend(state, keys, values, owner, covered,
                                   /*rows=*/nullptr, 0, ownEnd(step));
    if (failed(next))
      return failure();
    state = *next;
    if (!helps(step))
      continue;
    // The owner's rows against this rank's keys, returned to the owner.
    IRMapping rows;
    for (auto [number, held] : llvm::zip(qOperands, qHeld))
      rows.map(m.scores->getOperand(number), held);
    for (Value value : m.positional)
      atPosition(rewriter, origins, value, owner, rows);
    Value ownerCovered;
    if (m.mask)
      ownerCovered =
          maskBound(affineIndex(rewriter, loc, owner, m.chunk, 0),
                    /*rowsAtMost=*/true, arith::CmpIPredicate::slt, &rows);
    FailureOr<State> partial =
        attend(nothingScored(), ownKeys, ownValues, position, ownerCovered,
               &rows, step == n - step ? ownEnd(step) : 0, pieces);
    if (failed(partial))
      return failure();
    auto back = [&](Value v) {
      return startShift(rewriter, loc, v, ring.grid, ring.axis,
                        /*offset=*/n - step, step);
    };
    returning.push_back(
        {back(partial->max), back(partial->sums), back(partial->out)});
  }
  // The partials other ranks computed for these rows.
  for (auto &[max, sums, out] : returning)
    state = merge(*state, State{waitFor(rewriter, loc, max),
                                waitFor(rewriter, loc, sums),
                                waitFor(rewriter, loc, out)});
  Value sums = state->sums, out = state->out;
  // Under torch's safe softmax a row whose scores are all -inf gives 0;
  // its sum is then 0 (the others' is at least 1: their max's exp).
  bool safe = static_cast<bool>(m.safeSelect);
  Value result = rowwise(
      rewriter, loc, emptyLike(rewriter, loc, out),
      {whole(out), {rowsOfOutput(sums), m.rowsInOutput}},
      [&](OpBuilder &b, Location at, ValueRange args) -> Value {
        Value quotient = arith::DivFOp::create(b, at, args[0], args[1]);
        if (!safe)
          return quotient;
        Value zero = arith::ConstantOp::create(b, at, b.getF32FloatAttr(0));
        Value none = arith::CmpFOp::create(b, at, arith::CmpFPredicate::OEQ,
                                           args[1], zero);
        return arith::SelectOp::create(b, at, none, zero, quotient);
      });
  rewriter.replaceOp(m.output, result);
  SmallVector<Operation *> dead;
  if (m.probsCollapse)
    dead.push_back(m.probsCollapse);
  if (m.convert)
    dead.push_back(m.convert);
  if (m.safeSelect)
    dead.append({m.safeSelect, m.flagAll, m.flagTest});
  dead.append({m.div, m.sum});
  if (m.expThen)
    dead.push_back(m.expThen);
  dead.append({m.exp, m.max});
  for (const AttentionPrefix &p : llvm::reverse(m.scoreOps))
    dead.push_back(p.op);
  dead.push_back(m.scores);
  for (const AttentionPrefix &p : llvm::reverse(m.keysPrefix))
    dead.push_back(p.op);
  for (const AttentionPrefix &p : llvm::reverse(m.valuesPrefix))
    dead.push_back(p.op);
  dead.append({m.values, m.keys});
  for (Operation *op : dead)
    if (op->use_empty())
      rewriter.eraseOp(op);
  return success();
}
