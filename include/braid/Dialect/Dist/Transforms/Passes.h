//===- Passes.h - Dist transformation passes --------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_TRANSFORMS_PASSES_H
#define BRAID_DIALECT_DIST_TRANSFORMS_PASSES_H

#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "braid/Options/OptionsCL.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace braid::dist {

#define GEN_PASS_DECL
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"

/// braid-overlap whose report carries `reportOptions` (a JSON object: the
/// options the pipeline ran with) under "options".
std::unique_ptr<mlir::Pass> createOverlap(const OverlapOptions &options,
                                          std::string reportOptions);

#define GEN_PASS_REGISTRATION
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"

} // namespace braid::dist

#endif // BRAID_DIALECT_DIST_TRANSFORMS_PASSES_H
