//===- HoistAllocas.cpp - Static allocas out of loops ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-hoist-allocas: a fused kernel's scratch (braid-cpu-kernel-scratch)
// at the function's entry instead of inside the outlined kernel's loop, so
// that every iteration reuses one stack slot.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

namespace braid {
#define GEN_PASS_DEF_HOISTALLOCAS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

struct HoistAllocasPass
    : public braid::impl::HoistAllocasBase<HoistAllocasPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    Block &entry = function.getBody().front();
    SmallVector<memref::AllocaOp> allocas;
    function.walk([&](memref::AllocaOp alloca) {
      if (alloca->getBlock() != &entry && alloca->getNumOperands() == 0 &&
          alloca.getType().hasStaticShape() &&
          isa<LoopLikeOpInterface>(alloca->getParentOp()))
        allocas.push_back(alloca);
    });
    for (memref::AllocaOp alloca : allocas) {
      alloca->moveBefore(&entry, entry.begin());
      ++numHoisted;
    }
  }
};

} // namespace
