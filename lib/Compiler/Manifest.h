//===- Manifest.h - The artifact's manifest ---------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to the compiler driver (Compiler.cpp). The format is
// braid::rt's (include/braid/Runtime/Artifact.h), which reads it.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_COMPILER_MANIFEST_H
#define BRAID_LIB_COMPILER_MANIFEST_H

#include "braid/Compiler/Compiler.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace braid::compiler {

/// The manifest of the library compiled from `module` with `function` as
/// its entry, after the dist stage; an error located at what cannot run.
mlir::FailureOr<std::string>
buildManifest(mlir::ModuleOp module, mlir::func::FuncOp function,
              const braid::CompileOptions &options);

} // namespace braid::compiler

#endif // BRAID_LIB_COMPILER_MANIFEST_H
