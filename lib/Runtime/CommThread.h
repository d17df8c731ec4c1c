//===- CommThread.h - The communication thread of a rank --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Every MPI call after initialization happens on one thread per process, the
// comm stream. Compiled code runs on the calling (compute) thread and only
// enqueues requests; the comm thread posts them as nonblocking MPI
// operations and keeps testing them, so transfers progress while the compute
// thread computes (MPI only moves data inside MPI calls). Funnelling all MPI
// traffic through one thread also means the runtime never depends on how
// well the MPI library handles concurrent callers.
//
// Ranks are often oversubscribed (4 ranks on 2 cores), so neither thread
// spins: the comm thread polls briefly (yielding the core) and then backs off
// to sleeps while requests are in flight, and blocks on a condition variable
// when it has nothing to do; waiters block on a condition variable until
// their request completes. See the constants in CommThread.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_COMMTHREAD_H
#define BRAID_RUNTIME_COMMTHREAD_H

#include "Front.h"
#include "Reductions.h"

#include <mpi.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace braid::rt {

class Tracer;

/// One operation from submission until its braid_rt_wait: a checked
/// Transfer (or a barrier or task) and what MPI needs for it.
struct Request : Transfer {
  MPI_Comm comm = MPI_COMM_NULL;
  int tag = 0;
  /// Reductions: the MPI datatype and operator.
  ReductionType mpi;

  // Tasks.
  std::function<void()> task;
  std::string taskName;

  // Owned by the comm thread while in flight.
  MPI_Request mpiRequest = MPI_REQUEST_NULL;
  std::unique_ptr<char[]> scratch; // A copy of a source that aliases dst.
  /// The unit of byte messages: MPI_BYTE, or a derived type that this
  /// request owns for messages beyond MPI's int counts.
  MPI_Datatype messageType = MPI_BYTE;
  bool ownsMessageType = false;
  /// Whether MPI needs frequent polls to move its data (see run()).
  bool large = false;

  int64_t submitNs = 0;
  int64_t completeNs = 0;
  bool traced = false;
  /// Guarded by CommThread::mutex.
  bool done = false;

  /// Bytes this rank moves, for names ("1.0 MiB").
  int64_t payloadBytes() const;
  /// Transfer's texts, or the task's name.
  std::string describe() const;
  std::string context() const;
  std::string traceName() const;
};

class CommThread {
public:
  CommThread(Tracer &tracer, double timeoutSeconds);
  ~CommThread();

  void start();
  /// Lets the thread finish what is in flight and joins it.
  void stop();

  void setTimeout(double seconds);
  double timeout() const;

  /// Hands a request to the comm thread; returns its handle (> 0).
  int64_t submit(std::unique_ptr<Request> request);

  /// Blocks until the request has completed, then forgets its handle; aborts
  /// after the timeout or for a handle that is not outstanding. Returns the
  /// request's trace name when `traceName` is set.
  void wait(int64_t handle, std::string *traceName = nullptr);

  /// Runs `function` on the comm thread and waits for it; `name` describes
  /// it in a timeout message ("the creation of group ...").
  void runSync(std::string name, std::function<void()> function);

  /// Number of handles not yet waited; `first` describes the oldest.
  size_t outstanding(std::string *first) const;

private:
  void run();
  void post(Request &request);
  /// Tests the active requests; returns whether any completed.
  bool progress();

  Tracer &tracer;
  std::atomic<double> timeoutSeconds;

  mutable std::mutex mutex;
  std::condition_variable workAvailable; // The comm thread sleeps on it.
  std::condition_variable requestDone;   // Waiters sleep on it.
  std::deque<Request *> pending;         // Submitted, not yet posted.
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests;
  int64_t nextHandle = 1;
  bool stopping = false;
  std::thread thread;

  // Comm thread only: the posted requests, in parallel arrays for
  // MPI_Testsome.
  std::vector<MPI_Request> active;
  std::vector<Request *> activeOwners;
  std::vector<int> completedIndices;
  std::vector<MPI_Status> statuses;
  int largeInFlight = 0;
};

} // namespace braid::rt

#endif // BRAID_RUNTIME_COMMTHREAD_H
