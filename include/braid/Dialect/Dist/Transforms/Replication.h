//===- Replication.h - Proving values replicated across ranks ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A value is replicated along grid axes A when every group of ranks that
// differ only along A holds the same value. Transforms that move work across
// a collective rely on it (an elementwise op may run after a reduce-scatter
// on 1/n of the data only if its other operands are the same on all ranks of
// the group), and must not fire on what this analysis cannot prove.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_TRANSFORMS_REPLICATION_H
#define BRAID_DIALECT_DIST_TRANSFORMS_REPLICATION_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace braid::dist {

class ReplicationAnalysis {
public:
  /// True if `value` is provably replicated along every axis in `axes` of
  /// `grid`. Otherwise false, with `reason` saying what is unknown.
  bool isReplicated(mlir::Value value, mlir::FlatSymbolRefAttr grid,
                    llvm::ArrayRef<int16_t> axes, std::string &reason);

  /// Forgets what was proven: after IR changes, cached values may be gone
  /// (and their storage reused).
  void invalidate() {
    cache.clear();
    calls.clear();
  }

private:
  /// Replicated along the single axis `axis`.
  bool isReplicatedAlong(mlir::Value value, mlir::FlatSymbolRefAttr grid,
                         int16_t axis, std::string &reason, unsigned depth);

  /// Through calls: an argument of a private function is replicated when
  /// the operand of every call is, a call's result when the callee's
  /// returned value is.
  bool isArgumentReplicated(mlir::BlockArgument arg,
                            mlir::FlatSymbolRefAttr grid, int16_t axis,
                            std::string &reason, unsigned depth);
  bool isCallResultReplicated(mlir::OpResult result,
                              mlir::FlatSymbolRefAttr grid, int16_t axis,
                              std::string &reason, unsigned depth);

  /// Runs `prove` as the query `key`, which may reach itself again: there
  /// it is assumed to hold; if it fails, what was cached under the
  /// assumption is dropped (see inProgress).
  bool inductively(std::pair<mlir::Value, int64_t> key,
                   llvm::function_ref<bool()> prove);

  /// Caches `result` for `key` (logged, see inProgress) and returns it.
  bool record(std::pair<mlir::Value, int64_t> key, bool result) {
    cache[key] = result;
    cacheLog.push_back(key);
    return result;
  }

  llvm::DenseMap<std::pair<mlir::Value, int64_t>, bool> cache;
  /// The calls of each private function (empty: not only called, or not
  /// private).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<mlir::Operation *>> calls;
  /// Queries under way. One reached again is assumed to hold: every value
  /// a call reads was computed before the call, so the assumption is an
  /// induction over the calls in program order. The cache entries a query
  /// made under it are dropped if the query fails.
  llvm::DenseSet<std::pair<mlir::Value, int64_t>> inProgress;
  llvm::SmallVector<std::pair<mlir::Value, int64_t>> cacheLog;
};

} // namespace braid::dist

#endif // BRAID_DIALECT_DIST_TRANSFORMS_REPLICATION_H
