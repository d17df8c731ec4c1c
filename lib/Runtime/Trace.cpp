//===- Trace.cpp - Timeline recording of one rank -------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Trace.h"

#include "Diagnostics.h"

// The libraries are built with hidden visibility; the ABI is exported.
#pragma GCC visibility push(default)
#include "braid/Runtime/braid_rt.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace braid::rt {

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string jsonEscape(const std::string &text) {
  std::string result;
  result.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '"':
      result += "\\\"";
      break;
    case '\\':
      result += "\\\\";
      break;
    case '\n':
      result += "\\n";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20)
        result += formatString("\\u%04x", static_cast<unsigned>(c));
      else
        result += c;
    }
  }
  return result;
}

void Tracer::begin(int64_t startNs, bool computeGaps) {
  std::lock_guard<std::mutex> lock(mutex);
  events.clear();
  recordComputeGaps = computeGaps;
  originNs = startNs;
  lastCallEndNs = startNs;
  isActive.store(true, std::memory_order_release);
}

void Tracer::addEvent(Track track, int64_t startNs, int64_t endNs,
                      std::string name, std::string args, int64_t bytes,
                      int64_t flops) {
  if (!active())
    return;
  if (track == Track::Kernel && (bytes || flops))
    args += formatString("%s\"bytes\":%lld,\"flops\":%lld",
                         args.empty() ? "" : ",", static_cast<long long>(bytes),
                         static_cast<long long>(flops));
  std::lock_guard<std::mutex> lock(mutex);
  events.push_back(Event{track, startNs, std::max(startNs, endNs),
                         std::move(name), std::move(args), bytes, flops});
}

void Tracer::callBegin(int64_t now) {
  if (active() && recordComputeGaps && now > lastCallEndNs)
    addEvent(Track::Compute, lastCallEndNs, now, "compute");
}

void Tracer::callEnd(int64_t now) { lastCallEndNs = now; }

void Tracer::kernelBegin(int64_t now, const char *name, int64_t bytes,
                         int64_t flops) {
  kernel = PendingKernel{now, name ? name : "kernel", bytes, flops};
}

void Tracer::kernelEnd(int64_t now) {
  // A kernel whose begin came before the recording started is not one of
  // the recorded run's.
  if (!kernel.name || kernel.startNs < originNs)
    return;
  std::string args = formatString("\"bytes\":%lld,\"flops\":%lld",
                                  static_cast<long long>(kernel.bytes),
                                  static_cast<long long>(kernel.flops));
  {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(Event{Track::Kernel, kernel.startNs,
                           std::max(kernel.startNs, now), kernel.name,
                           std::move(args), kernel.bytes, kernel.flops});
  }
  kernel = PendingKernel();
}

namespace {

/// One kernel's line of a rank's profile summary.
struct KernelTotals {
  int64_t calls = 0;
  int64_t ns = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
};

/// Kernels' totals by name, in the order of their first addition.
struct KernelTable {
  std::vector<std::pair<std::string, KernelTotals>> rows;
  std::unordered_map<std::string, size_t> index;

  void add(const std::string &name, const KernelTotals &more) {
    auto [it, inserted] = index.try_emplace(name, rows.size());
    if (inserted)
      rows.push_back({name, KernelTotals()});
    KernelTotals &totals = rows[it->second].second;
    totals.calls += more.calls;
    totals.ns += more.ns;
    totals.bytes += more.bytes;
    totals.flops += more.flops;
  }
};

/// A rank's summary for Tracer::printProfile, one line each:
///   S <span ns> <compute ns> <wait ns>
///   K <calls> <ns> <bytes> <flops> <name to the end of the line>
std::string summarize(const KernelTable &kernels, int64_t spanNs,
                      int64_t computeNs, int64_t waitNs) {
  std::string text = formatString(
      "S %lld %lld %lld\n", static_cast<long long>(spanNs),
      static_cast<long long>(computeNs), static_cast<long long>(waitNs));
  for (const auto &[name, totals] : kernels.rows)
    text += formatString(
        "K %lld %lld %lld %lld %s\n", static_cast<long long>(totals.calls),
        static_cast<long long>(totals.ns), static_cast<long long>(totals.bytes),
        static_cast<long long>(totals.flops), name.c_str());
  return text;
}

} // namespace

std::string Tracer::finish(int rank, std::string *profile) {
  int64_t endNs = nowNs();
  if (active()) {
    // The work between the last runtime call and the end of tracing is a
    // compute step like any other.
    callBegin(endNs);
  }
  kernel = PendingKernel();
  isActive.store(false, std::memory_order_release);

  std::vector<Event> recorded;
  {
    std::lock_guard<std::mutex> lock(mutex);
    recorded.swap(events);
  }
  std::stable_sort(
      recorded.begin(), recorded.end(),
      [](const Event &a, const Event &b) { return a.startNs < b.startNs; });

  // Requests overlap (a ring step's send and receive are in flight
  // together), and trace viewers only draw properly nested slices on one
  // thread. Spread comm events over as many lanes as needed so that no two
  // on a lane overlap; lane k becomes tid 1 + k.
  std::vector<int64_t> laneEnds;
  std::vector<int> tids(recorded.size(), 0);
  for (size_t i = 0; i < recorded.size(); ++i) {
    if (recorded[i].track != Track::Comm)
      continue;
    size_t lane = 0;
    while (lane < laneEnds.size() && laneEnds[lane] > recorded[i].startNs)
      ++lane;
    if (lane == laneEnds.size())
      laneEnds.push_back(0);
    laneEnds[lane] = recorded[i].endNs;
    tids[i] = 1 + static_cast<int>(lane);
  }

  if (profile) {
    // Kernels by name (a name is a kernel at one location: one shared by
    // the layers is a row per layer) in the order of their first call.
    KernelTable kernels;
    int64_t computeNs = 0, waitNs = 0;
    for (const Event &event : recorded) {
      int64_t ns = event.endNs - event.startNs;
      if (event.track == Track::Kernel) {
        kernels.add(event.name, KernelTotals{1, ns, event.bytes, event.flops});
      } else if (event.track == Track::Compute) {
        if (event.name == "compute")
          computeNs += ns;
        else if (event.name.rfind("wait ", 0) == 0 ||
                 event.name.rfind("signal_wait", 0) == 0)
          waitNs += ns;
      }
    }
    // The run lasted until tracing ended; on the cuda backend, whose
    // events are device times, until its last event.
    int64_t lastNs = recordComputeGaps ? endNs : originNs;
    for (const Event &event : recorded)
      lastNs = std::max(lastNs, event.endNs);
    *profile = summarize(kernels, lastNs - originNs, computeNs, waitNs);
  }

  std::string out;
  auto append = [&](const std::string &object) {
    if (!out.empty())
      out += ",\n";
    out += object;
  };
  append(formatString("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,"
                      "\"tid\":0,\"args\":{\"name\":\"rank %d\"}}",
                      rank, rank));
  append(formatString("{\"name\":\"process_sort_index\",\"ph\":\"M\","
                      "\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                      rank, rank));
  // The comm track exists even when nothing was sent, so that every rank
  // shows the same two tracks.
  size_t numLanes = std::max<size_t>(1, laneEnds.size());
  for (size_t tid = 0; tid <= numLanes; ++tid) {
    std::string name = tid == 0   ? "compute"
                       : tid == 1 ? "comm"
                                  : formatString("comm %zu", tid);
    append(formatString("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
                        "\"tid\":%zu,\"args\":{\"name\":\"%s\"}}",
                        rank, tid, name.c_str()));
    append(formatString("{\"name\":\"thread_sort_index\",\"ph\":\"M\","
                        "\"pid\":%d,\"tid\":%zu,\"args\":{\"sort_index\":%zu}}",
                        rank, tid, tid));
  }
  for (size_t i = 0; i < recorded.size(); ++i) {
    const Event &event = recorded[i];
    double ts = static_cast<double>(event.startNs - originNs) / 1000.0;
    double dur = static_cast<double>(event.endNs - event.startNs) / 1000.0;
    append(formatString(
        "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
        "\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}",
        jsonEscape(event.name).c_str(),
        event.track == Track::Comm     ? "comm"
        : event.track == Track::Kernel ? "kernel"
                                       : "compute",
        rank, tids[i], ts, dur, event.args.c_str()));
  }
  return out;
}

std::string Tracer::gather(const std::string &local, MPI_Comm comm, int rank,
                           int size, const char *separator) {
  const char *context = "braid_rt_trace_end (gathering the trace)";
  if (local.size() > static_cast<size_t>(INT_MAX))
    fatalf("%s: this rank's trace is %s, more than MPI can send at once",
           context, formatBytes(static_cast<int64_t>(local.size())).c_str());
  int length = static_cast<int>(local.size());
  std::vector<int> lengths(rank == 0 ? size : 0);
  checkMPI(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm),
           "MPI_Gather", context);
  std::vector<int> displacements;
  std::string all;
  if (rank == 0) {
    int64_t total = 0;
    displacements.resize(size);
    for (int i = 0; i < size; ++i) {
      displacements[i] = static_cast<int>(total);
      total += lengths[i];
      if (total > INT_MAX)
        fatalf("%s: the merged trace exceeds 2 GiB", context);
    }
    all.resize(static_cast<size_t>(total));
  }
  checkMPI(MPI_Gatherv(local.data(), length, MPI_CHAR, all.data(),
                       lengths.data(), displacements.data(), MPI_CHAR, 0, comm),
           "MPI_Gatherv", context);
  if (rank != 0)
    return std::string();
  // Join the per-rank texts.
  std::string merged;
  merged.reserve(all.size() + static_cast<size_t>(size) * 2);
  for (int i = 0; i < size; ++i) {
    if (lengths[i] == 0)
      continue;
    if (!merged.empty())
      merged += separator;
    merged.append(all, static_cast<size_t>(displacements[i]),
                  static_cast<size_t>(lengths[i]));
  }
  return merged;
}

void Tracer::printProfile(const std::string &summaries, int ranks, FILE *out) {
  // Sums over the ranks, kernels in the order rank 0 first called them.
  KernelTable table;
  int64_t spanNs = 0, computeNs = 0, waitNs = 0;
  size_t begin = 0;
  while (begin < summaries.size()) {
    size_t end = summaries.find('\n', begin);
    if (end == std::string::npos)
      end = summaries.size();
    std::string line = summaries.substr(begin, end - begin);
    begin = end + 1;
    long long a = 0, b = 0, c = 0, d = 0;
    int nameAt = 0;
    if (std::sscanf(line.c_str(), "S %lld %lld %lld", &a, &b, &c) == 3) {
      spanNs += a;
      computeNs += b;
      waitNs += c;
    } else if (std::sscanf(line.c_str(), "K %lld %lld %lld %lld %n", &a, &b, &c,
                           &d, &nameAt) == 4 &&
               nameAt > 0) {
      table.add(line.substr(static_cast<size_t>(nameAt)),
                KernelTotals{a, b, c, d});
    }
  }
  std::vector<std::pair<std::string, KernelTotals>> &kernels = table.rows;
  std::stable_sort(
      kernels.begin(), kernels.end(),
      [](const auto &x, const auto &y) { return x.second.ns > y.second.ns; });
  double n = std::max(1, ranks);
  double runMs = static_cast<double>(spanNs) / n * 1e-6;
  auto share = [&](int64_t ns) {
    return spanNs > 0
               ? 100.0 * static_cast<double>(ns) / static_cast<double>(spanNs)
               : 0.0;
  };
  int64_t kernelNs = 0;
  std::fprintf(out,
               "profile of the traced run: %d ranks, %.3f ms each (kernel "
               "calls and times are means over the ranks)\n",
               ranks, runMs);
  std::fprintf(out, "%9s %10s %6s %14s  %s\n", "calls", "total ms", "% run",
               "rate", "kernel");
  for (const auto &[name, totals] : kernels) {
    kernelNs += totals.ns;
    double seconds = static_cast<double>(totals.ns) * 1e-9;
    std::string rate;
    if (seconds > 0 && totals.flops > 0)
      rate = formatString("%.1f GFLOP/s",
                          static_cast<double>(totals.flops) / seconds * 1e-9);
    else if (seconds > 0 && totals.bytes > 0)
      rate = formatString("%.1f GB/s",
                          static_cast<double>(totals.bytes) / seconds * 1e-9);
    std::fprintf(out, "%9.6g %10.3f %6.1f %14s  %s\n",
                 static_cast<double>(totals.calls) / n,
                 static_cast<double>(totals.ns) / n * 1e-6, share(totals.ns),
                 rate.c_str(), name.c_str());
  }
  // The cpu backend's compute steps hold its kernels; the cuda backend
  // records none (its host does not compute).
  if (computeNs > 0) {
    int64_t outside = std::max<int64_t>(0, computeNs - kernelNs);
    std::fprintf(out, "%9s %10.3f %6.1f %14s  %s\n", "",
                 static_cast<double>(outside) / n * 1e-6, share(outside), "",
                 "(compute outside kernels)");
  }
  std::fprintf(out, "%9s %10.3f %6.1f %14s  %s\n", "",
               static_cast<double>(waitNs) / n * 1e-6, share(waitNs), "",
               "(waiting for transfers)");
  std::fflush(out);
}

void Tracer::deliver(const char *path, const std::string &merged,
                     const std::string *summaries, int ranks) {
  if (path)
    write(path, merged);
  if (summaries)
    printProfile(*summaries, ranks, stdout);
}

void Tracer::write(const std::string &path, const std::string &events) {
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    fatalf("braid_rt_trace_end: cannot write the trace to %s: %s", path.c_str(),
           std::strerror(errno));
  std::string text = "{\"traceEvents\":[\n";
  text += events;
  text += "\n],\n\"displayTimeUnit\":\"ms\"}\n";
  size_t written = std::fwrite(text.data(), 1, text.size(), file);
  int closeError = std::fclose(file);
  if (written != text.size() || closeError != 0)
    fatalf("braid_rt_trace_end: cannot write the trace to %s: %s", path.c_str(),
           std::strerror(errno));
}

} // namespace braid::rt

// One definition for both runtimes, over their braid_rt_trace_finish.
void braid_rt_trace_end(const char *path) {
  if (!path || !*path)
    braid::rt::fatal("braid_rt_trace_end: no path given");
  braid_rt_trace_finish(path, 0);
}
