//===- ReadOnlyArguments.cpp - Programs never write their inputs -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-read-only-arguments, right before bufferization on both targets:
// the tensor arguments of public functions are marked read-only for One-Shot
// Bufferize (include/braid/Codegen/Passes.td says why).
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace braid {
#define GEN_PASS_DEF_READONLYARGUMENTS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Marks the tensor arguments of `function`, if public and defined here,
/// read-only.
void markArgumentsReadOnly(func::FuncOp function) {
  if (!function.isPublic() || function.isExternal())
    return;
  BoolAttr no = BoolAttr::get(function.getContext(), false);
  for (BlockArgument argument : function.getArguments())
    if (isa<TensorType>(argument.getType()))
      function.setArgAttr(
          argument.getArgNumber(),
          bufferization::BufferizationDialect::kWritableAttrName, no);
}

struct ReadOnlyArgumentsPass
    : public braid::impl::ReadOnlyArgumentsBase<ReadOnlyArgumentsPass> {
  void runOnOperation() override { markArgumentsReadOnly(getOperation()); }
};

} // namespace
