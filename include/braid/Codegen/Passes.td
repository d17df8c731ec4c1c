//===- Passes.td - Braid code-generation passes ------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The passes that turn a scheduled program into kernels for one target:
// placeholders split before bufferization (both targets), the cpu target's
// tiled, vectorized loops and oneDNN contractions, and the cuda target's
// device code and cuBLASLt contractions. They rewrite within the dialects
// they find; the conversions between Braid's levels are
// braid/Conversion/Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CODEGEN_PASSES_TD
#define BRAID_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Both targets (lib/Codegen/Common)
//===----------------------------------------------------------------------===//

def ReadOnlyArguments
    : Pass<"braid-read-only-arguments", "mlir::func::FuncOp"> {
  let summary = "Keeps a program from writing its caller's buffers";
  let description = [{
    Marks every tensor argument of a public function
    `bufferization.writable = false`, right before bufferization on both
    targets. One-Shot Bufferize may otherwise compute an op in place in an
    argument's buffer (an `insert_slice` into it, a linalg op whose `outs`
    is it): the caller's buffer would change under it, a weight held across
    calls of a program run in process (`braid_program.h`) among them. With
    the mark it copies the argument first where it needs a writable buffer;
    a program exported from PyTorch (functional) writes its arguments
    nowhere, so nothing changes for it. Private functions (outlined layers)
    keep their arguments writable: their callers are the program's own.
  }];
}

def UnsharePlaceholders
    : Pass<"braid-unshare-placeholders", "mlir::func::FuncOp"> {
  let summary = "Gives each group of uses of a tensor.empty its own";
  let description = [{
    CSE merges identical `tensor.empty` placeholders across a whole
    program: in a model of identical layers one empty ends up the
    destination of the same op in every layer. One-Shot Bufferize then puts
    all their results in one alias set, and its conflict analysis grows
    with the square of the layers (16 s of 21 for 80 layers, against 0.18 s
    for 8). Run right before bufferization, this pass gives each group of
    uses its own empty: the uses inside one op of the empty's block (a
    kernel's slices of it and its shared output) are a group, and so are an
    `extract_slice` of it and the `insert_slice` back into it of what was
    computed in place in that slice (a ring's chunk); every other use is a
    group of its own. Empties cost nothing and bufferize to one allocation
    each, as they would anyway. Fills stay shared: cloned where nothing
    folds them they would be kernels of their own (the cuda target folds a
    GEMM's zero fill into beta = 0), and `braid-fuse-memory-bound` gives
    each fused use its own.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def FoldTransposes : Pass<"braid-fold-transposes", "mlir::func::FuncOp"> {
  let summary = "Lets contractions read transposed operands in place";
  let description = [{
    Runs on tensors before the memory-bound fusion, where contractions go
    to a GEMM library (oneDNN on the cpu target with `--gemm=library`,
    cuBLASLt on the cuda target), which reads an operand transposed at no
    cost. A contraction input that a `linalg.transpose` of its last two
    dimensions produced (the transposes a library takes: A or B, batch
    first) is read from the transpose's input instead, through the
    indexing map composed with the permutation: the contraction becomes a
    `linalg.generic` with that map, which the GEMM matching takes as
    `trans_a` / `trans_b`. This is how frontends spell `nn.Linear` (`x @
    W^T`, a `linalg.transpose` of the weight and a `linalg.matmul`):
    without it every call transposed every weight into a new buffer,
    column by column (a fifth of a Llama
    layer's time on CPUs). A transpose whose other users remain is kept
    for them. A slice of a transpose (a chunk of a transposed weight) with
    unit strides whose users are all contractions becomes the transpose
    of the slice first, so that the chunk folds too; likewise a
    `tensor.collapse_shape` of a transpose that merges only leading
    dimensions (a packed expert weight's part, `[experts, 1, out, in]`
    transposed and collapsed into a batch matmul's `[experts, in, out]`,
    which HF MoE exports spell: such copies at 0.6 GB/s were a third of
    an expert-parallel Mixtral-like block's time, dense, and two thirds
    with a capacity per expert).
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numFolded", "folded", "Transposed operands read in place">
  ];
}

def NarrowContractions : Pass<"braid-narrow-contractions", "mlir::func::FuncOp"> {
  let summary = "Contractions of widened bf16 or f16 values read them narrow";
  let description = [{
    Runs on tensors before the memory-bound fusion, where contractions go
    to a GEMM library (oneDNN on the cpu target with `--gemm=library`,
    cuBLASLt on the cuda target). A contraction in f32 whose two operands
    are each a bf16 (or each an f16) value widened to f32 by an elementwise
    `arith.extf`, then moved (`tensor.collapse_shape` / `expand_shape`,
    `linalg.transpose`, a broadcast: a generic yielding its input) and
    multiplied by float constants, every op on the way used once, becomes
    the same contraction of the narrow values moved the same way (a
    `linalg.generic` widening each operand where it reads it, which the GEMM
    libraries run as bf16 or f16 products accumulated in f32), followed by
    one multiplication of the result by the product of the constants.

    Widening is exact and each product of two bf16 or f16 values is exact
    in f32, so only the constants move: (a c1)(b c2) summed becomes (a b
    summed)(c1 c2), equal up to f32 rounding. This is PyTorch's math
    attention in bf16 (q and k widened and each scaled by the root of the
    scale before Q K^T): the scores' GEMM runs on bf16 (AMX on CPUs that
    have it) instead of f32, and the moves (GQA's repeat of k, its
    transpose) move half the bytes. A contraction that reads one widened
    operand and one that is not, operands widened from different types, or
    an op on the way with other uses is left in f32 with a remark saying
    why.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numNarrowed", "narrowed", "Contractions that read narrow operands">
  ];
}

def PlanMemory : Pass<"braid-plan-memory", "mlir::ModuleOp"> {
  let summary = "Gives a function's intermediates offsets in one arena, "
                "from their lifetimes";
  let description = [{
    A static memory plan, as XLA's buffer assignment and TVM's memory
    planning make one. Runs after bufferization and the kernels' scratch,
    before deallocation; the pipeline runs it on both targets
    (`memory-plan`, on by default). In each single-block function, every
    static `memref.alloc` of the body whose buffer never leaves the
    function (no view of it reaches a terminator or an op returning a
    memref that is not a view of it) gets a byte offset in an arena: a
    private, uninitialized `memref.global` per function, whose
    `memref.get_global` is marked `braid.arena`; the buffer becomes a
    `memref.view` of it, numbered by a `braid.buffer` attribute (which
    keeps CSE from merging two views of the same bytes). A buffer lives from the first to the last op of
    the body that uses it, a view of it, or what such an op returned (a
    transfer's request, up to its wait: the transfer reads or writes the
    buffer until then). Buffers are placed largest first, each at the
    lowest 64-byte-aligned offset that overlaps no placed buffer whose
    lifetime meets its own.

    The arena is allocated once per loaded artifact and process (rank),
    and its pages are faulted in by the first call only; calls of one
    artifact in one process must not run concurrently. On the cuda target
    `braid-map-to-gpu` moves the arena to device memory the runtime
    allocates once per rank (`braid_rt_device_arena`). Left to the heap:
    dynamic shapes, non-identity layouts, memory spaces, buffers that
    escape, and every buffer of a function of several blocks. Symmetric
    buffers are not allocations and keep their own lifetimes.
    `braid-check-schedule` sees two planned buffers as aliases where their
    bytes overlap, so a plan that let a transfer race a reuse would fail
    the check. The plan is recorded in the module attribute
    `braid.memory_plan`, which the compiler moves into the report's
    "memory".
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numPlanned", "planned", "Buffers given an offset in an arena">,
    Statistic<"numHeap", "heap", "Static allocations left to the heap">
  ];
}

//===----------------------------------------------------------------------===//
// CPU (lib/Codegen/CPU)
//===----------------------------------------------------------------------===//

def ContractionsToGemm
    : Pass<"braid-contractions-to-gemm", "mlir::ModuleOp"> {
  let summary = "Sends the contractions of a bufferized CPU program to oneDNN";
  let description = [{
    Runs on the cpu target after `convert-xfer-to-runtime`, before kernels
    are outlined. Every contraction on buffers that qualifies for the cuda
    target's cuBLASLt (one M, N and K dimension and at most one batch
    dimension, unit inner strides, f32, f16 or bf16 operands accumulating
    into f32 or their type; transposed operands, strided ring chunks and
    batches included) becomes a `braid_rt_gemm` call, which the cpu runtime
    runs on oneDNN's matmul: AMX, AVX-512 or AVX2 code chosen at run time.
    As on cuda, a zero fill right before the product becomes beta = 0, and
    a bias, GELU (tanh form) or ReLU epilogue right after it, or a cast to
    the output type, is folded into the call (oneDNN's bias and post-ops).

    Every contraction gets a remark: "runs on oneDNN: MxNxK ..." or "runs as
    a generated kernel, not on oneDNN: <why>". With `--gemm=generated` the
    pipeline leaves this pass out and every contraction stays a generated
    loop nest.

    ```mlir
    // before
    linalg.fill ins(%zero : f32) outs(%c : memref<256x512xf32>)
    linalg.matmul ins(%a, %b : memref<256x128xbf16, strided<[512, 1], offset: ?>>, memref<128x512xbf16>)
                  outs(%c : memref<256x512xf32>)
    // after (operands' addresses, leading dimensions and batch strides
    // read from their strided metadata)
    call @braid_rt_gemm(%m, %n, %k, %batch, %a_ptr, %lda, ...) : (i64, ...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numGemms", "gemms", "Number of contractions sent to oneDNN">,
    Statistic<"numGenerated", "generated",
              "Number of contractions left as generated loops">
  ];
}

def FuseElementwiseProducers
    : Pass<"braid-fuse-elementwise-producers", "mlir::func::FuncOp"> {
  let summary = "Fuses single-use elementwise producers into their consumer "
                "on the cpu target";
  let description = [{
    Runs on the cpu target's tensors, before `braid-fuse-memory-bound`.
    An elementwise `linalg.generic` (all loops parallel) whose result has
    one use, by another `linalg.generic` that is not a contraction, is
    folded into that consumer's payload by upstream's elementwise fusion
    (`populateElementwiseOpsFusionPatterns`): the cast to f32 before a row
    max, the square before a sum of squares, a bias add before an
    activation. The fused kernel then computes the producer in registers,
    inside the consumer's vector loop, instead of writing and reading back
    an intermediate the size of its tile (bf16 softmax, RMSNorm and
    layernorm at 4096 x 4096 went 10 to 15 % faster). Producers with several
    uses (the exponentials a softmax sums and divides) stay, since fusing
    them would compute them twice. The cuda target keeps one op per step of
    its block-per-row kernels.

    A comparison of a widened float (`arith.extf`) with a constant the
    narrower type holds exactly becomes the comparison of the narrower
    value with that constant, which gives the same result for every value
    and predicate: torch's safe softmax tests f32 scores against an f64
    -inf, which gave its kernel's vector loop f64 lanes, half as many.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def CpuKernelScratch : Pass<"braid-cpu-kernel-scratch", "mlir::func::FuncOp"> {
  let summary = "Puts a fused kernel's intermediates on the stack on the cpu "
                "target";
  let description = [{
    Runs on the cpu target between One-Shot Bufferize and buffer
    deallocation. Inside each `scf.forall` marked `braid.kernel` (a fused
    memory-bound chain, `braid-fuse-memory-bound`), every static
    `memref.alloc` holds an intermediate of one tile that never leaves the
    tile: it becomes a `memref.alloca`, which deallocation leaves alone,
    up to `stack-bytes` per kernel (larger ones stay heap buffers). On CPUs
    the tiles run one after another, and `braid-hoist-allocas` later moves
    the allocas out of the outlined kernel's loop, so one set of buffers
    serves every tile. Without this, each tile allocated and freed its
    intermediates, and once they exceeded malloc's trim threshold every
    tile faulted their pages in again (a bf16 layernorm at 4096 x 4096
    spent more time in page faults than in its loops); hoisting heap
    allocations to the schedule instead cost deallocation 280 MB and
    seconds on an 80-layer model.
  }];
  let options = [
    Option<"stackBytes", "stack-bytes", "int64_t", /*default=*/"1048576",
           "Bytes of intermediates per kernel on the stack">
  ];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numScratch", "scratch", "Intermediates put on the stack">
  ];
}

def TileKernels : Pass<"braid-tile-kernels", "mlir::ModuleOp"> {
  let summary = "Runs an outlined fused kernel's tiles on the rank's threads";
  let description = [{
    Runs on the cpu target after `braid-outline-kernels`. A kernel function
    whose body is one 1-D `scf.forall` marked `braid.kernel` (a fused
    memory-bound chain: independent row tiles) gets a companion
    `<kernel>_tiles(%begin, %end, args...)` running tiles [begin, end) in an
    `scf.for`, marked `braid.tiles`; the kernel itself computes its tile
    count and calls it for all of them. The compiler then turns that call
    into `braid_rt_parallel_for`, which splits the tiles over the rank's
    threads (`--threads`, `BRAID_NUM_THREADS`), each thread with its own
    scratch (the allocas `braid-hoist-allocas` moves to the companion's
    entry). With one thread the call runs on the calling thread.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numTiled", "tiled", "Kernels whose tiles run on threads">
  ];
}

def KernelEvents : Pass<"braid-kernel-events", "mlir::ModuleOp"> {
  let summary = "Brackets each kernel call or launch with trace events";
  let description = [{
    Runs after `braid-outline-kernels` on the cpu target and after
    `braid-map-to-gpu` on cuda. Each op that carries a `braid.trace`
    description (`{name, bytes, flops}`: a call of an outlined kernel,
    named by `braid-outline-kernels` after its symbol and what it computes;
    a `gpu.launch`, named by `braid-map-to-gpu` after what it computes, to
    which the cuda runtime prefixes the kernel's symbol; or a
    `braid_rt_gemm` call, named by its shape, types and epilogue) and each
    `memref.copy` of a schedule function (`braid.schedule`; named
    `copy <shape>`, with "(strided)" where either side has a layout) gets
    `braid_rt_kernel_begin(name, bytes, flops)` before it and
    `braid_rt_kernel_end()` after it. The name is a private constant
    global: the description followed by the call's source location (the
    first file, line and column in its location, else its first name), so
    that one kernel shared by several layers is told apart per layer.
    While a trace records, the cpu runtime turns the pair into a kernel
    event on the rank's compute track, and `--profile` sums them per name;
    otherwise each call is one check of a flag. The cuda runtime names the
    launch or GEMM the pair brackets by it, with its bytes and flops, on
    the device-timed event it records.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numEvents", "events", "Kernel calls bracketed with events">
  ];
}

def HoistAllocas : Pass<"braid-hoist-allocas", "mlir::func::FuncOp"> {
  let summary = "Moves static allocas out of loops to the function's entry";
  let description = [{
    Runs on the cpu target after kernels are outlined. A static
    `memref.alloca` directly inside a loop (a fused kernel's scratch, see
    `braid-cpu-kernel-scratch`) would take new stack space on every
    iteration, since LLVM frees allocas only at return; at the function's
    entry it is one slot of the frame, reused by every iteration. Only
    correct where iterations run one after another and no value of one
    iteration's buffer is read by the next, as for kernel scratch.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numHoisted", "hoisted", "Allocas moved to the entry block">
  ];
}

def VectorizeKernels : Pass<"braid-vectorize-kernels", "mlir::func::FuncOp"> {
  let summary = "Vectorizes the cpu target's elementwise and row-reduction "
                "loops";
  let description = [{
    Runs on the cpu target after kernels are outlined, before the remaining
    `linalg` ops become loops. Every `linalg` op on buffers whose outer
    loops are parallel and whose innermost loop is parallel (elementwise,
    broadcast, casts) or a reduction (sum, max, ...: one combiner, as
    `matchReduction` finds it) becomes loops over the outer dimensions
    around a `vector` loop along the innermost one: `vector.load` of every
    operand that the innermost dimension indexes contiguously (the
    operand's last dimension, unit stride), a broadcast of every operand it
    does not (loaded once per outer iteration), the op's payload applied to
    vectors, and `vector.store`; a reduction keeps a vector of partial
    results (started at the combiner's neutral element) and folds it with
    `vector.reduction` after the loop. A scalar loop takes the columns
    that do not fill a vector. Vectors hold `vector-bytes` bytes of the
    widest element type of the payload (64: one AVX-512 register, four SSE
    ones), which LLVM splits to the target's registers.

    Reductions, and payloads holding a `math` function (`exp`, `tanh`:
    long polynomials once approximated), first run `interleave` vectors per
    iteration (one vector type of that many times the lanes, which LLVM
    splits into independent registers): a reduction keeps that many
    vectors of partial results, so that its additions do not wait on one
    another, and each exponential's chain of multiply-adds overlaps the
    others'. A loop of single vectors takes what is left, then the scalar
    loop.

    Reductions are reassociated: the partial results are summed in a
    different order than the sequential loop's, as on the cuda target
    (see docs/rationale/cpu-codegen.md). An f32 division by a value the
    same for every innermost index (a softmax's row sum) is a product with
    that value's reciprocal, computed once per row, as torch's CPU softmax
    computes it: `(x * s) * (1 / (d * s))`, with `s` a power of two that
    keeps the reciprocal finite and normal, within 1.5 ulp of the quotient
    for every divisor (0, infinities and NaNs give the division's result). `linalg.index` of the innermost
    loop becomes a vector of consecutive indices, of an outer loop its
    induction variable (a causal mask compares positions). Booleans (a
    byte each in memory, a bit per lane in a vector) read along the
    innermost loop are loaded as bytes and truncated; one read or written
    once per row is a scalar, broadcast or reduced. Payload values that are
    the same for every innermost index (from constants, outer indices and
    operands the innermost loop does not index) are computed as scalars,
    once per vector: a gather (`memref.load` of a captured buffer, as
    torch-mlir lowers `gather` and indexing) whose indices are such values
    except the last, the innermost index along a unit-stride dimension, is
    one `vector.load` of that row, and an assertion on such values
    (torch-mlir's bounds checks) stays a scalar `cf.assert`. Ops whose innermost
    dimension indexes an operand with a stride (transposes, contractions'
    B operands), whose payload holds a non-elementwise op (calls,
    regions), that write booleans along the innermost loop, or whose
    innermost extent is known to be smaller than a vector stay for
    `convert-linalg-to-loops`.

    ```mlir
    // before
    linalg.generic {indexing_maps = [(d0, d1) -> (d0, d1), (d0, d1) -> (d0)],
                    iterator_types = ["parallel", "reduction"]}
        ins(%x : memref<4x4096xf32>) outs(%sum : memref<4xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %acc, %in : f32
      linalg.yield %s : f32
    }
    // after (per row %i)
    %init = memref.load %sum[%i] : memref<4xf32>
    %partial = scf.for %j = %c0 to %c4096 step %c16
        iter_args(%p = %zeros) -> (vector<16xf32>) {
      %v = vector.load %x[%i, %j] : memref<4x4096xf32>, vector<16xf32>
      %q = arith.addf %p, %v : vector<16xf32>
      scf.yield %q : vector<16xf32>
    }
    %r = vector.reduction <add>, %partial, %init fastmath<reassoc> : vector<16xf32> into f32
    ```
  }];
  let options = [
    Option<"vectorBytes", "vector-bytes", "int64_t", /*default=*/"64",
           "Bytes per vector of the payload's widest type (0: vectorize "
           "nothing)">,
    Option<"interleave", "interleave", "int64_t", /*default=*/"4",
           "Vectors per iteration of reductions and of payloads with a math "
           "function (1: one)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let statistics = [
    Statistic<"numVectorized", "vectorized", "linalg ops vectorized">,
    Statistic<"numReductions", "reductions",
              "Of which reductions along the innermost dimension">,
    Statistic<"numScalar", "scalar", "linalg ops left as scalar loops">
  ];
}

def PolynomialMath : Pass<"braid-polynomial-math", "mlir::func::FuncOp"> {
  let summary = "Replaces f32 transcendental math ops by upstream polynomial "
                "approximations";
  let description = [{
    On the cpu target, `math.exp`, `tanh`, `log`, `erf` and the other f32
    ops that upstream's `populateMathPolynomialApproximationPatterns`
    covers become arithmetic (on scalars and vectors alike), instead of
    libm calls that a vector would make once per lane. Runs after f16 and
    bf16 math is extended to f32. The approximations are accurate to a few
    ulp (upstream's claims; tested against numpy within each test's
    tolerance); the vectorized loop and its scalar remainder compute the
    same function.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def NarrowFloatBits : Pass<"braid-narrow-float-bits", "mlir::ModuleOp"> {
  let summary = "Moves bf16 and f16 values through selects, loads, "
                "stores and lane operations as their i16 bits";
  let description = [{
    Runs on the cpu target's LLVM dialect. f16 and bf16 arithmetic is
    emulated in f32, and its rounding back ends in a select between the
    rounded bits and a NaN, then a store. The x86 backend has no bf16 type
    before AVX512-BF16 and AVX512-FP16 and scalarizes selects, loads and
    stores of bf16 vectors lane by lane (a bf16 RMSNorm at 4096 x 4096 on
    AVX-512 took 1.5 times as long). This pass makes `llvm.select` on bf16
    or f16 values (scalars or vectors) a select on their i16 bits, a store
    of a value bitcast from integers a store of the integers, and a load
    whose only use bitcasts it to integers a load of the integers, so that
    the lanes are blended, loaded and stored as 16-bit integers. Vectors
    built or taken apart lane by lane (`llvm.insertelement`,
    `llvm.shufflevector`: a broadcast; `llvm.extractelement`) move i16
    lanes too: the backend widened a bf16 shuffle to f32 and rounded it
    back through `__truncsfbf2`, a call the artifact cannot resolve.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RoundWideToBF16 : Pass<"braid-round-wide-to-bf16"> {
  let summary = "Rounds f64 to bf16 through f32 without double rounding";
  let description = [{
    `arith-expand{include-bf16}` turns f32 to bf16 truncations into
    integer code (Debian 12's libgcc has no bf16 helpers), but not a
    truncation from f64, which the x86 backend then calls
    `__truncdfbf2` for, and the library does not load (HF's Phi MLP
    multiplies bf16 values by f64 constants truncated in the body). Such
    a truncation of a constant folds to the correctly rounded bf16
    constant; any other becomes a truncation to f32 rounding to odd (the
    nearest f32, moved one ulp to the odd neighbour bracketing the value
    when it is even and inexact), then to bf16 to nearest: with 16 more
    bits in the f32, rounding to odd first gives the bf16 that rounding
    the f64 once would. NaN stays NaN, and values past the f32 range
    become f32's largest with the infinity bf16 rounding then gives.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

//===----------------------------------------------------------------------===//
// GPU (lib/Codegen/GPU)
//===----------------------------------------------------------------------===//

def GpuKernelScratch : Pass<"braid-gpu-kernel-scratch", "mlir::func::FuncOp"> {
  let summary = "Makes the buffers inside fused kernels block-local scratch";
  let description = [{
    Runs on the cuda target between One-Shot Bufferize and buffer
    deallocation. Inside each `scf.forall` marked `braid.kernel` (a fused
    memory-bound chain, `braid-fuse-memory-bound`), every static
    `memref.alloc` holds an intermediate of one tile that never leaves the
    tile: it becomes a `memref.alloca`, which deallocation leaves alone and
    `braid-map-to-gpu` places in the block's shared memory. A dynamically
    sized buffer inside a kernel is an error, since shared memory is sized
    at launch.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def MapToGPU : Pass<"braid-map-to-gpu", "mlir::ModuleOp"> {
  let summary = "Maps the compute of a bufferized program onto a CUDA GPU";
  let description = [{
    Runs on the cuda target after `convert-xfer-to-runtime`, so that
    transfers are already runtime calls. On every function:

    - A contraction with one M, one N and one K dimension (and at most one
      batch dimension) whose operands have unit inner strides, in f32, f16
      or bf16 (accumulating into f32 or the input type), becomes a call to
      `braid_rt_gemm`, which runs it with cuBLASLt on the rank's compute
      stream; leading dimensions and batch strides are read from the
      buffers' strided metadata, so ring chunks (subviews) qualify. A zero
      fill right before it becomes beta = 0; then an elementwise op right
      after it that alone reads the product and computes act(product +
      bias) (bias, GELU in tanh form, ReLU, or a cast) becomes cuBLASLt's
      epilogue, writing that op's output.
    - Each fused kernel (`scf.forall` marked `braid.kernel`) becomes one
      `gpu.launch`: one block per iteration (a row tile), its threads
      striding over the tile's columns so that accesses coalesce, a barrier
      between the tile's ops, its scratch (`memref.alloca`) carved out of
      dynamic shared memory. A row reduction whose combiner is an add, a
      multiply, a max or a min over f32 is computed by all threads of the
      block (each reduces a strided slice, then `gpu.all_reduce`, warp
      shuffles); other reductions by one thread per output element.
    - Every other linalg op and `memref.copy` on the host becomes a
      `gpu.launch` of its own, grid-stride: each thread takes every n-th
      output element (or 16-byte vector, where the op is vectorized),
      reductions sequential in each thread. The grid has one thread per
      element or vector, at most 4 waves of full occupancy (`sm-count`).
    - Elementwise ops and row-reduction partials whose buffers are
      contiguous along the innermost loop move 16 bytes per access
      (`vector.load`/`vector.store` with alignment) when a run-time check
      finds every streamed buffer aligned, one element at a time otherwise.
    - Buffers that compute or transfers touch are allocated on the device
      (`gpu.alloc`, stream-ordered on the rank's compute stream); the small
      host buffers that buffer deallocation keeps its bookkeeping in stay on
      the host. The memory plan's arena (braid-plan-memory) becomes device
      memory the runtime allocates once per rank and arena
      (`braid_rt_device_arena`, keyed by the host arena's address), which
      the planned buffers that device work or transfers use view; planned
      buffers only host bookkeeping touches keep the host arena's bytes.
      Host code that reads or writes a device buffer is an error.
      Buffers are placed once every function's compute is mapped: a buffer
      handed to a function of the module (a layer function of
      braid-outline-layers) takes the side that function's argument needs,
      and a buffer a call returns is freed on the side its callee
      allocated it on.

    With `gemm-kernels`, a contraction cuBLASLt would take whose operands
    are f16 or bf16 becomes a generated tensor-core kernel instead: blocks
    of 4 warps, each block a 64x64 tile of the result, the operands' 64x32
    and 32x64 tiles staged in shared memory (zeros past the edges), each
    warp a 32x32 quarter with `ldmatrix` fragments and `mma.sync` m16n8k16
    accumulating in f32 (`nvgpu.ldmatrix`, and the `mma.sync` as inline
    PTX, since upstream's `nvgpu.mma.sync` lowering takes no bf16). Where
    A is stored [m][k] and K and B's contiguous extent are multiples of 8,
    the tiles come in by `cp.async` (`nvgpu.device_async_copy`) in two
    stages, the next tile's copies in flight during the current tile's
    products, when a run-time check finds the operands 16-byte aligned;
    otherwise an element at a time, one stage. With `allow-tf32`, f32
    contractions too: their operands rounded to tf32 (`cvt.rna`, 10 bits
    of mantissa) as each lane loads its fragments, `mma.sync` m16n8k8. A zero
    fill right before it is folded (the accumulators start from zero), and
    the elementwise op right after it that alone reads its result (any
    payload over operands read through projections of the row and column)
    is applied as the results are stored.

    A fused kernel marked `braid.gemm_segments` (braid-kernel-signals:
    contractions that wait for their peers' flags, the chunks of a pushed
    all-gather) becomes one persistent generated GEMM: at most that many
    blocks take the segments' tiles in turn, segment after segment in the
    kernel's order (the chunk already here first), thread 0 of each block
    polling the tile's segment's flags with `ld.acquire.sys` before a
    barrier, so a tile starts as soon as its own chunk has landed. Where
    the generator declines the contractions (or `gemm-kernels` is off),
    each segment's polls are a one-block kernel and its contraction follows
    on the stream, with a remark saying why.

    Every contraction gets a remark saying whether it runs on cuBLASLt (and
    with which beta and epilogue), as a generated tensor-core kernel, or as
    a generated scalar kernel, and why.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::nvgpu::NVGPUDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect"
  ];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"sharedMemoryLimit", "shared-memory-limit", "int64_t",
           /*default=*/"232448",
           "Bytes of shared memory a block may use (sm_90: 227 KiB, sm_80: "
           "163 KiB)">,
    Option<"smCount", "sm-count", "int64_t", /*default=*/"132",
           "Streaming multiprocessors of the target GPU (H100/H200 SXM: "
           "132); grid-stride launches get at most 4 waves of blocks">,
    Option<"gemmKernels", "gemm-kernels", "bool", /*default=*/"false",
           "Contractions of f16 and bf16 operands as generated tensor-core "
           "kernels (mma.sync, sm_80 and later) instead of cuBLASLt">,
    Option<"allowTf32", "allow-tf32", "bool", /*default=*/"false",
           "With gemm-kernels, f32 contractions too, their operands rounded "
           "to tf32 (mma.sync m16n8k8)">
  ];
  let statistics = [
    Statistic<"numGemms", "gemms", "Contractions run by cuBLASLt">,
    Statistic<"numGemmKernels", "gemm-kernels",
              "Contractions run as generated tensor-core kernels">,
    Statistic<"numSegmentedGemms", "gemm-segments",
              "Persistent generated GEMMs whose tiles poll flags">,
    Statistic<"numKernels", "kernels", "Kernels launched">
  ];
}

def MergeGpuModules : Pass<"braid-merge-gpu-modules", "mlir::ModuleOp"> {
  let summary = "Puts all outlined kernels into one gpu.module";
  let description = [{
    `gpu-kernel-outlining` makes one `gpu.module` per kernel. This pass
    moves every kernel into one module named `braid_kernels` (the first
    module, renamed) and retargets the `gpu.launch_func` ops, so that a
    program carries one cubin that the runtime loads once, and
    `--emit=ptx` writes one PTX file that ptxas accepts. Runs before the
    modules are lowered, while they hold only `gpu.func`s with unique names.

    Identical kernels are merged: a module that holds only a kernel whose
    text (locations and its name aside) equals one already merged adds
    nothing, and its launches launch that one. A program of identical
    layers carries one layer's kernels, and ptxas sees each once.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
  let statistics = [
    Statistic<"numSharedKernels", "shared-kernels",
              "Number of kernels merged into an identical one">
  ];
}

def ExternalizeDynamicSharedMemory
    : Pass<"braid-externalize-dynamic-shared-memory", "mlir::gpu::GPUModuleOp"> {
  let summary = "Declares a kernel module's dynamic shared memory `.extern`";
  let description = [{
    Runs on a `gpu.module` after `convert-gpu-to-nvvm`. That conversion
    lowers `gpu.dynamic_shared_memory` to a zero-sized `llvm.mlir.global`
    in address space 3 with internal linkage, which the NVPTX backend
    demotes to a one-byte static variable (`.shared .align 16 .b8
    __dynamic_shmem__0;`). ptxas then lays it out at offset 0 of the static
    shared memory, ahead of `gpu.all_reduce`'s buffers, so the launch's
    dynamic bytes overlap them. This pass gives every such global (address
    space 3, zero elements, no initializer) external linkage, which the
    backend prints as `.extern .shared .align 16 .b8 __dynamic_shmem__0[];`:
    the dynamic region then starts after all static shared memory, as CUDA
    defines it.

    ```mlir
    // before
    llvm.mlir.global internal @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    // after
    llvm.mlir.global external @__dynamic_shmem__0() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // BRAID_CODEGEN_PASSES_TD
