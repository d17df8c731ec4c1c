//===- InitAll.cpp - Register every Braid dialect and pass ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/InitAll.h"

#include "braid/Conversion/DistToXfer/BufferizableOpInterfaceImpl.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"
#include "braid/Pipelines/Pipelines.h"
#include "braid/Version.h"

#include "mlir/IR/DialectRegistry.h"

void braid::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<dist::DistDialect, xfer::XferDialect>();
  dist::registerBufferizableOpInterfaceExternalModels(registry);
}

void braid::registerAllPasses() {
  registerBraidConversionPasses();
  dist::registerBraidDistPasses();
  xfer::registerBraidXferPasses();
  registerBraidPipelines();
}

const char *braid::getVersionString() {
  return "Braid " BRAID_VERSION " (built against LLVM/MLIR " BRAID_LLVM_VERSION
         ")";
}
