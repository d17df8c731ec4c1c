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

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace braid {

struct CompileOptions {
  /// Code generation target: cpu or cuda.
  std::string target = "cpu";
  /// cuda: the GPU architecture (compute capability, e.g. 90a or 80) and
  /// the CUDA toolkit (empty: the one Braid was configured with).
  std::string sm = "90a";
  std::string cudaPath;
  /// auto, force or off.
  std::string overlap = "auto";
  /// Memory-bound fusion: auto or off.
  std::string fuse = "auto";
  /// Send f32 all-gathers as bf16: off or bf16.
  std::string quantizeAllGather = "off";
  /// Cost model figures: cpu, h100 or h200 (empty: cpu for the cpu target,
  /// h200 for cuda).
  std::string targetPreset;
  /// Where to write the JSON report of overlap decisions (empty: nowhere).
  std::string report;
  /// The entry function (empty: main, or the only public function).
  std::string entry;
  /// Ring layout: pieces per chunk (0: the cost model picks) and auto, on
  /// or off for bidirectional rings.
  int64_t subChunks = 0;
  std::string bidirectional = "auto";
  /// Run braid-check-schedule on the xfer program.
  bool checkSchedule = false;
  /// dist, xfer, llvm-mlir, llvm-ir, obj, lib or (cuda) ptx.
  std::string emit = "lib";
  /// LLVM optimization level and CPU (native, or an LLVM CPU name).
  unsigned optLevel = 2;
  std::string cpu = "native";
};

/// Parses whitespace-separated `key=value` words (leading dashes optional,
/// keys as braid-compile's flags: overlap, fuse, quantize-all-gather, target,
/// sm, cuda-path, target-preset, report, entry, sub-chunks, bidirectional,
/// check-schedule, emit, O, cpu) into `options`. Returns false with `error` set
/// on an unknown key or value.
bool parseCompileOptions(llvm::StringRef text, CompileOptions &options,
                         std::string &error);

/// Checks option values; returns false with `error` set.
bool validateCompileOptions(const CompileOptions &options, std::string &error);

/// Everything the compiler needs in a context: upstream dialects and
/// extensions, LLVM IR translations, Braid's dialects; registers passes.
void registerCompilerDialects(mlir::DialectRegistry &registry);

/// Compiles `module` in place as `options` say. Text stages go to
/// `textOutput`; `obj` writes `outputPath`, `lib` writes `outputPath` and
/// `outputPath.manifest`. Failures are diagnostics on the module's context.
mlir::LogicalResult compile(mlir::ModuleOp module,
                            const CompileOptions &options,
                            llvm::StringRef outputPath,
                            llvm::raw_ostream *textOutput);

} // namespace braid

#endif // BRAID_COMPILER_COMPILER_H
