//===- braid-compile.cpp - Braid's compiler driver --------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-compile IN.mlir [--target=cpu|cuda [--sm=90a]] -o OUT [--emit=STAGE]
//               [--overlap=MODE] ...
//
// Its flags are the options model's (include/braid/Options/Options.def),
// bound by options::bindCommandLine; --help lists them.
//
// Runs the whole pipeline (import -> dist transforms -> xfer -> LLVM) and
// writes the requested stage: MLIR text for dist, xfer and llvm-mlir, LLVM IR,
// an object file, the PTX of the kernels (cuda), or (the default) a shared
// library with its manifest, which braid-exec (braid-exec-cuda) runs.
//
//===----------------------------------------------------------------------===//

#include "braid/Compiler/Compiler.h"
#include "braid/InitAll.h"
#include "braid/Options/OptionsCL.h"

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
/// Every option braid-compile takes, bound to the options model's flags.
static braid::Options options;

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
  braid::options::bindCommandLine(options, braid::options::Scope::Compile,
                                  category);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "Braid compiler\n");

  std::string message;
  if (!braid::options::validate(options, message))
    return fail(message);
  bool binary = options.emit == braid::EmitKind::Obj ||
                options.emit == braid::EmitKind::Lib;
  if (binary && outputFilename.empty())
    return fail(llvm::Twine("--emit=") +
                braid::options::spelling(options.emit) +
                " needs an output file (-o)");

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
  braid::CompileTimes times;
  LogicalResult compiled = braid::compile(
      *module, options, outputFilename, binary ? nullptr : &textStream, &times);
  if (options.timing)
    braid::printTimes(times, llvm::errs());
  if (failed(compiled))
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
