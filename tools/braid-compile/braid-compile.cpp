//===- braid-compile.cpp - Braid's compiler driver --------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-compile IN.mlir [--target=cpu|cuda [--sm=90a]] -o OUT [--emit=STAGE]
//               [--overlap=MODE]
//
// Runs the whole pipeline (import -> dist transforms -> xfer -> LLVM) and
// writes the requested stage: MLIR text for dist, xfer and llvm-mlir, LLVM IR,
// an object file, the PTX of the kernels (cuda), or (the default) a shared
// library with its manifest, which braid-exec (braid-exec-cuda) runs.
//
//===----------------------------------------------------------------------===//

#include "braid/Compiler/Compiler.h"
#include "braid/InitAll.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("braid-compile options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<input .mlir>"),
                                          cl::init("-"), cl::cat(category));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("path"), cl::init(""),
                                           cl::cat(category));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: dist, xfer, llvm-mlir, llvm-ir, obj, lib "
                  "(a shared library plus OUT.manifest; the default) or ptx "
                  "(cuda: the PTX of all kernels)"),
         cl::init("lib"), cl::cat(category));
static cl::opt<std::string>
    target("target",
           cl::desc("Target: cpu (MPI ranks) or cuda (one GPU per rank: "
                    "kernels as cubins, GEMMs on cuBLASLt, NCCL)"),
           cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    sm("sm",
       cl::desc("cuda: the GPU architecture kernels are compiled for, as a "
                "compute capability: 90a (H100/H200, the default), 90, 80, "
                "..."),
       cl::init("90a"), cl::cat(category));
static cl::opt<std::string>
    cudaPath("cuda-path",
             cl::desc("cuda: the CUDA toolkit whose ptxas and libdevice "
                      "compile the kernels (default: the one Braid was "
                      "configured with)"),
             cl::init(""), cl::cat(category));
static cl::opt<std::string>
    overlap("overlap",
            cl::desc("auto (cost model), force (every match) or off"),
            cl::init("auto"), cl::cat(category));
static cl::opt<std::string>
    fuse("fuse",
         cl::desc("Memory-bound fusion: auto (one kernel per elementwise and "
                  "row-reduction chain, GEMM epilogues included) or off"),
         cl::init("auto"), cl::cat(category));
static cl::opt<std::string> quantizeAllGather(
    "quantize-all-gather",
    cl::desc("Send all-gathers in fewer bits: off (default), bf16 (f32 sent "
             "as bf16, results change by up to 2^-8 relative) or fp8 (e4m3 "
             "with a scale per rank's chunk, up to 2^-4 relative); the "
             "report says so"),
    cl::init("off"), cl::cat(category));
static cl::opt<std::string>
    targetPreset("target-preset",
                 cl::desc("Cost model figures: cpu, h100 or h200 (default: "
                          "cpu for the cpu target, h200 for cuda)"),
                 cl::init(""), cl::cat(category));
static cl::opt<std::string>
    report("report", cl::desc("Write the JSON report of overlap decisions"),
           cl::value_desc("file.json"), cl::init(""), cl::cat(category));
static cl::opt<int64_t>
    subChunks("sub-chunks",
              cl::desc("Pieces per peer chunk in ring schedules (0: the cost "
                       "model picks 1, 2 or 4)"),
              cl::init(0), cl::cat(category));
static cl::opt<std::string>
    bidirectional("bidirectional",
                  cl::desc("Ring directions: auto, on (two rings, each "
                           "carrying half) or off"),
                  cl::init("auto"), cl::cat(category));
static cl::opt<std::string> entry("entry",
                                  cl::desc("Entry function (default: main, "
                                           "or the only public function)"),
                                  cl::init(""), cl::cat(category));
static cl::opt<bool> checkSchedule(
    "check-schedule",
    cl::desc("Prove the transfer schedule free of deadlocks and races"),
    cl::init(false), cl::cat(category));
static cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level"),
                                  cl::init(2), cl::Prefix, cl::cat(category));
static cl::opt<std::string>
    cpu("cpu",
        cl::desc("CPU to generate code for: native (this machine) or an LLVM "
                 "CPU name such as x86-64-v3"),
        cl::init("native"), cl::cat(category));

namespace {

/// Prints `message` as braid-compile's error and returns 1.
int fail(const llvm::Twine &message) {
  llvm::errs() << "braid-compile: error: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << braid::getVersionString() << "\n"; });
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Braid compiler\n");

  braid::CompileOptions options;
  options.target = target;
  options.sm = sm;
  options.cudaPath = cudaPath;
  options.overlap = overlap;
  options.fuse = fuse;
  options.quantizeAllGather = quantizeAllGather;
  options.targetPreset = targetPreset;
  options.report = report;
  options.entry = entry;
  options.subChunks = subChunks;
  options.bidirectional = bidirectional;
  options.checkSchedule = checkSchedule;
  options.emit = emit;
  options.optLevel = optLevel;
  options.cpu = cpu;
  std::string message;
  if (!braid::validateCompileOptions(options, message))
    return fail(message);
  bool binary = emit == "obj" || emit == "lib";
  if (binary && outputFilename.empty())
    return fail("--emit=" + emit + " needs an output file (-o)");

  DialectRegistry registry;
  braid::registerCompilerDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  auto input = openInputFile(inputFilename, &message);
  if (!input)
    return fail(message);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  // Text stages are written only on success, so a failed compile leaves no
  // half-written output behind.
  std::string text;
  llvm::raw_string_ostream textStream(text);
  if (failed(braid::compile(*module, options, outputFilename,
                            binary ? nullptr : &textStream)))
    return 1;
  if (binary)
    return 0;
  auto file = openOutputFile(outputFilename.empty() ? std::string("-")
                                                    : outputFilename.getValue(),
                             &message);
  if (!file)
    return fail(message);
  file->os() << text;
  file->keep();
  return 0;
}
