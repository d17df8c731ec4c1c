//===- CommThread.cpp - The communication thread of a rank ----------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "CommThread.h"

#include "Diagnostics.h"
#include "Groups.h"
#include "Trace.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <pthread.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

namespace braid::rt {

namespace {

/// A thread with nothing to do first polls for this long, yielding the core
/// between polls, before it sleeps: a sleep's wakeup costs 30-60 us on
/// virtual machines, longer than most small transfers take, while yielding
/// lets the other ranks' threads run on an oversubscribed machine.
constexpr int64_t spinNs = 50'000;
/// Sleeps between polls then double from the first to the longest of these,
/// so that a completion is noticed within ~64 us.
constexpr std::chrono::microseconds firstSleep(4);
constexpr std::chrono::microseconds longestSleep(64);
/// Each wakeup costs ~20-40 us of CPU on virtual machines, so polling every
/// 64 us still takes a quarter of a core from the ranks that compute. When
/// only small requests are in flight (sent eagerly, so that a poll merely
/// notices their progress) and nothing has completed for a while, the sleep
/// grows to an eighth of the idle time: a late peer is noticed at most 12.5%
/// later, and waiting for it costs a few percent of a core. Large transfers
/// keep the short sleeps because MPI pipelines their data only while polled.
constexpr int64_t idleFractionDivisor = 8;
constexpr std::chrono::microseconds longestIdleSleep(1000);
constexpr int64_t largeRequestBytes = 64 * 1024;
/// Timeouts beyond this are treated as "forever", which also keeps deadline
/// arithmetic on the steady clock from overflowing.
constexpr double foreverSeconds = 1e8;

const char *postCallName(OpKind kind) {
  switch (kind) {
  case OpKind::Send:
    return "MPI_Isend";
  case OpKind::Recv:
    return "MPI_Irecv";
  case OpKind::AllGather:
    return "MPI_Iallgather";
  case OpKind::ReduceScatter:
    return "MPI_Ireduce_scatter_block";
  case OpKind::AllReduce:
    return "MPI_Iallreduce";
  case OpKind::AllToAll:
    return "MPI_Ialltoall";
  case OpKind::Broadcast:
    return "MPI_Ibcast";
  case OpKind::Barrier:
    return "MPI_Ibarrier";
  case OpKind::Put:
  case OpKind::Task:
    break;
  }
  return "MPI";
}

bool overlaps(const void *a, int64_t aBytes, const void *b, int64_t bBytes) {
  if (aBytes <= 0 || bBytes <= 0)
    return false;
  auto x = reinterpret_cast<uintptr_t>(a);
  auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + static_cast<uintptr_t>(bBytes) &&
         y < x + static_cast<uintptr_t>(aBytes);
}

[[noreturn]] void failMPI(int rc, const char *call, const Request &request) {
  fatalf("%s failed in %s: %s", call, request.context().c_str(),
         mpiErrorString(rc).c_str());
}

void check(int rc, const char *call, const Request &request) {
  if (rc != MPI_SUCCESS)
    failMPI(rc, call, request);
}

/// MPI counts are ints; byte messages of 2 GiB and more travel as a count of
/// larger contiguous units. Both sides derive the unit from the same byte
/// count, so they agree on it.
struct ByteMessage {
  int count = 0;
  MPI_Datatype type = MPI_BYTE;
  bool owned = false;
};

ByteMessage byteMessage(int64_t bytes, const Request &request) {
  ByteMessage message;
  if (bytes <= INT_MAX) {
    message.count = static_cast<int>(bytes);
    return message;
  }
  for (int64_t unit = int64_t(1) << 30; unit >= 2; unit >>= 1) {
    if (bytes % unit != 0 || bytes / unit > INT_MAX)
      continue;
    check(MPI_Type_contiguous(static_cast<int>(unit), MPI_BYTE, &message.type),
          "MPI_Type_contiguous", request);
    check(MPI_Type_commit(&message.type), "MPI_Type_commit", request);
    message.count = static_cast<int>(bytes / unit);
    message.owned = true;
    return message;
  }
  fatalf("%s: a message of %lld bytes exceeds MPI's count limit and is not "
         "a multiple of a power of two that would bring it under",
         request.context().c_str(), static_cast<long long>(bytes));
}

int reductionCount(int64_t count, const Request &request) {
  if (count > INT_MAX)
    fatalf("%s: %lld elements exceed MPI's count limit of %d per operation",
           request.context().c_str(), static_cast<long long>(count), INT_MAX);
  return static_cast<int>(count);
}

} // namespace

//===----------------------------------------------------------------------===//
// Request
//===----------------------------------------------------------------------===//

int64_t Request::payloadBytes() const {
  return std::max(sourceBytes(), destinationBytes());
}

std::string Request::describe() const {
  return kind == OpKind::Task ? taskName : Transfer::describe();
}

std::string Request::context() const {
  return kind == OpKind::Task ? taskName : Transfer::context();
}

std::string Request::traceName() const {
  return kind == OpKind::Task ? taskName : Transfer::traceName();
}

//===----------------------------------------------------------------------===//
// CommThread
//===----------------------------------------------------------------------===//

CommThread::CommThread(Tracer &tracer, double timeoutSeconds)
    : tracer(tracer), timeoutSeconds(timeoutSeconds) {}

CommThread::~CommThread() {
  if (thread.joinable())
    stop();
}

void CommThread::start() {
  thread = std::thread([this] { run(); });
}

void CommThread::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  workAvailable.notify_one();
  if (thread.joinable())
    thread.join();
}

void CommThread::setTimeout(double seconds) { timeoutSeconds.store(seconds); }
double CommThread::timeout() const { return timeoutSeconds.load(); }

int64_t CommThread::submit(std::unique_ptr<Request> request) {
  request->submitNs = nowNs();
  request->traced = tracer.active() && request->kind != OpKind::Task;
  Request *raw = request.get();
  int64_t handle;
  {
    std::lock_guard<std::mutex> lock(mutex);
    handle = nextHandle++;
    requests.emplace(handle, std::move(request));
    pending.push_back(raw);
  }
  workAvailable.notify_one();
  return handle;
}

void CommThread::wait(int64_t handle, std::string *traceName) {
  int64_t startNs = nowNs();
  std::unique_lock<std::mutex> lock(mutex);
  auto it = requests.find(handle);
  if (it == requests.end()) {
    lock.unlock();
    fatalf("braid_rt_wait: request %lld is not outstanding (never returned "
           "by the runtime, or already waited)",
           static_cast<long long>(handle));
  }
  // Blocks at once rather than polling first: on an oversubscribed machine
  // a polling waiter would compete for the core with the comm thread that
  // has to complete its request.
  Request *request = it->second.get();
  if (!request->done) {
    double limit = timeout();
    auto isDone = [&] { return request->done; };
    if (limit >= foreverSeconds) {
      requestDone.wait(lock, isDone);
    } else {
      auto deadline = std::chrono::steady_clock::time_point(
                          std::chrono::nanoseconds(startNs)) +
                      std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::duration<double>(limit));
      if (!requestDone.wait_until(lock, deadline, isDone)) {
        std::string what = request->describe();
        lock.unlock();
        fatalf("timed out after %g s waiting for %s", limit, what.c_str());
      }
    }
  }
  if (traceName)
    *traceName = request->traceName();
  // Destroy the request outside the lock; the comm thread no longer refers
  // to it once it is done.
  it = requests.find(handle);
  std::unique_ptr<Request> finished = std::move(it->second);
  requests.erase(it);
  lock.unlock();
}

void CommThread::runSync(std::string name, std::function<void()> function) {
  auto request = std::make_unique<Request>();
  request->kind = OpKind::Task;
  request->taskName = std::move(name);
  request->task = std::move(function);
  wait(submit(std::move(request)));
}

size_t CommThread::outstanding(std::string *first) const {
  std::lock_guard<std::mutex> lock(mutex);
  if (first && !requests.empty()) {
    auto oldest = std::min_element(
        requests.begin(), requests.end(),
        [](const auto &a, const auto &b) { return a.first < b.first; });
    *first = oldest->second->describe();
  }
  return requests.size();
}

void CommThread::run() {
#ifdef __linux__
  // Names the thread in top -H, gdb and perf.
  pthread_setname_np(pthread_self(), "braid-comm");
  // The default 50 us timer slack would stretch the short backoff sleeps
  // to the longest one; 1 us keeps them what they say.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
#endif

  std::vector<Request *> toPost;
  // Start of the current stretch without any work (0: working).
  int64_t emptySinceNs = 0;
  // Start of the current stretch of polls that completed nothing, and how
  // many sleeps it has had.
  int64_t idleSinceNs = 0;
  unsigned sleeps = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      if (pending.empty() && active.empty()) {
        if (stopping)
          return;
        int64_t now = nowNs();
        if (emptySinceNs == 0)
          emptySinceNs = now;
        if (now - emptySinceNs < spinNs) {
          lock.unlock();
          std::this_thread::yield();
          continue;
        }
        // Nothing in flight: sleep until there is work; costs no CPU.
        workAvailable.wait(lock, [&] { return !pending.empty() || stopping; });
        continue;
      }
      emptySinceNs = 0;
      toPost.assign(pending.begin(), pending.end());
      pending.clear();
    }

    bool progressed = !toPost.empty();
    for (Request *request : toPost)
      post(*request);
    toPost.clear();
    if (!active.empty() && progress())
      progressed = true;
    if (progressed) {
      idleSinceNs = 0;
      continue;
    }

    int64_t now = nowNs();
    if (idleSinceNs == 0) {
      idleSinceNs = now;
      sleeps = 0;
    }
    if (now - idleSinceNs < spinNs) {
      std::this_thread::yield();
      continue;
    }
    std::chrono::microseconds sleep = std::min<std::chrono::microseconds>(
        firstSleep * (1u << std::min(sleeps++, 16u)), longestSleep);
    if (largeInFlight == 0) {
      std::chrono::microseconds idleShare((now - idleSinceNs) / 1000 /
                                          idleFractionDivisor);
      sleep = std::max(sleep, std::min(idleShare, longestIdleSleep));
    }
    // A submission ends the sleep early: new requests should be posted
    // promptly even while older ones are still in flight.
    std::unique_lock<std::mutex> lock(mutex);
    workAvailable.wait_for(lock, sleep,
                           [&] { return !pending.empty() || stopping; });
  }
}

void CommThread::post(Request &request) {
  if (request.kind == OpKind::Task || request.kind == OpKind::Put) {
    if (request.kind == OpKind::Task) {
      request.task();
    } else {
      if (request.bytes > 0)
        std::memcpy(request.dst, request.src,
                    static_cast<size_t>(request.bytes));
      // The data is visible to whoever sees the new flag value.
      if (request.flag)
        __atomic_fetch_add(static_cast<int32_t *>(request.flag), 1,
                           __ATOMIC_RELEASE);
      request.completeNs = nowNs();
      if (request.traced)
        tracer.addEvent(Track::Comm, request.submitNs, request.completeNs,
                        request.traceName(), request.traceArgs());
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      request.done = true;
    }
    requestDone.notify_all();
    return;
  }

  MPI_Comm comm = request.comm;
  MPI_Request *out = &request.mpiRequest;
  const char *call = postCallName(request.kind);
  int rc = MPI_SUCCESS;
  ByteMessage message;
  switch (request.kind) {
  case OpKind::Send:
    message = byteMessage(request.bytes, request);
    rc = MPI_Isend(request.src, message.count, message.type,
                   request.peerPosition, request.tag, comm, out);
    break;
  case OpKind::Recv:
    message = byteMessage(request.bytes, request);
    rc = MPI_Irecv(request.dst, message.count, message.type,
                   request.peerPosition, request.tag, comm, out);
    break;
  case OpKind::AllGather: {
    message = byteMessage(request.bytes, request);
    const void *send = request.src;
    int64_t total = request.bytes * request.groupSize;
    char *ownSlot = static_cast<char *>(request.dst) +
                    request.bytes * request.layout->position;
    if (send == ownSlot) {
      send = MPI_IN_PLACE;
    } else if (overlaps(send, request.bytes, request.dst, total)) {
      // MPI forbids aliasing other than MPI_IN_PLACE; keep a private copy.
      request.scratch.reset(new char[request.bytes]);
      std::memcpy(request.scratch.get(), send, request.bytes);
      send = request.scratch.get();
    }
    rc = MPI_Iallgather(send, message.count, message.type, request.dst,
                        message.count, message.type, comm, out);
    break;
  }
  case OpKind::AllToAll: {
    message = byteMessage(request.bytes, request);
    const void *send = request.src;
    int64_t total = request.bytes * request.groupSize;
    if (overlaps(send, total, request.dst, total)) {
      // MPI_IN_PLACE support for nonblocking all-to-all varies between MPI
      // versions; a private copy works everywhere.
      request.scratch.reset(new char[total]);
      std::memcpy(request.scratch.get(), send, total);
      send = request.scratch.get();
    }
    rc = MPI_Ialltoall(send, message.count, message.type, request.dst,
                       message.count, message.type, comm, out);
    break;
  }
  case OpKind::ReduceScatter: {
    int count = reductionCount(request.count, request);
    int64_t elementSize = request.elementSize;
    int64_t inBytes = request.count * request.groupSize * elementSize;
    const void *send = request.src;
    if (send == request.dst) {
      send = MPI_IN_PLACE; // The input is then read from dst.
    } else if (overlaps(send, inBytes, request.dst,
                        request.count * elementSize)) {
      request.scratch.reset(new char[inBytes]);
      std::memcpy(request.scratch.get(), send, inBytes);
      send = request.scratch.get();
    }
    rc = MPI_Ireduce_scatter_block(send, request.dst, count, request.mpi.type,
                                   request.mpi.op, comm, out);
    break;
  }
  case OpKind::AllReduce: {
    int count = reductionCount(request.count, request);
    int64_t bytes = request.count * request.elementSize;
    const void *send = request.src;
    if (send == request.dst) {
      send = MPI_IN_PLACE;
    } else if (overlaps(send, bytes, request.dst, bytes)) {
      request.scratch.reset(new char[bytes]);
      std::memcpy(request.scratch.get(), send, bytes);
      send = request.scratch.get();
    }
    rc = MPI_Iallreduce(send, request.dst, count, request.mpi.type,
                        request.mpi.op, comm, out);
    break;
  }
  case OpKind::Broadcast:
    message = byteMessage(request.bytes, request);
    if (request.layout->position == request.root && request.src != request.dst)
      std::memmove(request.dst, request.src, request.bytes);
    rc = MPI_Ibcast(request.dst, message.count, message.type,
                    static_cast<int>(request.root), comm, out);
    break;
  case OpKind::Barrier:
    rc = MPI_Ibarrier(comm, out);
    break;
  case OpKind::Put:
  case OpKind::Task:
    break;
  }
  check(rc, call, request);
  // Kept until completion: the status of a receive is read with it.
  request.messageType = message.type;
  request.ownsMessageType = message.owned;
  request.large = request.payloadBytes() > largeRequestBytes;
  largeInFlight += request.large;
  active.push_back(request.mpiRequest);
  activeOwners.push_back(&request);
}

bool CommThread::progress() {
  int numActive = static_cast<int>(active.size());
  completedIndices.resize(active.size());
  statuses.resize(active.size());
  int numCompleted = 0;
  int rc = MPI_Testsome(numActive, active.data(), &numCompleted,
                        completedIndices.data(), statuses.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
    fatalf("MPI_Testsome failed while progressing %d requests (the oldest: "
           "%s): %s",
           numActive, activeOwners.front()->context().c_str(),
           mpiErrorString(rc).c_str());
  if (numCompleted == MPI_UNDEFINED || numCompleted == 0)
    return false;

  int64_t now = nowNs();
  for (int i = 0; i < numCompleted; ++i) {
    Request &request = *activeOwners[completedIndices[i]];
    const MPI_Status &status = statuses[i];
    if (rc == MPI_ERR_IN_STATUS && status.MPI_ERROR != MPI_SUCCESS)
      failMPI(status.MPI_ERROR, postCallName(request.kind), request);
    if (request.kind == OpKind::Recv) {
      // A shorter message than expected is legal MPI but means the two
      // sides disagree about the transfer; the rest of dst would be stale.
      MPI_Count received = 0;
      check(MPI_Get_elements_x(&status, request.messageType, &received),
            "MPI_Get_elements_x", request);
      if (received != request.bytes)
        fatalf("%s: received %lld bytes but expected %lld (the sender's "
               "message has a different size)",
               request.context().c_str(), static_cast<long long>(received),
               static_cast<long long>(request.bytes));
    }
    request.completeNs = now;
    request.scratch.reset();
    largeInFlight -= request.large;
    if (request.ownsMessageType)
      check(MPI_Type_free(&request.messageType), "MPI_Type_free", request);
    request.ownsMessageType = false;
    if (request.traced)
      tracer.addEvent(Track::Comm, request.submitNs, request.completeNs,
                      request.traceName(), request.traceArgs());
  }

  // Testsome nulls the handles of completed requests; drop them while both
  // arrays still line up.
  std::vector<Request *> finished;
  finished.reserve(numCompleted);
  size_t kept = 0;
  for (size_t i = 0; i < active.size(); ++i) {
    if (active[i] == MPI_REQUEST_NULL) {
      finished.push_back(activeOwners[i]);
      continue;
    }
    active[kept] = active[i];
    activeOwners[kept] = activeOwners[i];
    ++kept;
  }
  active.resize(kept);
  activeOwners.resize(kept);

  {
    std::lock_guard<std::mutex> lock(mutex);
    for (Request *request : finished)
      request->done = true;
  }
  requestDone.notify_all();
  return true;
}

} // namespace braid::rt
