//===- InitAll.cpp - Register Braid's dialects ------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/InitAll.h"

#include "braid/Conversion/DistToXfer/BufferizableOpInterfaceImpl.h"
#include "braid/Conversion/ShardToDist/ShardingModels.h"
#include "braid/Dialect/Dist/IR/DistDialect.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Version.h"

#include "mlir/IR/DialectRegistry.h"

void braid::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<dist::DistDialect, xfer::XferDialect>();
  dist::registerBufferizableOpInterfaceExternalModels(registry);
  registerShardingModels(registry);
}

const char *braid::getVersionString() {
  return "Braid " BRAID_VERSION " (built against LLVM/MLIR " BRAID_LLVM_VERSION
         ")";
}
