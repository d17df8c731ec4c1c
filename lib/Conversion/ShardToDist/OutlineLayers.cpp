//===- OutlineLayers.cpp - Repeated layers become one function ------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A model of L identical layers reaches Braid as one function whose body
// repeats the same stretch of ops L times. braid-outline-layers turns that
// stretch into one function called L times, so that every later pass, and
// the code generator, handle one layer (docs/rationale/lowering.md,
// "Repeated layers become one function, called per layer").
//
// The search runs on the top-level ops of each single-block function:
//  1. each op gets a structural hash, operand identities left out;
//  2. candidate periods are the spacings at which hashes repeat, most
//     frequent first;
//  3. for a period P, a run of positions j with hash(j) == hash(j + P) makes
//     a periodic stretch; of the places it could be cut into segments, those
//     giving the most segments and the fewest values live across a cut come
//     first;
//  4. segments are checked against the first one op by op: equivalent ops
//     (regions included), and the same wiring (an operand defined in the
//     segment comes from the same op of it; one defined outside comes from
//     outside in every segment, consistently);
//  5. the best verified stretch (most ops outlined, then the shortest
//     period) becomes a private function and one call per segment.
//
//===----------------------------------------------------------------------===//

#include "braid/Conversion/Passes.h"
#include "braid/Dialect/Dist/IR/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"

namespace braid {
#define GEN_PASS_DEF_OUTLINELAYERS
#include "braid/Conversion/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// Candidate periods tried per function, most frequent spacing first.
constexpr unsigned kMaxPeriods = 8;
/// Cut positions verified per periodic stretch, best first.
constexpr unsigned kMaxPhases = 4;

llvm::hash_code structuralHash(Operation *op) {
  auto shallow = [](Operation *o) {
    return llvm::hash_combine(
        OperationEquivalence::computeHash(
            o, OperationEquivalence::ignoreHashValue,
            OperationEquivalence::ignoreHashValue,
            OperationEquivalence::IgnoreLocations),
        llvm::hash_combine_range(o->getOperandTypes().begin(),
                                 o->getOperandTypes().end()),
        o->getNumRegions());
  };
  llvm::hash_code hash = shallow(op);
  op->walk([&](Operation *nested) {
    if (nested != op)
      hash = llvm::hash_combine(hash, shallow(nested));
  });
  return hash;
}

/// An op whose result is the same wherever it is computed and which reads
/// nothing: cloned into the layer function rather than passed to it.
bool isCloneable(Operation *op) {
  return op && op->getNumOperands() == 0 && op->getNumRegions() == 0 &&
         op->getNumResults() == 1 && isPure(op);
}

/// A periodic stretch cut into `count` segments of `period` ops from
/// `start`, with what outlining it needs.
struct Plan {
  int64_t start = 0, period = 0, count = 0;
  /// Outside values the first segment reads, in order of first use; each
  /// either an argument or cloned in.
  SmallVector<Value> slots;
  SmallVector<bool> cloned;
  /// Per segment, the value each slot takes there.
  SmallVector<SmallVector<Value>> slotValues;
  /// (op offset, result number) of the segment values read after it.
  SmallVector<std::pair<int64_t, unsigned>> results;

  int64_t outlined() const { return period * count; }
};

class LayerFinder {
public:
  explicit LayerFinder(Block &body) : body(body) {
    for (Operation &op : body.without_terminator()) {
      position[&op] = ops.size();
      ops.push_back(&op);
      hashes.push_back(structuralHash(&op));
    }
  }

  std::optional<Plan> find() {
    std::optional<Plan> best;
    for (int64_t period : candidatePeriods()) {
      for (auto [first, last] : runs(period)) {
        std::optional<Plan> plan = bestCut(first, last + period, period);
        if (plan && (!best || plan->outlined() > best->outlined() ||
                     (plan->outlined() == best->outlined() &&
                      plan->period < best->period)))
          best = std::move(plan);
      }
    }
    return best;
  }

  /// The position of the top-level op `op` is, or is in; the terminator and
  /// ops created since (calls) count as after every op.
  int64_t positionOf(Operation *op) const {
    Operation *top = body.findAncestorOpInBlock(*op);
    auto it = position.find(top);
    return it == position.end() ? static_cast<int64_t>(ops.size()) : it->second;
  }

  Operation *at(int64_t index) const { return ops[index]; }

  /// Erases the op at `index`, which nothing reads any more.
  void erase(int64_t index) {
    position.erase(ops[index]);
    ops[index]->erase();
    ops[index] = nullptr;
  }

private:
  /// Spacings between consecutive equal hashes, most frequent first.
  SmallVector<int64_t> candidatePeriods() const {
    DenseMap<unsigned, int64_t> last;
    llvm::MapVector<int64_t, int64_t> counts;
    int64_t n = ops.size();
    for (int64_t i = 0; i < n; ++i) {
      unsigned key = static_cast<unsigned>(static_cast<size_t>(hashes[i]));
      auto [it, inserted] = last.try_emplace(key, i);
      if (!inserted) {
        int64_t gap = i - it->second;
        if (gap >= 2 && 2 * gap <= n)
          ++counts[gap];
        it->second = i;
      }
    }
    SmallVector<std::pair<int64_t, int64_t>> sorted(counts.begin(),
                                                    counts.end());
    llvm::stable_sort(sorted,
                      [](auto a, auto b) { return a.second > b.second; });
    SmallVector<int64_t> periods;
    for (auto [gap, count] : sorted) {
      if (periods.size() == kMaxPeriods)
        break;
      periods.push_back(gap);
    }
    return periods;
  }

  /// Maximal runs [first, last) of positions j with hash(j) == hash(j + P)
  /// that make at least two segments.
  SmallVector<std::pair<int64_t, int64_t>> runs(int64_t period) const {
    SmallVector<std::pair<int64_t, int64_t>> found;
    int64_t n = ops.size();
    int64_t j = 0;
    while (j + period < n) {
      if (hashes[j] != hashes[j + period]) {
        ++j;
        continue;
      }
      int64_t first = j;
      while (j + period < n && hashes[j] == hashes[j + period])
        ++j;
      if (j - first >= period)
        found.push_back({first, j});
    }
    return found;
  }

  /// Values defined by the ops of [start, start + period) read at or after
  /// its end: what a cut there keeps live.
  int64_t liveAcross(int64_t start, int64_t period) const {
    int64_t end = start + period, live = 0;
    for (int64_t i = start; i < end; ++i)
      for (Value result : ops[i]->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              return positionOf(user) >= end;
            }))
          ++live;
    return live;
  }

  /// The best verified cut of the periodic stretch [first, end).
  std::optional<Plan> bestCut(int64_t first, int64_t end, int64_t period) {
    struct Cut {
      int64_t start, count, live;
    };
    SmallVector<Cut> cuts;
    for (int64_t phase = 0; phase < period; ++phase) {
      int64_t count = (end - first - phase) / period;
      if (count < 2)
        break;
      cuts.push_back({first + phase, count, liveAcross(first + phase, period)});
    }
    llvm::stable_sort(cuts, [](const Cut &a, const Cut &b) {
      return std::make_pair(-a.count, a.live) <
             std::make_pair(-b.count, b.live);
    });
    std::optional<Plan> best;
    for (const Cut &cut : ArrayRef(cuts).take_front(kMaxPhases)) {
      std::optional<Plan> plan = verify(cut.start, period, cut.count);
      if (plan && (!best || plan->outlined() > best->outlined()))
        best = std::move(plan);
    }
    return best;
  }

  /// Values at body level that `op` and the ops nested in it read, in walk
  /// order.
  SmallVector<Value> captured(Operation *op) const {
    SmallVector<Value> values;
    op->walk<WalkOrder::PreOrder>([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (operand.getParentBlock() == &body)
          values.push_back(operand);
    });
    return values;
  }

  /// (position, result number) of a body-level value; position -1 for the
  /// function's arguments.
  std::pair<int64_t, unsigned> origin(Value value) const {
    if (auto result = dyn_cast<OpResult>(value))
      return {position.lookup(result.getOwner()), result.getResultNumber()};
    return {-1, cast<BlockArgument>(value).getArgNumber()};
  }

  /// The plan for the segments from `start` that agree with the first, if
  /// at least two do and they hold a collective.
  std::optional<Plan> verify(int64_t start, int64_t period, int64_t count) {
    bool collective = false;
    for (int64_t i = start; i < start + period && !collective; ++i)
      collective = ops[i]
                       ->walk([](braid::dist::CollectiveOpInterface) {
                         return WalkResult::interrupt();
                       })
                       .wasInterrupted();
    if (!collective)
      return std::nullopt;

    Plan plan;
    plan.start = start;
    plan.period = period;
    DenseMap<Value, unsigned> slotOf;
    SmallVector<SmallVector<Value>> firstCaptured;
    for (int64_t o = 0; o < period; ++o) {
      firstCaptured.push_back(captured(ops[start + o]));
      for (Value value : firstCaptured.back()) {
        auto [pos, number] = origin(value);
        if (pos >= start && pos < start + period)
          continue;
        if (slotOf.try_emplace(value, plan.slots.size()).second)
          plan.slots.push_back(value);
      }
    }
    plan.slotValues.push_back(plan.slots);

    for (int64_t t = 1; t < count; ++t) {
      int64_t base = start + t * period;
      SmallVector<Value> values(plan.slots.size());
      bool agrees = true;
      for (int64_t o = 0; o < period && agrees; ++o) {
        Operation *lhs = ops[start + o], *rhs = ops[base + o];
        DenseMap<Value, Value> nested;
        agrees = OperationEquivalence::isEquivalentTo(
            lhs, rhs,
            [&](Value l, Value r) {
              if (l.getParentBlock() == &body)
                return success(r.getParentBlock() == &body);
              return success(nested.lookup(l) == r);
            },
            [&](Value l, Value r) { nested[l] = r; },
            OperationEquivalence::IgnoreLocations);
        if (!agrees)
          break;
        SmallVector<Value> theirs = captured(rhs);
        ArrayRef<Value> ours = firstCaptured[o];
        if (ours.size() != theirs.size()) {
          agrees = false;
          break;
        }
        for (auto [a, b] : llvm::zip_equal(ours, theirs)) {
          auto [posA, numA] = origin(a);
          auto [posB, numB] = origin(b);
          bool insideA = posA >= start && posA < start + period;
          bool insideB = posB >= base && posB < base + period;
          if (insideA) {
            agrees = insideB && posB - base == posA - start && numA == numB;
          } else {
            Value &slot = values[slotOf.lookup(a)];
            agrees = !insideB && (!slot || slot == b);
            slot = b;
          }
          if (!agrees)
            break;
        }
      }
      if (!agrees)
        break;
      plan.slotValues.push_back(std::move(values));
    }
    plan.count = plan.slotValues.size();
    if (plan.count < 2)
      return std::nullopt;

    // Operand-free pure ops equivalent in every segment are cloned in.
    for (auto [slot, value] : llvm::enumerate(plan.slots)) {
      Operation *def = value.getDefiningOp();
      bool clone = isCloneable(def);
      for (int64_t t = 1; t < plan.count && clone; ++t) {
        Operation *other = plan.slotValues[t][slot].getDefiningOp();
        clone = other == def ||
                (isCloneable(other) &&
                 OperationEquivalence::isEquivalentTo(
                     def, other, OperationEquivalence::IgnoreLocations));
      }
      plan.cloned.push_back(clone);
    }

    // Results: what any segment defines and something after it reads.
    llvm::SetVector<std::pair<int64_t, unsigned>> results;
    for (int64_t t = 0; t < plan.count; ++t) {
      int64_t base = start + t * period;
      for (int64_t o = 0; o < period; ++o)
        for (OpResult result : ops[base + o]->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                int64_t at = positionOf(user);
                return at < base || at >= base + period;
              }))
            results.insert({o, result.getResultNumber()});
    }
    plan.results.assign(results.begin(), results.end());
    llvm::sort(plan.results);
    return plan;
  }

  Block &body;
  SmallVector<Operation *> ops;
  SmallVector<llvm::hash_code> hashes;
  DenseMap<Operation *, int64_t> position;
};

/// Builds the layer function of `plan` next to `function` and replaces each
/// segment with a call of it.
func::FuncOp outline(func::FuncOp function, const Plan &plan,
                     LayerFinder &finder, SymbolTable &symbols) {
  MLIRContext *context = function.getContext();
  SmallVector<Type> argTypes, resultTypes;
  for (auto [value, cloned] : llvm::zip_equal(plan.slots, plan.cloned))
    if (!cloned)
      argTypes.push_back(value.getType());
  for (auto [offset, number] : plan.results)
    resultTypes.push_back(
        finder.at(plan.start + offset)->getResult(number).getType());

  OpBuilder builder(context);
  builder.setInsertionPointAfter(function);
  Location loc = finder.at(plan.start)->getLoc();
  auto callee =
      func::FuncOp::create(builder, loc, (function.getName() + "_layer").str(),
                           FunctionType::get(context, argTypes, resultTypes));
  callee.setPrivate();
  symbols.insert(callee);
  Block *entry = callee.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  IRMapping mapping;
  DenseMap<Operation *, Operation *> clones;
  unsigned argument = 0;
  for (auto [value, cloned] : llvm::zip_equal(plan.slots, plan.cloned)) {
    if (!cloned) {
      mapping.map(value, entry->getArgument(argument++));
      continue;
    }
    Operation *def = value.getDefiningOp();
    Operation *&copy = clones[def];
    if (!copy)
      copy = builder.clone(*def);
    mapping.map(value, copy->getResult(0));
  }
  for (int64_t o = 0; o < plan.period; ++o)
    builder.clone(*finder.at(plan.start + o), mapping);
  SmallVector<Value> returned;
  for (auto [offset, number] : plan.results)
    returned.push_back(
        mapping.lookup(finder.at(plan.start + offset)->getResult(number)));
  func::ReturnOp::create(builder, loc, returned);

  // Last segment first: a segment's slot values may be results of the one
  // before, replaced by its call's results only once that one is outlined.
  for (int64_t t = plan.count - 1; t >= 0; --t) {
    int64_t base = plan.start + t * plan.period;
    Operation *first = finder.at(base);
    SmallVector<Value> operands;
    for (auto [slot, cloned] : llvm::enumerate(plan.cloned))
      if (!cloned)
        operands.push_back(plan.slotValues[t][slot]);
    builder.setInsertionPoint(first);
    auto call =
        func::CallOp::create(builder, first->getLoc(), callee, operands);
    for (auto [index, result] : llvm::enumerate(plan.results)) {
      Value old = finder.at(base + result.first)->getResult(result.second);
      old.replaceUsesWithIf(call.getResult(index), [&](OpOperand &use) {
        int64_t at = finder.positionOf(use.getOwner());
        return at < base || at >= base + plan.period;
      });
    }
    for (int64_t o = plan.period - 1; o >= 0; --o)
      finder.erase(base + o);
  }
  return callee;
}

struct OutlineLayersPass
    : public braid::impl::OutlineLayersBase<OutlineLayersPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> functions(module.getOps<func::FuncOp>());
    for (func::FuncOp function : functions) {
      if (function.isExternal() || !function.getBody().hasOneBlock())
        continue;
      // One stretch at a time: a program may repeat two kinds of layers.
      while (true) {
        LayerFinder finder(function.getBody().front());
        std::optional<Plan> plan = finder.find();
        if (!plan)
          break;
        outline(function, *plan, finder, symbols);
        ++numFunctions;
        numCalls += plan->count;
      }
    }
  }
};

} // namespace
