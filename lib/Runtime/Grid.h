//===- Grid.h - Grids and the layout of groups over them --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The backend-neutral half of groups (braid_rt.h): which ranks a group over
// some grid axes holds, and where this rank sits in it. Free of MPI, CUDA
// and NCCL, so that every backend computes positions the same way and only
// creates its own communicators from them.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_GRID_H
#define BRAID_RUNTIME_GRID_H

#include "braid/Runtime/braid_rt.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::rt {

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

/// (ndims, sizes..., naxes, packed axes), normalized: equal keys name the
/// same group.
using GroupKey = std::array<int64_t, 3 + BRAID_RT_MAX_GRID_RANK>;

/// One rank's view of a group.
struct GroupLayout {
  GridShape shape;
  std::vector<int> axes; // In the listed order.
  int size = 1;
  int position = 0;
  /// Row-major over the axes not in the group: equal for all members and
  /// different between the disjoint groups of one key.
  int64_t color = 0;
  /// World rank of every group position (for messages and traces).
  std::vector<int> worldRanks;
  GroupKey key{};

  /// "grid 2x4 axes [1, 0]".
  std::string str() const;
};

/// The layout of the group over the packed axes as seen from `worldRank`;
/// aborts on bad axes.
GroupLayout makeGroupLayout(const GridShape &shape, int64_t naxes,
                            int64_t axesPacked, int worldRank);

} // namespace braid::rt

#endif // BRAID_RUNTIME_GRID_H
