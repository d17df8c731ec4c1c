//===- Pipelines.h - Braid's compilation pipelines --------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// One pipeline, in stages, used by braid-compile, braid-opt
// (`--braid-pipeline`), the C API and embedders alike:
//
//   dist : import upstream shard IR, overlap decisions (dist on tensors)
//   xfer : collectives laid out contiguously, bufferized to xfer transfers,
//          buffers deallocated (rank-local IR on buffers)
//   llvm : runtime calls, loops, the LLVM dialect and the uniform entry point
//
// It is assembled from typed pass constructors: no option value is ever
// spliced into pipeline text.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_PIPELINES_PIPELINES_H
#define BRAID_PIPELINES_PIPELINES_H

#include "braid/Options/Options.h"

#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace braid {

/// The pipeline's options are the options model's (Options.def); the
/// pipeline reads those whose stages are the pipeline's.
using BraidPipelineOptions = Options;

/// Shared memory per block of an sm_XX architecture, in bytes.
int64_t sharedMemoryPerBlock(llvm::StringRef sm);

/// Adds the stages of Braid's pipeline up to `options.stopAfter` to `pm`,
/// which must be anchored on `builtin.module`, after checking `options`
/// (options::validate) and resolving the defaults that depend on the
/// target. Fails, with `error` set when given, on invalid options; `pm` is
/// then unchanged.
mlir::LogicalResult buildBraidPipeline(mlir::OpPassManager &pm,
                                       const BraidPipelineOptions &options,
                                       std::string *error = nullptr);

/// Registers `braid-pipeline` with the pass registry: its options are the
/// option words of the pipeline's options (`target=cuda overlap=force`).
void registerBraidPipelines();

} // namespace braid

#endif // BRAID_PIPELINES_PIPELINES_H
