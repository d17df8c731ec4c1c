//===- braid-run.cpp - Compiles and runs a Braid program --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// braid-run IN.mlir|ARTIFACT.so --backend=cpu|cuda --ranks=N [options]
//
// The user-facing runner. It compiles an .mlir program with the
// braid-compile next to it (or takes an artifact braid-compile made),
// starts it on N ranks as `mpirun -np N braid-exec ARTIFACT.so ...` (with
// --backend=cuda: braid-exec-cuda, under mpirun or, with --loopback=N, as
// one process running N ranks on one GPU), and
// with --check also runs the program compiled with overlap=off and fuse=off
// (neither schedules nor fusion) on the same
// inputs and compares every result of every rank.
//
// Started by a job someone else launched (one rank of `mpirun braid-run
// ...`), it compiles into a directory of its own and becomes braid-exec
// (execv), so that the process mpirun started is the rank.
//
// It is plain C++ with BraidArtifact: it only launches processes and reads
// .npy files, so it needs no LLVM, MLIR or MPI library of its own.
//
//===----------------------------------------------------------------------===//

#include "braid/Options/Options.h"
#include "braid/Runtime/Artifact.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace braid::artifact;
namespace fs = std::filesystem;

namespace {

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

const char *const usageLine =
    "usage: braid-run IN.mlir|ARTIFACT.so [--backend=cpu|cuda] [--ranks=N] "
    "[options]\n";

const char *const usageDetails =
    "\n"
    "Compiles a Braid program (an .mlir file, with the braid-compile next to\n"
    "braid-run) or takes one braid-compile compiled (ARTIFACT.so, with\n"
    "ARTIFACT.so.manifest next to it), and runs it on N ranks with mpirun and\n"
    "braid-exec. Started by mpirun itself (mpirun -np N braid-run ...), each\n"
    "rank compiles the program and then runs as that rank.\n"
    "\n"
    "options (--opt=VALUE or --opt VALUE):\n"
    "  --backend=B           where to run: cpu (default; MPI ranks) or cuda\n"
    "                        (one GPU per rank, with braid-exec-cuda)\n"
    "  --loopback=N          cuda only: run the N ranks as threads of one\n"
    "                        process on one GPU (for measurements), without\n"
    "                        mpirun\n"
    "  --ranks=N             ranks to run on (default: as many as the\n"
    "                        program's grid has)\n"
    "  --entry=NAME          the function to compile (default: main, or the\n"
    "                        only public function)\n"
    "  --input=@PATH         an input .npy file, once per argument in order;\n"
    "                        {rank} in PATH is the rank (default: random)\n"
    "  --output=@PATH        where to write a result, once per result;\n"
    "                        without {rank} in PATH only rank 0's is written\n"
    "  --seed=S              seed of the random inputs (default 0)\n"
    "  --check               also run the program compiled with --overlap=off\n"
    "                        --fuse=off --quantize-all-gather=off on the same\n"
    "                        inputs and compare every result of every rank\n"
    "                        (needs an .mlir input; a quantized build is\n"
    "                        compared within the error bound it reports)\n"
    "  --trace=FILE.json     write a Chrome trace of the last run\n"
    "  --profile             print a table of the last run's kernels: calls,\n"
    "                        time, share of the run, GFLOP/s or GB/s\n"
    "  --warmup=N            untimed runs before the timed ones (default 0)\n"
    "  --repeat=N            timed runs; prints their median if N > 1\n"
    "  --keep=DIR            compile (and with --check, run) into DIR and\n"
    "                        keep it (default: a temporary directory, removed\n"
    "                        at exit)\n"
    "  -v                    print the commands braid-run runs\n"
    "  -h, --help            print this text\n"
    "\n"
    "Every option of braid-compile (but -o and --emit; --target is\n"
    "--backend) is taken too and passed on to it; --timeout goes to the\n"
    "runner. They are listed below.\n"
    "\n"
    "environment: BRAID_COMPILE, BRAID_EXEC and BRAID_EXEC_CUDA name the "
    "tools\n"
    "to use instead of those next to braid-run.\n";

/// The options of the model braid-run takes, for --help: each with its
/// values or kind and its default.
std::string modelHelp() {
  std::string text;
  for (const braid::options::Info &info : braid::options::all()) {
    if (!info.in(braid::options::Scope::CompileAndRun) ||
        std::string_view(info.flag) == "target" ||
        std::string_view(info.flag) == "emit")
      continue;
    std::string def = info.defaultValue();
    text += format("  --%s=%s\n      %s; %s (default: %s)\n", info.flag,
                   info.kind == braid::options::Kind::Enum     ? "MODE"
                   : info.kind == braid::options::Kind::Bool   ? "BOOL"
                   : info.kind == braid::options::Kind::String ? "TEXT"
                                                               : "N",
                   info.help, info.expected().c_str(),
                   def.empty() ? "none" : def.c_str());
  }
  return text;
}

/// Under a job someone else launched, every rank sees the same usage and
/// setup errors; only rank 0 prints them.
bool quiet = false;

void error(const std::string &message) {
  if (!quiet)
    std::fprintf(stderr, "braid-run: error: %s\n", message.c_str());
}

bool verbose = false;

/// A command line as a user could paste it into a shell.
std::string commandString(const std::vector<std::string> &argv) {
  std::string text;
  for (const std::string &arg : argv) {
    if (!text.empty())
      text += ' ';
    bool plain =
        !arg.empty() &&
        arg.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789@%+=:,./_-") == std::string::npos;
    if (plain) {
      text += arg;
      continue;
    }
    text += '\'';
    for (char c : arg)
      text += c == '\'' ? std::string("'\\''") : std::string(1, c);
    text += '\'';
  }
  return text;
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

struct Options {
  std::string program;
  std::string backend = "cpu";
  bool backendGiven = false;
  int64_t ranks = 0;    // 0: as many as the manifest says.
  int64_t loopback = 0; // cuda: ranks as threads of one process; 0: off.
  std::string entry;
  /// Paths without the '@'.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  /// Passed to braid-exec as given (validated here); empty: not given.
  std::string seed, trace, warmup, repeat;
  bool check = false;
  bool profile = false;
  /// The options model's options given (braid-compile's, the runner's):
  /// their values, and their flags in the order given.
  braid::Options model;
  std::vector<std::string> given;
  std::string keep;
  bool help = false;

  bool has(const char *flag) const {
    return std::find(given.begin(), given.end(), flag) != given.end();
  }
  /// The overlap, fusion and quantization of the program as asked for, as
  /// --check names it.
  std::string modes() const {
    std::string text = std::string("overlap=") +
                       braid::options::spelling(model.overlap) +
                       " fuse=" + braid::options::spelling(model.fuse);
    if (model.quantizeAllGather != braid::QuantizeMode::Off)
      text += std::string(" quantize-all-gather=") +
              braid::options::spelling(model.quantizeAllGather);
    return text;
  }
};

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Parses the command line; returns an error message or "".
std::string parseOptions(int argc, char **argv, Options &options) {
  static const char *const withValue[] = {
      "--backend", "--ranks",  "--input",  "--output", "--seed",
      "--trace",   "--warmup", "--repeat", "--keep",   "--loopback"};
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      continue;
    }
    if (arg == "-v" || arg == "--verbose") {
      verbose = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (!options.program.empty())
        return "more than one program given ('" + options.program + "', '" +
               arg + "')";
      options.program = arg;
      continue;
    }
    size_t equals = arg.find('=');
    std::string name = arg.substr(0, equals);
    if (name == "--check" || name == "--profile") {
      if (equals != std::string::npos)
        return name + " takes no value";
      (name == "--check" ? options.check : options.profile) = true;
      continue;
    }
    // The options model's: braid-compile's, passed on, and the runner's.
    const braid::options::Info *modelOption =
        name.size() > 2 && name[0] == '-' && name[1] == '-'
            ? braid::options::find(std::string_view(name).substr(2))
            : nullptr;
    if (modelOption && !modelOption->in(braid::options::Scope::CompileAndRun))
      modelOption = nullptr;
    if (name == "--target")
      return "--target is braid-compile's; braid-run takes --backend=cpu|cuda";
    if (name == "--emit" || name == "-o")
      return name + " is braid-compile's; braid-run compiles a library and "
                    "runs it";
    if (modelOption) {
      std::string value;
      if (equals != std::string::npos)
        value = arg.substr(equals + 1);
      else if (modelOption->kind == braid::options::Kind::Bool)
        value = "true";
      else if (i + 1 == argc)
        return name + " expects a value";
      else
        value = argv[++i];
      std::string problem;
      if (!braid::options::set(options.model, modelOption->flag, value,
                               problem))
        return problem;
      if (!options.has(modelOption->flag))
        options.given.push_back(modelOption->flag);
      continue;
    }
    if (std::find(std::begin(withValue), std::end(withValue), name) ==
        std::end(withValue))
      return "unknown option '" + arg + "'";
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else {
      if (i + 1 == argc)
        return name + " expects a value";
      value = argv[++i];
    }
    auto expected = [&](const std::string &what) {
      return name + " expects " + what + ", got '" + value + "'";
    };
    int64_t number;
    if (name == "--backend") {
      if (value != "cpu" && value != "cuda")
        return expected("cpu or cuda");
      options.backend = value;
      options.backendGiven = true;
    } else if (name == "--loopback") {
      if (!parseInt(value, number) || number < 1)
        return expected("a positive integer");
      options.loopback = number;
    } else if (name == "--ranks") {
      if (!parseInt(value, number) || number < 1)
        return expected("a positive integer");
      options.ranks = number;
    } else if (name == "--input" || name == "--output") {
      if (value.size() < 2 || value[0] != '@')
        return expected("@PATH");
      (name == "--input" ? options.inputs : options.outputs)
          .push_back(value.substr(1));
    } else if (name == "--seed") {
      // braid-exec takes any uint64_t; 18 digits cover every useful seed.
      if (!parseInt(value, number))
        return expected("a non-negative integer");
      options.seed = value;
    } else if (name == "--trace") {
      if (value.empty())
        return expected("a file name");
      options.trace = value;
    } else if (name == "--warmup") {
      if (!parseInt(value, number))
        return expected("a non-negative integer");
      options.warmup = value;
    } else if (name == "--repeat") {
      if (!parseInt(value, number) || number < 1)
        return expected("a positive integer");
      options.repeat = value;
    } else if (name == "--keep") {
      if (value.empty())
        return expected("a directory");
      options.keep = value;
    }
  }
  if (options.help)
    return std::string();
  if (options.program.empty())
    return "no program given (an .mlir file or a compiled .so)";
  // A compiled program runs where it was compiled for, unless told.
  if (!options.backendGiven && endsWith(options.program, ".so")) {
    Manifest manifest;
    if (readManifest(options.program + ".manifest", manifest).empty() &&
        manifest.target == "cuda")
      options.backend = "cuda";
  }
  if (options.loopback && options.backend != "cuda")
    return "--loopback needs --backend=cuda";
  options.model.target =
      options.backend == "cuda" ? braid::Target::Cuda : braid::Target::Cpu;
  std::string problem;
  if (!braid::options::validate(options.model, problem))
    return problem;
  return std::string();
}

//===----------------------------------------------------------------------===//
// Processes
//===----------------------------------------------------------------------===//

/// The child braid-run waits for, and a signal that asked braid-run to stop
/// meanwhile (both for the signal handler).
volatile sig_atomic_t childPid = 0;
volatile sig_atomic_t pendingSignal = 0;

/// The directory to remove at exit (a temporary one; never --keep's).
std::string temporaryDirectory;

void removeTemporaryDirectory() {
  if (temporaryDirectory.empty())
    return;
  std::error_code ignored;
  fs::remove_all(temporaryDirectory, ignored);
  temporaryDirectory.clear();
}

extern "C" void onSignal(int signal, siginfo_t *info, void *) {
  pendingSignal = signal;
  // A terminal's ^C reaches the whole foreground process group, mpirun
  // included, and a second SIGINT makes mpirun give up its orderly
  // shutdown; forward only what a process sent to braid-run alone.
  if (childPid > 0 && info && info->si_code <= 0)
    kill(childPid, signal);
}

/// The signals that stop braid-run (after its child).
sigset_t stopSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&set, signal);
  return set;
}

void installSignalHandlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = onSignal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP})
    sigaction(signal, &action, nullptr);
}

/// Stops braid-run the way the signal it received asks, once the child it
/// was waiting for is gone and the temporary directory removed.
void exitIfSignalled() {
  int signal = pendingSignal;
  if (!signal)
    return;
  removeTemporaryDirectory();
  std::signal(signal, SIG_DFL);
  raise(signal);
  std::_Exit(128 + signal);
}

bool isExecutable(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

/// `name` found on PATH, or "".
std::string findOnPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string entries = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t end = entries.find(':', start);
    std::string dir = entries.substr(
        start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutable(candidate))
      return candidate;
    if (end == std::string::npos)
      return std::string();
    start = end + 1;
  }
}

/// The directory of braid-run's own executable (symbolic links resolved, so
/// that a link to braid-run still finds its neighbours).
std::string ownDirectory() {
  char buffer[PATH_MAX];
  ssize_t length = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (length <= 0)
    return std::string();
  std::string path(buffer, static_cast<size_t>(length));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

/// The tool `name`: $variable if set (a path, or a name looked up on PATH),
/// else the one next to braid-run. Returns "" after printing an error.
std::string findTool(const std::string &name, const char *variable) {
  if (const char *value = std::getenv(variable); value && *value) {
    std::string tool = value;
    if (tool.find('/') == std::string::npos)
      tool = findOnPath(tool);
    if (!tool.empty() && isExecutable(tool))
      return tool;
    error(format("%s=%s is not an executable file", variable, value));
    return std::string();
  }
  std::string tool = ownDirectory() + "/" + name;
  if (isExecutable(tool))
    return tool;
  error(format("cannot find %s next to braid-run (no executable %s); set %s "
               "to its path",
               name.c_str(), tool.c_str(), variable));
  return std::string();
}

std::vector<char *> argvOf(const std::vector<std::string> &args) {
  std::vector<char *> argv;
  for (const std::string &arg : args)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  return argv;
}

/// Whether every child of `pid` has ended without being reaped (is a
/// zombie), and then whether any failed; nullopt while one runs, or when
/// there is none.
std::optional<bool> childrenEnded(pid_t pid) {
  std::vector<std::string> children;
  std::error_code ec;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto &task : fs::directory_iterator(tasks, ec)) {
    std::ifstream list(task.path() / "children");
    for (std::string child; list >> child;)
      children.push_back(child);
  }
  if (children.empty())
    return std::nullopt;
  bool failed = false;
  for (const std::string &child : children) {
    std::ifstream stat("/proc/" + child + "/stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(") ") == std::string::npos)
      return std::nullopt;
    // After the command's name: the state (field 3), ..., exit_code (52).
    std::istringstream fields(line.substr(line.rfind(") ") + 2));
    std::vector<std::string> field{std::istream_iterator<std::string>(fields),
                                   std::istream_iterator<std::string>()};
    if (field.empty() || field[0] != "Z")
      return std::nullopt;
    failed = failed || (field.size() > 49 && field[49] != "0");
  }
  return failed;
}

/// Runs `args` (args[0] is a path) and waits for it. Its stderr goes to
/// `stderrPath` if that is not empty; `environment` holds NAME=VALUE words
/// set for it alone. Returns its exit code, or -signal if a signal killed
/// it, or 127 if it could not be started. With `launcher` (mpirun), a
/// process whose children (the ranks) have all ended, unreaped, for 10
/// seconds is killed and returns 1 if any rank failed, else 0: Open MPI
/// 4.1's mpirun sometimes never returns once its ranks end by MPI_Abort on
/// a loaded machine (one run in about 40 of two ranks aborting alike).
int runProcess(const std::vector<std::string> &args,
               const std::string &stderrPath = std::string(),
               const std::vector<std::string> &environment = {},
               bool launcher = false) {
  exitIfSignalled();
  if (verbose && !quiet)
    std::fprintf(stderr, "braid-run: %s\n", commandString(args).c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char *> argv = argvOf(args);
  // Blocked until childPid is set, so that no signal falls between the fork
  // and the handler knowing whom to forward it to.
  sigset_t blocked = stopSignals(), previous;
  sigprocmask(SIG_BLOCK, &blocked, &previous);
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    error(format("cannot start %s: %s", args[0].c_str(), std::strerror(errno)));
    return 127;
  }
  if (pid == 0) {
    // Default dispositions before unblocking: a signal meant for the child
    // must not end up in braid-run's handler in the child.
    for (int signal : {SIGINT, SIGTERM, SIGHUP})
      std::signal(signal, SIG_DFL);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    for (const std::string &word : environment) {
      size_t equals = word.find('=');
      setenv(word.substr(0, equals).c_str(), word.c_str() + equals + 1, 1);
    }
    if (!stderrPath.empty()) {
      int fd = open(stderrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
      }
    }
    execv(argv[0], argv.data());
    std::fprintf(stderr, "braid-run: error: cannot run %s: %s\n",
                 args[0].c_str(), std::strerror(errno));
    _exit(127);
  }
  childPid = pid;
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  int status = 0;
  if (launcher) {
    int endedPolls = 0; // 0.2 s each
    for (;;) {
      pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR))
        break;
      std::optional<bool> failed = childrenEnded(pid);
      endedPolls = failed ? endedPolls + 1 : 0;
      if (endedPolls >= 50) {
        if (!quiet)
          std::fprintf(stderr,
                       "braid-run: every rank has ended but %s has not "
                       "returned for 10 s (an Open MPI hang); ending it\n",
                       args[0].c_str());
        kill(pid, SIGKILL);
        while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
        }
        childPid = 0;
        exitIfSignalled();
        return *failed ? 1 : 0;
      }
      usleep(200000);
    }
  } else {
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  childPid = 0;
  exitIfSignalled();
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return -WTERMSIG(status);
  return 1;
}

/// Has a detached process remove `dir` once this process, and whatever it
/// execs into, is gone: it blocks reading a pipe whose write end this
/// process keeps open through execv. Best effort: without it the directory
/// stays behind.
void removeWhenGone(const std::string &dir) {
  int fds[2];
  if (pipe(fds) != 0)
    return;
  pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (child == 0) {
    // Fork again so that the remover is nobody's child to reap, and give it
    // a session of its own so that killing the rank's process group on
    // teardown spares it.
    if (fork() != 0)
      _exit(0);
    setsid();
    // mpirun waits until every holder of a rank's stdout and stderr closes
    // them; the remover must not be one.
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && null >= 0; ++fd)
      dup2(null, fd);
    long maxFd = std::min(sysconf(_SC_OPEN_MAX), 65536L);
    for (int fd = 3; fd < maxFd; ++fd)
      if (fd != fds[0])
        close(fd);
    char byte;
    while (read(fds[0], &byte, 1) < 0 && errno == EINTR) {
    }
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    _exit(0);
  }
  close(fds[0]);
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  // fds[1] stays open, without FD_CLOEXEC, in braid-exec.
}

//===----------------------------------------------------------------------===//
// Compiling
//===----------------------------------------------------------------------===//

/// Creates `dir` and its parents as needed; false after an error.
bool makeDirectory(const std::string &dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    error(format("cannot create the directory %s: %s", dir.c_str(),
                 ec.message().c_str()));
    return false;
  }
  return true;
}

/// A fresh temporary directory named `prefix`.XXXXXX; "" after an error.
std::string makeTemporaryDirectory(const char *prefix = "braid-run") {
  const char *base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base && *base ? base : "/tmp") + "/" + prefix + ".XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (!mkdtemp(buffer.data())) {
    error(format("cannot create a temporary directory %s: %s", pattern.c_str(),
                 std::strerror(errno)));
    return std::string();
  }
  return buffer.data();
}

/// Compiles the program into `artifact` with the compile options given
/// (those of `model`; `report`: where the report goes, if anywhere).
/// Returns 0, or the exit code to leave with.
int compile(const Options &options, const braid::Options &model,
            const std::string &compiler, const std::string &artifact,
            const std::string &report,
            const std::string &stderrPath = std::string()) {
  std::vector<std::string> args = {
      compiler, options.program, "--target=" + options.backend, "-o", artifact};
  // Each compile option as given: braid-compile resolves the defaults
  // (the target's preset, ...) as every entry point does.
  for (const std::string &flag : options.given) {
    const braid::options::Info *info = braid::options::find(flag);
    if (flag != "report" && info->in(braid::options::Scope::Compile))
      args.push_back("--" + flag + "=" + info->get(model));
  }
  if (!report.empty())
    args.push_back("--report=" + report);
  int status = runProcess(args, stderrPath);
  if (status == 0)
    return 0;
  // braid-compile has said what is wrong; a crash has not.
  if (status < 0)
    error(format("braid-compile was killed by signal %d (%s) compiling %s",
                 -status, strsignal(-status), options.program.c_str()));
  return 1;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

/// Checks the command line against what the program takes and returns,
/// before any rank starts: a mistake here is one clear line rather than
/// every rank's error and mpirun's report of the failed job.
bool checkAgainstManifest(const Options &options, const Manifest &manifest) {
  if (options.loopback && options.loopback != manifest.ranks) {
    error(format("--loopback=%lld, but %s runs on %lld ranks (the size of its "
                 "grid)",
                 static_cast<long long>(options.loopback),
                 options.program.c_str(),
                 static_cast<long long>(manifest.ranks)));
    return false;
  }
  if (options.ranks && options.ranks != manifest.ranks) {
    error(format("--ranks=%lld, but %s runs on %lld ranks (the size of its "
                 "grid)",
                 static_cast<long long>(options.ranks), options.program.c_str(),
                 static_cast<long long>(manifest.ranks)));
    return false;
  }
  // braid-exec's messages, as it would print them.
  if (!options.inputs.empty() &&
      options.inputs.size() != manifest.args.size()) {
    error(format("%zu --input given, but %s takes %zu arguments (give one "
                 "per argument, or none for random inputs)",
                 options.inputs.size(), manifest.entry.c_str(),
                 manifest.args.size()));
    return false;
  }
  if (!options.outputs.empty() &&
      options.outputs.size() != manifest.results.size()) {
    error(format("%zu --output given, but %s has %zu results (give one per "
                 "result, or none)",
                 options.outputs.size(), manifest.entry.c_str(),
                 manifest.results.size()));
    return false;
  }
  return true;
}

/// braid-exec's command line for `artifact`, writing its results to
/// `outputs` (paths without '@').
std::vector<std::string> execCommand(const Options &options,
                                     const std::string &exec,
                                     const std::string &artifact,
                                     const std::vector<std::string> &outputs,
                                     bool timed) {
  std::vector<std::string> args = {exec, artifact};
  if (options.loopback)
    args.push_back("--loopback=" + std::to_string(options.loopback));
  for (const std::string &input : options.inputs)
    args.push_back("--input=@" + input);
  for (const std::string &output : outputs)
    args.push_back("--output=@" + output);
  if (!options.seed.empty())
    args.push_back("--seed=" + options.seed);
  // The runner's options of the model.
  for (const std::string &flag : options.given) {
    const braid::options::Info *info = braid::options::find(flag);
    if (info->in(braid::options::Scope::Run))
      args.push_back("--" + flag + "=" + info->get(options.model));
  }
  if (timed) {
    if (!options.trace.empty())
      args.push_back("--trace=" + options.trace);
    if (options.profile)
      args.push_back("--profile");
    if (!options.warmup.empty())
      args.push_back("--warmup=" + options.warmup);
    if (!options.repeat.empty())
      args.push_back("--repeat=" + options.repeat);
  }
  return args;
}

/// Runs `execArgs` on `ranks` ranks with mpirun; returns the exit code to
/// leave with.
int launch(const std::string &mpirun, int64_t ranks,
           const std::vector<std::string> &execArgs) {
  // Loopback: one process runs every rank (mpirun is empty then).
  if (mpirun.empty()) {
    int status = runProcess(execArgs);
    if (status < 0) {
      error(format("%s was killed by signal %d (%s)", execArgs[0].c_str(),
                   -status, strsignal(-status)));
      return 1;
    }
    return status;
  }
  std::vector<std::string> args = {mpirun};
  // Open MPI refuses root without it; containers and CI run as root.
  if (geteuid() == 0)
    args.push_back("--allow-run-as-root");
  // More ranks than cores is the normal case for tests and small machines.
  args.push_back("--oversubscribe");
  args.push_back("-np");
  args.push_back(std::to_string(ranks));
  args.insert(args.end(), execArgs.begin(), execArgs.end());
  // Open MPI keeps a job's session directory under $TMPDIR/ompi.HOST.UID/,
  // which every job of the user shares and the last one to end removes:
  // two braid-runs at once (test workers, a user's scripts) raced on it.
  // The job gets a base of its own, removed when it is done; its ranks
  // inherit it as their TMPDIR. It lives in braid-run's temporary
  // directory, or is that directory, so that a signal removes it too.
  bool own = temporaryDirectory.empty();
  std::string session = own ? makeTemporaryDirectory("braid-mpi")
                            : temporaryDirectory + "/mpi-session";
  if (session.empty() || (!own && !makeDirectory(session)))
    return 1;
  if (own)
    temporaryDirectory = session;
  int status =
      runProcess(args, std::string(), {"TMPDIR=" + session}, /*launcher=*/true);
  if (own) {
    removeTemporaryDirectory();
  } else {
    std::error_code ignored;
    fs::remove_all(session, ignored);
  }
  if (status < 0) {
    error(format("mpirun was killed by signal %d (%s)", -status,
                 strsignal(-status)));
    return 1;
  }
  return status;
}

//===----------------------------------------------------------------------===//
// --check
//===----------------------------------------------------------------------===//

/// Relative tolerance of --check per element type: room for rounding, since
/// an overlapped program adds partial results (chunks, ring steps) in
/// another order than the plain one, and the narrow types round each step.
double relativeTolerance(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return 1e-9;
  case DType::F32:
    return 1e-4;
  case DType::F16:
    return 1e-2;
  case DType::BF16:
    return 3e-2;
  default:
    return 0; // Integers and i1 must match exactly.
  }
}

/// An element printed with enough digits to tell it from its neighbours.
std::string elementString(DType dtype, const char *data, int64_t index) {
  const char *element = data + index * info(dtype).size;
  auto integer = [&](auto value) {
    std::memcpy(&value, element, sizeof(value));
    return std::to_string(value);
  };
  switch (dtype) {
  case DType::I8:
    return integer(int8_t());
  case DType::I16:
    return integer(int16_t());
  case DType::I32:
    return integer(int32_t());
  case DType::I64:
    return integer(int64_t());
  case DType::I1:
    return *element ? "1" : "0";
  default:
    break;
  }
  int digits = dtype == DType::F64   ? 17
               : dtype == DType::F32 ? 9
               : dtype == DType::F16 ? 5
                                     : 4;
  return format("%.*g", digits, elementToDouble(dtype, data, index));
}

/// "[i, j, ...]": the position of the element at row-major `index`.
std::string indexString(const std::vector<int64_t> &shape, int64_t index) {
  std::vector<int64_t> position(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    position[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return shapeString(position);
}

struct Comparison {
  int64_t mismatches = 0;
  double maxAbsDiff = 0;
  double maxRelDiff = 0;
  /// The worst mismatch: the furthest beyond its tolerance.
  bool haveWorst = false;
  double worstExcess = 0, worstDiff = 0, worstTolerance = 0;
  std::string worst;
};

/// Compares result `output` of `rank`: `actual` (the overlapped run) against
/// `reference` (overlap=off), element by element in double precision.
/// `quantized` is the relative error bound of the checked program's
/// quantized collectives (0: none): it widens floating-point tolerances by
/// four times the bound, room for a quantized operand to pass through a
/// product or two (docs/rationale/quantization.md, "--check of quantized
/// builds").
void compareTensor(const TensorType &type, const char *actual,
                   const char *reference, int64_t rank, int64_t output,
                   const std::string &mode, double quantized,
                   Comparison &comparison) {
  int64_t count = type.numElements();
  double rtol = relativeTolerance(type.dtype);
  if (rtol > 0)
    rtol += 4 * quantized;
  bool exact = !isFloatingPoint(type.dtype);
  // The tensor's scale: elements near zero (sums that cancel) get an
  // absolute slack proportional to the largest element instead of a
  // relative one they cannot meet.
  double scale = 0;
  for (int64_t i = 0; i < count; ++i) {
    double b = std::fabs(elementToDouble(type.dtype, reference, i));
    if (std::isfinite(b))
      scale = std::max(scale, b);
  }
  double atol = rtol * scale;
  size_t elementSize = static_cast<size_t>(info(type.dtype).size);
  for (int64_t i = 0; i < count; ++i) {
    double a = elementToDouble(type.dtype, actual, i);
    double b = elementToDouble(type.dtype, reference, i);
    double diff, tolerance = atol + rtol * std::fabs(b);
    bool ok;
    if (exact) {
      // Bytes rather than doubles: i64 beyond 2^53 does not survive the
      // conversion.
      ok = std::memcmp(actual + i * elementSize, reference + i * elementSize,
                       elementSize) == 0;
      diff = std::fabs(a - b);
    } else if (std::isnan(a) || std::isnan(b)) {
      ok = std::isnan(a) && std::isnan(b);
      diff = ok ? 0 : INFINITY;
    } else if (a == b) {
      ok = true; // Also equal infinities, whose difference is NaN.
      diff = 0;
    } else {
      diff = std::fabs(a - b);
      ok = diff <= tolerance;
    }
    comparison.maxAbsDiff = std::max(comparison.maxAbsDiff, diff);
    // Relative to what the tolerance allows for: |diff| <= rtol * (scale +
    // |b|) is the test, so this is directly comparable to rtol.
    double denominator = scale + std::fabs(b);
    double rel = diff == 0         ? 0
                 : denominator > 0 ? diff / denominator
                                   : INFINITY;
    comparison.maxRelDiff = std::max(comparison.maxRelDiff, rel);
    if (ok)
      continue;
    ++comparison.mismatches;
    double excess = tolerance > 0 ? diff / tolerance : INFINITY;
    if (comparison.haveWorst &&
        (excess < comparison.worstExcess ||
         (excess == comparison.worstExcess && diff <= comparison.worstDiff)))
      continue;
    comparison.haveWorst = true;
    comparison.worstExcess = excess;
    comparison.worstDiff = diff;
    comparison.worstTolerance = tolerance;
    comparison.worst = format(
        "rank %lld output %lld element %s: %s gives %s, overlap=off fuse=off "
        "gives %s (|diff| %.3g > tolerance %.3g)",
        static_cast<long long>(rank), static_cast<long long>(output),
        indexString(type.shape, i).c_str(), mode.c_str(),
        elementString(type.dtype, actual, i).c_str(),
        elementString(type.dtype, reference, i).c_str(), diff, tolerance);
  }
}

/// Copies `from` to `to`; returns an error message or "".
std::string copyFile(const std::string &from, const std::string &to) {
  std::error_code ec;
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  return ec ? ec.message() : std::string();
}

/// The results of rank `rank` of a --check run, as braid-exec writes them.
std::string checkOutputPattern(const std::string &dir, const std::string &mode,
                               size_t output) {
  return format("%s/out-%s/r{rank}-o%zu.npy", dir.c_str(), mode.c_str(),
                output);
}

/// Compiles twice, runs twice, compares. Returns the exit code.
int runCheck(const Options &options, const std::string &dir,
             const std::string &compiler, const std::string &exec,
             const std::string &mpirun) {
  const std::string mode = options.modes();
  std::string artifact = dir + "/prog.so";
  std::string reference = dir + "/prog-off.so";
  std::string report =
      options.has("report") ? options.model.report : dir + "/report.json";
  if (int status = compile(options, options.model, compiler, artifact, report))
    return status;
  braid::Options plain = options.model;
  plain.overlap = braid::OverlapMode::Off;
  plain.fuse = braid::FuseMode::Off;
  plain.quantizeAllGather = braid::QuantizeMode::Off;
  Options referenceOptions = options;
  for (const char *flag : {"overlap", "fuse", "quantize-all-gather"})
    if (!referenceOptions.has(flag))
      referenceOptions.given.push_back(flag);
  if (int status = compile(referenceOptions, plain, compiler, reference, ""))
    return status;
  Manifest manifest, referenceManifest;
  std::string problem = readManifest(artifact + ".manifest", manifest);
  if (problem.empty())
    problem = readManifest(reference + ".manifest", referenceManifest);
  if (!problem.empty()) {
    error(problem);
    return 1;
  }
  // A quantized build differs from the plain one by at most the bound its
  // manifest states.
  double bound = manifest.quantized;
  auto signature = [](const Manifest &m) {
    std::string text = m.entry + " " + std::to_string(m.ranks);
    for (const TensorType &type : m.args)
      text += " arg " + type.str();
    for (const TensorType &type : m.results)
      text += " result " + type.str();
    return text;
  };
  if (signature(manifest) != signature(referenceManifest)) {
    error(format("the overlap=%s and overlap=off builds of %s disagree on "
                 "the entry point (%s, %s): a compiler bug",
                 mode.c_str(), options.program.c_str(), manifest.path.c_str(),
                 referenceManifest.path.c_str()));
    return 1;
  }
  if (!checkAgainstManifest(options, manifest))
    return 1;
  int64_t ranks = manifest.ranks;
  size_t numResults = manifest.results.size();
  // The runs' results go to out-checked/ (the program as asked for) and
  // out-reference/ (overlap=off, fuse=off).
  for (const std::string &which :
       {std::string("checked"), std::string("reference")}) {
    if (!makeDirectory(dir + "/out-" + which))
      return 1;
    std::vector<std::string> outputs;
    for (size_t k = 0; k < numResults; ++k)
      outputs.push_back(checkOutputPattern(dir, which, k));
    // --trace, --profile, --warmup and --repeat are about the checked
    // program.
    bool checked = which == "checked";
    int status =
        launch(mpirun, ranks,
               execCommand(options, exec, checked ? artifact : reference,
                           outputs, checked));
    if (status != 0) {
      error(format("the %s run failed (exit %d)",
                   checked ? mode.c_str() : "overlap=off fuse=off", status));
      return status;
    }
  }

  // The user's --output get the overlapped run's results, mismatch or not:
  // they are what one looks at to see what went wrong.
  for (size_t k = 0; k < options.outputs.size(); ++k)
    for (int64_t rank = 0; rank < ranks; ++rank) {
      // Like braid-exec: without {rank} only rank 0's result is written.
      if (options.outputs[k].find("{rank}") == std::string::npos && rank)
        continue;
      std::string to = substituteRank(options.outputs[k], rank);
      std::string from =
          substituteRank(checkOutputPattern(dir, "checked", k), rank);
      std::string problem = copyFile(from, to);
      if (!problem.empty()) {
        error(format("output %zu (%s): cannot write: %s", k, to.c_str(),
                     problem.c_str()));
        return 1;
      }
    }

  Comparison comparison;
  for (int64_t rank = 0; rank < ranks; ++rank)
    for (size_t k = 0; k < numResults; ++k) {
      const TensorType &type = manifest.results[k];
      std::vector<char> data[2];
      const std::string modes[2] = {"checked", "reference"};
      for (int which = 0; which < 2; ++which) {
        std::string path =
            substituteRank(checkOutputPattern(dir, modes[which], k), rank);
        NpyHeader header;
        std::string found = readNpy(path, type, header, data[which]);
        if (!found.empty()) {
          error(format("result %zu of rank %lld of the %s run (%s): "
                       "expected %s, found %s",
                       k, static_cast<long long>(rank), modes[which].c_str(),
                       path.c_str(), type.str().c_str(), found.c_str()));
          return 1;
        }
      }
      compareTensor(type, data[0].data(), data[1].data(), rank,
                    static_cast<int64_t>(k), mode, bound, comparison);
    }
  if (comparison.mismatches) {
    std::fprintf(stderr, "braid-run: check FAILED: %s\n",
                 comparison.worst.c_str());
    std::fprintf(stderr,
                 "braid-run: %lld element%s out of tolerance over %lld ranks "
                 "and %zu outputs\n",
                 static_cast<long long>(comparison.mismatches),
                 comparison.mismatches == 1 ? "" : "s",
                 static_cast<long long>(ranks), numResults);
    return 1;
  }
  std::string within =
      bound > 0 ? format(", within 4 x the reported bound %.3g", bound)
                : std::string();
  std::printf("braid-run: check passed: %s matches overlap=off fuse=off on "
              "%lld ranks, %zu outputs (max abs diff %.3g, max rel diff "
              "%.3g%s)\n",
              mode.c_str(), static_cast<long long>(ranks), numResults,
              comparison.maxAbsDiff, comparison.maxRelDiff, within.c_str());
  return 0;
}

//===----------------------------------------------------------------------===//
// Driver
//===----------------------------------------------------------------------===//

/// The rank and size of the MPI job this process is one rank of, if
/// someone else's mpirun (Open MPI, or a PMI launcher) started it.
bool underMpi(int64_t &rank, int64_t &size) {
  for (auto [sizeVariable, rankVariable] :
       {std::pair<const char *, const char *>{"OMPI_COMM_WORLD_SIZE",
                                              "OMPI_COMM_WORLD_RANK"},
        {"PMI_SIZE", "PMI_RANK"}}) {
    const char *sizeText = std::getenv(sizeVariable);
    if (!sizeText)
      continue;
    const char *rankText = std::getenv(rankVariable);
    if (!parseInt(sizeText, size))
      size = 0;
    if (!rankText || !parseInt(rankText, rank))
      rank = 0;
    return true;
  }
  return false;
}

enum class ProgramKind { Mlir, Artifact };

int run(int argc, char **argv) {
  int64_t mpiRank = 0, mpiSize = 0;
  bool inJob = underMpi(mpiRank, mpiSize);
  quiet = inJob && mpiRank != 0;

  Options options;
  std::string problem = parseOptions(argc, argv, options);
  if (!problem.empty()) {
    error(problem);
    if (!quiet)
      std::fprintf(stderr, "%s(braid-run --help lists the options)\n",
                   usageLine);
    return 1;
  }
  if (options.help) {
    if (!quiet)
      std::printf("%s%s%s", usageLine, usageDetails, modelHelp().c_str());
    return 0;
  }
  bool cuda = options.backend == "cuda";

  ProgramKind kind;
  if (endsWith(options.program, ".mlir")) {
    kind = ProgramKind::Mlir;
  } else if (endsWith(options.program, ".so")) {
    kind = ProgramKind::Artifact;
  } else {
    error(format("%s is neither an .mlir program nor a compiled .so "
                 "artifact (the name must end in .mlir or .so)",
                 options.program.c_str()));
    return 1;
  }
  if (access(options.program.c_str(), R_OK) != 0) {
    error(format("cannot read %s: %s", options.program.c_str(),
                 std::strerror(errno)));
    return 1;
  }
  if (kind == ProgramKind::Artifact) {
    // Options of the compiler would silently do nothing.
    std::string compileOnly = options.check           ? "--check"
                              : !options.keep.empty() ? "--keep"
                                                      : "";
    for (const std::string &flag : options.given)
      if (compileOnly.empty() &&
          !braid::options::find(flag)->in(braid::options::Scope::Run))
        compileOnly = "--" + flag;
    if (!compileOnly.empty()) {
      error(format("%s needs an .mlir program to compile; %s is compiled "
                   "already",
                   compileOnly.c_str(), options.program.c_str()));
      return 1;
    }
  }
  if (options.check && options.model.overlap == braid::OverlapMode::Off &&
      options.model.fuse == braid::FuseMode::Off &&
      options.model.quantizeAllGather == braid::QuantizeMode::Off) {
    error("--check compares against overlap=off, fuse=off and "
          "quantize-all-gather=off; choose another --overlap, --fuse or "
          "--quantize-all-gather");
    return 1;
  }
  if (options.check && inJob) {
    error("--check starts its own runs with mpirun; run braid-run itself, "
          "not under mpirun");
    return 1;
  }
  if (options.loopback && inJob) {
    error("--loopback runs every rank in one process; run braid-run itself, "
          "not under mpirun");
    return 1;
  }
  if (inJob && options.ranks && options.ranks != mpiSize) {
    error(format("--ranks=%lld, but this job has %lld ranks",
                 static_cast<long long>(options.ranks),
                 static_cast<long long>(mpiSize)));
    return 1;
  }

  // Every tool before any work, so that a missing one costs no compile.
  std::string exec;
  if (!cuda) {
    exec = findTool("braid-exec", "BRAID_EXEC");
  } else {
    const char *override = std::getenv("BRAID_EXEC_CUDA");
    std::string nextToUs = ownDirectory() + "/braid-exec-cuda";
    if ((!override || !*override) && !isExecutable(nextToUs)) {
      error(format("the cuda backend is not built in this configuration (no "
                   "%s; configure with the CUDA toolkit, or set "
                   "BRAID_EXEC_CUDA)",
                   nextToUs.c_str()));
      return 1;
    }
    exec = findTool("braid-exec-cuda", "BRAID_EXEC_CUDA");
  }
  if (exec.empty())
    return 1;
  std::string mpirun;
  if (!inJob && !options.loopback) {
    mpirun = findOnPath("mpirun");
    if (mpirun.empty()) {
      error("mpirun not found: install openmpi-bin");
      return 1;
    }
  }
  std::string compiler;
  if (kind == ProgramKind::Mlir) {
    compiler = findTool("braid-compile", "BRAID_COMPILE");
    if (compiler.empty())
      return 1;
  }

  // The working directory: --keep's, or a temporary one. Ranks of a job
  // each compile on their own, so each gets its own directory.
  std::string dir;
  if (kind == ProgramKind::Mlir) {
    if (!options.keep.empty()) {
      dir = options.keep;
      if (inJob)
        dir += "/rank" + std::to_string(mpiRank);
      if (!makeDirectory(dir))
        return 1;
    } else {
      dir = makeTemporaryDirectory();
      if (dir.empty())
        return 1;
      temporaryDirectory = dir;
    }
  }

  if (options.check)
    return runCheck(options, dir, compiler, exec, mpirun);

  std::string artifact = options.program;
  if (kind == ProgramKind::Mlir) {
    artifact = dir + "/prog.so";
    // Every rank would write the same report at once; rank 0's is the one.
    std::string report =
        inJob && mpiRank != 0 ? std::string() : options.model.report;
    // Other ranks' diagnostics repeat rank 0's; they go to a file.
    std::string log = quiet ? dir + "/compile.log" : std::string();
    if (int status =
            compile(options, options.model, compiler, artifact, report, log)) {
      if (quiet)
        std::fprintf(stderr, "braid-run: rank %lld: braid-compile failed\n",
                     static_cast<long long>(mpiRank));
      return status;
    }
  }

  Manifest manifest;
  problem = readManifest(artifact + ".manifest", manifest);
  if (!problem.empty()) {
    error(problem);
    return 1;
  }
  if (!manifest.target.empty() && manifest.target != options.backend) {
    error(format("%s was compiled for the %s target; run it with "
                 "--backend=%s",
                 options.program.c_str(), manifest.target.c_str(),
                 manifest.target.c_str()));
    return 1;
  }
  if (!options.model.entry.empty() && options.model.entry != manifest.entry) {
    error(format("--entry=%s, but %s's entry point is %s",
                 options.model.entry.c_str(), options.program.c_str(),
                 manifest.entry.c_str()));
    return 1;
  }
  if (!checkAgainstManifest(options, manifest))
    return 1;
  int64_t ranks = manifest.ranks;

  std::vector<std::string> execArgs =
      execCommand(options, exec, artifact, options.outputs, true);
  if (!inJob)
    return launch(mpirun, ranks, execArgs);

  // One rank of someone else's job: become braid-exec.
  if (!temporaryDirectory.empty()) {
    removeWhenGone(temporaryDirectory);
    temporaryDirectory.clear();
  }
  if (verbose && !quiet)
    std::fprintf(stderr, "braid-run: %s\n", commandString(execArgs).c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<char *> execArgv = argvOf(execArgs);
  execv(execArgv[0], execArgv.data());
  std::fprintf(stderr, "braid-run: error: cannot run %s: %s\n", exec.c_str(),
               std::strerror(errno));
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  installSignalHandlers();
  int status = run(argc, argv);
  removeTemporaryDirectory();
  exitIfSignalled();
  std::fflush(stdout);
  return status;
}
