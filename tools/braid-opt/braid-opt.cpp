//===- braid-opt.cpp - Braid's opt-style driver -----------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Every upstream dialect and pass plus Braid's, for lit tests and for
// compiler engineers reading the pipeline stage by stage.
//
//===----------------------------------------------------------------------===//

#include "braid/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream &os) { os << braid::getVersionString() << "\n"; });
  mlir::registerAllPasses();
  braid::registerAllPasses();

  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // The cuda pipeline serializes GPU modules, which translates them to
  // LLVM IR.
  mlir::registerAllToLLVMIRTranslations(registry);
  braid::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Braid optimizer driver\n", registry));
}
