//===- ContractionsToGemm.cpp - CPU contractions on oneDNN ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cpu target's counterpart of braid-map-to-gpu's cuBLASLt path: the
// same matching and the same braid_rt_gemm calls (Contractions.cpp), which
// the cpu runtime runs on oneDNN.
//
//===----------------------------------------------------------------------===//

#include "../Gemm/Gemm.h"

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace braid {
#define GEN_PASS_DEF_CONTRACTIONSTOGEMM
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

struct ContractionsToGemmPass
    : public braid::impl::ContractionsToGemmBase<ContractionsToGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> contractions;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && linalg::isaContractionOpInterface(op))
        contractions.push_back(op);
    });
    for (linalg::LinalgOp op : contractions) {
      std::string why;
      if (succeeded(braid::codegen::replaceWithGemm(op, "oneDNN", why))) {
        ++numGemms;
        continue;
      }
      op->emitRemark() << "runs as a generated kernel, not on oneDNN: " << why;
      ++numGenerated;
    }
  }
};

} // namespace
