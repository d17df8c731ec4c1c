//===- InitAllPasses.cpp - Register Braid's passes and pipeline -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Apart from InitAll.cpp (the dialects), so that an embedder who only reads
// and writes Braid's IR links no pass library.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"
#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"
#include "braid/Dialect/Xfer/Transforms/Passes.h"
#include "braid/InitAll.h"
#include "braid/Pipelines/Pipelines.h"

void braid::registerAllPasses() {
  registerBraidConversionPasses();
  registerBraidCodegenPasses();
  dist::registerBraidDistPasses();
  xfer::registerBraidXferPasses();
  registerBraidPipelines();
}
