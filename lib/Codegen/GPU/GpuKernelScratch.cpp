//===- GpuKernelScratch.cpp - Tile intermediates become scratch -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// On the cuda target a fused kernel's intermediates live in the block's
// shared memory. Turning their allocations into allocas before buffer
// deallocation keeps deallocation bookkeeping (host code) out of kernels.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace braid {
#define GEN_PASS_DEF_GPUKERNELSCRATCH
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

struct GpuKernelScratchPass
    : public braid::impl::GpuKernelScratchBase<GpuKernelScratchPass> {
  void runOnOperation() override {
    SmallVector<memref::AllocOp> allocs;
    getOperation().walk([&](scf::ForallOp kernel) {
      if (!kernel->hasAttr(braid::dist::DistDialect::getKernelAttrName()))
        return;
      kernel.getBody()->walk(
          [&](memref::AllocOp alloc) { allocs.push_back(alloc); });
    });
    IRRewriter rewriter(&getContext());
    for (memref::AllocOp alloc : allocs) {
      if (!alloc.getType().hasStaticShape()) {
        alloc.emitError() << "a fused kernel's intermediate must have a "
                             "static shape on the cuda target (it lives in "
                             "shared memory, sized at launch); got "
                          << alloc.getType();
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(alloc);
      rewriter.replaceOpWithNewOp<memref::AllocaOp>(alloc, alloc.getType(),
                                                    alloc.getAlignmentAttr());
    }
  }
};

} // namespace
