//===- BufferizableOpInterfaceImpl.cpp - dist ops bufferize to xfer -*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/DistToXfer/BufferizableOpInterfaceImpl.h"
#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Xfer/IR/XferOps.h"

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::bufferization;
using namespace braid;
using namespace braid::dist;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The buffer of `value`, copied into a fresh contiguous buffer if it is a
/// strided view (the runtime moves raw byte ranges), or if `forceCopy`.
static FailureOr<Value> getContiguousBuffer(RewriterBase &rewriter,
                                            Location loc, Value value,
                                            bool forceCopy,
                                            const BufferizationOptions &options,
                                            BufferizationState &state) {
  FailureOr<Value> buffer = getBuffer(rewriter, value, options, state);
  if (failed(buffer))
    return failure();
  auto type = cast<MemRefType>(buffer->getType());
  if (!forceCopy && xfer::isContiguous(type))
    return buffer;
  auto contiguous = MemRefType::get(type.getShape(), type.getElementType());
  FailureOr<Value> copy = options.createAlloc(rewriter, loc, contiguous, {});
  if (failed(copy) ||
      failed(options.createMemCpy(rewriter, loc, *buffer, *copy)))
    return failure();
  return copy;
}

/// Values that may share storage with `value` after bufferization: through
/// view-like tensor ops and through destination-passing ops, whose result
/// is written into their init in place.
static SetVector<Value> storageAliases(Value value) {
  SetVector<Value> aliases;
  SmallVector<Value> worklist{value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (!isa<TensorType>(v.getType()) || !aliases.insert(v))
      continue;
    if (Operation *def = v.getDefiningOp()) {
      if (auto view = dyn_cast<ViewLikeOpInterface>(def))
        worklist.push_back(view.getViewSource());
      if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp,
              tensor::ExtractSliceOp>(def))
        worklist.push_back(def->getOperand(0));
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(def))
        if (auto result = dyn_cast<OpResult>(v))
          worklist.push_back(dps.getTiedOpOperand(result)->get());
    }
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isa<ViewLikeOpInterface, tensor::ExpandShapeOp,
              tensor::CollapseShapeOp, tensor::CastOp, tensor::ExtractSliceOp>(
              user))
        llvm::append_range(worklist, user->getResults());
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(user))
        if (dps.isDpsInit(&use))
          worklist.push_back(dps.getTiedOpResult(&use));
    }
  }
  return aliases;
}

/// True if `use` may write the storage of the value it uses.
static bool mayWrite(OpOperand &use) {
  Operation *user = use.getOwner();
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(user))
    return dps.isDpsInit(&use);
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(user))
    return &use == &insert.getDestMutable();
  if (auto insert = dyn_cast<tensor::InsertOp>(user))
    return &use == &insert.getDestMutable();
  if (isa<ViewLikeOpInterface, tensor::ExpandShapeOp, tensor::CollapseShapeOp,
          tensor::CastOp, tensor::ExtractSliceOp>(user) ||
      isPure(user) || isa<WaitOp, CollectiveOpInterface>(user))
    return false;
  return true; // Unknown effects: assume the worst.
}

/// The value whose storage `value` is (part of): through view-like tensor
/// and memref ops, destination-passing results and the conversions between
/// tensors and buffers that ops bufferized earlier leave behind. Two values
/// with one root may share storage.
static Value storageRoot(Value value) {
  for (;;) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return value;
    if (auto toTensor = dyn_cast<bufferization::ToTensorOp>(def)) {
      value = toTensor.getBuffer();
    } else if (auto toBuffer = dyn_cast<bufferization::ToBufferOp>(def)) {
      value = toBuffer.getTensor();
    } else if (auto view = dyn_cast<ViewLikeOpInterface>(def)) {
      value = view.getViewSource();
    } else if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                   tensor::CastOp, tensor::ExtractSliceOp, memref::CastOp>(
                   def)) {
      value = def->getOperand(0);
    } else if (auto dps = dyn_cast<DestinationStyleOpInterface>(def);
               dps && isa<OpResult>(value) &&
               isa<TensorType>(value.getType())) {
      value = dps.getTiedOpOperand(cast<OpResult>(value))->get();
    } else {
      return value;
    }
  }
}

/// True if an op between `start` and its wait may write the storage of the
/// start's input while the transfer still reads it. One-Shot Bufferize
/// cannot see that hazard: for it the start's read is over once the op is.
/// Ops before the start may already be bufferized, so the input can be a
/// conversion of a buffer; the roots catch what the tensor aliases miss.
static bool windowMayOverwrite(Operation *start, Value input, Operation *wait) {
  SetVector<Value> aliases = storageAliases(input);
  Value root = storageRoot(input);
  for (Operation *op = start->getNextNode(); op && op != wait;
       op = op->getNextNode()) {
    WalkResult result = op->walk([&](Operation *nested) {
      for (OpOperand &use : nested->getOpOperands())
        if ((aliases.contains(use.get()) || storageRoot(use.get()) == root) &&
            mayWrite(use))
          return WalkResult::interrupt();
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return true;
  }
  return false;
}

static int64_t groupSizeOf(CollectiveOpInterface op) {
  shard::GridOp grid = lookupGrid(op, op.getGridAttr());
  return grid ? getGroupSize(grid, op.getAxes()) : ShapedType::kDynamic;
}

/// Checks what the xfer transfers need: static shapes and, for the
/// collectives that move blocks, blocks that are contiguous (the job of
/// braid-linearize-collectives).
static LogicalResult checkLowerable(CollectiveOpInterface op) {
  if (!op.getInput().getType().hasStaticShape() ||
      !op.getCollectiveResult().getType().hasStaticShape() ||
      ShapedType::isDynamic(groupSizeOf(op)))
    return op->emitError() << "cannot lower '" << op->getName()
                           << "' with dynamic shapes or group size";
  auto leadingOnly = [&](RankedTensorType type, int64_t dim) {
    for (int64_t i = 0; i < dim; ++i)
      if (type.getDimSize(i) != 1)
        return false;
    return true;
  };
  auto nonContiguous = [&]() {
    return op->emitError() << "cannot lower '" << op->getName()
                           << "': its blocks are not contiguous; run "
                              "braid-linearize-collectives first";
  };
  Operation *raw = op.getOperation();
  auto in = op.getInput().getType();
  auto out = op.getCollectiveResult().getType();
  if (auto g = dyn_cast<AllGatherOp>(raw); g && !leadingOnly(in, g.getDim()))
    return nonContiguous();
  if (auto g = dyn_cast<AllGatherStartOp>(raw);
      g && !leadingOnly(in, g.getDim()))
    return nonContiguous();
  if (auto s = dyn_cast<ReduceScatterOp>(raw);
      s && !leadingOnly(in, s.getDim()))
    return nonContiguous();
  if (auto s = dyn_cast<ReduceScatterStartOp>(raw);
      s && !leadingOnly(in, s.getDim()))
    return nonContiguous();
  auto a2aOk = [&](int64_t split, int64_t concat) {
    return split == concat && leadingOnly(in, split) &&
           leadingOnly(out, concat);
  };
  if (auto a = dyn_cast<AllToAllOp>(raw);
      a && !a2aOk(a.getSplitDim(), a.getConcatDim()))
    return nonContiguous();
  if (auto a = dyn_cast<AllToAllStartOp>(raw);
      a && !a2aOk(a.getSplitDim(), a.getConcatDim()))
    return nonContiguous();
  return success();
}

/// The step runtime messages and traces name the transfer by.
static int64_t stepOf(Operation *op) {
  if (auto step =
          op->getAttrOfType<IntegerAttr>(DistDialect::getStepAttrName()))
    return step.getInt();
  return 0;
}

/// Emits the transfers of collective `op` from `src` into `dst`; returns
/// their requests.
static SmallVector<Value> emitTransfers(RewriterBase &rewriter,
                                        CollectiveOpInterface op, Value src,
                                        Value dst) {
  Location loc = op.getLoc();
  FlatSymbolRefAttr grid = op.getGridAttr();
  DenseI16ArrayAttr axes = rewriter.getDenseI16ArrayAttr(op.getAxes());
  IntegerAttr step = rewriter.getI64IntegerAttr(stepOf(op));
  Type request = xfer::RequestType::get(rewriter.getContext());
  Operation *raw = op.getOperation();
  auto reduction = [&](Operation *o) {
    return o->getAttrOfType<ReductionKindAttr>("reduction");
  };
  if (isa<AllGatherOp, AllGatherStartOp>(raw))
    return {xfer::AllGatherOp::create(rewriter, loc, request, src, dst, grid,
                                      axes, step)};
  if (isa<ReduceScatterOp, ReduceScatterStartOp>(raw))
    return {xfer::ReduceScatterOp::create(rewriter, loc, request, src, dst,
                                          grid, axes, step, reduction(raw))};
  if (isa<AllReduceOp, AllReduceStartOp>(raw))
    return {xfer::AllReduceOp::create(rewriter, loc, request, src, dst, grid,
                                      axes, step, reduction(raw))};
  if (isa<AllToAllOp, AllToAllStartOp>(raw))
    return {xfer::AllToAllOp::create(rewriter, loc, request, src, dst, grid,
                                     axes, step)};
  if (isa<BroadcastOp, BroadcastStartOp>(raw))
    return {xfer::BroadcastOp::create(
        rewriter, loc, request, src, dst, grid, axes, step,
        raw->getAttrOfType<DenseI64ArrayAttr>("root"))};
  // A shift: send to +offset, receive from -offset.
  int64_t offset = raw->getAttrOfType<IntegerAttr>("offset").getInt();
  Value send = xfer::SendOp::create(rewriter, loc, request, src,
                                    rewriter.getI64IntegerAttr(offset), grid,
                                    axes, step);
  Value recv = xfer::RecvOp::create(rewriter, loc, request, dst,
                                    rewriter.getI64IntegerAttr(-offset), grid,
                                    axes, step);
  // braid-symmetric-transfers makes the pair one-sided.
  StringRef symmetric = DistDialect::getSymmetricAttrName();
  if (raw->hasAttr(symmetric))
    for (Value transfer : {send, recv})
      transfer.getDefiningOp()->setAttr(symmetric, rewriter.getUnitAttr());
  return {send, recv};
}

/// The transfers of `collective` from its input's buffer (a private copy
/// if `privateCopy`) into a new buffer for its result: that buffer and the
/// transfers' requests.
struct Started {
  Value dst;
  SmallVector<Value> requests;
};
FailureOr<Started> startCollective(CollectiveOpInterface collective,
                                   bool privateCopy, RewriterBase &rewriter,
                                   const BufferizationOptions &options,
                                   BufferizationState &state) {
  if (failed(checkLowerable(collective)))
    return failure();
  Location loc = collective->getLoc();
  FailureOr<Value> src = getContiguousBuffer(
      rewriter, loc, collective.getInput(), privateCopy, options, state);
  if (failed(src))
    return failure();
  auto resultType = collective.getCollectiveResult().getType();
  FailureOr<Value> dst = options.createAlloc(
      rewriter, loc,
      MemRefType::get(resultType.getShape(), resultType.getElementType()), {});
  if (failed(dst))
    return failure();
  return Started{*dst, emitTransfers(rewriter, collective, *src, *dst)};
}

//===----------------------------------------------------------------------===//
// External models
//===----------------------------------------------------------------------===//

/// The analysis answers of every model here. No op writes its operands. A
/// collective reads its input and gives a fresh buffer; a forwarding op
/// (wait, annotate) touches no memory: its result is its tensor operand's
/// buffer.
template <typename Concrete, typename OpTy, bool Forwards>
struct ModelBase
    : public BufferizableOpInterface::ExternalModel<Concrete, OpTy> {
  bool bufferizesToMemoryRead(Operation *, OpOperand &,
                              const AnalysisState &) const {
    return !Forwards;
  }
  bool bufferizesToMemoryWrite(Operation *, OpOperand &,
                               const AnalysisState &) const {
    return false;
  }
  AliasingValueList getAliasingValues(Operation *op, OpOperand &operand,
                                      const AnalysisState &) const {
    if (!Forwards || !isa<TensorType>(operand.get().getType()))
      return {};
    return {{op->getResult(0), BufferRelation::Equivalent}};
  }
  bool bufferizesToAllocation(Operation *, Value) const { return !Forwards; }
};
template <typename Concrete, typename OpTy>
using CollectiveModelBase = ModelBase<Concrete, OpTy, /*Forwards=*/false>;
template <typename Concrete, typename OpTy>
using ForwardingModelBase = ModelBase<Concrete, OpTy, /*Forwards=*/true>;

/// A collective, synchronous (its transfers waited in place) or the start
/// of an asynchronous one (its requests carried by the token to the wait).
template <typename OpTy>
struct CollectiveModel
    : public CollectiveModelBase<CollectiveModel<OpTy>, OpTy> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto collective = cast<CollectiveOpInterface>(op);
    Value token = collective.getAsyncToken();
    // A start's input may be overwritten while its transfers still read it.
    bool privateCopy = token && windowMayOverwrite(op, collective.getInput(),
                                                   *token.user_begin());
    FailureOr<Started> started =
        startCollective(collective, privateCopy, rewriter, options, state);
    if (failed(started))
      return failure();
    if (!token) {
      xfer::WaitOp::create(rewriter, op->getLoc(), started->requests);
      replaceOpWithBufferizedValues(rewriter, op, started->dst);
      return success();
    }
    // The token carries the requests to the wait, which bufferizes next.
    Value requests = UnrealizedConversionCastOp::create(
                         rewriter, op->getLoc(), TypeRange{token.getType()},
                         started->requests)
                         .getResult(0);
    replaceOpWithBufferizedValues(rewriter, op, {requests, started->dst});
    return success();
  }
};

/// `dist.wait` forwards its future's buffer once the transfers are waited.
struct WaitModel : public ForwardingModelBase<WaitModel, WaitOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    auto wait = cast<WaitOp>(op);
    auto cast = wait.getToken().getDefiningOp<UnrealizedConversionCastOp>();
    if (!cast)
      return op->emitError() << "the start of this wait was not bufferized";
    FailureOr<Value> buffer =
        getBuffer(rewriter, wait.getFuture(), options, state);
    if (failed(buffer))
      return failure();
    xfer::WaitOp::create(rewriter, op->getLoc(), cast.getInputs());
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    if (cast->use_empty())
      rewriter.eraseOp(cast);
    return success();
  }
};

/// `dist.annotate` is the identity: its result is its input's buffer.
struct AnnotateModel : public ForwardingModelBase<AnnotateModel, AnnotateOp> {
  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const BufferizationOptions &options,
                          BufferizationState &state) const {
    FailureOr<Value> buffer =
        getBuffer(rewriter, op->getOperand(0), options, state);
    if (failed(buffer))
      return failure();
    replaceOpWithBufferizedValues(rewriter, op, *buffer);
    return success();
  }
};

} // namespace

void braid::dist::registerBufferizableOpInterfaceExternalModels(
    DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, DistDialect *) {
    AllGatherOp::attachInterface<CollectiveModel<AllGatherOp>>(*context);
    ReduceScatterOp::attachInterface<CollectiveModel<ReduceScatterOp>>(
        *context);
    AllReduceOp::attachInterface<CollectiveModel<AllReduceOp>>(*context);
    AllToAllOp::attachInterface<CollectiveModel<AllToAllOp>>(*context);
    ShiftOp::attachInterface<CollectiveModel<ShiftOp>>(*context);
    BroadcastOp::attachInterface<CollectiveModel<BroadcastOp>>(*context);
    AllGatherStartOp::attachInterface<CollectiveModel<AllGatherStartOp>>(
        *context);
    ReduceScatterStartOp::attachInterface<
        CollectiveModel<ReduceScatterStartOp>>(*context);
    AllReduceStartOp::attachInterface<CollectiveModel<AllReduceStartOp>>(
        *context);
    AllToAllStartOp::attachInterface<CollectiveModel<AllToAllStartOp>>(
        *context);
    ShiftStartOp::attachInterface<CollectiveModel<ShiftStartOp>>(*context);
    BroadcastStartOp::attachInterface<CollectiveModel<BroadcastStartOp>>(
        *context);
    WaitOp::attachInterface<WaitModel>(*context);
    AnnotateOp::attachInterface<AnnotateModel>(*context);
    context->loadDialect<xfer::XferDialect, memref::MemRefDialect>();
  });
}
