//===- braid-compile.cpp - Braid's compiler driver --------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-compile IN.mlir --target=cpu -o OUT [--emit=STAGE] [--overlap=MODE]
//
// Runs the whole pipeline (import -> dist transforms -> xfer -> LLVM) and
// writes the requested stage: MLIR text for dist, xfer and llvm-mlir, LLVM IR,
// an object file, or (the default) a shared library with its manifest, which
// braid-exec runs.
//
//===----------------------------------------------------------------------===//

#include "braid/InitAll.h"
#include "braid/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;
namespace cl = llvm::cl;

static cl::OptionCategory category("braid-compile options");

static cl::opt<std::string> inputFilename(cl::Positional,
                                          cl::desc("<input .mlir>"),
                                          cl::init("-"), cl::cat(category));
static cl::opt<std::string> outputFilename("o", cl::desc("Output file"),
                                           cl::value_desc("path"),
                                           cl::init(""), cl::cat(category));
static cl::opt<std::string>
    emit("emit",
         cl::desc("What to write: dist, xfer, llvm-mlir, llvm-ir, obj or lib "
                  "(a shared library plus OUT.manifest; the default)"),
         cl::init("lib"), cl::cat(category));
static cl::opt<std::string> target("target", cl::desc("Target: cpu"),
                                   cl::init("cpu"), cl::cat(category));
static cl::opt<std::string>
    overlap("overlap",
            cl::desc("auto (cost model), force (every match) or off"),
            cl::init("auto"), cl::cat(category));
static cl::opt<std::string>
    targetPreset("target-preset",
                 cl::desc("Cost model figures: cpu, h100 or h200"),
                 cl::init("cpu"), cl::cat(category));
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

/// The entry function: --entry, else `main`, else the only public function.
FailureOr<func::FuncOp> findEntry(ModuleOp module) {
  if (!entry.empty()) {
    auto function = module.lookupSymbol<func::FuncOp>(entry);
    if (!function || function.isExternal()) {
      module.emitError() << "entry function '" << entry << "' not found";
      return failure();
    }
    return function;
  }
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    if (!main.isExternal())
      return main;
  func::FuncOp only;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.isExternal() || function.isPrivate())
      continue;
    if (only) {
      module.emitError() << "several public functions and no 'main': name "
                            "the entry with --entry";
      return failure();
    }
    only = function;
  }
  if (!only) {
    module.emitError() << "no function to compile";
    return failure();
  }
  return only;
}

std::string dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isInteger(1))
    return "i1";
  if (type.isInteger(8))
    return "i8";
  if (type.isInteger(16))
    return "i16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return "";
}

/// The manifest braid-exec reads: entry, ranks, grids, argument and result
/// shapes. Written from the SPMD (per-rank) signature after import.
FailureOr<std::string> buildManifest(ModuleOp module, func::FuncOp function) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "braid-manifest 1\n";
  os << "entry " << function.getSymName() << "\n";
  int64_t ranks = 0;
  std::string grids;
  for (auto grid : module.getOps<shard::GridOp>()) {
    int64_t size = 1;
    grids += "grid " + grid.getSymName().str();
    for (int64_t dim : grid.getShape()) {
      if (ShapedType::isDynamic(dim)) {
        grid.emitError() << "grids must have static sizes to run";
        return failure();
      }
      size *= dim;
      grids += " " + std::to_string(dim);
    }
    grids += "\n";
    if (ranks && ranks != size) {
      grid.emitError() << "grid " << grid.getSymName() << " has " << size
                       << " ranks but another grid has " << ranks
                       << "; every grid must span all ranks";
      return failure();
    }
    ranks = size;
  }
  os << "ranks " << (ranks ? ranks : 1) << "\n" << grids;
  auto describe = [&](StringRef kind, unsigned index, Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    std::string dtype = tensor ? dtypeName(tensor.getElementType()) : "";
    if (!tensor || !tensor.hasStaticShape() || dtype.empty()) {
      function.emitError() << kind << " #" << index << " has type " << type
                           << "; runnable entry functions take and return "
                              "statically shaped tensors of f32, f64, f16, "
                              "bf16, i1, i8, i16, i32 or i64";
      return false;
    }
    os << kind << " " << index << " " << dtype;
    for (int64_t dim : tensor.getShape())
      os << " " << dim;
    os << "\n";
    return true;
  };
  for (auto [i, type] : llvm::enumerate(function.getArgumentTypes()))
    if (!describe("arg", i, type))
      return failure();
  for (auto [i, type] : llvm::enumerate(function.getResultTypes()))
    if (!describe("result", i, type))
      return failure();
  return text;
}

std::unique_ptr<llvm::TargetMachine> createTargetMachine(std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return nullptr;
  std::string cpuName = cpu == "native" ? llvm::sys::getHostCPUName().str()
                                        : cpu.getValue();
  std::string features;
  if (cpu == "native") {
    llvm::SubtargetFeatures subtarget;
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      subtarget.AddFeature(feature.first(), feature.second);
    features = subtarget.getString();
  }
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, cpuName, features, options, llvm::Reloc::PIC_));
  if (!machine)
    error = "cannot create a target machine for " + cpuName;
  return machine;
}

int writeText(StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> fn) {
  std::string message;
  auto file = openOutputFile(path.empty() ? "-" : path, &message);
  if (!file)
    return fail(message);
  fn(file->os());
  file->keep();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << braid::getVersionString() << "\n";
  });
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Braid compiler\n");

  static const char *stages[] = {"dist", "xfer", "llvm-mlir", "llvm-ir", "obj",
                                 "lib"};
  if (!llvm::is_contained(stages, emit))
    return fail("unknown --emit=" + emit +
                ", expected dist, xfer, llvm-mlir, llvm-ir, obj or lib");
  bool binary = emit == "obj" || emit == "lib";
  if (binary && outputFilename.empty())
    return fail("--emit=" + emit + " needs an output file (-o)");

  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  braid::registerAllDialects(registry);
  braid::registerAllPasses();
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  std::string message;
  auto input = openInputFile(inputFilename, &message);
  if (!input)
    return fail(message);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;

  braid::BraidPipelineOptions options;
  options.target = target;
  options.overlap = overlap;
  options.targetPreset = targetPreset;
  options.report = report;
  options.checkSchedule = checkSchedule;
  options.subChunks = subChunks;
  options.bidirectional = bidirectional;
  if (!braid::validatePipelineOptions(options, message))
    return fail(message);

  // Stage 1: dist. The manifest describes the SPMD signature it yields.
  options.stopAfter = "dist";
  {
    PassManager pm(&context);
    pm.enableVerifier(true);
    braid::buildBraidPipeline(pm, options);
    if (failed(pm.run(*module)))
      return 1;
  }
  FailureOr<func::FuncOp> entryFunction = findEntry(*module);
  if (failed(entryFunction))
    return 1;
  options.entry = entryFunction->getSymName().str();
  std::string manifest;
  if (emit == "lib") {
    FailureOr<std::string> built = buildManifest(*module, *entryFunction);
    if (failed(built))
      return 1;
    manifest = *built;
  }
  if (emit == "dist")
    return writeText(outputFilename,
                     [&](llvm::raw_ostream &os) { module->print(os); });

  // Stages 2 and 3 continue on the imported module.
  options.stopAfter = emit == "xfer" ? "xfer" : "llvm";
  {
    PassManager pm(&context);
    pm.enableVerifier(true);
    options.skipImport = true;
    braid::buildBraidPipeline(pm, options);
    if (failed(pm.run(*module)))
      return 1;
  }
  if (emit == "xfer" || emit == "llvm-mlir")
    return writeText(outputFilename,
                     [&](llvm::raw_ostream &os) { module->print(os); });

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(*module, llvmContext, "braid");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  std::unique_ptr<llvm::TargetMachine> machine = createTargetMachine(message);
  if (!machine)
    return fail(message);
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (llvm::Error error = makeOptimizingTransformer(
          optLevel, /*sizeLevel=*/0, machine.get())(llvmModule.get()))
    return fail("LLVM optimization failed: " +
                llvm::toString(std::move(error)));
  if (emit == "llvm-ir")
    return writeText(outputFilename,
                     [&](llvm::raw_ostream &os) { llvmModule->print(os, nullptr); });

  // Object code, and for a library the link and the manifest.
  SmallString<128> objectPath(outputFilename.getValue());
  if (emit == "lib") {
    int fd;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("braid", "o", fd, objectPath))
      return fail("cannot create a temporary file: " + ec.message());
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  }
  {
    std::error_code ec;
    llvm::ToolOutputFile object(objectPath, ec, llvm::sys::fs::OF_None);
    if (ec)
      return fail("cannot write " + objectPath + ": " + ec.message());
    llvm::legacy::PassManager codegen;
    if (machine->addPassesToEmitFile(codegen, object.os(), nullptr,
                                     llvm::CodeGenFileType::ObjectFile))
      return fail("the target cannot emit object files");
    codegen.run(*llvmModule);
    object.keep();
  }
  if (emit == "obj")
    return 0;

  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker)
    return fail("no C compiler 'cc' on PATH to link the shared library");
  SmallVector<StringRef> linkArgs{*linker, "-shared", "-o", outputFilename,
                                  objectPath, "-lm"};
  std::string linkError;
  int status = llvm::sys::ExecuteAndWait(*linker, linkArgs, std::nullopt, {},
                                         0, 0, &linkError);
  llvm::sys::fs::remove(objectPath);
  if (status != 0)
    return fail("linking " + outputFilename + " failed" +
                (linkError.empty() ? "" : ": " + linkError));
  return writeText(outputFilename + ".manifest",
                   [&](llvm::raw_ostream &os) { os << manifest; });
}
