//===- CpuKernelScratch.cpp - Kernel intermediates on the stack -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// On the cpu target the tiles of a fused kernel run one after another, so
// one tile's intermediates can serve them all. braid-cpu-kernel-scratch
// makes them allocas (which deallocation leaves alone), and
// braid-hoist-allocas (HoistAllocas.cpp) moves allocas out of the outlined
// kernels' loops, so that the stack frame holds them once per call.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"
#include "braid/Codegen/Utils.h"

#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace braid {
#define GEN_PASS_DEF_CPUKERNELSCRATCH
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Whether `value` or a view of it reaches a terminator (leaves its block
/// through a yield), so that a buffer could outlive its tile.
bool escapes(Value value) {
  for (Operation *user : value.getUsers()) {
    if (braid::isTerminator(user))
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user))
      if (view.getViewSource() == value && escapes(view->getResult(0)))
        return true;
  }
  return false;
}

int64_t bytesOf(MemRefType type) {
  Type element = type.getElementType();
  int64_t bits = element.isIndex() ? 64 : element.getIntOrFloatBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

struct CpuKernelScratchPass
    : public braid::impl::CpuKernelScratchBase<CpuKernelScratchPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<memref::AllocOp> allocs;
    getOperation().walk([&](scf::ForallOp kernel) {
      if (!kernel->hasAttr(braid::dist::DistDialect::getKernelAttrName()))
        return;
      int64_t bytes = 0;
      for (auto alloc : kernel.getBody()->getOps<memref::AllocOp>()) {
        MemRefType type = alloc.getType();
        if (!type.hasStaticShape() ||
            !type.getElementType().isIntOrIndexOrFloat() ||
            escapes(alloc.getResult()))
          continue;
        bytes += bytesOf(type);
        if (bytes > stackBytes)
          break;
        allocs.push_back(alloc);
      }
    });
    IRRewriter rewriter(&getContext());
    for (memref::AllocOp alloc : allocs) {
      rewriter.setInsertionPoint(alloc);
      rewriter.replaceOpWithNewOp<memref::AllocaOp>(alloc, alloc.getType(),
                                                    alloc.getAlignmentAttr());
      ++numScratch;
    }
  }
};

} // namespace
