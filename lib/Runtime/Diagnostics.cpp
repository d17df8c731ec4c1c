//===- Diagnostics.cpp - Fatal errors of the Braid runtime ----------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "Diagnostics.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

namespace braid::rt {

static std::atomic<int> rankForMessages{-1};
static std::atomic<bool> mpiUsable{false};
static std::atomic<bool> failing{false};
static std::atomic<void (*)()> fatalHook{nullptr};
static thread_local int threadRankForMessages = -1;

void setDiagnosticRank(int rank) { rankForMessages.store(rank); }
int diagnosticRank() {
  return threadRankForMessages >= 0 ? threadRankForMessages
                                    : rankForMessages.load();
}
void setThreadDiagnosticRank(int rank) { threadRankForMessages = rank; }
void setFatalHook(void (*hook)()) { fatalHook.store(hook); }
void setMPIUsable(bool usable) { mpiUsable.store(usable); }

static std::string vformatString(const char *format, va_list args) {
  va_list copy;
  va_copy(copy, args);
  int length = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (length <= 0)
    return std::string();
  std::string result(static_cast<size_t>(length) + 1, '\0');
  std::vsnprintf(result.data(), result.size(), format, args);
  result.resize(static_cast<size_t>(length));
  return result;
}

std::string formatString(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::string result = vformatString(format, args);
  va_end(args);
  return result;
}

/// Waits (at most about `seconds`) until whoever reads `fd` has taken
/// everything written to it: the launcher's forwarder reading a rank's
/// stderr pipe or pseudo-terminal. MPI_Abort makes the launcher kill every
/// rank and tear its forwarding down, and a line still sitting in the pipe
/// then never reaches the user; the line that says what went wrong must be
/// read before anything aborts. Files and terminals return at once.
static void waitUntilRead(int fd, double seconds) {
  struct stat info;
  if (fstat(fd, &info) != 0)
    return;
  unsigned long request;
  if (S_ISFIFO(info.st_mode))
    request = FIONREAD; // bytes in the pipe, not yet read
  else if (S_ISSOCK(info.st_mode))
    request = SIOCOUTQ; // bytes not yet taken by the peer
  else if (S_ISCHR(info.st_mode) && isatty(fd))
    request = TIOCOUTQ; // a pseudo-terminal's output not yet read
  else
    return;
  const long stepNs = 2000000; // 2 ms
  for (long waited = 0; waited < static_cast<long>(seconds * 1e9);
       waited += stepNs) {
    int pending = 0;
    if (ioctl(fd, request, &pending) != 0 || pending <= 0)
      return;
    struct timespec step = {0, stepNs};
    nanosleep(&step, nullptr);
  }
}

void fatal(const std::string &message) {
  // A second failure (typically the comm thread noticing the abort of the
  // compute thread's request) must not print again or race MPI_Abort: park
  // this thread until the first one has taken the process down.
  if (failing.exchange(true)) {
    for (;;)
      pause();
  }
  int rank = diagnosticRank();
  // One write keeps the line whole when several ranks share a terminal.
  std::string line = rank >= 0 ? formatString("braid: rank %d: ", rank)
                               : std::string("braid: ");
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
  waitUntilRead(STDERR_FILENO, 2.0);
  waitUntilRead(STDOUT_FILENO, 2.0);
  if (void (*hook)() = fatalHook.load()) {
    // Should the hook hang, SIGALRM's default action still ends the process.
    alarm(30);
    hook();
  }
  if (mpiUsable.load()) {
    // MPI_Abort asks mpirun to kill every rank. Should that itself hang
    // (a broken launcher connection), SIGALRM's default action still ends
    // this process, which mpirun notices.
    alarm(30);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  // MPI_Abort does not return; _exit covers the cases where MPI is not (or
  // no longer) there, without running destructors that may block on the
  // communication thread.
  _exit(1);
}

/// A failed assertion of the compiled program (its `cf.assert`s: bounds
/// checks torch-mlir writes on gathers and indexing, among others); the
/// compiler calls this where abort() was (reportFailedAssertions).
extern "C" __attribute__((visibility("default"), noreturn)) void
braid_rt_assert_failed(const char *message) {
  fatal(std::string("a check in the program failed: ") +
        (message ? message : "(no message)") +
        " (an input out of the range the program accepts?)");
}

void fatalf(const char *format, ...) {
  va_list args;
  va_start(args, format);
  std::string message = vformatString(format, args);
  va_end(args);
  fatal(message);
}

std::string mpiErrorString(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS)
    return formatString("MPI error %d", rc);
  return std::string(text, static_cast<size_t>(length));
}

void checkMPI(int rc, const char *call, const std::string &context) {
  if (rc == MPI_SUCCESS)
    return;
  fatal(formatString("%s failed in %s: %s", call, context.c_str(),
                     mpiErrorString(rc).c_str()));
}

std::string formatBytes(int64_t bytes) {
  if (bytes < 1024)
    return formatString("%lld B", static_cast<long long>(bytes));
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  return formatString("%.1f %s", value, units[unit]);
}

} // namespace braid::rt
