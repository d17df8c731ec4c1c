//===- RingAttention.h - Ring attention's parts -----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to the ring attention pattern, whose files are:
// - Body.cpp: what a softmax's generics compute, read from their bodies
//   whatever the spelling (reciprocals, select-based max, scales inside
//   exp, the division after the product);
// - Match.cpp: the gathers of k and v (or local k and v, for
//   braid-tile-attention), the scores, the softmax, the
//   product with v, each refusal with its reason;
// - Mask.cpp: a causal mask as an affine comparison of indices;
// - Balance.cpp: whether a rank can compute another rank's rows, and what
//   it computes again for them;
// - Rewrite.cpp: the online-softmax ring;
// - Pattern.cpp: its price, its gate under auto, its record.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_RINGATTENTION_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_RINGATTENTION_H

#include "../Decompositions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::func {
class CallOp;
} // namespace mlir::func

namespace braid::dist::overlap::attention {

//===- Reading generic bodies ---------------------------------------------===//

/// "'linalg.generic'": an op's name quoted, for reasons.
std::string quoted(mlir::Operation *op);

/// `value` inside a body, through float extensions and truncations.
mlir::Value throughCasts(mlir::Value value);

/// The op defining the yielded value of a single-result generic, through
/// casts, if it is an `OpTy`.
template <typename OpTy> OpTy yielded(mlir::linalg::GenericOp op) {
  auto yield = mlir::cast<mlir::linalg::YieldOp>(op.getBody()->getTerminator());
  return throughCasts(yield.getValues()[0]).getDefiningOp<OpTy>();
}

/// Whether `value` is block argument `operand` of `op`'s body, through
/// casts.
bool isArg(mlir::Value value, mlir::linalg::GenericOp op, unsigned operand);

/// Whether binary `op` combines block arguments `a` and `b` of `generic`,
/// in either order.
bool combinesArgs(mlir::Operation *op, mlir::linalg::GenericOp generic,
                  unsigned a, unsigned b);

/// A linalg.fill of a zero float.
bool isZeroFill(mlir::Value value);

/// A generic elementwise in `operand` (an identity map, like its result,
/// every loop parallel), single-result, on tensors.
bool isElementwiseOn(mlir::linalg::GenericOp op, unsigned operand);

/// A reduction generic of one input (identity map) into one init, every
/// loop parallel but `loop`, which its result does not index.
bool isRowReduction(mlir::linalg::GenericOp op, unsigned loop);

/// A float constant, defined outside the body or inside it.
std::optional<double> floatConstant(mlir::Value value);

//===- Reading what a softmax's generics compute
//---------------------------===//

/// Whether a reduction generic combines its two block arguments into the
/// larger: maximumf, maxnumf, or a select of one by comparing the two.
bool isMaxCombiner(mlir::linalg::GenericOp op);

/// Whether `op` computes 1 / x of its one input, elementwise.
bool isReciprocal(mlir::linalg::GenericOp op);

/// The operand `op` divides its operand `numerator` by: it yields
/// numerator / d or numerator * (1 / d), either way round; or, with
/// `byReciprocal` set, numerator * d, whose d the caller must prove a
/// reciprocal.
std::optional<unsigned> quotientDenominator(mlir::linalg::GenericOp op,
                                            unsigned numerator,
                                            bool &byReciprocal);

/// The c of exponentials exp(c (s - m)) (for exp2, c is ln 2 times its
/// factor), computed by `exp` from its operands `scores` and `max` (s - m,
/// c (s - m), c s - c m, (s - m) / c, and their exponential), or by `exp`
/// (the difference) and `then` (its exponential, with a factor); nothing
/// when they compute anything else or c is not positive.
std::optional<double> exponentFactor(mlir::linalg::GenericOp exp,
                                     unsigned scores, unsigned max,
                                     mlir::linalg::GenericOp then);

/// The keys' dimension after reshape `op` of a tensor whose keys'
/// dimension is `dim`: a collapse folding it only with unit dimensions, or
/// an expand keeping one non-unit dimension of its group; nullopt for any
/// other op.
std::optional<int64_t> reshapedKeyDim(mlir::Operation *op, int64_t dim);

/// The dimension of a row tensor each of `rowsMap`'s results indexes in
/// the result of `op`, through `op`'s map of `operand` (an identity view
/// of the score dims): the map from `op`'s result dims to the row dims, or
/// null when a row dim does not reach the result.
mlir::AffineMap rowsInResult(mlir::linalg::LinalgOp op, unsigned operand,
                             mlir::AffineMap rowsMap);

//===- Mask.cpp -----------------------------------------------------------===//

/// The mask `op` applies (masked iff e >= 0): a constant of at most -1e30
/// (or -inf) selected where an affine comparison of indices holds, or a
/// mask tensor of 0 and such a constant added (HF's, built from iotas).
std::optional<AttentionMask> blockMask(mlir::linalg::GenericOp op);

//===- Balance.cpp --------------------------------------------------------===//

/// What `call`'s callee returns as `result`, its arguments bound to the
/// call's operands in `arguments`; null for a callee without a body of one
/// block, or one already bound to other operands (called elsewhere).
mlir::Value returnedBy(mlir::func::CallOp call, mlir::OpResult result,
                       llvm::DenseMap<mlir::Value, mlir::Value> &arguments);

/// Where a value the attention reads comes from, for a rank computing
/// another rank's rows (the balanced ring's helper): the same on every rank
/// of the ring, a function of the rank's position along it (computed again
/// for the other rank's position), or neither as far as can be told.
enum class Origin { Invariant, Position, Unknown };

class Origins {
public:
  explicit Origins(const Ring &ring) : ring(ring) {}
  /// Whether `value` is this rank's position along the ring's axis.
  bool isPosition(mlir::Value value) const;
  Origin of(mlir::Value value, int depth = 0);

private:
  /// What a result of a call is, through what the callee returns.
  Origin called(mlir::func::CallOp call, mlir::OpResult result, int depth);

  const Ring &ring;
  llvm::DenseMap<mlir::Value, Origin> known;
  /// The values a called function's arguments stand for, from the calls
  /// followed into it.
  llvm::DenseMap<mlir::Value, mlir::Value> callArguments;
};

/// Why a rank cannot compute another rank's rows of `m` (empty when it
/// can); records in `m.positional` the values the chain reads that depend
/// on the position.
std::string checkHelper(RingAttention &m);

/// `value` computed again with `owner` for the rank's position along the
/// ring (the values a rank that computes another rank's rows reads for
/// that rank); `map` collects what is computed.
mlir::Value atPosition(mlir::RewriterBase &rewriter, Origins &origins,
                       mlir::Value value, mlir::Value owner,
                       mlir::IRMapping &map);

} // namespace braid::dist::overlap::attention

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_OVERLAP_RINGATTENTION_H
