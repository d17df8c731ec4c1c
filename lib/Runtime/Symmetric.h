//===- Symmetric.h - Symmetric memory on MPI shared windows -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The cpu backend's symmetric buffers: one MPI shared-memory window per
// buffer over the group's ranks, so that a peer's copy is a plain pointer,
// puts are memcpy and signals are atomics on flags in the window.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_SYMMETRIC_H
#define BRAID_RUNTIME_SYMMETRIC_H

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace braid::rt {

class CommThread;
struct Group;

class SymmetricHeap {
public:
  /// A fresh buffer (site < 0) or the persistent one of `site`; collective
  /// over the group when it allocates. Aborts naming `call` when the group
  /// spans several shared-memory domains.
  void *allocate(const Group &group, int64_t bytes, int64_t site,
                 CommThread &comm, const char *call);
  /// Frees a fresh buffer (collective); aborts if `p` is not one of `group`.
  void free(const Group &group, void *p, CommThread &comm, const char *call);
  /// The address [p, p + bytes) has in the copy of group position
  /// `position`; aborts naming `call`, `what` and `step` unless the range
  /// lies in one buffer of `group`.
  void *peer(const Group &group, const void *p, int64_t bytes, int position,
             int64_t step, const char *call, const char *what) const;
  /// "flag 3 of symmetric buffer site 1 (grid 4 axes [0])", for messages.
  std::string describeFlag(const void *flag) const;
  /// The count of waits made so far on a flag, to advance; aborts naming
  /// `call` and `step` when the flag lies in no buffer.
  uint32_t &waitsOn(const void *flag, int64_t step, const char *call);
  /// Frees every window; called at finalize on the comm thread's behalf.
  void freeAll(CommThread &comm);

private:
  struct Buffer {
    const Group *group = nullptr;
    int64_t site = -1;
    int64_t bytes = 0;
    MPI_Win window = MPI_WIN_NULL;
    MPI_Comm node = MPI_COMM_NULL;
    char *local = nullptr;
    /// Base of every group position's copy.
    std::vector<char *> peers;
  };
  const Buffer *find(const void *p) const;

  /// In allocation order, which is the same on every rank (frees must be).
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::map<const char *, Buffer *> byAddress;
  std::map<std::tuple<const Group *, int64_t, int64_t>, Buffer *> bySite;
  std::unordered_map<const void *, uint32_t> waits;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_SYMMETRIC_H
