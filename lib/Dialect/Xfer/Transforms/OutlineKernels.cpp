//===- OutlineKernels.cpp - One function per computation --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace braid::xfer {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;

namespace {

struct OutlineKernelsPass
    : public braid::xfer::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    SmallVector<func::FuncOp> functions(module.getOps<func::FuncOp>());
    for (func::FuncOp function : functions) {
      if (function.isExternal())
        continue;
      // A loop nest braid-fuse-memory-bound formed is one kernel; any
      // other linalg op on buffers is one by itself.
      SmallVector<Operation *> kernels;
      function.walk<WalkOrder::PreOrder>([&](Operation *op) {
        if (op->hasAttr(braid::dist::DistDialect::getKernelAttrName())) {
          kernels.push_back(op);
          return WalkResult::skip();
        }
        auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
        if (linalgOp && linalgOp.hasPureBufferSemantics())
          kernels.push_back(op);
        return WalkResult::advance();
      });
      int64_t index = 0;
      for (Operation *op : kernels) {
        // Everything the op reads from outside: operands and captures.
        llvm::SetVector<Value> inputs(op->getOperands().begin(),
                                      op->getOperands().end());
        getUsedValuesDefinedAbove(op->getRegions(), inputs);

        builder.setInsertionPoint(function);
        auto type = builder.getFunctionType(
            llvm::to_vector(
                llvm::map_range(inputs, [](Value v) { return v.getType(); })),
            {});
        std::string name =
            (function.getSymName() + "_kernel_" + Twine(index++)).str();
        auto outlined = func::FuncOp::create(builder, op->getLoc(), name, type);
        outlined.setPrivate();
        symbols.insert(outlined);
        Block *body = outlined.addEntryBlock();
        IRMapping mapping;
        for (auto [value, arg] : llvm::zip(inputs, body->getArguments()))
          mapping.map(value, arg);
        OpBuilder inner = OpBuilder::atBlockBegin(body);
        inner.clone(*op, mapping);
        func::ReturnOp::create(inner, op->getLoc());

        builder.setInsertionPoint(op);
        func::CallOp::create(builder, op->getLoc(), outlined,
                             inputs.getArrayRef());
        op->erase();
      }
    }
  }
};

} // namespace
