/*===- host_checks.h - What the test hosts of braid_program.h print -------===*
 *
 * Part of Braid.
 *
 *===----------------------------------------------------------------------===*
 *
 * One line per check on rank 0 of the world ("OK ..." or "FAIL ..."), and
 * the messages of refusals; `failures` counts the checks that failed on
 * some rank. Included by one host program each (static state).
 *
 *===----------------------------------------------------------------------===*/

#ifndef BRAID_TEST_RUNTIME_HOST_CHECKS_H
#define BRAID_TEST_RUNTIME_HOST_CHECKS_H

#include <mpi.h>
#include <stdio.h>

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

#endif /* BRAID_TEST_RUNTIME_HOST_CHECKS_H */
