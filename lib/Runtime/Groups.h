//===- Groups.h - Grids, groups and their communicators ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A group is the set of ranks that differ only along some axes of a grid
// (braid_rt.h). Each one the program asks for becomes an MPI communicator in
// which a rank's MPI rank equals its group position, so that peers and
// collective blocks can be addressed by position directly.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_GROUPS_H
#define BRAID_RUNTIME_GROUPS_H

#include "Grid.h"

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace braid::rt {

class CommThread;

/// A group and its communicator, in which a rank's MPI rank equals its
/// group position.
struct Group : GroupLayout {
  MPI_Comm comm = MPI_COMM_NULL;
};

/// The groups this rank has asked for, created on first use and cached.
/// Handles are 1-based indices; groups live until finalize.
class GroupTable {
public:
  /// Returns the handle of the group, creating its communicator (collective
  /// over all ranks) on the communication thread the first time; `created`
  /// tells which happened.
  int64_t lookup(const GridShape &shape, int64_t naxes, int64_t axesPacked,
                 int worldRank, MPI_Comm world, CommThread &comm,
                 bool *created);

  /// The group of a handle; aborts naming `what` if it is not one.
  const Group &get(int64_t handle, const char *what) const;

  /// Frees every communicator; called once the communication thread is gone.
  void freeAll();

private:
  mutable std::mutex mutex;
  std::map<GroupKey, int64_t> handles;
  std::vector<std::unique_ptr<Group>> groups;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_GROUPS_H
