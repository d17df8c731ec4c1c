//===- Braid.cpp - Braid's C API ----------------------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid-c/Braid.h"

#include "braid/Compiler/Compiler.h"
#include "braid/InitAll.h"
#include "braid/Options/Options.h"
#include "braid/Pipelines/Pipelines.h"
#include "braid/Runtime/Artifact.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>

using namespace mlir;
namespace art = braid::artifact;

struct BraidArtifactImpl {
  art::Manifest manifest;
  std::string libraryPath;
};

namespace {

void deliver(MlirStringCallback callback, StringRef text,
             const BraidCallbacks *callbacks) {
  if (callback)
    callback(wrap(text), callbacks->userData);
}

/// Routes the JSON report to `callbacks->report`: when the caller wants it
/// and named no file of its own, the run writes a temporary file, which is
/// read back, delivered and removed.
class ReportCapture {
public:
  explicit ReportCapture(const BraidCallbacks *callbacks)
      : callbacks(callbacks) {}
  ~ReportCapture() {
    if (!temporary.empty())
      llvm::sys::fs::remove(temporary);
  }

  /// Where the run writes the report, given the file `requested`.
  FailureOr<std::string> path(StringRef requested, std::string &error) {
    if (!wanted() || !requested.empty())
      return requested.str();
    int fd;
    if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
            "braid-report", "json", fd, temporary)) {
      error = "cannot create a temporary file: " + ec.message();
      return failure();
    }
    llvm::sys::fs::closeFile(fd);
    return temporary.str().str();
  }

  /// Delivers the report the run wrote to `written`.
  void forward(StringRef written) {
    if (!wanted())
      return;
    if (auto buffer = llvm::MemoryBuffer::getFile(written))
      deliver(callbacks->report, (*buffer)->getBuffer(), callbacks);
  }

private:
  bool wanted() const { return callbacks && callbacks->report; }

  const BraidCallbacks *callbacks;
  SmallString<128> temporary;
};

/// Sends each diagnostic, located and with its notes, to the callback.
std::string formatDiagnostic(Diagnostic &diagnostic) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto printOne = [&](Diagnostic &d) {
    Location loc = d.getLocation();
    if (auto fileLoc = dyn_cast<FileLineColLoc>(loc)) {
      os << fileLoc.getFilename().getValue() << ":" << fileLoc.getLine() << ":"
         << fileLoc.getColumn() << ": ";
    } else if (auto nameLoc = dyn_cast<NameLoc>(loc)) {
      os << nameLoc.getName().getValue() << ": ";
    } else if (!isa<UnknownLoc>(loc)) {
      os << loc << ": ";
    }
    switch (d.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    os << d.str();
  };
  printOne(diagnostic);
  for (Diagnostic &note : diagnostic.getNotes()) {
    os << "\n";
    printOne(note);
  }
  return text;
}

/// Routes a context's diagnostics to `callbacks->diagnostic` while alive.
class CallbackDiagnostics {
public:
  CallbackDiagnostics(MLIRContext *context, const BraidCallbacks *callbacks)
      : handler(context, [callbacks](Diagnostic &diagnostic) {
          if (callbacks && callbacks->diagnostic)
            deliver(callbacks->diagnostic, formatDiagnostic(diagnostic),
                    callbacks);
          return success();
        }) {}

private:
  ScopedDiagnosticHandler handler;
};

/// Reports an error that belongs to no location of the program.
void reportError(const BraidCallbacks *callbacks, const Twine &message) {
  if (callbacks && callbacks->diagnostic)
    deliver(callbacks->diagnostic, ("error: " + message).str(), callbacks);
}

/// Whether `text` is a string: its data may be null only when it is empty.
/// Reports `what` of `function` otherwise.
bool isString(MlirStringRef text, StringRef function, StringRef what,
              const BraidCallbacks *callbacks) {
  if (text.data || !text.length)
    return true;
  reportError(callbacks, function + ": " + what + " is null but has length " +
                             Twine(text.length));
  return false;
}

//===----------------------------------------------------------------------===//
// Crash recovery
//===----------------------------------------------------------------------===//

/// The reason of the fatal LLVM error that ended a compilation on this
/// thread (set by onFatalError).
thread_local std::string fatalErrorReason;

/// LLVM ends the process on a fatal error (report_fatal_error: exit(1) or
/// abort()). Inside a recovery context the compilation ends instead.
void onFatalError(void *, const char *reason, bool) {
  StringRef text = reason ? reason : "";
  if (llvm::CrashRecoveryContext *recovery =
          llvm::CrashRecoveryContext::GetCurrent()) {
    fatalErrorReason = text.empty() ? "no reason given" : text.str();
    recovery->HandleExit(1);
  }
  // Elsewhere as without a handler: the message, then LLVM's exit.
  llvm::errs() << "LLVM ERROR: " << text << "\n";
}

/// TEST ONLY (issue 34): BRAID_CAPI_TEST_CRASH=segv, fpe, abort or fatal
/// makes the compiling entry points crash that way inside their recovery
/// context, so that tests can prove the host process survives a compiler
/// crash. Nothing else reads it; it is no option and not for users.
void crashIfTestAsks() {
  const char *kind = std::getenv("BRAID_CAPI_TEST_CRASH");
  if (!kind)
    return;
  // Through volatile objects: real faults, which no compiler folds away.
  static volatile int *volatile null = nullptr;
  static volatile int one = 1, zero = 0;
  StringRef what(kind);
  if (what == "segv")
    *null = 1;
  else if (what == "fpe")
    zero = one / zero;
  else if (what == "abort")
    std::abort();
  else if (what == "fatal")
    llvm::report_fatal_error("BRAID_CAPI_TEST_CRASH=fatal",
                             /*gen_crash_diag=*/false);
}

/// Runs `compile`, `function`'s compilation of `name`, so that a crash in it
/// (a signal such as SIGSEGV or SIGFPE, an abort, a fatal LLVM error)
/// fails it with one diagnostic instead of ending the host process: Python
/// and other bindings compile in process. `crashed` tells the caller to
/// leak what the compilation worked on rather than destroy it, since its
/// memory may be corrupt. Threads other than the caller's are not covered.
LogicalResult runRecoverably(StringRef function, StringRef name,
                             const BraidCallbacks *callbacks,
                             function_ref<LogicalResult()> compile,
                             bool &crashed) {
  // Once per process: both stay for its lifetime. The signal handlers
  // pass a signal outside a recovery context on to the handlers they
  // replaced (so the host's own crash handling is unchanged), and
  // ImportShard's nested context shares them.
  static std::once_flag enabled;
  std::call_once(enabled, [] {
    llvm::CrashRecoveryContext::Enable();
    llvm::install_fatal_error_handler(onFatalError);
  });
  fatalErrorReason.clear();
  LogicalResult result = failure();
  llvm::CrashRecoveryContext recovery;
  crashed = !recovery.RunSafely([&] {
    crashIfTestAsks();
    result = compile();
  });
  if (!crashed)
    return result;
  std::string how;
  if (!fatalErrorReason.empty())
    how = "stopped on a fatal error (" + fatalErrorReason + ")";
  else if (recovery.RetCode > 128)
    how = "crashed (signal " + std::to_string(recovery.RetCode - 128) + ", " +
          strsignal(recovery.RetCode - 128) + ")";
  else
    how = "crashed (exit code " + std::to_string(recovery.RetCode) + ")";
  std::string message = ("internal compiler error: " + function + " " + how +
                         " while compiling '" + name + "'; please report it")
                            .str();
  if (callbacks && callbacks->diagnostic)
    reportError(callbacks, message);
  else
    llvm::errs() << "error: " << message << "\n";
  return failure();
}

/// What diagnostics call a module: its file, or "the module".
std::string nameOf(ModuleOp module) {
  if (auto loc = dyn_cast<FileLineColLoc>(module.getLoc()))
    return loc.getFilename().str();
  return "the module";
}

/// Runs `compile` on `module`, a module of the caller's, recoverably. The
/// pass manager's worker threads would be outside the recovery context, so
/// the module's context runs without them meanwhile. After a crash the
/// module and its context are left as they are: they may be half-rewritten.
LogicalResult runRecoverablyOn(ModuleOp module, StringRef function,
                               const BraidCallbacks *callbacks,
                               function_ref<LogicalResult()> compile) {
  MLIRContext *context = module.getContext();
  bool threaded = context->isMultithreadingEnabled();
  if (threaded)
    context->disableMultithreading();
  bool crashed = false;
  LogicalResult result =
      runRecoverably(function, nameOf(module), callbacks, compile, crashed);
  if (threaded && !crashed)
    context->enableMultithreading();
  return result;
}

/// Compiles `module`, delivering the report and text output.
LogicalResult compileWithCallbacks(ModuleOp module, StringRef optionText,
                                   StringRef outputPath,
                                   const BraidCallbacks *callbacks) {
  braid::CompileOptions options;
  std::string error;
  if (!braid::parseCompileOptions(optionText, options, error))
    return emitError(module.getLoc()) << error, failure();
  ReportCapture report(callbacks);
  FailureOr<std::string> reportPath = report.path(options.report, error);
  if (failed(reportPath))
    return emitError(module.getLoc()) << error, failure();
  options.report = *reportPath;
  std::string text;
  llvm::raw_string_ostream textStream(text);
  bool binary = options.emit == braid::EmitKind::Obj ||
                options.emit == braid::EmitKind::Lib;
  if (failed(braid::compile(module, options, outputPath,
                            binary ? nullptr : &textStream)))
    return failure();
  report.forward(options.report);
  if (!binary && callbacks && callbacks->output)
    deliver(callbacks->output, text, callbacks);
  return success();
}

BraidTensorType describe(const art::TensorType &type) {
  const art::DTypeInfo &info = art::info(type.dtype);
  return {info.name, info.size, static_cast<intptr_t>(type.shape.size()),
          type.shape.data()};
}

/// braid-run: $BRAID_RUN, else ../bin/braid-run from this library's
/// directory (the build tree and the install tree are laid out alike).
std::string findRunner() {
  if (const char *env = std::getenv("BRAID_RUN"))
    if (*env)
      return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&braidArtifactRun), &info) &&
      info.dli_fname) {
    SmallString<256> path(info.dli_fname);
    llvm::sys::fs::make_absolute(path);
    llvm::sys::path::remove_filename(path);
    llvm::sys::path::append(path, "..", "bin", "braid-run");
    if (llvm::sys::fs::can_execute(path))
      return path.str().str();
  }
  auto onPath = llvm::sys::findProgramByName("braid-run");
  return onPath ? *onPath : std::string();
}

} // namespace

//===----------------------------------------------------------------------===//
// Registration
//===----------------------------------------------------------------------===//

const char *braidGetVersion(void) { return braid::getVersionString(); }

const char *braidGetOptions(void) {
  static const std::string json = braid::options::describeJson();
  return json.c_str();
}

void braidRegisterDialects(MlirDialectRegistry registry) {
  braid::registerAllDialects(*unwrap(registry));
}

void braidRegisterCompilerDialects(MlirDialectRegistry registry) {
  braid::registerCompilerDialects(*unwrap(registry));
}

void braidRegisterPasses(void) {
  static bool registered = [] {
    braid::registerAllPasses();
    return true;
  }();
  (void)registered;
}

//===----------------------------------------------------------------------===//
// Pipeline and compilation
//===----------------------------------------------------------------------===//

MlirLogicalResult braidRunPipeline(MlirModule module, MlirStringRef options,
                                   const BraidCallbacks *callbacks) {
  if (mlirModuleIsNull(module)) {
    reportError(callbacks, "braidRunPipeline: the module is null");
    return wrap(failure());
  }
  if (!isString(options, "braidRunPipeline", "options", callbacks))
    return wrap(failure());
  ModuleOp op = unwrap(module);
  braid::Options pipeline;
  std::string error;
  if (!braid::options::parseWords(unwrap(options), pipeline,
                                  braid::options::Scope::Pipeline, error))
    return wrap(emitError(op.getLoc()) << error);
  ReportCapture report(callbacks);
  FailureOr<std::string> reportPath = report.path(pipeline.report, error);
  if (failed(reportPath))
    return wrap(emitError(op.getLoc()) << error);
  pipeline.report = *reportPath;
  return wrap(runRecoverablyOn(op, "braidRunPipeline", callbacks, [&] {
    PassManager pm(op.getContext());
    pm.enableVerifier(true);
    if (failed(braid::buildBraidPipeline(pm, pipeline, &error)))
      return LogicalResult(emitError(op.getLoc()) << error);
    if (failed(pm.run(op)))
      return failure();
    report.forward(pipeline.report);
    return success();
  }));
}

MlirLogicalResult braidCompileModule(MlirModule module, MlirStringRef options,
                                     MlirStringRef outputPath,
                                     const BraidCallbacks *callbacks) {
  if (mlirModuleIsNull(module)) {
    reportError(callbacks, "braidCompileModule: the module is null");
    return wrap(failure());
  }
  if (!isString(options, "braidCompileModule", "options", callbacks) ||
      !isString(outputPath, "braidCompileModule", "outputPath", callbacks))
    return wrap(failure());
  ModuleOp op = unwrap(module);
  return wrap(runRecoverablyOn(op, "braidCompileModule", callbacks, [&] {
    return compileWithCallbacks(op, unwrap(options), unwrap(outputPath),
                                callbacks);
  }));
}

MlirLogicalResult braidCompileSource(MlirStringRef source,
                                     MlirStringRef sourceName,
                                     MlirStringRef options,
                                     MlirStringRef outputPath,
                                     const BraidCallbacks *callbacks) {
  for (auto [text, what] :
       {std::pair{source, "source"}, std::pair{sourceName, "sourceName"},
        std::pair{options, "options"}, std::pair{outputPath, "outputPath"}})
    if (!isString(text, "braidCompileSource", what, callbacks))
      return wrap(failure());
  // Option errors first, so that a typo is not hidden behind parse errors.
  braid::CompileOptions parsed;
  std::string error;
  if (!braid::parseCompileOptions(unwrap(options), parsed, error)) {
    reportError(callbacks, error);
    return wrap(failure());
  }
  StringRef name = sourceName.length ? unwrap(sourceName) : "<source>";
  // On the heap: after a crash they are leaked, not destroyed.
  DialectRegistry registry;
  braid::registerCompilerDialects(registry);
  auto context =
      std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  context->printOpOnDiagnostic(false);
  auto diagnostics =
      std::make_unique<CallbackDiagnostics>(context.get(), callbacks);
  auto sourceMgr = std::make_unique<llvm::SourceMgr>();
  auto module = std::make_unique<OwningOpRef<ModuleOp>>();
  bool crashed = false;
  LogicalResult result = runRecoverably(
      "braidCompileSource", name, callbacks,
      [&] {
        sourceMgr->AddNewSourceBuffer(
            llvm::MemoryBuffer::getMemBufferCopy(unwrap(source), name),
            llvm::SMLoc());
        *module = parseSourceFile<ModuleOp>(*sourceMgr, context.get());
        if (!*module)
          return failure();
        return compileWithCallbacks(**module, unwrap(options),
                                    unwrap(outputPath), callbacks);
      },
      crashed);
  if (crashed) {
    (void)module.release();
    (void)sourceMgr.release();
    (void)diagnostics.release();
    (void)context.release();
  }
  return wrap(result);
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

BraidArtifact braidArtifactLoad(MlirStringRef libraryPath,
                                const BraidCallbacks *callbacks) {
  if (!isString(libraryPath, "braidArtifactLoad", "libraryPath", callbacks))
    return nullptr;
  auto artifact = std::make_unique<BraidArtifactImpl>();
  artifact->libraryPath = unwrap(libraryPath).str();
  std::string error = art::readManifest(artifact->libraryPath + ".manifest",
                                        artifact->manifest);
  if (!error.empty()) {
    reportError(callbacks, error);
    return nullptr;
  }
  return artifact.release();
}

void braidArtifactDestroy(BraidArtifact artifact) { delete artifact; }

int64_t braidArtifactGetNumRanks(BraidArtifact artifact) {
  return artifact ? artifact->manifest.ranks : 0;
}

intptr_t braidArtifactGetNumArguments(BraidArtifact artifact) {
  return artifact ? artifact->manifest.args.size() : 0;
}

intptr_t braidArtifactGetNumResults(BraidArtifact artifact) {
  return artifact ? artifact->manifest.results.size() : 0;
}

BraidTensorType braidArtifactGetArgumentType(BraidArtifact artifact,
                                             intptr_t index) {
  if (!artifact || index < 0 ||
      static_cast<size_t>(index) >= artifact->manifest.args.size())
    return {nullptr, 0, 0, nullptr};
  return describe(artifact->manifest.args[index]);
}

BraidTensorType braidArtifactGetResultType(BraidArtifact artifact,
                                           intptr_t index) {
  if (!artifact || index < 0 ||
      static_cast<size_t>(index) >= artifact->manifest.results.size())
    return {nullptr, 0, 0, nullptr};
  return describe(artifact->manifest.results[index]);
}

MlirLogicalResult braidArtifactRun(BraidArtifact artifact, int64_t ranks,
                                   const void *const *inputs,
                                   void *const *outputs, MlirStringRef options,
                                   const BraidCallbacks *callbacks) {
  auto fail = [&](const Twine &message) {
    reportError(callbacks, message);
    return wrap(failure());
  };
  if (!artifact)
    return fail("braidArtifactRun: the artifact is null");
  if (!isString(options, "braidArtifactRun", "options", callbacks))
    return wrap(failure());
  const art::Manifest &manifest = artifact->manifest;
  if (ranks != manifest.ranks)
    return fail("the program was compiled for " + Twine(manifest.ranks) +
                " ranks, not " + Twine(ranks));
  // Every buffer before anything runs: a null one where its tensor has
  // elements would be read or written.
  auto checkBuffers = [&](const void *const *buffers, StringRef name,
                          ArrayRef<art::TensorType> types,
                          StringRef kind) -> LogicalResult {
    if (types.empty())
      return success();
    if (!buffers) {
      reportError(callbacks,
                  "braidArtifactRun: " + name + " is null; expected ranks * " +
                      kind + "s = " + Twine(ranks * types.size()) + " buffers");
      return failure();
    }
    for (int64_t rank = 0; rank < ranks; ++rank)
      for (size_t i = 0; i < types.size(); ++i) {
        size_t slot = rank * types.size() + i;
        if (!buffers[slot] && types[i].numElements() > 0) {
          reportError(callbacks, "braidArtifactRun: " + name + "[" +
                                     Twine(slot) + "] (" + kind + " " +
                                     Twine(i) + " of rank " + Twine(rank) +
                                     ", " + types[i].str() + ") is null");
          return failure();
        }
      }
    return success();
  };
  if (failed(checkBuffers(inputs, "inputs", manifest.args, "argument")) ||
      failed(checkBuffers(outputs, "outputs", manifest.results, "result")))
    return wrap(failure());
  std::string runner = findRunner();
  if (runner.empty())
    return fail("cannot find braid-run next to libBraidCAPI (../bin) or on "
                "PATH; set BRAID_RUN");

  // The buffers travel as .npy files in a directory of our own.
  SmallString<128> directory;
  if (std::error_code ec =
          llvm::sys::fs::createUniqueDirectory("braid-run", directory))
    return fail("cannot create a temporary directory: " + ec.message());
  llvm::scope_exit cleanup(
      [&] { llvm::sys::fs::remove_directories(directory); });
  auto fileName = [&](StringRef kind, size_t index, StringRef rank) {
    SmallString<128> path(directory);
    llvm::sys::path::append(path, kind + Twine(index) + "_" + rank + ".npy");
    return path.str().str();
  };
  size_t numArgs = manifest.args.size(), numResults = manifest.results.size();
  for (int64_t rank = 0; rank < ranks; ++rank)
    for (size_t i = 0; i < numArgs; ++i) {
      std::string path = fileName("arg", i, std::to_string(rank));
      std::string error =
          art::writeNpy(path, manifest.args[i], inputs[rank * numArgs + i]);
      if (!error.empty())
        return fail("cannot write " + path + ": " + error);
    }

  std::vector<std::string> args{runner, artifact->libraryPath,
                                "--ranks=" + std::to_string(ranks)};
  for (size_t i = 0; i < numArgs; ++i)
    args.push_back("--input=@" + fileName("arg", i, "{rank}"));
  for (size_t i = 0; i < numResults; ++i)
    args.push_back("--output=@" + fileName("result", i, "{rank}"));
  // braid-run's own words, unquoted: they travel as arguments, not text.
  std::vector<std::pair<std::string, std::string>> words;
  std::string error;
  if (!braid::options::splitWords(unwrap(options), words, error))
    return fail(error);
  // profile=true|false is braid-run's flag --profile; its table comes back
  // through the output callback.
  bool profile = false;
  for (auto &[key, value] : words) {
    if (key != "profile") {
      args.push_back("--" + key + "=" + value);
      continue;
    }
    if (value != "true" && value != "false")
      return fail("braidArtifactRun: profile takes true or false, not '" +
                  value + "'");
    profile = value == "true";
  }
  if (profile)
    args.push_back("--profile");

  SmallString<128> logPath(directory);
  llvm::sys::path::append(logPath, "log.txt");
  std::optional<StringRef> redirects[] = {std::nullopt, logPath.str(),
                                          logPath.str()};
  SmallVector<StringRef> argRefs(args.begin(), args.end());
  std::string execError;
  int status = llvm::sys::ExecuteAndWait(runner, argRefs, std::nullopt,
                                         redirects, 0, 0, &execError);
  if (status != 0) {
    auto log = llvm::MemoryBuffer::getFile(logPath);
    std::string text = log ? (*log)->getBuffer().trim().str() : execError;
    return fail("braid-run failed (exit status " + Twine(status) + ")" +
                (text.empty() ? "" : ":\n" + text));
  }
  if (profile && callbacks && callbacks->output)
    if (auto log = llvm::MemoryBuffer::getFile(logPath))
      deliver(callbacks->output, (*log)->getBuffer(), callbacks);
  for (int64_t rank = 0; rank < ranks; ++rank)
    for (size_t i = 0; i < numResults; ++i) {
      std::string path = fileName("result", i, std::to_string(rank));
      art::NpyHeader header;
      std::vector<char> data;
      std::string error = art::readNpy(path, manifest.results[i], header, data);
      if (!error.empty())
        return fail("result " + Twine(i) + " of rank " + Twine(rank) +
                    ": expected " + manifest.results[i].str() + ", found " +
                    error);
      if (!data.empty())
        std::memcpy(outputs[rank * numResults + i], data.data(), data.size());
    }
  return wrap(success());
}
