//===- Compiler.cpp - Compile a module to a runnable artifact ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Compiler/Compiler.h"
#include "braid/InitAll.h"
#include "braid/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"

using namespace mlir;

namespace {

/// The entry function: --entry, else `main`, else the only public function.
FailureOr<func::FuncOp> findEntry(ModuleOp module, StringRef entry) {
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

std::unique_ptr<llvm::TargetMachine> createTargetMachine(StringRef cpu,
                                                         std::string &error) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  const llvm::Target *llvmTarget =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!llvmTarget)
    return nullptr;
  std::string cpuName =
      cpu == "native" ? llvm::sys::getHostCPUName().str() : cpu.str();
  // An unknown CPU would be a warning and then, for some names, a fatal
  // error in the backend: refuse it first.
  std::unique_ptr<llvm::MCSubtargetInfo> subtargets(
      llvmTarget->createMCSubtargetInfo(triple, "", ""));
  if (cpu != "native" &&
      (!subtargets || !subtargets->isCPUStringValid(cpuName))) {
    error = "unknown CPU '" + cpuName + "' for " + triple.str() +
            " (`llc -mcpu=help` lists the names)";
    return nullptr;
  }
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

} // namespace

bool braid::parseCompileOptions(StringRef text, CompileOptions &options,
                                std::string &error) {
  return options::parseWords(text, options, options::Scope::Compile, error) &&
         options::validate(options, error);
}

void braid::registerCompilerDialects(DialectRegistry &registry) {
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
  braid::registerAllDialects(registry);
  static bool passes = [] {
    braid::registerAllPasses();
    return true;
  }();
  (void)passes;
}

LogicalResult braid::compile(ModuleOp module, const CompileOptions &options,
                             StringRef outputPath,
                             llvm::raw_ostream *textOutput) {
  MLIRContext *context = module.getContext();
  auto fail = [&](const Twine &message) {
    return emitError(module.getLoc()) << message, failure();
  };
  std::string message;
  if (!options::validate(options, message))
    return fail(message);
  const char *emit = options::spelling(options.emit);
  bool binary = options.emit == EmitKind::Obj || options.emit == EmitKind::Lib;
  if (binary && outputPath.empty())
    return fail(Twine("emit=") + emit + " needs an output file");
  if (!binary && !textOutput)
    return fail(Twine("emit=") + emit + " needs a text output");

  Options pipeline = options;
  // The PTX of the kernels is what gpu-format=isa keeps.
  if (options.emit == EmitKind::Ptx)
    pipeline.gpuFormat = GpuFormat::Isa;
  auto runPipeline = [&]() -> LogicalResult {
    PassManager pm(context);
    pm.enableVerifier(true);
    if (failed(buildBraidPipeline(pm, pipeline, &message)))
      return fail(message);
    return pm.run(module);
  };

  // Stage 1: dist. The manifest describes the SPMD signature it yields.
  pipeline.stopAfter = PipelineStage::Dist;
  if (failed(runPipeline()))
    return failure();
  FailureOr<func::FuncOp> entryFunction = findEntry(module, options.entry);
  if (failed(entryFunction))
    return failure();
  pipeline.entry = entryFunction->getSymName().str();
  std::string manifest;
  if (options.emit == EmitKind::Lib) {
    FailureOr<std::string> built = buildManifest(module, *entryFunction);
    if (failed(built))
      return failure();
    manifest = *built;
  }
  if (options.emit == EmitKind::Dist) {
    module->print(*textOutput);
    return success();
  }

  // Stages 2 and 3 continue on the imported module.
  pipeline.stopAfter = options.emit == EmitKind::Xfer ? PipelineStage::Xfer
                                                      : PipelineStage::Llvm;
  pipeline.skipImport = true;
  if (failed(runPipeline()))
    return failure();
  if (options.emit == EmitKind::Xfer || options.emit == EmitKind::LlvmMlir) {
    module->print(*textOutput);
    return success();
  }
  if (options.emit == EmitKind::Ptx) {
    // The PTX of every kernel module, as ptxas would read it.
    if (module.getOps<gpu::BinaryOp>().empty())
      *textOutput << "// braid: the program has no kernels (its products run "
                     "on cuBLASLt)\n";
    for (auto binary : module.getOps<gpu::BinaryOp>())
      for (Attribute object : binary.getObjects())
        *textOutput << "// braid: kernels of " << binary.getSymName() << "\n"
                    << cast<gpu::ObjectAttr>(object).getObject().getValue()
                    << "\n";
    return success();
  }

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "braid");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options.cpu, message);
  if (!machine)
    return fail(message);
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (llvm::Error error = makeOptimizingTransformer(
          options.optLevel, /*sizeLevel=*/0, machine.get())(llvmModule.get()))
    return fail("LLVM optimization failed: " +
                llvm::toString(std::move(error)));
  if (options.emit == EmitKind::LlvmIr) {
    llvmModule->print(*textOutput, nullptr);
    return success();
  }

  // Object code, and for a library the link and the manifest.
  SmallString<128> objectPath(outputPath);
  if (options.emit == EmitKind::Lib) {
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
  if (options.emit == EmitKind::Obj)
    return success();

  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker)
    return fail("no C compiler 'cc' on PATH to link the shared library");
  SmallVector<StringRef> linkArgs{*linker,    "-shared",  "-o",
                                  outputPath, objectPath, "-lm"};
  std::string linkError;
  int status = llvm::sys::ExecuteAndWait(*linker, linkArgs, std::nullopt, {}, 0,
                                         0, &linkError);
  llvm::sys::fs::remove(objectPath);
  if (status != 0)
    return fail("linking " + outputPath + " failed" +
                (linkError.empty() ? "" : ": " + linkError));
  std::error_code ec;
  llvm::raw_fd_ostream manifestFile((outputPath + ".manifest").str(), ec);
  if (ec)
    return fail("cannot write " + outputPath + ".manifest: " + ec.message());
  manifestFile << manifest;
  return success();
}
