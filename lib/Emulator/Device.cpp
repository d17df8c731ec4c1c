//===- Device.cpp - Streams, events and faults of the emulated device ----===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "Memory.h"
#include "Streams.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

namespace braid::emu {

namespace {

struct Stream;

struct Dependency {
  Stream *stream;
  uint64_t ticket;
};

struct StreamOp {
  std::string what;
  Work work;
  VectorClock host;
  std::vector<Dependency> after;
};

struct Stream {
  int id = 0;
  int priority = 0;
  bool nonBlocking = false;
  std::string name;
  uint32_t lane = 0;
  std::mutex mutex;
  std::condition_variable wake, done;
  std::deque<StreamOp> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  VectorClock clock;
  std::thread worker;
};

struct State {
  std::mutex mutex;
  std::map<void *, Stream *> streams;
  Stream *legacy = nullptr;
  int nextStream = 1;
  uint32_t lanesInUse = 0; // bit per local lane
  uint32_t nextLane = 0;
  std::atomic<uint32_t> laneSeq[kLanesPerRank] = {};
  std::atomic<bool> failed{false};
  std::atomic<int> error{0};
  std::mutex reportMutex;
  std::map<Event *, std::shared_ptr<Event>> events;
};

State &state() {
  static State *instance = new State();
  return *instance;
}

/// What the host has seen complete, for the whole process: work enqueued
/// after any of its threads saw an operation complete (a synchronization,
/// a query that found it done) runs after that operation, whatever host
/// synchronization (a mutex, MPI) told the enqueuing thread to go on, and
/// the emulator cannot see those.
struct HostClock {
  std::mutex mutex;
  VectorClock clock;
  HostClock() { clock.clear(); }
};

HostClock &hostClockState() {
  static auto *state = new HostClock();
  return *state;
}

VectorClock hostSnapshot() {
  HostClock &host = hostClockState();
  std::lock_guard<std::mutex> lock(host.mutex);
  return host.clock;
}

void run(Stream *stream);

Stream *newStream(int priority, bool nonBlocking, bool legacy) {
  State &s = state();
  auto *stream = new Stream();
  stream->clock.clear();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    stream->id = legacy ? 0 : s.nextStream++;
    // A lane of its own while one is free (16 per rank).
    uint32_t local = s.nextLane % kLanesPerRank;
    for (uint32_t i = 0; i < kLanesPerRank; ++i) {
      uint32_t candidate = (s.nextLane + i) % kLanesPerRank;
      if (!(s.lanesInUse & (1u << candidate))) {
        local = candidate;
        break;
      }
    }
    s.nextLane = local + 1;
    s.lanesInUse |= 1u << local;
    stream->lane =
        (processRank() % (kMaxLanes / kLanesPerRank)) * kLanesPerRank + local;
  }
  stream->priority = priority;
  stream->nonBlocking = nonBlocking;
  stream->name = legacy ? std::string("the legacy stream")
                        : "stream " + std::to_string(stream->id) +
                              " (priority " + std::to_string(priority) + ")";
  stream->worker = std::thread(run, stream);
  return stream;
}

Stream *legacyStream() {
  State &s = state();
  static std::once_flag once;
  std::call_once(once, [&] { s.legacy = newStream(0, false, true); });
  return s.legacy;
}

Stream *asStream(void *handle) {
  if (!handle)
    return legacyStream();
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.streams.find(handle);
  return found == s.streams.end() ? nullptr : found->second;
}

void run(Stream *stream) {
  State &s = state();
  uint32_t local = stream->lane % kLanesPerRank;
  for (;;) {
    StreamOp op;
    {
      std::unique_lock<std::mutex> lock(stream->mutex);
      stream->wake.wait(lock,
                        [&] { return stream->stop || !stream->queue.empty(); });
      if (stream->queue.empty())
        return;
      op = std::move(stream->queue.front());
      stream->queue.pop_front();
    }
    VectorClock clock = stream->clock;
    clock.join(op.host);
    // Implicit ordering of the legacy stream with blocking streams.
    for (const Dependency &dependency : op.after) {
      std::unique_lock<std::mutex> lock(dependency.stream->mutex);
      dependency.stream->done.wait(lock, [&] {
        return dependency.stream->completed >= dependency.ticket ||
               s.failed.load();
      });
      clock.join(dependency.stream->clock);
    }
    uint32_t seq = s.laneSeq[local].fetch_add(1) + 1;
    if (!s.failed.load()) {
      OpContext context{clock,      stream->lane, seq,
                        deviceId(), s.failed,     stream->name};
      int code = 0;
      std::string report;
      if (!op.work(context, code, report))
        failDevice(code ? code : kLaunchFailure,
                   stream->name + ", " + op.what + ": " + report);
    }
    clock.lanes[stream->lane] = std::max(clock.lanes[stream->lane], seq);
    {
      std::lock_guard<std::mutex> lock(stream->mutex);
      stream->clock = clock;
      ++stream->completed;
    }
    stream->done.notify_all();
  }
}

} // namespace

struct Event {
  std::mutex mutex;
  std::condition_variable done;
  bool timing = true;
  uint64_t recorded = 0, completed = 0;
  VectorClock clock;
  std::chrono::steady_clock::time_point time;
};

//===----------------------------------------------------------------------===//
// Device.h
//===----------------------------------------------------------------------===//

void hostLearns(const VectorClock &clock) {
  HostClock &host = hostClockState();
  std::lock_guard<std::mutex> lock(host.mutex);
  host.clock.join(clock);
}

VectorClock hostKnowledge() { return hostSnapshot(); }

void say(const std::string &message) {
  std::string line = "braid emulated device: rank " +
                     std::to_string(processRank()) + ": " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void failDevice(int code, const std::string &report) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.reportMutex);
  if (s.failed.exchange(true))
    return;
  s.error.store(code);
  say(report);
  // Wake whoever waits on a stream, so that queued work drains.
  std::lock_guard<std::mutex> streams(s.mutex);
  for (auto &[handle, stream] : s.streams)
    stream->done.notify_all();
}

int deviceError() { return state().error.load(); }

namespace {

/// The call log's file, opened at the first call that asks; -1 when off.
int callLogFile() {
  static const int fd = [] {
    const char *value = std::getenv("BRAID_EMULATE_LOG");
    if (!value || !*value)
      return -1;
    std::string path = value;
    for (size_t at = path.find("{rank}"); at != std::string::npos;
         at = path.find("{rank}", at))
      path.replace(at, 6, std::to_string(processRank()));
    int opened =
        open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (opened < 0)
      say("BRAID_EMULATE_LOG: cannot write " + path + ": " +
          std::strerror(errno));
    return opened;
  }();
  return fd;
}

} // namespace

bool logging() { return callLogFile() >= 0; }

void logLine(const char *format, ...) {
  int fd = callLogFile();
  if (fd < 0)
    return;
  char line[1024];
  int prefix = std::snprintf(line, sizeof(line), "rank %u: ", processRank());
  va_list args;
  va_start(args, format);
  int length =
      std::vsnprintf(line + prefix, sizeof(line) - prefix - 1, format, args);
  va_end(args);
  size_t size =
      std::min<size_t>(prefix + std::max(length, 0), sizeof(line) - 2);
  line[size++] = '\n';
  // One write per line: O_APPEND keeps lines of several processes whole.
  if (write(fd, line, size) < 0) {
    // Nothing to do: the log is a diagnostic aid.
  }
}

double waitTimeout() {
  static const double seconds = [] {
    if (const char *value = std::getenv("BRAID_EMULATE_TIMEOUT"))
      if (double v = std::atof(value); v > 0)
        return v;
    if (const char *value = std::getenv("BRAID_TIMEOUT"))
      if (double v = std::atof(value); v > 0)
        return v * 0.75;
    return 90.0;
  }();
  return seconds;
}

uint32_t deviceId() { return processRank(); }

std::string streamName(void *handle) {
  Stream *stream = asStream(handle);
  return stream ? stream->name : std::string("an unknown stream");
}

int enqueue(void *handle, const char *what, Work work) {
  State &s = state();
  if (s.failed.load())
    return s.error.load();
  Stream *stream = asStream(handle);
  if (!stream)
    return 400; // cudaErrorInvalidResourceHandle
  StreamOp op;
  op.what = what;
  op.work = std::move(work);
  op.host = hostSnapshot();
  // The legacy stream waits for blocking streams' earlier work, and they
  // for its.
  if (stream == legacyStream() || !stream->nonBlocking) {
    std::lock_guard<std::mutex> lock(s.mutex);
    std::vector<Stream *> others;
    if (stream == s.legacy) {
      for (auto &[h, other] : s.streams)
        if (!other->nonBlocking)
          others.push_back(other);
    } else {
      others.push_back(s.legacy);
    }
    for (Stream *other : others) {
      std::lock_guard<std::mutex> otherLock(other->mutex);
      if (other->completed < other->enqueued)
        op.after.push_back({other, other->enqueued});
    }
  }
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->queue.push_back(std::move(op));
    ++stream->enqueued;
  }
  stream->wake.notify_one();
  return 0;
}

int synchronize(void *handle) {
  Stream *stream = asStream(handle);
  if (!stream)
    return 400;
  State &s = state();
  std::unique_lock<std::mutex> lock(stream->mutex);
  uint64_t target = stream->enqueued;
  stream->done.wait(lock, [&] { return stream->completed >= target; });
  hostLearns(stream->clock);
  return s.error.load();
}

bool stillThere(const void *p, uint64_t bytes, const char *what, int &code,
                std::string &report) {
  Region region;
  std::string why;
  if (findMemory(reinterpret_cast<uintptr_t>(p), bytes, region, why))
    return true;
  code = kIllegalAddress;
  char address[32];
  std::snprintf(
      address, sizeof(address), "0x%llx",
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(p)));
  report = std::string(what) + " of " + std::to_string(bytes) + " bytes at " +
           address + ": " + why;
  return false;
}

int enqueueRanges(void *stream, const char *what, std::vector<Range> ranges,
                  std::function<void()> work) {
  std::string name = what;
  return enqueue(
      stream, what,
      [ranges = std::move(ranges), work = std::move(work),
       name](OpContext &context, int &code, std::string &report) {
        std::string race;
        for (const Range &range : ranges) {
          if (!range.bytes)
            continue;
          std::string label =
              name + (range.kind & Write ? "'s write" : "'s read");
          if (!stillThere(range.p, range.bytes, label.c_str(), code, report))
            return false;
          if (race.empty())
            race = recordOperationAccess(context, range.p, range.bytes,
                                         range.kind, name.c_str());
        }
        work();
        if (race.empty())
          return true;
        code = kLaunchFailure;
        report = race;
        return false;
      });
}

std::string recordOperationAccess(OpContext &context, const void *p,
                                  uint64_t bytes, uint8_t kind,
                                  const char *what) {
  if (!racesEnabled() || bytes == 0)
    return std::string();
  Region region;
  std::string why;
  auto address = reinterpret_cast<uintptr_t>(p);
  if (!findMemory(address, bytes, region, why) || !region.shadow)
    return std::string();
  Accessor accessor;
  accessor.clock = &context.clock;
  std::memset(&accessor.self, 0, sizeof(accessor.self));
  accessor.self.lane = context.lane;
  accessor.self.seq = context.seq;
  accessor.self.block = kNoBlock;
  accessor.self.rank = processRank() & 0xFF;
  uint32_t hash = kernelHash(what);
  nameKernel(hash, what);
  accessor.self.kernel = hash;
  char label[96];
  std::snprintf(label, sizeof(label), "a %s at 0x%llx", region.label,
                static_cast<unsigned long long>(region.base));
  return checkAccess(region.shadow, address - region.base, bytes, kind,
                     accessor, label);
}

/// The locked synchronization slot of `address`; null when there is none,
/// with `*full` (if given) set when its buffer's slots ran out (what was
/// released to it is then lost).
static SyncSlot *slotAt(const void *address, bool create,
                        bool *full = nullptr) {
  Region region;
  std::string why;
  auto a = reinterpret_cast<uintptr_t>(address);
  if (!findMemory(a, 4, region, why))
    return nullptr;
  if (!region.pool)
    return lockLocalSlot(a, create);
  SyncSlot *slot = lockSlot(*region.pool, a - region.base + 1, create);
  if (full)
    *full = !slot && region.pool->overflowed.load();
  return slot;
}

void releaseAt(OpContext &context, const void *address) {
  if (!racesEnabled())
    return;
  if (SyncSlot *slot = slotAt(address, true)) {
    releaseTo(*slot, context.clock, 4, context.device);
    unlockSlot(slot);
  }
}

void acquireAt(OpContext &context, const void *address) {
  if (!racesEnabled())
    return;
  bool full = false;
  if (SyncSlot *slot = slotAt(address, false, &full)) {
    acquireFrom(*slot, context.clock, 4, context.device);
    unlockSlot(slot);
  } else if (full) {
    context.clock.overflowed = 1;
  }
}

//===----------------------------------------------------------------------===//
// Streams.h
//===----------------------------------------------------------------------===//

void *createStream(int priority, bool nonBlocking) {
  Stream *stream = newStream(priority, nonBlocking, false);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.streams[stream] = stream;
  return stream;
}

bool validStream(void *handle) { return !handle || asStream(handle); }

int destroyStream(void *handle) {
  State &s = state();
  Stream *stream;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto found = s.streams.find(handle);
    if (!handle || found == s.streams.end())
      return 400;
    stream = found->second;
    s.streams.erase(found);
    s.lanesInUse &= ~(1u << (stream->lane % kLanesPerRank));
  }
  {
    std::lock_guard<std::mutex> lock(stream->mutex);
    stream->stop = true;
  }
  stream->wake.notify_all();
  if (stream->worker.joinable())
    stream->worker.join();
  hostLearns(stream->clock);
  delete stream;
  return 0;
}

int queryStream(void *handle) {
  Stream *stream = asStream(handle);
  if (!stream)
    return 400;
  State &s = state();
  if (s.failed.load())
    return s.error.load();
  std::lock_guard<std::mutex> lock(stream->mutex);
  if (stream->completed < stream->enqueued)
    return 600; // cudaErrorNotReady
  hostLearns(stream->clock);
  return 0;
}

int synchronizeDevice() {
  std::vector<void *> handles{nullptr};
  {
    State &s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    for (auto &[handle, stream] : s.streams)
      handles.push_back(handle);
  }
  for (void *handle : handles)
    synchronize(handle);
  return deviceError();
}

Event *createEvent(bool timing) {
  auto event = std::make_shared<Event>();
  event->timing = timing;
  event->clock.clear();
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.events[event.get()] = event;
  return event.get();
}

static std::shared_ptr<Event> findEvent(Event *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto found = s.events.find(event);
  return found == s.events.end() ? nullptr : found->second;
}

bool timingEvent(Event *handle) {
  std::shared_ptr<Event> event = findEvent(handle);
  return event && event->timing;
}

int destroyEvent(Event *event) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.events.erase(event) ? 0 : 400;
}

int recordEvent(Event *handle, void *stream) {
  std::shared_ptr<Event> event = findEvent(handle);
  if (!event || !validStream(stream))
    return 400;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    ticket = ++event->recorded;
  }
  return enqueue(stream, "cudaEventRecord",
                 [event, ticket](OpContext &context, int &, std::string &) {
                   {
                     std::lock_guard<std::mutex> lock(event->mutex);
                     if (ticket > event->completed) {
                       event->completed = ticket;
                       event->clock = context.clock;
                       event->time = std::chrono::steady_clock::now();
                     }
                   }
                   event->done.notify_all();
                   return true;
                 });
}

int streamWaitEvent(void *stream, Event *handle) {
  std::shared_ptr<Event> event = findEvent(handle);
  if (!event || !validStream(stream))
    return 400;
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    ticket = event->recorded;
  }
  if (ticket == 0)
    return 0; // never recorded: nothing to wait for
  return enqueue(stream, "cudaStreamWaitEvent",
                 [event, ticket](OpContext &context, int &, std::string &) {
                   std::unique_lock<std::mutex> lock(event->mutex);
                   while (event->completed < ticket) {
                     if (context.cancelled.load())
                       return true;
                     event->done.wait_for(lock, std::chrono::milliseconds(50));
                   }
                   context.clock.join(event->clock);
                   return true;
                 });
}

int queryEvent(Event *handle) {
  std::shared_ptr<Event> event = findEvent(handle);
  if (!event)
    return 400;
  if (int error = deviceError())
    return error;
  std::lock_guard<std::mutex> lock(event->mutex);
  if (event->completed < event->recorded)
    return 600;
  hostLearns(event->clock);
  return 0;
}

int synchronizeEvent(Event *handle) {
  std::shared_ptr<Event> event = findEvent(handle);
  if (!event)
    return 400;
  std::unique_lock<std::mutex> lock(event->mutex);
  uint64_t target = event->recorded;
  while (event->completed < target && !deviceError())
    event->done.wait_for(lock, std::chrono::milliseconds(50));
  hostLearns(event->clock);
  return deviceError();
}

int elapsedTime(float *ms, Event *start, Event *end) {
  std::shared_ptr<Event> a = findEvent(start), b = findEvent(end);
  if (!ms || !a || !b || !a->timing || !b->timing)
    return 400;
  std::lock_guard<std::mutex> lockA(a->mutex);
  std::unique_lock<std::mutex> lockB(b->mutex, std::defer_lock);
  if (a != b)
    lockB.lock();
  if (!a->recorded || !b->recorded || a->completed < a->recorded ||
      b->completed < b->recorded)
    return 600;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return 0;
}

} // namespace braid::emu
