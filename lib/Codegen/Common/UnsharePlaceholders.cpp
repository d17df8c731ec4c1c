//===- UnsharePlaceholders.cpp - One placeholder per use -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-unshare-placeholders, right before bufferization on both targets:
// each group of uses of a tensor.empty gets its own, so that One-Shot
// Bufferize does not analyze every layer's placeholder as one alias set
// (include/braid/Codegen/Passes.td says which uses form a group).
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace braid {
#define GEN_PASS_DEF_UNSHAREPLACEHOLDERS
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

/// For an insert_slice into `empty` of a value computed in place in an
/// extract_slice of it (a schedule's chunk: the slice, filled, accumulated
/// into through the destinations of its ops), that extract_slice.
Operation *extractInsertedInto(tensor::InsertSliceOp insert, Value empty) {
  Value value = insert.getSource();
  for (int hops = 0; hops < 16 && value; ++hops) {
    Operation *def = value.getDefiningOp();
    if (auto extract = dyn_cast_or_null<tensor::ExtractSliceOp>(def))
      return extract.getSource() == empty ? extract : nullptr;
    auto dps = dyn_cast_or_null<DestinationStyleOpInterface>(def);
    if (!dps)
      return nullptr;
    value = dps.getTiedOpOperand(cast<OpResult>(value))->get();
  }
  return nullptr;
}

struct UnsharePlaceholdersPass
    : public braid::impl::UnsharePlaceholdersBase<UnsharePlaceholdersPass> {
  // An empty stays shared among the uses that must see one buffer: those
  // inside one op of its block (a kernel's slices of it and its shared
  // output), and an extract_slice of it with the insert_slice of what was
  // computed in that slice back into it (a schedule's chunk computed in
  // place). Every other use gets its own empty. Fills stay shared: cloned
  // where nothing folds them they would be kernels of their own
  // (memory-bound fusion gives each fused use its own).
  void runOnOperation() override {
    OpBuilder builder(&getContext());
    SmallVector<tensor::EmptyOp> empties;
    getOperation()->walk(
        [&](tensor::EmptyOp empty) { empties.push_back(empty); });
    for (tensor::EmptyOp empty : empties) {
      Block *block = empty->getBlock();
      // Each group of uses by the op that names it: the top-level op the
      // use is in, or the extract_slice an insert_slice writes back.
      DenseMap<Operation *, Value> groups;
      bool kept = false;
      for (OpOperand &use : llvm::make_early_inc_range(empty->getUses())) {
        Operation *owner = block->findAncestorOpInBlock(*use.getOwner());
        if (!owner)
          continue;
        Operation *key = owner;
        if (auto insert = dyn_cast<tensor::InsertSliceOp>(owner);
            insert && insert.getDest() == use.get())
          if (Operation *extract = extractInsertedInto(insert, use.get()))
            key = extract;
        Value &clone = groups[key];
        if (!clone) {
          if (!kept) { // The first group keeps the original.
            kept = true;
            clone = empty.getResult();
          } else {
            builder.setInsertionPoint(key);
            clone = builder.clone(*empty)->getResult(0);
          }
        }
        use.set(clone);
      }
    }
  }
};

} // namespace
