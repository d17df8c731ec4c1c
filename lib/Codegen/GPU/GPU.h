//===- GPU.h - The pieces of braid-map-to-gpu -------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Codegen/GPU: device loops for linalg ops (DeviceLoops.cpp)
// and generated tensor-core GEMMs (GemmKernel.cpp) for the pass in
// MapToGPU.cpp, which sends the other contractions to cuBLASLt through
// lib/Codegen/Gemm.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CODEGEN_GPU_GPU_H
#define BRAID_LIB_CODEGEN_GPU_GPU_H

#include "../Gemm/Gemm.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace braid::codegen {

/// Whether `op` sits in device code already.
bool inDeviceCode(mlir::Operation *op);

/// Whether a block can reduce `op` together: one output, and a payload whose
/// last step folds a value into the f32 output with an add, multiply, max
/// or min.
bool hasBlockCombiner(mlir::linalg::LinalgOp op);

/// The iterations of the thread-strided loop emitDeviceLoops makes for `op`
/// outside a cooperative reduction: its output points, or its 16-byte
/// vectors when it is elementwise over contiguous rows. A launch needs no
/// more threads than that.
int64_t threadLoopTrips(mlir::linalg::LinalgOp op);

/// Emits, at `b`'s insertion point in device code, the loops computing `op`
/// (on buffers, operands looked up in `mapping`) shared by `numThreads`
/// threads, thread `threadId` taking every numThreads-th point of the
/// parallel dimensions (consecutive threads, consecutive innermost elements),
/// 16 bytes per access where a run-time check finds the buffers aligned.
/// With `cooperative`, a reduction along the innermost dimensions is done by
/// all threads of the block together (gpu.all_reduce).
mlir::LogicalResult emitDeviceLoops(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::IRMapping &mapping,
                                    mlir::linalg::LinalgOp op,
                                    mlir::Value threadId,
                                    mlir::Value numThreads, bool cooperative);

/// PTX inline at `b`'s insertion point, with side effects and a memory
/// clobber (the compiler moves no memory access across it): `result` (or
/// none) from `operands` through `constraints` ("=r,l", ...).
mlir::Value emitPtx(mlir::OpBuilder &b, mlir::Location loc, mlir::Type result,
                    llvm::StringRef text, llvm::StringRef constraints,
                    mlir::ValueRange operands);

/// Thread 0's polls of segment `segment`'s flags at the start of each of
/// its tiles (and the block's barrier after them).
using GemmPoll = llvm::function_ref<void(
    mlir::OpBuilder &, mlir::Location, unsigned segment, mlir::Value threadId)>;
/// What each tile of a segment does once its results are stored (the
/// segment's `tiles` tiles counting their arrivals, the last raising its
/// flags), emitted after each of its tiles.
using GemmArrive =
    llvm::function_ref<void(mlir::OpBuilder &, mlir::Location, unsigned segment,
                            mlir::Value threadId, int64_t tiles)>;

/// `op`, a contraction braid_rt_gemm would take with f16 or bf16 operands
/// (or f32 ones as tf32, with `allowTf32`), as a generated tensor-core
/// kernel (GemmKernel.cpp): emits the gpu.launch
/// (folding a zero fill right before `op`, `zeroFillFolded`, and the
/// elementwise op right after it that alone reads its result, `epilogue`)
/// with a remark, and returns it; `op` and `epilogue` are left for the
/// caller to erase. Null with `why` set, and nothing changed, when it does
/// not qualify.
mlir::Operation *emitGemmKernel(mlir::linalg::LinalgOp op, bool allowTf32,
                                std::string &why, bool &zeroFillFolded,
                                mlir::linalg::GenericOp &epilogue);

/// The contractions `segments` (alike in shape, layout and types; their
/// operands may differ) as one persistent tensor-core kernel before
/// `before`: at most `maxBlocks` blocks take their tiles in turn, segment
/// after segment in the order given, each tile running `poll` for its
/// segment first (when given) and `arrive` for it once stored (when
/// given). From zero (`fromZero`: the caller has
/// removed their zero fills) or accumulating into their outputs. Null, with
/// the reason in `why`, when the generator does not take them.
mlir::Operation *
emitSegmentedGemmKernel(llvm::ArrayRef<mlir::linalg::LinalgOp> segments,
                        bool fromZero, int64_t maxBlocks, bool allowTf32,
                        mlir::Operation *before, GemmPoll poll,
                        GemmArrive arrive, std::string &why);

} // namespace braid::codegen

#endif // BRAID_LIB_CODEGEN_GPU_GPU_H
