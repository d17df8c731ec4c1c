//===- LlvmSteps.h - From LLVM IR to objects --------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Internal to the compiler driver (Compiler.cpp): the steps after
// translation to LLVM IR. Each function's comment in LlvmSteps.cpp says
// why it is done the way it is.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_LIB_COMPILER_LLVMSTEPS_H
#define BRAID_LIB_COMPILER_LLVMSTEPS_H

#include "mlir/Support/LLVM.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CodeGen.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
} // namespace llvm

namespace braid::compiler {

/// A target machine for this host's triple and `cpu` ("native": this
/// machine's CPU and features); null and `error` for an unknown CPU.
std::unique_ptr<llvm::TargetMachine>
createTargetMachine(llvm::StringRef cpu, llvm::CodeGenOptLevel level,
                    std::string &error);

/// LLVM's default pipeline at `optLevel` (0 to 3), optnone honoured.
void optimizeModule(llvm::Module &module, int64_t optLevel,
                    llvm::TargetMachine *machine);

/// Writes `module` as an object file to `path`.
mlir::LogicalResult emitObject(llvm::Module &module,
                               llvm::TargetMachine &machine,
                               llvm::StringRef path, std::string &error);

/// The program's failed assertions through the runtime's fatal path
/// (braid_rt_assert_failed) instead of abort().
void reportFailedAssertions(llvm::Module &module);

/// The cpu target's tile-range companions (`tiles`) called on the rank's
/// threads through braid_rt_parallel_for.
void addTileThreads(llvm::Module &module, const llvm::StringSet<> &tiles);

/// With --cpu=generic: AVX2 and AVX-512 clones of every function holding
/// vector code, picked at run time.
void addCpuDispatch(llvm::Module &module);

/// Moves the definitions of `schedules` into a module of their own in
/// `context` (null when `module` defines none of them).
std::unique_ptr<llvm::Module> splitSchedules(llvm::Module &module,
                                             const llvm::StringSet<> &schedules,
                                             llvm::LLVMContext &context);

} // namespace braid::compiler

#endif // BRAID_LIB_COMPILER_LLVMSTEPS_H
