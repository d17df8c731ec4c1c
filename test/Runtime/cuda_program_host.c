/*===- cuda_program_host.c - A host job that runs a cuda program ----------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * braid_program.h on the cuda target, as a host job uses it: each rank owns
 * its device, its stream and its NCCL communicator (MPI only broadcasts the
 * NCCL id, as torchrun's store would), loads a compiled program once with
 * braid_program_load_cuda and calls it on device buffers.
 *
 *   braid-cuda-program-host ARTIFACT DIR CALLS [CPU_ARTIFACT]
 *   braid-cuda-program-host ARTIFACT DIR die
 *
 * Argument i comes from DIR/a{i}.r{rank}.npy (what test/lib/e2e.py --keep
 * leaves); CALLS calls, on the host's stream, must each give the bits of
 * the first and leave the arguments as they were; result k goes to
 * DIR/host.o{k}.r{rank}.npy, for the test to compare with the runner's.
 * Then the refusals a host can act on (a null argument, another stream,
 * the MPI form of load, a cpu artifact), the last program's destroy (which
 * stops the runtime and leaves the communicator and stream to the host),
 * and a second load on the same communicator that runs again.
 *
 * With `die`, the ranks call in a loop and rank 1 exits the process (code
 * 3) a moment into it, while rank 0 waits inside a call or on its stream:
 * the job must end, named by mpirun, instead of hanging.
 *
 * Prints one line per check on rank 0 ("OK ..." or "FAIL ...", and the
 * messages of refusals) and exits non-zero if any check failed.
 *
 *===----------------------------------------------------------------------===*/

#include "braid/Runtime/braid_program.h"

#include "host_checks.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_BUFFERS 16

static void die(const char *what) {
  fprintf(stderr, "braid-cuda-program-host: rank %d: %s\n", worldRank, what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* The .npy element type of a manifest dtype, and its size. */
static const char *npyType(const char *dtype, size_t *bytes) {
  static const struct {
    const char *dtype, *npy;
    size_t bytes;
  } types[] = {{"f32", "<f4", 4},  {"f64", "<f8", 8}, {"f16", "<f2", 2},
               {"bf16", "<u2", 2}, {"i64", "<i8", 8}, {"i32", "<i4", 4},
               {"i16", "<i2", 2},  {"i8", "|i1", 1},  {"i1", "|b1", 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i)
    if (strcmp(types[i].dtype, dtype) == 0) {
      *bytes = types[i].bytes;
      return types[i].npy;
    }
  die("a dtype this host does not know");
  return NULL;
}

/* Argument or result `index`'s size in bytes and .npy type. */
static size_t bufferBytes(const braid_program *program, int isResult,
                          int64_t index, const char **npy, char *shape,
                          size_t shapeSize) {
  const char *dtype = NULL;
  int64_t rank = 0;
  const int64_t *sizes = NULL;
  if (braid_program_describe(program, isResult, index, &dtype, &rank, &sizes))
    die("braid_program_describe refused an index it counts");
  size_t element = 0;
  *npy = npyType(dtype, &element);
  size_t count = 1;
  size_t used = (size_t)snprintf(shape, shapeSize, "(");
  for (int64_t d = 0; d < rank; ++d) {
    count *= (size_t)sizes[d];
    used += (size_t)snprintf(shape + used, shapeSize - used, "%lld,%s",
                             (long long)sizes[d], d + 1 < rank ? " " : "");
  }
  snprintf(shape + used, shapeSize - used, ")");
  return count * element;
}

/* The data of the .npy file at `path`, which must hold `bytes`. */
static void *readNpy(const char *path, size_t bytes) {
  FILE *file = fopen(path, "rb");
  if (!file)
    die("cannot open an input .npy file");
  unsigned char head[12];
  if (fread(head, 1, sizeof head, file) != sizeof head ||
      memcmp(head, "\x93NUMPY", 6) != 0)
    die("an input is not a .npy file");
  long offset = head[6] == 1 ? 10 + (head[8] | head[9] << 8)
                             : 12 + (head[8] | head[9] << 8 | head[10] << 16 |
                                     (long)head[11] << 24);
  void *data = malloc(bytes ? bytes : 1);
  if (fseek(file, offset, SEEK_SET) != 0 ||
      fread(data, 1, bytes, file) != bytes || fgetc(file) != EOF)
    die("an input .npy file does not hold the argument's bytes");
  fclose(file);
  return data;
}

static void writeNpy(const char *path, const char *npy, const char *shape,
                     const void *data, size_t bytes) {
  char header[256];
  int length = snprintf(header, sizeof header,
                        "{'descr': '%s', 'fortran_order': False, "
                        "'shape': %s, }",
                        npy, shape);
  /* Padded with spaces and a newline to a multiple of 64 bytes in all. */
  int total = (10 + length + 1 + 63) / 64 * 64;
  while (10 + length + 1 < total)
    header[length++] = ' ';
  header[length++] = '\n';
  FILE *file = fopen(path, "wb");
  unsigned char magic[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(length & 0xff),
                             (unsigned char)(length >> 8)};
  if (!file || fwrite(magic, 1, 10, file) != 10 ||
      fwrite(header, 1, (size_t)length, file) != (size_t)length ||
      fwrite(data, 1, bytes, file) != bytes || fclose(file) != 0)
    die("cannot write a result .npy file");
}

static void *deviceCopy(const void *host, size_t bytes) {
  void *device = NULL;
  if (cudaMalloc(&device, bytes ? bytes : 1) != cudaSuccess ||
      cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    die("cannot copy an argument to the device");
  return device;
}

static void *hostCopy(const void *device, size_t bytes) {
  void *host = malloc(bytes ? bytes : 1);
  if (cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost) != cudaSuccess)
    die("cannot copy a result from the device");
  return host;
}

int main(int argc, char **argv) {
  if (argc < 4 || argc > 5) {
    fprintf(
        stderr,
        "usage: braid-cuda-program-host ARTIFACT DIR CALLS [CPU_ARTIFACT]\n");
    return 2;
  }
  const char *artifact = argv[1], *dir = argv[2];
  int calls = atoi(argv[3]);
  MPI_Init(&argc, &argv);
  int worldSize = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1 ||
      cudaSetDevice(worldRank % devices) != cudaSuccess)
    die("no CUDA device");

  /* The host's own communicator and stream. */
  ncclUniqueId id;
  if (worldRank == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    die("ncclGetUniqueId failed");
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, worldSize, id, worldRank) != ncclSuccess)
    die("ncclCommInitRank failed");
  cudaStream_t stream, other;
  if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) !=
          cudaSuccess ||
      cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) != cudaSuccess)
    die("cudaStreamCreate failed");

  char error[512] = "";
  braid_program *program = NULL;
  int rc = braid_program_load_cuda(artifact, comm, stream, &program, error,
                                   sizeof error);
  check(rc == 0, "load on the host's NCCL communicator and stream");
  if (rc) {
    refusal(rc, error);
    MPI_Finalize();
    return 1;
  }
  check(braid_program_rank(program) == worldRank &&
            braid_program_size(program) == worldSize,
        "rank and size are the communicator's");

  int64_t numArgs = braid_program_num_args(program);
  int64_t numResults = braid_program_num_results(program);
  if (numArgs > MAX_BUFFERS || numResults > MAX_BUFFERS)
    die("too many arguments or results for this host");
  void *args[MAX_BUFFERS], *hostArgs[MAX_BUFFERS];
  void *results[MAX_BUFFERS], *first[MAX_BUFFERS];
  size_t argBytes[MAX_BUFFERS], resultBytes[MAX_BUFFERS];
  const char *resultNpy[MAX_BUFFERS];
  char resultShape[MAX_BUFFERS][128], shape[128], path[4096];
  for (int64_t i = 0; i < numArgs; ++i) {
    const char *npy = NULL;
    argBytes[i] = bufferBytes(program, 0, i, &npy, shape, sizeof shape);
    snprintf(path, sizeof path, "%s/a%lld.r%d.npy", dir, (long long)i,
             worldRank);
    hostArgs[i] = readNpy(path, argBytes[i]);
    args[i] = deviceCopy(hostArgs[i], argBytes[i]);
  }
  for (int64_t k = 0; k < numResults; ++k) {
    resultBytes[k] = bufferBytes(program, 1, k, &resultNpy[k], resultShape[k],
                                 sizeof resultShape[k]);
    if (cudaMalloc(&results[k], resultBytes[k] ? resultBytes[k] : 1) !=
        cudaSuccess)
      die("cudaMalloc failed");
  }

  if (strcmp(argv[3], "die") == 0) {
    if (worldRank == 0)
      printf("OK loaded; calling until the job ends\n");
    fflush(stdout);
    if (worldRank == 1)
      dieSoon(2000);
    for (;;)
      if (braid_program_call(program, args, results, error, sizeof error) ||
          cudaStreamSynchronize(stream) != cudaSuccess) {
        printf("rank %d: call failed: %s\n", worldRank, error);
        return 1;
      }
  }

  /* The calls: enqueued on the host's stream, results read after it. */
  int same = 1, ran = 1;
  for (int call = 0; call < calls && ran; ++call) {
    if (cudaMemsetAsync(results[0], 0xff, resultBytes[0], stream) !=
        cudaSuccess)
      die("cudaMemsetAsync failed");
    if (braid_program_call(program, args, results, error, sizeof error)) {
      ran = 0;
      break;
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess)
      die("cudaStreamSynchronize failed");
    for (int64_t k = 0; k < numResults; ++k) {
      void *got = hostCopy(results[k], resultBytes[k]);
      if (call == 0)
        first[k] = got;
      else {
        same &= memcmp(got, first[k], resultBytes[k]) == 0;
        free(got);
      }
    }
  }
  char what[128];
  snprintf(what, sizeof what,
           "%d calls on the host's stream: each gives the bits of the first",
           calls);
  check(ran && same, what);
  if (!ran)
    refusal(1, error);
  int unchanged = 1;
  for (int64_t i = 0; i < numArgs; ++i) {
    void *now = hostCopy(args[i], argBytes[i]);
    unchanged &= memcmp(now, hostArgs[i], argBytes[i]) == 0;
    free(now);
  }
  check(unchanged, "the arguments are never written");
  for (int64_t k = 0; k < numResults; ++k) {
    snprintf(path, sizeof path, "%s/host.o%lld.r%d.npy", dir, (long long)k,
             worldRank);
    writeNpy(path, resultNpy[k], resultShape[k], first[k], resultBytes[k]);
  }

  /* What a host can act on comes back as a message. */
  void *saved = args[0];
  args[0] = NULL;
  rc = braid_program_call(program, args, results, error, sizeof error);
  args[0] = saved;
  check(rc != 0, "a null argument is refused before the call");
  refusal(rc, error);
  braid_program *again = NULL;
  rc = braid_program_load_cuda(artifact, comm, other, &again, error,
                               sizeof error);
  check(rc != 0 && !again, "another stream is refused");
  refusal(rc, error);
  rc = braid_program_load(artifact, -1, &again, error, sizeof error);
  check(rc != 0 && !again, "the MPI form of load is refused");
  refusal(rc, error);
  if (argc == 5) {
    rc = braid_program_load_cuda(argv[4], comm, stream, &again, error,
                                 sizeof error);
    check(rc != 0 && !again, "a cpu artifact is refused");
    refusal(rc, error);
  }

  /* The last program's destroy stops the runtime (collective) and leaves
   * the communicator and stream to the host: a new load runs again. */
  braid_program_destroy(program);
  program = NULL;
  rc = braid_program_load_cuda(artifact, comm, stream, &program, error,
                               sizeof error);
  int rerun =
      rc == 0 &&
      braid_program_call(program, args, results, error, sizeof error) == 0 &&
      cudaStreamSynchronize(stream) == cudaSuccess;
  for (int64_t k = 0; rerun && k < numResults; ++k) {
    void *got = hostCopy(results[k], resultBytes[k]);
    rerun &= memcmp(got, first[k], resultBytes[k]) == 0;
    free(got);
  }
  check(rerun, "after the last destroy, a new load runs on the same "
               "communicator and stream, with the same bits");
  if (program)
    braid_program_destroy(program);
  check(ncclCommDestroy(comm) == ncclSuccess &&
            cudaStreamDestroy(stream) == cudaSuccess,
        "the host destroys its communicator and stream");

  for (int64_t i = 0; i < numArgs; ++i) {
    cudaFree(args[i]);
    free(hostArgs[i]);
  }
  for (int64_t k = 0; k < numResults; ++k) {
    cudaFree(results[k]);
    free(first[k]);
  }
  cudaStreamDestroy(other);
  MPI_Finalize();
  return failures ? 1 : 0;
}
