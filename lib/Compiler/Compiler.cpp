//===- Compiler.cpp - Compile a module to a runnable artifact ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Compiler/Compiler.h"
#include "braid/Dialect/Xfer/Transforms/Schedule.h"
#include "braid/InitAll.h"
#include "braid/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/StandardInstrumentations.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <chrono>
#include <thread>

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

/// The manifest braid-exec reads: entry, target (and, for cuda, what its
/// kernels are: ptx, cubin or fatbin), ranks, grids, argument and result
/// shapes. Written from the SPMD (per-rank) signature after import.
FailureOr<std::string> buildManifest(ModuleOp module, func::FuncOp function,
                                     const braid::CompileOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "braid-manifest 1\n";
  os << "entry " << function.getSymName() << "\n";
  if (options.cuda()) {
    braid::CompileOptions resolved = options;
    braid::options::resolveTargetDefaults(resolved);
    os << "target cuda "
       << (resolved.gpuFormat == braid::GpuFormat::Isa      ? "ptx"
           : resolved.gpuFormat == braid::GpuFormat::Fatbin ? "fatbin"
                                                            : "cubin")
       << "\n";
  } else {
    os << "target cpu\n";
  }
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

std::unique_ptr<llvm::TargetMachine>
createTargetMachine(StringRef cpu, llvm::CodeGenOptLevel level,
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
      triple, cpuName, features, options, llvm::Reloc::PIC_,
      /*CM=*/std::nullopt, level));
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

namespace {

/// Seconds since `start`.
double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Adds to `times` the time the kernels' binaries took (ptxas, through
/// gpu-module-to-binary), so that it can be told apart from the rest of the
/// MLIR passes.
class BinaryTimer : public PassInstrumentation {
public:
  void runBeforePass(Pass *pass, Operation *) override {
    if (pass->getArgument() == "gpu-module-to-binary")
      start = std::chrono::steady_clock::now();
  }
  void runAfterPass(Pass *pass, Operation *) override {
    if (pass->getArgument() == "gpu-module-to-binary")
      *seconds += secondsSince(start);
  }
  void runAfterPassFailed(Pass *pass, Operation *op) override {
    runAfterPass(pass, op);
  }
  explicit BinaryTimer(double *seconds) : seconds(seconds) {}

private:
  double *seconds;
  std::chrono::steady_clock::time_point start;
};

/// Adds "timing" (an array of {"stage", "seconds"}) to the JSON report at
/// `path`.
LogicalResult addTimesToReport(StringRef path, const braid::CompileTimes &times,
                               std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read the report " + path.str() + ": " +
            buffer.getError().message();
    return failure();
  }
  llvm::Expected<llvm::json::Value> report =
      llvm::json::parse((*buffer)->getBuffer());
  if (!report || !report->getAsObject()) {
    if (!report)
      llvm::consumeError(report.takeError());
    error = "the report " + path.str() + " is not a JSON object";
    return failure();
  }
  llvm::json::Array stages;
  for (const braid::StageTime &time : times)
    stages.push_back(
        llvm::json::Object{{"stage", time.stage}, {"seconds", time.seconds}});
  (*report->getAsObject())["timing"] = std::move(stages);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write the report " + path.str() + ": " + ec.message();
    return failure();
  }
  os << llvm::formatv("{0:2}", *report) << "\n";
  return success();
}

/// LLVM's default pipeline at `optLevel` (0 to 3), as MLIR's
/// makeOptimizingTransformer builds it, but with optnone honoured: the new
/// pass manager skips optnone functions only through an instrumentation,
/// which that helper does not register, so schedules would be optimized
/// anyway (SLP vectorization of a whole model's schedule took most of a
/// cuda compile).
void optimizeModule(llvm::Module &module, int64_t optLevel,
                    llvm::TargetMachine *machine) {
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager sccs;
  llvm::ModuleAnalysisManager modules;
  llvm::PassInstrumentationCallbacks callbacks;
  llvm::OptNoneInstrumentation optNone(/*DebugLogging=*/false);
  optNone.registerCallbacks(callbacks);
  // Called-value propagation resolves indirect calls, which generated code
  // has none of; its solver walks every value of the module, optnone
  // schedules included, and took half of the optimization of an 80-layer
  // program (the entry's hundreds of weight arguments per layer call).
  callbacks.registerShouldRunOptionalPassCallback(
      [](llvm::StringRef pass, llvm::Any) {
        return pass != "CalledValuePropagationPass";
      });
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = true;
  tuning.LoopInterleaving = true;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(machine, tuning, std::nullopt, &callbacks);
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(sccs);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, sccs, modules);
  const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
      llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager passes =
      optLevel == 0
          ? builder.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
          : builder.buildPerModuleDefaultPipeline(levels[optLevel]);
  passes.run(module, modules);
}

/// Writes `module` as an object file to `path`.
LogicalResult emitObject(llvm::Module &module, llvm::TargetMachine &machine,
                         StringRef path, std::string &error) {
  std::error_code ec;
  llvm::ToolOutputFile object(path, ec, llvm::sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + path.str() + ": " + ec.message();
    return failure();
  }
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, object.os(), nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    error = "the target cannot emit object files";
    return failure();
  }
  codegen.run(module);
  object.keep();
  return success();
}

/// The cpu target's kernels on the rank's threads: each call of a kernel's
/// tile-range companion (`braid.tiles`, from braid-tile-kernels) over
/// [0, count) becomes braid_rt_parallel_for(thunk, context, count), where
/// the context holds the call's other arguments, on the caller's stack, and
/// the thunk unpacks them and calls the companion for its range.
void addTileThreads(llvm::Module &module, const llvm::StringSet<> &tiles) {
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::Type *ptr = llvm::PointerType::getUnqual(context);
  llvm::FunctionCallee parallel = module.getOrInsertFunction(
      "braid_rt_parallel_for",
      llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, ptr, i64},
                              /*isVarArg=*/false));
  for (const auto &entry : tiles) {
    llvm::Function *range = module.getFunction(entry.getKey());
    if (!range || range->isDeclaration() || range->arg_size() < 2)
      continue;
    SmallVector<llvm::Type *> fields;
    for (llvm::Argument &arg : llvm::drop_begin(range->args(), 2))
      fields.push_back(arg.getType());
    llvm::StructType *packed = llvm::StructType::get(context, fields);
    auto *thunk = llvm::Function::Create(
        llvm::FunctionType::get(llvm::Type::getVoidTy(context), {ptr, i64, i64},
                                /*isVarArg=*/false),
        llvm::GlobalValue::InternalLinkage, range->getName() + ".thunk",
        &module);
    {
      llvm::IRBuilder<> b(llvm::BasicBlock::Create(context, "", thunk));
      SmallVector<llvm::Value *> args = {thunk->getArg(1), thunk->getArg(2)};
      for (auto [i, type] : llvm::enumerate(fields))
        args.push_back(
            b.CreateLoad(type, b.CreateStructGEP(packed, thunk->getArg(0), i)));
      b.CreateCall(range, args);
      b.CreateRetVoid();
    }
    // The kernels' calls, over [0, count).
    auto fromZero = [&](llvm::User *user) -> llvm::CallInst * {
      auto *call = dyn_cast<llvm::CallInst>(user);
      if (!call || call->getCalledFunction() != range)
        return nullptr;
      auto *begin = dyn_cast<llvm::ConstantInt>(call->getArgOperand(0));
      return begin && begin->isZero() ? call : nullptr;
    };
    SmallVector<llvm::CallInst *> calls;
    for (llvm::User *user : range->users())
      if (llvm::CallInst *call = fromZero(user))
        calls.push_back(call);
    for (llvm::CallInst *call : calls) {
      llvm::Function *caller = call->getFunction();
      llvm::IRBuilder<> b(&caller->getEntryBlock(),
                          caller->getEntryBlock().begin());
      llvm::AllocaInst *slot = b.CreateAlloca(packed);
      b.SetInsertPoint(call);
      for (unsigned i = 0; i < fields.size(); ++i)
        b.CreateStore(call->getArgOperand(i + 2),
                      b.CreateStructGEP(packed, slot, i));
      b.CreateCall(parallel, {thunk, slot, call->getArgOperand(1)});
      call->eraseFromParent();
    }
  }
}

/// The cpu target's wider code paths: with --cpu=generic, every function
/// holding vector code (the kernels braid-vectorize-kernels made)
/// gets clones for x86-64-v3 (AVX2, FMA, F16C: native f16 conversions) and
/// x86-64-v4 (AVX-512), and its name a dispatcher that calls the widest
/// clone braid_rt_cpu_level() allows. The baseline stays for every other
/// x86-64. Called before optimization, so that each clone is vectorized and
/// generated for its own CPU (LLVM reads the "target-cpu" attribute).
void addCpuDispatch(llvm::Module &module) {
  auto hasVectors = [](const llvm::Function &function) {
    for (const llvm::Instruction &instruction : llvm::instructions(function))
      if (instruction.getType()->isVectorTy())
        return true;
    return false;
  };
  SmallVector<llvm::Function *> kernels;
  for (llvm::Function &function : module.functions())
    if (!function.isDeclaration() && !function.isVarArg() &&
        hasVectors(function))
      kernels.push_back(&function);
  if (kernels.empty())
    return;
  llvm::LLVMContext &context = module.getContext();
  llvm::Type *i64 = llvm::Type::getInt64Ty(context);
  llvm::FunctionCallee level = module.getOrInsertFunction(
      "braid_rt_cpu_level", llvm::FunctionType::get(i64, /*isVarArg=*/false));
  if (auto *declaration = dyn_cast<llvm::Function>(level.getCallee())) {
    declaration->setDoesNotThrow();
    declaration->setOnlyAccessesInaccessibleMemory();
    declaration->setWillReturn();
  }
  // Widest first: level 2 takes v4, level 1 v3, 0 the baseline.
  const std::pair<StringRef, int64_t> paths[] = {{"x86-64-v4", 2},
                                                 {"x86-64-v3", 1}};
  for (llvm::Function *kernel : kernels) {
    std::string name = kernel->getName().str();
    SmallVector<std::pair<llvm::Function *, int64_t>> clones;
    for (auto [cpu, required] : paths) {
      llvm::ValueToValueMapTy map;
      llvm::Function *clone = llvm::CloneFunction(kernel, map);
      clone->setName(name + "." + cpu.str());
      clone->addFnAttr("target-cpu", cpu);
      if (required == 2) {
        clone->addFnAttr("prefer-vector-width", "512");
        clone->addFnAttr("min-legal-vector-width", "512");
      }
      clone->removeFnAttr("target-features");
      clone->setLinkage(llvm::GlobalValue::InternalLinkage);
      clones.push_back({clone, required});
    }
    // The original becomes the baseline clone; a new function of its name
    // and signature dispatches.
    kernel->setName(name + ".generic");
    auto *dispatch = llvm::Function::Create(
        kernel->getFunctionType(), kernel->getLinkage(), name, &module);
    dispatch->copyAttributesFrom(kernel);
    kernel->replaceAllUsesWith(dispatch);
    kernel->setLinkage(llvm::GlobalValue::InternalLinkage);
    SmallVector<llvm::Value *> args;
    for (llvm::Argument &arg : dispatch->args())
      args.push_back(&arg);
    llvm::BasicBlock *entry = llvm::BasicBlock::Create(context, "", dispatch);
    llvm::IRBuilder<> b(entry);
    llvm::Value *have = b.CreateCall(level);
    auto call = [&](llvm::Function *callee) {
      llvm::CallInst *result = b.CreateCall(callee, args);
      result->setTailCall();
      if (callee->getReturnType()->isVoidTy())
        b.CreateRetVoid();
      else
        b.CreateRet(result);
    };
    for (auto [clone, required] : clones) {
      llvm::BasicBlock *take = llvm::BasicBlock::Create(context, "", dispatch);
      llvm::BasicBlock *next = llvm::BasicBlock::Create(context, "", dispatch);
      b.CreateCondBr(b.CreateICmpSGE(have, b.getInt64(required)), take, next);
      b.SetInsertPoint(take);
      call(clone);
      b.SetInsertPoint(next);
    }
    call(kernel);
  }
}

/// Moves the definitions of the functions named `schedules` out of `module`
/// into a module of their own, in `context`, so that they can be generated
/// apart (another thread, another optimization level) and linked back. The
/// two parts refer to each other's symbols, so every local symbol becomes
/// an external one of hidden visibility: still not exported from the
/// library. Global variables stay in `module`. Null when `module` defines
/// none of `schedules`.
std::unique_ptr<llvm::Module> splitSchedules(llvm::Module &module,
                                             const llvm::StringSet<> &schedules,
                                             llvm::LLVMContext &context) {
  auto isSchedule = [&](const llvm::GlobalValue *value) {
    return isa<llvm::Function>(value) && !value->isDeclaration() &&
           schedules.contains(value->getName());
  };
  if (llvm::none_of(module.functions(), [&](const llvm::Function &function) {
        return isSchedule(&function);
      }))
    return nullptr;
  for (llvm::GlobalValue &value : module.global_values()) {
    if (!value.hasLocalLinkage())
      continue;
    if (!value.hasName())
      value.setName("braid.local");
    value.setLinkage(llvm::GlobalValue::ExternalLinkage);
    value.setVisibility(llvm::GlobalValue::HiddenVisibility);
  }
  llvm::ValueToValueMapTy map;
  std::unique_ptr<llvm::Module> part =
      llvm::CloneModule(module, map, isSchedule);
  // Declarations of LLVM's special arrays (constructors, llvm.used) are not
  // valid; their definitions stay with `module`.
  for (llvm::GlobalVariable &global :
       llvm::make_early_inc_range(part->globals()))
    if (global.isDeclaration() && global.getName().starts_with("llvm."))
      global.eraseFromParent();
  for (llvm::Function &function : module.functions())
    if (schedules.contains(function.getName()) && !function.isDeclaration())
      function.deleteBody();
  // Into `context`, through bitcode: a context is one thread's.
  SmallString<0> bitcode;
  llvm::raw_svector_ostream os(bitcode);
  llvm::WriteBitcodeToFile(*part, os);
  part.reset();
  llvm::Expected<std::unique_ptr<llvm::Module>> moved = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(StringRef(bitcode.data(), bitcode.size()),
                            "braid-schedules"),
      context);
  if (!moved) {
    llvm::consumeError(moved.takeError());
    return nullptr;
  }
  return std::move(*moved);
}

} // namespace

void braid::printTimes(const CompileTimes &times, llvm::raw_ostream &os) {
  double total = 0;
  for (const StageTime &time : times) {
    os << llvm::format("braid: timing: %-10s %9.3f s\n", time.stage.c_str(),
                       time.seconds);
    total += time.seconds;
  }
  os << llvm::format("braid: timing: %-10s %9.3f s\n", "total", total);
}

/// What braid::compile does, with the time of each stage added to `times`.
static LogicalResult compileStages(ModuleOp module,
                                   const braid::CompileOptions &options,
                                   StringRef outputPath,
                                   llvm::raw_ostream *textOutput,
                                   braid::CompileTimes &times) {
  using namespace braid;
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
  double binarySeconds = 0;
  auto runPipeline = [&](StringRef stage) -> LogicalResult {
    auto start = std::chrono::steady_clock::now();
    binarySeconds = 0;
    PassManager pm(context);
    pm.enableVerifier(true);
    pm.addInstrumentation(std::make_unique<BinaryTimer>(&binarySeconds));
    if (failed(buildBraidPipeline(pm, pipeline, &message)))
      return fail(message);
    LogicalResult result = pm.run(module);
    times.push_back({stage.str(), secondsSince(start) - binarySeconds});
    if (binarySeconds > 0)
      times.push_back({"ptxas", binarySeconds});
    return result;
  };
  // The time from `start` to now as `stage`.
  auto record = [&](StringRef stage,
                    std::chrono::steady_clock::time_point start) {
    times.push_back({stage.str(), secondsSince(start)});
  };

  // Stage 1: dist. The manifest describes the SPMD signature it yields.
  pipeline.stopAfter = PipelineStage::Dist;
  if (failed(runPipeline("dist")))
    return failure();
  FailureOr<func::FuncOp> entryFunction = findEntry(module, options.entry);
  if (failed(entryFunction))
    return failure();
  pipeline.entry = entryFunction->getSymName().str();
  std::string manifest;
  if (options.emit == EmitKind::Lib) {
    FailureOr<std::string> built =
        buildManifest(module, *entryFunction, options);
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
  if (failed(runPipeline("xfer-llvm")))
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

  // Schedules are generated without optimization (optnone, and so no
  // kernel inlined into them): their code is a call per kernel, transfer
  // and wait, whose cost is the callee's, and LLVM's -O2 on the schedule of
  // a whole model took most of its compile time. Kernels keep -O.
  SmallVector<std::string> schedules;
  llvm::StringSet<> tiles;
  module.walk([&](LLVM::LLVMFuncOp function) {
    if (function->hasAttr(braid::xfer::kScheduleAttrName))
      schedules.push_back(function.getSymName().str());
    if (function->hasAttr(braid::xfer::kTilesAttrName))
      tiles.insert(function.getSymName());
  });
  auto start = std::chrono::steady_clock::now();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext, "braid");
  if (!llvmModule)
    return fail("translation to LLVM IR failed");
  record("translate", start);
  for (const std::string &name : schedules) {
    if (llvm::Function *function = llvmModule->getFunction(name)) {
      function->addFnAttr(llvm::Attribute::NoInline);
      function->addFnAttr(llvm::Attribute::OptimizeNone);
    }
  }
  const llvm::CodeGenOptLevel levels[] = {
      llvm::CodeGenOptLevel::None, llvm::CodeGenOptLevel::Less,
      llvm::CodeGenOptLevel::Default, llvm::CodeGenOptLevel::Aggressive};
  std::unique_ptr<llvm::TargetMachine> machine =
      createTargetMachine(options.cpu, levels[options.optLevel], message);
  if (!machine)
    return fail(message);
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (!options.cuda()) {
    addTileThreads(*llvmModule, tiles);
    if (options.cpu == "generic" &&
        machine->getTargetTriple().getArch() == llvm::Triple::x86_64)
      addCpuDispatch(*llvmModule);
  }
  start = std::chrono::steady_clock::now();
  // The options model has checked the level (0 to 3).
  optimizeModule(*llvmModule, options.optLevel, machine.get());
  record("optimize", start);
  if (options.emit == EmitKind::LlvmIr) {
    llvmModule->print(*textOutput, nullptr);
    return success();
  }

  // Object code: the kernels at the -O level, and the schedules apart, at
  // the backend's -O0 and on a thread of their own. Even without IR
  // optimization, the optimizing register allocator on the schedule of a
  // whole model is superlinear in its length; the fast one is linear.
  // Both parts are linked into the library (or, for emit=obj, into one
  // relocatable object).
  start = std::chrono::steady_clock::now();
  llvm::StringSet<> scheduleNames;
  for (const std::string &name : schedules)
    scheduleNames.insert(name);
  llvm::LLVMContext scheduleContext;
  std::unique_ptr<llvm::Module> scheduleModule =
      splitSchedules(*llvmModule, scheduleNames, scheduleContext);
  SmallVector<SmallString<128>> objects;
  auto temporary = [&]() -> LogicalResult {
    int fd;
    SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("braid", "o", fd, path))
      return fail("cannot create a temporary file: " + ec.message());
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    objects.push_back(path);
    return success();
  };
  auto removeObjects = llvm::make_scope_exit([&] {
    for (const SmallString<128> &path : objects)
      llvm::sys::fs::remove(path);
  });
  if (failed(temporary()) || (scheduleModule && failed(temporary())))
    return failure();
  std::string scheduleError;
  LogicalResult scheduleResult = success();
  std::thread scheduleThread;
  if (scheduleModule) {
    std::unique_ptr<llvm::TargetMachine> scheduleMachine =
        createTargetMachine(options.cpu, llvm::CodeGenOptLevel::None, message);
    if (!scheduleMachine)
      return fail(message);
    scheduleThread = std::thread(
        [&, schedulesMachine = std::move(scheduleMachine)]() mutable {
          scheduleResult = emitObject(*scheduleModule, *schedulesMachine,
                                      objects[1], scheduleError);
        });
  }
  LogicalResult kernelResult =
      emitObject(*llvmModule, *machine, objects[0], message);
  if (scheduleThread.joinable())
    scheduleThread.join();
  if (failed(kernelResult))
    return fail(message);
  if (failed(scheduleResult))
    return fail(scheduleError);
  record("codegen", start);

  if (options.emit == EmitKind::Obj && objects.size() == 1) {
    if (std::error_code ec = llvm::sys::fs::copy_file(objects[0], outputPath))
      return fail("cannot write " + outputPath + ": " + ec.message());
    return success();
  }
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker)
    return fail(
        "no C compiler 'cc' on PATH to link the " +
        Twine(options.emit == EmitKind::Obj ? "object" : "shared library"));
  SmallVector<StringRef> linkArgs{*linker};
  if (options.emit == EmitKind::Obj)
    linkArgs.append({"-r", "-nostdlib"});
  else
    linkArgs.push_back("-shared");
  linkArgs.append({"-o", outputPath});
  for (const SmallString<128> &path : objects)
    linkArgs.push_back(path);
  if (options.emit == EmitKind::Lib)
    linkArgs.push_back("-lm");
  std::string linkError;
  start = std::chrono::steady_clock::now();
  int status = llvm::sys::ExecuteAndWait(*linker, linkArgs, std::nullopt, {}, 0,
                                         0, &linkError);
  record("link", start);
  if (status != 0)
    return fail("linking " + outputPath + " failed" +
                (linkError.empty() ? "" : ": " + linkError));
  if (options.emit == EmitKind::Obj)
    return success();
  std::error_code ec;
  llvm::raw_fd_ostream manifestFile((outputPath + ".manifest").str(), ec);
  if (ec)
    return fail("cannot write " + outputPath + ".manifest: " + ec.message());
  manifestFile << manifest;
  return success();
}

LogicalResult braid::compile(ModuleOp module, const CompileOptions &options,
                             StringRef outputPath,
                             llvm::raw_ostream *textOutput,
                             CompileTimes *times) {
  CompileTimes local;
  CompileTimes &stages = times ? *times : local;
  if (failed(compileStages(module, options, outputPath, textOutput, stages)))
    return failure();
  std::string error;
  if (options.timing && !options.report.empty() &&
      failed(addTimesToReport(options.report, stages, error)))
    return emitError(module.getLoc()) << error, failure();
  return success();
}
