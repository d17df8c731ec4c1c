//===- CpuKernelScratch.cpp - A kernel's intermediates, once -----*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// On the cpu target the tiles of a fused kernel run one after another, so
// the buffers of one tile's intermediates can serve them all: allocated
// once before the kernel's loop rather than once per tile.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"

#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace braid {
#define GEN_PASS_DEF_CPUKERNELSCRATCH
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Whether `value` or a view of it reaches a terminator (leaves its block
/// through a yield), so that a buffer could outlive its tile.
bool escapes(Value value) {
  for (Operation *user : value.getUsers()) {
    if (user->hasTrait<OpTrait::IsTerminator>())
      return true;
    if (auto view = dyn_cast<ViewLikeOpInterface>(user))
      if (view.getViewSource() == value && escapes(view->getResult(0)))
        return true;
  }
  return false;
}

struct CpuKernelScratchPass
    : public braid::impl::CpuKernelScratchBase<CpuKernelScratchPass> {
  void runOnOperation() override {
    SmallVector<std::pair<memref::AllocOp, scf::ForallOp>> allocs;
    getOperation().walk([&](scf::ForallOp kernel) {
      if (!kernel->hasAttr(braid::dist::DistDialect::getKernelAttrName()))
        return;
      for (auto alloc : kernel.getBody()->getOps<memref::AllocOp>())
        if (alloc.getType().hasStaticShape() && alloc->getNumOperands() == 0 &&
            !escapes(alloc.getResult()))
          allocs.push_back({alloc, kernel});
    });
    for (auto [alloc, kernel] : allocs) {
      alloc->moveBefore(kernel);
      ++numHoisted;
    }
  }
};

} // namespace
