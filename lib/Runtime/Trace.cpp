//===- Trace.cpp - Timeline recording of one rank -------------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Trace.h"

#include "Diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

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
                      std::string name, std::string args) {
  if (!active())
    return;
  std::lock_guard<std::mutex> lock(mutex);
  events.push_back(Event{track, startNs, std::max(startNs, endNs),
                         std::move(name), std::move(args)});
}

void Tracer::callBegin(int64_t now) {
  if (active() && recordComputeGaps && now > lastCallEndNs)
    addEvent(Track::Compute, lastCallEndNs, now, "compute");
}

void Tracer::callEnd(int64_t now) { lastCallEndNs = now; }

std::string Tracer::finish(int rank) {
  if (active()) {
    // The work between the last runtime call and the end of tracing is a
    // compute step like any other.
    callBegin(nowNs());
  }
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
        event.track == Track::Comm ? "comm" : "compute", rank, tids[i], ts, dur,
        event.args.c_str()));
  }
  return out;
}

std::string Tracer::gather(const std::string &local, MPI_Comm comm, int rank,
                           int size) {
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
  // Join the per-rank lists with commas.
  std::string merged;
  merged.reserve(all.size() + static_cast<size_t>(size) * 2);
  for (int i = 0; i < size; ++i) {
    if (lengths[i] == 0)
      continue;
    if (!merged.empty())
      merged += ",\n";
    merged.append(all, static_cast<size_t>(displacements[i]),
                  static_cast<size_t>(lengths[i]));
  }
  return merged;
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
