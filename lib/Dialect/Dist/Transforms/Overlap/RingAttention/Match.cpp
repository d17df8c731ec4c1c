//===- Match.cpp - The attention a gather of k or v feeds -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// From a gather of k (or, for braid-tile-attention, from any product of q
// and k): the scores' product with q, the score ops along the keys, the
// row max, exp(s - max), the row sum, the division by it (with torch's
// safe softmax and a conversion around it), and the probabilities' product
// with the gather of v. Once the scores are reduced over the keys (a
// softmax's sign), every part that does not match is a refusal with its
// reason. The helpers of Body.cpp read the softmax's spellings (reciprocals,
// select-based max, scales inside exp, the division after the product).
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::overlap::attention;
using namespace braid::dist::schedule;

namespace {

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

/// The ops between a gather and the product reading it that keep each
/// key separate (GQA's broadcast of k/v over the q heads and the reshape
/// folding the copies into the heads, a transpose of k; any linalg op
/// whose loops are all parallel): the ring applies them to each block
/// instead, so that it carries the gathered tensor as it is. Returns the
/// product's use and the dimension of its operand that the keys index.
std::pair<OpOperand *, int64_t>
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
AllGatherOp gatherBehind(Value value) {
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

/// Whether `use` of the scores (whose keys' dimension is `keyDim`) is read
/// by a linalg op that reduces over the keys: a softmax's sign.
bool reducesKeys(OpOperand &use, int64_t keyDim) {
  auto op = dyn_cast<linalg::LinalgOp>(use.getOwner());
  if (!op || !op.isDpsInput(&use))
    return false;
  std::optional<unsigned> loop = loopOfOperandDim(op, use, keyDim);
  return loop &&
         op.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction;
}

/// Matches one attention from its gather of k, a part at a time; each part
/// fails silently until the scores are seen reduced over the keys, and
/// with a reason (`looksLike` set) from there on.
class Matcher {
public:
  /// `keys` is null for an attention whose k and v are local.
  Matcher(AllGatherOp keys, bool &looksLike, std::string &reason)
      : op(keys), looksLike(looksLike), reason(reason) {}

  FailureOr<RingAttention> run(OpOperand *product, unsigned loop,
                               ArrayRef<AttentionPrefix> prefix);

private:
  LogicalResult refuse(const Twine &why) {
    reason = why.str();
    return failure();
  }
  LogicalResult matchScoreOps();
  LogicalResult matchFanOut();
  LogicalResult matchFlag();
  LogicalResult matchExp();
  LogicalResult matchSumAndDivision();
  LogicalResult matchDivisor(linalg::GenericOp op, unsigned numerator,
                             AffineMap rowsMap);
  LogicalResult matchProbabilities();
  LogicalResult matchDivisionAfter();
  LogicalResult matchOutput();
  LogicalResult matchValues();
  LogicalResult finish();

  AllGatherOp op;
  bool &looksLike;
  std::string &reason;
  RingAttention m;
  /// The scores as the max and the exponentials read them, and the rows'
  /// map (the max's result) from their dims.
  Value scores;
  AffineMap rows;
  /// The probabilities' use on the way to their product with v, the
  /// dimension of the keys and the rows' map there.
  OpOperand *probsUse = nullptr;
  int64_t probsKeyDim = 0;
  AffineMap probsRows;
};

FailureOr<RingAttention> Matcher::run(OpOperand *product, unsigned loop,
                                      ArrayRef<AttentionPrefix> prefix) {
  auto user = cast<linalg::LinalgOp>(product->getOwner());
  m.keys = op;
  m.keysPrefix.assign(prefix.begin(), prefix.end());
  m.scores = user;
  m.keysOperand = product->getOperandNumber();
  m.keyLoop = loop;
  std::optional<int64_t> keyDim = resultDimOfLoop(user, loop);
  if (!keyDim || user->getNumResults() != 1 || !user.hasPureTensorSemantics() ||
      user.getNumReductionLoops() == 0)
    return failure();
  m.keyDim = *keyDim;
  if (failed(matchScoreOps()) || failed(matchFanOut())) {
    // Without a gather, a product reduced over its columns otherwise (a
    // norm after a projection) is no attention, and no reason is given.
    if (!op)
      looksLike = false;
    return failure();
  }
  // From here on it is a softmax over the keys: what refuses it says why.
  looksLike = true;
  if (op) {
    FailureOr<Ring> ring = matchRing(op, reason);
    if (failed(ring))
      return failure();
    m.ring = *ring;
    m.chunk = op.getInput().getType().getDimSize(op.getDim());
  }
  rows = m.max.getMatchingIndexingMap(m.max.getDpsInitOperand(0));
  if (failed(matchFlag()) || failed(matchExp()) ||
      failed(matchSumAndDivision()) || failed(matchProbabilities()) ||
      failed(matchOutput()) || failed(matchValues()) ||
      failed(matchDivisionAfter()) || failed(finish()))
    return failure();
  return m;
}

/// The score ops, elementwise along the keys, up to the value that both
/// the row max and the exponentials read.
LogicalResult Matcher::matchScoreOps() {
  scores = m.scores->getResult(0);
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
      if (!reducesKeys(use, m.keyDim))
        return failure();
      looksLike = true;
      return refuse(
          "the scores are reduced over the keys only by " +
          quoted(use.getOwner()) +
          ": a softmax reads them in its row max and in exp(s - max)");
    }
    scores = use.getOwner()->getResult(0);
  }
  return success();
}

/// The scores' readers: the row max, exp(s - max), and torch's test of
/// each score against -inf.
LogicalResult Matcher::matchFanOut() {
  linalg::GenericOp max, exp, flagTest;
  unsigned expScores = 0;
  Operation *other = nullptr;
  for (OpOperand &use : scores.getUses()) {
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    if (generic && !max && isRowReduction(generic, m.keyDim) &&
        isMaxCombiner(generic)) {
      max = generic;
    } else if (generic && !flagTest && isMinusInfTest(generic)) {
      flagTest = generic;
    } else if (generic && !exp && !reducesKeys(use, m.keyDim)) {
      exp = generic;
      expScores = use.getOperandNumber();
    } else {
      other = use.getOwner();
    }
  }
  bool reduced = llvm::any_of(scores.getUses(), [&](OpOperand &use) {
    return reducesKeys(use, m.keyDim);
  });
  if (max && exp && !other) {
    m.max = max;
    m.exp = exp;
    m.expScores = expScores;
    m.flagTest = flagTest;
    return success();
  }
  if (!reduced)
    return failure();
  looksLike = true;
  if (!max)
    return refuse("the scores' reduction over the keys is not a row max "
                  "(the larger of the score and the running value)");
  if (!exp)
    return refuse("no elementwise op reads the scores besides their row max "
                  "(exp(s - max))");
  return refuse("the scores are read by " + quoted(other) +
                " besides their row max and exp(s - max)");
}

/// torch's safe softmax: whether every score of a row is -inf, reduced
/// over the keys with `and` from true.
LogicalResult Matcher::matchFlag() {
  if (!m.flagTest)
    return success();
  Value tested = m.flagTest->getResult(0);
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
  m.flagAll = all;
  return success();
}

/// exp(c (s - max)), as one op or a difference and its exponential.
LogicalResult Matcher::matchExp() {
  linalg::GenericOp exp = m.exp;
  Value maxValue = m.max->getResult(0);
  if (!maxValue.hasOneUse() || *maxValue.getUsers().begin() != exp)
    return refuse("the row max is used besides the exponentials");
  m.expMax = maxValue.getUses().begin()->getOperandNumber();
  if (!isElementwiseOn(exp, m.expScores) ||
      exp.getIndexingMapsArray()[m.expMax] != rows)
    return refuse("no exp(s - max) over the scores follows their row max");
  std::optional<double> factor =
      exponentFactor(exp, m.expScores, m.expMax, linalg::GenericOp());
  if (!factor) {
    // The difference, then its exponential in an op of its own.
    Value d = exp->getResult(0);
    auto then = d.hasOneUse()
                    ? dyn_cast<linalg::GenericOp>(*d.getUsers().begin())
                    : linalg::GenericOp();
    if (then && then.getNumDpsInputs() == 1 && isElementwiseOn(then, 0))
      factor = exponentFactor(exp, m.expScores, m.expMax, then);
    if (factor)
      m.expThen = then;
  }
  if (!factor)
    return refuse("no exp(s - max) over the scores follows their row max "
                  "(an exponential, exp or exp2, of the difference or of "
                  "a positive multiple of it)");
  m.expFactor = *factor;
  return success();
}

/// The exponentials' row sum, and the division by it: by the sum or as a
/// product with its reciprocal, before the product with v (or after it:
/// matchDivisionAfter).
LogicalResult Matcher::matchSumAndDivision() {
  Value exps = (m.expThen ? m.expThen : m.exp)->getResult(0);
  linalg::GenericOp sum, div;
  unsigned divExps = 0;
  for (OpOperand &use : exps.getUses()) {
    auto generic = dyn_cast<linalg::GenericOp>(use.getOwner());
    bool reciprocal = false;
    if (generic && isRowReduction(generic, m.keyDim) && !sum)
      sum = generic;
    else if (generic && !div && generic.getNumDpsInputs() == 2 &&
             isElementwiseOn(generic, use.getOperandNumber()) &&
             quotientDenominator(generic, use.getOperandNumber(), reciprocal))
      div = generic, divExps = use.getOperandNumber();
    else if (!probsUse)
      probsUse = &use;
    else
      return refuse("the exponentials are used besides their sum and the "
                    "division by it");
  }
  if (!sum || (!div && !probsUse))
    return refuse("the exponentials are not divided by their row sum");
  m.sum = sum;
  m.div = div;
  if (!combinesArgs(yielded<arith::AddFOp>(sum), sum, 0, 1) ||
      sum.getMatchingIndexingMap(sum.getDpsInitOperand(0)) != rows)
    return refuse("the exponentials' reduction is not a row sum like the max");
  if (!isZeroFill(sum.getDpsInitOperand(0)->get()))
    return refuse("the row sum does not start from zero");
  // 1 / sum in an op of its own, multiplied by.
  Value sums = sum->getResult(0);
  if (sums.hasOneUse())
    if (auto inverse = dyn_cast<linalg::GenericOp>(*sums.getUsers().begin());
        isReciprocal(inverse) &&
        inverse.getMatchingIndexingMap(inverse.getDpsInitOperand(0))
            .isIdentity())
      m.reciprocal = inverse;
  if (!div) {
    // The product with v comes first (flash attention's order).
    if (m.flagTest)
      return refuse("torch's safe softmax divides before the product with v");
    return success();
  }
  if (probsUse)
    return refuse("the exponentials are used besides their sum and the "
                  "division by it");
  return matchDivisor(div, divExps, rows);
}

/// That `op` divides its operand `numerator` by the row sum, read through
/// `rowsMap` (or multiplies it by the sum's reciprocal).
LogicalResult Matcher::matchDivisor(linalg::GenericOp op, unsigned numerator,
                                    AffineMap rowsMap) {
  Value sums = m.sum->getResult(0);
  Value denominator = m.reciprocal ? m.reciprocal->getResult(0) : sums;
  if (!sums.hasOneUse() ||
      (m.reciprocal &&
       (!denominator.hasOneUse() || *denominator.getUsers().begin() != op)) ||
      (!m.reciprocal && *sums.getUsers().begin() != op))
    return refuse("the row sum is used besides the division");
  bool byReciprocal = false;
  std::optional<unsigned> divisor =
      quotientDenominator(op, numerator, byReciprocal);
  if (!divisor || byReciprocal != static_cast<bool>(m.reciprocal) ||
      op.getDpsInputOperand(*divisor)->get() != denominator ||
      op.getIndexingMapsArray()[*divisor] != rowsMap)
    return refuse("the exponentials are not divided by their row sum");
  return success();
}

/// The safe softmax's select of 0 for the rows masked whole, an optional
/// conversion, and a reshape folding the rows, up to the product with v.
LogicalResult Matcher::matchProbabilities() {
  Value probs;
  if (m.div) {
    probs = m.div->getResult(0);
    if (!probs.hasOneUse())
      return refuse("the probabilities are used besides their product with v");
    probsUse = &*probs.getUses().begin();
  }
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
  } else if (m.flagTest) {
    return refuse("the scores' test against -inf is used elsewhere");
  }
  // Casts: to another float type, or rounded to a narrower one and widened
  // back (one op or two).
  while (auto convert = dyn_cast<linalg::GenericOp>(probsUse->getOwner())) {
    // The probabilities its input (not its init), cast and yielded.
    if (convert.getNumDpsInputs() != 1 || probsUse->getOperandNumber() != 0 ||
        !isElementwiseOn(convert, 0))
      break;
    Value yielded = cast<linalg::YieldOp>(convert.getBody()->getTerminator())
                        .getValues()[0];
    if (!isArg(yielded, convert, 0))
      break;
    // The types the casts pass through (extf and truncf, to the yield).
    for (Value v = yielded; v != convert.getBody()->getArgument(0);
         v = v.getDefiningOp()->getOperand(0)) {
      auto type = cast<FloatType>(v.getType());
      if (!m.probsRounding ||
          type.getWidth() < m.probsRounding.getIntOrFloatBitWidth())
        m.probsRounding = type;
    }
    m.converts.push_back(convert);
    probs = convert->getResult(0);
    if (!probs.hasOneUse())
      return refuse("the probabilities are used besides their product with v");
    probsUse = &*probs.getUses().begin();
  }
  // torch-mlir folds batch and heads before a batch matmul: the rows then
  // fold alike.
  probsKeyDim = m.keyDim;
  probsRows = rows;
  auto collapse = dyn_cast<tensor::CollapseShapeOp>(probsUse->getOwner());
  if (!collapse)
    return success();
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
  return success();
}

/// The probabilities' product with v, summing over the keys.
LogicalResult Matcher::matchOutput() {
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
    return refuse(quoted(output) + " does not sum the probabilities over "
                                   "the keys");
  m.valueLoop = probsLoop.getPosition();
  if (!isZeroFill(output.getDpsInitOperand(0)->get()))
    return refuse("the product with v does not start from zero");
  return success();
}

/// v: an all-gather over the same group and blocks as k, read only there
/// (for local attention, the product's other input).
LogicalResult Matcher::matchValues() {
  linalg::LinalgOp output = m.output;
  if (!op) {
    if (output.getNumDpsInputs() != 2)
      return refuse(quoted(output) + " does not multiply the probabilities "
                                     "by one value");
    m.valuesOperand = 1 - m.probsOperand;
    return success();
  }
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
    return refuse(quoted(output) + " reads no gathered v");
  return success();
}

/// The rows as the output holds them; with the division after the
/// product, that division: the output's one user, dividing it by the row
/// sum (or multiplying it by its reciprocal) at the rows.
LogicalResult Matcher::matchDivisionAfter() {
  m.rowsInOutput = rowsInResult(m.output, m.probsOperand, probsRows);
  if (!m.rowsInOutput)
    return refuse("a row of the scores does not reach the output");
  if (m.div)
    return success();
  Value out = m.output->getResult(0);
  auto after = out.hasOneUse()
                   ? dyn_cast<linalg::GenericOp>(*out.getUsers().begin())
                   : linalg::GenericOp();
  unsigned numerator =
      out.hasOneUse() ? out.getUses().begin()->getOperandNumber() : 0;
  if (!after || after.getNumDpsInputs() != 2 ||
      !isElementwiseOn(after, numerator))
    return refuse("the exponentials are not divided by their row sum, "
                  "before the product with v or after it");
  if (failed(matchDivisor(after, numerator, m.rowsInOutput)))
    return failure();
  m.divAfter = after;
  return success();
}

/// One block for every op, the mask, and whether a rank can compute
/// another's rows.
LogicalResult Matcher::finish() {
  // The block ops are rebuilt where the product with v was.
  SmallVector<Operation *> ops{m.scores, m.max, m.exp, m.sum};
  for (const AttentionPrefix &p : m.scoreOps)
    ops.push_back(p.op);
  for (Operation *op : std::initializer_list<Operation *>{
           m.div, m.reciprocal, m.divAfter, m.expThen, m.flagTest, m.flagAll,
           m.safeSelect, m.probsCollapse})
    if (op)
      ops.push_back(op);
  if (llvm::any_of(ops, [&](Operation *o) {
        return o->getBlock() != m.output->getBlock();
      }))
    return refuse("the attention spans several blocks");
  if (!m.scoreOps.empty())
    if (auto last = dyn_cast<linalg::GenericOp>(m.scoreOps.back().op))
      m.mask = blockMask(last);
  if (op)
    m.helperBlocker = checkHelper(m);
  return success();
}

/// Seen from the values: the probabilities' product with v. Walks back
/// through the cast, the division, the exponentials and the score ops to
/// the product whose operand is a gather, and matches from there.
FailureOr<RingAttention> fromValues(AllGatherOp op, linalg::LinalgOp user,
                                    Value gathered, bool &looksLike,
                                    std::string &reason) {
  for (OpOperand *input : user.getDpsInputOperands()) {
    if (input->get() == gathered)
      continue;
    Value value = input->get();
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

} // namespace

std::optional<int64_t> attention::reshapedKeyDim(Operation *op, int64_t dim) {
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

AffineMap attention::rowsInResult(linalg::LinalgOp op, unsigned operand,
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

FailureOr<RingAttention> overlap::matchRingAttention(AllGatherOp op,
                                                     bool &looksLike,
                                                     std::string &reason) {
  looksLike = false;
  SmallVector<AttentionPrefix> prefix;
  auto [gatheredUse, gatheredDim] =
      followPrefix(op.getResult(), op.getDim(), prefix);
  if (!gatheredUse)
    return failure();
  auto user = dyn_cast<linalg::LinalgOp>(gatheredUse->getOwner());
  if (!user || !user.isDpsInput(gatheredUse))
    return failure();
  std::optional<unsigned> loop =
      loopOfOperandDim(user, *gatheredUse, gatheredDim);
  if (!loop)
    return failure();
  if (user.getIteratorTypesArray()[*loop] == utils::IteratorType::reduction)
    return fromValues(op, user, gatheredUse->get(), looksLike, reason);
  return Matcher(op, looksLike, reason).run(gatheredUse, *loop, prefix);
}

FailureOr<RingAttention> overlap::matchLocalAttention(linalg::LinalgOp op,
                                                      bool &looksLike,
                                                      std::string &reason) {
  looksLike = false;
  if (op.getNumDpsInputs() != 2 || op->getNumResults() != 1 ||
      op.getNumReductionLoops() == 0)
    return failure();
  // The keys' loop: parallel, indexing one input and the result but not
  // the other input (for q, the rows' loop).
  for (OpOperand *keys : op.getDpsInputOperands()) {
    SmallVector<unsigned> keyLoops = parallelLoopsOnlyIn(
        op, *keys, *op.getDpsInputOperand(1 - keys->getOperandNumber()));
    if (keyLoops.size() != 1)
      continue;
    FailureOr<RingAttention> match = Matcher(AllGatherOp(), looksLike, reason)
                                         .run(keys, keyLoops.front(), {});
    if (succeeded(match) || looksLike)
      return match;
  }
  return failure();
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
