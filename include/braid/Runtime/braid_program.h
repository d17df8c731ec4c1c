/*===- braid_program.h - Compiled programs in a host's processes ----------===*
 *
 * Part of Braid.
 *
 * Runs a program Braid compiled (ARTIFACT.so and ARTIFACT.so.manifest)
 * inside a host program that already is one process per rank: an MPI job,
 * a torchrun job, a serving process. Each rank loads the artifact once, on
 * the communicator the host gives (cpu target: an MPI communicator, or
 * MPI's world; cuda target: the host's NCCL communicator and CUDA stream),
 * and calls it any number of times with its own buffers: no files, no
 * processes started, no copies of the arguments.
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
 * Link libBraidProgram.so for cpu programs (it brings libBraidRuntime.so,
 * whose braid_rt_* symbols the artifact binds to: a host that dlopens this
 * library must do so with RTLD_GLOBAL), libBraidProgramCUDA.so for cuda
 * programs (it brings libBraidRuntimeCUDA.so): one of them per process.
 *
 * On cuda (braid_program_load_cuda):
 *   ncclComm_t comm;      // the host's: ncclCommInitRank, ncclCommSplit ...
 *   cudaStream_t stream;  // where the host wants the work
 *   braid_program_load_cuda("mlp.so", comm, stream, &p, error, sizeof error);
 *   void *args[] = {x_dev, w_up_dev, w_down_dev};  // device buffers
 *   void *results[] = {y_dev};
 *   braid_program_call(p, args, results, error, sizeof error);
 *   // y_dev is written in `stream`'s order: the host synchronizes it, or
 *   // enqueues its next work on it.
 *
 * Contracts
 * - Buffers are contiguous, row-major, of the manifest's per-rank shapes and
 *   element types (braid_program_describe), in host memory on the cpu target
 *   and device memory (the current device's) on cuda; the program reads its
 *   arguments and never writes them (Braid compiles entry arguments
 *   read-only), and writes each result into the buffer given for it.
 * - On cuda a call enqueues its work on the host's stream and returns
 *   without waiting for it (as a CUDA library call does); the arguments
 *   must hold their values, and the results are written, in that stream's
 *   order. The runtime keeps its own comm stream, ordered with the host's
 *   by events.
 * - A call is collective: every rank of the communicator makes it, in the
 *   same order as its other calls of programs on that communicator. Calls
 *   must not overlap in a process (their collectives would interleave, and
 *   a program's arena of intermediates is one per process): a call made
 *   while another runs is refused. One communicator (and on cuda one
 *   stream) per process: a load on another is refused.
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

/* Loads a cuda `artifact` for this process's rank of the NCCL communicator
 * `nccl_comm` (an ncclComm_t, which stays the host's: the runtime splits
 * its groups from it and never destroys it), to run on the CUDA stream
 * `stream` (a cudaStream_t; NULL: the legacy default stream) of the calling
 * thread's current device. Returns 0 and the program in *out, or non-zero.
 * In libBraidProgram.so (the cpu runtime) it refuses with a message. */
int braid_program_load_cuda(const char *artifact, void *nccl_comm, void *stream,
                            braid_program **out, char *error,
                            size_t error_size);

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
 * it). On the cpu target the runtime stops when the host finalizes MPI, or
 * at exit. On cuda it stops with the last program destroyed, which is then
 * collective (every rank destroys it: the runtime's symmetric buffers are
 * freed once the peers are done with them), and it leaves the host's
 * communicator and stream to the host; a later load starts it again. */
void braid_program_destroy(braid_program *program);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RUNTIME_BRAID_PROGRAM_H */
