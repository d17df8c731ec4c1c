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
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

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
  PassManager pm(op.getContext());
  pm.enableVerifier(true);
  if (failed(braid::buildBraidPipeline(pm, pipeline, &error)))
    return wrap(emitError(op.getLoc()) << error);
  if (failed(pm.run(op)))
    return wrap(failure());
  report.forward(pipeline.report);
  return wrap(success());
}

MlirLogicalResult braidCompileModule(MlirModule module, MlirStringRef options,
                                     MlirStringRef outputPath,
                                     const BraidCallbacks *callbacks) {
  return wrap(compileWithCallbacks(unwrap(module), unwrap(options),
                                   unwrap(outputPath), callbacks));
}

MlirLogicalResult braidCompileSource(MlirStringRef source,
                                     MlirStringRef sourceName,
                                     MlirStringRef options,
                                     MlirStringRef outputPath,
                                     const BraidCallbacks *callbacks) {
  DialectRegistry registry;
  braid::registerCompilerDialects(registry);
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.printOpOnDiagnostic(false);
  CallbackDiagnostics diagnostics(&context, callbacks);

  // Option errors first, so that a typo is not hidden behind parse errors.
  braid::CompileOptions parsed;
  std::string error;
  if (!braid::parseCompileOptions(unwrap(options), parsed, error)) {
    reportError(callbacks, error);
    return wrap(failure());
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(
          unwrap(source), sourceName.length ? unwrap(sourceName) : "<source>"),
      llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return wrap(failure());
  return wrap(compileWithCallbacks(*module, unwrap(options), unwrap(outputPath),
                                   callbacks));
}

//===----------------------------------------------------------------------===//
// Artifacts
//===----------------------------------------------------------------------===//

BraidArtifact braidArtifactLoad(MlirStringRef libraryPath,
                                const BraidCallbacks *callbacks) {
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
  return artifact->manifest.ranks;
}

intptr_t braidArtifactGetNumArguments(BraidArtifact artifact) {
  return artifact->manifest.args.size();
}

intptr_t braidArtifactGetNumResults(BraidArtifact artifact) {
  return artifact->manifest.results.size();
}

BraidTensorType braidArtifactGetArgumentType(BraidArtifact artifact,
                                             intptr_t index) {
  return describe(artifact->manifest.args[index]);
}

BraidTensorType braidArtifactGetResultType(BraidArtifact artifact,
                                           intptr_t index) {
  return describe(artifact->manifest.results[index]);
}

MlirLogicalResult braidArtifactRun(BraidArtifact artifact, int64_t ranks,
                                   const void *const *inputs,
                                   void *const *outputs, MlirStringRef options,
                                   const BraidCallbacks *callbacks) {
  const art::Manifest &manifest = artifact->manifest;
  auto fail = [&](const Twine &message) {
    reportError(callbacks, message);
    return wrap(failure());
  };
  if (ranks != manifest.ranks)
    return fail("the program was compiled for " + Twine(manifest.ranks) +
                " ranks, not " + Twine(ranks));
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
  for (auto &[key, value] : words)
    args.push_back("--" + key + "=" + value);

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
      std::memcpy(outputs[rank * numResults + i], data.data(), data.size());
    }
  return wrap(success());
}
