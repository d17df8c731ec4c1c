/*===- braid_program.h - Compiled programs in a host's processes ----------===*
 *
 * Part of Braid.
 *
 * Runs a program Braid compiled (ARTIFACT.so and ARTIFACT.so.manifest, cpu
 * target) inside a host program that already is one process per rank: an
 * MPI job, a torchrun job with MPI beside it, a serving process. Each rank
 * loads the artifact once, on the communicator the host gives (or MPI's
 * world), and calls it any number of times with its own buffers: no files,
 * no processes started, no copies of the arguments.
 *
 *   braid_program *p;
 *   char error[512];
 *   if (braid_program_load("mlp.so", MPI_Comm_c2f(comm), &p, error,
 *                          sizeof error))
 *     ... report error ...
 *   void *args[] = {x, w_up, w_down};    // this rank's shards
 *   void *results[] = {y};               // this rank's part of the result
 *   braid_program_call(p, args, results, error, sizeof error);
 *   braid_program_destroy(p);
 *
 * Link libBraidProgram.so (it brings libBraidRuntime.so, whose braid_rt_*
 * symbols the artifact binds to: a host that dlopens this library must do
 * so with RTLD_GLOBAL).
 *
 * Contracts
 * - Buffers are contiguous, row-major, of the manifest's per-rank shapes and
 *   element types (braid_program_describe); the program reads its arguments
 *   and never writes them (Braid compiles entry arguments read-only), and
 *   writes each result into the buffer given for it.
 * - A call is collective: every rank of the communicator makes it, in the
 *   same order as its other calls of programs on that communicator. Calls
 *   must not overlap in a process (their collectives would interleave, and
 *   a program's arena of intermediates is one per process): a call made
 *   while another runs is refused.
 * - Problems the host can act on (a missing file, a manifest for another
 *   target or rank count, a null buffer, MPI's thread level) return non-zero
 *   with a message in `error` (truncated to `error_size`), on the ranks that
 *   see them. A failure inside a call (a peer that died, a transfer past the
 *   timeout) ends the whole job, as in every Braid run, with a line naming
 *   the rank and the transfer.
 *
 *===----------------------------------------------------------------------===*/

#ifndef BRAID_RUNTIME_BRAID_PROGRAM_H
#define BRAID_RUNTIME_BRAID_PROGRAM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct braid_program braid_program;

/* Loads `artifact` for this process's rank of the communicator whose MPI
 * Fortran handle is `comm` (MPI_Comm_c2f; -1: MPI's world, initializing MPI
 * if the host has not). Returns 0 and the program in *out, or non-zero. */
int braid_program_load(const char *artifact, int64_t comm, braid_program **out,
                       char *error, size_t error_size);

/* This process's rank in the program's communicator, and its size. */
int64_t braid_program_rank(const braid_program *program);
int64_t braid_program_size(const braid_program *program);

/* The number of arguments and results of the entry point. */
int64_t braid_program_num_args(const braid_program *program);
int64_t braid_program_num_results(const braid_program *program);

/* The per-rank type of argument (is_result 0) or result (1) `index`: its
 * element type's name as in manifests ("f32", "bf16", "i1", ...), its rank
 * and its sizes (valid while the program is). Returns 0, or non-zero for an
 * index out of range. */
int braid_program_describe(const braid_program *program, int is_result,
                           int64_t index, const char **dtype, int64_t *rank,
                           const int64_t **shape);

/* Runs the program once on this rank: `args` and `results` hold one buffer
 * per argument and result. Returns 0, or non-zero with a message. */
int braid_program_call(braid_program *program, void *const *args,
                       void *const *results, char *error, size_t error_size);

/* Releases the program (the library stays loaded: code may still refer to
 * it). The runtime stops when the host finalizes MPI, or at exit. */
void braid_program_destroy(braid_program *program);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RUNTIME_BRAID_PROGRAM_H */
