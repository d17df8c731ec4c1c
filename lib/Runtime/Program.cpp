//===- Program.cpp - Compiled programs in a host's processes --------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Implements braid_program.h over the runtime's C ABI and BraidArtifact's
// manifests and descriptors: what braid-exec does for one run, without its
// files, its generated inputs or its own processes, for a host that calls a
// program many times with its own buffers.
//
//===----------------------------------------------------------------------===//

#pragma GCC visibility push(default)
#include "braid/Runtime/braid_program.h"
#pragma GCC visibility pop

#include "braid/Runtime/Artifact.h"
#include "braid/Runtime/braid_rt.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <sys/stat.h>
#include <tuple>
#include <vector>

using namespace braid::artifact;

struct braid_program {
  Manifest manifest;
  void (*entry)(void **) = nullptr;
  int64_t rank = 0;
  int64_t size = 1;
  /// The result descriptors the entry point fills, reused across calls.
  std::vector<int64_t> resultWords;
  /// Its number among the programs this process loaded (from 1): the
  /// scope of its symmetric sites, which no other program shares.
  int64_t scope = 0;
};

namespace {

/// Returns 1 after copying `message` into the caller's `error`.
int fail(const std::string &message, char *error, size_t errorSize) {
  if (error && errorSize)
    std::snprintf(error, errorSize, "braid: %s", message.c_str());
  return 1;
}

/// The reason this rank cannot run `artifact` (whose manifest `manifest`
/// read) on `target`, or "" with the entry point in `entry`.
std::string open(const std::string &artifact, const std::string &target,
                 Manifest &manifest, void (*&entry)(void **)) {
  std::string problem = readManifest(artifact + ".manifest", manifest);
  if (!problem.empty())
    return problem;
  // Hand-written manifests have no target line: the cpu target's.
  std::string compiledFor = manifest.target.empty() ? "cpu" : manifest.target;
  if (compiledFor != target)
    return format("%s was compiled for the %s target: load it with %s",
                  artifact.c_str(), compiledFor.c_str(),
                  compiledFor == "cuda"
                      ? "braid_program_load_cuda (libBraidProgramCUDA.so)"
                      : "braid_program_load (libBraidProgram.so)");
  int64_t size = braid_rt_world_size();
  if (manifest.ranks != size)
    return format("%s needs %lld ranks, but the communicator has %lld",
                  artifact.c_str(), static_cast<long long>(manifest.ranks),
                  static_cast<long long>(size));
  // dlopen searches the library path for names without a slash.
  std::string path =
      artifact.find('/') == std::string::npos ? "./" + artifact : artifact;
  // A library stays loaded, and dlopen of a path it loaded returns that
  // library again: a file rebuilt at the path would run the old code under
  // the new manifest.
  struct stat file;
  if (stat(path.c_str(), &file) != 0)
    return format("cannot load %s: no such file", artifact.c_str());
  static std::mutex mutex;
  static std::map<std::string, std::tuple<dev_t, ino_t, int64_t>> loaded;
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::tuple<dev_t, ino_t, int64_t> identity{
        file.st_dev, file.st_ino,
        static_cast<int64_t>(file.st_mtim.tv_sec) * 1000000000 +
            file.st_mtim.tv_nsec};
    auto [it, fresh] = loaded.try_emplace(path, identity);
    if (!fresh && it->second != identity)
      return format("%s changed since this process loaded it (a library "
                    "stays loaded): load the new one from another path",
                    artifact.c_str());
  }
  // RTLD_LOCAL: every artifact defines its entry function's symbols (@main
  // for every torch export), and a global one would bind the next
  // artifact's calls to its own. Its braid_rt_* references bind to the
  // runtime, which is global.
  void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return format("cannot load %s: %s", artifact.c_str(), dlerror());
  entry = reinterpret_cast<void (*)(void **)>(dlsym(library, "braid_entry"));
  if (!entry)
    return format("%s has no braid_entry (the entry point of %s)",
                  artifact.c_str(), manifest.entry.c_str());
  return std::string();
}

/// A result into the caller's buffer: a memcpy on the cpu target, a copy
/// enqueued on the compute stream (the host's) on cuda.
void copyBytes(void *destination, const void *source, int64_t bytes) {
  braid_rt_copy_to_device(destination, source, bytes);
}

/// Whether a call runs in this process: calls never overlap, since every
/// program shares the runtime's one communicator (whose collectives must
/// come in the same order on every rank) and each program its arena.
std::atomic<bool> calling{false};

/// Programs loaded so far: each takes the next number as its scope. Every
/// rank loads the same programs in the same order, so the numbers agree.
std::atomic<int64_t> loaded{0};
/// Programs loaded and not destroyed: the cuda runtime stops with the last.
std::atomic<int64_t> live{0};

/// braid_program_load and braid_program_load_cuda: `target`'s artifact for
/// this rank, once `start` has the runtime running (or says why not).
int load(const char *call, const char *artifact, const char *target,
         const std::function<const char *()> &start, braid_program **out,
         char *error, size_t errorSize) {
  if (!out)
    return fail(format("%s: no place for the program (out is null)", call),
                error, errorSize);
  *out = nullptr;
  if (!artifact || !*artifact)
    return fail(format("%s: no artifact path", call), error, errorSize);
  if (const char *problem = start())
    return fail(problem, error, errorSize);
  auto program = std::make_unique<braid_program>();
  program->scope = ++loaded;
  program->rank = braid_rt_world_rank();
  program->size = braid_rt_world_size();
  std::string problem =
      open(artifact, target, program->manifest, program->entry);
  // Every rank loads, or none does: a rank that goes on alone would wait
  // in the first call for peers that never come.
  double flags[2] = {problem.empty() ? 0.0 : 1.0, 0.0};
  flags[1] = program->rank == 0 ? flags[0] : 0.0;
  braid_rt_host_max(flags, 2);
  if (!problem.empty())
    return fail(problem, error, errorSize);
  if (flags[0] != 0)
    return fail(flags[1] != 0 ? "rank 0 could not load the program"
                              : "another rank could not load the program",
                error, errorSize);
  int64_t words = 0;
  for (const TensorType &type : program->manifest.results)
    words += descriptorWords(type);
  program->resultWords.assign(static_cast<size_t>(std::max<int64_t>(words, 1)),
                              0);
  *out = program.release();
  ++live;
  return 0;
}

} // namespace

int braid_program_load(const char *artifact, int64_t comm, braid_program **out,
                       char *error, size_t errorSize) {
  return load(
      "braid_program_load", artifact, "cpu",
      [comm] { return braid_rt_init_on(comm); }, out, error, errorSize);
}

int braid_program_load_cuda(const char *artifact, void *ncclComm, void *stream,
                            braid_program **out, char *error,
                            size_t errorSize) {
  return load(
      "braid_program_load_cuda", artifact, "cuda",
      [=] { return braid_rt_init_cuda_on(ncclComm, stream); }, out, error,
      errorSize);
}

int64_t braid_program_rank(const braid_program *program) {
  return program ? program->rank : -1;
}

int64_t braid_program_size(const braid_program *program) {
  return program ? program->size : -1;
}

int64_t braid_program_num_args(const braid_program *program) {
  return program ? static_cast<int64_t>(program->manifest.args.size()) : -1;
}

int64_t braid_program_num_results(const braid_program *program) {
  return program ? static_cast<int64_t>(program->manifest.results.size()) : -1;
}

int braid_program_describe(const braid_program *program, int isResult,
                           int64_t index, const char **dtype, int64_t *rank,
                           const int64_t **shape) {
  if (!program)
    return 1;
  const std::vector<TensorType> &types =
      isResult ? program->manifest.results : program->manifest.args;
  if (index < 0 || index >= static_cast<int64_t>(types.size()))
    return 1;
  const TensorType &type = types[static_cast<size_t>(index)];
  if (dtype)
    *dtype = info(type.dtype).name;
  if (rank)
    *rank = static_cast<int64_t>(type.shape.size());
  if (shape)
    *shape = type.shape.data();
  return 0;
}

int braid_program_call(braid_program *program, void *const *args,
                       void *const *results, char *error, size_t errorSize) {
  if (!program)
    return fail("braid_program_call: no program", error, errorSize);
  const Manifest &manifest = program->manifest;
  size_t numArgs = manifest.args.size(), numResults = manifest.results.size();
  if (numArgs && !args)
    return fail(format("braid_program_call: %s takes %zu arguments, but args "
                       "is null",
                       manifest.entry.c_str(), numArgs),
                error, errorSize);
  if (numResults && !results)
    return fail(format("braid_program_call: %s has %zu results, but results "
                       "is null",
                       manifest.entry.c_str(), numResults),
                error, errorSize);
  for (size_t i = 0; i < numArgs; ++i)
    if (!args[i] && manifest.args[i].numBytes() > 0)
      return fail(format("braid_program_call: argument %zu is null", i), error,
                  errorSize);
  for (size_t i = 0; i < numResults; ++i)
    if (!results[i] && manifest.results[i].numBytes() > 0)
      return fail(format("braid_program_call: result %zu is null", i), error,
                  errorSize);

  if (calling.exchange(true))
    return fail("braid_program_call: another call runs in this process "
                "(calls of programs must not overlap: their collectives "
                "would interleave)",
                error, errorSize);
  std::vector<std::vector<int64_t>> descriptors;
  std::vector<void *> entryArgs(1 + numArgs);
  std::set<void *> inputs;
  for (size_t i = 0; i < numArgs; ++i) {
    descriptors.push_back(inputDescriptor(manifest.args[i], args[i]));
    entryArgs[1 + i] = descriptors.back().data();
    inputs.insert(args[i]);
  }
  std::fill(program->resultWords.begin(), program->resultWords.end(), 0);
  entryArgs[0] = numResults ? program->resultWords.data() : nullptr;
  braid_rt_set_site_scope(program->scope);
  program->entry(entryArgs.data());

  // Each result into its buffer, then freed: results are allocated by the
  // callee, but one may be an argument passed through, or the same buffer
  // as another result.
  std::string problem;
  std::set<void *> freed;
  const int64_t *words = program->resultWords.data();
  for (size_t i = 0; i < numResults; ++i) {
    const TensorType &type = manifest.results[i];
    if (problem.empty()) {
      std::string wrong =
          readResult(words, type, static_cast<char *>(results[i]), copyBytes);
      if (!wrong.empty())
        problem = format("result %zu: %s", i, wrong.c_str());
    }
    void *allocated = reinterpret_cast<void *>(static_cast<intptr_t>(words[0]));
    if (allocated && !inputs.count(allocated) && freed.insert(allocated).second)
      braid_rt_result_free(allocated);
    words += descriptorWords(type);
  }
  calling = false;
  if (!problem.empty())
    return fail(problem, error, errorSize);
  return 0;
}

void braid_program_destroy(braid_program *program) {
  if (!program)
    return;
  bool cuda = program->manifest.target == "cuda";
  delete program;
  // On cuda the runtime holds the host's communicator and stream, which the
  // host will destroy: it stops with the last program (collective: its
  // symmetric buffers are freed once every rank is done with them). On the
  // cpu target it stops inside the host's MPI_Finalize.
  if (--live == 0 && cuda)
    braid_rt_finalize();
}
