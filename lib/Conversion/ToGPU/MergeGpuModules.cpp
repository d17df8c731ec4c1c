//===- MergeGpuModules.cpp - One gpu.module per program ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace braid {
#define GEN_PASS_DEF_MERGEGPUMODULES
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

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
    // Outlining names kernels after their function, so kernels of one
    // function collide; a kernel that does is renamed after its own
    // (unique) module.
    SymbolTable symbols(merged);
    DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp other : llvm::drop_begin(modules)) {
      for (Operation &op :
           llvm::make_early_inc_range(other.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (symbol && symbols.lookup(symbol.getName())) {
          StringAttr original = symbol.getNameAttr();
          op.moveBefore(merged.getBody(), merged.getBody()->end());
          // insert() uniques the name when it is taken.
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
