//===- EmitEntryPoint.cpp - The entry point runners call -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace braid {
#define GEN_PASS_DEF_EMITENTRYPOINT
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

struct EmitEntryPointPass
    : public braid::impl::EmitEntryPointBase<EmitEntryPointPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::string wrapped = "_mlir_ciface_" + entry;
    auto target = module.lookupSymbol<LLVM::LLVMFuncOp>(wrapped);
    if (!target) {
      module.emitError() << "braid-emit-entry-point: no '" << wrapped
                         << "' in the module; is '" << entry
                         << "' a function with llvm.emit_c_interface?";
      return signalPassFailure();
    }
    if (module.lookupSymbol("braid_entry")) {
      module.emitError() << "braid-emit-entry-point: the module already "
                            "defines 'braid_entry'";
      return signalPassFailure();
    }
    MLIRContext *context = &getContext();
    OpBuilder builder(context);
    builder.setInsertionPointToEnd(module.getBody());
    Location loc = target.getLoc();
    auto ptr = LLVM::LLVMPointerType::get(context);
    auto fnType =
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(context), {ptr});
    auto entryFn =
        LLVM::LLVMFuncOp::create(builder, loc, "braid_entry", fnType);
    Block *body = entryFn.addEntryBlock(builder);
    builder.setInsertionPointToStart(body);
    Value argv = body->getArgument(0);

    // The C interface takes one pointer per argument (results first when
    // there are any), all of which argv supplies in that order.
    // `_mlir_ciface_` takes the result pointer first iff the original
    // function returns something.
    unsigned numParams = target.getFunctionType().getNumParams();
    auto original = module.lookupSymbol<LLVM::LLVMFuncOp>(entry);
    bool hasResults =
        original &&
        !isa<LLVM::LLVMVoidType>(original.getFunctionType().getReturnType());
    SmallVector<Value> args;
    for (unsigned i = 0; i < numParams; ++i) {
      unsigned slot = hasResults ? i : i + 1;
      Value address = LLVM::GEPOp::create(
          builder, loc, ptr, ptr, argv,
          ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(slot)});
      args.push_back(LLVM::LoadOp::create(builder, loc, ptr, address));
    }
    LLVM::CallOp::create(builder, loc, target, args);
    LLVM::ReturnOp::create(builder, loc, ValueRange{});
  }
};

} // namespace
