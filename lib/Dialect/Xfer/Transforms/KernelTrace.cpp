//===- KernelTrace.cpp - What the trace says of a kernel --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Xfer/Transforms/KernelTrace.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

std::string braid::xfer::describeComputation(Operation *op) {
  llvm::SetVector<StringRef> computes;
  op->walk([&](Operation *inner) {
    StringRef name = inner->getName().stripDialect();
    if (isa<linalg::GenericOp>(inner)) {
      if (cast<linalg::GenericOp>(inner).getNumReductionLoops() > 0)
        computes.insert("reduce");
    } else if (isa<linalg::LinalgOp>(inner) ||
               inner->getName().getDialectNamespace() == "math") {
      computes.insert(name);
    }
  });
  if (computes.empty() && isa<linalg::GenericOp>(op))
    computes.insert("elementwise");
  if (computes.empty())
    return std::string();
  std::string text = "(";
  for (auto [index, what] : llvm::enumerate(computes)) {
    if (index == 5) {
      text += ", ...";
      break;
    }
    text += (index ? ", " : "") + what.str();
  }
  return text + ")";
}

int64_t braid::xfer::contractionFlops(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalg::isaContractionOpInterface(linalgOp) ||
      linalgOp.hasDynamicShape())
    return 0;
  int64_t flops = 2;
  for (int64_t range : linalgOp.getStaticLoopRanges())
    flops *= range;
  return flops;
}
