//===- Memory.h - Memory of the emulated device ------------------*- C++
//-*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Device memory is host memory in one shared-memory file per process (the
// heap), so that the NCCL of another rank process can map it and read or
// write a buffer directly, as NCCL's kernels do over NVLink. Allocations are
// 256-byte aligned with a 256-byte gap after each, so that running off the
// end of one lands outside every allocation and faults instead of silently
// reaching the next. Fresh device memory holds 0xA5 bytes.
//
// Symmetric memory (ncclMemAlloc) is one file per buffer, mapped where an
// NCCL window expects it in every rank process, with its race-detector
// shadow and synchronization objects in the same file.
//
// Every access a kernel, copy or collective makes is checked against the
// registry of live allocations. Freed memory stays mapped until no kernel
// runs (quarantine), so that a kernel racing a free faults cleanly instead
// of touching unmapped memory.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_MEMORY_H
#define BRAID_EMULATOR_MEMORY_H

#include "Races.h"

#include <cstdint>
#include <string>

namespace braid::emu {

enum class MemoryKind : uint8_t {
  Device,        ///< cudaMalloc(Async)
  Pinned,        ///< cudaMallocHost: host memory the device may use
  Managed,       ///< cudaMallocManaged
  Symmetric,     ///< ncclMemAlloc
  PeerSymmetric, ///< a peer's ncclMemAlloc buffer mapped here
  Module,        ///< a module's global and const variables
};
const char *memoryKindName(MemoryKind kind);

/// What an access may touch: one allocation.
struct Region {
  uintptr_t base = 0;
  uint64_t size = 0;
  MemoryKind kind = MemoryKind::Device;
  Cell *shadow = nullptr;   ///< null when races are off
  SyncPool *pool = nullptr; ///< symmetric memory's; else the local table
  uint32_t owner = 0;       ///< the rank whose memory it is
  const char *label = "";
};

/// The rank of this process in its job (MPI's, BRAID_RANK), for lanes and
/// messages; 0 when unknown.
uint32_t processRank();

/// Allocates `bytes` of device-visible memory of `kind` (Device, Pinned,
/// Managed or Module) from the heap; null when out of memory.
void *allocate(uint64_t bytes, MemoryKind kind, const std::string &label);
/// Frees what `allocate` returned; false (with `why`) for anything else,
/// or memory of another kind than `kind`.
bool release(void *p, bool pinned, std::string &why);

/// Frees a module's variables (allocated with MemoryKind::Module).
void releaseModule(void *p);

/// ncclMemAlloc / ncclMemFree: a buffer in a file of its own, placed in a
/// reserved address range so that peers' copies can be mapped around it.
void *allocateSymmetric(uint64_t bytes);
bool releaseSymmetric(void *p, std::string &why);

/// How a peer process maps a buffer: its file and offset.
struct Backing {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  /// Symmetric buffers: where their shadow and pool start in the file.
  uint64_t shadowOffset = 0;
};
/// The backing of [p, p + bytes), which must lie in the heap or in a
/// symmetric buffer; false otherwise.
bool backingOf(const void *p, uint64_t bytes, Backing &backing);

/// Maps `backing` of another process (read and write); null with `why`.
/// Heap mappings are cached per peer file.
void *mapPeer(const Backing &backing, std::string &why);

/// Maps a peer's symmetric buffer at `address` (in the reserved range
/// around one of our own symmetric buffers), with its shadow, and registers
/// it for kernels; unmapped by unmapPeerSymmetric.
bool mapPeerSymmetric(void *address, const Backing &backing, uint32_t owner,
                      std::string &why);
void unmapPeerSymmetric(void *address);

/// The stride (a multiple of 4 GiB) between the copies of symmetric
/// buffers of `bytes` in an NCCL window, and the most ranks a window can
/// span around one buffer.
uint64_t symmetricStride(uint64_t bytes);
constexpr int kMaxWindowRanks = 8;

/// The allocation holding [address, address + bytes), for the device;
/// false with `why` ("N bytes past the end of a 4096-byte allocation ...",
/// "outside every allocation") otherwise.
bool findMemory(uintptr_t address, uint64_t bytes, Region &region,
                std::string &why);

/// What [p, p + bytes) is to the runtime API: "device", "pinned host",
/// "managed", "symmetric", "host" (not the device's), or null when it starts
/// in an allocation and runs past its end.
const char *classify(const void *p, uint64_t bytes);

/// Kernels running (launches hold this so that frees wait for them).
void beginUse();
void endUse();

} // namespace braid::emu

#endif // BRAID_EMULATOR_MEMORY_H
