//===- Passes.h - Braid code-generation passes ------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CODEGEN_PASSES_H
#define BRAID_CODEGEN_PASSES_H

#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "braid/Options/OptionsCL.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace braid {

#define GEN_PASS_DECL
#include "braid/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "braid/Codegen/Passes.h.inc"

} // namespace braid

#endif // BRAID_CODEGEN_PASSES_H
