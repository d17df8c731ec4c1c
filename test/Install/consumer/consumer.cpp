//===- consumer.cpp - Uses an installed Braid through its C++ API --------===//
//
// Part of Braid.
//
// consumer IN.mlir [pipeline options]: parses IN.mlir, runs Braid's pipeline
// with the given options (default: stop-after=xfer) and prints the result.
//
//===----------------------------------------------------------------------===//

#include "braid/InitAll.h"
#include "braid/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: braid-consumer IN.mlir [options]\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  braid::registerAllDialects(registry);
  braid::registerAllPasses();
  mlir::MLIRContext context(registry);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1;

  braid::BraidPipelineOptions options;
  std::string error;
  if (!braid::options::parseWords(argc > 2 ? argv[2] : "stop-after=xfer",
                                  options, braid::options::Scope::Pipeline,
                                  error)) {
    llvm::errs() << error << "\n";
    return 1;
  }
  mlir::PassManager pm(&context);
  if (mlir::failed(braid::buildBraidPipeline(pm, options, &error))) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(pm.run(*module)))
    return 1;
  module->print(llvm::outs());
  llvm::outs() << "\n" << braid::getVersionString() << "\n";
  return 0;
}
