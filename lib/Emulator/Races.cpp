//===- Races.cpp - Happens-before race detection of the emulated device --===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Races.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

namespace braid::emu {

void VectorClock::clear() { std::memset(this, 0, sizeof(*this)); }

void VectorClock::learn(const BlockKnowledge &knowledge) {
  // Knowledge of a block of an operation the lane clock already covers is
  // redundant: that whole operation completed.
  if (lanes[knowledge.lane] >= knowledge.seq)
    return;
  for (uint32_t i = 0; i < blockCount; ++i) {
    BlockKnowledge &known = blocks[i];
    if (known.lane == knowledge.lane && known.seq == knowledge.seq &&
        known.block == knowledge.block) {
      if (knowledge.clock > known.clock)
        known = knowledge;
      return;
    }
  }
  if (blockCount < kMaxBlockEntries) {
    blocks[blockCount++] = knowledge;
    return;
  }
  // Forgetting could only make the detector report a race that is not one;
  // a report from this clock says so (checkAccess).
  overflowed = 1;
}

void VectorClock::join(const VectorClock &other) {
  for (int i = 0; i < kMaxLanes; ++i)
    lanes[i] = std::max(lanes[i], other.lanes[i]);
  // Drop what the lanes now cover, then learn the other's blocks.
  uint32_t kept = 0;
  for (uint32_t i = 0; i < blockCount; ++i)
    if (lanes[blocks[i].lane] < blocks[i].seq)
      blocks[kept++] = blocks[i];
  blockCount = kept;
  for (uint32_t i = 0; i < other.blockCount; ++i)
    learn(other.blocks[i]);
  overflowed |= other.overflowed;
}

size_t shadowBytes(size_t dataBytes) {
  return (dataBytes + 3) / 4 * sizeof(Cell);
}

/// Whether epoch `later` comes after `earlier` (16-bit, wrapping).
static bool after(uint16_t later, uint16_t earlier) {
  return later != earlier && static_cast<uint16_t>(later - earlier) < 0x8000;
}

bool happensBefore(const Access &access, const VectorClock &clock,
                   const Access &self) {
  if (!access.kind)
    return true;
  bool sameOperation = access.lane == self.lane && access.seq == self.seq &&
                       access.rank == self.rank;
  bool sameBlock = sameOperation && access.block == self.block;
  // The same thread: program order.
  if (sameBlock && access.thread == self.thread)
    return true;
  // A whole operation the accessor knows completed.
  if (access.lane < kMaxLanes && clock.lanes[access.lane] >= access.seq)
    return true;
  // The same block: a barrier between the two (a warp-level one for two
  // lanes of one warp).
  if (sameBlock && access.block != kNoBlock)
    return after(self.epoch, access.epoch) ||
           (access.thread / 32 == self.thread / 32 &&
            after(self.warpEpoch, access.warpEpoch));
  // Another block of a running kernel: what its releases made known.
  if (access.block != kNoBlock)
    for (uint32_t i = 0; i < clock.blockCount; ++i) {
      const BlockKnowledge &known = clock.blocks[i];
      if (known.lane == access.lane && known.seq == access.seq &&
          known.block == access.block) {
        if (access.clock < known.clock)
          return true;
        // Released at this clock: covered if made by the releasing thread
        // before its release, or by any thread before a barrier the
        // releaser passed.
        return access.clock == known.clock &&
               (access.thread == known.thread ||
                after(known.epoch, access.epoch));
      }
    }
  return false;
}

namespace {

std::mutex &namesMutex() {
  static std::mutex *mutex = new std::mutex();
  return *mutex;
}
std::map<uint32_t, std::string> &names() {
  static auto *table = new std::map<uint32_t, std::string>();
  return *table;
}

void lockCell(Cell &cell) {
  unsigned spins = 0;
  while (cell.lock.exchange(1, std::memory_order_acquire))
    if (++spins > 64)
      std::this_thread::yield();
}

void unlockCell(Cell &cell) { cell.lock.store(0, std::memory_order_release); }

std::string describeAccess(const Access &access, uint8_t kind) {
  std::string what = (kind & Atomic)  ? "atomic "
                     : (kind & Write) ? "write"
                                      : "read";
  if (kind & Atomic)
    what += (kind & Write) ? "read-modify-write" : "read";
  std::string text = what + " by rank " + std::to_string(access.rank);
  if (access.block == kNoBlock) {
    text += ", " + kernelName(access.kernel);
    return text;
  }
  text += ", kernel " + kernelName(access.kernel) + " block " +
          std::to_string(access.block) + " thread " +
          std::to_string(access.thread) + " (PTX line " +
          std::to_string(access.line) + ")";
  return text;
}

} // namespace

uint32_t kernelHash(const std::string &name) {
  uint32_t hash = 2166136261u;
  for (char c : name)
    hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  return hash ? hash : 1;
}

void nameKernel(uint32_t hash, const std::string &name) {
  std::lock_guard<std::mutex> lock(namesMutex());
  names()[hash] = name;
}

std::string kernelName(uint32_t hash) {
  std::lock_guard<std::mutex> lock(namesMutex());
  auto found = names().find(hash);
  if (found != names().end())
    return found->second;
  return "#" + std::to_string(hash);
}

bool racesEnabled() {
  static const bool enabled = [] {
    const char *value = std::getenv("BRAID_EMULATE_RACES");
    return !value ||
           (std::strcmp(value, "0") != 0 && std::strcmp(value, "off") != 0);
  }();
  return enabled;
}

bool racesFatal() {
  static const bool fatal = [] {
    const char *value = std::getenv("BRAID_EMULATE_RACES");
    return !value || std::strcmp(value, "report") != 0;
  }();
  return fatal && racesEnabled();
}

std::string checkAccess(Cell *cells, uint64_t offset, unsigned bytes,
                        uint8_t kind, const Accessor &accessor,
                        const std::string &where, bool unchanged) {
  std::string report;
  uint64_t end = offset + bytes;
  for (uint64_t granule = offset / 4; granule * 4 < end; ++granule) {
    uint64_t lo = std::max<uint64_t>(offset, granule * 4);
    uint64_t hi = std::min<uint64_t>(end, granule * 4 + 4);
    auto mask = static_cast<uint8_t>(((1u << (hi - lo)) - 1) << (lo & 3));
    Cell &cell = cells[granule];
    lockCell(cell);
    const Access &self = accessor.self;
    auto conflicts = [&](const Access &other, uint8_t otherKind) {
      if (!other.kind || !(other.mask & mask))
        return false;
      if ((otherKind & Atomic) && (kind & Atomic))
        return false;
      if (!(otherKind & Write) && !(kind & Write))
        return false;
      return !happensBefore(other, *accessor.clock, self);
    };
    const Access *other = nullptr;
    if (!(unchanged && (kind & Write)) &&
        conflicts(cell.write, cell.write.kind))
      other = &cell.write;
    else if ((kind & Write) && conflicts(cell.read, cell.read.kind))
      other = &cell.read;
    if (other && report.empty()) {
      char address[64];
      std::snprintf(address, sizeof(address), "byte %llu of %s",
                    static_cast<unsigned long long>(lo), where.c_str());
      report = std::string("data race on ") + address + ": " +
               describeAccess(self, kind) + " and " +
               describeAccess(*other, other->kind) +
               " are not ordered by a barrier or a release/acquire pair";
    }
    Access record = self;
    record.kind = kind;
    record.mask = mask;
    if (kind & Write)
      cell.write = record;
    else
      cell.read = record;
    unlockCell(cell);
  }
  if (!report.empty() && accessor.clock->overflowed)
    report += " (the detector had to forget synchronization this side "
              "learned: more than " +
              std::to_string(kMaxBlockEntries) +
              " blocks of running kernels known at once, or more than " +
              std::to_string(kSyncSlots) +
              " flags in one symmetric buffer; this may be a false "
              "positive)";
  return report;
}

//===----------------------------------------------------------------------===//
// Synchronization objects
//===----------------------------------------------------------------------===//

static void lockSyncSlot(SyncSlot &slot) {
  unsigned spins = 0;
  while (slot.lock.exchange(1, std::memory_order_acquire))
    if (++spins > 64)
      std::this_thread::yield();
}

void unlockSlot(SyncSlot *slot) {
  if (slot)
    slot->lock.store(0, std::memory_order_release);
}

SyncSlot *lockSlot(SyncPool &pool, uint64_t key, bool create) {
  uint64_t start = (key * 0x9E3779B97F4A7C15ull) >> 58; // 64 slots
  for (int probe = 0; probe < kSyncSlots; ++probe) {
    SyncSlot &slot = pool.slots[(start + probe) % kSyncSlots];
    uint64_t current = slot.key.load(std::memory_order_acquire);
    if (current == key) {
      lockSyncSlot(slot);
      return &slot;
    }
    if (current == 0) {
      if (!create)
        return nullptr;
      uint64_t expected = 0;
      if (slot.key.compare_exchange_strong(expected, key) || expected == key) {
        lockSyncSlot(slot);
        return &slot;
      }
    }
  }
  pool.overflowed.store(1);
  return nullptr;
}

void releaseTo(SyncSlot &slot, const VectorClock &clock, uint32_t scope,
               uint32_t device) {
  bool fresh = slot.scope == 0;
  slot.clock.join(clock);
  slot.scope = fresh ? scope : std::min(slot.scope, scope);
  slot.device = device;
}

void acquireFrom(const SyncSlot &slot, VectorClock &clock, uint32_t scope,
                 uint32_t device) {
  if (slot.scope == 0)
    return;
  // ptx::Scope: 1 cta, 2 cluster, 3 gpu, 4 sys. Across devices only sys on
  // both sides synchronizes; on one device gpu is enough. (A cta-scope
  // release is taken as gpu scope: the detector may then miss a race, never
  // report one that is not.)
  uint32_t weakest = std::min(slot.scope, scope);
  if (slot.device != device ? weakest < 4 : weakest < 1)
    return;
  clock.join(slot.clock);
}

SyncSlot *lockLocalSlot(uintptr_t address, bool create) {
  static std::mutex *mutex = new std::mutex();
  static auto *table = new std::unordered_map<uintptr_t, SyncSlot *>();
  SyncSlot *slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(*mutex);
    auto found = table->find(address);
    if (found != table->end()) {
      slot = found->second;
    } else if (create) {
      slot = static_cast<SyncSlot *>(std::calloc(1, sizeof(SyncSlot)));
      slot->key.store(address);
      (*table)[address] = slot;
    }
  }
  if (slot)
    lockSyncSlot(*slot);
  return slot;
}

} // namespace braid::emu
