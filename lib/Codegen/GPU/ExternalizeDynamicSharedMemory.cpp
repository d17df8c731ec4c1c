//===- ExternalizeDynamicSharedMemory.cpp - extern dynamic shmem --------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// convert-gpu-to-nvvm lowers gpu.dynamic_shared_memory to an internal,
// zero-sized global in the shared address space. The NVPTX backend demotes
// such a global to a static one-byte variable, which ptxas places at offset
// 0 of the kernel's static shared memory, ahead of the buffers gpu.all_reduce
// declares: a block's dynamic scratch then overlaps its reduction buffers.
// An external declaration is what CUDA's `extern __shared__ char s[];` is,
// and it makes the dynamic region start after all static shared memory.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace braid {
#define GEN_PASS_DEF_EXTERNALIZEDYNAMICSHAREDMEMORY
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

struct ExternalizeDynamicSharedMemoryPass
    : public braid::impl::ExternalizeDynamicSharedMemoryBase<
          ExternalizeDynamicSharedMemoryPass> {
  void runOnOperation() override {
    for (auto global : getOperation().getOps<LLVM::GlobalOp>()) {
      // A zero-sized, uninitialized shared variable has no use but to name
      // the dynamic region: that is what the GPU lowering makes of
      // gpu.dynamic_shared_memory.
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getType());
      if (global.getAddrSpace() !=
              static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared) ||
          !array || array.getNumElements() != 0 || global.getValueOrNull() ||
          !global.getInitializerRegion().empty())
        continue;
      global.setLinkage(LLVM::Linkage::External);
    }
  }
};

} // namespace
