//===- Groups.cpp - Grids, groups and their communicators -----------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Groups.h"

#include "CommThread.h"
#include "Diagnostics.h"

namespace braid::rt {

int64_t GroupTable::lookup(const GridShape &shape, int64_t naxes,
                           int64_t axesPacked, int worldRank, MPI_Comm world,
                           CommThread &comm, bool *created) {
  *created = false;
  GroupLayout layout = makeGroupLayout(shape, naxes, axesPacked, worldRank);

  std::lock_guard<std::mutex> lock(mutex);
  auto found = handles.find(layout.key);
  if (found != handles.end())
    return found->second;

  auto group = std::make_unique<Group>();
  static_cast<GroupLayout &>(*group) = std::move(layout);
  int64_t color = group->color, position = group->position;

  // MPI_Comm_split is collective over the world: every rank creates the
  // same groups in the same order (the program is SPMD), so creating them on
  // first use agrees across ranks. The timeout of runSync catches a program
  // where that does not hold.
  Group *raw = group.get();
  std::string description = raw->str();
  comm.runSync(
      formatString("the creation of group %s (collective over all ranks)",
                   description.c_str()),
      [&] {
        std::string context =
            formatString("braid_rt_group (%s)", description.c_str());
        checkMPI(MPI_Comm_split(world, static_cast<int>(color),
                                static_cast<int>(position), &raw->comm),
                 "MPI_Comm_split", context);
        checkMPI(MPI_Comm_set_errhandler(raw->comm, MPI_ERRORS_RETURN),
                 "MPI_Comm_set_errhandler", context);
        int commRank = -1, commSize = -1;
        checkMPI(MPI_Comm_rank(raw->comm, &commRank), "MPI_Comm_rank", context);
        checkMPI(MPI_Comm_size(raw->comm, &commSize), "MPI_Comm_size", context);
        // Point-to-point tags are peer offsets mod the group size.
        int *tagUpperBound = nullptr, found = 0;
        checkMPI(
            MPI_Comm_get_attr(raw->comm, MPI_TAG_UB, &tagUpperBound, &found),
            "MPI_Comm_get_attr", context);
        if (found && *tagUpperBound < raw->size - 1)
          fatalf("%s: a group of %d ranks needs message tags up to %d, but "
                 "this MPI allows only up to %d",
                 context.c_str(), raw->size, raw->size - 1, *tagUpperBound);
        if (commRank != raw->position || commSize != raw->size)
          fatalf("%s: MPI_Comm_split made rank %d of %d, expected position "
                 "%d of %d (do all ranks use the same grid?)",
                 context.c_str(), commRank, commSize, raw->position, raw->size);
      });

  groups.push_back(std::move(group));
  int64_t handle = static_cast<int64_t>(groups.size());
  handles.emplace(raw->key, handle);
  *created = true;
  return handle;
}

const Group &GroupTable::get(int64_t handle, const char *what) const {
  std::lock_guard<std::mutex> lock(mutex);
  if (handle < 1 || handle > static_cast<int64_t>(groups.size()))
    fatalf("%s: %lld is not a group handle (from braid_rt_group)", what,
           static_cast<long long>(handle));
  return *groups[static_cast<size_t>(handle - 1)];
}

void GroupTable::freeAll() {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto &group : groups)
    if (group->comm != MPI_COMM_NULL)
      checkMPI(MPI_Comm_free(&group->comm), "MPI_Comm_free",
               "braid_rt_finalize");
  groups.clear();
  handles.clear();
}

} // namespace braid::rt
