/*===- braid-c/Braid.h - Braid's C API ----------------------------*- C -*-===*\
|*                                                                            *|
|* Part of Braid.                                                             *|
|*                                                                            *|
|*===----------------------------------------------------------------------===*|
|*                                                                            *|
|* Braid's C API, on top of MLIR's (mlir-c/IR.h). libBraidCAPI.so carries    *|
|* both: MLIR's C API (the MLIRCAPI* archives, which Debian's libMLIR.so does *|
|* not export) and Braid's functions below.                                   *|
|*                                                                            *|
|* Three levels:                                                              *|
|*  - registration and the pipeline on an MlirModule you own (embedders that  *|
|*    already speak MLIR's C API);                                            *|
|*  - compiling a module, or MLIR source text, to an artifact (a shared       *|
|*    library and its manifest) or to the text of one stage;                  *|
|*  - running an artifact on N ranks with buffers you provide.                *|
|*                                                                            *|
|* Options are the words braid-compile takes, with or without the leading     *|
|* dashes, separated by spaces: "overlap=force target-preset=h100 emit=xfer". *|
|* A value with spaces goes in quotes: cuda-path="/opt/cu da" (in double     *|
|* quotes a backslash escapes the next character). braidGetOptions describes *|
|* every option; the list below is checked against it by a test.             *|
|*                                                                            *|
|* Bad arguments are failures, never crashes: a null module, artifact or     *|
|* buffer, or an MlirStringRef whose data is null but whose length is not    *|
|* 0, is reported to `callbacks->diagnostic` (as "error: FUNCTION: ...")     *|
|* and the function fails.                                                    *|
|*                                                                            *|
|* The compiling functions (braidRunPipeline, braidCompile*) compile in the   *|
|* caller's process, inside llvm::CrashRecoveryContext: a compiler crash (a   *|
|* signal, an abort, a fatal LLVM error) on the calling thread fails the      *|
|* call with one diagnostic, "internal compiler error: ...; please report     *|
|* it", instead of ending the process. The crash handlers are installed on    *|
|* the first call and stay; signals outside a compilation go on to the        *|
|* handlers they replaced (docs/rationale/limits-and-crashes.md, "Grid        *|
|* sizes, empty tensors, and compiler crashes in a host process").            *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef BRAID_C_BRAID_H
#define BRAID_C_BRAID_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Braid's version and the LLVM it was built with, as `--version` prints it.
MLIR_CAPI_EXPORTED const char *braidGetVersion(void);

/// Every option, as a JSON array of objects: "flag", "field", "kind" (enum,
/// bool, int, double, string), "default", "help", "stages", "scopes"
/// (pipeline: braidRunPipeline; compile: braidCompile*; run:
/// braidArtifactRun), "values" (enums: name and help of each), "min" and
/// "max" (ints). Null-terminated, owned by the library.
///
/// The options (include/braid/Options/Options.def has their help):
///   pipeline and compile: target (cpu, cuda), sm, cuda-path, gpu-format
///     (bin, isa, fatbin, auto), emulate (also a run option: the emulated
///     device), overlap (auto, force, off), target-preset (auto,
///     cpu, h100, h200), fuse (auto, off), gemm (library, generated),
///     allow-tf32 (cuda, gemm=generated),
///     vector-bytes (0 to 1024; 0: scalar loops), quantize-all-gather (off,
///     bf16, fp8), sub-chunks, bucket-bytes (-1: no buckets; 0: the
///     model's), bidirectional (auto, on, off),
///     balance-attention (auto, on, off), comm (auto, two-sided,
///     symmetric), fuse-collectives (auto, force, one-shot, two-shot, off),
///     zero-copy, fuse-puts, kernel-signals (cuda),
///     attention-block-bytes (cpu; 0: attention whole), memory-plan (an
///     arena per function, its plan added to the report as "memory"),
///     check-schedule, outline-layers, sink-all-reduce, entry, report;
///   pipeline only: skip-import, stop-after (dist, xfer, llvm);
///   compile only: emit (dist, xfer, llvm-mlir, llvm-ir, obj, lib, ptx), O
///     (0 to 3), cpu, timing (the time of each stage, added to the report
///     as "timing": [{"stage", "seconds"}, ...]);
///   run: timeout, threads, emulate.
MLIR_CAPI_EXPORTED const char *braidGetOptions(void);

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

/// Adds Braid's dialects (dist, xfer) and the interface models they use.
MLIR_CAPI_EXPORTED void braidRegisterDialects(MlirDialectRegistry registry);

/// Adds everything Braid's pipeline reads and produces: every upstream
/// dialect and extension, the LLVM IR translations, and Braid's dialects.
MLIR_CAPI_EXPORTED void
braidRegisterCompilerDialects(MlirDialectRegistry registry);

/// Registers Braid's passes and the `braid-pipeline` pipeline with MLIR's
/// pass registry (idempotent).
MLIR_CAPI_EXPORTED void braidRegisterPasses(void);

//===----------------------------------------------------------------------===//
// Callbacks
//===----------------------------------------------------------------------===//

/// Where Braid delivers text. Each callback may be null; all receive
/// `userData`. Text arrives whole (one call per item), not null-terminated.
typedef struct BraidCallbacks {
  /// The emitted stage, for text stages (dist, xfer, llvm-mlir, llvm-ir).
  MlirStringCallback output;
  /// The JSON report of overlap decisions (docs/Design.md, "Report").
  MlirStringCallback report;
  /// One call per diagnostic, printed as "FILE:LINE:COL: error: MESSAGE"
  /// with its notes on the following lines. Only the functions that own
  /// their context (braidCompileSource, braidArtifact*) use it; for a
  /// module you own, attach a handler to its context instead.
  MlirStringCallback diagnostic;
  void *userData;
} BraidCallbacks;

//===----------------------------------------------------------------------===//
// Pipeline and compilation
//===----------------------------------------------------------------------===//

/// Runs Braid's pipeline on `module` in place. `options` are those of
/// `braid-opt --braid-pipeline='...'`: the pipeline's options above
/// (stop-after=dist, xfer or llvm; default llvm). When `callbacks->report`
/// is set the JSON report is delivered to it. Errors are emitted as
/// diagnostics on the module's context; an internal compiler error goes to
/// `callbacks->diagnostic` (stderr without one), and after it `module` may
/// be half-rewritten: do not use it again. The module's context runs
/// without worker threads during the call (crash recovery covers the
/// calling thread only).
MLIR_CAPI_EXPORTED MlirLogicalResult braidRunPipeline(
    MlirModule module, MlirStringRef options, const BraidCallbacks *callbacks);

/// Compiles `module` as braid-compile does. `options` are braid-compile's:
/// the pipeline and compile options above. A text stage goes to
/// `callbacks->output`;
/// emit=obj writes `outputPath`; emit=lib (the default) writes `outputPath`
/// and `outputPath`.manifest. Errors are diagnostics on the module's
/// context; an internal compiler error is as for braidRunPipeline.
MLIR_CAPI_EXPORTED MlirLogicalResult
braidCompileModule(MlirModule module, MlirStringRef options,
                   MlirStringRef outputPath, const BraidCallbacks *callbacks);

/// Parses `source` (MLIR text; `sourceName` names it in diagnostics) in a
/// context of its own and compiles it as braidCompileModule does, delivering
/// every diagnostic to `callbacks->diagnostic`. The one-call entry point for
/// bindings.
MLIR_CAPI_EXPORTED MlirLogicalResult braidCompileSource(
    MlirStringRef source, MlirStringRef sourceName, MlirStringRef options,
    MlirStringRef outputPath, const BraidCallbacks *callbacks);

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

/// A compiled program: a shared library and the manifest next to it.
typedef struct BraidArtifactImpl *BraidArtifact;

/// One argument or result of the entry point, as each rank sees it.
typedef struct BraidTensorType {
  /// f32, f64, f16, bf16, i1, i8, i16, i32 or i64.
  const char *dtype;
  /// Bytes per element (bf16 and f16: 2; i1: 1).
  int64_t elementSize;
  intptr_t rank;
  const int64_t *shape;
} BraidTensorType;

/// Reads `libraryPath`.manifest. Returns null (and reports to
/// `callbacks->diagnostic`) when it is missing or malformed.
MLIR_CAPI_EXPORTED BraidArtifact
braidArtifactLoad(MlirStringRef libraryPath, const BraidCallbacks *callbacks);

MLIR_CAPI_EXPORTED void braidArtifactDestroy(BraidArtifact artifact);

/// The ranks the program was compiled for (the size of its grid). The
/// getters below return 0 for a null artifact.
MLIR_CAPI_EXPORTED int64_t braidArtifactGetNumRanks(BraidArtifact artifact);
MLIR_CAPI_EXPORTED intptr_t
braidArtifactGetNumArguments(BraidArtifact artifact);
MLIR_CAPI_EXPORTED intptr_t braidArtifactGetNumResults(BraidArtifact artifact);
/// The type of argument or result `index`; its dtype is null when
/// `artifact` is null or `index` is out of range.
MLIR_CAPI_EXPORTED BraidTensorType
braidArtifactGetArgumentType(BraidArtifact artifact, intptr_t index);
MLIR_CAPI_EXPORTED BraidTensorType
braidArtifactGetResultType(BraidArtifact artifact, intptr_t index);

/// Runs the program on `ranks` ranks: CPU ranks (mpirun, braid-exec) for a
/// cpu artifact, GPUs (braid-exec-cuda) for a cuda one, or Braid's emulated
/// device with the run option "emulate=true" (its manifest says which
/// target it was compiled for). `inputs`
/// holds ranks * numArguments pointers, rank-major: inputs[r * numArguments
/// + i] is argument i of rank r, a contiguous row-major buffer of its type.
/// `outputs` likewise holds ranks * numResults caller-allocated buffers that
/// receive the results. `options` are extra braid-run options ("trace=PATH",
/// "timeout=SECONDS", the run options above; "profile=true" sends
/// braid-run's output with its per-kernel table to the output callback). The
/// runner is the braid-run next to this library (../bin from its directory) or
/// $BRAID_RUN. Failures (a rank count other than the program's, a null `inputs`
/// or `outputs`, a null buffer for a tensor with elements, a rank's error, a
/// timeout) go to `callbacks->diagnostic`; nothing runs when the arguments are
/// wrong.
MLIR_CAPI_EXPORTED MlirLogicalResult
braidArtifactRun(BraidArtifact artifact, int64_t ranks,
                 const void *const *inputs, void *const *outputs,
                 MlirStringRef options, const BraidCallbacks *callbacks);

#ifdef __cplusplus
}
#endif

#endif // BRAID_C_BRAID_H
