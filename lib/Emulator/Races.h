//===- Races.h - Happens-before race detection of the emulated device ----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Two accesses to one byte race when they come from different threads (of
// one block, of different blocks, streams or ranks), at least one writes, not
// both are atomics, and neither happens before the other. The emulated
// device decides "happens before" from what the hardware guarantees, not
// from the order the emulator happened to run things in:
//
//  - Within a block: program order of each thread, and barriers (bar.sync,
//    barrier.sync, bar.warp.sync among a warp's lanes): every thread has a
//    barrier epoch, and an access of thread t at epoch e happens before one
//    of thread u != t at a later epoch.
//  - Across blocks, kernels, streams and ranks: vector clocks over lanes, a
//    lane being one stream of one rank (its operations numbered in stream
//    order). An operation starts knowing its stream's clock, what the host
//    thread that enqueued it knew, and whatever its stream waited for
//    (events, stream-memory waits); a kernel's blocks are separate agents
//    within the kernel's lane step, which learn of each other only through
//    release / acquire (st.release, red.release, atom with release or
//    acquire, ld.acquire, fences around relaxed accesses) at a scope that
//    covers both (cta within a block, gpu within a device, sys across
//    devices); NCCL operations synchronize their participants.
//
// Shadow state is kept for shared memory (per block) and for symmetric
// memory (ncclMemAlloc buffers, in a shadow region beside each buffer in the
// same shared-memory file, so that every rank's accesses meet in one place).
// Ordinary device memory is checked for faults but not for races.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_RACES_H
#define BRAID_EMULATOR_RACES_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace braid::emu {

/// Streams across the job: 16 lanes per rank, 8 ranks.
constexpr int kLanesPerRank = 16;
constexpr int kMaxLanes = 128;
/// Knowledge of blocks of a kernel still running that a vector clock can
/// hold (learnt through in-kernel release / acquire between blocks). A
/// kernel whose last block raises a flag for all of them
/// (braid-kernel-signals, up to 96 tiles) makes the raise carry every
/// block's.
constexpr int kMaxBlockEntries = 512;

/// Who made an access: a thread of a block of a kernel (the `seq`-th
/// operation of `lane`), or a stream operation (block == kNoBlock).
constexpr uint32_t kNoBlock = 0xFFFFFF;

struct Agent {
  uint32_t lane = 0;
  uint32_t seq = 0; ///< the operation's number on its lane (from 1)
  uint32_t block = kNoBlock;
};

struct BlockKnowledge {
  uint32_t lane, seq, block;
  uint32_t clock;  ///< the block's release count known
  uint16_t thread; ///< the thread that released
  uint16_t epoch;  ///< its barrier epoch then
};

/// A vector clock: per lane, how many of its operations are known to have
/// completed; plus knowledge of individual blocks of running kernels.
/// Plain data, so that it can live in shared memory.
struct VectorClock {
  uint32_t lanes[kMaxLanes];
  uint32_t blockCount;
  uint32_t overflowed;
  BlockKnowledge blocks[kMaxBlockEntries];

  void clear();
  void join(const VectorClock &other);
  void learn(const BlockKnowledge &knowledge);
};

/// One recorded access (32 bytes).
struct Access {
  uint32_t lane;
  uint32_t seq;
  uint32_t block : 24; ///< linear block index, or kNoBlock
  uint32_t rank : 8;
  uint32_t clock;     ///< the block's release count at the access
  uint16_t thread;    ///< linear thread index in the block
  uint16_t epoch;     ///< the thread's block-barrier epoch
  uint16_t warpEpoch; ///< its warp-level synchronizations (barriers too)
  uint8_t kind;       ///< AccessKind bits; 0: nothing recorded
  uint8_t mask;       ///< bytes of the 4-byte granule touched
  uint32_t line;      ///< PTX line of the instruction (0: an operation)
  uint32_t kernel;    ///< hash of the kernel's (or operation's) name
};
static_assert(sizeof(Access) == 32, "Access is a shadow record");

enum AccessKind : uint8_t { Read = 1, Write = 2, Atomic = 4 };

/// Shadow of one 4-byte granule: the last write and the last read.
struct Cell {
  std::atomic<uint32_t> lock;
  uint32_t pad;
  Access write;
  Access read;
};
static_assert(sizeof(Cell) == 72, "shadow cells are plain data");

size_t shadowBytes(size_t dataBytes);

/// What the thread making an access knows and is.
struct Accessor {
  const VectorClock *clock; ///< the block's (or stream operation's)
  Access self;              ///< filled but for kind and mask
};

/// Checks an access of `bytes` at byte offset `offset` of the memory whose
/// shadow is `cells`, records it, and returns a report of the first race
/// found (empty if none); `where` names the memory. A write that leaves the
/// bytes as they were (`unchanged`: every lane of a warp storing the same
/// reduction result, as upstream's gpu.all_reduce lowering does) does not
/// race with another write: no thread can tell which came last.
std::string checkAccess(Cell *cells, uint64_t offset, unsigned bytes,
                        uint8_t kind, const Accessor &accessor,
                        const std::string &where, bool unchanged = false);

/// Whether `access` happens before what `clock` (of an agent with `self`)
/// knows, within a block by barrier epochs.
bool happensBefore(const Access &access, const VectorClock &clock,
                   const Access &self);

/// Names of kernels by hash, for reports (per process).
uint32_t kernelHash(const std::string &name);
void nameKernel(uint32_t hash, const std::string &name);
std::string kernelName(uint32_t hash);

/// Whether race detection is on (BRAID_EMULATE_RACES: `on`, the default,
/// and `report` check; `off` or 0 does not), and whether a race fails the
/// device (`on`) or is only printed (`report`).
bool racesEnabled();
bool racesFatal();

/// A synchronization object: what releases to one address made known, the
/// weakest scope among them and the device of the last releaser.
struct SyncSlot {
  std::atomic<uint64_t> key; ///< address (local table) or offset + 1
  std::atomic<uint32_t> lock;
  uint32_t scope;  ///< ptx::Scope as an integer
  uint32_t device; ///< the process (rank) that released last
  VectorClock clock;
};

/// A fixed table of synchronization objects, plain data (for shared memory
/// beside a symmetric buffer's shadow cells).
constexpr int kSyncSlots = 64;
struct SyncPool {
  std::atomic<uint32_t> overflowed;
  SyncSlot slots[kSyncSlots];
};

/// The slot of `key` in `pool`, locked (unlock with unlockSlot); null when
/// the pool is full and `create` (or when absent and !create).
SyncSlot *lockSlot(SyncPool &pool, uint64_t key, bool create);
void unlockSlot(SyncSlot *slot);

/// Releases the knowledge `clock` (of `device`, at `scope`) to `slot`.
void releaseTo(SyncSlot &slot, const VectorClock &clock, uint32_t scope,
               uint32_t device);
/// Joins what `slot` holds into `clock` if the scopes let the release
/// synchronize with an acquire at `scope` by `device`.
void acquireFrom(const SyncSlot &slot, VectorClock &clock, uint32_t scope,
                 uint32_t device);

/// The process's own synchronization object of `address` (a flag in
/// ordinary device memory), locked; null when absent and !create.
SyncSlot *lockLocalSlot(uintptr_t address, bool create);

} // namespace braid::emu

#endif // BRAID_EMULATOR_RACES_H
