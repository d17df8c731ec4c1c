//===- Pipelines.cpp - Braid's compilation pipelines ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Pipelines/Pipelines.h"

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

#include <mutex>

using namespace mlir;

namespace {

/// Upstream stages are spelled as textual pipelines, which resolve against
/// the pass registry.
void ensureUpstreamPassesRegistered() {
  static std::once_flag once;
  std::call_once(once, [] { mlir::registerAllPasses(); });
}

void addTextual(OpPassManager &pm, llvm::StringRef pipeline) {
  if (failed(parsePassPipeline(pipeline, pm, llvm::errs())))
    llvm::report_fatal_error("braid: malformed built-in pipeline");
}

} // namespace

const char *braid::defaultCudaPath() {
#ifdef BRAID_CUDA_ROOT
  return BRAID_CUDA_ROOT;
#else
  return "";
#endif
}

int64_t braid::sharedMemoryPerBlock(llvm::StringRef sm) {
  // Opt-in shared memory per block (CUDA programming guide, compute
  // capabilities table).
  if (sm.starts_with("90") || sm.starts_with("100") || sm.starts_with("103"))
    return 227 * 1024;
  if (sm.starts_with("80") || sm.starts_with("87"))
    return 163 * 1024;
  if (sm.starts_with("86") || sm.starts_with("89") || sm.starts_with("12"))
    return 99 * 1024;
  return 48 * 1024;
}

bool braid::validatePipelineOptions(const BraidPipelineOptions &options,
                                    std::string &message) {
  auto oneOf = [&](llvm::StringRef name, llvm::StringRef value,
                   std::initializer_list<llvm::StringRef> allowed) {
    if (llvm::is_contained(allowed, value))
      return true;
    message = ("unknown " + name + " '" + value + "', expected one of").str();
    for (llvm::StringRef a : allowed)
      message += " " + a.str();
    return false;
  };
  // sm_XX with an optional feature suffix (a: architecture-specific, f:
  // family); ptxas has the final word on whether it exists.
  llvm::StringRef sm = options.sm;
  llvm::StringRef digits = sm.rtrim("af");
  unsigned number = 0;
  if (options.target == "cuda" &&
      (digits.empty() || digits.getAsInteger(10, number) || number < 70 ||
       sm.size() - digits.size() > 1)) {
    message = "unknown GPU architecture '" + options.sm +
              "', expected a compute capability such as 90a, 90 or 80 (sm_70 "
              "or newer)";
    return false;
  }
  if (options.target == "cuda" && options.cudaPath.empty() &&
      !*defaultCudaPath()) {
    message = "the cuda target needs a CUDA toolkit (ptxas, libdevice): this "
              "Braid was configured without one; give its path with "
              "cuda-path";
    return false;
  }
  return oneOf("target", options.target, {"cpu", "cuda"}) &&
         oneOf("GPU format", options.gpuFormat, {"bin", "isa", "fatbin"}) &&
         oneOf("overlap mode", options.overlap, {"auto", "force", "off"}) &&
         oneOf("target preset", options.targetPreset,
               {"cpu", "h100", "h200"}) &&
         oneOf("fusion mode", options.fuse, {"auto", "off"}) &&
         oneOf("all-gather quantization", options.quantizeAllGather,
               {"off", "bf16", "fp8"}) &&
         oneOf("bidirectional", options.bidirectional, {"auto", "on", "off"}) &&
         oneOf("stage", options.stopAfter, {"dist", "xfer", "llvm"}) &&
         (options.subChunks >= 0 ||
          (message = "sub-chunks must be 0 (automatic) or positive", false));
}

void braid::buildBraidPipeline(OpPassManager &pm,
                               const BraidPipelineOptions &options) {
  ensureUpstreamPassesRegistered();

  // dist: import, then decide how each collective overlaps.
  if (!options.skipImport) {
    pm.addPass(createApplyParallelPlan());
    pm.addPass(createImportShard());
    // Elementwise work on tensors becomes linalg, which the overlap
    // schedules chunk through TilingInterface.
    addTextual(pm, "func.func(convert-elementwise-to-linalg),canonicalize");
    dist::OverlapOptions overlapOptions;
    overlapOptions.mode = options.overlap;
    overlapOptions.preset = options.targetPreset;
    overlapOptions.report = options.report;
    overlapOptions.subChunks = options.subChunks;
    overlapOptions.bidirectional = options.bidirectional;
    overlapOptions.quantizeAllGather = options.quantizeAllGather;
    pm.addPass(dist::createOverlap(overlapOptions));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (options.stopAfter == "dist")
    return;

  // xfer: memory-bound chains fused into kernels, contiguous collectives,
  // bufferization (dist -> xfer), buffers freed at block ends.
  bool cuda = options.target == "cuda";
  dist::FuseMemoryBoundOptions fuseOptions;
  fuseOptions.mode = options.fuse;
  if (cuda) {
    // One block per row: a row's intermediates fit in shared memory, and
    // contractions stay whole for cuBLASLt instead of running in a tile.
    fuseOptions.rowTile = 1;
    fuseOptions.epilogues = false;
  }
  pm.addNestedPass<func::FuncOp>(dist::createFuseMemoryBound(fuseOptions));
  addTextual(pm, "func.func(braid-linearize-collectives,canonicalize)");
  addTextual(pm, "one-shot-bufferize{bufferize-function-boundaries "
                 "function-boundary-type-conversion=identity-layout-map}");
  if (cuda)
    pm.addNestedPass<func::FuncOp>(createGpuKernelScratch());
  // Ownership-based deallocation without the simplification pass, whose
  // cost grows quadratically with the size of a function; the deallocations
  // it would simplify are conditional on static ownerships that canonicalize
  // folds anyway.
  addTextual(pm, "ownership-based-buffer-deallocation,canonicalize,"
                 "bufferization-lower-deallocations,canonicalize,cse");
  if (options.checkSchedule)
    addTextual(pm, "func.func(braid-check-schedule)");
  if (options.stopAfter == "xfer")
    return;

  // llvm: runtime calls, loops, LLVM dialect, the uniform entry point.
  ConvertXferToRuntimeOptions runtimeOptions;
  runtimeOptions.entry = options.entry;
  pm.addPass(createConvertXferToRuntime(runtimeOptions));
  if (cuda) {
    addCudaStages(pm, options);
  } else {
    addCpuStages(pm);
  }
  EmitEntryPointOptions entryOptions;
  entryOptions.entry = options.entry;
  pm.addPass(createEmitEntryPoint(entryOptions));
}

void braid::addCpuStages(OpPassManager &pm) {
  addTextual(pm, "braid-outline-kernels,"
                 "func.func(scf-forall-to-for,convert-linalg-to-loops),"
                 "expand-strided-metadata,lower-affine,convert-scf-to-cf");
  // f16 and bf16 arithmetic runs in f32 (rounded back after each op, as
  // the types demand); then the bf16 conversions become integer code,
  // since the C runtime of our Debian toolchain lacks the bf16 helpers.
  // libm has no reciprocal square root: it becomes 1 / sqrt first.
  addTextual(pm, "func.func(math-expand-ops{ops=rsqrt}),"
                 "math-extend-to-supported-types{extra-types=f16,bf16},"
                 "arith-emulate-unsupported-floats{source-types=f16,bf16 "
                 "target-type=f32},arith-expand{include-bf16},"
                 "convert-math-to-libm,canonicalize");
  addTextual(pm, "finalize-memref-to-llvm,convert-math-to-llvm,"
                 "convert-arith-to-llvm,convert-index-to-llvm,"
                 "convert-cf-to-llvm,convert-func-to-llvm,"
                 "reconcile-unrealized-casts");
}

void braid::addCudaStages(OpPassManager &pm,
                          const BraidPipelineOptions &options) {
  MapToGPUOptions mapOptions;
  mapOptions.sharedMemoryLimit = sharedMemoryPerBlock(options.sm);
  pm.addPass(createMapToGPU(mapOptions));
  std::string toolkit = options.cudaPath.empty()
                            ? std::string(defaultCudaPath())
                            : std::string(options.cudaPath);
  // Kernels: outlined into gpu.modules, lowered to NVVM, compiled by the
  // NVPTX backend and the toolkit's ptxas (libdevice for math functions).
  // bf16 and f16 arithmetic runs in f32 as on the cpu target.
  addTextual(
      pm,
      "func.func(lower-affine,canonicalize),"
      "gpu-launch-sink-index-computations,gpu-kernel-outlining,"
      "braid-merge-gpu-modules,"
      "nvvm-attach-target{chip=sm_" +
          options.sm +
          " O=3},"
          "gpu.module(expand-strided-metadata,lower-affine,convert-scf-to-cf,"
          "math-extend-to-supported-types{extra-types=f16,bf16},"
          "arith-emulate-unsupported-floats{source-types=f16,bf16 "
          "target-type=f32},arith-expand{include-bf16},"
          "convert-gpu-to-nvvm,canonicalize,cse,"
          "reconcile-unrealized-casts,braid-externalize-dynamic-shared-memory),"
          "gpu-module-to-binary{format=" +
          options.gpuFormat + " toolkit=" + toolkit + "}");
  // Host: runtime calls, launches through the runtime's mgpu* functions.
  addTextual(pm, "func.func(scf-forall-to-for),expand-strided-metadata,"
                 "lower-affine,convert-scf-to-cf,canonicalize,"
                 "gpu-to-llvm,finalize-memref-to-llvm,convert-arith-to-llvm,"
                 "convert-index-to-llvm,convert-cf-to-llvm,"
                 "convert-func-to-llvm,reconcile-unrealized-casts");
}

void braid::registerBraidPipelines() {
  PassPipelineRegistration<BraidPipelineOptions>(
      "braid-pipeline",
      "Braid's whole pipeline: import, overlap, bufferize to xfer, lower to "
      "LLVM with runtime calls (stop early with stop-after=dist|xfer)",
      [](OpPassManager &pm, const BraidPipelineOptions &options) {
        buildBraidPipeline(pm, options);
      });
}
