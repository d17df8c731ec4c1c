//===- XferToRuntime.cpp - xfer to Braid runtime calls ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Runtime/braid_rt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/TypeSwitch.h"

namespace braid {
#define GEN_PASS_DEF_CONVERTXFERTORUNTIME
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;
using namespace braid;

namespace {

constexpr int64_t kMaxGridRank = BRAID_RT_MAX_GRID_RANK;

// The runtime numbers reductions as dist::ReductionKind does, so that the
// attribute's value is the ABI's code.
static_assert(
    static_cast<int>(dist::ReductionKind::Sum) == BRAID_RT_SUM &&
        static_cast<int>(dist::ReductionKind::Max) == BRAID_RT_MAX &&
        static_cast<int>(dist::ReductionKind::Min) == BRAID_RT_MIN &&
        static_cast<int>(dist::ReductionKind::Product) == BRAID_RT_PRODUCT &&
        static_cast<int>(dist::ReductionKind::BitAnd) == BRAID_RT_BITAND &&
        static_cast<int>(dist::ReductionKind::BitOr) == BRAID_RT_BITOR &&
        static_cast<int>(dist::ReductionKind::BitXor) == BRAID_RT_BITXOR,
    "dist::ReductionKind must match enum braid_rt_reduction");

/// Runtime dtype code (enum braid_rt_dtype) of `type`, or -1.
static int64_t dtypeCode(Type type) {
  if (type.isF32())
    return BRAID_RT_F32;
  if (type.isF64())
    return BRAID_RT_F64;
  if (type.isF16())
    return BRAID_RT_F16;
  if (type.isBF16())
    return BRAID_RT_BF16;
  if (type.isInteger(8))
    return BRAID_RT_I8;
  if (type.isInteger(16))
    return BRAID_RT_I16;
  if (type.isInteger(32))
    return BRAID_RT_I32;
  if (type.isInteger(64))
    return BRAID_RT_I64;
  return -1;
}

static int64_t elementBytes(Type type) {
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

class RuntimeLowering {
public:
  RuntimeLowering(ModuleOp module)
      : module(module), rewriter(module.getContext()),
        i64(rewriter.getI64Type()) {}

  LogicalResult run() {
    SmallVector<FunctionOpInterface> functions;
    module.walk([&](FunctionOpInterface f) { functions.push_back(f); });
    for (FunctionOpInterface function : functions)
      if (failed(lowerFunction(function)))
        return failure();
    // Grids are compile-time descriptions; once nothing names them they
    // must go, since they have no LLVM counterpart.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        rewriter.eraseOp(grid);
    return success();
  }

private:
  Value constant(Location loc, int64_t value) {
    return arith::ConstantIntOp::create(rewriter, loc, i64, value);
  }

  /// Declares runtime function `name` with `numArgs` i64 arguments.
  func::FuncOp declare(StringRef name, unsigned numArgs, bool returnsValue) {
    if (auto existing = module.lookupSymbol<func::FuncOp>(name))
      return existing;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    SmallVector<Type> args(numArgs, i64);
    SmallVector<Type> results;
    if (returnsValue)
      results.push_back(i64);
    auto function =
        func::FuncOp::create(rewriter, module.getLoc(), name,
                             rewriter.getFunctionType(args, results));
    function.setPrivate();
    return function;
  }

  Value call(Location loc, StringRef name, ArrayRef<Value> args,
             bool returnsValue = true) {
    func::FuncOp callee = declare(name, args.size(), returnsValue);
    auto callOp = func::CallOp::create(rewriter, loc, callee, args);
    return returnsValue ? callOp.getResult(0) : Value();
  }

  /// (ndims, s0, s1, s2, s3) of `gridAttr`, or failure with a diagnostic.
  FailureOr<SmallVector<Value>> gridShapeArgs(Operation *op,
                                              FlatSymbolRefAttr gridAttr) {
    shard::GridOp grid = dist::lookupGrid(op, gridAttr);
    if (!grid)
      return op->emitError() << "unknown grid " << gridAttr;
    ArrayRef<int64_t> shape = grid.getShape();
    if (static_cast<int64_t>(shape.size()) > kMaxGridRank ||
        llvm::any_of(shape, ShapedType::isDynamic))
      return op->emitError() << "the runtime needs grids of at most "
                             << kMaxGridRank << " axes of static size; grid "
                             << gridAttr << " does not qualify";
    Location loc = op->getLoc();
    SmallVector<Value> args{constant(loc, shape.size())};
    for (int64_t i = 0; i < kMaxGridRank; ++i)
      args.push_back(
          constant(loc, i < static_cast<int64_t>(shape.size()) ? shape[i] : 1));
    return args;
  }

  /// The group handle for (grid, axes), created once at function entry.
  FailureOr<Value> group(Operation *op, FlatSymbolRefAttr gridAttr,
                         ArrayRef<int16_t> axes) {
    std::string key = gridAttr.getValue().str();
    for (int16_t axis : axes)
      key += "," + std::to_string(axis);
    if (Value cached = groups.lookup(key))
      return cached;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(entryBlock);
    FailureOr<SmallVector<Value>> args = gridShapeArgs(op, gridAttr);
    if (failed(args))
      return failure();
    int64_t packed = 0;
    for (auto [i, axis] : llvm::enumerate(axes))
      packed |= static_cast<int64_t>(axis) << (8 * i);
    Location loc = op->getLoc();
    args->push_back(constant(loc, axes.size()));
    args->push_back(constant(loc, packed));
    Value handle = call(loc, "braid_rt_group", *args);
    groups[key] = handle;
    return handle;
  }

  /// Address of the first element of `buffer`, as an integer.
  Value address(Location loc, Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    Value aligned =
        memref::ExtractAlignedPointerAsIndexOp::create(rewriter, loc, buffer);
    auto metadata =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, buffer);
    Value offsetBytes = arith::MulIOp::create(
        rewriter, loc, metadata.getOffset(),
        arith::ConstantIndexOp::create(rewriter, loc,
                                       elementBytes(type.getElementType())));
    Value address = arith::AddIOp::create(rewriter, loc, aligned, offsetBytes);
    return arith::IndexCastOp::create(rewriter, loc, i64, address);
  }

  int64_t numElements(Value buffer) {
    return cast<MemRefType>(buffer.getType()).getNumElements();
  }

  int64_t numBytes(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    return type.getNumElements() * elementBytes(type.getElementType());
  }

  FailureOr<int64_t> groupSize(Operation *op, FlatSymbolRefAttr gridAttr,
                               ArrayRef<int16_t> axes) {
    shard::GridOp grid = dist::lookupGrid(op, gridAttr);
    int64_t size = grid ? dist::getGroupSize(grid, axes) : ShapedType::kDynamic;
    if (ShapedType::isDynamic(size))
      return op->emitError() << "group size must be static";
    return size;
  }

  /// A memref of `type` (static, identity layout) whose data is at the
  /// integer address `addr`: an LLVM memref descriptor cast to the memref,
  /// which the conversion to LLVM folds into its uses.
  Value memrefAt(Location loc, Value addr, MemRefType type) {
    MLIRContext *context = rewriter.getContext();
    auto ptr = LLVM::LLVMPointerType::get(context);
    int64_t rank = type.getRank();
    SmallVector<Type> fields{ptr, ptr, i64};
    if (rank > 0) {
      fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
      fields.push_back(LLVM::LLVMArrayType::get(i64, rank));
    }
    auto descriptorType = LLVM::LLVMStructType::getLiteral(context, fields);
    Value pointer = LLVM::IntToPtrOp::create(rewriter, loc, ptr, addr);
    Value descriptor = LLVM::PoisonOp::create(rewriter, loc, descriptorType);
    auto insert = [&](Value field, ArrayRef<int64_t> position) {
      descriptor = LLVM::InsertValueOp::create(rewriter, loc, descriptor, field,
                                               position);
    };
    insert(pointer, {0});
    insert(pointer, {1});
    insert(constant(loc, 0), {2});
    int64_t stride = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      insert(constant(loc, type.getDimSize(d)), {3, d});
      insert(constant(loc, stride), {4, d});
      stride *= type.getDimSize(d);
    }
    return UnrealizedConversionCastOp::create(rewriter, loc, TypeRange{type},
                                              descriptor)
        .getResult(0);
  }

  /// The address of `flags[index]` (32-bit flags).
  Value flagAddress(Location loc, Value flags, Value index) {
    Value offset = arith::MulIOp::create(
        rewriter, loc,
        arith::IndexCastOp::create(rewriter, loc, i64, index).getResult(),
        constant(loc, 4));
    return arith::AddIOp::create(rewriter, loc, address(loc, flags), offset);
  }

  /// Lowers the symmetric-memory ops that are not transfers (allocations,
  /// peer views, signals and their waits).
  LogicalResult lowerSymmetric(Operation *op) {
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    if (auto wait = dyn_cast<xfer::SignalWaitOp>(op)) {
      call(loc, "braid_rt_signal_wait_next",
           {flagAddress(loc, wait.getFlags(), wait.getIndex()),
            constant(loc, wait.getSlack()), constant(loc, wait.getStep())},
           /*returnsValue=*/false);
      rewriter.eraseOp(op);
      return success();
    }
    // The others address the group their grid and axes name.
    FailureOr<Value> handle =
        group(op, op->getAttrOfType<FlatSymbolRefAttr>("grid"),
              op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef());
    if (failed(handle))
      return failure();
    if (auto alloc = dyn_cast<xfer::SymmetricAllocOp>(op)) {
      Value addr = call(loc, "braid_rt_symmetric_site",
                        {*handle, constant(loc, numBytes(alloc.getBuffer())),
                         constant(loc, alloc.getSite())});
      rewriter.replaceOp(op, memrefAt(loc, addr, alloc.getBuffer().getType()));
      return success();
    }
    if (auto view = dyn_cast<xfer::PeerViewOp>(op)) {
      Value addr = call(loc, "braid_rt_symmetric_peer",
                        {*handle, constant(loc, view.getOffset()),
                         address(loc, view.getBuffer())});
      rewriter.replaceOp(op, memrefAt(loc, addr, view.getBuffer().getType()));
      return success();
    }
    auto signal = cast<xfer::SignalOp>(op);
    call(loc, "braid_rt_signal_add",
         {*handle, constant(loc, signal.getOffset()),
          flagAddress(loc, signal.getFlags(), signal.getIndex()),
          constant(loc, signal.getAdd()), constant(loc, signal.getStep())},
         /*returnsValue=*/false);
    rewriter.eraseOp(op);
    return success();
  }

  FailureOr<Value> lowerTransfer(Operation *op) {
    Location loc = op->getLoc();
    for (Value operand : op->getOperands())
      if (auto type = dyn_cast<MemRefType>(operand.getType()))
        if (!type.hasStaticShape())
          return op->emitError() << "the runtime lowering needs static "
                                    "buffer shapes, got "
                                 << type;
    auto grid = op->getAttrOfType<FlatSymbolRefAttr>("grid");
    auto axes = op->getAttrOfType<DenseI16ArrayAttr>("axes").asArrayRef();
    int64_t step = op->getAttrOfType<IntegerAttr>("step").getInt();
    FailureOr<Value> handle = group(op, grid, axes);
    FailureOr<int64_t> size = groupSize(op, grid, axes);
    if (failed(handle) || failed(size))
      return failure();
    Value stepValue = constant(loc, step);
    auto reduceArgs = [&](Operation *o,
                          Value src) -> FailureOr<std::pair<Value, Value>> {
      Type element = cast<MemRefType>(src.getType()).getElementType();
      int64_t dtype = dtypeCode(element);
      if (dtype < 0)
        return o->emitError()
               << "the runtime cannot reduce elements of type " << element;
      auto kind = o->getAttrOfType<dist::ReductionKindAttr>("reduction");
      return std::make_pair(
          constant(loc, dtype),
          constant(loc, static_cast<int64_t>(kind.getValue())));
    };
    return llvm::TypeSwitch<Operation *, FailureOr<Value>>(op)
        .Case([&](xfer::SendOp send) -> FailureOr<Value> {
          return call(loc, "braid_rt_send",
                      {*handle, constant(loc, send.getOffset()),
                       address(loc, send.getBuffer()),
                       constant(loc, numBytes(send.getBuffer())), stepValue});
        })
        .Case([&](xfer::RecvOp recv) -> FailureOr<Value> {
          return call(loc, "braid_rt_recv",
                      {*handle, constant(loc, recv.getOffset()),
                       address(loc, recv.getBuffer()),
                       constant(loc, numBytes(recv.getBuffer())), stepValue});
        })
        .Case([&](xfer::PutOp put) -> FailureOr<Value> {
          Value flag = put.getFlags()
                           ? flagAddress(loc, put.getFlags(), put.getIndex())
                           : constant(loc, 0);
          return call(
              loc, "braid_rt_put",
              {*handle, constant(loc, put.getOffset()),
               address(loc, put.getSource()), address(loc, put.getDest()),
               constant(loc, numBytes(put.getSource())), flag, stepValue});
        })
        .Case([&](xfer::AllGatherOp gather) -> FailureOr<Value> {
          return call(loc, "braid_rt_all_gather",
                      {*handle, address(loc, gather.getSource()),
                       address(loc, gather.getDest()),
                       constant(loc, numBytes(gather.getSource())), stepValue});
        })
        .Case([&](xfer::ReduceScatterOp scatter) -> FailureOr<Value> {
          auto codes = reduceArgs(scatter, scatter.getSource());
          if (failed(codes))
            return failure();
          return call(loc, "braid_rt_reduce_scatter",
                      {*handle, address(loc, scatter.getSource()),
                       address(loc, scatter.getDest()),
                       constant(loc, numElements(scatter.getDest())),
                       codes->first, codes->second, stepValue});
        })
        .Case([&](xfer::AllReduceOp reduce) -> FailureOr<Value> {
          auto codes = reduceArgs(reduce, reduce.getSource());
          if (failed(codes))
            return failure();
          return call(loc, "braid_rt_all_reduce",
                      {*handle, address(loc, reduce.getSource()),
                       address(loc, reduce.getDest()),
                       constant(loc, numElements(reduce.getSource())),
                       codes->first, codes->second, stepValue});
        })
        .Case([&](xfer::AllToAllOp a2a) -> FailureOr<Value> {
          return call(loc, "braid_rt_all_to_all",
                      {*handle, address(loc, a2a.getSource()),
                       address(loc, a2a.getDest()),
                       constant(loc, numBytes(a2a.getSource()) / *size),
                       stepValue});
        })
        .Case([&](xfer::BroadcastOp bcast) -> FailureOr<Value> {
          // The root's position in the group, row-major over the axes.
          shard::GridOp gridOp = dist::lookupGrid(op, grid);
          int64_t root = 0;
          for (auto [axis, coordinate] : llvm::zip(axes, bcast.getRoot()))
            root = root * gridOp.getShape()[axis] + coordinate;
          return call(loc, "braid_rt_broadcast",
                      {*handle, address(loc, bcast.getSource()),
                       address(loc, bcast.getDest()),
                       constant(loc, numBytes(bcast.getSource())),
                       constant(loc, root), stepValue});
        })
        .Default([&](Operation *) -> FailureOr<Value> {
          return op->emitError() << "unexpected transfer";
        });
  }

  /// This rank's coordinates along `axes` (all axes if empty).
  FailureOr<SmallVector<Value>> coordinates(Operation *op,
                                            FlatSymbolRefAttr gridAttr,
                                            ArrayRef<int16_t> axes) {
    FailureOr<SmallVector<Value>> shapeArgs = gridShapeArgs(op, gridAttr);
    if (failed(shapeArgs))
      return failure();
    shard::GridOp grid = dist::lookupGrid(op, gridAttr);
    SmallVector<int16_t> all;
    if (axes.empty()) {
      for (int64_t i = 0; i < grid.getRank(); ++i)
        all.push_back(i);
      axes = all;
    }
    Location loc = op->getLoc();
    SmallVector<Value> result;
    for (int16_t axis : axes) {
      SmallVector<Value> args(*shapeArgs);
      args.push_back(constant(loc, axis));
      Value coordinate = call(loc, "braid_rt_coord", args);
      result.push_back(arith::IndexCastOp::create(
          rewriter, loc, rewriter.getIndexType(), coordinate));
    }
    return result;
  }

  LogicalResult lowerGridQuery(Operation *op) {
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    if (auto query = dyn_cast<shard::ProcessMultiIndexOp>(op)) {
      auto coords = coordinates(op, query.getGridAttr(), query.getAxes());
      if (failed(coords))
        return failure();
      rewriter.replaceOp(op, *coords);
      return success();
    }
    if (auto query = dyn_cast<shard::ProcessLinearIndexOp>(op)) {
      auto coords = coordinates(op, query.getGridAttr(), {});
      if (failed(coords))
        return failure();
      shard::GridOp grid = dist::lookupGrid(op, query.getGridAttr());
      Value linear = arith::ConstantIndexOp::create(rewriter, loc, 0);
      for (auto [size, coordinate] : llvm::zip(grid.getShape(), *coords))
        linear = arith::AddIOp::create(
            rewriter, loc,
            arith::MulIOp::create(
                rewriter, loc, linear,
                arith::ConstantIndexOp::create(rewriter, loc, size)),
            coordinate);
      rewriter.replaceOp(op, linear);
      return success();
    }
    if (auto query = dyn_cast<shard::GridShapeOp>(op)) {
      shard::GridOp grid = dist::lookupGrid(op, query.getGridAttr());
      if (!grid || llvm::any_of(grid.getShape(), ShapedType::isDynamic))
        return op->emitError() << "grid shape must be static";
      SmallVector<Value> sizes;
      ArrayRef<int16_t> axes = query.getAxes();
      for (int64_t i = 0, e = axes.empty() ? grid.getRank() : axes.size();
           i < e; ++i)
        sizes.push_back(arith::ConstantIndexOp::create(
            rewriter, loc, grid.getShape()[axes.empty() ? i : axes[i]]));
      rewriter.replaceOp(op, sizes);
      return success();
    }
    return success();
  }

  LogicalResult lowerFunction(FunctionOpInterface function) {
    // Placements describe distributed tensors; below this point there are
    // only pointers, to which the attribute cannot apply.
    StringRef placement = dist::DistDialect::getPlacementAttrName();
    for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
      function.removeArgAttr(i,
                             StringAttr::get(function.getContext(), placement));
    for (unsigned i = 0, e = function.getNumResults(); i < e; ++i)
      function.removeResultAttr(
          i, StringAttr::get(function.getContext(), placement));
    if (function.isExternal())
      return success();
    entryBlock = &function.getFunctionBody().front();
    groups.clear();
    DenseMap<Value, Value> handles;
    SmallVector<Operation *> transfers, waits, queries, symmetric;
    function.walk([&](Operation *op) {
      if (isa<xfer::SymmetricAllocOp, xfer::PeerViewOp, xfer::SignalOp,
              xfer::SignalWaitOp>(op))
        symmetric.push_back(op);
      else if (isa<xfer::SendOp, xfer::RecvOp, xfer::PutOp, xfer::AllGatherOp,
                   xfer::ReduceScatterOp, xfer::AllReduceOp, xfer::AllToAllOp,
                   xfer::BroadcastOp>(op))
        transfers.push_back(op);
      else if (isa<xfer::WaitOp>(op))
        waits.push_back(op);
      else if (isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp,
                   shard::GridShapeOp>(op))
        queries.push_back(op);
    });
    for (Operation *op : transfers) {
      rewriter.setInsertionPoint(op);
      FailureOr<Value> handle = lowerTransfer(op);
      if (failed(handle))
        return failure();
      handles[op->getResult(0)] = *handle;
    }
    for (Operation *op : waits) {
      rewriter.setInsertionPoint(op);
      for (Value request : op->getOperands()) {
        Value handle = handles.lookup(request);
        if (!handle)
          return op->emitError() << "waits for a request that is not a "
                                    "lowered transfer";
        call(op->getLoc(), "braid_rt_wait", {handle}, /*returnsValue=*/false);
      }
      rewriter.eraseOp(op);
    }
    for (Operation *op : transfers)
      rewriter.eraseOp(op);
    // Allocations last: the ops above took their addresses from the
    // allocations' memrefs, which now become descriptors.
    for (Operation *op : llvm::reverse(symmetric))
      if (failed(lowerSymmetric(op)))
        return failure();
    for (Operation *op : queries)
      if (failed(lowerGridQuery(op)))
        return failure();
    return success();
  }

  ModuleOp module;
  IRRewriter rewriter;
  Type i64;
  Block *entryBlock = nullptr;
  llvm::StringMap<Value> groups;
};

struct ConvertXferToRuntimePass
    : public braid::impl::ConvertXferToRuntimeBase<ConvertXferToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!entry.empty()) {
      auto function = module.lookupSymbol<func::FuncOp>(entry);
      if (!function || function.isExternal()) {
        module.emitError() << "entry function '" << entry
                           << "' is not defined in the module";
        return signalPassFailure();
      }
      function->setAttr("llvm.emit_c_interface", UnitAttr::get(&getContext()));
    }
    if (failed(RuntimeLowering(module).run()))
      signalPassFailure();
  }
};

} // namespace
