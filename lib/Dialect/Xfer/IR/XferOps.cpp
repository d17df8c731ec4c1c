//===- XferOps.cpp - Xfer dialect -------------------------------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Xfer/IR/XferOps.h"
#include "braid/Codegen/Utils.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/InterleavedRange.h"

using namespace mlir;
using namespace braid;
using namespace braid::xfer;

#include "braid/Dialect/Xfer/IR/XferOpsDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "braid/Dialect/Xfer/IR/XferOpsTypes.cpp.inc"

void XferDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "braid/Dialect/Xfer/IR/XferOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "braid/Dialect/Xfer/IR/XferOpsTypes.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

static ParseResult parseReduction(OpAsmParser &parser,
                                  dist::ReductionKindAttr &reduction) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<dist::ReductionKind> kind =
      dist::symbolizeReductionKind(keyword);
  if (!kind)
    return parser.emitError(loc) << "unknown reduction '" << keyword << "'";
  reduction = dist::ReductionKindAttr::get(parser.getContext(), *kind);
  return success();
}

static void printReduction(OpAsmPrinter &printer, Operation *,
                           dist::ReductionKindAttr reduction) {
  printer << dist::stringifyReductionKind(reduction.getValue());
}

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

bool braid::xfer::isContiguous(MemRefType type) {
  if (type.getLayout().isIdentity())
    return true;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)))
    return false;
  int64_t expected = 1;
  for (int64_t i = type.getRank() - 1; i >= 0; --i) {
    if (type.getDimSize(i) == 1)
      continue;
    if (ShapedType::isDynamic(strides[i]) || strides[i] != expected)
      return false;
    if (ShapedType::isDynamic(type.getDimSize(i)))
      return i == 0;
    expected *= type.getDimSize(i);
  }
  return true;
}

static LogicalResult verifyBuffer(Operation *op, StringRef name, Value value) {
  auto type = cast<MemRefType>(value.getType());
  if (!isContiguous(type))
    return op->emitOpError() << name << " " << type
                             << " is not contiguous; copy it into a "
                                "contiguous buffer first";
  return success();
}

/// Each request is waited exactly once.
static LogicalResult verifyRequestUse(Operation *op, Value request) {
  if (request.use_empty())
    return op->emitOpError() << "request is never waited";
  if (!request.hasOneUse())
    return op->emitOpError() << "request is waited more than once";
  if (!isa<WaitOp>(*request.user_begin()))
    return op->emitOpError()
           << "request must be consumed by 'xfer.wait', not "
           << "by '" << request.user_begin()->getName() << "'";
  return success();
}

static LogicalResult verifyAxes(Operation *op, ArrayRef<int16_t> axes) {
  llvm::SmallDenseSet<int16_t> seen;
  for (int16_t axis : axes)
    if (axis < 0 || !seen.insert(axis).second)
      return op->emitOpError()
             << "grid axis " << axis << " is negative or listed twice";
  return success();
}

static int64_t numElements(Value buffer) {
  auto type = cast<MemRefType>(buffer.getType());
  return type.hasStaticShape() ? type.getNumElements() : ShapedType::kDynamic;
}

/// `big` must have `factor` times the elements of `small` (when static).
static LogicalResult verifyElementRatio(Operation *op, Value big, Value small,
                                        int64_t factor, StringRef what) {
  int64_t b = numElements(big), s = numElements(small);
  if (ShapedType::isDynamic(b) || ShapedType::isDynamic(s) ||
      ShapedType::isDynamic(factor))
    return success();
  if (b != s * factor)
    return op->emitOpError() << what << ": " << b << " elements, expected " << s
                             << " x " << factor << " = " << s * factor;
  return success();
}

template <typename OpTy> static LogicalResult verifyCollectiveBuffers(OpTy op) {
  if (failed(verifyAxes(op, op.getAxes())) ||
      failed(verifyBuffer(op, "source", op.getSource())) ||
      failed(verifyBuffer(op, "destination", op.getDest())))
    return failure();
  Type a = op.getSource().getType().getElementType();
  Type b = op.getDest().getType().getElementType();
  if (a != b)
    return op.emitOpError() << "destination element type " << b
                            << " differs from source element type " << a;
  return verifyRequestUse(op, op.getRequest());
}

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyPointToPoint(Operation *op, Value buffer,
                                        ArrayRef<int16_t> axes, Value request) {
  if (failed(verifyAxes(op, axes)) ||
      failed(verifyBuffer(op, "buffer", buffer)))
    return failure();
  if (axes.size() != 1)
    return op->emitOpError() << "addresses peers along exactly one grid axis, "
                             << "got " << axes.size();
  return verifyRequestUse(op, request);
}

LogicalResult SendOp::verify() {
  return verifyPointToPoint(*this, getBuffer(), getAxes(), getRequest());
}
LogicalResult RecvOp::verify() {
  return verifyPointToPoint(*this, getBuffer(), getAxes(), getRequest());
}

/// The grid exists and has the op's axes; nothing depends on the group size.
template <typename OpTy>
static LogicalResult verifyGridSymbol(OpTy op, SymbolTableCollection &table) {
  int64_t groupSize;
  return dist::verifyGridUse(op, op.getGridAttr(), op.getAxes(), table,
                             groupSize);
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}
LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}

LogicalResult AllGatherOp::verify() { return verifyCollectiveBuffers(*this); }
LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t group;
  if (failed(
          dist::verifyGridUse(*this, getGridAttr(), getAxes(), table, group)))
    return failure();
  return verifyElementRatio(*this, getDest(), getSource(), group,
                            "destination");
}

template <typename OpTy> static LogicalResult verifyReduction(OpTy op) {
  if (failed(verifyCollectiveBuffers(op)))
    return failure();
  Type element = op.getSource().getType().getElementType();
  if (!dist::isReductionLegalFor(op.getReduction(), element))
    return op.emitOpError()
           << "reduction '" << dist::stringifyReductionKind(op.getReduction())
           << "' is not defined for element type " << element;
  return success();
}

LogicalResult ReduceScatterOp::verify() { return verifyReduction(*this); }
LogicalResult ReduceScatterOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t group;
  if (failed(
          dist::verifyGridUse(*this, getGridAttr(), getAxes(), table, group)))
    return failure();
  return verifyElementRatio(*this, getSource(), getDest(), group, "source");
}

LogicalResult AllReduceOp::verify() { return verifyReduction(*this); }
LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t group;
  if (failed(
          dist::verifyGridUse(*this, getGridAttr(), getAxes(), table, group)))
    return failure();
  return verifyElementRatio(*this, getDest(), getSource(), 1, "destination");
}

LogicalResult AllToAllOp::verify() { return verifyCollectiveBuffers(*this); }
LogicalResult AllToAllOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t group;
  if (failed(
          dist::verifyGridUse(*this, getGridAttr(), getAxes(), table, group)) ||
      failed(
          verifyElementRatio(*this, getDest(), getSource(), 1, "destination")))
    return failure();
  int64_t elements = numElements(getSource());
  if (!ShapedType::isDynamic(elements) && !ShapedType::isDynamic(group) &&
      elements % group != 0)
    return emitOpError() << "source has " << elements
                         << " elements, not divisible by the group size "
                         << group;
  return success();
}

LogicalResult BroadcastOp::verify() {
  if (failed(verifyCollectiveBuffers(*this)))
    return failure();
  if (getRoot().size() != getAxes().size())
    return emitOpError() << "root has " << getRoot().size()
                         << " coordinates but the group spans "
                         << getAxes().size() << " axes";
  return success();
}
LogicalResult BroadcastOp::verifySymbolUses(SymbolTableCollection &table) {
  int64_t group;
  if (failed(
          dist::verifyGridUse(*this, getGridAttr(), getAxes(), table, group)))
    return failure();
  auto grid =
      table.lookupNearestSymbolFrom<shard::GridOp>(*this, getGridAttr());
  for (auto [axis, coordinate] : llvm::zip(getAxes(), getRoot())) {
    int64_t size = grid.getShape()[axis];
    if (coordinate < 0 || (!ShapedType::isDynamic(size) && coordinate >= size))
      return emitOpError() << "root coordinate " << coordinate
                           << " is out of range for grid axis " << axis;
  }
  return verifyElementRatio(*this, getDest(), getSource(), 1, "destination");
}

//===----------------------------------------------------------------------===//
// Symmetric memory
//===----------------------------------------------------------------------===//

void braid::xfer::setTraceEvent(Operation *call, StringRef name, int64_t bytes,
                                int64_t flops) {
  Builder b(call->getContext());
  call->setAttr(kTraceEventAttrName,
                b.getDictionaryAttr(
                    {b.getNamedAttr("name", b.getStringAttr(name)),
                     b.getNamedAttr("bytes", b.getI64IntegerAttr(bytes)),
                     b.getNamedAttr("flops", b.getI64IntegerAttr(flops))}));
}

std::optional<int64_t> braid::xfer::getStaticBytes(MemRefType type) {
  Type element = type.getElementType();
  if (!type.hasStaticShape() || !element.isIntOrIndexOrFloat())
    return std::nullopt;
  int64_t bits = element.isIndex() ? 64 : element.getIntOrFloatBitWidth();
  return type.getNumElements() * ((bits + 7) / 8);
}

std::optional<std::pair<int64_t, int64_t>>
braid::xfer::getArenaBytes(Value buffer) {
  auto view = buffer.getDefiningOp<memref::ViewOp>();
  if (!view || !view.getSizes().empty())
    return std::nullopt;
  Operation *arena = view.getSource().getDefiningOp();
  APInt offset;
  if (!arena || !arena->hasAttr(kArenaAttrName) ||
      !matchPattern(view.getByteShift(), m_ConstantInt(&offset)))
    return std::nullopt;
  std::optional<int64_t> bytes = getStaticBytes(view.getType());
  if (!bytes)
    return std::nullopt;
  int64_t begin = offset.getSExtValue();
  return std::make_pair(begin, begin + *bytes);
}

bool braid::xfer::arenaBytesOverlap(Value a, Value b) {
  auto x = getArenaBytes(a), y = getArenaBytes(b);
  return x && y &&
         a.getDefiningOp()->getOperand(0) == b.getDefiningOp()->getOperand(0) &&
         x->first < y->second && y->first < x->second;
}

Value braid::xfer::getRootBuffer(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (getArenaBytes(buffer))
      break;
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      buffer = view.getViewSource();
    else if (isa<memref::CastOp>(def))
      buffer = def->getOperand(0);
    else
      break;
  }
  return buffer;
}

SymmetricAllocOp braid::xfer::getSymmetricAlloc(Value buffer) {
  return getRootBuffer(buffer).getDefiningOp<SymmetricAllocOp>();
}

/// `buffer` must be (a view of) a symmetric buffer allocated over a group
/// that holds the peers along `axes` of `grid`.
static LogicalResult verifySymmetricOperand(Operation *op, StringRef name,
                                            Value buffer,
                                            FlatSymbolRefAttr grid,
                                            ArrayRef<int16_t> axes) {
  SymmetricAllocOp alloc = getSymmetricAlloc(buffer);
  if (!alloc)
    return op->emitOpError()
           << name << " must be a symmetric buffer (from "
           << "'xfer.symmetric_alloc', possibly through views)";
  if (!grid)
    return success();
  if (alloc.getGrid() != grid.getValue())
    return op->emitOpError()
           << "addresses peers on grid " << grid << ", but its " << name
           << " is symmetric over grid @" << alloc.getGrid();
  for (int16_t axis : axes)
    if (!llvm::is_contained(alloc.getAxes(), axis))
      return op->emitOpError()
             << "addresses peers along grid axis " << axis << ", but its "
             << name << " is symmetric over axes ["
             << llvm::interleaved(alloc.getAxes()) << "] only";
  return success();
}

static LogicalResult verifyPeerAxes(Operation *op, ArrayRef<int16_t> axes) {
  if (failed(verifyAxes(op, axes)))
    return failure();
  if (axes.size() != 1)
    return op->emitOpError() << "addresses peers along exactly one grid axis, "
                             << "got " << axes.size();
  return success();
}

LogicalResult SymmetricAllocOp::verify() {
  if (failed(verifyAxes(*this, getAxes())))
    return failure();
  if (!getBuffer().getType().getLayout().isIdentity())
    return emitOpError() << "allocates row-major buffers with the identity "
                            "layout, not "
                         << getBuffer().getType();
  if (static_cast<int64_t>(getSite()) < 0)
    return emitOpError() << "site " << static_cast<int64_t>(getSite())
                         << " is negative";
  return success();
}
LogicalResult SymmetricAllocOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}

LogicalResult PeerViewOp::verify() {
  if (failed(verifyPeerAxes(*this, getAxes())))
    return failure();
  if (!getBuffer().getDefiningOp<SymmetricAllocOp>())
    return emitOpError() << "views a peer's copy of a buffer from "
                            "'xfer.symmetric_alloc'; take subviews of the "
                            "peer view instead of a peer view of a subview";
  return verifySymmetricOperand(*this, "buffer", getBuffer(), getGridAttr(),
                                getAxes());
}
LogicalResult PeerViewOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}

LogicalResult PutOp::verify() {
  if (failed(verifyPeerAxes(*this, getAxes())) ||
      failed(verifyBuffer(*this, "source", getSource())) ||
      failed(verifyBuffer(*this, "destination", getDest())) ||
      failed(verifySymmetricOperand(*this, "destination", getDest(),
                                    getGridAttr(), getAxes())))
    return failure();
  if (getSource().getType().getElementType() !=
      getDest().getType().getElementType())
    return emitOpError() << "destination element type "
                         << getDest().getType().getElementType()
                         << " differs from source element type "
                         << getSource().getType().getElementType();
  if (failed(
          verifyElementRatio(*this, getDest(), getSource(), 1, "destination")))
    return failure();
  if (static_cast<bool>(getFlags()) != static_cast<bool>(getIndex()))
    return emitOpError() << "a signal needs both a flag buffer and an index";
  if (getFlags() &&
      failed(verifySymmetricOperand(*this, "flag buffer", getFlags(),
                                    getGridAttr(), getAxes())))
    return failure();
  return verifyRequestUse(*this, getRequest());
}
LogicalResult PutOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}

/// A raise (xfer.signal, xfer.kernel_signal) adds a positive amount, and
/// exactly 1 where it announces a delivery into a data buffer.
static LogicalResult verifyRaise(Operation *op, int64_t add, bool announces) {
  if (add < 1)
    return op->emitOpError()
           << "raises flags by a positive amount, not " << add;
  if (announces && add != 1)
    return op->emitOpError()
           << "announces one delivery into its data buffer, so it raises its "
              "flag by 1, not "
           << add;
  return success();
}

LogicalResult SignalOp::verify() {
  if (failed(verifyPeerAxes(*this, getAxes())) ||
      failed(verifyRaise(*this, static_cast<int64_t>(getAdd()),
                         static_cast<bool>(getData()))))
    return failure();
  if (failed(verifySymmetricOperand(*this, "flag buffer", getFlags(),
                                    getGridAttr(), getAxes())))
    return failure();
  if (!getData())
    return success();
  return verifySymmetricOperand(*this, "data buffer", getData(), getGridAttr(),
                                getAxes());
}
LogicalResult SignalOp::verifySymbolUses(SymbolTableCollection &table) {
  return verifyGridSymbol(*this, table);
}

/// Whether two flag indices may name the same flag.
static bool mayBeSameIndex(Value a, Value b) {
  if (a == b)
    return true;
  std::optional<int64_t> x = getConstantIntValue(a), y = getConstantIntValue(b);
  return !x || !y || *x == *y;
}

/// A counted wait (xfer.signal_wait, xfer.flag_epoch) on a flag of a
/// symmetric buffer, with a slack that is not negative.
static LogicalResult verifyCountedWait(Operation *op, int64_t slack,
                                       Value flags) {
  if (slack < 0)
    return op->emitOpError() << "slack " << slack << " is negative";
  return verifySymmetricOperand(op, "flag buffer", flags, {}, {});
}

LogicalResult SignalWaitOp::verify() {
  if (failed(verifyCountedWait(*this, static_cast<int64_t>(getSlack()),
                               getFlags())))
    return failure();
  // A wait nothing can satisfy would hang until the timeout; the ops that
  // raise a flag of this buffer are among the users of its allocation and
  // of the views of it.
  if (getSlack() > 0)
    return success();
  SymmetricAllocOp alloc = getSymmetricAlloc(getFlags());
  SmallVector<Value> worklist{alloc.getBuffer()};
  while (!worklist.empty()) {
    Value buffer = worklist.pop_back_val();
    for (Operation *user : buffer.getUsers()) {
      if (auto put = dyn_cast<PutOp>(user);
          put && put.getFlags() == buffer &&
          mayBeSameIndex(put.getIndex(), getIndex()))
        return success();
      if (auto signal = dyn_cast<SignalOp>(user);
          signal && signal.getFlags() == buffer &&
          mayBeSameIndex(signal.getIndex(), getIndex()))
        return success();
      // A kernel raises it through the peer's view (braid-kernel-signals).
      if (auto peer = dyn_cast<PeerViewOp>(user))
        for (Operation *raiser : peer.getView().getUsers())
          if (auto signal = dyn_cast<KernelSignalOp>(raiser);
              signal && mayBeSameIndex(signal.getIndex(), getIndex()))
            return success();
      if (isa<ViewLikeOpInterface, memref::CastOp>(user) &&
          user->getNumResults() == 1)
        worklist.push_back(user->getResult(0));
    }
  }
  return emitOpError() << "waits on a flag that no 'xfer.put' or "
                          "'xfer.signal' of the program raises";
}

LogicalResult FlagEpochOp::verify() {
  return verifyCountedWait(*this, static_cast<int64_t>(getSlack()), getFlags());
}

/// Kernel flag ops live in the body of a fused kernel (waits also in a
/// case of the switch over a kernel's GEMM segments, braid-kernel-signals).
static LogicalResult verifyInFusedKernel(Operation *op,
                                         bool inSegment = false) {
  Operation *parent = op->getParentOp();
  if (inSegment && parent &&
      parent->getName().getStringRef() == "scf.index_switch")
    parent = parent->getParentOp();
  if (!parent || parent->getName().getStringRef() != "scf.forall" ||
      !parent->hasAttr("braid.kernel"))
    return op->emitOpError()
           << "must be in the body of a fused kernel (an 'scf.forall' "
              "marked 'braid.kernel')";
  return success();
}

// The kernel ops outlive the lowering of symmetric allocations and peer
// views to runtime calls (they are lowered with their kernel), so where
// their buffers come from is checked only while those ops are there (the
// buffer is an xfer or memref op's, or an argument).
static bool fromXferOp(Value buffer) {
  Operation *def = getRootBuffer(buffer).getDefiningOp();
  return !def || isa<XferDialect, memref::MemRefDialect>(def->getDialect());
}

LogicalResult KernelWaitOp::verify() {
  if (failed(verifyInFusedKernel(*this, /*inSegment=*/true)))
    return failure();
  if (!fromXferOp(getFlags()))
    return success();
  return verifySymmetricOperand(*this, "flag buffer", getFlags(), {}, {});
}

LogicalResult KernelSignalOp::verify() {
  if (failed(verifyInFusedKernel(*this, /*inSegment=*/true)))
    return failure();
  Operation *next = getOperation()->getNextNode();
  while (isa_and_nonnull<KernelSignalOp>(next))
    next = next->getNextNode();
  if (!next || !braid::isTerminator(next))
    return emitOpError() << "must be among the last ops of its kernel's body, "
                            "or of its GEMM segment's case (only other raises "
                            "after it): the raise follows every access of the "
                            "tile";
  if (failed(verifyRaise(*this, static_cast<int64_t>(getAdd()),
                         static_cast<bool>(getData()))))
    return failure();
  if (fromXferOp(getFlags()) &&
      !getRootBuffer(getFlags()).getDefiningOp<PeerViewOp>())
    return emitOpError() << "raises a peer's flag: its flag buffer must be an "
                            "'xfer.peer_view' of a symmetric buffer";
  if (fromXferOp(getArrivals()) &&
      failed(verifySymmetricOperand(*this, "arrival buffer", getArrivals(), {},
                                    {})))
    return failure();
  if (getData() && fromXferOp(getData()))
    return verifySymmetricOperand(*this, "data buffer", getData(), {}, {});
  return success();
}

LogicalResult WaitOp::verify() {
  llvm::SmallPtrSet<Value, 8> seen;
  for (Value request : getRequests())
    if (!seen.insert(request).second)
      return emitOpError() << "waits for the same request twice";
  return success();
}

#define GET_OP_CLASSES
#include "braid/Dialect/Xfer/IR/XferOps.cpp.inc"
