/*===- braid_rt.h - Braid runtime C ABI -----------------------------------===*
 *
 * Part of Braid.
 *
 * The ABI between code Braid compiles and the runtime that executes it, plus
 * the lifecycle calls a runner (braid-exec) makes. One implementation per
 * backend (MPI on CPUs, libBraidRuntime.so; NCCL + CUDA on GPUs,
 * libBraidRuntimeCUDA.so) behind the same symbols.
 *
 * Conventions
 * - Every argument a compiled program passes is an int64_t, so that the
 *   compiler lowers calls without pointer types: buffer addresses are
 *   integers (`addr`), sizes are bytes or element counts as named.
 * - Ranks are numbered row-major over the grid (as upstream `shard` does). A
 *   group over some grid axes is the set of ranks that differ only along
 *   those axes; a rank's position in its group is row-major over the listed
 *   axes in the listed order.
 * - Grids have at most BRAID_RT_MAX_GRID_RANK axes; shapes are passed as
 *   (ndims, s0, s1, s2, s3) with unused sizes 1. Group axes are packed one
 *   axis per byte, least significant first: axes [2, 0] -> naxes = 2,
 *   packed = 2 | 0 << 8.
 * - Transfers and collectives are nonblocking: they return a request handle
 *   (> 0) that must be passed to braid_rt_wait exactly once. Buffers must
 *   stay untouched (sources unmodified, destinations unread) until then.
 * - `step` is a compile-time identifier of the transfer (ring step, op
 *   index) used in error messages and traces; it does not affect matching.
 * - On the cuda backend, addresses are device (or managed) memory and calls
 *   are asynchronous: they enqueue work on the rank's streams and return;
 *   braid_rt_wait orders the compute stream after a transfer without
 *   blocking the host. braid_rt_synchronize is the only point where the
 *   host waits for the device.
 * - Any failure (a backend error, a wait past the timeout, a bad argument)
 *   prints one line "braid: rank R: ..." naming the operation, the step and
 *   the peer, and aborts every rank with a non-zero exit code. Calls never
 *   return an error code.
 *
 *===----------------------------------------------------------------------===*/

#ifndef BRAID_RUNTIME_BRAID_RT_H
#define BRAID_RUNTIME_BRAID_RT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRAID_RT_MAX_GRID_RANK 4

/* Element types of reductions. */
enum braid_rt_dtype {
  BRAID_RT_F32 = 0,
  BRAID_RT_F64 = 1,
  BRAID_RT_F16 = 2,
  BRAID_RT_BF16 = 3,
  BRAID_RT_I8 = 4,
  BRAID_RT_I16 = 5,
  BRAID_RT_I32 = 6,
  BRAID_RT_I64 = 7
};

/* Reductions; the values match dist::ReductionKind. */
enum braid_rt_reduction {
  BRAID_RT_SUM = 0,
  BRAID_RT_MAX = 1,
  BRAID_RT_MIN = 2,
  BRAID_RT_PRODUCT = 3,
  BRAID_RT_BITAND = 4,
  BRAID_RT_BITOR = 5,
  BRAID_RT_BITXOR = 6
};

/* GEMM epilogues of braid_rt_gemm: what is applied to the product. */
enum braid_rt_epilogue {
  BRAID_RT_EPILOGUE_NONE = 0,
  BRAID_RT_EPILOGUE_BIAS = 1,
  BRAID_RT_EPILOGUE_BIAS_GELU = 2,
  BRAID_RT_EPILOGUE_BIAS_RELU = 3,
  BRAID_RT_EPILOGUE_GELU = 4,
  BRAID_RT_EPILOGUE_RELU = 5
};

/*--- Lifecycle: called by the runner, not by compiled code ---------------*/

/* Initializes the backend (MPI_Init_thread, the communication thread).
 * Safe to call once per process. */
void braid_rt_init(int *argc, char ***argv);
/* Initializes the backend for a host program that runs compiled programs in
 * its own processes (braid_program.h): on the MPI communicator whose Fortran
 * handle is `comm` (MPI_Comm_c2f; the host initialized MPI with
 * MPI_THREAD_SERIALIZED or better), or on MPI's world for -1 (initializing
 * MPI if the host has not). Ranks are then the communicator's. Returns NULL
 * once the runtime runs on that communicator (again: NULL), or a message
 * saying why it cannot (a handle MPI cannot convert may still end the job
 * in MPI's own checks); the one lifecycle call that reports instead of
 * ending the job. The runtime finalizes itself when the host finalizes MPI
 * (or at exit, where MPI is the runtime's). One communicator per process;
 * the cuda backend has none yet (a message). */
const char *braid_rt_init_on(int64_t comm);
/* The cuda backend's braid_rt_init_on: starts the runtime in a host's
 * process on the host's NCCL communicator `nccl_comm` (an ncclComm_t; ranks
 * are its ranks; the runtime splits its groups from it and never destroys
 * it) and the host's CUDA stream `stream` (a cudaStream_t: every call's
 * kernels, GEMMs, allocations and copies are enqueued on it, in the host's
 * stream order; the runtime adds a comm stream of its own), on the calling
 * thread's current device. Returns NULL once the runtime runs on them
 * (again: NULL), or why it cannot: another communicator or stream, a null
 * communicator, the cpu backend. braid_rt_finalize stops it (collective
 * over the communicator) and leaves both to the host; it may start again
 * afterwards. */
const char *braid_rt_init_cuda_on(void *nccl_comm, void *stream);
/* The program whose persistent symmetric sites braid_rt_symmetric_site
 * allocates from now on: 0 (the default) where a process runs one program,
 * each in-process program's own number otherwise (braid_program_call sets
 * it), so that two programs never share a site's buffer and flags. */
void braid_rt_set_site_scope(int64_t scope);
/* Waits for the communication thread, finalizes the backend. Aborts if a
 * request was never waited (finalizing with transfers in flight could hang).
 * Calls after the first are no-ops. */
void braid_rt_finalize(void);
int64_t braid_rt_world_rank(void);
int64_t braid_rt_world_size(void);
/* Seconds a wait may take before the run is aborted (default 120, or the
 * environment variable BRAID_TIMEOUT); must be positive (infinity waits
 * forever). May be called before braid_rt_init. */
void braid_rt_set_timeout(double seconds);
/* Prints "braid: rank R: <message>" to stderr and aborts all ranks (exit 1). */
void braid_rt_abort(const char *message) __attribute__((noreturn));
/* Synchronizes all ranks. */
void braid_rt_barrier(void);
/* Starts recording a timeline of this rank (comm requests, waits, and the
 * compute intervals between runtime calls). Collective: the ranks start
 * together (a barrier), which gives their timelines a common origin. */
void braid_rt_trace_begin(void);
/* Stops recording and writes the timelines of all ranks as one Chrome
 * trace-event JSON file at `path` (written by rank 0; collective). */
void braid_rt_trace_end(const char *path);
/* Stops recording (collective); writes the trace to `path` unless it is
 * NULL, and with `profile` nonzero rank 0 prints to stdout a table of the
 * recorded run's kernels (calls, time, share of the run and rate, means
 * over the ranks), slowest first. The cpu backend's kernels are those
 * braid_rt_kernel_begin/_end bracket; the cuda backend's its launches and
 * GEMMs, timed on the device. */
void braid_rt_trace_finish(const char *path, int64_t profile);

/* The device memory of a compiled function's memory plan (cuda backend):
 * `bytes` of device memory for this rank, allocated on the first call with
 * `key` (the address of the function's host arena, so one per loaded
 * artifact and function) and returned again on every later one; freed by
 * braid_rt_finalize. The cpu backend keeps the arena in the artifact and
 * never calls it. Aborts on failure or if `key` comes back with another
 * size. */
int64_t braid_rt_device_arena(int64_t key, int64_t bytes);

/*--- Runner memory: called by the runner, not by compiled code ----------*/

/* Program memory for the program's inputs: 64-byte aligned host memory on
 * the cpu backend, device memory on the cuda backend (the runner fills it
 * with braid_rt_copy_to_device, never directly). Never NULL, also for 0
 * bytes; aborts on failure. */
void *braid_rt_buffer_alloc(int64_t bytes);
void braid_rt_buffer_free(void *p);
/* Host memory to stage inputs in: page-locked on the cuda backend (copies
 * from it are asynchronous and at full speed), as braid_rt_buffer_alloc on
 * the cpu backend. Never NULL; aborts on failure. */
void *braid_rt_host_alloc(int64_t bytes);
void braid_rt_host_free(void *p);
/* Copies `bytes` of host memory, or of program memory, into program
 * memory, enqueued on this rank's compute stream (cuda: cudaMemcpyAsync,
 * so `src` must stay unchanged until the next braid_rt_synchronize; cpu:
 * memcpy). Work the program enqueues afterwards sees the copy. */
void braid_rt_copy_to_device(void *dst, const void *src, int64_t bytes);
/* Frees a buffer the program allocated and returned as a result (NULL is
 * ignored). */
void braid_rt_result_free(void *p);
/* Copies `bytes` of program memory (a result) to host memory, after the
 * work this rank enqueued has finished. */
void braid_rt_copy_to_host(void *dst, const void *src, int64_t bytes);
/* Waits until all work this rank enqueued has finished (a no-op on the cpu
 * backend, where calls complete on the host); aborts after the timeout or
 * on a device or transport error. */
void braid_rt_synchronize(void);
/* Times this rank's work: start marks the current point of the rank's
 * compute stream (a timing CUDA event; the host clock on the cpu backend);
 * stop marks the point reached after the work enqueued since, waits for it
 * (polling without sleeping) and returns the milliseconds between the two
 * marks as the device measured them. Everything a program enqueues,
 * transfers included, is ordered before the stop mark, because every
 * transfer is waited. */
void braid_rt_timer_start(void);
double braid_rt_timer_stop(void);
/* Element-wise maximum over all ranks of `count` host values, in place.
 * Collective over all ranks. */
void braid_rt_host_max(double *values, int64_t count);
/* Loopback (cuda backend only, BRAID_LOOPBACK=N before braid_rt_init): runs
 * fn(arg) on N threads, one per logical rank, each with the rank's own
 * streams, and returns when all have returned; on a rank's thread
 * braid_rt_world_rank is that rank. Outside it the process acts as rank 0
 * of its own (braid_rt_host_max is the identity there). Returns 0 (not in
 * loopback mode: the cpu backend, or no BRAID_LOOPBACK) from
 * braid_rt_loopback_ranks. */
int64_t braid_rt_loopback_ranks(void);
void braid_rt_loopback_run(void (*fn)(void *arg), void *arg);

/*--- Called by compiled code ---------------------------------------------*/

/* Handle of the group over the given axes of a grid of the given shape.
 * Aborts if the grid's size differs from the number of ranks. Cheap to call
 * repeatedly (cached). */
int64_t braid_rt_group(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t naxes, int64_t axes_packed);
/* This rank's coordinate along `axis` of a grid of the given shape. */
int64_t braid_rt_coord(int64_t ndims, int64_t s0, int64_t s1, int64_t s2,
                       int64_t s3, int64_t axis);

/* Point-to-point along a group (a group over one axis for ring steps):
 * send `bytes` at `addr` to the rank at (my position + peer_offset) mod n;
 * receive from the rank at (my position + peer_offset) mod n. A send with
 * offset k matches the peer's receive with offset -k; messages between two
 * ranks match in posting order. (Offsets are matched mod n: in a group of 2,
 * +1 and -1 are the same peer and the same channel, so a program exchanging
 * in both directions must post its receives in the order of the peer's
 * sends.) Sizes must agree; a mismatch aborts. */
int64_t braid_rt_send(int64_t group, int64_t peer_offset, int64_t addr,
                      int64_t bytes, int64_t step);
int64_t braid_rt_recv(int64_t group, int64_t peer_offset, int64_t addr,
                      int64_t bytes, int64_t step);

/* Collectives over a group, on contiguous buffers (blocks in group order
 * along the leading dimension). */
int64_t braid_rt_all_gather(int64_t group, int64_t src, int64_t dst,
                            int64_t bytes_per_rank, int64_t step);
int64_t braid_rt_reduce_scatter(int64_t group, int64_t src, int64_t dst,
                                int64_t count_per_rank, int64_t dtype,
                                int64_t reduction, int64_t step);
int64_t braid_rt_all_reduce(int64_t group, int64_t src, int64_t dst,
                            int64_t count, int64_t dtype, int64_t reduction,
                            int64_t step);
int64_t braid_rt_all_to_all(int64_t group, int64_t src, int64_t dst,
                            int64_t bytes_per_rank, int64_t step);
/* Every rank receives into `dst` the `src` of the rank at group position
 * `root`. */
int64_t braid_rt_broadcast(int64_t group, int64_t src, int64_t dst,
                           int64_t bytes, int64_t root, int64_t step);

/* Blocks until the request has completed; aborts after the timeout. (On the
 * cuda backend: makes the compute stream wait for it; the host does not
 * block, except on the loopback transport until a peer posted the match.) */
void braid_rt_wait(int64_t request);

/* Symmetric buffers: `bytes` of memory on every rank of `group`, at the
 * same offset of one window the group shares. The cuda backend allocates
 * with ncclMemAlloc and registers the window (ncclCommWindowRegister, the
 * symmetric kind), so NCCL's collectives on it can use its symmetric-memory
 * kernels; on the loopback transport it is ordinary device memory, on the
 * cpu backend one MPI shared-memory window over the group (which must lie
 * on one node). Collective over the group (every member calls it with the
 * same size, in the same order); returns this rank's address.
 * Free with braid_rt_symmetric_free (collective too), which first waits
 * for the rank's device work. */
int64_t braid_rt_symmetric_alloc(int64_t group, int64_t bytes);
void braid_rt_symmetric_free(int64_t group, int64_t addr);

/* Stream-level signals on a 32-bit flag at `addr` (device memory on the
 * cuda backend): set writes `value` to it once the work enqueued so far on
 * the rank's compute (`stream` = 0) or comm (1) stream is done
 * (cuStreamWriteValue32); wait makes that stream wait, without the host,
 * until the flag is >= `value` (cuStreamWaitValue32), a wait that the
 * timeout covers like any other. On the cpu backend, set is a release
 * store and wait an acquiring spin. For schedules that hand tiles between
 * streams; no compiled schedule uses them yet. */
void braid_rt_signal_set(int64_t addr, int64_t value, int64_t stream,
                         int64_t step);
void braid_rt_signal_wait(int64_t addr, int64_t value, int64_t stream,
                          int64_t step);

/* One-sided transfers through symmetric memory (xfer.symmetric_alloc,
 * xfer.put, xfer.signal, xfer.signal_wait; both backends: on CPU ranks an
 * MPI shared-memory window, on CUDA an NCCL symmetric window or, on the
 * loopback transport, device memory of one process).
 *
 * braid_rt_symmetric_site returns this rank's copy of the persistent
 * symmetric buffer of compile-time `site` (>= 0): the first call for a
 * (group, site, bytes) allocates it, zero-filled, collectively over the
 * group; later calls return the same memory, so flags in it keep their
 * epochs across calls. The buffers live until braid_rt_finalize. The
 * group must lie in one shared-memory domain (one node; on CUDA, NCCL's
 * LSA team: one NVLink domain); otherwise the call aborts, naming the
 * group.
 *
 * braid_rt_symmetric_peer returns the address in the copy held by the rank
 * at (my position + peer_offset) mod n of the byte at `addr`, which must
 * lie in a symmetric buffer of `group`.
 *
 * braid_rt_put starts copying `bytes` from `src` to the peer's copy of
 * `dst` (a symmetric address), then, if `flag` is not 0, adds 1 to the
 * peer's copy of the 32-bit flag at `flag` with release semantics. The
 * request completes when `src` may be reused.
 *
 * braid_rt_signal_add adds `value` to the peer's copy of the flag at
 * `flag` (release), after everything this rank did before.
 *
 * braid_rt_signal_wait_next counts this rank's waits on each flag: the k-th
 * call for a flag returns once the flag is at least k - slack (modulo
 * 2^32), with acquire semantics, and aborts after the timeout naming the
 * step, the flag, the epoch expected and the value seen.
 *
 * braid_rt_signal_next_epoch counts a wait as braid_rt_signal_wait_next
 * does and returns k - slack (modulo 2^32) without waiting: a kernel polls
 * the flag for that value itself (xfer.kernel_wait). */
int64_t braid_rt_symmetric_site(int64_t group, int64_t bytes, int64_t site);
int64_t braid_rt_symmetric_peer(int64_t group, int64_t peer_offset,
                                int64_t addr);
int64_t braid_rt_put(int64_t group, int64_t peer_offset, int64_t src,
                     int64_t dst, int64_t bytes, int64_t flag, int64_t step);
void braid_rt_signal_add(int64_t group, int64_t peer_offset, int64_t flag,
                         int64_t value, int64_t step);
void braid_rt_signal_wait_next(int64_t flag, int64_t slack, int64_t step);
int64_t braid_rt_signal_next_epoch(int64_t flag, int64_t slack, int64_t step);

/* C[m,n] = act(beta C + op(A)[m,k] . op(B)[k,n] + bias[n]) in row-major
 * storage, with beta = 1 when `accumulate` is non-zero and 0 otherwise (C is
 * then only written, so a zero fill before the product is not needed),
 * for `batch` batches (batch i's matrices at a + i * stride_a elements, and
 * so on). trans_a = 0: A stored [m,k] with row stride lda; 1: stored [k,m].
 * trans_b = 0: B stored [k,n] with row stride ldb; 1: stored [n,k]. C
 * stored [m,n] with row stride ldc. Types are braid_rt_dtype: A and B F32,
 * F16 or BF16 alike, C F32 or their type; accumulation in f32. epilogue: a
 * braid_rt_epilogue (GELU in its tanh form); bias
 * holds n elements of C's type (0 without bias). Enqueued on the compute
 * stream. The cuda backend runs it on cuBLASLt, the cpu backend on oneDNN
 * (synchronously, on the rank's BRAID_NUM_THREADS threads). */
void braid_rt_gemm(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t a,
                   int64_t lda, int64_t stride_a, int64_t a_dtype,
                   int64_t trans_a, int64_t b, int64_t ldb, int64_t stride_b,
                   int64_t b_dtype, int64_t trans_b, int64_t c, int64_t ldc,
                   int64_t stride_c, int64_t c_dtype, int64_t accumulate,
                   int64_t epilogue, int64_t bias, int64_t step);

/* The widest code path of the cpu target's kernels this CPU runs: 0 the
 * x86-64 baseline (SSE2), 1 x86-64-v3 (AVX2, FMA, F16C), 2 x86-64-v4
 * (AVX-512 F/BW/DQ/VL/CD), each with the operating system's support for
 * its registers. BRAID_CPU_DISPATCH=generic|x86-64-v3|x86-64-v4 caps it
 * (to test or compare the paths); an unknown value is a fatal error.
 * Decided once per process; kernels built with --cpu=generic call it to
 * pick their clone. */
int64_t braid_rt_cpu_level(void);

/* A check of the compiled program failed (a cf.assert: torch-mlir's bounds
 * checks on indices, among others): prints "braid: rank R: a check in the
 * program failed: MESSAGE" and ends the job with status 1, as every fatal
 * error of the runtime does. The compiler calls it where upstream's
 * lowering of cf.assert called abort(). Does not return. */
void braid_rt_assert_failed(const char *message);

/* Runs body(context, begin, end) over [0, count) split into contiguous
 * ranges, one per thread of the rank (BRAID_NUM_THREADS, else the cores
 * divided by the ranks), on the OpenMP threads oneDNN's GEMMs use; returns
 * when all have. The cpu target's fused kernels call it with their tiles.
 * One thread (or count 1): one call, on the calling thread. */
void braid_rt_parallel_for(void (*body)(void *, int64_t, int64_t),
                           void *context, int64_t count);

/* Around each kernel call of a cpu program (a fused kernel, a GEMM): while
 * a trace records (braid_rt_trace_begin), the time between the two is an
 * event on the rank's compute track named by `name`, the address of a
 * NUL-terminated string of the program (the kernel and the source location
 * it came from), with the bytes it moves and the floating-point operations
 * it computes (0: not known) for the profile's rates. Otherwise they do
 * nothing. Calls do not nest. */
void braid_rt_kernel_begin(int64_t name, int64_t bytes, int64_t flops);
void braid_rt_kernel_end(void);

#ifdef __cplusplus
}
#endif

#endif /* BRAID_RUNTIME_BRAID_RT_H */
