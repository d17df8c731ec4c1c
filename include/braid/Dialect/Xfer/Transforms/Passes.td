//===- Passes.td - Xfer passes -----------------------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD
#define BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def CheckSchedule
    : InterfacePass<"braid-check-schedule", "mlir::FunctionOpInterface"> {
  let summary = "Proves a transfer schedule free of deadlocks and races";
  let description = [{
    Every rank runs the same program, so the k-th send with offset `+d`
    along an axis meets the k-th receive with offset `-d` on the peer, at
    the same program point. The pass walks each block in order and proves:

    - **matching**: every receive has its send and every send its receive
      (counts balance per grid, axis and offset), with equal byte counts;
    - **no deadlock**: a wait on a receive (or a send) comes after the
      matching send (or receive) is posted — otherwise the peer, running
      the same program, would be waiting at that wait before posting it;
    - **no race**: between a transfer and its wait, no op writes the
      transfer's source, and no op reads or writes its destination,
      deallocations included (buffers with the same allocation are assumed
      to overlap unless their static subviews are disjoint);
    - every request is waited in the block that posted it.

    One-sided transfers (`xfer.put`, `xfer.signal`, `xfer.signal_wait` on
    flags in symmetric memory, as `braid-symmetric-transfers` writes them)
    follow a signal protocol, proved in the function's body in program
    order. A rank's flags are raised by its peers at the same program
    points where it raises theirs, and flags count across calls, so each
    rule also holds from one call into the next:

    - **no deadlock**: the k-th wait on a flag (epoch k - slack) comes after
      at least that many raises of it in the program;
    - **balance**: a flag that is waited is raised as many times per call
      as it is waited, or the next call's waits pass early or hang;
    - **data before reads**: every local read of a buffer that peers put
      into comes after a wait on the flag its puts raise (and only those
      puts raise it), and nothing but puts writes it;
    - **credits**: before each put, the writer has waited for a flag that
      the reader raises back after its last read of what the previous put
      (the previous call's last put, for the first) left there.

    Signals and puts in loops or branches, and flags at non-constant
    indices, are not modeled: the pass says so and fails.

    A violation is an error naming the step, the ranks involved and the
    buffer; the schedules Braid generates always pass. The pass changes
    nothing.

    ```mlir
    // error: rank r waits at step 1 for the receive from rank r-1 along
    // axis 0 of @tp before the matching send is posted: deadlock
    %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 1 : memref<8xf32>
    xfer.wait %r : !xfer.request
    %s = xfer.send %a on @tp axes = [0] offset = 1 step = 1 : memref<8xf32>
    xfer.wait %s : !xfer.request
    ```
  }];
}

def SymmetricTransfers
    : Pass<"braid-symmetric-transfers", "mlir::ModuleOp"> {
  let summary = "Moves marked ring transfers through symmetric memory";
  let description = [{
    Rewrites every `xfer.send` / `xfer.recv` pair that carries
    `dist.symmetric` (braid-overlap's choice of `--comm`) into one-sided
    transfers through symmetric memory. Every rank runs the same program, so
    the k-th marked send with offset `+d` at step `s` along an axis meets
    the k-th marked receive with offset `-d` at step `s` on the peer: the
    pair is one channel, with a persistent symmetric slot shaped like the
    receive buffer and two flags (data and credit) in the group's flag
    buffer. Then:

    - the send waits for its credit (`slack = 1`: the peer has consumed
      what the previous execution put there) and becomes an `xfer.put` into
      the peer's slot, signalling the data flag;
    - the receive disappears; where it was waited, the rank waits for the
      data flag, copies the slot into the receive buffer and gives the
      producer its credit back;
    - with `zero-copy` (the default), when the receive buffer is an
      allocation of the slot's type that is afterwards only read in that
      block (linalg inputs, the sources of copies, puts and sends, loads)
      and deallocated, there is no copy: its readers read the slot, and the
      credit goes back after the last of them (after the wait of a transfer
      that reads it). Ring schedules forward and consume what they receive,
      so most channels qualify.

    Flags count and are never reset, so the rewritten schedule may run any
    number of times (layers, repeated calls). Schedules keep their shape:
    each put starts where its send started and each data wait sits where
    its receive was waited. A marked transfer without its partner in the
    same function, or a wait in another block, is an error.

    ```mlir
    %s = xfer.send %a on @tp axes = [0] offset = 1 step = 2 {dist.symmetric} : memref<8xf32>
    %r = xfer.recv %b on @tp axes = [0] offset = -1 step = 2 {dist.symmetric} : memref<8xf32>
    ...
    xfer.wait %s, %r : !xfer.request, !xfer.request
    // becomes
    %slot = xfer.symmetric_alloc on @tp axes = [0] site = 1 : memref<8xf32>
    %flags = xfer.symmetric_alloc on @tp axes = [0] site = 0 : memref<2xi32>
    xfer.signal_wait %flags[%c1] slack = 1 step = 2 : memref<2xi32>
    %p = xfer.put %a, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 2 : ...
    ...
    xfer.wait %p : !xfer.request
    xfer.signal_wait %flags[%c0] slack = 0 step = 2 : memref<2xi32>
    memref.copy %slot, %b : memref<8xf32> to memref<8xf32>
    xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 2 : memref<2xi32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
  let options = [
    Option<"zeroCopySlots", "zero-copy", "bool", /*default=*/"true",
           "Let the readers of a receive buffer read the slot instead of a "
           "copy of it">
  ];
  let statistics = [
    Statistic<"numZeroCopy", "zero-copy",
              "Channels whose readers read the slot itself">,
    Statistic<"numChannels", "channels",
              "Number of send/receive pairs made one-sided">
  ];
}

def FusePuts
    : InterfacePass<"braid-fuse-puts", "mlir::FunctionOpInterface"> {
  let summary = "Fused kernels store their results into the peers' slots";
  let description = [{
    A put copies its source into a peer's symmetric slot once the source is
    written. Where a fused kernel (`scf.forall {braid.kernel}`) or an
    elementwise op has just written the whole source, it stores its result
    into the peer's slot as well, through an `xfer.peer_view`, as it
    computes it, and the put becomes an `xfer.signal` of the peer's data
    flag that names the slot (`for %slot`). The credit wait that preceded
    the put moves before the kernel:
    the peer's slot is written from there on. The consumer is unchanged
    (it waits on the data flag where it did). On the cuda target each
    block stores its rows to the peer over NVLink, and the signal is
    ordered after the kernel on the stream.

    This is the producer side of an all-gather whose input a memory-bound
    chain computes (`push_ag_matmul`: the chain's kernel writes its rows
    into every peer's gather buffer) and of the second round of a two-shot
    all-reduce (`two_shot_ar`: the kernel that normalizes this rank's rows
    pushes them to every peer).

    A put qualifies when it raises a flag, its credit wait (slack 1)
    precedes it, its slot is a whole `xfer.symmetric_alloc` shaped like its
    source (which may be a view: a rank's block of the gathered result),
    and, going back from it in its block, the first op that may write the
    source's buffer is either such a kernel, whose iterations each write
    one tile of the source (its loops cut the source into blocks of their
    steps) whole, or an elementwise `linalg.generic` writing the source
    whole. The op that completes each tile (or the elementwise op itself)
    gets the peer's slot as one more output yielding the same value; where
    a copy completes the tile, the iteration copies it into the peer's
    once complete. A contraction (with the fill right before it, when it
    reads its output) that writes the whole source, a buffer of its own
    (an allocation or a planned buffer) that nothing else uses but the put
    (through reshapes) and its deallocation, writes the peer's
    slot instead (`push_matmul_rs`: each block's partial is computed in
    its owner's slot). Others stay puts. `braid-check-schedule` proves the result: stores
    through a peer view followed by a signal at the same peer offset are a
    delivery into that slot, with the credit rule of a put.

    ```mlir
    scf.forall (%i) in (4) {
      %t = memref.subview %out[%i, 0] [1, 64] [1, 1] : ...
      linalg.generic ... outs(%t : ...)
    } {braid.kernel}
    xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
    %p = xfer.put %out, %slot on @tp axes = [0] offset = 1 signal %flags[%c0] step = 0 : ...
    xfer.wait %p : !xfer.request
    // becomes
    xfer.signal_wait %flags[%c1] slack = 1 step = 0 : memref<2xi32>
    %peer = xfer.peer_view %slot on @tp axes = [0] offset = 1 : memref<4x64xf32>
    scf.forall (%i) in (4) {
      %t = memref.subview %out[%i, 0] [1, 64] [1, 1] : ...
      %pt = memref.subview %peer[%i, 0] [1, 64] [1, 1] : ...
      linalg.generic ... outs(%t, %pt : ...)  // yields its value twice
    } {braid.kernel}
    xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %slot step = 0
        : memref<2xi32>, memref<4x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numFused", "fused-puts",
              "Puts whose source kernel stores into the peer's slot">
  ];
}

def KernelSignals : Pass<"braid-kernel-signals", "mlir::ModuleOp"> {
  let summary = "Fused kernels wait on and raise their peers' flags themselves";
  let description = [{
    The cuda target's flag waits are stream waits and its raises one-thread
    kernels on the stream, around the kernels that read what arrived or
    stored what leaves. This pass moves them into the fused kernels
    (`scf.forall {braid.kernel}`) they surround, so that the collective
    and its chain are one launch that talks to its peers itself (the
    all-reduce + RMSNorm kernels of vLLM, FlashInfer and TensorRT-LLM):

    - the `xfer.signal_wait`s just before a kernel (only ops that touch no
      buffer's contents between them) become an `xfer.flag_epoch` where the
      wait was, which counts the wait on the host and returns the epoch,
      and an `xfer.kernel_wait` at the start of the kernel's body: each
      block polls the flag with acquire loads at system scope;
    - the `xfer.signal`s just after a kernel become an `xfer.kernel_signal`
      at the end of its body, on the peer's view of the flag buffer: the
      kernel's last block to arrive (counted in a word of a small
      symmetric buffer the pass allocates per function) raises the flag
      with release at system scope.

    - an elementwise `linalg.generic` on buffers next to such flag ops (the
      cast of a GEMM's f32 partial to bf16 that `braid-fuse-puts` has
      store into the peer's slot, the producer of a one-shot all-reduce)
      first becomes a fused kernel of its rows (one tile per index of its
      first loop, each on the subviews of its operands), so that its
      flags can move into it too.

    - with `gemm-waits` (the pipeline sets it with `--gemm=generated`), a
      run of alike contractions whose operands the generated GEMM takes
      (f16 or bf16; f32 too with `gemm-tf32`), each with the
      `xfer.signal_wait`s just before it and its zero fill, at least one
      of them waiting (the chunks of a pushed all-gather, the chunk here
      first), becomes one kernel: an `scf.forall` over the contractions
      marked `braid.gemm_segments` (the most blocks, `max-tiles`), whose
      body switches to each one's `xfer.kernel_wait`s, fill and
      contraction. braid-map-to-gpu makes it one persistent generated
      GEMM whose tiles poll their own chunk's flags, so each tile starts
      when its rows have landed (FLUX's and TileLink's consumer GEMM). The
      contractions of a run must be free to run at once (none writes a
      byte another touches, proven from their buffers); each wait is
      polled by the contraction after it and by every later one reading
      the slot it stands for (every later one, when it stands for no one
      slot); alike contractions share a kernel, interleaved kinds get one
      each. What stands between the contractions moves after the kernels
      where that is safe: copies that write nothing the contractions touch
      and read nothing they write, waits for puts whose sources they do
      not write, and raises nothing in the same call waits for (their flag
      raised by that op alone, every wait on it with a slack, waiting for
      the previous call's raise); anything else ends the run.
      A raise right after a contraction of the run that announces the
      peer's slot the contraction writes through a peer view (a block of a
      pushed reduce-scatter, `push_matmul_rs`, after braid-fuse-puts)
      becomes an `xfer.kernel_signal` at the end of that contraction's
      case, on an arrival word of its own: the contraction's last tile
      raises it (FLUX's and TileLink's producer GEMM), and the run is a
      kernel even where none of its contractions waits. Not where an
      earlier contraction of the run, or a copy or wait it defers, writes
      what that peer may read (its memory, a symmetric buffer of this
      rank's) or reads a symmetric buffer: the raise would no longer
      follow it. A run that raises is one kernel (a contraction of another
      kind starts a new run), so no kernel waits behind another's raise.

    Both keep the order they had: a moved wait precedes every access of
    every block, and whatever follows the kernel on the stream follows
    every block; a moved raise follows every access of every block (of
    every tile of its contraction, in a kernel of GEMM segments).
    Blocks that spin must not keep the work that releases them from
    running, so a kernel of more than `max-tiles` tiles keeps its stream
    waits and raises (a remark says so): the bound is below the SM count of
    the targets (108 on sm_80, 132 on sm_90), so that each SM keeps room
    for another stream's work. A decode step's kernels (one block per row,
    1 to 96 tokens) are inside it; a prefill's kernels are long against a
    launch and a stream wait.

    It runs on the cuda target after `braid-check-schedule`, which proves
    the stream form it rewrites; `--kernel-signals=false` keeps that form.

    ```mlir
    xfer.signal_wait %flags[%c0] slack = 0 step = 0 : memref<2xi32>
    scf.forall (%i) in (4) { ... } {braid.kernel}
    xfer.signal %flags[%c1] on @tp axes = [0] offset = -1 step = 0
        : memref<2xi32>
    // becomes
    %count = xfer.symmetric_alloc on @tp axes = [0] site = 2
        : memref<1xi32>
    %e = xfer.flag_epoch %flags[%c0] slack = 0 step = 0 : memref<2xi32>
    %peer = xfer.peer_view %flags on @tp axes = [0] offset = -1
        : memref<2xi32>
    scf.forall (%i) in (4) {
      xfer.kernel_wait %flags[%c0] until %e step = 0 : memref<2xi32>
      ...
      xfer.kernel_signal %peer[%c1] arrivals %count[%c0_1] step = 0
          : memref<2xi32>, memref<1xi32>
    } {braid.kernel}
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
  let options = [
    Option<"maxTiles", "max-tiles", "int64_t", /*default=*/"96",
           "The most tiles (blocks) a kernel may have for the flag waits "
           "and raises next to it to move into it, and the most blocks "
           "of a persistent GEMM whose tiles poll flags">,
    Option<"gemmWaits", "gemm-waits", "bool", /*default=*/"false",
           "Contractions that wait for flags (f16 and bf16) as one kernel "
           "whose tiles poll them (braid.gemm_segments, for the generated "
           "GEMM of braid-map-to-gpu)">,
    Option<"gemmTf32", "gemm-tf32", "bool", /*default=*/"false",
           "With gemm-waits, f32 contractions too (the generated GEMM runs "
           "them as tf32)">
  ];
  let statistics = [
    Statistic<"numWaits", "kernel-waits", "Flag waits moved into kernels">,
    Statistic<"numSignals", "kernel-signals", "Raises moved into kernels">,
    Statistic<"numWrapped", "row-kernels",
              "Elementwise ops made kernels of their rows for flags to move "
              "into">,
    Statistic<"numGemmSegments", "gemm-segments",
              "Contractions whose flag waits moved into a GEMM's tiles">
  ];
}

def OutlineKernels : Pass<"braid-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Moves each computation on buffers into a function of its own";
  let description = [{
    Every linalg op on buffers, and every loop nest marked `braid.kernel`
    (a chain `braid-fuse-memory-bound` fused), becomes a call to a private
    function holding it (`<function>_kernel_<n>`), taking the buffers and
    values it uses.
    The function that remains is the program's schedule: kernel calls,
    transfers and waits in one straight block, as a GPU program's host code
    is. Lowering loops then happens in many small functions instead of one
    huge one, which keeps the upstream passes that are super-linear in the
    size of a function (SCF to CF) linear in the size of the program; LLVM
    may inline the kernels back.

    Kernels are deduplicated: computations that are the same (the same ops,
    attributes and constants on the same operand types, locations aside)
    share one function, wherever in the module they are. A program of
    identical layers carries the kernels of one layer, called once per
    layer, and LLVM optimizes and generates each once. bf16 and f16
    scalars (a fill's value) are passed as their i16 bits and bitcast back
    inside: as arguments, the x86 calling convention rounds them through
    f32 with a compiler-rt call that Braid's libraries do not link.

    ```mlir
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x8xf32>)
                  outs(%c : memref<8x8xf32>)
    // becomes
    call @main_kernel_3(%a, %b, %c) : (memref<8x16xf32>, ...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "Number of kernel functions made">,
    Statistic<"numSharedCalls", "shared-calls",
              "Number of computations that call a kernel made before">
  ];
}

#endif // BRAID_DIALECT_XFER_TRANSFORMS_PASSES_TD
