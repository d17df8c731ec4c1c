//===- Grid.cpp - Grids and the layout of groups over them ----------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Grid.h"

#include "Diagnostics.h"

#include <algorithm>

namespace braid::rt {

int64_t GridShape::numRanks() const {
  int64_t product = 1;
  for (int i = 0; i < ndims; ++i)
    product *= sizes[i];
  return product;
}

std::string GridShape::str() const {
  std::string text;
  for (int i = 0; i < ndims; ++i) {
    if (i)
      text += 'x';
    text += std::to_string(sizes[i]);
  }
  return text;
}

std::array<int64_t, BRAID_RT_MAX_GRID_RANK>
GridShape::coordinates(int64_t rank) const {
  std::array<int64_t, BRAID_RT_MAX_GRID_RANK> coords{};
  for (int i = ndims - 1; i >= 0; --i) {
    coords[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return coords;
}

GridShape makeGridShape(const char *what, int64_t ndims, int64_t s0, int64_t s1,
                        int64_t s2, int64_t s3, int worldSize) {
  if (ndims < 1 || ndims > BRAID_RT_MAX_GRID_RANK)
    fatalf("%s: a grid has 1 to %d axes, not %lld", what,
           BRAID_RT_MAX_GRID_RANK, static_cast<long long>(ndims));
  GridShape shape;
  shape.ndims = static_cast<int>(ndims);
  int64_t given[] = {s0, s1, s2, s3};
  // Sizes past ndims are documented as 1 but never read, so that a caller
  // passing garbage there still names the same grid.
  for (int i = 0; i < BRAID_RT_MAX_GRID_RANK; ++i)
    shape.sizes[i] = i < shape.ndims ? given[i] : 1;
  for (int i = 0; i < shape.ndims; ++i)
    if (shape.sizes[i] < 1)
      fatalf("%s: axis %d of grid %s has size %lld", what, i,
             shape.str().c_str(), static_cast<long long>(shape.sizes[i]));
  int64_t needed = 1;
  bool overflow = false;
  for (int i = 0; i < shape.ndims; ++i)
    overflow |= __builtin_mul_overflow(needed, shape.sizes[i], &needed);
  if (overflow || needed != worldSize)
    fatalf("program needs %s ranks (grid %s) but runs on %d",
           overflow ? "too many" : std::to_string(needed).c_str(),
           shape.str().c_str(), worldSize);
  return shape;
}

std::string GroupLayout::str() const {
  std::string text = "grid " + shape.str() + " axes [";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(axes[i]);
  }
  return text + "]";
}

GroupLayout makeGroupLayout(const GridShape &shape, int64_t naxes,
                            int64_t axesPacked, int worldRank) {
  if (naxes < 0 || naxes > shape.ndims)
    fatalf("braid_rt_group: %lld axes requested of grid %s",
           static_cast<long long>(naxes), shape.str().c_str());
  GroupLayout group;
  group.shape = shape;
  bool seen[BRAID_RT_MAX_GRID_RANK] = {};
  for (int64_t i = 0; i < naxes; ++i) {
    int axis =
        static_cast<int>((static_cast<uint64_t>(axesPacked) >> (8 * i)) & 0xFF);
    if (axis >= shape.ndims || seen[axis])
      fatalf("braid_rt_group: bad axes 0x%llx (%lld axes) for grid %s: axis "
             "%d is %s",
             static_cast<unsigned long long>(axesPacked),
             static_cast<long long>(naxes), shape.str().c_str(), axis,
             axis >= shape.ndims ? "out of range" : "repeated");
    seen[axis] = true;
    group.axes.push_back(axis);
  }

  GroupKey &key = group.key;
  key[0] = shape.ndims;
  std::copy(shape.sizes.begin(), shape.sizes.end(), key.begin() + 1);
  key[1 + BRAID_RT_MAX_GRID_RANK] = naxes;
  // Bytes past naxes are not part of the group.
  key[2 + BRAID_RT_MAX_GRID_RANK] = static_cast<int64_t>(
      static_cast<uint64_t>(axesPacked) & ((uint64_t(1) << (8 * naxes)) - 1));

  auto coords = shape.coordinates(worldRank);
  // Position: row-major over the listed axes in the listed order. Color:
  // row-major over the other axes, which all members share.
  int64_t position = 0, size = 1, color = 0;
  for (int axis : group.axes) {
    position = position * shape.sizes[axis] + coords[axis];
    size *= shape.sizes[axis];
  }
  for (int axis = 0; axis < shape.ndims; ++axis)
    if (!seen[axis])
      color = color * shape.sizes[axis] + coords[axis];
  group.size = static_cast<int>(size);
  group.position = static_cast<int>(position);
  group.color = color;

  group.worldRanks.resize(static_cast<size_t>(size));
  for (int64_t member = 0; member < size; ++member) {
    auto memberCoords = coords;
    int64_t rest = member;
    for (auto axis = group.axes.rbegin(); axis != group.axes.rend(); ++axis) {
      memberCoords[*axis] = rest % shape.sizes[*axis];
      rest /= shape.sizes[*axis];
    }
    int64_t rank = 0;
    for (int axis = 0; axis < shape.ndims; ++axis)
      rank = rank * shape.sizes[axis] + memberCoords[axis];
    group.worldRanks[static_cast<size_t>(member)] = static_cast<int>(rank);
  }
  return group;
}

} // namespace braid::rt
