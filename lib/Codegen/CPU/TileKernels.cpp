//===- TileKernels.cpp - A kernel's tiles as a range function ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The first half of running a fused kernel's tiles on the rank's threads:
// each outlined kernel whose body is one row-tile loop gets a companion
// that runs a range of its tiles, and calls it for all of them. The
// compiler (lib/Compiler) makes that call a braid_rt_parallel_for.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "braid/Dialect/Xfer/Transforms/Schedule.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace braid {
#define GEN_PASS_DEF_TILEKERNELS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// The one tile loop of `kernel`, when the rest of its body is free of
/// side effects and its return returns nothing.
scf::ForallOp tileLoop(func::FuncOp kernel) {
  if (kernel.isExternal() || kernel->hasAttr(braid::xfer::kScheduleAttrName) ||
      kernel.getNumResults() != 0 || !kernel.getBody().hasOneBlock())
    return nullptr;
  scf::ForallOp loop;
  for (Operation &op : kernel.getBody().front()) {
    if (auto forall = dyn_cast<scf::ForallOp>(op)) {
      if (loop ||
          !forall->hasAttr(braid::dist::DistDialect::getKernelAttrName()) ||
          forall.getRank() != 1 || forall.getNumResults() != 0)
        return nullptr;
      loop = forall;
      continue;
    }
    if (!isa<func::ReturnOp>(op) && !isMemoryEffectFree(&op))
      return nullptr;
  }
  return loop;
}

struct TileKernelsPass : public braid::impl::TileKernelsBase<TileKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<std::pair<func::FuncOp, scf::ForallOp>> kernels;
    for (auto kernel : module.getOps<func::FuncOp>())
      if (scf::ForallOp loop = tileLoop(kernel))
        kernels.push_back({kernel, loop});
    for (auto [kernel, loop] : kernels) {
      OpBuilder b(kernel);
      Location loc = loop.getLoc();
      // The companion: (begin, end, the kernel's arguments).
      SmallVector<Type> inputs(2, b.getIndexType());
      llvm::append_range(inputs, kernel.getArgumentTypes());
      auto tiles = func::FuncOp::create(b, kernel.getLoc(),
                                        (kernel.getSymName() + "_tiles").str(),
                                        b.getFunctionType(inputs, {}));
      tiles.setPrivate();
      tiles->setAttr(braid::xfer::kTilesAttrName, b.getUnitAttr());
      symbols.insert(tiles);
      Block *entry = tiles.addEntryBlock();
      IRMapping map;
      map.map(kernel.getArguments(), entry->getArguments().drop_front(2));
      b.setInsertionPointToStart(entry);
      for (Operation &op : kernel.getBody().front()) {
        if (&op == loop.getOperation() || isa<func::ReturnOp>(op))
          continue;
        b.clone(op, map);
      }
      // Tile t of [begin, end) is iteration lb + t * step.
      Value lb = getValueOrCreateConstantIndexOp(
          b, loc, loop.getMixedLowerBound().front());
      Value step =
          getValueOrCreateConstantIndexOp(b, loc, loop.getMixedStep().front());
      lb = map.lookupOrDefault(lb);
      step = map.lookupOrDefault(step);
      Value one = arith::ConstantIndexOp::create(b, loc, 1);
      auto range = scf::ForOp::create(b, loc, entry->getArgument(0),
                                      entry->getArgument(1), one);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(range.getBody()->getTerminator());
        Value iv = arith::AddIOp::create(
            b, loc, lb,
            arith::MulIOp::create(b, loc, range.getInductionVar(), step));
        map.map(loop.getInductionVars().front(), iv);
        for (Operation &op : loop.getBody()->without_terminator())
          b.clone(op, map);
      }
      func::ReturnOp::create(b, kernel.getLoc());

      // The kernel: its tile count, and the companion for all of them.
      b.setInsertionPoint(loop);
      Value klb = getValueOrCreateConstantIndexOp(
          b, loc, loop.getMixedLowerBound().front());
      Value kub = getValueOrCreateConstantIndexOp(
          b, loc, loop.getMixedUpperBound().front());
      Value kstep =
          getValueOrCreateConstantIndexOp(b, loc, loop.getMixedStep().front());
      Value count = arith::CeilDivSIOp::create(
          b, loc, arith::SubIOp::create(b, loc, kub, klb), kstep);
      SmallVector<Value> operands = {arith::ConstantIndexOp::create(b, loc, 0),
                                     count};
      llvm::append_range(operands, kernel.getArguments());
      func::CallOp::create(b, loc, tiles, operands);
      loop->erase();
      ++numTiled;
    }
  }
};

} // namespace
