//===- OutlineKernels.cpp - One function per computation --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/KernelTrace.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

namespace braid::xfer {
#define GEN_PASS_DEF_OUTLINEKERNELS
#include "braid/Dialect/Xfer/Transforms/Passes.h.inc"
} // namespace braid::xfer

using namespace mlir;

namespace {

/// What makes two outlined kernels one computation: the function's text
/// under a fixed name, without locations. The signature holds the operand
/// types (shapes, layouts, dtypes); the body every op, attribute and
/// constant. Printed in its own scope, so that each print reads only the
/// kernel and the pass stays linear in the program.
std::string kernelKey(func::FuncOp kernel) {
  std::string key;
  llvm::raw_string_ostream os(key);
  kernel->print(os, OpPrintingFlags().useLocalScope().assumeVerified());
  return key;
}

/// The trace's name, bytes and flops of `call`, which runs `op` (its
/// operands the kernel's inputs): the kernel's symbol and what it computes
/// (its named linalg ops, reductions and math functions, in order of
/// appearance; else "elementwise"), the bytes of its buffers, and a
/// contraction's flops.
void describeForTrace(func::CallOp call, Operation *op) {
  std::string name = call.getCallee().str();
  if (std::string computes = braid::xfer::describeComputation(op);
      !computes.empty())
    name += " " + computes;
  int64_t bytes = 0;
  for (Value operand : call.getOperands())
    if (auto type = dyn_cast<MemRefType>(operand.getType()))
      bytes += braid::xfer::getStaticBytes(type).value_or(0);
  braid::xfer::setTraceEvent(call, name, bytes,
                             braid::xfer::contractionFlops(op));
}

struct OutlineKernelsPass
    : public braid::xfer::impl::OutlineKernelsBase<OutlineKernelsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    OpBuilder builder(&getContext());
    // Kernels by key, over the whole module: identical layers, and the
    // steps of a ring, share one function each.
    llvm::StringMap<func::FuncOp> kernelsByKey;
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
      if (!kernels.empty())
        function->setAttr(braid::xfer::kScheduleAttrName,
                          UnitAttr::get(&getContext()));
      int64_t index = 0;
      for (Operation *op : kernels) {
        // Everything the op reads from outside: operands and captures.
        llvm::SetVector<Value> inputs(op->getOperands().begin(),
                                      op->getOperands().end());
        getUsedValuesDefinedAbove(op->getRegions(), inputs);

        builder.setInsertionPoint(function);
        // bf16 and f16 scalars travel as their i16 bits: as arguments the
        // x86 calling convention would round them through f32 with a
        // compiler-rt call (__truncsfbf2) that the library does not link.
        auto narrow = [](Type t) { return t.isBF16() || t.isF16(); };
        Type i16 = builder.getI16Type();
        auto type = builder.getFunctionType(
            llvm::to_vector(llvm::map_range(inputs,
                                            [&](Value v) {
                                              return narrow(v.getType())
                                                         ? i16
                                                         : v.getType();
                                            })),
            {});
        // Named once it is known to be new.
        auto outlined =
            func::FuncOp::create(builder, op->getLoc(), "kernel", type);
        outlined.setPrivate();
        Block *body = outlined.addEntryBlock();
        IRMapping mapping;
        OpBuilder inner = OpBuilder::atBlockBegin(body);
        for (auto [value, arg] : llvm::zip(inputs, body->getArguments()))
          mapping.map(value, narrow(value.getType()) ? arith::BitcastOp::create(
                                                           inner, op->getLoc(),
                                                           value.getType(), arg)
                                                           .getResult()
                                                     : Value(arg));
        inner.clone(*op, mapping);
        func::ReturnOp::create(inner, op->getLoc());

        auto [it, inserted] =
            kernelsByKey.try_emplace(kernelKey(outlined), outlined);
        if (inserted) {
          outlined.setSymName(
              (function.getSymName() + "_kernel_" + Twine(index++)).str());
          symbols.insert(outlined);
          ++numKernels;
        } else {
          outlined.erase();
          ++numSharedCalls;
        }

        builder.setInsertionPoint(op);
        SmallVector<Value> arguments;
        for (Value value : inputs)
          arguments.push_back(
              narrow(value.getType())
                  ? arith::BitcastOp::create(builder, op->getLoc(), i16, value)
                        .getResult()
                  : value);
        auto call =
            func::CallOp::create(builder, op->getLoc(), it->second, arguments);
        describeForTrace(call, op);
        op->erase();
      }
    }
  }
};

} // namespace
