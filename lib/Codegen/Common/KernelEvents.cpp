//===- KernelEvents.cpp - Trace events around kernel calls ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-kernel-events: braid_rt_kernel_begin and _end around each kernel
// call or launch that carries a description (braid.trace), so that the
// trace and the profile show every kernel and GEMM by what it is and where
// it came from, on both targets.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "../Gemm/Gemm.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Dialect/Xfer/Transforms/Schedule.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Path.h"

#include <algorithm>

namespace braid {
#define GEN_PASS_DEF_KERNELEVENTS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Where `loc` says the op came from: the first file, line and column in
/// it (the file without its directories), else its first name; empty when
/// it says nothing.
std::string sourceOf(Location loc) {
  std::string file, name;
  loc->walk([&](Location inner) {
    if (auto at = dyn_cast<FileLineColLoc>(inner)) {
      file = (llvm::sys::path::filename(at.getFilename().getValue()) + ":" +
              Twine(at.getLine()) + ":" + Twine(at.getColumn()))
                 .str();
      return WalkResult::interrupt();
    }
    if (auto named = dyn_cast<NameLoc>(inner); named && name.empty())
      name = named.getName().str();
    return WalkResult::advance();
  });
  return !file.empty() ? file : name;
}

struct KernelEventsPass
    : public braid::impl::KernelEventsBase<KernelEventsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Kernel calls (cpu), launches (cuda) and GEMM calls (both).
    SmallVector<Operation *> described;
    module.walk([&](Operation *op) {
      if (op->hasAttr(braid::xfer::kTraceEventAttrName))
        described.push_back(op);
    });
    // The copies bufferization left in a schedule are kernels too (a
    // strided one runs element by element): described here.
    for (auto function : module.getOps<func::FuncOp>()) {
      if (!function->hasAttr(braid::xfer::kScheduleAttrName))
        continue;
      function.walk([&](memref::CopyOp copy) {
        auto target = cast<MemRefType>(copy.getTarget().getType());
        auto source = cast<MemRefType>(copy.getSource().getType());
        std::string name;
        llvm::raw_string_ostream os(name);
        os << "copy ";
        llvm::interleave(
            target.getShape(), os,
            [&](int64_t size) {
              if (ShapedType::isDynamic(size))
                os << "?";
              else
                os << size;
            },
            "x");
        os << "x" << target.getElementType();
        if (!source.getLayout().isIdentity() ||
            !target.getLayout().isIdentity())
          os << " (strided)";
        braid::xfer::setTraceEvent(
            copy, name, 2 * braid::xfer::getStaticBytes(target).value_or(0), 0);
        described.push_back(copy);
      });
    }
    if (described.empty())
      return;
    func::FuncOp begin =
        braid::codegen::declareRuntime(module, "braid_rt_kernel_begin", 3);
    func::FuncOp end =
        braid::codegen::declareRuntime(module, "braid_rt_kernel_end", 0);
    SymbolTable symbols(module);
    // One constant per distinct name.
    llvm::StringMap<memref::GlobalOp> names;
    OpBuilder b(&getContext());
    Type i8 = b.getI8Type(), i64 = b.getI64Type();
    for (Operation *call : described) {
      auto event =
          call->getAttrOfType<DictionaryAttr>(braid::xfer::kTraceEventAttrName);
      call->removeAttr(braid::xfer::kTraceEventAttrName);
      auto what = event ? event.getAs<StringAttr>("name") : StringAttr();
      auto bytes = event ? event.getAs<IntegerAttr>("bytes") : IntegerAttr();
      auto flops = event ? event.getAs<IntegerAttr>("flops") : IntegerAttr();
      if (!what || !bytes || !flops) {
        call->emitError() << "'" << braid::xfer::kTraceEventAttrName
                          << "' must be a dictionary of a string 'name' and "
                             "integer 'bytes' and 'flops'";
        signalPassFailure();
        return;
      }
      std::string name = what.getValue().str();
      if (std::string source = sourceOf(call->getLoc()); !source.empty())
        name += " at " + source;
      // One line of the profile each.
      std::replace(name.begin(), name.end(), '\n', ' ');

      memref::GlobalOp &global = names[name];
      if (!global) {
        SmallVector<int8_t> text(name.begin(), name.end());
        text.push_back(0);
        auto type = MemRefType::get({static_cast<int64_t>(text.size())}, i8);
        b.setInsertionPointToStart(module.getBody());
        global = memref::GlobalOp::create(
            b, module.getLoc(), "__braid_kernel_name",
            b.getStringAttr("private"), type,
            DenseElementsAttr::get(RankedTensorType::get(type.getShape(), i8),
                                   ArrayRef(text)),
            /*constant=*/true, /*alignment=*/nullptr);
        symbols.insert(global); // Renamed to be unique.
      }

      Location loc = call->getLoc();
      b.setInsertionPoint(call);
      Value address = memref::ExtractAlignedPointerAsIndexOp::create(
          b, loc,
          memref::GetGlobalOp::create(b, loc, global.getType(),
                                      global.getSymName()));
      func::CallOp::create(
          b, loc, begin,
          ValueRange{
              arith::IndexCastOp::create(b, loc, i64, address),
              arith::ConstantIntOp::create(b, loc, i64, bytes.getInt()),
              arith::ConstantIntOp::create(b, loc, i64, flops.getInt())});
      b.setInsertionPointAfter(call);
      func::CallOp::create(b, loc, end, ValueRange{});
      ++numEvents;
    }
  }
};

} // namespace
