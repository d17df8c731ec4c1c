//===- Decompositions.h - Overlapped schedules of collectives ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to BraidDistTransforms. Each pattern has a matcher, which checks
// everything the rewrite needs and otherwise says why it does not apply,
// and a rewrite, which replaces the collective and the compute it overlaps
// with an unrolled schedule of `dist.shift_start` / `dist.wait` steps and
// chunked compute.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_DECOMPOSITIONS_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_DECOMPOSITIONS_H

#include "../Schedule.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/Replication.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <string>

namespace braid::dist {
class CostModel;
} // namespace braid::dist

namespace braid::dist::overlap {

class Context;
using schedule::Ring;
using schedule::RingOptions;

//===- AllGather -> contraction
//--------------------------------------------===//

/// Moves the row-local work downstream of `gather` (elementwise ops,
/// reductions along other dimensions, reshapes, slices and concatenations
/// of other dimensions, contractions with replicated weights; their other
/// operands replicated, and constant along the gathered dimension or read
/// at the row's position, then sliced to this rank's block) before it. The
/// values used afterwards are each gathered instead, when together they
/// are no more bytes than the gather moved, or, with a `cost` model, when
/// the work moved saves more time than the extra bytes are predicted to
/// cost. Returns the new gathers in block order and in `moved` how many ops
/// moved, or failure when nothing moves.
mlir::FailureOr<llvm::SmallVector<AllGatherOp>>
sinkAllGather(AllGatherOp gather, ReplicationAnalysis &replication,
              const CostModel *cost, int64_t &moved);

struct AllGatherMatmul {
  AllGatherOp gather;
  mlir::linalg::LinalgOp consumer;
  unsigned operand = 0; ///< Operand of `consumer` that is the gathered value.
  unsigned loop = 0;    ///< Loop of `consumer` the gathered dim indexes.
  bool reductionLoop = false;
  int64_t chunkSize = 0; ///< The local size along the gathered dimension.
  Ring ring;
};
mlir::FailureOr<AllGatherMatmul> matchAllGatherMatmul(AllGatherOp op,
                                                      std::string &reason);
mlir::LogicalResult decomposeAllGatherMatmul(mlir::RewriterBase &rewriter,
                                             AllGatherMatmul match,
                                             RingOptions options);

//===- Ring attention -----------------------------------------------------===//

/// An op between a gather of k or v and the product reading it, which the
/// ring applies to each block: a linalg op (its operand `operand`, its
/// parallel `loop` over the keys) or a reshape; `dim` is the keys'
/// dimension of its result.
struct AttentionPrefix {
  mlir::Operation *op = nullptr;
  unsigned operand = 0, loop = 0;
  int64_t dim = 0;
};

/// A mask that fills whole blocks of scores (a causal one): the last score
/// op yields a constant of at most -1e30 wherever e >= 0, with e an affine
/// form in the op's loops and in index values defined outside it (the
/// rank's position), and only there unless the constant is -inf (a causal
/// mask and'ed with one that does not read as such a form). A block of
/// keys where e >= 0 at every point is then skipped.
struct AttentionMask {
  int64_t constant = 0;
  llvm::SmallVector<int64_t> loops; ///< e's coefficient of each loop.
  llvm::SmallVector<std::pair<mlir::Value, int64_t>> symbols;
  llvm::SmallVector<int64_t> extents; ///< The op's loop ranges.
};

/// all_gather(k) and all_gather(v) along the sequence feeding
/// softmax(s(q, k)) v: the scores' product, elementwise score ops (scale,
/// masks), a row max, exp(c (s - max)) for a positive c (exp or exp2), its
/// row sum, the division by it (or a multiplication by its reciprocal), an
/// optional conversion, and the probabilities' product with v, each the
/// only user of what it reads from the chain; or the division after the
/// product (flash attention's order: (e v) / sum).
struct RingAttention {
  AllGatherOp keys, values;
  /// What reads each gather before the products (GQA's repeat of the kv
  /// heads), applied to each block.
  llvm::SmallVector<AttentionPrefix> keysPrefix, valuesPrefix;
  mlir::linalg::LinalgOp scores; ///< q against the gathered keys.
  unsigned keysOperand = 0, keyLoop = 0;
  int64_t keyDim = 0; ///< The scores' dimension over the keys.
  /// The score ops after the product: elementwise generics along the keys
  /// and reshapes keeping them apart (torch-mlir's expand_shape after a
  /// batch matmul), applied to each piece.
  llvm::SmallVector<AttentionPrefix> scoreOps;
  mlir::linalg::GenericOp max, exp, sum, div;
  /// Casts of the probabilities before their product (torch's CPU kernel
  /// rounds them to bf16 or f16 and widens them back), and the narrowest
  /// float type they pass through, to which the ring rounds its
  /// exponentials alike (null: no rounding).
  llvm::SmallVector<mlir::linalg::GenericOp, 2> converts;
  mlir::Type probsRounding;
  /// exp(s - max) as two ops (torch-mlir's): `exp` the difference, this
  /// the exponential of it.
  mlir::linalg::GenericOp expThen;
  /// torch's safe softmax: a test of each score against -inf, its
  /// and-reduction over the keys, and the select of 0 for the rows where
  /// it holds after the division.
  mlir::linalg::GenericOp flagTest, flagAll, safeSelect;
  unsigned expScores = 0, expMax = 0;
  /// The exponentials are exp(expFactor * (s - max)): a scale inside the
  /// exponential (exp2's is ln 2 times its own), which the ring's rescaling
  /// of its running sums takes too.
  double expFactor = 1;
  /// The row sum's reciprocal, when the division is a multiplication by it
  /// computed on its own; the division after the product with v (then
  /// `div` is null and the exponentials feed the product).
  mlir::linalg::GenericOp reciprocal, divAfter;
  /// A reshape of the probabilities before their product (torch-mlir's
  /// collapse_shape of batch and heads), and its reassociation of the
  /// rows' dims, which the row max and sum take to meet the output.
  mlir::tensor::CollapseShapeOp probsCollapse;
  llvm::SmallVector<mlir::ReassociationIndices> rowGroups;
  mlir::linalg::LinalgOp output; ///< The probabilities against v.
  unsigned probsOperand = 0, valuesOperand = 0, valueLoop = 0;
  /// From the output's dims to the row dims of the max and the sum.
  mlir::AffineMap rowsInOutput;
  int64_t chunk = 0; ///< Each rank's keys.
  /// Keys of a block whose scores are computed at once (divides chunk).
  int64_t pieceSize = 0;
  std::optional<AttentionMask> mask;
  Ring ring;
  /// The balanced ring (set by the pass): each rank also scores the rows
  /// of the block's owner, which travel with the keys, against its own
  /// keys, and returns that partial (row max, sum, output) to the owner,
  /// so that a causal mask leaves every rank one block of work per step
  /// and the ring ends after n / 2 steps (docs/rationale/ring-attention.md).
  bool balance = false;
  /// Why a rank cannot compute another rank's rows (empty when it can),
  /// and the values the chain reads that are functions of the rank's
  /// position along the ring, computed again for the owner's.
  std::string helperBlocker;
  llvm::SmallVector<mlir::Value> positional;
};
/// Matches from either gather. `looksLike` says whether a softmax over
/// the gathered keys was found, in which case `reason` says why it is
/// refused.
mlir::FailureOr<RingAttention>
matchRingAttention(AllGatherOp op, bool &looksLike, std::string &reason);
/// Matches an attention whose k and v are local from the product of q and
/// k `op` (either input may be the keys); `keys`, `values` and `ring` are
/// left empty. `looksLike` and `reason` as for matchRingAttention.
mlir::FailureOr<RingAttention> matchLocalAttention(mlir::linalg::LinalgOp op,
                                                   bool &looksLike,
                                                   std::string &reason);
/// The keys of a block of `chunk` whose scores a ring step computes at
/// once, so that a rank holds rows x that many scores per head at a time:
/// the block cut into `pieces`, or with 0 the largest divisor of it up to
/// 512 keys; 0 when `pieces` does not divide it.
int64_t attentionPieceSize(int64_t chunk, int64_t pieces);
/// The online-softmax ring: k and v blocks travel together, one step
/// ahead of the block's scores, running max, sum and rescaled output.
mlir::LogicalResult decomposeRingAttention(mlir::RewriterBase &rewriter,
                                           RingAttention match);

//===- Halo exchange -> interior compute ----------------------------------===//

/// A linalg op reading a tile whose halo rows ring shifts fill (the import
/// of update_halo: received rows inserted into the tile), split along
/// `loops` so that the box of iterations [first, first + rows) reads no
/// halo row.
struct HaloInterior {
  mlir::linalg::LinalgOp consumer;
  /// The haloed tile, and the tile before the exchange's inserts.
  mlir::Value haloed, before;
  /// A static box of the tile: [lo, lo + size) per dimension.
  struct Box {
    llvm::SmallVector<int64_t> lo, size;
    bool intersects(const Box &other) const {
      for (size_t d = 0; d < lo.size(); ++d)
        if (lo[d] >= other.lo[d] + other.size[d] ||
            other.lo[d] >= lo[d] + size[d])
          return false;
      return true;
    }
  };
  struct Read {
    unsigned operand; ///< Consumer input that is the tile or a slice of it.
    Box box;          ///< What it is of the tile.
  };
  llvm::SmallVector<Read> reads;
  /// The exchange's inserts, first to last, and the rows each writes.
  llvm::SmallVector<mlir::tensor::InsertSliceOp> inserts;
  llvm::SmallVector<Box> halos;
  llvm::SmallVector<ShiftOp> shifts;
  /// The first op that uses a received halo: the interior goes before it.
  mlir::Operation *at = nullptr;
  /// One or two loops split: for each, the first iteration of the
  /// interior, how many, and the loop's extent.
  llvm::SmallVector<unsigned> loops;
  llvm::SmallVector<int64_t> first, rows, extent;
};
/// Failure without a reason: `op` reads no haloed tile.
mlir::FailureOr<HaloInterior> matchHaloInterior(mlir::linalg::LinalgOp op,
                                                std::string &reason);
/// Computes the interior before the halos arrive (from the tile before the
/// exchange, which every shift then reads, so that all can start first)
/// and the rest where the op was.
mlir::LogicalResult splitHaloInterior(mlir::RewriterBase &rewriter,
                                      HaloInterior match);
/// braid-overlap's halo stage: every stencil of `function` after a halo
/// exchange computes its interior while the halos travel, under auto when
/// that is predicted faster (a remark says which box, or why not).
mlir::LogicalResult overlapHalos(mlir::FunctionOpInterface function,
                                 const Context &context,
                                 mlir::RewriterBase &rewriter);

//===- contraction -> ReduceScatter
//----------------------------------------===//

struct MatmulReduceScatter {
  ReduceScatterOp scatter;
  mlir::linalg::LinalgOp producer;
  unsigned loop = 0;
  int64_t blockSize = 0;
  Ring ring;
};
mlir::FailureOr<MatmulReduceScatter>
matchMatmulReduceScatter(ReduceScatterOp op, std::string &reason);
mlir::LogicalResult decomposeMatmulReduceScatter(mlir::RewriterBase &rewriter,
                                                 MatmulReduceScatter match,
                                                 RingOptions options);

/// The ring reduce-scatter of `producer`'s result along result dimension
/// `dim` (indexed by parallel loop `loop`), overlapped with computing it:
/// at each step a rank computes its partial for the block it forwards
/// next while the previous partial sum travels. Returns this rank's
/// reduced block. Inserts at the rewriter's insertion point.
mlir::FailureOr<mlir::Value>
buildRingReduceScatter(mlir::RewriterBase &rewriter, mlir::Location loc,
                       mlir::linalg::LinalgOp producer, unsigned loop,
                       int64_t dim, int64_t blockSize, const Ring &ring,
                       ReductionKind kind, RingOptions options);

/// The linalg op that computes `value` for its single use, in `block`, or
/// null with a reason.
mlir::linalg::LinalgOp soleProducer(mlir::Value value, mlir::Block *block,
                                    std::string &reason);

/// soleProducer(), further required to reduce (a contraction): the partial
/// results the rings add up.
mlir::linalg::LinalgOp reducingProducer(mlir::Value value, mlir::Block *block,
                                        std::string &reason);

/// Bitwise reductions, which the rings do not decompose.
bool isBitwise(ReductionKind kind);

/// The parallel loop indexing dimension `dim` of `producer`'s result, and
/// why not when there is none.
std::optional<unsigned> scatterLoop(mlir::linalg::LinalgOp producer,
                                    int64_t dim, std::string &reason);

//===- contraction -> AllReduce (-> elementwise)
//---------------------------===//

/// Row-wise work after an all-reduce that a rank may run on its block of
/// the reduced rows (see "What moves between a reduce-scatter and its
/// all-gather" in docs/rationale/overlap.md).
struct RowChain {
  /// In program order; `loops` gives the loop of each that indexes the
  /// scattered dimension.
  llvm::SmallVector<mlir::linalg::LinalgOp> ops;
  llvm::SmallVector<unsigned> loops;
  /// The values of the chain (or the rows) used after it, and the
  /// dimension of each that holds the rows.
  llvm::SmallVector<mlir::Value> exits;
  llvm::SmallVector<int64_t> exitDims;
  /// Why the chain stops where it does (empty if nothing follows).
  std::string stop;
};
/// The chain after `op` on `rows` (its result, or a reshape of it), split
/// along `dim`: memory-bound linalg ops reading the rows row by row, whose
/// other operands are proven replicated along `op`'s axes, trimmed from the
/// end until its values are used only after it, and only one of them unless
/// `severalExits`. Never empty of exits.
RowChain matchRowChain(AllReduceOp op, mlir::Value rows, int64_t dim,
                       ReplicationAnalysis &replication, bool severalExits);
/// Clones `chain` on the block of `rows` at `offset` (`block` stands for
/// it); maps each value of the chain, and `rows`, to its block. Empty on
/// failure.
llvm::DenseMap<mlir::Value, mlir::Value>
chainOnBlock(mlir::RewriterBase &rewriter, mlir::Location loc,
             const RowChain &chain, mlir::Value rows, mlir::Value block,
             mlir::Value offset, int64_t blockSize);

struct MatmulAllReduce {
  AllReduceOp reduce;
  mlir::linalg::LinalgOp producer;
  unsigned loop = 0; ///< Producer loop the scatter dimension indexes.
  int64_t dim = 0;   ///< Result dimension scattered and gathered back.
  int64_t blockSize = 0;
  Ring ring;
  /// Row-wise ops moved between the reduce-scatter and the all-gather, in
  /// program order: elementwise work, and row reductions along dimensions
  /// the scatter does not touch (a norm), each proven to read only
  /// replicated values besides the chain's; `chainLoops` gives the loop of
  /// each that the scattered dimension indexes.
  llvm::SmallVector<mlir::linalg::LinalgOp> chain;
  llvm::SmallVector<unsigned> chainLoops;
  /// The one value of the chain (or the all-reduce's result) used after
  /// it, gathered back along `exitDim`.
  mlir::Value exit;
  int64_t exitDim = 0;
  /// Why the chain stops where it does (empty if nothing follows).
  std::string chainStop;
};
/// The ring of an all-reduce whose reduction the decompositions combine
/// (not a bitwise one), or why not.
mlir::FailureOr<Ring> reducingRing(AllReduceOp op, std::string &reason);

mlir::FailureOr<MatmulAllReduce>
matchMatmulAllReduce(AllReduceOp op, ReplicationAnalysis &replication,
                     std::string &reason);
/// Returns the all-gather that completes the all-reduce.
mlir::FailureOr<AllGatherOp>
decomposeMatmulAllReduce(mlir::RewriterBase &rewriter, MatmulAllReduce match,
                         RingOptions options);

//===- AllReduce -> chain, two-shot --------------------------------------===//

/// all_reduce -> row-wise chain, two-shot (strategy two_shot_ar): a direct
/// reduce-scatter along the first dimension that is not 1, summed in the
/// kernel of the chain on this rank's block, then every value the chain
/// leaves gathered back by direct puts.
struct TwoShotAllReduce {
  AllReduceOp reduce;
  Ring ring;
  int64_t dim = 0, blockSize = 0;
  RowChain chain;
};
mlir::FailureOr<TwoShotAllReduce>
matchTwoShotAllReduce(AllReduceOp op, ReplicationAnalysis &replication,
                      std::string &reason);
/// Moves the reshapes after `op` above it, matches again and rewrites.
/// Returns the all-gathers that bring the chain's values back, still
/// whole, so that replication proofs of later collectives can read them;
/// the caller moves them by direct puts (directExchange) once those are
/// done.
mlir::FailureOr<llvm::SmallVector<AllGatherOp>>
decomposeTwoShotAllReduce(mlir::RewriterBase &rewriter, AllReduceOp op,
                          ReplicationAnalysis &replication);

//===- Quantized all-gather -----------------------------------------------===//

/// quantize-all-gather=fp8: replaces `gather` (of f32, bf16 or f16, static
/// shapes) by an all-gather of fp8 e4m3fn codes, each rank's chunk scaled
/// so its largest magnitude is 448, plus an all-gather of the scales, and
/// a decode back to the element type; returns the all-gather of the codes.
/// Fails (changing nothing) on other all-gathers.
mlir::FailureOr<AllGatherOp> quantizeAllGatherFp8(AllGatherOp gather);

/// The error bounds of a `dist.quantized` format: relative to each
/// element, and (fp8) absolute as a fraction of the chunk's largest
/// magnitude; 0 for an unknown format.
void quantizationBounds(llvm::StringRef format, double &relative,
                        double &absolute);

//===- AllToAll <-> contraction
//--------------------------------------------===//

struct AllToAllMatmul {
  AllToAllOp exchange;
  mlir::linalg::LinalgOp compute;
  bool dispatch = true; ///< a2a feeds compute (else compute feeds a2a).
  unsigned loop = 0;    ///< For combine: the loop indexing the per-peer blocks.
  Ring ring;
  /// The views between the exchange and the compute, in the order the
  /// data goes through them (dispatch: linalg.transpose and
  /// tensor.collapse_shape after the exchange; combine: tensor.expand_shape
  /// and linalg.transpose before it), which each peer's block goes through
  /// too, and how many elements of the loop one element of the exchanged
  /// dimension (concatenated or split) is.
  llvm::SmallVector<mlir::Operation *> views;
  int64_t scale = 1;
  /// For dispatch: every contraction the rows feed (compute is the
  /// first's), each computed per arriving block, with the operand the
  /// rows are and the loop indexing the blocks.
  struct Feed {
    mlir::linalg::LinalgOp op;
    unsigned operand;
    unsigned loop;
  };
  llvm::SmallVector<Feed> feeds;
};
mlir::FailureOr<AllToAllMatmul> matchAllToAllMatmul(AllToAllOp op,
                                                    std::string &reason);
mlir::LogicalResult decomposeAllToAllMatmul(mlir::RewriterBase &rewriter,
                                            AllToAllMatmul match);

//===- Micro-batches
//-------------------------------------------------------===//

struct MicroBatch {
  CollectiveOpInterface collective;
  mlir::linalg::LinalgOp producer;
  unsigned loop = 0; ///< Parallel producer loop split into micro-batches.
  int64_t dim = 0;   ///< The collective's input dimension it indexes.
};
mlir::FailureOr<MicroBatch> matchMicroBatch(CollectiveOpInterface op,
                                            int64_t parts, std::string &reason);
mlir::LogicalResult splitMicroBatches(mlir::RewriterBase &rewriter,
                                      MicroBatch match, int64_t parts);

//===- Latency hiding
//------------------------------------------------------===//

/// Where a synchronous collective's start and wait would go: the start
/// right after its input is defined, the wait right before the first use.
struct AsyncPlacement {
  mlir::Operation *startAfter = nullptr; ///< Null: at the block's start.
  mlir::Operation *waitBefore = nullptr;
  /// Ops that would run while the collective is in flight.
  llvm::SmallVector<mlir::Operation *> overlapped;
};
AsyncPlacement planAsync(CollectiveOpInterface op);
/// Rewrites `op` into its start and wait at `placement`.
void makeAsync(mlir::RewriterBase &rewriter, CollectiveOpInterface op,
               const AsyncPlacement &placement);

//===- Direct exchange
//-----------------------------------------------------===//

/// Whether a whole collective (synchronous, or a start whose wait is in its
/// block) has a direct form for symmetric memory; why not otherwise.
mlir::LogicalResult matchDirectExchange(CollectiveOpInterface op,
                                        std::string &why);
/// Replaces it with shifts to each peer offset, marked `dist.symmetric`,
/// posted where it starts and waited where it is waited, and the assembly
/// or reduction of what arrives; a shift is only marked. An all-reduce
/// goes in one shot up to 64 KiB (always with `oneShot`), else as a
/// reduce-scatter then an all-gather.
mlir::LogicalResult directExchange(mlir::RewriterBase &rewriter,
                                   CollectiveOpInterface op,
                                   bool oneShot = false);

/// The first user after the single-use reshapes (tensor.expand_shape,
/// tensor.collapse_shape) that follow an all-reduce or reduce-scatter,
/// when every one of them can move above it (hoistReshapes); null and why
/// not otherwise.
mlir::Operation *userAfterReshapes(CollectiveOpInterface op, std::string &why);
/// Moves those reshapes above the collective: it then reduces the
/// reshaped input (a reduce-scatter along the dimension its rows became),
/// and its result replaces the last reshape's. Returns the new collective.
CollectiveOpInterface hoistReshapes(mlir::RewriterBase &rewriter,
                                    CollectiveOpInterface op);

} // namespace braid::dist::overlap

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_DECOMPOSITIONS_H
