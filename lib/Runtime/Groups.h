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

#include "braid/Runtime/braid_rt.h"

#include <mpi.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace braid::rt {

class CommThread;

/// A grid shape as the ABI passes it: `ndims` sizes, the rest 1.
struct GridShape {
  int ndims = 0;
  std::array<int64_t, BRAID_RT_MAX_GRID_RANK> sizes{};

  int64_t numRanks() const;
  /// "2x4".
  std::string str() const;
  /// Row-major coordinates of world rank `rank`.
  std::array<int64_t, BRAID_RT_MAX_GRID_RANK> coordinates(int64_t rank) const;
};

/// Validates an ABI grid shape against the world size; aborts with a message
/// naming `what` (the call) otherwise.
GridShape makeGridShape(const char *what, int64_t ndims, int64_t s0, int64_t s1,
                        int64_t s2, int64_t s3, int worldSize);

struct Group {
  GridShape shape;
  std::vector<int> axes; // In the listed order.
  MPI_Comm comm = MPI_COMM_NULL;
  int size = 1;
  int position = 0; // Equals this rank's rank in `comm`.
  /// World rank of every group position (for messages and traces).
  std::vector<int> worldRanks;

  /// "grid 2x4 axes [1, 0]".
  std::string str() const;
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
  // (ndims, sizes..., naxes, packed axes), normalized.
  using Key = std::array<int64_t, 3 + BRAID_RT_MAX_GRID_RANK>;

  mutable std::mutex mutex;
  std::map<Key, int64_t> handles;
  std::vector<std::unique_ptr<Group>> groups;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_GROUPS_H
