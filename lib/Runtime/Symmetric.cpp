//===- Symmetric.cpp - Symmetric memory on MPI shared windows ---*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Symmetric.h"

#include "Checks.h"
#include "CommThread.h"
#include "Diagnostics.h"
#include "Groups.h"

#include <algorithm>
#include <cstring>

using namespace braid::rt;

void *SymmetricHeap::allocate(const Group &group, int64_t bytes, int64_t site,
                              CommThread &comm, const char *call) {
  if (bytes < 0)
    fatalf("%s: negative size %lld", call, static_cast<long long>(bytes));
  auto key = std::make_tuple(&group, site, bytes);
  if (site >= 0)
    if (auto found = bySite.find(key); found != bySite.end())
      return found->second->local;
  auto buffer = std::make_unique<Buffer>();
  buffer->group = &group;
  buffer->site = site;
  buffer->bytes = bytes;
  // Page-sized and page-aligned, as the cuda backend's windows are.
  MPI_Aint size =
      static_cast<MPI_Aint>((std::max<int64_t>(bytes, 1) + 4095) / 4096 * 4096);
  // Segments need not start on a page (MPI keeps headers there); each is
  // one page larger and used from its first page boundary. Mappings are
  // page-aligned, so that boundary is the same memory in every process.
  auto pageAligned = [](void *p) {
    return reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(p) + 4095) /
                                    4096 * 4096);
  };
  std::string what =
      formatString("%s of %s on group %s (collective over the group)", call,
                   formatBytes(bytes).c_str(), group.str().c_str());
  Buffer &b = *buffer;
  comm.runSync(what, [&] {
    checkMPI(MPI_Comm_split_type(group.comm, MPI_COMM_TYPE_SHARED,
                                 group.position, MPI_INFO_NULL, &b.node),
             "MPI_Comm_split_type", call);
    int nodeSize = 0;
    checkMPI(MPI_Comm_size(b.node, &nodeSize), "MPI_Comm_size", call);
    if (nodeSize != group.size)
      fatalf("%s: group %s spans more than one shared-memory domain (%d of "
             "its %d ranks share this rank's node); symmetric memory needs "
             "one: compile with --comm=two-sided",
             call, group.str().c_str(), nodeSize, group.size);
    MPI_Info info;
    checkMPI(MPI_Info_create(&info), "MPI_Info_create", call);
    // Each rank's segment on its own pages (first-touch placement).
    MPI_Info_set(info, "alloc_shared_noncontig", "true");
    void *base = nullptr;
    int rc =
        MPI_Win_allocate_shared(size + 4096, 1, info, b.node, &base, &b.window);
    MPI_Info_free(&info);
    checkMPI(rc, "MPI_Win_allocate_shared", call);
    b.local = pageAligned(base);
    // The group position is the node rank (the split's key).
    b.peers.resize(group.size);
    for (int r = 0; r < group.size; ++r) {
      MPI_Aint peerSize = 0;
      int unit = 0;
      void *peerBase = nullptr;
      checkMPI(MPI_Win_shared_query(b.window, r, &peerSize, &unit, &peerBase),
               "MPI_Win_shared_query", call);
      b.peers[r] = pageAligned(peerBase);
    }
    std::memset(b.local, 0, static_cast<size_t>(size));
    // No peer may write into a copy before its owner has zeroed it.
    checkMPI(MPI_Barrier(b.node), "MPI_Barrier", call);
  });
  void *local = b.local;
  byAddress[b.local] = &b;
  if (site >= 0)
    bySite[key] = &b;
  buffers.push_back(std::move(buffer));
  return local;
}

const SymmetricHeap::Buffer *SymmetricHeap::find(const void *p) const {
  auto *c = static_cast<const char *>(p);
  auto it = byAddress.upper_bound(c);
  if (it == byAddress.begin())
    return nullptr;
  --it;
  const Buffer *b = it->second;
  return c < b->local + std::max<int64_t>(b->bytes, 1) ? b : nullptr;
}

void SymmetricHeap::free(const Group &group, void *p, CommThread &comm,
                         const char *call) {
  auto it = byAddress.find(static_cast<char *>(p));
  if (it == byAddress.end() || it->second->group != &group ||
      it->second->site >= 0)
    fatalf("%s: %p is not a symmetric buffer of group %s (from "
           "braid_rt_symmetric_alloc)",
           call, p, group.str().c_str());
  Buffer *b = it->second;
  comm.runSync(formatString("%s on group %s (collective over the group)", call,
                            group.str().c_str()),
               [&] {
                 checkMPI(MPI_Win_free(&b->window), "MPI_Win_free", call);
                 checkMPI(MPI_Comm_free(&b->node), "MPI_Comm_free", call);
               });
  byAddress.erase(it);
  for (auto &owned : buffers)
    if (owned.get() == b) {
      owned.reset();
      break;
    }
}

void *SymmetricHeap::peer(const Group &group, const void *p, int64_t bytes,
                          int position, int64_t step, const char *call,
                          const char *what) const {
  const Buffer *b = find(p);
  const char *first = static_cast<const char *>(p);
  if (!b || b->group != &group || (bytes > 1 && find(first + bytes - 1) != b))
    fatalf("%s (step %lld): %s (%s at %p) is not inside a symmetric buffer of "
           "group %s",
           call, static_cast<long long>(step), what,
           formatBytes(std::max<int64_t>(bytes, 1)).c_str(), p,
           group.str().c_str());
  return b->peers[static_cast<size_t>(position)] + (first - b->local);
}

uint32_t &SymmetricHeap::waitsOn(const void *flag, int64_t step,
                                 const char *call) {
  if (!find(flag))
    fatalf("%s (step %lld): the flag at %p lies in no symmetric buffer", call,
           static_cast<long long>(step), flag);
  return waits[flag];
}

std::string SymmetricHeap::describeFlag(const void *flag) const {
  const Buffer *b = find(flag);
  if (!b)
    return formatString("flag at %p", flag);
  long long index = (static_cast<const char *>(flag) - b->local) / 4;
  // Sites of in-process programs carry the program's number above bit 32
  // (braid_rt_set_site_scope).
  long long site = b->site & 0xffffffffLL, program = b->site >> 32;
  return b->site >= 0
             ? formatString(
                   "flag %lld of symmetric buffer site %lld%s (group "
                   "%s)",
                   index, site,
                   program ? formatString(" of program %lld", program).c_str()
                           : "",
                   b->group->str().c_str())
             : formatString("flag %lld of a symmetric buffer of group %s",
                            index, b->group->str().c_str());
}

void SymmetricHeap::freeAll(CommThread &comm) {
  comm.runSync("freeing the symmetric buffers (collective)", [&] {
    for (auto &b : buffers)
      if (b) {
        checkMPI(MPI_Win_free(&b->window), "MPI_Win_free", "braid_rt_finalize");
        checkMPI(MPI_Comm_free(&b->node), "MPI_Comm_free", "braid_rt_finalize");
      }
  });
  buffers.clear();
  byAddress.clear();
  bySite.clear();
  waits.clear();
}
