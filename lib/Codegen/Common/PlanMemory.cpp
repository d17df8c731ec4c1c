//===- PlanMemory.cpp - A static memory plan per function -------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-plan-memory: the intermediates of a function (its static
// `memref.alloc`s that never leave it) get offsets in one arena, computed
// here from their lifetimes; buffers whose lifetimes are disjoint share
// bytes. The arena is a module global, so it is allocated once per loaded
// artifact and rank (a process), and its pages are faulted in on the first
// call only: before, every call allocated and freed every intermediate,
// and a third of a layer's time went to the kernel's page-fault path.
//
// A buffer's lifetime runs from the first to the last operation of the
// function's body that uses it or a view of it (for a buffer allocated in
// an scf.for, the loop: each iteration reuses its bytes), or that uses what
// such an operation returned (a transfer's request reaches its wait: the
// transfer reads or writes the buffer until then). A buffer that a
// terminator, a call returning memrefs or any op returning a memref that is
// not a view of it could carry out of sight is left to the heap.
//
//===----------------------------------------------------------------------===//

#include "braid/Codegen/Passes.h"
#include "braid/Codegen/Utils.h"

#include "braid/Dialect/Xfer/IR/XferOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <climits>

namespace braid {
#define GEN_PASS_DEF_PLANMEMORY
#include "braid/Codegen/Passes.h.inc"
} // namespace braid

using namespace mlir;

namespace {

constexpr int64_t kAlignment = 64;

/// One planned buffer: the allocation, its size rounded up to the
/// alignment, its lifetime as positions in the function's body (inclusive)
/// and the offset the plan gives it.
struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes = 0;
  int64_t first = 0, last = 0;
  int64_t offset = -1;
};

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Widens `range` (positions in `body`, ops numbered by `position`) to
/// every use of `value`, of views of it and of every result of its users
/// that is not data read from it (a request, up to its wait). False if the
/// buffer may escape: through a terminator, or an op that returns a memref
/// which is not a view of it. Sets `returned` if the function returns it (or a
/// view).
bool widenToUses(Value value, Block &body,
                 const llvm::DenseMap<Operation *, int64_t> &position,
                 std::pair<int64_t, int64_t> &range,
                 llvm::SmallPtrSetImpl<Value> &seen, bool &returned) {
  if (!seen.insert(value).second)
    return true;
  for (Operation *user : value.getUsers()) {
    Operation *top = body.findAncestorOpInBlock(*user);
    returned |= isa<func::ReturnOp>(user);
    if (!top || braid::isTerminator(top) || braid::isTerminator(user))
      return false;
    int64_t at = position.lookup(top);
    range = {std::min(range.first, at), std::max(range.second, at)};
    auto view = dyn_cast<ViewLikeOpInterface>(user);
    bool viewOfValue = view && view.getViewSource() == value;
    for (Value result : user->getResults()) {
      Type type = result.getType();
      // Values read from the buffer carry no reference to it.
      if (type.isIntOrIndexOrFloat() || isa<VectorType, ComplexType>(type))
        continue;
      if (isa<BaseMemRefType>(type) && !viewOfValue)
        return false;
      if (!widenToUses(result, body, position, range, seen, returned))
        return false;
    }
  }
  return true;
}

/// Offsets for `buffers`, largest first, each at the lowest aligned offset
/// where it overlaps no placed buffer whose lifetime meets its own. Returns
/// the arena's size.
int64_t place(MutableArrayRef<Buffer> buffers) {
  SmallVector<Buffer *> order;
  for (Buffer &buffer : buffers)
    order.push_back(&buffer);
  llvm::stable_sort(order, [](const Buffer *a, const Buffer *b) {
    return a->bytes > b->bytes;
  });
  int64_t arena = 0;
  for (auto [index, buffer] : llvm::enumerate(order)) {
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (Buffer *other : ArrayRef(order).take_front(index))
      if (other->first <= buffer->last && buffer->first <= other->last)
        taken.push_back({other->offset, other->offset + other->bytes});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [begin, end] : taken) {
      if (offset + buffer->bytes <= begin)
        break;
      offset = std::max(offset, end);
    }
    buffer->offset = offset;
    arena = std::max(arena, offset + buffer->bytes);
  }
  return arena;
}

/// The allocations of `body` and of the bodies of `scf.for` loops in it
/// (nested in loops only): a loop's buffer that never leaves its iteration
/// (widenToUses refuses one that is yielded) lives while the loop runs,
/// its bytes reused by every iteration instead of allocated by each.
SmallVector<memref::AllocOp> plannable(Block &body) {
  SmallVector<memref::AllocOp> allocs;
  for (Operation &op : body) {
    if (auto alloc = dyn_cast<memref::AllocOp>(op))
      allocs.push_back(alloc);
    else if (auto loop = dyn_cast<scf::ForOp>(op))
      loop.getBody()->walk<WalkOrder::PreOrder>([&](Operation *nested) {
        if (auto alloc = dyn_cast<memref::AllocOp>(nested))
          allocs.push_back(alloc);
        // Only loops inside loops.
        return nested->getNumRegions() == 0 || isa<scf::ForOp>(nested)
                   ? WalkResult::advance()
                   : WalkResult::skip();
      });
  }
  return allocs;
}

struct PlanMemoryPass : public braid::impl::PlanMemoryBase<PlanMemoryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<Attribute> plans;
    // Collected first: each plan inserts its arena into the module.
    for (auto function : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (function.isExternal())
        continue;
      if (!function.getBody().hasOneBlock()) {
        function.emitRemark() << "no memory plan: the function has "
                              << function.getBlocks().size() << " blocks";
        continue;
      }
      DictionaryAttr plan = planFunction(function, symbols);
      if (plan)
        plans.push_back(plan);
    }
    if (!plans.empty())
      module->setAttr(braid::xfer::kMemoryPlanAttrName,
                      ArrayAttr::get(&getContext(), plans));
  }

  /// Plans `function`; returns what the report says of it, or null when it
  /// has no buffer to plan.
  DictionaryAttr planFunction(func::FuncOp function, SymbolTable &symbols) {
    Block &body = function.getBody().front();
    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [index, op] : llvm::enumerate(body))
      position[&op] = static_cast<int64_t>(index);
    SmallVector<Buffer> buffers;
    int64_t heapBytes = 0;
    for (memref::AllocOp alloc : plannable(body)) {
      MemRefType type = alloc.getType();
      std::optional<int64_t> bytes = braid::xfer::getStaticBytes(type);
      if (!bytes || !type.getLayout().isIdentity() || type.getMemorySpace() ||
          alloc.getAlignment().value_or(1) > kAlignment) {
        alloc.emitRemark() << "left out of the memory plan: "
                           << (!bytes ? "its size is not static"
                                      : "it has a layout, a memory space "
                                        "or an alignment above 64 bytes");
        ++numHeap;
        continue;
      }
      // The buffer holds nothing before its first use: its lifetime starts
      // there, not at the allocation (which bufferization may have put
      // early).
      std::pair<int64_t, int64_t> range{INT64_MAX, -1};
      llvm::SmallPtrSet<Value, 8> seen;
      bool returned = false;
      if (!widenToUses(alloc.getResult(), body, position, range, seen,
                       returned)) {
        // A result of the function is the caller's: no news.
        if (!returned)
          alloc.emitRemark()
              << "left out of the memory plan: the buffer may leave the "
                 "function (yielded, or held by an op's memref result)";
        heapBytes += *bytes;
        ++numHeap;
        continue;
      }
      if (range.second < 0)
        continue; // Never used: canonicalization's to remove.
      Buffer buffer;
      buffer.alloc = alloc;
      buffer.bytes = alignUp(std::max<int64_t>(*bytes, 1), kAlignment);
      buffer.first = range.first;
      buffer.last = range.second;
      buffers.push_back(buffer);
    }
    if (buffers.empty())
      return {};
    int64_t arenaBytes = place(buffers);
    int64_t bufferBytes = 0;
    for (const Buffer &buffer : buffers)
      bufferBytes += buffer.bytes;

    // The arena: an uninitialized global (zero pages until first written).
    MLIRContext *context = &getContext();
    OpBuilder builder(context);
    builder.setInsertionPoint(function);
    auto arenaType = MemRefType::get({arenaBytes}, builder.getI8Type());
    auto global = memref::GlobalOp::create(
        builder, function.getLoc(),
        ("__braid_arena_" + function.getSymName()).str(),
        builder.getStringAttr("private"), arenaType, builder.getUnitAttr(),
        /*constant=*/false, builder.getI64IntegerAttr(kAlignment));
    symbols.insert(global);
    builder.setInsertionPointToStart(&body);
    auto arena = memref::GetGlobalOp::create(builder, function.getLoc(),
                                             arenaType, global.getSymName());
    arena->setAttr(braid::xfer::kArenaAttrName, builder.getUnitAttr());
    int64_t index = 0;
    for (Buffer &buffer : buffers) {
      builder.setInsertionPoint(buffer.alloc);
      Location loc = buffer.alloc.getLoc();
      Value offset =
          arith::ConstantIndexOp::create(builder, loc, buffer.offset);
      auto view = memref::ViewOp::create(builder, loc, buffer.alloc.getType(),
                                         arena, offset, ValueRange{});
      // Distinct buffers stay distinct values: CSE would merge two views of
      // the same bytes (buffers with disjoint lifetimes), and the analyses
      // after this pass reason about a buffer's uses by its value.
      view->setAttr(braid::xfer::kPlannedBufferAttrName,
                    builder.getI64IntegerAttr(index++));
      buffer.alloc.getResult().replaceAllUsesWith(view);
      buffer.alloc.erase();
      ++numPlanned;
    }
    Builder b(context);
    return b.getDictionaryAttr({
        b.getNamedAttr("function", function.getSymNameAttr()),
        b.getNamedAttr("buffers", b.getI64IntegerAttr(
                                      static_cast<int64_t>(buffers.size()))),
        b.getNamedAttr("buffer_bytes", b.getI64IntegerAttr(bufferBytes)),
        b.getNamedAttr("arena_bytes", b.getI64IntegerAttr(arenaBytes)),
        b.getNamedAttr("heap_bytes", b.getI64IntegerAttr(heapBytes)),
    });
  }
};

} // namespace
