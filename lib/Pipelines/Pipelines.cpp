//===- Pipelines.cpp - Braid's compilation pipelines ------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Pipelines/Pipelines.h"

#include "braid/Codegen/Passes.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"
#include "braid/Options/OptionsCL.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/BufferizationToMemRef/BufferizationToMemRef.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <deque>
#include <memory>

using namespace mlir;

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

namespace {

/// f16 and bf16 arithmetic runs in f32 (rounded back after each op, as the
/// types demand); then the bf16 conversions become integer code, since the
/// C runtime of our Debian toolchain lacks the bf16 helpers. The same on
/// the host and in kernels.
void addNarrowFloatEmulation(OpPassManager &pm) {
  // f64 to bf16 first: the expansion below only takes f32 to bf16.
  pm.addPass(braid::createRoundWideToBF16());
  // Math ops too (f32 and f64 are the supported types): left on bf16, the
  // polynomial approximations that run later compute them in f32 and
  // truncate back after the expansion below, which an x86 link cannot
  // resolve (__truncsfbf2).
  pm.addPass(math::createMathExtendToSupportedTypes());
  arith::ArithEmulateUnsupportedFloatsOptions emulate;
  emulate.sourceTypeStrs = {"f16", "bf16"};
  emulate.targetTypeStr = "f32";
  pm.addPass(arith::createArithEmulateUnsupportedFloats(emulate));
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
}

/// Memrefs, arithmetic, indices, control flow and functions to LLVM.
void addHostToLLVM(OpPassManager &pm) {
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void addCpuStages(OpPassManager &pm, const braid::Options &options) {
  if (options.gemm == braid::GemmMode::Library)
    pm.addPass(braid::createContractionsToGemm());
  pm.addPass(braid::xfer::createOutlineKernels());
  pm.addPass(braid::createKernelEvents());
  pm.addPass(braid::createTileKernels());
  OpPassManager &functions = pm.nest<func::FuncOp>();
  functions.addPass(createForallToForLoopPass());
  functions.addPass(braid::createHoistAllocas());
  // Elementwise and row-reduction ops as vector loops; the rest as scalar
  // loops.
  braid::VectorizeKernelsOptions vectorize;
  vectorize.vectorBytes = options.vectorBytes;
  functions.addPass(braid::createVectorizeKernels(vectorize));
  functions.addPass(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // libm has no reciprocal square root: it becomes 1 / sqrt first.
  math::MathExpandOpsPassOptions expandOps;
  expandOps.opMnemonics = {"rsqrt"};
  pm.addNestedPass<func::FuncOp>(math::createMathExpandOpsPass(expandOps));
  addNarrowFloatEmulation(pm);
  // exp, tanh, erf, log, ... as arithmetic, which vectors take whole; LLVM
  // for what it computes itself (sqrt, fabs, copysign, ...; on vectors
  // too), libm for the rest.
  pm.addNestedPass<func::FuncOp>(braid::createPolynomialMath());
  ConvertMathToLLVMPassOptions mathToLLVM;
  mathToLLVM.approximateLog1p = false;
  pm.addPass(createConvertMathToLLVMPass(mathToLLVM));
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createCanonicalizerPass());
  ConvertVectorToLLVMPassOptions vectorToLLVM;
  vectorToLLVM.reassociateFPReductions = true;
  pm.addPass(createConvertVectorToLLVMPass(vectorToLLVM));
  addHostToLLVM(pm);
  pm.addPass(braid::createNarrowFloatBits());
}

void addCudaStages(OpPassManager &pm, const braid::Options &options) {
  braid::MapToGPUOptions mapOptions;
  mapOptions.sharedMemoryLimit = braid::sharedMemoryPerBlock(options.sm);
  mapOptions.gemmKernels = options.gemm == braid::GemmMode::Generated;
  mapOptions.allowTf32 = options.allowTf32;
  pm.addPass(braid::createMapToGPU(mapOptions));
  // Launches and GEMMs named by what they compute and where it came from.
  pm.addPass(braid::createKernelEvents());
  // Kernels: outlined into gpu.modules, lowered to NVVM, compiled by the
  // NVPTX backend and the toolkit's ptxas (libdevice for math functions).
  OpPassManager &functions = pm.nest<func::FuncOp>();
  functions.addPass(createLowerAffinePass());
  functions.addPass(createCanonicalizerPass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(braid::createMergeGpuModules());
  GpuNVVMAttachTargetOptions target;
  target.chip = "sm_" + options.sm;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(memref::createExpandStridedMetadataPass());
  kernels.addPass(createLowerAffinePass());
  kernels.addPass(createSCFToControlFlowPass());
  addNarrowFloatEmulation(kernels);
  // The generated GEMMs' ldmatrix (nvgpu), before the rest of the kernel.
  kernels.addPass(createConvertNVGPUToNVVMPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  // The dynamic shared memory symbol must be an external array, or NVPTX
  // allocates it as one static byte that aliases gpu.all_reduce's buffers.
  kernels.addPass(braid::createExternalizeDynamicSharedMemory());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = braid::options::spelling(options.gpuFormat);
  binary.toolkitPath = options.cudaPath.empty()
                           ? std::string(braid::options::defaultCudaPath())
                           : options.cudaPath;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  // Host: runtime calls, launches through the runtime's mgpu* functions.
  pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createGpuToLLVMConversionPass());
  addHostToLLVM(pm);
}

} // namespace

LogicalResult braid::buildBraidPipeline(OpPassManager &pm,
                                        const BraidPipelineOptions &given,
                                        std::string *error) {
  std::string message;
  if (!options::validate(given, message)) {
    if (error)
      *error = message;
    return failure();
  }
  Options options = given;
  options::resolveTargetDefaults(options);
  std::string entryName = options.entry.empty() ? "main" : options.entry;

  // dist: import, then decide how each collective overlaps.
  if (!options.skipImport) {
    pm.addPass(createPrepareImport());
    pm.addPass(createApplyParallelPlan());
    pm.addPass(createImportShard());
    // Elementwise work on tensors becomes linalg, which the overlap
    // schedules chunk through TilingInterface.
    pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
    pm.addPass(createCanonicalizerPass());
    // Before CSE, which would merge the layers' placeholders and fills
    // across layer boundaries and so break their repetition.
    if (options.outlineLayers)
      pm.addPass(createOutlineLayers());
    // One collective per distinct value: partitioning reshards a value once
    // for each use that wants it resharded (q, k and v each gather the
    // normed activations).
    pm.addPass(createCSEPass());
    // Sums reduced after the linear work that shrinks them (an MoE
    // block's combine over the experts).
    if (options.sinkAllReduce)
      pm.addPass(dist::createSinkAllReduce());
    // Row-local work after each all-gather runs before it, on this rank's
    // rows, so that the gathers feed the matmuls; then, when asked, the
    // gathers send fewer bits. The schedules see both.
    if (options.overlap != OverlapMode::Off) {
      dist::SinkAllGatherOptions sink;
      sink.preset = options.targetPreset;
      pm.addPass(dist::createSinkAllGather(sink));
    }
    if (options.quantizeAllGather != QuantizeMode::Off) {
      dist::QuantizeAllGatherOptions quantize;
      quantize.format = options.quantizeAllGather;
      pm.addPass(dist::createQuantizeAllGather(quantize));
    }
    dist::OverlapOptions overlap;
    overlap.mode = options.overlap;
    overlap.preset = options.targetPreset;
    overlap.report = options.report;
    overlap.subChunks = options.subChunks;
    overlap.bucketBytes = options.bucketBytes;
    overlap.bidirectional = options.bidirectional;
    overlap.balanceAttention = options.balanceAttention;
    overlap.comm = options.comm;
    // The sum joins the chain's kernel only when memory-bound fusion runs.
    overlap.fuseCollectives = options.fuse == FuseMode::Off
                                  ? FuseCollectivesMode::Off
                                  : options.fuseCollectives;
    pm.addPass(dist::createOverlap(overlap, options::reportJson(options)));
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
  }
  if (options.stopAfter == PipelineStage::Dist)
    return success();

  // xfer: memory-bound chains fused into kernels, contiguous collectives,
  // bufferization (dist -> xfer), buffers freed at block ends.
  dist::FuseMemoryBoundOptions fuse;
  fuse.mode = options.fuse;
  if (options.cuda()) {
    // One block per row: a row's intermediates fit in shared memory, and
    // contractions stay whole for cuBLASLt instead of running in a tile.
    fuse.rowTile = 1;
    fuse.epilogues = false;
  } else if (options.gemm == GemmMode::Library) {
    // Contractions stay whole for oneDNN, which takes their epilogues.
    fuse.epilogues = false;
  }
  // Where contractions go to a library, which reads operands transposed
  // and multiplies bf16 and f16 values accumulating in f32.
  if (options.cuda() || options.gemm == GemmMode::Library) {
    pm.addNestedPass<func::FuncOp>(createNarrowContractions());
    pm.addNestedPass<func::FuncOp>(createFoldTransposes());
  }
  // Attention a block of query rows at a time, before fusion makes
  // kernels of each block's softmax; on cuda each row's softmax is already
  // a block of its own in shared memory (rowTile = 1).
  if (!options.cuda() && options.attentionBlockBytes > 0) {
    dist::TileAttentionOptions tile;
    tile.blockBytes = options.attentionBlockBytes;
    pm.addNestedPass<func::FuncOp>(dist::createTileAttention(tile));
  }
  if (!options.cuda() && options.fuse != FuseMode::Off)
    pm.addNestedPass<func::FuncOp>(createFuseElementwiseProducers());
  pm.addNestedPass<func::FuncOp>(dist::createFuseMemoryBound(fuse));
  pm.addNestedPass<func::FuncOp>(dist::createLinearizeCollectives());
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  // One placeholder per use: shared ones tie every layer's results into
  // one alias set, which One-Shot Bufferize analyses in quadratic time.
  pm.addNestedPass<func::FuncOp>(createUnsharePlaceholders());
  pm.addNestedPass<func::FuncOp>(createReadOnlyArguments());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  if (options.cuda())
    pm.addNestedPass<func::FuncOp>(createGpuKernelScratch());
  else
    pm.addNestedPass<func::FuncOp>(createCpuKernelScratch());
  // Before deallocation, which leaves the arena's views alone. On the
  // cuda target MapToGPU later moves the arena to device memory.
  if (options.memoryPlan)
    pm.addPass(createPlanMemory());
  // Ownership-based deallocation without the simplification pass, whose
  // cost grows quadratically with the size of a function; the deallocations
  // it would simplify are conditional on static ownerships that canonicalize
  // folds anyway.
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  // The clones ownership-based deallocation leaves (a function returning
  // a buffer it does not own, such as an argument written in place) become
  // an allocation and a copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (options.checkSchedule)
    pm.addNestedPass<func::FuncOp>(xfer::createCheckSchedule());
  // After the check: it proves the two-sided schedule, which the rewrite
  // turns into one-sided transfers channel by channel.
  xfer::SymmetricTransfersOptions symmetric;
  symmetric.zeroCopySlots = options.zeroCopy;
  pm.addPass(xfer::createSymmetricTransfers(symmetric));
  // Puts whose source a fused kernel has just written: the kernel stores
  // into the peer's slot itself.
  if (options.fusePuts)
    pm.addNestedPass<func::FuncOp>(xfer::createFusePuts());
  // Again, for the signal protocol of what the rewrite made one-sided.
  if (options.checkSchedule)
    pm.addNestedPass<func::FuncOp>(xfer::createCheckSchedule());
  // After the check, which proves the stream form this rewrites.
  if (options.cuda() && options.kernelSignals) {
    // With generated GEMMs, contractions that wait for chunks poll them
    // in their tiles.
    xfer::KernelSignalsOptions signals;
    signals.gemmWaits = options.gemm == GemmMode::Generated;
    signals.gemmTf32 = options.allowTf32;
    pm.addPass(xfer::createKernelSignals(signals));
  }
  if (options.stopAfter == PipelineStage::Xfer)
    return success();

  // llvm: runtime calls, loops, LLVM dialect, the uniform entry point.
  ConvertXferToRuntimeOptions runtime;
  runtime.entry = entryName;
  pm.addPass(createConvertXferToRuntime(runtime));
  if (options.cuda())
    addCudaStages(pm, options);
  else
    addCpuStages(pm, options);
  EmitEntryPointOptions entry;
  entry.entry = entryName;
  pm.addPass(createEmitEntryPoint(entry));
  return success();
}

namespace {

/// The pipeline's options as MLIR pass options, for `braid-opt --help`
/// (which lists a pipeline's options through them). The options string
/// itself is parsed by the options model, like every other entry point's.
class PipelineOptionsHelp
    : public mlir::PassPipelineOptions<PipelineOptionsHelp> {
public:
  PipelineOptionsHelp() {
    braid::options::visitFields(
        [&](const braid::options::Info &info, auto member) {
          if (!info.in(braid::options::Scope::Pipeline))
            return;
          using T = std::remove_reference_t<decltype(braid::Options().*member)>;
          texts.push_back(std::string(info.help) +
                          " (default: " + info.defaultValue() + ")");
          llvm::cl::desc description(texts.back());
          if constexpr (std::is_enum_v<T>)
            storage.push_back(std::make_unique<Option<T>>(
                *this, llvm::StringRef(info.flag), description,
                braid::options::EnumValues<T>()));
          else
            storage.push_back(std::make_unique<Option<T>>(
                *this, llvm::StringRef(info.flag), description));
        });
  }

private:
  std::deque<std::string> texts;
  std::vector<std::unique_ptr<llvm::cl::Option>> storage;
};

} // namespace

void braid::registerBraidPipelines() {
  registerPassPipeline(
      "braid-pipeline",
      "Braid's whole pipeline: import, overlap, bufferize to xfer, lower to "
      "LLVM with runtime calls (stop early with stop-after=dist|xfer)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        Options options;
        std::string error;
        if (!options::parseWords(text, options, options::Scope::Pipeline,
                                 error) ||
            failed(buildBraidPipeline(pm, options, &error)))
          return errorHandler("braid-pipeline: " + error);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(PipelineOptionsHelp());
      });
}
