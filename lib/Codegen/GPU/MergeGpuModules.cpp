//===- MergeGpuModules.cpp - One gpu.module per program ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace braid {
#define GEN_PASS_DEF_MERGEGPUMODULES
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// The kernel a module holds when it holds nothing else (what
/// gpu-kernel-outlining makes), else null: only such kernels are shared,
/// since one that calls or reads other symbols of its module is only the
/// same as another with those symbols too.
gpu::GPUFuncOp onlyKernel(gpu::GPUModuleOp module) {
  Block *body = module.getBody();
  if (!llvm::hasSingleElement(*body))
    return {};
  auto kernel = dyn_cast<gpu::GPUFuncOp>(body->front());
  return kernel && kernel.isKernel() ? kernel : gpu::GPUFuncOp();
}

/// A kernel's text under a fixed name, without locations: equal keys are
/// the same computation on the same operand types.
std::string kernelKey(gpu::GPUFuncOp kernel) {
  StringAttr name = kernel.getNameAttr();
  kernel.setName("kernel");
  std::string key;
  llvm::raw_string_ostream os(key);
  kernel->print(os, OpPrintingFlags().useLocalScope().assumeVerified());
  kernel.setName(name);
  return key;
}

struct MergeGpuModulesPass
    : public braid::impl::MergeGpuModulesBase<MergeGpuModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    gpu::GPUModuleOp merged = modules.front();
    constexpr StringLiteral name = "braid_kernels";
    if (merged.getSymName() != name) {
      if (SymbolTable::lookupSymbolIn(module, name)) {
        module.emitError() << "braid-merge-gpu-modules: the program already "
                              "defines '"
                           << name << "'";
        return signalPassFailure();
      }
      merged.setSymName(name);
    }
    // Identical kernels (identical layers, ring steps) become one.
    llvm::StringMap<StringAttr> kernelsByKey;
    if (gpu::GPUFuncOp kernel = onlyKernel(merged))
      kernelsByKey.try_emplace(kernelKey(kernel), kernel.getNameAttr());
    // Outlining names kernels after their function, so kernels of one
    // function collide; a kernel that does is renamed after its own
    // (unique) module.
    SymbolTable symbols(merged);
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp other : llvm::drop_begin(modules)) {
      if (gpu::GPUFuncOp kernel = onlyKernel(other)) {
        std::string key = kernelKey(kernel);
        auto it = kernelsByKey.find(key);
        if (it != kernelsByKey.end()) {
          renamed[{other.getSymNameAttr(), kernel.getNameAttr()}] = it->second;
          ++numSharedKernels;
          continue;
        }
        StringAttr original = kernel.getNameAttr();
        kernel->moveBefore(merged.getBody(), merged.getBody()->end());
        // insert() uniques the name when it is taken.
        StringAttr fresh = symbols.insert(kernel);
        if (fresh != original)
          renamed[{other.getSymNameAttr(), original}] = fresh;
        kernelsByKey.try_emplace(key, fresh);
        continue;
      }
      for (Operation &op :
           llvm::make_early_inc_range(other.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (symbol && symbols.lookup(symbol.getName())) {
          StringAttr original = symbol.getNameAttr();
          op.moveBefore(merged.getBody(), merged.getBody()->end());
          StringAttr fresh = symbols.insert(&op);
          renamed[{other.getSymNameAttr(), original}] = fresh;
          continue;
        }
        op.moveBefore(merged.getBody(), merged.getBody()->end());
        if (symbol)
          symbols.insert(&op);
      }
    }
    // Launches name their kernel as @module::@kernel.
    module.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr kernel = launch.getKernelName();
      auto it = renamed.find({launch.getKernelModuleName(), kernel});
      if (it != renamed.end())
        kernel = it->second;
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getSymNameAttr(), {FlatSymbolRefAttr::get(kernel)}));
    });
    for (gpu::GPUModuleOp other : llvm::drop_begin(modules))
      other.erase();
  }
};

} // namespace
