//===- Replication.cpp - Proving values replicated across ranks -*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Dialect/Dist/Transforms/Replication.h"
#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace braid::dist;

// Deep enough for DeepSeek-V3's group-limited routing (its weights are
// about a hundred ops from the tokens); each level is one small frame.
static constexpr unsigned kMaxDepth = 512;

static std::string describe(Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    os << "argument #" << arg.getArgNumber();
  } else {
    os << "the result of '" << value.getDefiningOp()->getName() << "'";
  }
  return text;
}

bool ReplicationAnalysis::isReplicated(Value value, FlatSymbolRefAttr grid,
                                       ArrayRef<int16_t> axes,
                                       std::string &reason) {
  for (int16_t axis : axes)
    if (!isReplicatedAlong(value, grid, axis, reason, 0))
      return false;
  return true;
}

/// The collectives whose result is the same on every rank of their group.
static bool replicatesAlong(Operation *op, FlatSymbolRefAttr grid,
                            int16_t axis) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!collective || collective.getGridAttr() != grid ||
      !isa<AllGatherOp, AllReduceOp, BroadcastOp>(op))
    return false;
  return llvm::is_contained(collective.getAxes(), axis);
}

bool ReplicationAnalysis::isReplicatedAlong(Value value, FlatSymbolRefAttr grid,
                                            int16_t axis, std::string &reason,
                                            unsigned depth) {
  auto key = std::make_pair(value, static_cast<int64_t>(axis));
  if (auto it = cache.find(key); it != cache.end()) {
    if (!it->second && reason.empty())
      reason = describe(value) + " is not known to be replicated";
    return it->second;
  }
  auto remember = [&](bool result) { return record(key, result); };
  if (depth > kMaxDepth) {
    reason = "the proof is too deep";
    return false;
  }

  // Function arguments: only a stated placement proves anything.
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto function =
        dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
    if (function && arg.getOwner()->isEntryBlock()) {
      if (auto placement = function.getArgAttrOfType<PlacementAttr>(
              arg.getArgNumber(), DistDialect::getPlacementAttrName()))
        if (placement.getGrid() == grid && placement.isReplicatedAlong(axis))
          return remember(true);
      if (function.isPrivate())
        return isArgumentReplicated(arg, grid, axis, reason, depth);
      reason = describe(value) +
               " has no placement 'replicate' along grid "
               "axis " +
               std::to_string(axis);
      return remember(false);
    }
    reason = describe(value) + " is a block argument of unknown origin";
    return remember(false);
  }

  Operation *op = value.getDefiningOp();
  if (matchPattern(value, m_Constant()))
    return remember(true);
  if (auto annotate = dyn_cast<AnnotateOp>(op)) {
    PlacementAttr placement = annotate.getPlacement();
    if (placement.getGrid() == grid && placement.isReplicatedAlong(axis))
      return remember(true);
    reason = describe(value) +
             " is annotated without 'replicate' along grid "
             "axis " +
             std::to_string(axis);
    return remember(false);
  }
  if (replicatesAlong(op, grid, axis))
    return remember(true);
  // Any collective of the grid over other axes (or its wait): ranks that
  // differ only along `axis` meet peers that differ only along it too, so
  // inputs alike along `axis` give results alike (a second layer's
  // routing reads the first layer's sum over the expert axis).
  CollectiveOpInterface across = dyn_cast<CollectiveOpInterface>(op);
  if (auto wait = dyn_cast<WaitOp>(op))
    across = wait.getStart();
  if (across && across.getGridAttr() == grid &&
      !llvm::is_contained(across.getAxes(), axis) &&
      (isa<WaitOp>(op) || across.getCollectiveResult() == value))
    return remember(
        isReplicatedAlong(across.getInput(), grid, axis, reason, depth + 1));
  if (isa<CallOpInterface>(op))
    return isCallResultReplicated(cast<OpResult>(value), grid, axis, reason,
                                  depth);
  // The same for the asynchronous forms, through their wait.
  if (auto wait = dyn_cast<WaitOp>(op))
    if (CollectiveOpInterface start = wait.getStart())
      if (isa<AllGatherStartOp, AllReduceStartOp, BroadcastStartOp>(
              start.getOperation()) &&
          start.getGridAttr() == grid &&
          llvm::is_contained(start.getAxes(), axis))
        return remember(true);
  // A rank's position along other axes is the same along this one (the
  // offset of the block of experts a rank holds on a 2-D grid).
  if (auto multi = dyn_cast<shard::ProcessMultiIndexOp>(op);
      multi && multi.getGridAttr() == grid) {
    ArrayRef<int16_t> axes = multi.getAxes();
    unsigned number = cast<OpResult>(value).getResultNumber();
    int64_t along = axes.empty() ? number : axes[number];
    if (along != axis)
      return remember(true);
    reason = describe(value) + " is this rank's position along grid axis " +
             std::to_string(axis);
    return remember(false);
  }
  // tensor.empty has no defined contents: it can only be an init that a
  // payload never reads, which the caller checks.
  if (isa<tensor::EmptyOp>(op))
    return remember(true);

  // A deterministic computation of replicated operands is replicated. Only
  // value-semantics dialects qualify: a process-index query (shard) is pure
  // yet differs across ranks.
  // Bounds assertions in a payload (torch-mlir's, around an index read)
  // stop a run or not; they change no value.
  auto pureButAssertions = [](Operation *op) {
    if (!isa<linalg::LinalgOp>(op) || op->getNumRegions() != 1)
      return false;
    return !op->getRegion(0)
                .walk([](Operation *nested) {
                  return isa<cf::AssertOp>(nested) || isPure(nested)
                             ? WalkResult::advance()
                             : WalkResult::interrupt();
                })
                .wasInterrupted();
  };
  bool valueSemantics =
      isa<arith::ArithDialect, math::MathDialect, linalg::LinalgDialect,
          tensor::TensorDialect>(op->getDialect()) &&
      (isPure(op) || pureButAssertions(op));
  if (!valueSemantics) {
    reason = describe(value) + " is computed by '" +
             op->getName().getStringRef().str() +
             "', which Braid does not analyse";
    return remember(false);
  }
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    // An init whose value the payload never reads does not matter.
    if (linalgOp && linalgOp.isDpsInit(&operand) &&
        !linalgOp.payloadUsesValueFromOperand(&operand))
      continue;
    std::string inner;
    if (!isReplicatedAlong(operand.get(), grid, axis, inner, depth + 1)) {
      reason = inner;
      return remember(false);
    }
  }
  // Payloads may capture values from above; those must be replicated too.
  bool capturesOk = true;
  op->walk([&](Operation *nested) {
    for (Value operand : nested->getOperands()) {
      if (!capturesOk ||
          op->isAncestor(operand.getParentRegion()->getParentOp()))
        continue;
      std::string inner;
      if (!isReplicatedAlong(operand, grid, axis, inner, depth + 1)) {
        reason = inner;
        capturesOk = false;
      }
    }
  });
  return remember(capturesOk);
}

bool ReplicationAnalysis::inductively(std::pair<Value, int64_t> key,
                                      function_ref<bool()> prove) {
  if (inProgress.contains(key))
    return true;
  inProgress.insert(key);
  size_t mark = cacheLog.size();
  bool result = prove();
  inProgress.erase(key);
  if (!result) {
    for (auto entry : ArrayRef(cacheLog).drop_front(mark))
      cache.erase(entry);
    cacheLog.truncate(mark);
  }
  return record(key, result);
}

bool ReplicationAnalysis::isArgumentReplicated(BlockArgument arg,
                                               FlatSymbolRefAttr grid,
                                               int16_t axis,
                                               std::string &reason,
                                               unsigned depth) {
  Operation *function = arg.getOwner()->getParentOp();
  auto [it, inserted] = calls.try_emplace(function);
  if (inserted) {
    Operation *scope =
        SymbolTable::getNearestSymbolTable(function->getParentOp());
    std::optional<SymbolTable::UseRange> uses;
    if (scope)
      uses = SymbolTable::getSymbolUses(function, scope);
    bool onlyCalled = uses.has_value();
    SmallVector<Operation *> found;
    unsigned numArgs = cast<FunctionOpInterface>(function).getNumArguments();
    for (const SymbolTable::SymbolUse &use :
         uses ? *uses : SymbolTable::UseRange({})) {
      auto call = dyn_cast<CallOpInterface>(use.getUser());
      onlyCalled &= call && call.getArgOperands().size() == numArgs;
      found.push_back(use.getUser());
    }
    if (onlyCalled)
      it->second = std::move(found);
  }
  ArrayRef<Operation *> callers = calls[function];
  if (callers.empty()) {
    reason = describe(arg) +
             " belongs to a function that is not only called, and has no "
             "placement 'replicate' along grid axis " +
             std::to_string(axis);
    return record({arg, axis}, false);
  }
  return inductively({arg, axis}, [&] {
    for (Operation *caller : callers) {
      Value operand =
          cast<CallOpInterface>(caller).getArgOperands()[arg.getArgNumber()];
      std::string inner;
      if (!isReplicatedAlong(operand, grid, axis, inner, depth + 1)) {
        reason = "argument #" + std::to_string(arg.getArgNumber()) +
                 " of a call: " + inner;
        return false;
      }
    }
    return true;
  });
}

bool ReplicationAnalysis::isCallResultReplicated(OpResult result,
                                                 FlatSymbolRefAttr grid,
                                                 int16_t axis,
                                                 std::string &reason,
                                                 unsigned depth) {
  auto call = cast<CallOpInterface>(result.getOwner());
  auto callee = dyn_cast_or_null<FunctionOpInterface>(call.resolveCallable());
  Region *body = callee ? &callee.getFunctionBody() : nullptr;
  if (!body || !body->hasOneBlock() ||
      body->front().getTerminator()->getNumOperands() !=
          call->getNumResults()) {
    reason = "the result of a call to a function Braid cannot see into";
    return record({result, axis}, false);
  }
  Value returned =
      body->front().getTerminator()->getOperand(result.getResultNumber());
  return inductively({result, axis}, [&] {
    std::string inner;
    if (isReplicatedAlong(returned, grid, axis, inner, depth + 1))
      return true;
    reason = "result #" + std::to_string(result.getResultNumber()) +
             " of a call: " + inner;
    return false;
  });
}
