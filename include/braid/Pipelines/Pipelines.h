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
//===----------------------------------------------------------------------===//

#ifndef BRAID_PIPELINES_PIPELINES_H
#define BRAID_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace braid {

struct BraidPipelineOptions
    : public mlir::PassPipelineOptions<BraidPipelineOptions> {
  Option<std::string> target{
      *this, "target", llvm::cl::desc("Code generation target: cpu or cuda"),
      llvm::cl::init("cpu")};
  Option<std::string> sm{
      *this, "sm",
      llvm::cl::desc("cuda: the GPU architecture kernels are compiled for "
                     "(90a, 90, 100a, 89, 80, ...)"),
      llvm::cl::init("90a")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("cuda: the CUDA toolkit (ptxas, libdevice); empty for "
                     "the one Braid was configured with"),
      llvm::cl::init("")};
  Option<std::string> gpuFormat{
      *this, "gpu-format",
      llvm::cl::desc("cuda: what kernels become: bin (cubins, through "
                     "ptxas), isa (PTX text) or fatbin"),
      llvm::cl::init("bin")};
  Option<std::string> overlap{
      *this, "overlap",
      llvm::cl::desc("Overlap communication with computation: auto (the "
                     "cost model decides), force (decompose every matched "
                     "pattern, for tests) or off (collectives stay whole)"),
      llvm::cl::init("auto")};
  Option<std::string> targetPreset{
      *this, "target-preset",
      llvm::cl::desc("Cost model figures: h100, h200 or cpu"),
      llvm::cl::init("cpu")};
  Option<std::string> fuse{
      *this, "fuse",
      llvm::cl::desc("Memory-bound fusion: auto (one kernel per elementwise "
                     "/ reduction chain and GEMM epilogue) or off"),
      llvm::cl::init("auto")};
  Option<std::string> quantizeAllGather{
      *this, "quantize-all-gather",
      llvm::cl::desc("Send all-gathers in fewer bits: off, bf16 (f32 as "
                     "bf16, up to 2^-8 relative) or fp8 (e4m3 with "
                     "per-chunk scales, up to 2^-4 relative); opt-in"),
      llvm::cl::init("off")};
  Option<int64_t> subChunks{
      *this, "sub-chunks",
      llvm::cl::desc("Pieces per peer chunk in ring schedules (0: the cost "
                     "model picks)"),
      llvm::cl::init(0)};
  Option<std::string> bidirectional{
      *this, "bidirectional",
      llvm::cl::desc("Ring directions: auto, on or off"),
      llvm::cl::init("auto")};
  Option<std::string> report{
      *this, "report",
      llvm::cl::desc("Write the JSON report of overlap decisions here"),
      llvm::cl::init("")};
  Option<std::string> entry{*this, "entry",
                            llvm::cl::desc("The function runners call"),
                            llvm::cl::init("main")};
  Option<bool> checkSchedule{
      *this, "check-schedule",
      llvm::cl::desc("Prove the transfer schedule free of deadlocks and "
                     "races (braid-check-schedule)"),
      llvm::cl::init(false)};
  Option<bool> skipImport{
      *this, "skip-import",
      llvm::cl::desc("Start after braid-import-shard (the input is dist)"),
      llvm::cl::init(false)};
  Option<std::string> stopAfter{
      *this, "stop-after",
      llvm::cl::desc("Last stage to run: dist, xfer or llvm"),
      llvm::cl::init("llvm")};
};

/// Checks option values; on error returns false and sets `message`.
/// The CUDA toolkit the build found (empty when it found none).
const char *defaultCudaPath();

/// Shared memory per block of an sm_XX architecture, in bytes.
int64_t sharedMemoryPerBlock(llvm::StringRef sm);

bool validatePipelineOptions(const BraidPipelineOptions &options,
                             std::string &message);

/// Adds the stages of Braid's pipeline up to `options.stopAfter` to `pm`,
/// which must be anchored on `builtin.module`.
void buildBraidPipeline(mlir::OpPassManager &pm,
                        const BraidPipelineOptions &options);

/// Registers `braid-pipeline` with the pass registry.
/// The stages after convert-xfer-to-runtime for each target.
void addCpuStages(mlir::OpPassManager &pm);
void addCudaStages(mlir::OpPassManager &pm,
                   const BraidPipelineOptions &options);

void registerBraidPipelines();

} // namespace braid

#endif // BRAID_PIPELINES_PIPELINES_H
