//===- HaloInterior.cpp - Halo interiors computed during the exchange ----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A halo exchange (upstream's update_halo, which the import makes ring
// shifts whose results are inserted into the tile's halo rows) feeds a
// stencil or convolution that reads the haloed tile. Most of its output
// reads only the tile's interior, which the exchange does not change: that
// part is computed from the tile before the exchange, the rest (the rows
// next to the halos) after it. The shifts then have independent work to
// hide behind, which the asynchronous form uses.
//
//===----------------------------------------------------------------------===//

#include "Decompositions.h"
#include "Pattern.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

namespace {

using Box = HaloInterior::Box;

/// The box a unit-stride slice with static offsets and sizes addresses.
template <typename SliceOp> std::optional<Box> boxOf(SliceOp op) {
  if (!llvm::all_of(op.getStaticStrides(), [](int64_t s) { return s == 1; }))
    return std::nullopt;
  Box box{SmallVector<int64_t>(op.getStaticOffsets()),
          SmallVector<int64_t>(op.getStaticSizes())};
  if (llvm::any_of(box.lo, ShapedType::isDynamic) ||
      llvm::any_of(box.size, ShapedType::isDynamic))
    return std::nullopt;
  return box;
}

/// The ring shifts `value` is computed from, within a few ops (the
/// import's select of the received rows against the old ones).
void shiftsBehind(Value value, int depth, SmallVectorImpl<ShiftOp> &found) {
  Operation *def = value.getDefiningOp();
  if (!def || depth == 0)
    return;
  if (auto shift = dyn_cast<ShiftOp>(def)) {
    found.push_back(shift);
    return;
  }
  for (Value operand : def->getOperands())
    shiftsBehind(operand, depth - 1, found);
}

/// The coefficients of an affine sum of loop dims and constants (one per
/// loop, then the constant), or false for other expressions (mod,
/// floordiv, symbols).
bool linearCoefficients(AffineExpr e, int64_t scale,
                        SmallVectorImpl<int64_t> &flat) {
  if (auto dim = dyn_cast<AffineDimExpr>(e)) {
    flat[dim.getPosition()] += scale;
    return true;
  }
  if (auto constant = dyn_cast<AffineConstantExpr>(e)) {
    flat.back() += scale * constant.getValue();
    return true;
  }
  auto binary = dyn_cast<AffineBinaryOpExpr>(e);
  if (!binary)
    return false;
  if (binary.getKind() == AffineExprKind::Add)
    return linearCoefficients(binary.getLHS(), scale, flat) &&
           linearCoefficients(binary.getRHS(), scale, flat);
  if (binary.getKind() == AffineExprKind::Mul)
    if (auto c = dyn_cast<AffineConstantExpr>(binary.getRHS()))
      return linearCoefficients(binary.getLHS(), scale * c.getValue(), flat);
  return false;
}

/// Whether `value` is there at `at`: defined before it in its block, or
/// outside that block.
bool availableAt(Value value, Operation *at) {
  Operation *def = value.getDefiningOp();
  return !def || def->getBlock() != at->getBlock() || def->isBeforeInBlock(at);
}

} // namespace

namespace {

/// Whether `operand` of the consumer is one of `m`'s reads of the tile.
bool readsTile(const HaloInterior &m, OpOperand &operand) {
  return llvm::any_of(m.reads, [&](const HaloInterior::Read &r) {
    return r.operand == operand.getOperandNumber();
  });
}

/// The haloed tile `op` reads (m.haloed, m.reads), the tile before the
/// exchange (m.before) and the shifts and inserts that bring the halos
/// (m.shifts, m.inserts, m.halos). Fails silently where `op` reads no
/// haloed tile.
LogicalResult findHaloedTile(linalg::LinalgOp op, HaloInterior &m,
                             std::string &reason) {
  // The inputs read from a haloed tile, directly or through static slices.
  for (OpOperand *input : op.getDpsInputOperands()) {
    Value tile = input->get();
    auto slice = tile.getDefiningOp<tensor::ExtractSliceOp>();
    std::optional<Box> box;
    if (slice) {
      box = boxOf(slice);
      if (!box || slice.getSourceType().getRank() != slice.getType().getRank())
        continue;
      tile = slice.getSource();
    }
    auto insert = tile.getDefiningOp<tensor::InsertSliceOp>();
    SmallVector<ShiftOp> shifts;
    if (insert)
      shiftsBehind(insert.getSource(), 4, shifts);
    if (shifts.empty())
      continue;
    if (m.haloed && m.haloed != tile) {
      reason = "it reads two haloed tiles";
      return failure();
    }
    if (!box) {
      auto type = cast<RankedTensorType>(tile.getType());
      box = Box{SmallVector<int64_t>(type.getRank(), 0),
                SmallVector<int64_t>(type.getShape())};
    }
    m.haloed = tile;
    m.reads.push_back({input->getOperandNumber(), *box});
  }
  if (!m.haloed)
    return failure();
  // Ops of the exchange itself (the select of received rows) read a
  // shift's result too.
  for (OpOperand *input : op.getDpsInputOperands()) {
    SmallVector<ShiftOp> shifts;
    if (!readsTile(m, *input))
      shiftsBehind(input->get(), 4, shifts);
    if (!shifts.empty())
      return failure();
  }
  // Back through the inserts of what the shifts brought to the tile before
  // the exchange.
  Value tile = m.haloed;
  while (auto insert = tile.getDefiningOp<tensor::InsertSliceOp>()) {
    SmallVector<ShiftOp> shifts;
    shiftsBehind(insert.getSource(), 4, shifts);
    std::optional<Box> box = boxOf(insert);
    if (shifts.empty() || !box)
      break;
    m.halos.push_back(*box);
    m.shifts.append(shifts.begin(), shifts.end());
    m.inserts.push_back(insert);
    tile = insert.getDest();
  }
  m.before = tile;
  std::reverse(m.inserts.begin(), m.inserts.end());
  std::reverse(m.halos.begin(), m.halos.end());

  return success();
}

/// The loops to split (m.loops, m.first, m.rows, m.extent).
LogicalResult chooseInteriorLoops(linalg::LinalgOp op, HaloInterior &m,
                                  std::string &reason) {
  // The loops to split: one or two parallel loops the result is indexed
  // by, over which the largest box of iterations reads no halo row (two
  // for a tile haloed along two dimensions, whose stencil reads both). An
  // iteration reads, along each dimension of each input, the range of that
  // dimension's index expression over the loops not fixed (affine with
  // non-negative coefficients: its value with them at 0 and at their last
  // iteration).
  SmallVector<int64_t> extents = op.getStaticLoopRanges();
  unsigned numLoops = op.getNumLoops();
  SmallVector<SmallVector<SmallVector<int64_t>>> coefficients;
  for (const HaloInterior::Read &read : m.reads) {
    AffineMap map = op.getMatchingIndexingMap(&op->getOpOperand(read.operand));
    auto &perDim = coefficients.emplace_back();
    for (AffineExpr e : map.getResults()) {
      SmallVector<int64_t> flat(numLoops + 1, 0);
      if (!linearCoefficients(e, 1, flat) ||
          llvm::any_of(ArrayRef<int64_t>(flat).drop_back(),
                       [](int64_t c) { return c < 0; })) {
        reason = "it reads the haloed tile through an index that is not a "
                 "sum of loops";
        return failure();
      }
      perDim.push_back(flat);
    }
  }
  // Whether the iterations with `fixed` loops at the given values (the
  // others over their whole range) read no halo.
  auto clean = [&](ArrayRef<std::pair<unsigned, int64_t>> fixed) {
    for (auto [read, perDim] : llvm::zip(m.reads, coefficients)) {
      Box box = read.box;
      for (auto [d, flat] : llvm::enumerate(perDim)) {
        int64_t low = flat.back(), high = flat.back();
        for (unsigned l = 0; l < numLoops; ++l) {
          int64_t at = 0, last = extents[l] - 1;
          for (auto [loop, value] : fixed)
            if (loop == l)
              at = last = value;
          low += flat[l] * at;
          high += flat[l] * last;
        }
        box.lo[d] = read.box.lo[d] + low;
        box.size[d] = high - low + 1;
      }
      for (const Box &halo : m.halos)
        if (box.intersects(halo))
          return false;
    }
    return true;
  };
  // The longest run of `ok` in [0, n).
  auto longestRun = [](int64_t n, function_ref<bool(int64_t)> ok) {
    std::pair<int64_t, int64_t> best{0, 0};
    for (int64_t i = 0; i < n;) {
      if (!ok(i)) {
        ++i;
        continue;
      }
      int64_t end = i;
      while (end < n && ok(end))
        ++end;
      if (end - i > best.second - best.first)
        best = {i, end};
      i = end;
    }
    return best;
  };
  SmallVector<unsigned> splittable;
  for (unsigned loop = 0; loop < numLoops; ++loop)
    if (op.getIteratorTypesArray()[loop] == utils::IteratorType::parallel &&
        resultDimOfLoop(op, loop))
      splittable.push_back(loop);
  double bestFraction = 0;
  for (unsigned loop : splittable) {
    auto [first, end] = longestRun(extents[loop], [&](int64_t i) {
      return clean({{loop, i}});
    });
    double fraction = double(end - first) / extents[loop];
    if (fraction > bestFraction) {
      bestFraction = fraction;
      m.loops = {loop};
      m.first = {first};
      m.rows = {end - first};
    }
  }
  if (bestFraction == 0)
    for (auto [i, outer] : llvm::enumerate(splittable))
      for (unsigned inner : ArrayRef<unsigned>(splittable).drop_front(i + 1)) {
        // The rows with some clean columns, and the columns clean on all
        // of the longest run of them.
        auto [first, end] = longestRun(extents[outer], [&](int64_t r) {
          for (int64_t c = 0; c < extents[inner]; ++c)
            if (clean({{outer, r}, {inner, c}}))
              return true;
          return false;
        });
        if (end == first)
          continue;
        auto [left, right] = longestRun(extents[inner], [&](int64_t c) {
          for (int64_t r = first; r < end; ++r)
            if (!clean({{outer, r}, {inner, c}}))
              return false;
          return true;
        });
        double fraction = double(end - first) * (right - left) /
                          (extents[outer] * extents[inner]);
        if (fraction > bestFraction) {
          bestFraction = fraction;
          m.loops = {static_cast<unsigned>(outer), inner};
          m.first = {first, left};
          m.rows = {end - first, right - left};
        }
      }
  if (bestFraction == 0) {
    reason = "every iteration of '" + op->getName().getStringRef().str() +
             "' reads a halo along the loops it could be split on";
    return failure();
  }
  for (unsigned loop : m.loops)
    m.extent.push_back(extents[loop]);
  return success();
}

/// Where the interior runs (m.at): before the first use of a received
/// halo, with everything else it reads there already.
LogicalResult placeInterior(linalg::LinalgOp op, HaloInterior &m,
                            std::string &reason) {
  // The interior runs before the first use of a received halo: what it
  // reads besides the tile must be there already.
  Block *block = op->getBlock();
  for (ShiftOp shift : m.shifts)
    for (Operation *user : shift->getUsers())
      if (Operation *top = block->findAncestorOpInBlock(*user);
          top && (!m.at || top->isBeforeInBlock(m.at)))
        m.at = top;
  if (!m.at || m.at->getBlock() != block) {
    reason = "the halo exchange is in another block";
    return failure();
  }
  Value init = op.getDpsInitOperand(0)->get();
  auto available = [&](Value v) { return availableAt(v, m.at); };
  for (OpOperand &operand : op->getOpOperands()) {
    if (readsTile(m, operand) || operand.get() == init ||
        available(operand.get()))
      continue;
    reason = "operand #" + std::to_string(operand.getOperandNumber()) +
             " is computed after the halos arrive";
    return failure();
  }
  // An init made later is remade for the interior: a placeholder, or a
  // fill of one with a value there already (a convolution's zeros).
  if (!available(init)) {
    auto fill = init.getDefiningOp<linalg::FillOp>();
    bool remade = init.getDefiningOp<tensor::EmptyOp>() ||
                  (fill && available(fill.getInputs()[0]) &&
                   fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>());
    if (!remade) {
      reason = "its init is computed after the halos arrive";
      return failure();
    }
  }
  return success();
}

} // namespace

FailureOr<HaloInterior> overlap::matchHaloInterior(linalg::LinalgOp op,
                                                   std::string &reason) {
  if (!op.hasPureTensorSemantics() || op->getNumResults() != 1 ||
      op.hasDynamicShape() || op.getNumDpsInits() != 1)
    return failure();
  HaloInterior m;
  m.consumer = op;
  if (failed(findHaloedTile(op, m, reason)) ||
      failed(chooseInteriorLoops(op, m, reason)) ||
      failed(placeInterior(op, m, reason)))
    return failure();
  return m;
}

/// The part of `op` for the box of iterations [first, first + rows) of
/// `loops` (one or two), every other loop whole, its init sliced from
/// `init`; its result position is in `op`'s result.
static FailureOr<Chunk> boxChunk(RewriterBase &rewriter, linalg::LinalgOp op,
                                 ArrayRef<unsigned> loops,
                                 ArrayRef<int64_t> first,
                                 ArrayRef<int64_t> rows, Value init) {
  FailureOr<Chunk> outer =
      computeChunk(rewriter, op, loops[0], rewriter.getIndexAttr(first[0]),
                   rows[0], {}, init);
  if (failed(outer) || loops.size() == 1)
    return outer;
  auto rowsOp = cast<linalg::LinalgOp>(outer->value.getDefiningOp());
  FailureOr<Chunk> inner =
      computeChunk(rewriter, rowsOp, loops[1], rewriter.getIndexAttr(first[1]),
                   rows[1], {}, Value());
  if (failed(inner))
    return failure();
  // The rows' op and the slices it alone read go (they may read the haloed
  // tile where the interior cannot).
  SmallVector<Value> operands(rowsOp->getOperands());
  rewriter.eraseOp(rowsOp);
  for (Value operand : operands)
    if (auto slice = operand.getDefiningOp<tensor::ExtractSliceOp>();
        slice && slice->use_empty())
      rewriter.eraseOp(slice);
  // Positions compose: the inner one is within the outer's result.
  for (auto [at, within] :
       llvm::zip(inner->resultOffsets, outer->resultOffsets)) {
    std::optional<int64_t> a = getConstantIntValue(at);
    std::optional<int64_t> b = getConstantIntValue(within);
    if (!a || !b)
      return rewriter.notifyMatchFailure(op, "dynamic tile position");
    at = rewriter.getIndexAttr(*a + *b);
  }
  return inner;
}

LogicalResult overlap::splitHaloInterior(RewriterBase &rewriter,
                                         HaloInterior m) {
  linalg::LinalgOp op = m.consumer;
  Location loc = op.getLoc();
  Block *block = op->getBlock();
  // Shifts whose rows come from the tile's interior read the tile as it was
  // before the exchange, right after it, so that every shift can start
  // before the interior is computed.
  Operation *beforeDef = m.before.getDefiningOp();
  auto placeEarly = [&] {
    if (beforeDef && beforeDef->getBlock() == block)
      rewriter.setInsertionPointAfter(beforeDef);
    else
      rewriter.setInsertionPointToStart(block);
  };
  for (ShiftOp shift : m.shifts) {
    auto slice = shift.getInput().getDefiningOp<tensor::ExtractSliceOp>();
    std::optional<Box> box = slice ? boxOf(slice) : std::nullopt;
    if (!box)
      continue;
    // Already of the tile before the exchange (the interior columns of a
    // second dimension's rows, as the import sends them): only placed
    // early, where it can start.
    if (slice.getSource() == m.before) {
      if (slice->getBlock() == block &&
          llvm::all_of(slice->getOperands(), [&](Value v) {
            return v == m.before || v.getDefiningOp<arith::ConstantOp>() ||
                   !v.getDefiningOp();
          })) {
        placeEarly();
        rewriter.moveOpBefore(slice, rewriter.getInsertionBlock(),
                              rewriter.getInsertionPoint());
      }
      continue;
    }
    // The inserts between the tile before the exchange and this slice's
    // source must not touch the rows it reads.
    bool untouched = true, reached = false;
    for (auto [insert, halo] : llvm::zip(m.inserts, m.halos)) {
      if (halo.intersects(*box))
        untouched = false;
      if (insert.getResult() == slice.getSource()) {
        reached = true;
        break;
      }
    }
    if (!untouched || !reached)
      continue;
    placeEarly();
    auto early = tensor::ExtractSliceOp::create(
        rewriter, slice.getLoc(), slice.getType(), m.before,
        slice.getMixedOffsets(), slice.getMixedSizes(),
        slice.getMixedStrides());
    rewriter.modifyOpInPlace(
        shift, [&] { shift.getInputMutable().assign(early.getResult()); });
  }

  // The interior, from the tile before the exchange.
  rewriter.setInsertionPoint(m.at);
  Value init = op.getDpsInitOperand(0)->get();
  Value interiorInit = init;
  if (!availableAt(init, m.at)) {
    auto type = cast<RankedTensorType>(init.getType());
    interiorInit = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                           type.getElementType());
    if (auto fill = init.getDefiningOp<linalg::FillOp>())
      interiorInit = linalg::FillOp::create(rewriter, fill.getLoc(),
                                            fill.getInputs(), interiorInit)
                         .getResult(0);
  }
  FailureOr<Chunk> interior =
      boxChunk(rewriter, op, m.loops, m.first, m.rows, interiorInit);
  if (failed(interior))
    return failure();
  // Its reads of the haloed tile (slices of slices of the op's operands,
  // which are the tile or static slices of it) read the tile before the
  // exchange: the same values, since none of them is a halo row. The
  // slices tiling made are the interior's own; a slice of the op's is
  // cloned.
  Operation *tiled = interior->value.getDefiningOp();
  for (OpOperand &operand : tiled->getOpOperands()) {
    SmallVector<tensor::ExtractSliceOp> chain;
    Value at = operand.get();
    while (auto slice = at.getDefiningOp<tensor::ExtractSliceOp>()) {
      chain.push_back(slice);
      if (slice.getSource() == m.haloed)
        break;
      at = slice.getSource();
    }
    if (chain.empty() || chain.back().getSource() != m.haloed)
      continue;
    tensor::ExtractSliceOp reader = chain.back();
    if (chain.size() == 1) {
      rewriter.modifyOpInPlace(
          reader, [&] { reader.getSourceMutable().assign(m.before); });
      continue;
    }
    rewriter.setInsertionPoint(chain[chain.size() - 2]);
    auto early = tensor::ExtractSliceOp::create(
        rewriter, loc, reader.getType(), m.before, reader.getMixedOffsets(),
        reader.getMixedSizes(), reader.getMixedStrides());
    tensor::ExtractSliceOp child = chain[chain.size() - 2];
    rewriter.modifyOpInPlace(
        child, [&] { child.getSourceMutable().assign(early.getResult()); });
    // A slice tiling made for the interior alone reads nothing now.
    if (reader->use_empty())
      rewriter.eraseOp(reader);
  }

  // The frame next to the halos, from the haloed tile, where the op was:
  // along one loop the iterations before and after the interior; along two
  // the rows before and after it, and the columns left and right of it in
  // its rows.
  rewriter.setInsertionPoint(op);
  Value result = init;
  auto edge = [&](ArrayRef<int64_t> first,
                  ArrayRef<int64_t> rows) -> LogicalResult {
    if (llvm::any_of(rows, [](int64_t r) { return r <= 0; }))
      return success();
    FailureOr<Chunk> chunk =
        boxChunk(rewriter, op, m.loops, first, rows, result);
    if (failed(chunk))
      return failure();
    result = insertChunk(rewriter, loc, *chunk, result);
    return success();
  };
  int64_t after0 = m.first[0] + m.rows[0];
  if (m.loops.size() == 1) {
    if (failed(edge({0}, {m.first[0]})) ||
        failed(edge({after0}, {m.extent[0] - after0})))
      return failure();
  } else {
    int64_t after1 = m.first[1] + m.rows[1];
    if (failed(edge({0, 0}, {m.first[0], m.extent[1]})) ||
        failed(edge({after0, 0}, {m.extent[0] - after0, m.extent[1]})) ||
        failed(edge({m.first[0], 0}, {m.rows[0], m.first[1]})) ||
        failed(edge({m.first[0], after1}, {m.rows[0], m.extent[1] - after1})))
      return failure();
  }
  result = insertChunk(rewriter, loc, *interior, result);
  rewriter.replaceOp(op, result);
  return success();
}

//===- The stage in braid-overlap -----------------------------------------===//

LogicalResult overlap::overlapHalos(FunctionOpInterface function,
                                    const Context &context,
                                    RewriterBase &rewriter) {
  SmallVector<linalg::LinalgOp> consumers;
  function->walk([&](linalg::LinalgOp op) { consumers.push_back(op); });
  const CostModel &model = context.model;
  for (linalg::LinalgOp op : consumers) {
    std::string why;
    FailureOr<HaloInterior> match = matchHaloInterior(op, why);
    if (failed(match)) {
      if (!why.empty())
        emitRemark(op.getLoc()) << "halo exchange not overlapped: " << why;
      continue;
    }
    std::string name = nameOf(op);
    Location loc = op.getLoc();
    HaloInterior m = *match;
    // Under auto, as the asynchronous form the shifts then take is
    // judged: the interior's compute against the exchange, with the
    // overlap's interference and the frame's extra kernels.
    int64_t inside = 1, all = 1;
    for (size_t i = 0; i < m.loops.size(); ++i) {
      inside *= m.rows[i];
      all *= m.extent[i];
    }
    // Each shift's asynchronous form is judged by its own transfer.
    double exchange = 0;
    for (ShiftOp shift : m.shifts)
      exchange = std::max(
          exchange, model.messageTime(tensorBytes(shift.getInput()),
                                      model.link(shift, shift.getGridAttr(),
                                                 shift.getAxes())));
    double interior = model.computeTime(op, double(inside) / all);
    double serial = interior + exchange;
    double overlapped = context.asyncTime(interior, exchange) +
                        2.0 * m.loops.size() * model.getTarget().launchOverhead;
    if (context.options.mode != braid::OverlapMode::Force &&
        !Context::worthIt(serial, overlapped)) {
      emitRemark(loc) << "halo exchange not overlapped: the interior of '"
                      << name << "' predicted " << us(overlapped)
                      << " with the exchange overlapped (its extra kernels "
                         "included) against "
                      << us(serial) << " serial";
      continue;
    }
    if (failed(splitHaloInterior(rewriter, m)))
      return emitError(loc) << "braid-overlap: the halo interior split failed";
    std::string box, loops;
    for (size_t i = 0; i < m.loops.size(); ++i) {
      box += (i ? " x " : "") + std::to_string(m.first[i]) + ".." +
             std::to_string(m.first[i] + m.rows[i]) + " of " +
             std::to_string(m.extent[i]);
      loops += (i ? ", " : "") + std::to_string(m.loops[i]);
    }
    emitRemark(loc) << "'" << name << "' computes iterations " << box
                    << " along loop" << (m.loops.size() > 1 ? "s " : " ")
                    << loops
                    << " (which read no halo row) before the halo exchange "
                       "completes, the other "
                    << all - inside << " after it";
  }
  return success();
}
