//===- Compiler.h - Compile a module to a runnable artifact -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// What braid-compile does, as a library: run Braid's pipeline on a module
// and write the requested stage (MLIR text of dist, xfer or the LLVM
// dialect, LLVM IR, an object file, or a shared library with its manifest).
// The tool, the C API and the Python package all call this.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_COMPILER_COMPILER_H
#define BRAID_COMPILER_COMPILER_H

#include "braid/Options/Options.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid {

/// Compile options are the options model's (braid/Options/Options.h):
/// the pipeline's and those after it (emit, O, cpu).
using CompileOptions = Options;

/// Parses option words (options::parseWords: `key=value`, quotes for values
/// with spaces) of the options braid-compile takes into `options`, then
/// checks them (options::validate). Returns false with `error` set.
bool parseCompileOptions(llvm::StringRef text, CompileOptions &options,
                         std::string &error);

/// Everything the compiler needs in a context: upstream dialects and
/// extensions, LLVM IR translations, Braid's dialects; registers passes.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Wall time of one stage of a compile.
struct StageTime {
  /// dist, xfer-llvm, ptxas, translate, optimize, codegen or link.
  std::string stage;
  double seconds = 0;
};

/// What braid-compile --timing prints: the stages a compile ran, in order,
/// and the time of each. ptxas is the kernels' share of the MLIR passes
/// (cuda), and is not counted in xfer-llvm.
using CompileTimes = std::vector<StageTime>;

/// One line per stage, and the total, as braid-compile --timing prints them.
void printTimes(const CompileTimes &times, llvm::raw_ostream &os);

/// Compiles `module` in place as `options` say. Text stages go to
/// `textOutput`; `obj` writes `outputPath`, `lib` writes `outputPath` and
/// `outputPath.manifest`. Failures are diagnostics on the module's context.
/// When `times` is given it receives the time of each stage run; with
/// options.timing they are also added to the JSON report, when one is
/// written, as "timing".
mlir::LogicalResult compile(mlir::ModuleOp module,
                            const CompileOptions &options,
                            llvm::StringRef outputPath,
                            llvm::raw_ostream *textOutput,
                            CompileTimes *times = nullptr);

} // namespace braid

#endif // BRAID_COMPILER_COMPILER_H
