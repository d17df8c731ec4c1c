//===- Balance.cpp - What a rank computes for another's rows ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The balanced ring has each rank score another rank's rows against its
// own keys. It may only when everything the chain reads besides q and the
// keys is the same on every rank, or a function of the rank's position
// along the ring, which the helper computes again for the owner's.
//
//===----------------------------------------------------------------------===//

#include "RingAttention.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

using namespace mlir;
using namespace braid::dist;
using namespace braid::dist::overlap;
using namespace braid::dist::overlap::attention;

bool Origins::isPosition(Value value) const {
  auto result = dyn_cast<OpResult>(value);
  if (!result)
    return false;
  Operation *def = result.getOwner();
  if (auto multi = dyn_cast<shard::ProcessMultiIndexOp>(def)) {
    ArrayRef<int16_t> axes = multi.getAxes();
    int64_t axis = axes.empty() ? result.getResultNumber()
                                : axes[result.getResultNumber()];
    return multi.getGridAttr() == ring.grid && axis == ring.axis;
  }
  if (auto linear = dyn_cast<shard::ProcessLinearIndexOp>(def)) {
    auto grid =
        SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(def, ring.grid);
    return linear.getGridAttr() == ring.grid && grid && grid.getRank() == 1;
  }
  return false;
}

/// Whether a region of `op` holds a collective or a process index: pure to
/// MLIR, but an op the helper must not run again alone (a collective on
/// some ranks only never completes).
static bool communicates(Operation *op) {
  if (op->getNumRegions() == 0)
    return false;
  return op
      ->walk([&](Operation *inner) {
        return inner != op && isa_and_nonnull<DistDialect, shard::ShardDialect>(
                                  inner->getDialect())
                   ? WalkResult::interrupt()
                   : WalkResult::advance();
      })
      .wasInterrupted();
}

Origin Origins::of(Value value, int depth) {
  if (auto it = known.find(value); it != known.end())
    return it->second;
  Origin origin = Origin::Unknown;
  Operation *def = value.getDefiningOp();
  auto gather = dyn_cast_or_null<AllGatherOp>(def);
  if (Value operand = callArguments.lookup(value)) {
    origin = of(operand, depth + 1);
  } else if (!def || depth > 64) {
    origin = Origin::Unknown; // An argument: it may differ between ranks.
  } else if (isPosition(value)) {
    origin = Origin::Position;
  } else if (gather && gather.getGridAttr() == ring.grid &&
             llvm::is_contained(gather.getAxes(), ring.axis)) {
    // The same on every rank of its group, which holds the owner.
    origin = Origin::Invariant;
  } else if (auto call = dyn_cast<func::CallOp>(def)) {
    origin = called(call, cast<OpResult>(value), depth);
  } else if (auto multi = dyn_cast<shard::ProcessMultiIndexOp>(def)) {
    // The position along another axis, which the owner shares.
    origin =
        multi.getGridAttr() == ring.grid ? Origin::Invariant : Origin::Unknown;
  } else if (def->hasTrait<OpTrait::ConstantLike>()) {
    origin = Origin::Invariant;
  } else if (isa_and_nonnull<DistDialect, shard::ShardDialect>(
                 def->getDialect()) ||
             !isMemoryEffectFree(def) || communicates(def)) {
    origin = Origin::Unknown;
  } else {
    origin = Origin::Invariant;
    SetVector<Value> read(def->operand_begin(), def->operand_end());
    getUsedValuesDefinedAbove(def->getRegions(), read);
    for (Value v : read) {
      Origin o = of(v, depth + 1);
      if (o == Origin::Unknown) {
        origin = o;
        break;
      }
      if (o == Origin::Position)
        origin = o;
    }
  }
  known[value] = origin;
  return origin;
}

Value attention::returnedBy(func::CallOp call, OpResult result,
                            DenseMap<Value, Value> &arguments) {
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  if (!callee || callee.isExternal() || !callee.getBody().hasOneBlock())
    return {};
  for (auto [argument, operand] :
       llvm::zip(callee.getArguments(), call.getOperands()))
    if (arguments.try_emplace(argument, operand).first->second != operand)
      return {}; // Called with other operands elsewhere.
  return callee.getBody().front().getTerminator()->getOperand(
      result.getResultNumber());
}

Origin Origins::called(func::CallOp call, OpResult result, int depth) {
  Value returned = returnedBy(call, result, callArguments);
  if (!returned)
    return Origin::Unknown;
  Origin origin = of(returned, depth + 1);
  // The helper cannot call it again for the owner: it may communicate.
  return origin == Origin::Position ? Origin::Unknown : origin;
}

/// What each op of the attention's chain reads besides the chain itself
/// (the scores' product reads q and the keys; q travels with the keys when
/// a rank computes another's rows): operands and values captured in bodies.
static SmallVector<std::pair<Operation *, SetVector<Value>>>
chainReads(RingAttention &m) {
  SmallVector<std::pair<Operation *, SmallVector<unsigned>>> chain;
  SmallVector<unsigned> inputs;
  for (OpOperand *input : m.scores.getDpsInputOperands())
    inputs.push_back(input->getOperandNumber());
  chain.push_back({m.scores, inputs});
  for (const AttentionPrefix &p : m.scoreOps)
    chain.push_back({p.op, {p.operand}});
  chain.push_back({m.max, {0}});
  chain.push_back({m.exp, {m.expScores, m.expMax}});
  if (m.expThen)
    chain.push_back({m.expThen, {0}});
  chain.push_back({m.sum, {0}});
  chain.push_back({m.output, {m.probsOperand, m.valuesOperand}});
  SmallVector<std::pair<Operation *, SetVector<Value>>> reads;
  for (auto &[op, flows] : chain) {
    SetVector<Value> read;
    for (OpOperand &operand : op->getOpOperands())
      if (!llvm::is_contained(flows, operand.getOperandNumber()))
        read.insert(operand.get());
    getUsedValuesDefinedAbove(op->getRegions(), read);
    reads.push_back({op, std::move(read)});
  }
  return reads;
}

/// Why a rank cannot compute another rank's rows of `m` (empty when it
/// can); records the values the chain reads that depend on the position.
std::string attention::checkHelper(RingAttention &m) {
  Origins origins(m.ring);
  SetVector<Value> positional;
  for (auto &[op, read] : chainReads(m))
    for (Value value : read) {
      Origin origin = origins.of(value);
      if (origin == Origin::Unknown) {
        std::string what;
        if (auto arg = dyn_cast<BlockArgument>(value))
          what = "argument #" + std::to_string(arg.getArgNumber());
        else
          what = "the result of " + quoted(value.getDefiningOp());
        return quoted(op) + " reads " + what +
               ", which may differ between ranks (neither a constant nor "
               "computed from the rank's position)";
      }
      if (origin == Origin::Position)
        positional.insert(value);
    }
  m.positional.assign(positional.begin(), positional.end());
  return "";
}

/// `value` computed again with `owner` for the rank's position along the
/// ring (the values a rank that computes another rank's rows reads for
/// that rank); `map` collects what is computed.
Value attention::atPosition(RewriterBase &rewriter, Origins &origins,
                            Value value, Value owner, IRMapping &map) {
  if (Value known = map.lookupOrNull(value))
    return known;
  if (origins.of(value) != Origin::Position)
    return value;
  if (origins.isPosition(value)) {
    map.map(value, owner);
    return owner;
  }
  Operation *def = value.getDefiningOp();
  SetVector<Value> read(def->operand_begin(), def->operand_end());
  getUsedValuesDefinedAbove(def->getRegions(), read);
  for (Value v : read)
    atPosition(rewriter, origins, v, owner, map);
  rewriter.clone(*def, map);
  return map.lookup(value);
}
