//===- braid-exec.cpp - Runs a program compiled by Braid --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// One process per rank, started by `mpirun -np N braid-exec ARTIFACT.so ...`.
// Loads the artifact, feeds its entry point inputs (.npy files or seeded
// random data), writes its results as .npy files, and optionally times
// repeated runs and traces the last one. Links only the runtime (which it
// also uses for its own collectives), BraidArtifact (manifests and .npy
// files, shared with braid-run), MPI and libdl: no LLVM or MLIR.
//
// The same source builds braid-exec-cuda (BRAID_EXEC_CUDA), linked against
// the cuda runtime instead: the runner never touches program memory
// directly. Inputs are staged in host memory from braid_rt_host_alloc
// (pinned on the cuda backend) and copied into program memory from
// braid_rt_buffer_alloc (device memory) before every run, outside the
// timed region; results come back through braid_rt_copy_to_host and
// braid_rt_result_free. Runs are timed by braid_rt_timer_start/stop (CUDA
// events on the rank's compute stream on the cuda backend), the maximum
// over ranks per run. Its --loopback=N runs N logical ranks on one GPU,
// one thread each.
//
// Errors every rank sees alike (usage, manifest, rank count, loading the
// artifact) are agreed on with one all-reduce and reported once by rank 0,
// and every rank exits with 1. Errors of one rank (its input files) abort
// the whole job through braid_rt_abort.
//
//===----------------------------------------------------------------------===//

#include "braid/Runtime/Artifact.h"
#include "braid/Runtime/braid_rt.h"

#include "HalfFloat.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

using namespace braid::artifact;
using namespace braid::rt;

namespace {

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

/// Loads input `index` from `path` into `buffer` (expected.numBytes()
/// bytes); aborts the job on any mismatch.
void loadInput(int64_t index, const std::string &path,
               const TensorType &expected, char *buffer) {
  NpyHeader header;
  std::vector<char> data;
  std::string found = readNpy(path, expected, header, data);
  if (!found.empty())
    braid_rt_abort(format("input %lld (%s): expected %s, found %s",
                          static_cast<long long>(index), path.c_str(),
                          expected.str().c_str(), found.c_str())
                       .c_str());
  std::memcpy(buffer, data.data(), data.size());
}

//===----------------------------------------------------------------------===//
// Random inputs
//===----------------------------------------------------------------------===//

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Fills `buffer` deterministically from (seed, rank, argument). The values
/// are derived from the raw 64-bit stream rather than the std
/// distributions, whose algorithms differ between standard libraries.
void fillRandom(const TensorType &type, uint64_t seed, int64_t rank,
                int64_t argument, char *buffer) {
  uint64_t mixed =
      splitMix64(splitMix64(splitMix64(seed) ^ static_cast<uint64_t>(rank)) ^
                 static_cast<uint64_t>(argument));
  std::mt19937_64 engine(mixed);
  int64_t count = type.numElements();
  // Uniform in [-1, 1) with 53 random bits.
  auto uniform = [&] {
    return static_cast<double>(engine() >> 11) * 0x1.0p-52 - 1.0;
  };
  // Uniform in [0, 16): integer arguments are mostly indices (token ids,
  // positions, experts), and these are valid ones into any table of 16 or
  // more entries, which the program's own bounds checks would otherwise
  // stop.
  auto small = [&] { return static_cast<int64_t>(engine() >> 60); };
  for (int64_t i = 0; i < count; ++i) {
    switch (type.dtype) {
    case DType::F32:
      reinterpret_cast<float *>(buffer)[i] = static_cast<float>(uniform());
      break;
    case DType::F64:
      reinterpret_cast<double *>(buffer)[i] = uniform();
      break;
    case DType::F16:
      reinterpret_cast<uint16_t *>(buffer)[i] =
          floatToHalf(static_cast<float>(uniform()));
      break;
    case DType::BF16:
      reinterpret_cast<uint16_t *>(buffer)[i] =
          floatToBf16(static_cast<float>(uniform()));
      break;
    case DType::I1:
      buffer[i] = static_cast<char>(engine() >> 63);
      break;
    case DType::I8:
      reinterpret_cast<int8_t *>(buffer)[i] = static_cast<int8_t>(small());
      break;
    case DType::I16:
      reinterpret_cast<int16_t *>(buffer)[i] = static_cast<int16_t>(small());
      break;
    case DType::I32:
      reinterpret_cast<int32_t *>(buffer)[i] = static_cast<int32_t>(small());
      break;
    case DType::I64:
      reinterpret_cast<int64_t *>(buffer)[i] = small();
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

#ifdef BRAID_EXEC_CUDA
const char *const usage =
    "usage: mpirun -np N braid-exec-cuda ARTIFACT.so [options]\n"
    "       braid-exec-cuda --loopback=N ARTIFACT.so [options]\n"
    "\n"
    "Runs a program Braid compiled for the cuda target, one process per GPU\n"
    "(or, with --loopback, N ranks as threads on one GPU).\n"
    "\n"
    "options:\n"
    "  --loopback=N      run N logical ranks in this process on one GPU, for\n"
    "                    measurements (copies stand in for NCCL)\n"
    "  --emulate         run on Braid's emulated device, on the CPU: every\n"
    "                    kernel from its PTX (compile with --emulate or\n"
    "                    --gpu-format=isa); the same as BRAID_EMULATE=1\n"
#else
const char *const usage =
    "usage: mpirun -np N braid-exec ARTIFACT.so [options]\n"
    "\n"
    "Runs a program compiled by Braid, one process per rank.\n"
    "\n"
    "options:\n"
#endif
    "  --manifest=PATH   the program's manifest (default "
    "ARTIFACT.so.manifest)\n"
    "  --input=@PATH     an input .npy file, once per argument in order;\n"
    "                    {rank} in PATH becomes the rank (default: random)\n"
    "  --output=@PATH    where to write a result, once per result; without\n"
    "                    {rank} in PATH only rank 0 writes it\n"
    "  --seed=N          seed of the random inputs (default 0)\n"
    "  --timeout=S       abort if a transfer waits longer than S seconds\n"
    "                    (default 120, or $BRAID_TIMEOUT)\n"
    "  --threads=N       threads of each rank's contractions (cpu backend;\n"
    "                    default $BRAID_NUM_THREADS, else the cores divided\n"
    "                    by the ranks)\n"
    "  --trace=FILE      write a Chrome trace of the last run to FILE\n"
    "  --profile         print a table of the last run's kernels (calls,\n"
    "                    time, share of the run, rate)\n"
    "  --warmup=N        untimed runs before the timed ones (default 0)\n"
    "  --repeat=N        timed runs; prints their median if N > 1 (default "
    "1)\n";

struct Options {
  std::string artifact;
  std::string manifest;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  uint64_t seed = 0;
  double timeout = 0;  // 0: not given.
  int64_t threads = 0; // 0: not given.
  std::string trace;
  bool profile = false;
  int64_t warmup = 0;
  int64_t repeat = 1;
  int64_t loopback = 0; // 0: one rank per process.
  bool emulate = false;
  bool help = false;
};

/// Parses the command line; returns an error message or "".
std::string parseOptions(int argc, char **argv, Options &options) {
  auto value = [](const std::string &arg, const char *name, std::string &out) {
    std::string prefix = std::string(name) + "=";
    if (arg.compare(0, prefix.size(), prefix) != 0)
      return false;
    out = arg.substr(prefix.size());
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], text;
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (value(arg, "--manifest", text)) {
      options.manifest = text;
    } else if (value(arg, "--input", text) || value(arg, "--output", text)) {
      bool isInput = arg.compare(0, 8, "--input=") == 0;
      if (text.size() < 2 || text[0] != '@')
        return format("%s expects @PATH, got '%s'",
                      isInput ? "--input" : "--output", text.c_str());
      (isInput ? options.inputs : options.outputs).push_back(text.substr(1));
    } else if (value(arg, "--seed", text)) {
      char *end = nullptr;
      errno = 0;
      options.seed = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end || errno || text[0] == '-')
        return "--seed expects a non-negative integer, got '" + text + "'";
    } else if (value(arg, "--timeout", text)) {
      char *end = nullptr;
      options.timeout = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(options.timeout > 0))
        return "--timeout expects a positive number of seconds, got '" + text +
               "'";
    } else if (value(arg, "--threads", text)) {
      if (!parseInt(text, options.threads) || options.threads > 4096)
        return "--threads expects a number of threads from 0 to 4096, got '" +
               text + "'";
    } else if (value(arg, "--trace", text)) {
      if (text.empty())
        return "--trace expects a file name";
      options.trace = text;
    } else if (arg == "--profile") {
      options.profile = true;
    } else if (value(arg, "--warmup", text)) {
      if (!parseInt(text, options.warmup))
        return "--warmup expects a non-negative integer, got '" + text + "'";
    } else if (value(arg, "--repeat", text)) {
      if (!parseInt(text, options.repeat) || options.repeat < 1)
        return "--repeat expects a positive integer, got '" + text + "'";
    } else if (arg == "--emulate" || value(arg, "--emulate", text)) {
#ifdef BRAID_EXEC_CUDA
      if (arg != "--emulate" && text != "true" && text != "false" &&
          text != "1" && text != "0")
        return "--emulate expects true or false, got '" + text + "'";
      options.emulate = arg == "--emulate" || text == "true" || text == "1";
#else
      return "--emulate is only available in braid-exec-cuda (the cuda "
             "backend)";
#endif
    } else if (value(arg, "--loopback", text)) {
#ifdef BRAID_EXEC_CUDA
      if (!parseInt(text, options.loopback) || options.loopback < 1)
        return "--loopback expects a positive integer, got '" + text + "'";
#else
      return "--loopback is only available in braid-exec-cuda (the cuda "
             "backend)";
#endif
    } else if (arg.size() > 1 && arg[0] == '-') {
      return "unknown option '" + arg + "' (see --help)";
    } else if (options.artifact.empty()) {
      options.artifact = arg;
    } else {
      return "more than one artifact given ('" + options.artifact + "', '" +
             arg + "')";
    }
  }
  if (options.help)
    return std::string();
  if (options.artifact.empty())
    return "no artifact given (see --help)";
  if (options.manifest.empty())
    options.manifest = options.artifact + ".manifest";
  return std::string();
}

//===----------------------------------------------------------------------===//
// Collectives of the runner itself
//===----------------------------------------------------------------------===//

/// Agrees on whether any rank failed. `rank0Failed` tells whether rank 0
/// did, so that an error every rank sees is printed once.
bool anyFailed(bool failed, int64_t rank, bool &rank0Failed) {
  double flags[2] = {failed ? 1.0 : 0.0, rank == 0 && failed ? 1.0 : 0.0};
  braid_rt_host_max(flags, 2);
  rank0Failed = flags[1] != 0;
  return flags[0] != 0;
}

double maxOverRanks(double value) {
  braid_rt_host_max(&value, 1);
  return value;
}

/// An input: program memory (never empty, so that zero-sized tensors still
/// get a distinct, valid pointer; device memory on the cuda backend) and
/// the host copy it is restored from before every run (pinned on the cuda
/// backend), which the program never sees and so never modifies.
struct Input {
  explicit Input(int64_t bytes)
      : size(static_cast<size_t>(bytes)),
        data(static_cast<char *>(braid_rt_buffer_alloc(bytes))),
        host(static_cast<char *>(braid_rt_host_alloc(bytes))) {}
  ~Input() {
    braid_rt_buffer_free(data);
    braid_rt_host_free(host);
  }
  Input(const Input &) = delete;
  Input &operator=(const Input &) = delete;

  size_t size;
  char *data;
  char *host;
};

using EntryFunction = void (*)(void **);

struct RunContext {
  const Options *options;
  const Manifest *manifest;
  EntryFunction entry;
};

/// Phases 2 to 4 of one rank: inputs, runs, outputs and timing. On the
/// loopback transport, every rank's thread runs it.
void runRank(void *context) {
  const RunContext &ctx = *static_cast<const RunContext *>(context);
  const Options &options = *ctx.options;
  const Manifest &manifest = *ctx.manifest;
  EntryFunction entry = ctx.entry;
  int64_t rank = braid_rt_world_rank();

  // Phase 2: inputs, generated or read into their host copies.
  size_t numArgs = manifest.args.size();
  std::vector<std::unique_ptr<Input>> inputs;
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < numArgs; ++i) {
    const TensorType &type = manifest.args[i];
    inputs.push_back(std::make_unique<Input>(type.numBytes()));
    char *host = inputs.back()->host;
    if (options.inputs.empty())
      fillRandom(type, options.seed, rank, static_cast<int64_t>(i), host);
    else
      loadInput(static_cast<int64_t>(i),
                substituteRank(options.inputs[i], rank), type, host);
    descriptors.push_back(inputDescriptor(type, inputs.back()->data));
  }
  int64_t runs = options.warmup + options.repeat;

  int64_t resultWords = 0;
  for (const TensorType &type : manifest.results)
    resultWords += descriptorWords(type);
  std::vector<int64_t> resultDescriptors(
      static_cast<size_t>(std::max<int64_t>(resultWords, 1)));
  std::vector<void *> entryArgs(1 + numArgs);
  entryArgs[0] = manifest.results.empty() ? nullptr : resultDescriptors.data();
  for (size_t i = 0; i < numArgs; ++i)
    entryArgs[1 + i] = descriptors[i].data();
  std::set<void *> inputPointers;
  for (const auto &input : inputs)
    inputPointers.insert(input->data);

  // Phase 3: run.
  std::vector<double> timesMs;
  std::vector<std::vector<char>> results(manifest.results.size());
  for (int64_t run = 0; run < runs; ++run) {
    bool last = run + 1 == runs;
    // Compiled code may update its arguments in place: every run starts
    // from the same inputs, copied in (and finished) before the barrier, so
    // that no rank's timed region includes them.
    for (const auto &input : inputs)
      braid_rt_copy_to_device(input->data, input->host,
                              static_cast<int64_t>(input->size));
    braid_rt_synchronize();
    std::fill(resultDescriptors.begin(), resultDescriptors.end(), 0);
    braid_rt_barrier();
    bool traced = last && (!options.trace.empty() || options.profile);
    if (traced)
      braid_rt_trace_begin();
    braid_rt_timer_start();
    entry(entryArgs.data());
    // The cuda backend returns as soon as the work is enqueued; the stop
    // waits for it.
    double ms = braid_rt_timer_stop();
    if (traced)
      braid_rt_trace_finish(options.trace.empty() ? nullptr
                                                  : options.trace.c_str(),
                            options.profile);
    // A run takes as long as its slowest rank.
    if (run >= options.warmup)
      timesMs.push_back(maxOverRanks(ms));

    // Read (last run only) and free the results.
    std::set<void *> freed;
    const int64_t *words = resultDescriptors.data();
    for (size_t i = 0; i < manifest.results.size(); ++i) {
      const TensorType &type = manifest.results[i];
      if (last) {
        results[i].resize(static_cast<size_t>(type.numBytes()));
        std::string problem =
            readResult(words, type, results[i].data(), braid_rt_copy_to_host);
        if (!problem.empty())
          braid_rt_abort(format("result %zu: %s", i, problem.c_str()).c_str());
      }
      void *allocated =
          reinterpret_cast<void *>(static_cast<intptr_t>(words[0]));
      // Results are allocated by the callee, but one may be an argument
      // passed through, or the same buffer as another result.
      if (allocated && !inputPointers.count(allocated) &&
          freed.insert(allocated).second)
        braid_rt_result_free(allocated);
      words += descriptorWords(type);
    }
  }

  // Phase 4: outputs and timing.
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    // Without {rank} every rank would write the same file at once; rank 0's
    // result is the one written then.
    if (options.outputs[i].find("{rank}") == std::string::npos && rank != 0)
      continue;
    std::string path = substituteRank(options.outputs[i], rank);
    std::string problem =
        writeNpy(path, manifest.results[i], results[i].data());
    if (!problem.empty())
      braid_rt_abort(format("output %zu (%s): cannot write: %s", i,
                            path.c_str(), problem.c_str())
                         .c_str());
  }
  if (options.repeat > 1) {
    std::sort(timesMs.begin(), timesMs.end());
    size_t n = timesMs.size();
    double median =
        n % 2 ? timesMs[n / 2] : (timesMs[n / 2 - 1] + timesMs[n / 2]) / 2;
    if (rank == 0)
      std::printf("braid-exec: median %.3f ms over %zu runs (max over ranks)\n",
                  median, n);
  }
  std::fflush(stdout);
}

} // namespace

#ifdef BRAID_EXEC_CUDA
/// Whether the CUDA runtime this process loaded is Braid's emulated
/// device's.
bool onEmulatedDevice() {
  return dlsym(RTLD_DEFAULT, "braidEmulatedDevice") != nullptr;
}

/// With --emulate or BRAID_EMULATE=1, makes this process run on the
/// emulated device: it runs itself again with the emulator's libraries
/// (lib/emulator next to the runtime, or $BRAID_EMULATOR_DIR) first on
/// LD_LIBRARY_PATH, before anything is initialized (under mpirun the rank
/// keeps its process). Returns an error message, or "".
std::string useEmulatedDevice(char **argv) {
  if (onEmulatedDevice())
    return std::string();
  if (std::getenv("BRAID_EMULATE_EXEC"))
    return "BRAID_EMULATE_EXEC is set, but the CUDA runtime loaded is not "
           "the emulated device's (is another libcudart.so.13 preloaded?)";
  std::string dir;
  if (const char *given = std::getenv("BRAID_EMULATOR_DIR"); given && *given) {
    dir = given;
  } else {
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0)
      return "cannot find this executable (/proc/self/exe) to find the "
             "emulated device next to it";
    std::string path(self, static_cast<size_t>(length));
    dir = path.substr(0, path.rfind('/')) + "/../lib/emulator";
  }
  std::string library = dir + "/libcudart.so.13";
  if (access(library.c_str(), R_OK) != 0)
    return "the emulated device is not here (no " + library +
           "): build Braid with the CUDA toolkit, or set BRAID_EMULATOR_DIR";
  std::string path = dir;
  if (const char *old = std::getenv("LD_LIBRARY_PATH"); old && *old)
    path += std::string(":") + old;
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
  setenv("BRAID_EMULATE_EXEC", "1", 1);
  setenv("BRAID_EMULATE", "1", 1);
  std::fflush(stdout);
  std::fflush(stderr);
  execv("/proc/self/exe", argv);
  return std::string("cannot run this executable again on the emulated "
                     "device: ") +
         std::strerror(errno);
}
#endif

int main(int argc, char **argv) {
#ifdef BRAID_EXEC_CUDA
  // The cuda runtime needs a GPU to initialize; --help must not, and
  // --loopback and --emulate decide how it initializes.
  bool emulate = false;
  if (const char *value = std::getenv("BRAID_EMULATE"))
    emulate = std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--emulate" || arg == "--emulate=true" || arg == "--emulate=1")
      emulate = true;
    else if (arg == "--emulate=false" || arg == "--emulate=0")
      emulate = false;
    if (arg == "--help" || arg == "-h") {
      // Under a launcher, only its rank 0 prints.
      for (const char *name :
           {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "BRAID_RANK"})
        if (const char *rankText = std::getenv(name))
          if (std::strcmp(rankText, "0") != 0)
            return 0;
      std::fputs(usage, stdout);
      return 0;
    }
    if (arg.compare(0, 11, "--loopback=") == 0) {
      int64_t ranks = 0;
      if (!parseInt(arg.substr(11), ranks) || ranks < 1) {
        std::fprintf(stderr,
                     "braid: --loopback expects a positive integer, got "
                     "'%s'\n",
                     arg.substr(11).c_str());
        return 1;
      }
      setenv("BRAID_LOOPBACK", std::to_string(ranks).c_str(), 1);
    }
  }
  if (emulate) {
    std::string problem = useEmulatedDevice(argv);
    if (!problem.empty()) {
      std::fprintf(stderr, "braid: %s\n", problem.c_str());
      return 1;
    }
  }
#endif
  // The timeout covers braid_rt_init too (an NCCL id file that never
  // comes, a peer that never joins); a bad value is reported below, once
  // every rank can agree on it.
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.compare(0, 10, "--timeout=") != 0)
      continue;
    char *end = nullptr;
    double seconds = std::strtod(arg.c_str() + 10, &end);
    if (end != arg.c_str() + 10 && !*end && seconds > 0)
      braid_rt_set_timeout(seconds);
  }
  braid_rt_init(&argc, &argv);
  int64_t rank = braid_rt_world_rank();
  int64_t size = braid_rt_world_size();

  // Phase 1: everything every rank checks alike.
  Options options;
  Manifest manifest;
  EntryFunction entry = nullptr;
  std::string error = parseOptions(argc, argv, options);
  if (error.empty() && options.help) {
    if (rank == 0)
      std::fputs(usage, stdout);
    braid_rt_finalize();
    return 0;
  }
  // Read by the runtime when a rank's first contraction runs.
  if (error.empty() && options.threads > 0)
    setenv("BRAID_NUM_THREADS", std::to_string(options.threads).c_str(), 1);
  if (error.empty())
    error = readManifest(options.manifest, manifest);
#ifdef BRAID_EXEC_CUDA
  if (error.empty() && manifest.target == "cpu")
    error = format("%s was compiled for the cpu target: run it with "
                   "braid-exec",
                   options.artifact.c_str());
  if (error.empty() && onEmulatedDevice() && !manifest.kernels.empty() &&
      manifest.kernels != "ptx")
    error = format("%s carries its kernels as a %s (SASS), and the emulated "
                   "device runs PTX: compile it with --emulate (or "
                   "--gpu-format=isa)",
                   options.artifact.c_str(), manifest.kernels.c_str());
#else
  if (error.empty() && manifest.target == "cuda")
    error = format("%s was compiled for the cuda target: run it with "
                   "braid-exec-cuda (braid-run --backend=cuda)",
                   options.artifact.c_str());
#endif
  if (error.empty() && manifest.ranks != size)
    error = format("program needs %lld ranks, started on %lld",
                   static_cast<long long>(manifest.ranks),
                   static_cast<long long>(size));
  if (error.empty() && !options.inputs.empty() &&
      options.inputs.size() != manifest.args.size())
    error = format("%zu --input given, but %s takes %zu arguments (give one "
                   "per argument, or none for random inputs)",
                   options.inputs.size(), manifest.entry.c_str(),
                   manifest.args.size());
  if (error.empty() && !options.outputs.empty() &&
      options.outputs.size() != manifest.results.size())
    error = format("%zu --output given, but %s has %zu results (give one per "
                   "result, or none)",
                   options.outputs.size(), manifest.entry.c_str(),
                   manifest.results.size());
  if (error.empty()) {
    // dlopen searches the library path for names without a slash; the
    // artifact is a file name.
    std::string path = options.artifact.find('/') == std::string::npos
                           ? "./" + options.artifact
                           : options.artifact;
    // RTLD_GLOBAL: the artifact's braid_rt_* references bind to the runtime
    // this process already loaded.
    void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
      error = format("cannot load %s: %s", options.artifact.c_str(), dlerror());
    } else {
      entry = reinterpret_cast<EntryFunction>(dlsym(library, "braid_entry"));
      if (!entry)
        error = format("%s has no braid_entry (the entry point of %s)",
                       options.artifact.c_str(), manifest.entry.c_str());
    }
  }
  bool rank0Failed = false;
  if (anyFailed(!error.empty(), rank, rank0Failed)) {
    if (!error.empty() && (rank == 0 || !rank0Failed)) {
      std::string line =
          rank == 0 ? format("braid: %s\n", error.c_str())
                    : format("braid: rank %lld: %s\n",
                             static_cast<long long>(rank), error.c_str());
      std::fputs(line.c_str(), stderr);
    }
    braid_rt_finalize();
    return 1;
  }

  RunContext context{&options, &manifest, entry};
  if (braid_rt_loopback_ranks() > 0)
    braid_rt_loopback_run(runRank, &context);
  else
    runRank(&context);
  braid_rt_finalize();
  return 0;
}
