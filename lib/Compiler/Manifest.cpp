//===- Manifest.cpp - The artifact's manifest -------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Manifest.h"

#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace braid::compiler {

namespace {

std::string dtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF64())
    return "f64";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  if (type.isInteger(1))
    return "i1";
  if (type.isInteger(8))
    return "i8";
  if (type.isInteger(16))
    return "i16";
  if (type.isInteger(32))
    return "i32";
  if (type.isInteger(64))
    return "i64";
  return "";
}

} // namespace

/// The manifest braid-exec reads: entry, target (and, for cuda, what its
/// kernels are: ptx, cubin or fatbin), ranks, grids, argument and result
/// shapes, and the relative error its quantized collectives may add (which
/// braid-run --check allows). Written from the SPMD (per-rank) signature
/// after the dist stage.
FailureOr<std::string> buildManifest(ModuleOp module, func::FuncOp function,
                                     const braid::CompileOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "braid-manifest 1\n";
  os << "entry " << function.getSymName() << "\n";
  if (options.cuda()) {
    braid::CompileOptions resolved = options;
    braid::options::resolveTargetDefaults(resolved);
    os << "target cuda "
       << (resolved.gpuFormat == braid::GpuFormat::Isa      ? "ptx"
           : resolved.gpuFormat == braid::GpuFormat::Fatbin ? "fatbin"
                                                            : "cubin")
       << "\n";
  } else {
    os << "target cpu\n";
  }
  int64_t ranks = 0;
  std::string grids;
  for (auto grid : module.getOps<shard::GridOp>()) {
    int64_t size = 1;
    grids += "grid " + grid.getSymName().str();
    for (int64_t dim : grid.getShape()) {
      if (ShapedType::isDynamic(dim)) {
        grid.emitError() << "grids must have static sizes to run";
        return failure();
      }
      size *= dim;
      grids += " " + std::to_string(dim);
    }
    grids += "\n";
    if (ranks && ranks != size) {
      grid.emitError() << "grid " << grid.getSymName() << " has " << size
                       << " ranks but another grid has " << ranks
                       << "; every grid must span all ranks";
      return failure();
    }
    ranks = size;
  }
  os << "ranks " << (ranks ? ranks : 1) << "\n" << grids;
  if (auto bound = module->getAttrOfType<FloatAttr>(
          braid::dist::DistDialect::getQuantizationBoundAttrName()))
    os << "quantized " << llvm::format("%.17g", bound.getValueAsDouble())
       << "\n";
  auto describe = [&](StringRef kind, unsigned index, Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    std::string dtype = tensor ? dtypeName(tensor.getElementType()) : "";
    if (!tensor || !tensor.hasStaticShape() || dtype.empty()) {
      function.emitError() << kind << " #" << index << " has type " << type
                           << "; runnable entry functions take and return "
                              "statically shaped tensors of f32, f64, f16, "
                              "bf16, i1, i8, i16, i32 or i64";
      return false;
    }
    os << kind << " " << index << " " << dtype;
    for (int64_t dim : tensor.getShape())
      os << " " << dim;
    os << "\n";
    return true;
  };
  for (auto [i, type] : llvm::enumerate(function.getArgumentTypes()))
    if (!describe("arg", i, type))
      return failure();
  for (auto [i, type] : llvm::enumerate(function.getResultTypes()))
    if (!describe("result", i, type))
      return failure();
  return text;
}

} // namespace braid::compiler
