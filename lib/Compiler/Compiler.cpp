//===- Compiler.cpp - Compile a module to a runnable artifact ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Compiler/Compiler.h"

#include "LlvmSteps.h"
#include "Manifest.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/KernelTrace.h"
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
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <thread>

using namespace mlir;
using namespace braid::compiler;

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

/// Adds the keys of `additions` to the JSON report at `path`, after the
/// keys it has, whose text (and order) it keeps; a key it has already is
/// replaced, and then the report is written anew.
LogicalResult amendReport(StringRef path, llvm::json::Object additions,
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
  llvm::json::Object &object = *report->getAsObject();
  bool fresh = llvm::none_of(
      additions, [&](const auto &entry) { return object.get(entry.first); });
  StringRef text = (*buffer)->getBuffer().rtrim();
  std::string amended;
  if (fresh && text.ends_with("}")) {
    // Before the closing brace: the keys as the report put them.
    llvm::raw_string_ostream os(amended);
    os << text.drop_back().rtrim();
    bool first = object.empty();
    for (auto &[key, value] : additions) {
      std::string formatted = llvm::formatv("{0:2}", value).str();
      os << (first ? "\n" : ",\n") << "  \"" << key.str()
         << "\": " << llvm::join(llvm::split(formatted, '\n'), "\n  ");
      first = false;
    }
    os << "\n}\n";
  } else {
    for (auto &[key, value] : additions)
      object[key] = std::move(value);
    amended = llvm::formatv("{0:2}", *report).str() + "\n";
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (ec) {
    error = "cannot write the report " + path.str() + ": " + ec.message();
    return failure();
  }
  os << amended;
  return success();
}

/// "timing": an array of {"stage", "seconds"}.
llvm::json::Array timesToJson(const braid::CompileTimes &times) {
  llvm::json::Array stages;
  for (const braid::StageTime &time : times)
    stages.push_back(
        llvm::json::Object{{"stage", time.stage}, {"seconds", time.seconds}});
  return stages;
}

/// "memory": braid-plan-memory's plan of each function (removed from the
/// module), or nothing if it planned none.
std::optional<llvm::json::Array> takeMemoryPlan(ModuleOp module) {
  auto plans =
      module->getAttrOfType<ArrayAttr>(braid::xfer::kMemoryPlanAttrName);
  if (!plans)
    return std::nullopt;
  module->removeAttr(braid::xfer::kMemoryPlanAttrName);
  llvm::json::Array functions;
  for (auto plan : plans.getAsRange<DictionaryAttr>()) {
    llvm::json::Object object;
    for (NamedAttribute entry : plan) {
      if (auto text = dyn_cast<StringAttr>(entry.getValue()))
        object[entry.getName().strref()] = text.str();
      else if (auto number = dyn_cast<IntegerAttr>(entry.getValue()))
        object[entry.getName().strref()] = number.getInt();
    }
    functions.push_back(std::move(object));
  }
  return functions;
}

/// "compute": the contractions one rank runs in the partitioned entry
/// function and the functions it calls, and their FLOPs (two per
/// multiply-add, each counted once per iteration of the loops around it).
/// A contraction in a loop whose trip count is not static is counted once
/// per run of the loop, and counted in "unbounded".
llvm::json::Object computeToJson(func::FuncOp entry) {
  int64_t contractions = 0, flops = 0, unbounded = 0;
  SymbolTableCollection symbols;
  llvm::SmallPtrSet<Operation *, 8> onPath;
  auto visit = [&](auto &self, func::FuncOp function, int64_t times) -> void {
    if (function.isExternal() || !onPath.insert(function).second)
      return;
    function.getBody().walk([&](Operation *op) {
      int64_t iterations = times;
      bool bounded = true;
      for (Operation *parent = op->getParentOp(); parent != function;
           parent = parent->getParentOp()) {
        auto loop = dyn_cast<LoopLikeOpInterface>(parent);
        if (!loop)
          continue;
        if (std::optional<llvm::APInt> trips = loop.getStaticTripCount())
          iterations *= trips->getSExtValue();
        else
          bounded = false;
      }
      if (auto call = dyn_cast<func::CallOp>(op)) {
        if (auto callee = symbols.lookupNearestSymbolFrom<func::FuncOp>(
                call, call.getCalleeAttr()))
          self(self, callee, iterations);
        return;
      }
      int64_t each = braid::xfer::contractionFlops(op);
      if (each == 0)
        return;
      contractions += iterations;
      flops += each * iterations;
      unbounded += bounded ? 0 : 1;
    });
    onPath.erase(function);
  };
  visit(visit, entry, 1);
  return llvm::json::Object{{"function", entry.getSymName().str()},
                            {"contractions", contractions},
                            {"flops", flops},
                            {"unbounded", unbounded}};
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

/// Object code of `module`: the kernels at `machine`'s -O level, and the
/// schedules (the functions named `schedules`) apart, at the backend's -O0
/// and on a thread of their own. Even without IR optimization, the
/// optimizing register allocator on the schedule of a whole model is
/// superlinear in its length; the fast one is linear. Appends the objects'
/// temporary paths to `objects` (the caller removes them).
static LogicalResult emitObjects(llvm::Module &module,
                                 ArrayRef<std::string> schedules, StringRef cpu,
                                 llvm::TargetMachine &machine,
                                 SmallVectorImpl<SmallString<128>> &objects,
                                 std::string &error) {
  llvm::StringSet<> scheduleNames;
  for (const std::string &name : schedules)
    scheduleNames.insert(name);
  llvm::LLVMContext scheduleContext;
  std::unique_ptr<llvm::Module> scheduleModule =
      splitSchedules(module, scheduleNames, scheduleContext);
  for (int i = 0, e = scheduleModule ? 2 : 1; i < e; ++i) {
    int fd;
    SmallString<128> path;
    if (std::error_code ec =
            llvm::sys::fs::createTemporaryFile("braid", "o", fd, path)) {
      error = "cannot create a temporary file: " + ec.message();
      return failure();
    }
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    objects.push_back(path);
  }
  std::string scheduleError;
  LogicalResult scheduleResult = success();
  std::thread scheduleThread;
  if (scheduleModule) {
    std::unique_ptr<llvm::TargetMachine> scheduleMachine =
        createTargetMachine(cpu, llvm::CodeGenOptLevel::None, error);
    if (!scheduleMachine)
      return failure();
    scheduleThread = std::thread(
        [&, schedulesMachine = std::move(scheduleMachine)]() mutable {
          scheduleResult = emitObject(*scheduleModule, *schedulesMachine,
                                      objects[1], scheduleError);
        });
  }
  LogicalResult kernelResult = emitObject(module, machine, objects[0], error);
  if (scheduleThread.joinable())
    scheduleThread.join();
  if (failed(kernelResult))
    return failure();
  if (failed(scheduleResult)) {
    error = scheduleError;
    return failure();
  }
  return success();
}

/// Links `objects` with the C compiler into `outputPath`: a shared library
/// (emit=lib) or one relocatable object (emit=obj).
static LogicalResult linkObjects(ArrayRef<SmallString<128>> objects,
                                 StringRef outputPath, braid::EmitKind emit,
                                 std::string &error) {
  llvm::ErrorOr<std::string> linker = llvm::sys::findProgramByName("cc");
  if (!linker) {
    error = std::string("no C compiler 'cc' on PATH to link the ") +
            (emit == braid::EmitKind::Obj ? "object" : "shared library");
    return failure();
  }
  SmallVector<StringRef> linkArgs{*linker};
  if (emit == braid::EmitKind::Obj)
    linkArgs.append({"-r", "-nostdlib"});
  else
    linkArgs.push_back("-shared");
  linkArgs.append({"-o", outputPath});
  for (const SmallString<128> &path : objects)
    linkArgs.push_back(path);
  if (emit == braid::EmitKind::Lib)
    linkArgs.push_back("-lm");
  std::string linkError;
  int status = llvm::sys::ExecuteAndWait(*linker, linkArgs, std::nullopt, {}, 0,
                                         0, &linkError);
  if (status != 0) {
    error = "linking " + outputPath.str() + " failed" +
            (linkError.empty() ? "" : ": " + linkError);
    return failure();
  }
  return success();
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
    // Counts the errors the stage reports (and passes them on), so that a
    // pass that fails without one still fails the compile with a message.
    int errors = 0;
    DiagnosticEngine::HandlerID counter =
        context->getDiagEngine().registerHandler([&](Diagnostic &diagnostic) {
          errors += diagnostic.getSeverity() == DiagnosticSeverity::Error;
          return failure();
        });
    LogicalResult result = pm.run(module);
    context->getDiagEngine().eraseHandler(counter);
    times.push_back({stage.str(), secondsSince(start) - binarySeconds});
    if (binarySeconds > 0)
      times.push_back({"ptxas", binarySeconds});
    if (failed(result) && errors == 0)
      return fail(Twine("the ") + stage +
                  " stage failed in a pass that reported no error (a Braid "
                  "bug: please report it with the input)");
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
  if (!options.report.empty() &&
      failed(amendReport(
          options.report,
          llvm::json::Object{{"compute", computeToJson(*entryFunction)}},
          message)))
    return fail(message);
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
  if (std::optional<llvm::json::Array> memory = takeMemoryPlan(module);
      memory && !options.report.empty() &&
      failed(amendReport(options.report,
                         llvm::json::Object{{"memory", std::move(*memory)}},
                         message)))
    return fail(message);
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
  reportFailedAssertions(*llvmModule);
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

  start = std::chrono::steady_clock::now();
  SmallVector<SmallString<128>> objects;
  auto removeObjects = llvm::make_scope_exit([&] {
    for (const SmallString<128> &path : objects)
      llvm::sys::fs::remove(path);
  });
  if (failed(emitObjects(*llvmModule, schedules, options.cpu, *machine, objects,
                         message)))
    return fail(message);
  record("codegen", start);

  if (options.emit == EmitKind::Obj && objects.size() == 1) {
    if (std::error_code ec = llvm::sys::fs::copy_file(objects[0], outputPath))
      return fail("cannot write " + outputPath + ": " + ec.message());
    return success();
  }
  start = std::chrono::steady_clock::now();
  LogicalResult linked =
      linkObjects(objects, outputPath, options.emit, message);
  record("link", start);
  if (failed(linked))
    return fail(message);
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
      failed(amendReport(options.report,
                         llvm::json::Object{{"timing", timesToJson(stages)}},
                         error)))
    return emitError(module.getLoc()) << error, failure();
  return success();
}
