//===- Gemm.h - Contractions as library GEMMs -------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Private to lib/Codegen: which contractions a library GEMM runs (cuBLASLt
// on the cuda target, oneDNN on the cpu target), the epilogues it applies,
// and the braid_rt_gemm call that replaces them (Contractions.cpp). Used by
// braid-map-to-gpu and braid-contractions-to-gemm.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_CODEGEN_GEMM_GEMM_H
#define BRAID_LIB_CODEGEN_GEMM_GEMM_H

#include "braid/Runtime/braid_rt.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>
#include <string>

namespace braid::codegen {

/// Runtime codes of element types (braid_rt_dtype), for f32, f16 and bf16.
std::optional<int64_t> runtimeDType(mlir::Type type);
/// Bytes of an integer or float element.
int64_t elementBytes(mlir::Type type);

/// The contraction `op` as braid_rt_gemm arguments, or why it is not one.
struct GemmMatch {
  unsigned batchDim = ~0u, mDim = 0, nDim = 0, kDim = 0;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
};

/// "MxNxK[ in B batches][, reading A/B/A and B transposed]", as remarks
/// describe a product.
std::string describeGemm(const GemmMatch &match);

/// `op` as a braid_rt_gemm, or failure with `why` set.
mlir::FailureOr<GemmMatch> matchGemm(mlir::linalg::LinalgOp op,
                                     std::string &why);

/// cuBLASLt epilogue codes (braid_rt_gemm): activation only, and with bias.
enum class Activation { None, Gelu, Relu };

/// The epilogue a GEMM's result feeds: `generic` reads the GEMM's output
/// `accumulator` (identity map), optionally a bias along the columns, and
/// writes act(accumulator + bias) to its own 2-D output. The activation is
/// recognized by evaluating the payload, so any spelling of GELU (tanh
/// form), ReLU or none matches, and an erf GELU does not.
struct Epilogue {
  mlir::linalg::GenericOp op;
  mlir::Value bias; // null without
  Activation activation = Activation::None;
  /// The braid_rt_epilogue code.
  int64_t code() const {
    switch (activation) {
    case Activation::None:
      return bias ? BRAID_RT_EPILOGUE_BIAS : BRAID_RT_EPILOGUE_NONE;
    case Activation::Gelu:
      return bias ? BRAID_RT_EPILOGUE_BIAS_GELU : BRAID_RT_EPILOGUE_GELU;
    case Activation::Relu:
      return bias ? BRAID_RT_EPILOGUE_BIAS_RELU : BRAID_RT_EPILOGUE_RELU;
    }
    return BRAID_RT_EPILOGUE_NONE;
  }
};

/// The epilogue `generic` computes on `accumulator`, if it is one.
std::optional<Epilogue> matchEpilogue(mlir::linalg::GenericOp generic,
                                      mlir::Value accumulator);

/// The allocation (memref.alloc, gpu.alloc; for a buffer of the memory plan,
/// its memref.view of the arena) `value` is a view of, if any.
mlir::Operation *allocationOf(mlir::Value value);

/// `name(i64 x numArgs)`, declared private in `module` unless it is.
mlir::func::FuncOp declareRuntime(mlir::ModuleOp module, llvm::StringRef name,
                                  unsigned numArgs);

/// What makes `op`'s output zeros right before it: a zero fill of it, or a
/// copy into it of a buffer only ever zero-filled, with nothing between
/// that could touch the buffer (pure ops, allocations, grid queries, other
/// products' copies of the zeros).
mlir::Operation *zeroFillBefore(mlir::linalg::LinalgOp op);

/// Whether `a` and `b` may share bytes: views of one allocation, or buffers
/// of the memory plan whose bytes in the arena overlap.
bool mayShareBytes(mlir::Value a, mlir::Value b);

/// The linalg.generic right after the product `op` (pure ops and
/// allocations between) that alone reads its output, a buffer of its own
/// (fills, copies into it before `op` and deallocations aside), or null.
mlir::linalg::GenericOp readerAfter(mlir::linalg::LinalgOp op);

/// The epilogue right after the product `op` (pure ops and allocations
/// between), when the product's buffer has no other reader, so that the
/// library may write the epilogue's output instead.
std::optional<Epilogue> epilogueAfter(mlir::linalg::LinalgOp op);

/// Replaces the contraction `op` (on buffers) by a braid_rt_gemm call, with
/// a zero fill right before it folded into beta = 0 and an epilogue right
/// after it into the call, and remarks that it runs on `library`; or fails
/// with `why` set, changing nothing.
mlir::LogicalResult replaceWithGemm(mlir::linalg::LinalgOp op,
                                    llvm::StringRef library, std::string &why);

} // namespace braid::codegen

#endif // BRAID_LIB_CODEGEN_GEMM_GEMM_H
