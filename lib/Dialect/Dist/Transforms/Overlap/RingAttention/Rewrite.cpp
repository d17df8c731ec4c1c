//===- Rewrite.cpp - The online-softmax ring --------------------*- C++ -*-===//
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
// sums reassociated (docs/rationale/ring-attention.md has the tolerance
// argument). Every block op is the original op computed for the block's keys
// (schedule::computeChunk), so masks through linalg.index see global key
// positions and a mask tensor is sliced.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <limits>

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::overlap::attention;
using namespace braid::dist::schedule;

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

/// Builds the online-softmax ring of one match where its product with v
/// was: the state of a set of rows (running max, sum and rescaled output)
/// taken through each block of keys, a piece at a time.
class RingBuilder {
public:
  RingBuilder(RewriterBase &rewriter, RingAttention m);
  LogicalResult build();

private:
  /// A set of rows' running max, sum and rescaled output.
  struct State {
    Value max, sums, out;
  };

  Value index(int64_t v) {
    return arith::ConstantIndexOp::create(rewriter, loc, v).getResult();
  }
  /// A tensor read whole by a generic over its own shape.
  std::pair<Value, AffineMap> whole(Value v) {
    return {v, AffineMap::getMultiDimIdentityMap(
                   cast<RankedTensorType>(v.getType()).getRank(), ctx)};
  }
  /// A row tensor (max, sum) as the output's rows see it: folded like the
  /// probabilities before their product.
  Value rowsOfOutput(Value rowTensor) {
    if (m.rowGroups.empty())
      return rowTensor;
    return tensor::CollapseShapeOp::create(rewriter, loc, rowTensor,
                                           m.rowGroups);
  }
  Value maskBound(Value start, bool rowsAtMost, arith::CmpIPredicate pred,
                  IRMapping *rows);
  FailureOr<Value> chunk(linalg::LinalgOp op, unsigned loop,
                         OpFoldResult offset,
                         ArrayRef<std::pair<unsigned, Value>> replacements,
                         Value init, IRMapping *rows);
  FailureOr<Value> through(Value block, OpFoldResult offset,
                           ArrayRef<AttentionPrefix> prefix, IRMapping *rows);
  Value safeOf(Value max);
  Value scaleOf(Value old, Value safe);
  FailureOr<State> attendPiece(std::optional<State> state, Value keys,
                               Value values, Value owner, Value covered,
                               IRMapping *rows, int64_t piece);
  FailureOr<State> attend(std::optional<State> state, Value keys, Value values,
                          Value owner, Value covered, IRMapping *rows,
                          int64_t begin, int64_t end);
  State nothingScored();
  State merge(const State &a, const State &b);
  /// Whether a rank also scores the rows of the block it holds at step d.
  bool helps(int64_t d) const {
    return balance && d >= 1 && (d < n - d || (splitLast && d == n - d));
  }
  /// The pieces of the held block a rank scores for its own rows at step d.
  int64_t ownEnd(int64_t d) const {
    return splitLast && d == n - d ? pieces / 2 : pieces;
  }
  FailureOr<State> steps();
  void finish(const State &state);

  RewriterBase &rewriter;
  RingAttention m;
  Location loc;
  MLIRContext *ctx;
  int64_t n, pieces;
  Value position;
  AffineMap sameRows;
  Type probsElement;
  /// The balanced ring, and the last step's pair split between its ranks.
  bool balance, splitLast;
};

RingBuilder::RingBuilder(RewriterBase &rewriter, RingAttention match)
    : rewriter(rewriter), m(std::move(match)), loc(m.keys.getLoc()),
      ctx(rewriter.getContext()), n(m.ring.groupSize),
      pieces(m.chunk / m.pieceSize) {
  rewriter.setInsertionPoint(m.output);
  position = groupPosition(rewriter, loc, m.ring.grid, m.ring.axis);
  unsigned rowRank =
      cast<RankedTensorType>(m.max->getResult(0).getType()).getRank();
  sameRows = AffineMap::getMultiDimIdentityMap(rowRank, ctx);
  probsElement =
      getElementTypeOrSelf(m.output->getOperand(m.probsOperand).getType());
  // The balanced ring: at step d a rank holds the k, v and q of rank
  // r - d. It scores its own rows against those keys (below the diagonal
  // when r >= d) and, for d < n - d, the rows of rank r - d against its
  // own keys (below the diagonal when r < d), returning that partial by a
  // shift of -d. Every pair of blocks is scored once, by n / 2 + 1 steps.
  // At d = n / 2 (n even) the pair is the same both ways: with several
  // pieces of keys the holder scores the first half of them and the owner
  // of the keys the second half, so that no rank idles.
  balance = m.balance && n > 2;
  splitLast = balance && n % 2 == 0 && pieces > 1;
}

/// The mask's e (masked iff e >= 0) bounded over a piece of keys from
/// `start`: its least value over every point (a piece masked whole when
/// >= 0), or with `rowsAtMost` its largest over the rows of its least over
/// the keys (every row has a key left when < 0); `pred` compares it with
/// 0. `rows` maps the rank's position to another rank's, whose rows are
/// bounded instead.
Value RingBuilder::maskBound(Value start, bool rowsAtMost,
                             arith::CmpIPredicate pred, IRMapping *rows) {
  const AttentionMask &mask = *m.mask;
  auto plus = [&](Value a, Value b) {
    return arith::AddIOp::create(rewriter, loc, a, b).getResult();
  };
  auto times = [&](Value a, int64_t c) {
    return c == 1
               ? a
               : arith::MulIOp::create(rewriter, loc, a, index(c)).getResult();
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
}

/// One op of the chain on the keys [offset, offset + pieceSize), for this
/// rank's rows or, through `rows`, for another rank's: a copy of the op
/// that reads that rank's q and values computed for its position.
FailureOr<Value>
RingBuilder::chunk(linalg::LinalgOp op, unsigned loop, OpFoldResult offset,
                   ArrayRef<std::pair<unsigned, Value>> replacements,
                   Value init, IRMapping *rows) {
  Operation *copy = nullptr;
  if (rows) {
    IRMapping map = *rows; // The copy's own values stay out of `rows`.
    copy = rewriter.clone(*op, map);
    op = cast<linalg::LinalgOp>(copy);
  }
  FailureOr<Chunk> c =
      computeChunk(rewriter, op, loop, offset, m.pieceSize, replacements, init);
  if (copy)
    rewriter.eraseOp(copy);
  if (failed(c))
    return failure();
  return c->value;
}

/// Ops that keep the keys apart, on a piece: what reads the gathered k and
/// v before the products (GQA: its kv heads repeated for the q heads), or
/// the score ops after the product (for the rows of `rows`).
FailureOr<Value> RingBuilder::through(Value block, OpFoldResult offset,
                                      ArrayRef<AttentionPrefix> prefix,
                                      IRMapping *rows) {
  for (const AttentionPrefix &p : prefix) {
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(p.op)) {
      FailureOr<Value> next =
          chunk(linalgOp, p.loop, offset, {{p.operand, block}}, Value(), rows);
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
      block = tensor::CollapseShapeOp::create(
          rewriter, loc, pieceType, block, collapse.getReassociationIndices());
    else
      block = tensor::ExpandShapeOp::create(
          rewriter, loc, pieceType, block,
          cast<tensor::ExpandShapeOp>(p.op).getReassociationIndices());
  }
  return block;
}

/// The max as exp subtracts it: 0 for a row whose scores so far are all
/// -inf, so that exp gives 0 rather than exp(-inf + inf).
Value RingBuilder::safeOf(Value max) {
  float lowest = -std::numeric_limits<float>::infinity();
  return rowwise(
      rewriter, loc, emptyLike(rewriter, loc, max), {{max, sameRows}},
      [&](OpBuilder &b, Location at, ValueRange args) {
        Value low = arith::ConstantOp::create(b, at, b.getF32FloatAttr(lowest));
        Value zero = arith::ConstantOp::create(b, at, b.getF32FloatAttr(0));
        Value none = arith::CmpFOp::create(b, at, arith::CmpFPredicate::OEQ,
                                           args[0], low);
        return arith::SelectOp::create(b, at, none, zero, args[0]);
      });
}

/// exp(c (old - safe)): what rows kept under `old` are scaled by, c the
/// factor the exponentials apply.
Value RingBuilder::scaleOf(Value old, Value safe) {
  double factor = m.expFactor;
  return rowwise(
      rewriter, loc, emptyLike(rewriter, loc, old),
      {{old, sameRows}, {safe, sameRows}},
      [&](OpBuilder &b, Location at, ValueRange args) {
        Value d = arith::SubFOp::create(b, at, args[0], args[1]);
        if (factor != 1)
          d = arith::MulFOp::create(
              b, at, d,
              arith::ConstantOp::create(b, at, b.getF32FloatAttr(factor)));
        return math::ExpOp::create(b, at, d);
      });
}

static Value rowsTimes(OpBuilder &b, Location at, ValueRange args) {
  return arith::MulFOp::create(b, at, args[0], args[1]);
}

/// Piece `piece` of the block of keys and values of rank `owner`, scored
/// into `state` (none: the rows' first piece). Under a causal mask, a
/// piece whose keys are masked for every row is skipped once `covered`
/// (the rows' own first piece left every row a key that is not) and a
/// state is at hand.
FailureOr<RingBuilder::State>
RingBuilder::attendPiece(std::optional<State> state, Value keys, Value values,
                         Value owner, Value covered, IRMapping *rows,
                         int64_t piece) {
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
  valuePiece = *valuesIn;
  FailureOr<Value> scores = chunk(m.scores, m.keyLoop, offset,
                                  {{m.keysOperand, *keysIn}}, Value(), rows);
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
    sumInit = rowwise(rewriter, loc, emptyLike(rewriter, loc, state->sums),
                      {{state->sums, sameRows}, {scale, sameRows}}, rowsTimes);
  FailureOr<Value> newSums =
      chunk(m.sum, m.keyDim, offset, {{0, *exps}}, sumInit, rows);
  if (failed(newSums))
    return failure();
  Value probs = *exps;
  // Rounded as the probabilities were before their product (to bf16 and
  // widened back, as torch's CPU kernel does), then in the product's type.
  if (m.probsRounding && m.probsRounding != probsElement &&
      m.probsRounding.getIntOrFloatBitWidth() <
          getElementTypeOrSelf(probs.getType()).getIntOrFloatBitWidth())
    probs =
        rowwise(rewriter, loc, emptyLike(rewriter, loc, probs, m.probsRounding),
                {whole(probs)},
                [](OpBuilder &, Location, ValueRange args) { return args[0]; });
  if (getElementTypeOrSelf(probs.getType()) != probsElement)
    probs =
        rowwise(rewriter, loc, emptyLike(rewriter, loc, probs, probsElement),
                {whole(probs)},
                [](OpBuilder &, Location, ValueRange args) { return args[0]; });
  if (m.probsCollapse)
    probs = tensor::CollapseShapeOp::create(
        rewriter, loc, probs, m.probsCollapse.getReassociationIndices());
  Value outInit;
  if (!first)
    outInit = rowwise(
        rewriter, loc, emptyLike(rewriter, loc, state->out),
        {whole(state->out), {rowsOfOutput(scale), m.rowsInOutput}}, rowsTimes);
  FailureOr<Value> newOut = chunk(
      m.output, m.valueLoop, offset,
      {{m.probsOperand, probs}, {m.valuesOperand, valuePiece}}, outInit, rows);
  if (failed(newOut))
    return failure();
  State next{*newMax, *newSums, *newOut};
  if (!skipped)
    return next;
  scf::YieldOp::create(rewriter, loc,
                       ValueRange{next.max, next.sums, next.out});
  rewriter.setInsertionPointAfter(skipped);
  return State{skipped.getResult(0), skipped.getResult(1),
               skipped.getResult(2)};
}

/// Scores the block of keys and values of rank `owner` for this rank's
/// rows, or through `rows` for another rank's, into `state` (none: the
/// rows' first block), its pieces [begin, end). This rank's first piece is
/// never skipped, and another rank's rows start from `nothingScored`.
FailureOr<RingBuilder::State> RingBuilder::attend(std::optional<State> state,
                                                  Value keys, Value values,
                                                  Value owner, Value covered,
                                                  IRMapping *rows,
                                                  int64_t begin, int64_t end) {
  for (int64_t piece = begin; piece < end; ++piece) {
    FailureOr<State> next =
        attendPiece(state, keys, values, owner, covered, rows, piece);
    if (failed(next))
      return failure();
    state = *next;
  }
  return *state;
}

/// Rows nothing was scored for yet, as the rescaling reads a state: a max
/// of -inf (exp(-inf - m) = 0 scales the zeros away), not the max op's
/// init, which is only its reduction's identity (NaN for the maxnumf of a
/// decomposed linalg.softmax). Fills of their own: a partial's buffers
/// travel while later steps run, so they must not be the ones the ops'
/// shared inits bufferize to (written again in place before the transfer
/// is done).
RingBuilder::State RingBuilder::nothingScored() {
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
}

/// Two sets of partial results for the same rows, over disjoint keys.
RingBuilder::State RingBuilder::merge(const State &a, const State &b) {
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
}

/// The ring's steps: k, v (and, balanced, q) travel one step ahead of the
/// block at hand; balanced, each helper's partial comes back to its rows'
/// owner, whose state merges them at the end.
FailureOr<RingBuilder::State> RingBuilder::steps() {
  const Ring &ring = m.ring;
  int64_t count = balance ? n / 2 + 1 : n;
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
  for (int64_t step = 0; step < count; ++step) {
    if (step > 0) {
      keys = waitFor(rewriter, loc, keysInFlight);
      values = waitFor(rewriter, loc, valuesInFlight);
      if (helps(step))
        for (auto [held, inFlight] : llvm::zip(qHeld, qInFlight))
          held = waitFor(rewriter, loc, inFlight);
    }
    if (step < count - 1) {
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
    // The block held at this step came from `step` ranks back; its keys are
    // taken `m.pieceSize` at a time, so that a rank holds the scores of one
    // piece at a time.
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
  return *state;
}

/// The one division at the end, replacing the product with v, and the
/// original chain erased.
void RingBuilder::finish(const State &state) {
  // Under torch's safe softmax a row whose scores are all -inf gives 0;
  // its sum is then 0 (the others' is at least 1: their max's exp).
  bool safe = static_cast<bool>(m.safeSelect);
  Value result = rowwise(
      rewriter, loc, emptyLike(rewriter, loc, state.out),
      {whole(state.out), {rowsOfOutput(state.sums), m.rowsInOutput}},
      [&](OpBuilder &b, Location at, ValueRange args) -> Value {
        Value quotient = arith::DivFOp::create(b, at, args[0], args[1]);
        if (!safe)
          return quotient;
        Value zero = arith::ConstantOp::create(b, at, b.getF32FloatAttr(0));
        Value none = arith::CmpFOp::create(b, at, arith::CmpFPredicate::OEQ,
                                           args[1], zero);
        return arith::SelectOp::create(b, at, none, zero, quotient);
      });
  SmallVector<Operation *> dead;
  if (m.divAfter) {
    // It divided the product by the sums after the fact; the ring's result
    // takes its place (in its element type).
    Type element = getElementTypeOrSelf(m.divAfter->getResult(0).getType());
    if (getElementTypeOrSelf(result.getType()) != element)
      result =
          rowwise(rewriter, loc, emptyLike(rewriter, loc, result, element),
                  {whole(result)}, [](OpBuilder &, Location, ValueRange args) {
                    return args[0];
                  });
    rewriter.replaceOp(m.divAfter, result);
    dead.push_back(m.output);
  } else {
    rewriter.replaceOp(m.output, result);
  }
  if (m.probsCollapse)
    dead.push_back(m.probsCollapse);
  for (linalg::GenericOp convert : llvm::reverse(m.converts))
    dead.push_back(convert);
  if (m.safeSelect)
    dead.append({m.safeSelect, m.flagAll, m.flagTest});
  for (Operation *op :
       std::initializer_list<Operation *>{m.div, m.reciprocal, m.sum})
    if (op)
      dead.push_back(op);
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
}

LogicalResult RingBuilder::build() {
  FailureOr<State> state = steps();
  if (failed(state))
    return failure();
  finish(*state);
  return success();
}

} // namespace

LogicalResult overlap::decomposeRingAttention(RewriterBase &rewriter,
                                              RingAttention m) {
  return RingBuilder(rewriter, m).build();
}
