//===- XferToRuntime.cpp - xfer to Braid runtime calls ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// convert-xfer-to-runtime as a dialect conversion: one pattern per xfer op
// (and per shard query), requests typed as the runtime's i64 handles, and a
// target on which every xfer op and shard query is illegal, so that none
// survives the pass unnoticed. What the patterns cannot report as a located
// error once they have started rewriting (grids, shapes, element types) is
// checked for the whole module first.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Conversion/XferToRuntime/MemRefAt.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Runtime/braid_rt.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/DialectConversion.h"

#include <map>

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

/// What every pattern shares: the runtime functions it declares in the
/// module, and the group handles, created once per function at its entry.
class Runtime {
public:
  explicit Runtime(ModuleOp module)
      : module(module), i64(IntegerType::get(module.getContext(), 64)) {}

  Type handleType() const { return i64; }

  Value constant(OpBuilder &b, Location loc, int64_t value) const {
    return arith::ConstantIntOp::create(b, loc, i64, value);
  }

  /// Calls runtime function `name` on i64 arguments, declaring it first.
  Value call(OpBuilder &b, Location loc, StringRef name, ValueRange args,
             bool returnsValue = true) const {
    func::FuncOp callee = declare(b, name, args.size(), returnsValue);
    auto callOp = func::CallOp::create(b, loc, callee, args);
    return returnsValue ? callOp.getResult(0) : Value();
  }

  /// (ndims, s0, s1, s2, s3) of `gridAttr` (checkLowerable proved it has
  /// at most kMaxGridRank static axes).
  SmallVector<Value> gridShapeArgs(OpBuilder &b, Operation *op,
                                   FlatSymbolRefAttr gridAttr) const {
    ArrayRef<int64_t> shape = dist::lookupGrid(op, gridAttr).getShape();
    Location loc = op->getLoc();
    SmallVector<Value> args{constant(b, loc, shape.size())};
    for (int64_t i = 0; i < kMaxGridRank; ++i)
      args.push_back(constant(
          b, loc, i < static_cast<int64_t>(shape.size()) ? shape[i] : 1));
    return args;
  }

  /// The group handle for (grid, axes) in `op`'s function, created at its
  /// entry the first time it is asked for.
  Value group(OpBuilder &b, Operation *op, FlatSymbolRefAttr gridAttr,
              ArrayRef<int16_t> axes) {
    Block *entry =
        &op->getParentOfType<FunctionOpInterface>().getFunctionBody().front();
    std::string key = gridAttr.getValue().str();
    for (int16_t axis : axes)
      key += "," + std::to_string(axis);
    Value &handle = groups[{entry, key}];
    if (handle)
      return handle;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(entry);
    SmallVector<Value> args = gridShapeArgs(b, op, gridAttr);
    int64_t packed = 0;
    for (auto [i, axis] : llvm::enumerate(axes))
      packed |= static_cast<int64_t>(axis) << (8 * i);
    Location loc = op->getLoc();
    args.push_back(constant(b, loc, axes.size()));
    args.push_back(constant(b, loc, packed));
    handle = call(b, loc, "braid_rt_group", args);
    return handle;
  }

  /// Address of the first element of `buffer`, as an integer.
  Value address(OpBuilder &b, Location loc, Value buffer) const {
    auto type = cast<MemRefType>(buffer.getType());
    Value aligned =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    auto metadata = memref::ExtractStridedMetadataOp::create(b, loc, buffer);
    Value offsetBytes =
        arith::MulIOp::create(b, loc, metadata.getOffset(),
                              arith::ConstantIndexOp::create(
                                  b, loc, elementBytes(type.getElementType())));
    Value address = arith::AddIOp::create(b, loc, aligned, offsetBytes);
    return arith::IndexCastOp::create(b, loc, i64, address);
  }

  /// The address of `flags[index]` (32-bit flags).
  Value flagAddress(OpBuilder &b, Location loc, Value flags,
                    Value index) const {
    Value offset = arith::MulIOp::create(
        b, loc, arith::IndexCastOp::create(b, loc, i64, index).getResult(),
        constant(b, loc, 4));
    return arith::AddIOp::create(b, loc, address(b, loc, flags), offset);
  }

  /// This rank's coordinates along `axes` (all axes if empty).
  SmallVector<Value> coordinates(OpBuilder &b, Operation *op,
                                 FlatSymbolRefAttr gridAttr,
                                 ArrayRef<int16_t> axes) const {
    SmallVector<Value> shapeArgs = gridShapeArgs(b, op, gridAttr);
    SmallVector<int16_t> all;
    if (axes.empty()) {
      int64_t rank = dist::lookupGrid(op, gridAttr).getRank();
      for (int64_t i = 0; i < rank; ++i)
        all.push_back(i);
      axes = all;
    }
    Location loc = op->getLoc();
    SmallVector<Value> result;
    for (int16_t axis : axes) {
      SmallVector<Value> args(shapeArgs);
      args.push_back(constant(b, loc, axis));
      Value coordinate = call(b, loc, "braid_rt_coord", args);
      result.push_back(
          arith::IndexCastOp::create(b, loc, b.getIndexType(), coordinate));
    }
    return result;
  }

private:
  /// Declares runtime function `name` with `numArgs` i64 arguments.
  func::FuncOp declare(OpBuilder &b, StringRef name, unsigned numArgs,
                       bool returnsValue) const {
    if (auto existing = module.lookupSymbol<func::FuncOp>(name))
      return existing;
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    SmallVector<Type> args(numArgs, i64);
    SmallVector<Type> results;
    if (returnsValue)
      results.push_back(i64);
    auto function = func::FuncOp::create(b, module.getLoc(), name,
                                         b.getFunctionType(args, results));
    function.setPrivate();
    return function;
  }

  mutable ModuleOp module;
  Type i64;
  std::map<std::pair<Block *, std::string>, Value> groups;
};

//===----------------------------------------------------------------------===//
// What the patterns assume, checked first
//===----------------------------------------------------------------------===//

int64_t numElements(Value buffer) {
  return cast<MemRefType>(buffer.getType()).getNumElements();
}

int64_t numBytes(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return type.getNumElements() * elementBytes(type.getElementType());
}

/// Whether the runtime can serve `op`'s grid, buffers and elements; emits
/// the error at `op` if not.
LogicalResult checkLowerable(Operation *op) {
  if (auto gridAttr = op->getAttrOfType<FlatSymbolRefAttr>("grid")) {
    shard::GridOp grid = dist::lookupGrid(op, gridAttr);
    if (!grid)
      return op->emitError() << "unknown grid " << gridAttr;
    ArrayRef<int64_t> shape = grid.getShape();
    if (static_cast<int64_t>(shape.size()) > kMaxGridRank ||
        llvm::any_of(shape, ShapedType::isDynamic))
      return op->emitError() << "the runtime needs grids of at most "
                             << kMaxGridRank << " axes of static size; grid "
                             << gridAttr << " does not qualify";
  }
  if (!isa<xfer::SendOp, xfer::RecvOp, xfer::PutOp, xfer::AllGatherOp,
           xfer::ReduceScatterOp, xfer::AllReduceOp, xfer::AllToAllOp,
           xfer::BroadcastOp>(op))
    return success();
  for (Value operand : op->getOperands())
    if (auto type = dyn_cast<MemRefType>(operand.getType()))
      if (!type.hasStaticShape())
        return op->emitError() << "the runtime lowering needs static "
                                  "buffer shapes, got "
                               << type;
  if (isa<xfer::ReduceScatterOp, xfer::AllReduceOp>(op)) {
    Type element =
        cast<MemRefType>(op->getOperand(0).getType()).getElementType();
    if (dtypeCode(element) < 0)
      return op->emitError()
             << "the runtime cannot reduce elements of type " << element;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

template <typename Op> class RuntimePattern : public OpConversionPattern<Op> {
public:
  RuntimePattern(const TypeConverter &converter, MLIRContext *context,
                 Runtime &runtime)
      : OpConversionPattern<Op>(converter, context), runtime(runtime) {}

protected:
  Runtime &runtime;
};

/// The runtime call an op on a group becomes: its name, its arguments after
/// the group's handle, and what replaces the op's result: the i64 the call
/// returns (a request's handle), a memref at the address it returns, or
/// nothing.
struct Call {
  StringRef name;
  SmallVector<Value> args;
  enum { Handle, Memref, None } result = Handle;
  MemRefType memref = {};
};

/// Point-to-point: the peer's offset, the buffer and its bytes.
template <typename Op>
Call pointToPoint(StringRef name, Op op, Value buffer, Runtime &rt,
                  OpBuilder &b, Location loc) {
  return {name,
          {rt.constant(b, loc, op.getOffset()), rt.address(b, loc, buffer),
           rt.constant(b, loc, numBytes(buffer)),
           rt.constant(b, loc, op.getStep())}};
}

Call describe(xfer::SendOp op, xfer::SendOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return pointToPoint("braid_rt_send", op, a.getBuffer(), rt, b, loc);
}

Call describe(xfer::RecvOp op, xfer::RecvOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return pointToPoint("braid_rt_recv", op, a.getBuffer(), rt, b, loc);
}

Call describe(xfer::PutOp op, xfer::PutOp::Adaptor a, Runtime &rt, OpBuilder &b,
              Location loc) {
  Value flag = a.getFlags() ? rt.flagAddress(b, loc, a.getFlags(), a.getIndex())
                            : rt.constant(b, loc, 0);
  return {"braid_rt_put",
          {rt.constant(b, loc, op.getOffset()),
           rt.address(b, loc, a.getSource()), rt.address(b, loc, a.getDest()),
           rt.constant(b, loc, numBytes(a.getSource())), flag,
           rt.constant(b, loc, op.getStep())}};
}

/// A collective on buffers: source, destination, what `counts` says of
/// their size, the collective's own codes, and the step.
template <typename Op>
Call collective(StringRef name, Op op, typename Op::Adaptor a,
                ArrayRef<int64_t> counts, Runtime &rt, OpBuilder &b,
                Location loc) {
  Call call{
      name,
      {rt.address(b, loc, a.getSource()), rt.address(b, loc, a.getDest())}};
  for (int64_t count : counts)
    call.args.push_back(rt.constant(b, loc, count));
  call.args.push_back(rt.constant(b, loc, op.getStep()));
  return call;
}

Call describe(xfer::AllGatherOp op, xfer::AllGatherOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return collective("braid_rt_all_gather", op, a, {numBytes(a.getSource())}, rt,
                    b, loc);
}

/// A reduction's element count (of `counted`), dtype and reduction codes.
template <typename Op> SmallVector<int64_t> reduction(Op op, Value counted) {
  Type element = cast<MemRefType>(op.getSource().getType()).getElementType();
  return {numElements(counted), dtypeCode(element),
          static_cast<int64_t>(op.getReduction())};
}

Call describe(xfer::ReduceScatterOp op, xfer::ReduceScatterOp::Adaptor a,
              Runtime &rt, OpBuilder &b, Location loc) {
  return collective("braid_rt_reduce_scatter", op, a,
                    reduction(op, a.getDest()), rt, b, loc);
}

Call describe(xfer::AllReduceOp op, xfer::AllReduceOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return collective("braid_rt_all_reduce", op, a, reduction(op, a.getSource()),
                    rt, b, loc);
}

Call describe(xfer::AllToAllOp op, xfer::AllToAllOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  shard::GridOp grid = dist::lookupGrid(op, op.getGridAttr());
  int64_t size = dist::getGroupSize(grid, op.getAxes());
  return collective("braid_rt_all_to_all", op, a,
                    {numBytes(a.getSource()) / size}, rt, b, loc);
}

Call describe(xfer::BroadcastOp op, xfer::BroadcastOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  // The root's position in the group, row-major over the axes.
  shard::GridOp grid = dist::lookupGrid(op, op.getGridAttr());
  int64_t root = 0;
  for (auto [axis, coordinate] : llvm::zip(op.getAxes(), op.getRoot()))
    root = root * grid.getShape()[axis] + coordinate;
  return collective("braid_rt_broadcast", op, a,
                    {numBytes(a.getSource()), root}, rt, b, loc);
}

Call describe(xfer::SymmetricAllocOp op, xfer::SymmetricAllocOp::Adaptor,
              Runtime &rt, OpBuilder &b, Location loc) {
  return {"braid_rt_symmetric_site",
          {rt.constant(b, loc, numBytes(op.getBuffer())),
           rt.constant(b, loc, op.getSite())},
          Call::Memref,
          op.getBuffer().getType()};
}

Call describe(xfer::PeerViewOp op, xfer::PeerViewOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return {
      "braid_rt_symmetric_peer",
      {rt.constant(b, loc, op.getOffset()), rt.address(b, loc, a.getBuffer())},
      Call::Memref,
      op.getView().getType()};
}

Call describe(xfer::SignalOp op, xfer::SignalOp::Adaptor a, Runtime &rt,
              OpBuilder &b, Location loc) {
  return {"braid_rt_signal_add",
          {rt.constant(b, loc, op.getOffset()),
           rt.flagAddress(b, loc, a.getFlags(), a.getIndex()),
           rt.constant(b, loc, op.getAdd()), rt.constant(b, loc, op.getStep())},
          Call::None};
}

/// An op on a group (a transfer, a symmetric allocation or view, a
/// signal): the call `describe` gives it, on the group's handle.
template <typename Op> struct GroupCall : RuntimePattern<Op> {
  using RuntimePattern<Op>::RuntimePattern;

  LogicalResult
  matchAndRewrite(Op op, typename Op::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Runtime &rt = this->runtime;
    Location loc = op.getLoc();
    Value handle = rt.group(rewriter, op, op.getGridAttr(), op.getAxes());
    Call call = describe(op, adaptor, rt, rewriter, loc);
    SmallVector<Value> args{handle};
    llvm::append_range(args, call.args);
    Value result =
        rt.call(rewriter, loc, call.name, args, call.result != Call::None);
    if (call.result == Call::None) {
      rewriter.eraseOp(op);
      return success();
    }
    if (call.result == Call::Memref)
      result = braid::memrefAt(rewriter, loc, result, call.memref);
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct WaitToCalls : RuntimePattern<xfer::WaitOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(xfer::WaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // A request that is no transfer's result (a block argument) has no
    // handle: the op stays, and the target reports it.
    for (Value request : op->getOperands())
      if (isa<BlockArgument>(request))
        return rewriter.notifyMatchFailure(op, "waits for a request that is "
                                               "not a lowered transfer");
    for (Value handle : adaptor.getOperands())
      runtime.call(rewriter, op.getLoc(), "braid_rt_wait", {handle},
                   /*returnsValue=*/false);
    rewriter.eraseOp(op);
    return success();
  }
};

/// The arguments of the runtime's counting of a wait (signal_wait,
/// flag_epoch): the flag's address, the slack and the step.
template <typename Op>
SmallVector<Value> countedWaitArgs(const Runtime &runtime, OpBuilder &b, Op op,
                                   typename Op::Adaptor adaptor) {
  Location loc = op.getLoc();
  return {runtime.flagAddress(b, loc, adaptor.getFlags(), adaptor.getIndex()),
          runtime.constant(b, loc, op.getSlack()),
          runtime.constant(b, loc, op.getStep())};
}

struct SignalWaitToCall : RuntimePattern<xfer::SignalWaitOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(xfer::SignalWaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    runtime.call(rewriter, op.getLoc(), "braid_rt_signal_wait_next",
                 countedWaitArgs(runtime, rewriter, op, adaptor),
                 /*returnsValue=*/false);
    rewriter.eraseOp(op);
    return success();
  }
};

/// The epoch a kernel's wait polls for: the runtime counts the wait as
/// braid_rt_signal_wait_next does and returns the value to reach.
struct FlagEpochToCall : RuntimePattern<xfer::FlagEpochOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(xfer::FlagEpochOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value epoch =
        runtime.call(rewriter, op.getLoc(), "braid_rt_signal_next_epoch",
                     countedWaitArgs(runtime, rewriter, op, adaptor));
    rewriter.replaceOpWithNewOp<arith::TruncIOp>(op, rewriter.getI32Type(),
                                                 epoch);
    return success();
  }
};

struct MultiIndexToCalls : RuntimePattern<shard::ProcessMultiIndexOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(shard::ProcessMultiIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, runtime.coordinates(rewriter, op, op.getGridAttr(), op.getAxes()));
    return success();
  }
};

struct LinearIndexToCalls : RuntimePattern<shard::ProcessLinearIndexOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(shard::ProcessLinearIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> coords =
        runtime.coordinates(rewriter, op, op.getGridAttr(), {});
    shard::GridOp grid = dist::lookupGrid(op, op.getGridAttr());
    Value linear = arith::ConstantIndexOp::create(rewriter, loc, 0);
    for (auto [size, coordinate] : llvm::zip(grid.getShape(), coords))
      linear = arith::AddIOp::create(
          rewriter, loc,
          arith::MulIOp::create(
              rewriter, loc, linear,
              arith::ConstantIndexOp::create(rewriter, loc, size)),
          coordinate);
    rewriter.replaceOp(op, linear);
    return success();
  }
};

struct GridShapeToConstants : RuntimePattern<shard::GridShapeOp> {
  using RuntimePattern::RuntimePattern;

  LogicalResult
  matchAndRewrite(shard::GridShapeOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    shard::GridOp grid = dist::lookupGrid(op, op.getGridAttr());
    ArrayRef<int16_t> axes = op.getAxes();
    SmallVector<Value> sizes;
    for (int64_t i = 0, e = axes.empty() ? grid.getRank() : axes.size(); i < e;
         ++i)
      sizes.push_back(arith::ConstantIndexOp::create(
          rewriter, op.getLoc(), grid.getShape()[axes.empty() ? i : axes[i]]));
    rewriter.replaceOp(op, sizes);
    return success();
  }
};

struct ConvertXferToRuntimePass
    : public braid::impl::ConvertXferToRuntimeBase<ConvertXferToRuntimePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    if (!entry.empty()) {
      auto function = module.lookupSymbol<func::FuncOp>(entry);
      if (!function || function.isExternal()) {
        module.emitError() << "entry function '" << entry
                           << "' is not defined in the module";
        return signalPassFailure();
      }
      function->setAttr("llvm.emit_c_interface", UnitAttr::get(context));
    }
    // Placements describe distributed tensors; below this point there are
    // only pointers, to which the attribute cannot apply.
    auto placement =
        StringAttr::get(context, dist::DistDialect::getPlacementAttrName());
    module.walk([&](FunctionOpInterface function) {
      for (unsigned i = 0, e = function.getNumArguments(); i < e; ++i)
        function.removeArgAttr(i, placement);
      for (unsigned i = 0, e = function.getNumResults(); i < e; ++i)
        function.removeResultAttr(i, placement);
    });
    WalkResult checked = module.walk([](Operation *op) {
      if (isa<xfer::XferDialect>(op->getDialect()) ||
          isa<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp,
              shard::GridShapeOp>(op))
        if (failed(checkLowerable(op)))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (checked.wasInterrupted())
      return signalPassFailure();

    Runtime runtime(module);
    TypeConverter converter;
    converter.addConversion([](Type type) { return type; });
    converter.addConversion(
        [&](xfer::RequestType) { return runtime.handleType(); });
    ConversionTarget target(*context);
    target.addIllegalDialect<xfer::XferDialect>();
    // Flags touched in a fused kernel: the code generation of the kernel
    // lowers them (braid-map-to-gpu).
    target.addLegalOp<xfer::KernelWaitOp, xfer::KernelSignalOp>();
    target.addIllegalOp<shard::ProcessMultiIndexOp, shard::ProcessLinearIndexOp,
                        shard::GridShapeOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(context);
    patterns.add<GroupCall<xfer::SendOp>, GroupCall<xfer::RecvOp>,
                 GroupCall<xfer::PutOp>, GroupCall<xfer::AllGatherOp>,
                 GroupCall<xfer::ReduceScatterOp>, GroupCall<xfer::AllReduceOp>,
                 GroupCall<xfer::AllToAllOp>, GroupCall<xfer::BroadcastOp>,
                 GroupCall<xfer::SymmetricAllocOp>, GroupCall<xfer::PeerViewOp>,
                 GroupCall<xfer::SignalOp>, WaitToCalls, SignalWaitToCall,
                 FlagEpochToCall, MultiIndexToCalls, LinearIndexToCalls,
                 GridShapeToConstants>(converter, context, runtime);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // Grids are compile-time descriptions; once nothing names them they
    // must go, since they have no LLVM counterpart.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
  }
};

} // namespace
