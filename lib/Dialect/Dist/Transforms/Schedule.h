//===- Schedule.h - Building blocks of overlapped schedules -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to BraidDistTransforms: ring index arithmetic, chunked versions
// of linalg ops (through TilingInterface, so every contraction and
// elementwise op a frontend emits qualifies), and one-dimensional slices.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_DIALECT_DIST_TRANSFORMS_SCHEDULE_H
#define BRAID_LIB_DIALECT_DIST_TRANSFORMS_SCHEDULE_H

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <string>

namespace braid::dist::schedule {

/// How a ring schedule is cut: `subChunks` pieces per peer chunk, and one
/// ring or two rings in opposite directions (each carrying half). A
/// `direct` all-gather sends the local chunk to every peer at once instead
/// of forwarding chunks around a ring (one piece per chunk).
struct RingOptions {
  int64_t subChunks = 1;
  bool bidirectional = false;
  bool direct = false;

  int64_t directions() const { return bidirectional ? 2 : 1; }
  /// Pieces each peer chunk is cut into.
  int64_t pieces() const { return subChunks * directions(); }
};

/// What every ring pattern shares: the collective's grid, its single axis
/// and its group size.
struct Ring {
  mlir::FlatSymbolRefAttr grid;
  int16_t axis = 0;
  int64_t groupSize = 0;
};

/// The largest group a schedule is built for. Schedules are unrolled: a
/// ring has a step per rank, a direct exchange a transfer per peer, so a
/// larger group's collective stays whole
/// (docs/rationale/limits-and-crashes.md, "Grid sizes").
constexpr int64_t kMaxScheduleRanks = 128;

/// Common checks: static shapes with elements, one grid axis, a static
/// group of 2 to kMaxScheduleRanks ranks.
mlir::FailureOr<Ring> matchRing(CollectiveOpInterface op, std::string &reason);

/// Why `op` computes nothing ("loop 1 has extent 0"), or an empty string
/// when each of its static loops has at least one iteration. Tiling, which
/// reads a size of 0 as "not tiled", cannot cut such an op into chunks.
std::string emptyLoop(mlir::linalg::LinalgOp op);

/// This rank's position along grid axis `axis` (an index value).
mlir::Value groupPosition(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::FlatSymbolRefAttr grid, int16_t axis);

/// (position + delta) mod n, for a constant delta of any sign.
mlir::Value ringIndex(mlir::OpBuilder &b, mlir::Location loc,
                      mlir::Value position, int64_t delta, int64_t n);

/// index * scale + add.
mlir::Value affineIndex(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value index, int64_t scale, int64_t add);

/// The loop of `op` that dimension `dim` of `operand` is indexed by, if the
/// indexing expression is a plain loop dimension.
std::optional<unsigned> loopOfOperandDim(mlir::linalg::LinalgOp op,
                                         mlir::OpOperand &operand, int64_t dim);

/// The dimension of `op`'s (single) result indexed by `loop`, if any.
std::optional<int64_t> resultDimOfLoop(mlir::linalg::LinalgOp op,
                                       unsigned loop);

/// The parallel loops of `op` that `in`'s map indexes and `notIn`'s does
/// not (a product's rows or columns).
llvm::SmallVector<unsigned> parallelLoopsOnlyIn(mlir::linalg::LinalgOp op,
                                                mlir::OpOperand &in,
                                                mlir::OpOperand &notIn);

/// The value a chain of reshapes (and, with `slices`, slices) of `value`
/// reads: the same elements, or a part of them.
mlir::Value throughViews(mlir::Value value, bool slices = true);

/// Whether `value` is a placeholder init: tensor.empty, or a fill of one
/// with a scalar, seen through reshapes (and, with `throughSlices`,
/// slices). `fill` gets the fill (null for an empty).
bool isPlaceholder(mlir::Value value, mlir::linalg::FillOp *fill = nullptr,
                   bool throughSlices = false);

/// A placeholder of `type` like placeholder `init`: an empty, filled with
/// init's fill value if it has one.
mlir::Value freshPlaceholder(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::Value init, mlir::RankedTensorType type);

/// True if the op accumulates into its init with an associative combiner
/// (a contraction), so that chunks along a reduction loop may be chained.
bool accumulatesIntoInit(mlir::linalg::LinalgOp op);

/// "1.5 KiB", for remarks.
std::string formatBytes(double bytes);

/// An op that moves more bytes than it computes on: a linalg op on tensors
/// that is not a contraction, convolution or transpose, whose maps are
/// projected permutations, whose outermost loop is parallel (the rows a
/// kernel tiles over) and whose loops are static and not empty (an op on
/// no elements is no kernel). braid-fuse-memory-bound
/// makes kernels of chains of them.
bool isMemoryBound(mlir::Operation *op);

/// Slice of `value` along `dim`: [offset, offset + size), other dims whole.
mlir::Value sliceAlong(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value value, int64_t dim,
                       mlir::OpFoldResult offset, int64_t size);

/// Inserts `chunk` into `dest` at `offset` along `dim`.
mlir::Value insertAlong(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Value chunk, mlir::Value dest, int64_t dim,
                        mlir::OpFoldResult offset);

/// The part of `op` for `loop` in [offset, offset + size), every other loop
/// whole, computed on operand slices; `replacements` give, by operand
/// number, values to use instead of the slices (same type as the slice).
/// A non-null `initSource` (a tensor shaped like the op's result) supplies
/// the init slice instead of the op's own init: the accumulator a schedule
/// threads through its chunks, so that bufferization writes every chunk in
/// place. With `initFill` as well, the init slice is first filled with
/// that fill's value: a schedule whose chunks together write the whole
/// result then fills each chunk right before computing it, instead of
/// filling the whole accumulator up front, which lets the cuda target run
/// a zero-initialized chunk product with beta = 0. Returns the chunk's
/// result and where it sits in the op's result.
struct Chunk {
  mlir::Value value;
  llvm::SmallVector<mlir::OpFoldResult> resultOffsets;
  llvm::SmallVector<mlir::OpFoldResult> resultSizes;
};
mlir::FailureOr<Chunk>
computeChunk(mlir::RewriterBase &rewriter, mlir::linalg::LinalgOp op,
             unsigned loop, mlir::OpFoldResult offset, int64_t size,
             llvm::ArrayRef<std::pair<unsigned, mlir::Value>> replacements,
             mlir::Value initSource,
             mlir::linalg::FillOp initFill = mlir::linalg::FillOp());
/// The same for a part of several loops at once.
struct LoopPart {
  unsigned loop;
  mlir::OpFoldResult offset;
  int64_t size;
};
mlir::FailureOr<Chunk>
computeChunk(mlir::RewriterBase &rewriter, mlir::linalg::LinalgOp op,
             llvm::ArrayRef<LoopPart> parts,
             llvm::ArrayRef<std::pair<unsigned, mlir::Value>> replacements,
             mlir::Value initSource,
             mlir::linalg::FillOp initFill = mlir::linalg::FillOp());

/// Inserts a chunk computed by computeChunk into `dest` at its place.
mlir::Value insertChunk(mlir::OpBuilder &b, mlir::Location loc,
                        const Chunk &chunk, mlir::Value dest);

/// The elementwise combination of two tensors by `kind` (sum, max, ...).
mlir::FailureOr<mlir::Value> combine(mlir::OpBuilder &b, mlir::Location loc,
                                     ReductionKind kind, mlir::Value lhs,
                                     mlir::Value rhs);

/// Starts a ring shift of `value` and returns (token, future). `step`
/// becomes the transfer's `dist.step`, which runtime messages and traces
/// show.
std::pair<mlir::Value, mlir::Value>
startShift(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
           mlir::FlatSymbolRefAttr grid, int16_t axis, int64_t offset,
           int64_t step);

/// Waits for a started transfer.
mlir::Value waitFor(mlir::OpBuilder &b, mlir::Location loc,
                    std::pair<mlir::Value, mlir::Value> started);

} // namespace braid::dist::schedule

#endif // BRAID_LIB_DIALECT_DIST_TRANSFORMS_SCHEDULE_H
