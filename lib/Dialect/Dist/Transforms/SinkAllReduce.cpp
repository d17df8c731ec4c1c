//===- SinkAllReduce.cpp - Sums reduced after the linear work on them -----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A sum all-reduce followed by work that is linear in the sum (products
// with values every rank of the group holds alike, sums along a dimension,
// views) commutes with that work: f(sum_r x_r) = sum_r f(x_r). Where the
// work shrinks the tensor (the combine of an MoE block: each expert's
// output weighed by its routing weight and summed over the experts), the
// all-reduce moves after it and sums fewer bytes; two all-reduces over
// different axes of one grid that then meet become one.
//
//===----------------------------------------------------------------------===//

#include "Schedule.h"

#include "braid/Dialect/Dist/IR/DistOps.h"
#include "braid/Dialect/Dist/Transforms/Passes.h"
#include "braid/Dialect/Dist/Transforms/Replication.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/InterleavedRange.h"

namespace braid::dist {
#define GEN_PASS_DEF_SINKALLREDUCE
#include "braid/Dialect/Dist/Transforms/Passes.h.inc"
} // namespace braid::dist

using namespace mlir;
using namespace braid::dist;

namespace {

/// A static tensor of integers or floats: the only kind the pass weighs.
bool isStaticNumeric(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() &&
         tensor.getElementType().isIntOrFloat();
}

/// Bytes of a static tensor type (bits rounded up per element).
int64_t bytesOf(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         ((tensor.getElementType().getIntOrFloatBitWidth() + 7) / 8);
}

unsigned bitsOf(Type type) {
  return cast<RankedTensorType>(type).getElementType().getIntOrFloatBitWidth();
}

/// Whether `value` is zero everywhere: a zero fill or a zero constant, or
/// an `scf.if` both of whose branches yield zeros (partitioning chooses a
/// partial sum's init by rank so).
bool isZeros(Value value) {
  if (auto choice = value.getDefiningOp<scf::IfOp>()) {
    unsigned number = cast<OpResult>(value).getResultNumber();
    return choice.elseBlock() &&
           isZeros(choice.thenYield().getOperand(number)) &&
           isZeros(choice.elseYield().getOperand(number));
  }
  if (auto fill = value.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.getInputs()[0], m_AnyZeroFloat()) ||
           matchPattern(fill.getInputs()[0], m_Zero());
  return matchPattern(value, m_AnyZeroFloat()) || matchPattern(value, m_Zero());
}

/// Whether the payload of `generic` computes its result linearly in the
/// block argument of input `operand`: its other inputs enter only as
/// factors (or divisors), the init only as the accumulator of a sum whose
/// initial value is zero. Casts between float types count as linear (the
/// all-reduce moved past them rounds where the work did before).
bool payloadIsLinear(linalg::GenericOp generic, unsigned operand) {
  Block &body = generic.getRegion().front();
  llvm::DenseSet<Value> linear;
  linear.insert(body.getArgument(operand));
  for (OpOperand &init : generic.getDpsInitsMutable()) {
    BlockArgument accumulator = generic.getMatchingBlockArgument(&init);
    if (!accumulator.use_empty()) {
      if (!isZeros(init.get()))
        return false;
      linear.insert(accumulator);
    }
  }
  auto isLinear = [&](Value v) { return linear.contains(v); };
  for (Operation &op : body.without_terminator()) {
    // An op with regions (an scf.if choosing between the summed value and
    // another) is linear in nothing it reads inside them.
    bool inside =
        op.getNumRegions() != 0 &&
        op.walk([&](Operation *nested) {
            return nested != &op &&
                           llvm::any_of(nested->getOperands(), isLinear)
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          }).wasInterrupted();
    if (inside)
      return false;
    unsigned count = llvm::count_if(op.getOperands(), isLinear);
    if (count == 0)
      continue;
    bool ok = false;
    if (isa<arith::MulFOp>(op))
      ok = count == 1;
    else if (auto div = dyn_cast<arith::DivFOp>(op))
      ok = count == 1 && isLinear(div.getLhs());
    else if (isa<arith::AddFOp, arith::SubFOp>(op))
      ok = count == 2;
    else if (isa<arith::NegFOp, arith::ExtFOp, arith::TruncFOp>(op))
      ok = true;
    if (!ok || op.getNumResults() != 1)
      return false;
    linear.insert(op.getResult(0));
  }
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return llvm::all_of(yield.getOperands(), isLinear);
}

class Sinker {
public:
  explicit Sinker(ReplicationAnalysis &replication)
      : replication(replication) {}

  /// Moves `reduce` down its chain of linear users, to where it sums the
  /// fewest bytes; true if it moved.
  bool sink(AllReduceOp reduce);

  /// all_reduce(all_reduce(x, A), B) -> all_reduce(x, A + B).
  void merge(AllReduceOp outer);

private:
  /// The op after `value` that is linear in it, with every other operand
  /// alike on the ranks of `reduce`'s group; null (with `why` set where
  /// the op would have been taken but for an operand) otherwise.
  Operation *linearUser(Value value, AllReduceOp reduce, std::string &why);

  ReplicationAnalysis &replication;
};

Operation *Sinker::linearUser(Value value, AllReduceOp reduce,
                              std::string &why) {
  if (!value.hasOneUse())
    return nullptr;
  OpOperand &use = *value.getUses().begin();
  Operation *user = use.getOwner();
  // In the all-reduce's block: moved into a region, the collective would
  // run once per iteration, or on the ranks that take a branch only.
  if (user->getNumResults() != 1 || user->getBlock() != reduce->getBlock() ||
      !isStaticNumeric(user->getResult(0).getType()))
    return nullptr;
  // Every other value the op reads must be the same on every rank of the
  // group: sum_r (x_r * w_r) is (sum_r x_r) * w only then, and a slice at
  // an offset that differs across ranks would sum different elements.
  SmallVector<Value> others;
  for (OpOperand &operand : user->getOpOperands())
    if (&operand != &use)
      others.push_back(operand.get());
  if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::CastOp>(
          user) ||
      (isa<tensor::ExtractSliceOp>(user) && use.getOperandNumber() == 0)) {
    // Views: the rest are the dynamic sizes and offsets.
  } else if (auto transpose = dyn_cast<linalg::TransposeOp>(user)) {
    if (!transpose.isDpsInput(&use))
      return nullptr;
  } else {
    auto generic = dyn_cast<linalg::GenericOp>(user);
    if (!generic || !generic.isDpsInput(&use) ||
        !payloadIsLinear(generic, use.getOperandNumber()))
      return nullptr;
    // Its inputs and the payload's captures; an init the payload reads is
    // zeros (payloadIsLinear), the same everywhere.
    others.clear();
    for (OpOperand *input : generic.getDpsInputOperands())
      if (input != &use)
        others.push_back(input->get());
    generic.getRegion().walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (!generic->isAncestor(operand.getParentRegion()->getParentOp()))
          others.push_back(operand);
    });
  }
  for (Value other : others) {
    std::string reason;
    if (!replication.isReplicated(other, reduce.getGridAttr(), reduce.getAxes(),
                                  reason)) {
      why = reason;
      return nullptr;
    }
  }
  return user;
}

bool Sinker::sink(AllReduceOp reduce) {
  if (reduce.getReduction() != ReductionKind::Sum ||
      !isStaticNumeric(reduce.getType()))
    return false;
  SmallVector<Operation *> chain;
  Value value = reduce.getResult();
  std::string why;
  while (Operation *user = linearUser(value, reduce, why)) {
    chain.push_back(user);
    value = user->getResult(0);
  }
  // Where the sum is fewest bytes; on a tie, the farthest such point when
  // another all-reduce of the grid follows it there (the two become one).
  // A narrower point counts only where the work also sums away elements:
  // a bf16 cast after an f32 sum (every bf16 tensor-parallel projection)
  // would halve the bytes by adding rounded partials in bf16, and the
  // schedules that fuse the sum with its contraction would no longer see
  // it; a combine over the experts in bf16 sums in bf16 as PyTorch does.
  int64_t best = bytesOf(reduce.getType());
  int64_t elements = reduce.getType().getNumElements();
  size_t at = 0;
  for (auto [i, op] : llvm::enumerate(chain)) {
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    if (bitsOf(type) < bitsOf(reduce.getType()) &&
        type.getNumElements() >= elements)
      continue;
    int64_t bytes = bytesOf(type);
    auto next = op->getResult(0).hasOneUse()
                    ? dyn_cast<AllReduceOp>(*op->getResult(0).user_begin())
                    : AllReduceOp();
    bool meets = next && next.getGridAttr() == reduce.getGridAttr() &&
                 next.getReduction() == ReductionKind::Sum;
    if (bytes < best || (bytes == best && meets)) {
      best = bytes;
      at = i + 1;
    }
  }
  // The chain stopped at linear work whose other operands differ across
  // the group (it might have shrunk the sum): say why.
  bool blocked = !why.empty() && at == chain.size();
  if (at == 0) {
    if (blocked)
      emitRemark(reduce.getLoc())
          << "all_reduce not moved past the linear work on its sum: " << why;
    return false;
  }
  Operation *last = chain[at - 1];
  int64_t before = bytesOf(reduce.getType());
  reduce.getResult().replaceAllUsesWith(reduce.getInput());
  OpBuilder builder(last->getContext());
  builder.setInsertionPointAfter(last);
  Value end = last->getResult(0);
  Operation *moved = builder.clone(*reduce.getOperation());
  moved->setOperand(0, end);
  moved->getResult(0).setType(end.getType());
  end.replaceAllUsesExcept(moved->getResult(0), moved);
  InFlightDiagnostic remark = emitRemark(reduce.getLoc());
  remark << "all_reduce moved after the " << at
         << " ops of linear work on its sum: sums "
         << schedule::formatBytes(static_cast<double>(best)) << " instead of "
         << schedule::formatBytes(static_cast<double>(before));
  if (blocked)
    remark << "; not further: " << why;
  reduce->erase();
  return true;
}

void Sinker::merge(AllReduceOp outer) {
  auto inner = outer.getInput().getDefiningOp<AllReduceOp>();
  // In one block: merged into a region, the inner sum's ranks would have
  // to take the outer's branch.
  if (!inner || !inner->hasOneUse() || inner->getBlock() != outer->getBlock() ||
      inner.getGridAttr() != outer.getGridAttr() ||
      inner.getReduction() != ReductionKind::Sum ||
      outer.getReduction() != ReductionKind::Sum)
    return;
  SmallVector<int16_t> axes(inner.getAxes());
  for (int16_t axis : outer.getAxes())
    if (llvm::is_contained(axes, axis))
      return;
  llvm::append_range(axes, outer.getAxes());
  llvm::sort(axes);
  emitRemark(outer.getLoc()) << "all_reduce merged with the all_reduce of "
                                "its input: one sum over grid axes "
                             << llvm::interleaved_array(axes);
  outer.setAxes(axes);
  outer.getInputMutable().assign(inner.getInput());
  inner->erase();
}

struct SinkAllReducePass
    : public braid::dist::impl::SinkAllReduceBase<SinkAllReducePass> {
  void runOnOperation() override {
    ReplicationAnalysis replication;
    Sinker sinker(replication);
    SmallVector<AllReduceOp> reduces;
    getOperation().walk([&](AllReduceOp op) { reduces.push_back(op); });
    for (AllReduceOp reduce : reduces)
      if (sinker.sink(reduce))
        replication.invalidate();
    // In program order, so that a merge erases only an all-reduce already
    // visited, and a third one meets the first two merged.
    reduces.clear();
    getOperation().walk([&](AllReduceOp op) { reduces.push_back(op); });
    for (AllReduceOp reduce : reduces)
      sinker.merge(reduce);
  }
};

} // namespace
