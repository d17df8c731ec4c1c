//===- TileAttention.cpp - Attention computed a block of rows at a time ---===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// An attention whose k and v are local (tensor-parallel heads, or the
// whole sequence after a gather that no ring replaced) is, as frontends
// emit it, a product of q and k into scores of rows x keys per head, a
// softmax over the keys, and a product with v: every pass over the scores
// streams them through memory (at 2048 tokens and 8 heads, 128 MiB of f32
// per layer and rank). Each query row's softmax reads only that row's
// scores, so the whole chain is computed a block of rows at a time: the
// block's slice of q against all of k, its scores' softmax, its product
// with v, inserted into the output. The scores held at once are a block's
// (the pass option `block-bytes`), so the memory attention takes is
// bounded instead of quadratic in the sequence. The result is computed by
// the same ops on the same values per row, so it is the same up to the
// GEMM library's blocking of the products. Under a causal mask, two
// blocks each read only the keys their rows see. docs/rationale/
// cpu-codegen.md says what it measured.
//
// The attention is found by the ring attention's matcher (Match.cpp), so
// every spelling it reads is read here, and a softmax it refuses is a
// remark with its reason. The rows' dimension is followed through every
// op of the chain by its indexing maps and reshapes.
//
//===----------------------------------------------------------------------===//

#include "Overlap/RingAttention/RingAttention.h"
#include "Schedule.h"

#include "braid/Dialect/Dist/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

namespace braid::dist {
#define GEN_PASS_DEF_TILEATTENTION
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::schedule;

namespace {

/// The ops of a matched attention, in block order, and for each the
/// dimension of its result (and, for linalg ops, the loop) the query rows
/// run along.
struct Chain {
  SmallVector<Operation *> ops;
  DenseMap<Value, int64_t> rowDim;
  DenseMap<Operation *, unsigned> rowLoop;
  Operation *last = nullptr;
  int64_t rows = 0;       ///< The query rows.
  int64_t scoreBytes = 0; ///< The scores of all rows.
  /// The keys, followed like the rows up to the reductions over them.
  DenseMap<Value, int64_t> keyDim;
  DenseMap<Operation *, unsigned> keyLoop;
  int64_t keys = 0;
  /// A mask applied by `maskOp` (masked iff e >= 0 over its loops) whose e
  /// grows with the key: a block of rows skips the keys it masks for every
  /// row (a causal mask's upper blocks).
  std::optional<AttentionMask> mask;
  Operation *maskOp = nullptr;
};

/// The loop along which `op` reads the dimension `dims` knows of each of
/// its operands: none when it reads no such value; failure when two are
/// read along different loops, or one not along a plain loop.
FailureOr<std::optional<unsigned>>
loopOfKnown(linalg::LinalgOp op, const DenseMap<Value, int64_t> &dims) {
  std::optional<unsigned> loop;
  for (OpOperand &operand : op->getOpOperands()) {
    auto known = dims.find(operand.get());
    if (known == dims.end())
      continue;
    std::optional<unsigned> at = loopOfOperandDim(op, operand, known->second);
    if (!at || (loop && *at != *loop))
      return failure();
    loop = at;
  }
  return loop;
}

/// The keys of `chain` followed through its ops, and the mask that skips
/// them, where both can be told.
void followKeys(RingAttention &m, Chain &chain) {
  linalg::LinalgOp scores = m.scores;
  std::optional<int64_t> first = resultDimOfLoop(scores, m.keyLoop);
  if (!first)
    return;
  chain.keys = scores.getStaticLoopRanges()[m.keyLoop];
  chain.keyDim[scores->getResult(0)] = *first;
  chain.keyLoop[scores] = m.keyLoop;
  for (Operation *op : chain.ops) {
    if (op == scores.getOperation())
      continue;
    std::optional<int64_t> dim;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      FailureOr<std::optional<unsigned>> loop =
          loopOfKnown(linalgOp, chain.keyDim);
      if (failed(loop)) {
        chain.keyDim.clear();
        return;
      }
      if (!*loop)
        continue;
      chain.keyLoop[op] = **loop;
      dim = resultDimOfLoop(linalgOp, **loop);
    } else {
      auto known = chain.keyDim.find(op->getOperand(0));
      if (known == chain.keyDim.end())
        continue;
      dim = attention::reshapedKeyDim(op, known->second);
      if (!dim) {
        chain.keyDim.clear();
        return;
      }
    }
    if (dim)
      chain.keyDim[op->getResult(0)] = *dim;
  }
  if (!m.mask || !m.mask->symbols.empty() || m.scoreOps.empty())
    return;
  Operation *maskOp = m.scoreOps.back().op;
  if (!chain.keyLoop.count(maskOp) || !chain.rowLoop.count(maskOp) ||
      m.mask->loops[chain.keyLoop.lookup(maskOp)] <= 0)
    return;
  chain.mask = m.mask;
  chain.maskOp = maskOp;
}

/// The keys rows [first, first + size) read: up to the first key the mask
/// masks for each of them; all keys without a mask, or when a row of the
/// block may be masked whole (its keys then all count, as unmasked).
int64_t keysFor(const Chain &chain, int64_t first, int64_t size) {
  if (!chain.mask)
    return chain.keys;
  const AttentionMask &mask = *chain.mask;
  unsigned row = chain.rowLoop.lookup(chain.maskOp);
  unsigned key = chain.keyLoop.lookup(chain.maskOp);
  // e's least and largest over the block's rows and every other loop, at
  // key 0.
  int64_t least = mask.constant, most = mask.constant;
  for (auto [loop, coefficient] : llvm::enumerate(mask.loops)) {
    if (loop == key)
      continue;
    int64_t low = loop == row ? first : 0;
    int64_t high = loop == row ? first + size - 1 : mask.extents[loop] - 1;
    least += coefficient * (coefficient > 0 ? low : high);
    most += coefficient * (coefficient > 0 ? high : low);
  }
  if (most >= 0)
    return chain.keys;
  // Keys from -least / a on are masked for every row of the block.
  int64_t end = llvm::divideCeil(-least, mask.loops[key]);
  return std::clamp<int64_t>(end, 1, chain.keys);
}

/// The ops of `m` in block order, ending at the one whose result is the
/// attention's output.
SmallVector<Operation *> opsOf(RingAttention &m) {
  SmallVector<Operation *> ops{m.scores, m.max, m.exp, m.sum, m.output};
  for (const AttentionPrefix &p : m.scoreOps)
    ops.push_back(p.op);
  for (Operation *op : std::initializer_list<Operation *>{
           m.div, m.reciprocal, m.divAfter, m.expThen, m.flagTest, m.flagAll,
           m.safeSelect, m.probsCollapse})
    if (op)
      ops.push_back(op);
  for (linalg::GenericOp convert : m.converts)
    ops.push_back(convert);
  llvm::sort(ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ops;
}

/// The chain of `m` with its rows' dimensions, or why the rows cannot be
/// followed through it.
FailureOr<Chain> followRows(RingAttention &m, std::string &reason) {
  Chain chain;
  chain.ops = opsOf(m);
  chain.last = m.divAfter ? m.divAfter.getOperation() : m.output.getOperation();
  llvm::SmallPtrSet<Operation *, 16> inChain(chain.ops.begin(),
                                             chain.ops.end());
  for (Operation *op : chain.ops)
    for (Operation *user : op->getUsers())
      if (op != chain.last && !inChain.contains(user)) {
        reason = attention::quoted(op) + " of the attention is read by " +
                 attention::quoted(user) + " outside it";
        return failure();
      }

  if (!isPlaceholder(
          cast<linalg::LinalgOp>(chain.last).getDpsInitOperand(0)->get(),
          nullptr, /*throughSlices=*/true)) {
    reason = attention::quoted(chain.last) +
             " accumulates into a value: the output of every row starts "
             "from it";
    return failure();
  }

  // The query rows: the loop of the scores' product that indexes q and the
  // scores but not k.
  linalg::LinalgOp scores = m.scores;
  SmallVector<unsigned> qLoops =
      parallelLoopsOnlyIn(scores, *scores.getDpsInputOperand(1 - m.keysOperand),
                          *scores.getDpsInputOperand(m.keysOperand));
  if (qLoops.size() != 1) {
    reason = qLoops.empty()
                 ? "q has no dimension of rows that k does not have"
                 : "q has several dimensions of rows that k does not have";
    return failure();
  }

  for (Operation *op : chain.ops) {
    std::optional<int64_t> dim;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      FailureOr<std::optional<unsigned>> loop =
          op == scores.getOperation()
              ? FailureOr<std::optional<unsigned>>(
                    std::optional<unsigned>(qLoops.front()))
              : loopOfKnown(linalgOp, chain.rowDim);
      if (failed(loop)) {
        reason = attention::quoted(op) +
                 " does not read the rows of its operands along one loop";
        return failure();
      }
      if (!*loop || linalgOp.getIteratorTypesArray()[**loop] !=
                        utils::IteratorType::parallel) {
        reason = attention::quoted(op) + " reduces over the query rows";
        return failure();
      }
      dim = resultDimOfLoop(linalgOp, **loop);
      chain.rowLoop[op] = **loop;
    } else {
      dim =
          attention::reshapedKeyDim(op, chain.rowDim.lookup(op->getOperand(0)));
    }
    if (!dim || op->getNumResults() != 1) {
      reason =
          "the query rows do not reach the result of " + attention::quoted(op);
      return failure();
    }
    chain.rowDim[op->getResult(0)] = *dim;
  }
  followKeys(m, chain);
  auto scoresType = cast<RankedTensorType>(scores->getResult(0).getType());
  chain.rows = scoresType.getDimSize(chain.rowDim.lookup(scores->getResult(0)));
  chain.scoreBytes =
      scoresType.getNumElements() *
      std::max<int64_t>(4, scoresType.getElementTypeBitWidth() / 8);
  return chain;
}

/// Gives the inits of `tiled` that are slices of placeholders a
/// placeholder of their own, so that no buffer of all rows is held (or
/// copied from) for a block's intermediates.
void freshInits(RewriterBase &rewriter, Operation *tiled) {
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(tiled);
  for (OpOperand &init :
       cast<DestinationStyleOpInterface>(tiled).getDpsInitsMutable()) {
    if (!isPlaceholder(init.get(), nullptr, /*throughSlices=*/true))
      continue;
    Value fresh =
        freshPlaceholder(rewriter, tiled->getLoc(), init.get(),
                         cast<RankedTensorType>(init.get().getType()));
    Value old = init.get();
    rewriter.modifyOpInPlace(tiled, [&] { init.set(fresh); });
    if (Operation *def = old.getDefiningOp(); def && def->use_empty())
      rewriter.eraseOp(def);
  }
}

/// The chain's ops for query rows [offset, offset + size): linalg ops as
/// chunks of their rows' loop, reshapes rebuilt on the chunks, the
/// intermediates in placeholders of the block's size; the last op writes
/// its slice of `dest` (filled first when its init was a fill). Returns
/// the last op's chunk.
FailureOr<Value> computeRows(RewriterBase &rewriter, const Chain &chain,
                             OpFoldResult offset, int64_t size, int64_t keys,
                             Value dest) {
  bool cutKeys = keys < chain.keys;
  DenseMap<Value, Value> rowsOf;
  for (Operation *op : chain.ops) {
    Value result;
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      SmallVector<std::pair<unsigned, Value>> replacements;
      for (OpOperand &operand : op->getOpOperands())
        if (Value tile = rowsOf.lookup(operand.get()))
          replacements.push_back({operand.getOperandNumber(), tile});
      // The last op writes into `dest`, filled as its init was (followRows
      // made sure the init is a placeholder).
      bool last = op == chain.last;
      linalg::FillOp fill;
      if (last)
        (void)isPlaceholder(linalgOp.getDpsInitOperand(0)->get(), &fill,
                            /*throughSlices=*/true);
      SmallVector<LoopPart> parts{{chain.rowLoop.lookup(op), offset, size}};
      if (auto key = chain.keyLoop.find(op);
          cutKeys && key != chain.keyLoop.end())
        parts.push_back({key->second, rewriter.getIndexAttr(0), keys});
      FailureOr<Chunk> chunk = computeChunk(
          rewriter, linalgOp, parts, replacements, last ? dest : Value(), fill);
      if (failed(chunk))
        return failure();
      result = chunk->value;
      if (!last)
        freshInits(rewriter, result.getDefiningOp());
    } else {
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      SmallVector<int64_t> shape(type.getShape());
      shape[chain.rowDim.lookup(op->getResult(0))] = size;
      if (auto key = chain.keyDim.find(op->getResult(0));
          cutKeys && key != chain.keyDim.end())
        shape[key->second] = keys;
      auto resultType = RankedTensorType::get(shape, type.getElementType());
      Value source = rowsOf.lookup(op->getOperand(0));
      if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op))
        result = tensor::CollapseShapeOp::create(
            rewriter, op->getLoc(), resultType, source,
            collapse.getReassociationIndices());
      else
        result = tensor::ExpandShapeOp::create(
            rewriter, op->getLoc(), resultType, source,
            cast<tensor::ExpandShapeOp>(op).getReassociationIndices());
    }
    rowsOf[op->getResult(0)] = result;
  }
  return rowsOf.lookup(chain.last->getResult(0));
}

/// Key ranges differ from group to group of blocks, so each group is code
/// of its own: at most this many groups, each a loop over its blocks where
/// it holds several. Eight groups compute 56% of a causal mask's scores
/// (two, 75%); more groups cost compile time for little (measured on an HF
/// Llama layer at 2048 tokens: 8 groups 191 ms, 32 groups 183 ms, compiled
/// in 2.6 s against 7.3 s).
constexpr int64_t kMaxGroups = 8;

/// Whether a group of rows starting at row 0 reads fewer than all keys: the
/// mask hides keys from whole blocks.
bool skipsKeys(const Chain &chain, int64_t rows) {
  return keysFor(chain, 0, rows) < chain.keys;
}

/// Rows per block: as many as `blockBytes` of scores hold, a multiple of 16
/// where more than 16 fit. Where a mask hides keys from whole blocks, blocks
/// are at most an eighth of the rows (at least 16): more, smaller blocks
/// skip more keys, even for scores that would fit whole.
int64_t blockRows(const Chain &chain, int64_t blockBytes) {
  int64_t perRow = std::max<int64_t>(1, chain.scoreBytes / chain.rows);
  int64_t rows = std::max<int64_t>(blockBytes / perRow, 1);
  if (rows > 16)
    rows = rows / 16 * 16;
  int64_t eighth = std::max<int64_t>(
      16, llvm::alignTo(llvm::divideCeil(chain.rows, kMaxGroups), 16));
  if (eighth < std::min(rows, chain.rows) && skipsKeys(chain, eighth))
    rows = eighth;
  return std::min(rows, chain.rows);
}

/// The output, a block of rows at a time. Blocks form groups that read the
/// same keys: one group, a loop over every block and every key, without a
/// mask to skip keys by; with one, up to kMaxGroups groups, each reading
/// the keys its rows see. A group is its one block, or a loop over its
/// whole blocks and the rows left after them. Returns the fraction of the
/// scores computed.
FailureOr<double> tileRows(RewriterBase &rewriter, const Chain &chain,
                           int64_t block) {
  Operation *last = chain.last;
  Location loc = last->getLoc();
  rewriter.setInsertionPoint(last);
  auto type = cast<RankedTensorType>(last->getResult(0).getType());
  int64_t dim = chain.rowDim.lookup(last->getResult(0));
  Value output = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
  int64_t blocks = llvm::divideCeil(chain.rows, block);
  int64_t groupRows =
      llvm::divideCeil(blocks, kMaxGroups) * block; // a multiple of block
  if (!skipsKeys(chain, std::min(groupRows, chain.rows)))
    groupRows = chain.rows;
  int64_t computed = 0;
  for (int64_t first = 0; first < chain.rows; first += groupRows) {
    int64_t rows = std::min(groupRows, chain.rows - first);
    int64_t keys = keysFor(chain, first, rows);
    computed += rows * keys;
    // Whole blocks: one, or a loop over several.
    int64_t whole = rows / block * block;
    if (whole == block) {
      OpFoldResult row = rewriter.getIndexAttr(first);
      FailureOr<Value> part =
          computeRows(rewriter, chain, row, block, keys, output);
      if (failed(part))
        return failure();
      output = insertAlong(rewriter, loc, *part, output, dim, row);
    } else if (whole > block) {
      bool failedRows = false;
      auto lower = arith::ConstantIndexOp::create(rewriter, loc, first);
      auto upper = arith::ConstantIndexOp::create(rewriter, loc, first + whole);
      auto step = arith::ConstantIndexOp::create(rewriter, loc, block);
      auto loop = scf::ForOp::create(
          rewriter, loc, lower, upper, step, ValueRange{output},
          [&](OpBuilder &b, Location bodyLoc, Value row, ValueRange acc) {
            FailureOr<Value> part =
                computeRows(rewriter, chain, row, block, keys, acc.front());
            if (failed(part)) {
              failedRows = true;
              scf::YieldOp::create(b, bodyLoc, acc);
              return;
            }
            scf::YieldOp::create(
                b, bodyLoc,
                insertAlong(b, bodyLoc, *part, acc.front(), dim, row));
          });
      if (failedRows) {
        rewriter.eraseOp(loop);
        return failure();
      }
      output = loop.getResult(0);
    }
    if (whole < rows) {
      OpFoldResult row = rewriter.getIndexAttr(first + whole);
      FailureOr<Value> part =
          computeRows(rewriter, chain, row, rows - whole, keys, output);
      if (failed(part))
        return failure();
      output = insertAlong(rewriter, loc, *part, output, dim, row);
    }
  }
  rewriter.replaceOp(last, output);
  for (Operation *op : llvm::reverse(chain.ops))
    if (op != last && op->use_empty())
      rewriter.eraseOp(op);
  return static_cast<double>(computed) /
         static_cast<double>(chain.rows * chain.keys);
}

struct TileAttention
    : public braid::dist::impl::TileAttentionBase<TileAttention> {
  using TileAttentionBase::TileAttentionBase;

  void runOnOperation() override {
    if (blockBytes <= 0)
      return;
    SmallVector<linalg::LinalgOp> products;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureTensorSemantics() && op.getNumReductionLoops() > 0 &&
          op.getNumDpsInputs() == 2)
        products.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    llvm::SmallPtrSet<Operation *, 8> erased;
    for (linalg::LinalgOp product : products) {
      if (erased.contains(product))
        continue;
      bool looksLike = false;
      std::string reason;
      FailureOr<RingAttention> match =
          matchLocalAttention(product, looksLike, reason);
      if (failed(match)) {
        if (looksLike)
          product->emitRemark()
              << "attention not computed in blocks of rows: " << reason;
        continue;
      }
      FailureOr<Chain> chain = followRows(*match, reason);
      if (failed(chain)) {
        product->emitRemark()
            << "attention not computed in blocks of rows: " << reason;
        continue;
      }
      int64_t block = blockRows(*chain, blockBytes);
      if (block >= chain->rows) {
        product->emitRemark()
            << "attention kept whole: its scores ("
            << formatBytes(chain->scoreBytes) << ") fit in a block of "
            << formatBytes(blockBytes);
        continue;
      }
      int64_t blockScores = chain->scoreBytes / chain->rows * block;
      Location loc = product->getLoc();
      SmallVector<Operation *> ops = chain->ops;
      FailureOr<double> computed = tileRows(rewriter, *chain, block);
      if (failed(computed)) {
        product->emitRemark() << "attention not computed in blocks of rows: "
                                 "an op of it has no tiled form";
        continue;
      }
      erased.insert(ops.begin(), ops.end());
      ++numTiled;
      InFlightDiagnostic remark = emitRemark(loc);
      remark << "attention computed in blocks of " << block << " query rows ("
             << llvm::divideCeil(chain->rows, block)
             << " blocks): " << formatBytes(blockScores)
             << " of scores at a time instead of "
             << formatBytes(chain->scoreBytes);
      if (*computed < 1)
        remark << "; the keys the mask hides from a whole block skipped ("
               << static_cast<int64_t>(std::lround(*computed * 100))
               << "% of the scores computed)";
    }
  }
};

} // namespace
