/*===- host_checks.h - What the test hosts of braid_program.h print -------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * One line per check on rank 0 of the world ("OK ..." or "FAIL ..."), and
 * the messages of refusals; `failures` counts the checks that failed on
 * some rank; and a rank that dies (exit code 3) a moment into its calls.
 * Included by one host program each (static state).
 *
 *===----------------------------------------------------------------------===*/

#ifndef BRAID_TEST_RUNTIME_HOST_CHECKS_H
#define BRAID_TEST_RUNTIME_HOST_CHECKS_H

#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

static int worldRank;
static int failures;

/* Prints on rank 0 whether `ok` holds on every rank of the world. */
static void check(int ok, const char *what) {
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all)
    ++failures;
  if (worldRank == 0)
    printf("%s %s\n", all ? "OK" : "FAIL", what);
}

/* Prints rank 0's refusal message. */
static void refusal(int rc, const char *error) {
  if (worldRank == 0)
    printf("refused (%d): %s\n", rc != 0, error);
}

static void *exitAfter(void *milliseconds) {
  usleep((useconds_t)((uintptr_t)milliseconds * 1000));
  _exit(3);
  return NULL;
}

/* Exits the process with code 3 from another thread `milliseconds` from
 * now, most likely while it is inside a call: the job must end, named by
 * mpirun, instead of hanging. */
static void dieSoon(unsigned milliseconds) {
  pthread_t thread;
  pthread_create(&thread, NULL, exitAfter, (void *)(uintptr_t)milliseconds);
}

#endif /* BRAID_TEST_RUNTIME_HOST_CHECKS_H */
