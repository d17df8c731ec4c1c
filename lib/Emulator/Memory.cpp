//===- Memory.cpp - Memory of the emulated device -------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Memory.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <iterator>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace braid::emu {

const char *memoryKindName(MemoryKind kind) {
  // In MemoryKind's order; a peer's window is symmetric memory too.
  static const char *const names[] = {"device",    "pinned host", "managed",
                                      "symmetric", "symmetric",   "module"};
  static_assert(std::size(names) ==
                static_cast<size_t>(MemoryKind::Module) + 1);
  return names[static_cast<size_t>(kind)];
}

uint32_t processRank() {
  static const uint32_t rank = [] {
    for (const char *name :
         {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "BRAID_RANK"})
      if (const char *value = std::getenv(name))
        return static_cast<uint32_t>(std::atoi(value));
    return 0u;
  }();
  return rank;
}

namespace {

constexpr uint64_t kAlign = 256;
constexpr uint64_t kGap = 256;
constexpr uint64_t kHeapBytes = 64ull << 30;
constexpr uint64_t kPage = 4096;

uint64_t roundUp(uint64_t value, uint64_t to) {
  return (value + to - 1) / to * to;
}

/// One shared-memory file the whole process allocates device memory from.
struct Heap {
  int fd = -1;
  uint8_t *base = nullptr;
  std::map<uint64_t, uint64_t> free; // offset -> bytes

  bool ready(std::string &why) {
    if (base)
      return true;
    fd = memfd_create("braid-emulated-device", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(kHeapBytes)) != 0) {
      why =
          std::string("cannot create the device heap: ") + std::strerror(errno);
      return false;
    }
    void *p = mmap(nullptr, kHeapBytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      why = std::string("cannot map the device heap: ") + std::strerror(errno);
      return false;
    }
    base = static_cast<uint8_t *>(p);
    free[0] = kHeapBytes;
    return true;
  }

  /// First fit; returns the offset or UINT64_MAX.
  uint64_t take(uint64_t bytes) {
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < bytes)
        continue;
      uint64_t offset = it->first, size = it->second;
      free.erase(it);
      if (size > bytes)
        free[offset + bytes] = size - bytes;
      return offset;
    }
    return UINT64_MAX;
  }

  void give(uint64_t offset, uint64_t bytes) {
    // Large blocks go back to the system.
    if (bytes >= (1u << 20))
      fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                static_cast<off_t>(offset), static_cast<off_t>(bytes));
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + bytes == next->first) {
      bytes += next->second;
      next = free.erase(next);
    }
    if (next != free.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == offset) {
        previous->second += bytes;
        return;
      }
    }
    free[offset] = bytes;
  }
};

struct Entry {
  Region region;
  std::string label;
  // Heap allocations: the block taken (with the gap).
  uint64_t heapOffset = 0;
  uint64_t heapBytes = 0;
  // Symmetric buffers: their file, reserved range and shadow mapping.
  int fd = -1;
  void *reserved = nullptr;
  uint64_t reservedBytes = 0;
  uint64_t mappedBytes = 0;
  void *shadowMap = nullptr;
  uint64_t shadowMapBytes = 0;
  uint64_t shadowOffset = 0;
  // Lazily created shadow of heap allocations.
  std::atomic<Cell *> shadow{nullptr};
  uint64_t shadowBytes = 0;
};

struct State {
  std::shared_mutex mutex;
  std::map<uintptr_t, Entry *> entries;
  std::atomic<uint64_t> generation{1};
  Heap heap;
  std::mutex heapMutex;
  std::atomic<int> users{0};
  std::vector<Entry *> quarantine;
  std::mutex quarantineMutex;
  // Peer files mapped whole (their heaps), by (pid, fd).
  std::mutex peerMutex;
  std::map<std::pair<int32_t, int32_t>, std::pair<void *, uint64_t>> peers;
};

State &state() {
  static State *instance = new State();
  return *instance;
}

/// Releases what a removed entry holds (no kernel runs, or it is not
/// reachable any more).
void destroy(Entry *entry) {
  State &s = state();
  if (Cell *shadow = entry->shadow.load())
    if (entry->region.kind != MemoryKind::Symmetric &&
        entry->region.kind != MemoryKind::PeerSymmetric)
      munmap(shadow, entry->shadowBytes);
  if (entry->heapBytes) {
    std::lock_guard<std::mutex> lock(s.heapMutex);
    s.heap.give(entry->heapOffset, entry->heapBytes);
  }
  if (entry->shadowMap)
    munmap(entry->shadowMap, entry->shadowMapBytes);
  if (entry->region.kind == MemoryKind::Symmetric) {
    if (entry->reserved)
      munmap(entry->reserved, entry->reservedBytes);
    if (entry->fd >= 0)
      close(entry->fd);
  } else if (entry->region.kind == MemoryKind::PeerSymmetric) {
    // Give the range back to the reservation it was mapped into.
    mmap(reinterpret_cast<void *>(entry->region.base), entry->mappedBytes,
         PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
         0);
  }
  delete entry;
}

void drainQuarantine() {
  State &s = state();
  std::vector<Entry *> ready;
  {
    std::lock_guard<std::mutex> lock(s.quarantineMutex);
    if (s.users.load() != 0)
      return;
    ready.swap(s.quarantine);
  }
  for (Entry *entry : ready)
    destroy(entry);
}

void retire(Entry *entry) {
  State &s = state();
  {
    std::lock_guard<std::mutex> lock(s.quarantineMutex);
    s.quarantine.push_back(entry);
  }
  drainQuarantine();
}

void add(Entry *entry) {
  State &s = state();
  std::unique_lock<std::shared_mutex> lock(s.mutex);
  s.entries[entry->region.base] = entry;
  s.generation.fetch_add(1);
}

/// Removes the entry starting at `p`; null if none.
Entry *remove(const void *p) {
  State &s = state();
  std::unique_lock<std::shared_mutex> lock(s.mutex);
  auto found = s.entries.find(reinterpret_cast<uintptr_t>(p));
  if (found == s.entries.end())
    return nullptr;
  Entry *entry = found->second;
  s.entries.erase(found);
  s.generation.fetch_add(1);
  return entry;
}

/// The entry whose range holds `address`, under the shared lock.
Entry *containing(State &s, uintptr_t address) {
  auto it = s.entries.upper_bound(address);
  if (it == s.entries.begin())
    return nullptr;
  --it;
  Entry *entry = it->second;
  if (address >= entry->region.base + std::max<uint64_t>(entry->region.size, 1))
    return nullptr;
  return entry;
}

std::string hex(uintptr_t address) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(address));
  return text;
}

std::string describeEntry(const Entry &entry) {
  return "a " + std::to_string(entry.region.size) + "-byte " + entry.label +
         " at " + hex(entry.region.base);
}

} // namespace

void *allocate(uint64_t bytes, MemoryKind kind, const std::string &label) {
  State &s = state();
  uint64_t size = roundUp(std::max<uint64_t>(bytes, 1), kAlign);
  uint64_t offset;
  {
    std::lock_guard<std::mutex> lock(s.heapMutex);
    std::string why;
    if (!s.heap.ready(why)) {
      std::fprintf(stderr, "braid emulated device: %s\n", why.c_str());
      return nullptr;
    }
    offset = s.heap.take(size + kGap);
  }
  if (offset == UINT64_MAX)
    return nullptr;
  uint8_t *p = s.heap.base + offset;
  if (kind == MemoryKind::Device || kind == MemoryKind::Managed)
    std::memset(p, 0xA5, size);
  auto *entry = new Entry();
  entry->region.base = reinterpret_cast<uintptr_t>(p);
  entry->region.size = bytes;
  entry->region.kind = kind;
  entry->region.owner = processRank();
  entry->label = label;
  entry->region.label = entry->label.c_str();
  entry->heapOffset = offset;
  entry->heapBytes = size + kGap;
  entry->shadowBytes = shadowBytes(bytes);
  add(entry);
  return p;
}

bool release(void *p, bool pinned, std::string &why) {
  if (!p)
    return true;
  Entry *entry = remove(p);
  if (!entry || entry->region.kind == MemoryKind::Symmetric ||
      entry->region.kind == MemoryKind::PeerSymmetric ||
      entry->region.kind == MemoryKind::Module) {
    if (entry)
      add(entry);
    why = "not an allocation of the emulated device";
    return false;
  }
  if ((entry->region.kind == MemoryKind::Pinned) != pinned) {
    add(entry);
    why = pinned ? "not pinned host memory"
                 : "pinned host memory (free it with cudaFreeHost)";
    return false;
  }
  retire(entry);
  return true;
}

namespace {

/// Retires the entry at `p` if it is of `kind`; leaves any other.
void retireOfKind(void *p, MemoryKind kind) {
  if (Entry *entry = remove(p)) {
    if (entry->region.kind == kind)
      retire(entry);
    else
      add(entry);
  }
}

} // namespace

void releaseModule(void *p) { retireOfKind(p, MemoryKind::Module); }

uint64_t symmetricStride(uint64_t bytes) {
  return roundUp(std::max<uint64_t>(bytes, 1), 1ull << 32);
}

void *allocateSymmetric(uint64_t bytes) {
  uint64_t size = roundUp(std::max<uint64_t>(bytes, 1), kPage);
  uint64_t stride = symmetricStride(size);
  uint64_t reservedBytes = 2 * kMaxWindowRanks * stride;
  void *reserved = mmap(nullptr, reservedBytes, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED)
    return nullptr;
  uint64_t shadowSize = roundUp(shadowBytes(size), kPage);
  uint64_t extra = shadowSize + roundUp(sizeof(SyncPool), kPage);
  int fd = memfd_create("braid-emulated-symmetric", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size + extra)) != 0) {
    if (fd >= 0)
      close(fd);
    munmap(reserved, reservedBytes);
    return nullptr;
  }
  auto *address = static_cast<uint8_t *>(reserved) + kMaxWindowRanks * stride;
  void *data = mmap(address, size, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd, 0);
  void *shadow = mmap(nullptr, extra, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      static_cast<off_t>(size));
  if (data == MAP_FAILED || shadow == MAP_FAILED) {
    close(fd);
    munmap(reserved, reservedBytes);
    return nullptr;
  }
  auto *entry = new Entry();
  entry->region.base = reinterpret_cast<uintptr_t>(address);
  entry->region.size = bytes;
  entry->region.kind = MemoryKind::Symmetric;
  entry->region.owner = processRank();
  entry->label = "ncclMemAlloc buffer";
  entry->region.label = entry->label.c_str();
  entry->fd = fd;
  entry->reserved = reserved;
  entry->reservedBytes = reservedBytes;
  entry->mappedBytes = size;
  entry->shadowMap = shadow;
  entry->shadowMapBytes = extra;
  entry->shadowOffset = size;
  entry->shadow.store(static_cast<Cell *>(shadow));
  entry->region.shadow = static_cast<Cell *>(shadow);
  entry->region.pool =
      reinterpret_cast<SyncPool *>(static_cast<uint8_t *>(shadow) + shadowSize);
  add(entry);
  return address;
}

bool releaseSymmetric(void *p, std::string &why) {
  Entry *entry = remove(p);
  if (!entry || entry->region.kind != MemoryKind::Symmetric) {
    if (entry)
      add(entry);
    why = "not an ncclMemAlloc buffer";
    return false;
  }
  // Peers' copies mapped into its reserved range go with it.
  State &s = state();
  std::vector<Entry *> peers;
  {
    std::unique_lock<std::shared_mutex> lock(s.mutex);
    auto lo = reinterpret_cast<uintptr_t>(entry->reserved);
    for (auto it = s.entries.lower_bound(lo);
         it != s.entries.end() && it->first < lo + entry->reservedBytes;) {
      peers.push_back(it->second);
      it = s.entries.erase(it);
    }
    s.generation.fetch_add(1);
  }
  for (Entry *peer : peers) {
    // Their ranges vanish with the reservation below.
    peer->region.kind = MemoryKind::Module; // nothing to restore
    retire(peer);
  }
  retire(entry);
  return true;
}

bool backingOf(const void *p, uint64_t bytes, Backing &backing) {
  State &s = state();
  auto address = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(s.mutex);
  Entry *entry = containing(s, address);
  if (!entry || address + bytes > entry->region.base + entry->region.size)
    return false;
  backing.pid = static_cast<int32_t>(getpid());
  backing.bytes = bytes;
  if (entry->region.kind == MemoryKind::Symmetric) {
    backing.fd = entry->fd;
    backing.offset = address - entry->region.base;
    backing.shadowOffset = entry->shadowOffset;
    return true;
  }
  if (entry->heapBytes) {
    backing.fd = s.heap.fd;
    backing.offset = address - reinterpret_cast<uintptr_t>(s.heap.base);
    return true;
  }
  return false;
}

static int openPeer(const Backing &backing, std::string &why) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", backing.pid, backing.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    why = std::string("cannot open the memory of process ") +
          std::to_string(backing.pid) + " (" + path +
          "): " + std::strerror(errno);
  return fd;
}

void *mapPeer(const Backing &backing, std::string &why) {
  State &s = state();
  if (backing.pid == getpid()) {
    // Our own memory: heap or symmetric buffer, mapped already.
    if (backing.fd == s.heap.fd)
      return s.heap.base + backing.offset;
  }
  std::lock_guard<std::mutex> lock(s.peerMutex);
  auto key = std::make_pair(backing.pid, backing.fd);
  auto found = s.peers.find(key);
  if (found == s.peers.end()) {
    int fd = openPeer(backing, why);
    if (fd < 0)
      return nullptr;
    off_t size = lseek(fd, 0, SEEK_END);
    void *p = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
      why = std::string("cannot map the memory of process ") +
            std::to_string(backing.pid) + ": " + std::strerror(errno);
      return nullptr;
    }
    found = s.peers.emplace(key, std::make_pair(p, uint64_t(size))).first;
  }
  if (backing.offset + backing.bytes > found->second.second) {
    why = "a peer's buffer runs past the end of its memory";
    return nullptr;
  }
  return static_cast<uint8_t *>(found->second.first) + backing.offset;
}

bool mapPeerSymmetric(void *address, const Backing &backing, uint32_t owner,
                      std::string &why) {
  int fd = openPeer(backing, why);
  if (fd < 0)
    return false;
  uint64_t size = roundUp(std::max<uint64_t>(backing.bytes, 1), kPage);
  off_t total = lseek(fd, 0, SEEK_END);
  void *data = mmap(address, size, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_FIXED, fd, 0);
  void *shadow =
      mmap(nullptr, static_cast<size_t>(total) - backing.shadowOffset,
           PROT_READ | PROT_WRITE, MAP_SHARED, fd,
           static_cast<off_t>(backing.shadowOffset));
  close(fd);
  if (data == MAP_FAILED || shadow == MAP_FAILED) {
    why = std::string("cannot map a peer's symmetric buffer: ") +
          std::strerror(errno);
    return false;
  }
  auto *entry = new Entry();
  entry->region.base = reinterpret_cast<uintptr_t>(address);
  entry->region.size = backing.bytes;
  entry->region.kind = MemoryKind::PeerSymmetric;
  entry->region.owner = owner;
  entry->label = "ncclMemAlloc buffer of rank " + std::to_string(owner);
  entry->region.label = entry->label.c_str();
  entry->mappedBytes = size;
  entry->shadowMap = shadow;
  entry->shadowMapBytes = static_cast<uint64_t>(total) - backing.shadowOffset;
  uint64_t shadowSize = roundUp(shadowBytes(size), kPage);
  entry->shadow.store(static_cast<Cell *>(shadow));
  entry->region.shadow = static_cast<Cell *>(shadow);
  entry->region.pool =
      reinterpret_cast<SyncPool *>(static_cast<uint8_t *>(shadow) + shadowSize);
  add(entry);
  return true;
}

void unmapPeerSymmetric(void *address) {
  retireOfKind(address, MemoryKind::PeerSymmetric);
}

bool findMemory(uintptr_t address, uint64_t bytes, Region &region,
                std::string &why) {
  State &s = state();
  struct Cache {
    uint64_t generation = 0;
    uintptr_t base = 0, end = 0;
    Region region;
  };
  thread_local Cache cache;
  uint64_t generation = s.generation.load(std::memory_order_acquire);
  if (cache.generation == generation && address >= cache.base &&
      address + bytes <= cache.end) {
    region = cache.region;
    return true;
  }
  std::shared_lock<std::shared_mutex> lock(s.mutex);
  Entry *entry = containing(s, address);
  if (entry && address + bytes <= entry->region.base + entry->region.size) {
    region = entry->region;
    if (racesEnabled() && !entry->shadow.load()) {
      void *p = mmap(nullptr, entry->shadowBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      Cell *expected = nullptr;
      if (p != MAP_FAILED && !entry->shadow.compare_exchange_strong(
                                 expected, static_cast<Cell *>(p)))
        munmap(p, entry->shadowBytes);
    }
    region.shadow = racesEnabled() ? entry->shadow.load() : nullptr;
    cache.generation = generation;
    cache.base = entry->region.base;
    cache.end = entry->region.base + entry->region.size;
    cache.region = region;
    return true;
  }
  if (entry) {
    uint64_t past = address + bytes - (entry->region.base + entry->region.size);
    why = std::to_string(past) + " byte" + (past == 1 ? "" : "s") +
          " past the end of " + describeEntry(*entry);
    return false;
  }
  // The nearest allocation below, if the address is just past it.
  auto it = s.entries.upper_bound(address);
  if (it != s.entries.begin()) {
    const Entry &below = *std::prev(it)->second;
    uintptr_t end = below.region.base + below.region.size;
    if (address >= end && address - end < (1u << 20)) {
      why = (address == end
                 ? std::string("just past the end of ")
                 : std::to_string(address - end) + " bytes past the end of ") +
            describeEntry(below);
      return false;
    }
  }
  if (it != s.entries.end() && it->first - address < (1u << 20)) {
    why = std::to_string(it->first - address) + " bytes before " +
          describeEntry(*it->second);
    return false;
  }
  why = "outside every allocation of the device";
  return false;
}

const char *classify(const void *p, uint64_t bytes) {
  if (!p)
    return nullptr;
  State &s = state();
  auto address = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(s.mutex);
  Entry *entry = containing(s, address);
  if (!entry) {
    if (bytes && containing(s, address + bytes - 1))
      return nullptr;
    return "host";
  }
  if (address + bytes > entry->region.base + entry->region.size)
    return nullptr;
  return memoryKindName(entry->region.kind);
}

void beginUse() { state().users.fetch_add(1); }

void endUse() {
  if (state().users.fetch_sub(1) == 1)
    drainQuarantine();
}

} // namespace braid::emu
