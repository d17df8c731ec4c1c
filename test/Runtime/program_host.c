/*===- program_host.c - A host job that runs a program in process ---------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * braid_program.h as an MPI job uses it: the job initializes MPI itself,
 * and each rank loads a compiled program (here the hand-written stand-in
 * libbraid-test-entry.so: 2 ranks, out = sum over the ranks of 2 * x + y)
 * once and calls it many times with its own buffers.
 *
 *   braid-program-host split ARTIFACT   4 ranks: the world split in two
 *       communicators of 2, each running the program on its own (a rank's
 *       result sums only its communicator's inputs); 200 calls with new
 *       inputs each, the arguments never written; then the refusals a host
 *       can act on (a null buffer, another communicator, a missing file).
 *   braid-program-host world ARTIFACT   the world's ranks: a program for
 *       another number of ranks is refused on every rank.
 *   braid-program-host die ARTIFACT   2 ranks calling in a loop; a thread
 *       of rank 1 exits the process (code 3) a moment into it, most likely
 *       inside a call, while rank 0 waits inside its own: the job must end,
 *       named by mpirun, instead of hanging.
 *
 * Prints one line per check on rank 0 ("OK ..." or "FAIL ...", and the
 * messages of refusals) and exits non-zero if any check failed.
 *
 *===----------------------------------------------------------------------===*/

#include "braid/Runtime/braid_program.h"

#include "host_checks.h"

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static uint16_t bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return (uint16_t)(bits >> 16); /* exact for the small values used */
}

/* A call on another thread, and what it returned. */
struct Call {
  braid_program *program;
  void **args, **results;
  int rc;
  char error[512];
};

static void *callOnThread(void *data) {
  struct Call *call = (struct Call *)data;
  call->rc = braid_program_call(call->program, call->args, call->results,
                                call->error, sizeof call->error);
  return NULL;
}

static int split(const char *artifact) {
  /* Ranks 0 and 1 form one communicator, 2 and 3 the other. */
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, worldRank / 2, worldRank, &comm);
  char error[512] = "";
  braid_program *program = NULL;
  int rc = braid_program_load(artifact, MPI_Comm_c2f(comm), &program, error,
                              sizeof error);
  check(rc == 0, "load on a communicator of 2 of the 4 ranks");
  if (rc) {
    refusal(rc, error);
    return 1;
  }
  check(braid_program_rank(program) == worldRank % 2 &&
            braid_program_size(program) == 2,
        "rank and size are the communicator's");
  const char *dtype = NULL;
  int64_t rank = 0;
  const int64_t *shape = NULL;
  check(braid_program_num_args(program) == 2 &&
            braid_program_num_results(program) == 1 &&
            braid_program_describe(program, 0, 1, &dtype, &rank, &shape) == 0 &&
            strcmp(dtype, "bf16") == 0 && rank == 1 && shape[0] == 3 &&
            braid_program_describe(program, 1, 1, &dtype, &rank, &shape) != 0,
        "describe");

  /* Calls with new inputs each time: x = world rank + call, y = call. */
  float x[4][3], out[4][3];
  uint16_t y[3];
  int right = 1, unchanged = 1;
  for (int call = 0; call < 200; ++call) {
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j)
        x[i][j] = (float)(worldRank * 10 + call % 7 + i - j);
    for (int j = 0; j < 3; ++j)
      y[j] = bf16((float)(call % 5 + j));
    void *args[] = {x, y};
    void *results[] = {out};
    if (braid_program_call(program, args, results, error, sizeof error)) {
      right = 0;
      break;
    }
    /* The sum over this communicator's two world ranks r0 = 2 * (rank / 2)
     * and r0 + 1 of 2 * x + y. */
    int r0 = worldRank / 2 * 2;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 3; ++j) {
        float mine =
            2.0f * (float)(r0 * 10 + call % 7 + i - j) + (float)(call % 5 + j);
        float peer = 2.0f * (float)((r0 + 1) * 10 + call % 7 + i - j) +
                     (float)(call % 5 + j);
        right &= out[i][j] == mine + peer;
        unchanged &= x[i][j] == (float)(worldRank * 10 + call % 7 + i - j);
      }
  }
  check(right, "200 calls: each result sums its communicator's inputs");
  check(unchanged, "the arguments are never written");

  /* Refusals, returned on the rank that sees them. */
  void *nullArgs[] = {x, NULL};
  void *results[] = {out};
  rc = braid_program_call(program, nullArgs, results, error, sizeof error);
  check(rc != 0, "a null argument is refused before the call");
  refusal(rc, error);
  braid_program *other = NULL;
  rc = braid_program_load(artifact, MPI_Comm_c2f(MPI_COMM_WORLD), &other, error,
                          sizeof error);
  check(rc != 0 && other == NULL, "another communicator is refused");
  refusal(rc, error);
  rc = braid_program_load("/nonexistent/program.so", MPI_Comm_c2f(comm), &other,
                          error, sizeof error);
  check(rc != 0 && other == NULL, "a missing artifact is refused");
  refusal(rc, error);

  /* A second program on the same communicator: both keep working. */
  rc = braid_program_load(artifact, MPI_Comm_c2f(comm), &other, error,
                          sizeof error);
  void *args[] = {x, y};
  int both =
      rc == 0 &&
      braid_program_call(program, args, results, error, sizeof error) == 0 &&
      braid_program_call(other, args, results, error, sizeof error) == 0;
  check(both, "two programs on one communicator");

  /* Overlapping calls: rank 0 of each communicator calls on a thread and,
   * 0.1 s later, on the main thread, while its peer comes 0.5 s late, so
   * that the first call waits in its collective: exactly one of the two is
   * refused (whichever came second), and the other completes. */
  int first = braid_program_rank(program) == 0;
  struct Call call = {program, args, results, 0, ""};
  int refused = 1;
  if (first) {
    pthread_t thread;
    pthread_create(&thread, NULL, callOnThread, &call);
    usleep(100 * 1000);
    rc = braid_program_call(program, args, results, error, sizeof error);
    pthread_join(thread, NULL);
    refused = (rc != 0) + (call.rc != 0) == 1;
    if (call.rc)
      strcpy(error, call.error);
  } else {
    usleep(500 * 1000);
    refused =
        braid_program_call(program, args, results, error, sizeof error) == 0;
  }
  check(refused, "of two overlapping calls one is refused, the other runs");
  refusal(1, error);
  braid_program_destroy(other);
  braid_program_destroy(program);
  MPI_Comm_free(&comm);
  return 0;
}

static int world(const char *artifact) {
  char error[512] = "";
  braid_program *program = NULL;
  int rc = braid_program_load(artifact, -1, &program, error, sizeof error);
  check(rc != 0 && program == NULL,
        "a program for another number of ranks is refused on every rank");
  refusal(rc, error);
  return 0;
}

static int die(const char *artifact) {
  char error[512] = "";
  braid_program *program = NULL;
  if (braid_program_load(artifact, -1, &program, error, sizeof error)) {
    refusal(1, error);
    return 1;
  }
  if (worldRank == 0)
    printf("OK loaded; calling until the job ends\n");
  fflush(stdout);
  if (worldRank == 1)
    dieSoon(500);
  float x[4][3] = {{0}}, out[4][3];
  uint16_t y[3] = {0};
  void *args[] = {x, y};
  void *results[] = {out};
  for (;;)
    if (braid_program_call(program, args, results, error, sizeof error)) {
      printf("rank %d: call refused: %s\n", worldRank, error);
      return 1;
    }
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  if (argc != 3 || (strcmp(argv[1], "split") && strcmp(argv[1], "world") &&
                    strcmp(argv[1], "die"))) {
    if (worldRank == 0)
      fprintf(stderr, "usage: braid-program-host split|world|die ARTIFACT\n");
    MPI_Finalize();
    return 2;
  }
  if (strcmp(argv[1], "split") == 0)
    split(argv[2]);
  else if (strcmp(argv[1], "die") == 0)
    failures += die(argv[2]);
  else
    world(argv[2]);
  fflush(stdout);
  /* The runtime finalizes itself inside MPI_Finalize. */
  MPI_Finalize();
  return failures ? 1 : 0;
}
