//===- Passes.td - Braid conversion passes -----------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_CONVERSION_PASSES_TD
#define BRAID_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// ShardToDist
//===----------------------------------------------------------------------===//

def ImportShard : Pass<"braid-import-shard", "mlir::ModuleOp"> {
  let summary = "Converts upstream `shard` IR to the `dist` dialect";
  let description = [{
    Accepts both forms that frameworks hand over:

    - *global view*, with `shard.shard` annotations: the pass first runs
      upstream `sharding-propagation` and `shard-partition` on each function
      (on a copy, so that a failure or a crash in upstream code becomes an
      error diagnostic and leaves the input untouched), and records the
      sharding of each annotated function argument and result as a
      `dist.placement`;
    - *SPMD form*, with explicit `shard.all_gather`, `shard.reduce_scatter`,
      `shard.all_reduce`, `shard.all_to_all`, `shard.shift`,
      `shard.broadcast` and `shard.all_slice`.

    Every `shard` collective becomes its `dist` counterpart (`all_slice`
    becomes a local `tensor.extract_slice`; an `average` reduction becomes a
    sum and a division; an accumulation type different from the input's
    becomes an elementwise cast before the collective); rooted collectives,
    `update_halo` and `shard_shape` become compositions (docs/rationale/import.md);
    a `shard.send` to this rank's position plus k along one grid axis with
    the first `shard.recv` after it from the position minus k becomes a
    `dist.shift` by k (the send's result is its input), and
    `shard.get_sharding` of an annotated value that annotation's sharding.
    Anything else (a send to a fixed device, a receive nothing pairs, a
    collective over a dynamic grid axis) is an error that names it.
    `shard.grid` and the process-index ops stay: `dist` reuses them.

    ```mlir
    // before
    %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0
        : tensor<128x64xf32> -> tensor<512x64xf32>
    // after
    %g = dist.all_gather %x on @tp axes = [0] dim = 0
        : tensor<128x64xf32> -> tensor<512x64xf32>
    ```
  }];
  let dependentDialects = [
    "::braid::dist::DistDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::shard::ShardDialect",
    "::mlir::tensor::TensorDialect"
  ];
  let options = [
    Option<"partition", "partition", "::braid::PartitionMode",
           /*default=*/"::braid::PartitionMode::Auto",
           "Run upstream sharding propagation and partitioning first",
           "::braid::options::EnumValues<::braid::PartitionMode>()">
  ];
  let statistics = [
    Statistic<"numConverted", "converted-collectives",
              "Number of shard collectives converted to dist">,
    Statistic<"numPartitionedFunctions", "partitioned-functions",
              "Number of functions partitioned from the global view">
  ];
}

def PrepareImport : Pass<"braid-prepare-import", "mlir::ModuleOp"> {
  let summary = "Rewrites what frontends emit into forms upstream sharding "
                "takes";
  let description = [{
    Runs before `braid-apply-parallel-plan` and `braid-import-shard` on the
    linalg that torch-mlir and other frontends emit for real models:

    - a `linalg.generic` that reads or writes a unit dimension at a constant
      index (keepdim reductions such as RMSNorm's `mean(-1, keepdim=True)`,
      `(d0, d1, d2) -> (d0, d1, 0)`, and their broadcast reads) becomes one
      on tensors without that dimension, between a `collapse_shape` and an
      `expand_shape`: upstream's linalg sharding model takes only projected
      permutations;
    - `collapse_shape` (leading dimensions into one) -> `linalg.batch_matmul`
      -> `expand_shape` becomes one contraction with the batch dimensions
      apart (attention's batch x heads, which splits by heads), marked
      `braid.batch_matmul`; `braid-import-shard` makes it a batch matmul
      again on the local shapes;
    - `math.fpowi` with a constant exponent becomes multiplications;
    - `linalg.softmax`, which no lowering takes, becomes its max, exp, sum
      and divide generics (what the ring attention schedule matches);
    - a value that one op reads through two different indexing maps (a
      causal mask comparing an iota with itself transposed), when it is
      generated from nothing (an input-free generic, a constant): the
      second read gets a copy of the generator, since upstream
      partitioning gives both reads one sharding.

    ```mlir
    %s = linalg.generic {indexing_maps = [(d0, d1, d2) -> (d0, d1, d2),
                                          (d0, d1, d2) -> (d0, d1, 0)], ...}
        ins(%x : tensor<2x8x64xf32>) outs(%z : tensor<2x8x1xf32>)
    // becomes
    %c = tensor.collapse_shape %z [[0], [1, 2]] : ... into tensor<2x8xf32>
    %r = linalg.generic {indexing_maps = [(d0, d1, d2) -> (d0, d1, d2),
                                          (d0, d1, d2) -> (d0, d1)], ...}
        ins(%x : tensor<2x8x64xf32>) outs(%c : tensor<2x8xf32>)
    %s = tensor.expand_shape %r [[0], [1, 2]] ... into tensor<2x8x1xf32>
    ```
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::tensor::TensorDialect"
  ];
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

def OutlineLayers : Pass<"braid-outline-layers", "mlir::ModuleOp"> {
  let summary = "Outlines a program's repeated layers into one function, "
                "called once per layer";
  let description = [{
    A model of L identical layers is, after import, one function whose body
    repeats the same stretch of ops L times. Every later pass would then
    handle, and the code generator compile, L copies of each layer. This
    pass finds the longest such stretch of each function's body and turns it
    into one private function, called once per layer, so that the rest of
    the pipeline sees one layer.

    The stretch is found from a structural hash of each op (its name,
    attributes, result and operand types and nested regions; not which
    values it reads): the period is a spacing at which hashes repeat, and
    the stretch the longest run in which each op hashes like the op one
    period later. Where the run could be cut into segments at several
    places, the cut that leaves fewest values live across it (a layer
    boundary carries the residual stream) is taken. The segments are then
    checked op by op for equivalence, and for wiring: every value a segment
    reads is either defined by the same op of its own segment, or defined
    outside the segment in every segment, the same outside value wherever
    the first segment reads one value. Values from outside become the
    function's arguments, except those of operand-free pure ops (constants,
    static `tensor.empty`), which are cloned into it so that later matchers
    still see them; values a segment defines and anything after the segment
    reads become its results. Only segments holding a collective are
    outlined. Results are unchanged: the same ops run in the same order.

    ```mlir
    // before: two layers
    %h1 = ... layer ops reading %x, %w0 ...
    %h2 = ... the same ops reading %h1, %w1 ...
    // after
    %h1 = func.call @main_layer(%x, %w0) : (...) -> tensor<...>
    %h2 = func.call @main_layer(%h1, %w1) : (...) -> tensor<...>
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numFunctions", "layer-functions",
              "Number of layer functions outlined">,
    Statistic<"numCalls", "layer-calls",
              "Number of layers replaced by a call">
  ];
}

def ApplyParallelPlan : Pass<"braid-apply-parallel-plan", "mlir::ModuleOp"> {
  let summary = "Turns a per-weight tensor-parallel plan into shard annotations";
  let description = [{
    Frameworks describe tensor parallelism per weight, as PyTorch's
    `parallelize_module` plans do. This pass reads such a plan from the
    `braid.parallel` attribute of function arguments and results of a
    global-view function and writes the `shard.shard` annotations that
    upstream sharding propagation and partitioning (run by
    `braid-import-shard`) need, with the layouts of PyTorch's DTensor:

    - `"colwise"`: a weight split along the output features of the
      contraction it feeds (found through `linalg.transpose`, so both the
      `[out, in]` and the `[in, out]` layout work); a rank-1 argument that
      feeds no contraction (a bias) is split along its dimension. The
      contraction's other operand is replicated; its result is split along
      the same features.
    - `"rowwise"`: a weight split along the contraction's reduction
      dimension; the other operand arrives split the same way and the result
      takes the activation layout, so partial sums are all-reduced (or
      reduce-scattered under sequence parallelism).
    - `"colwise_gather"`: colwise, and the contraction's output
      all-gathered for what follows (HuggingFace's colwise_gather_output).
    - `"packed_colwise"`: a weight whose output features (dimension
      rank - 2) hold parts stacked one after the other ([gate; up]), each
      part split separately (HuggingFace's layout). The weight must be taken
      apart into its parts (an `expand_shape` to [parts, features]) before
      any other use; that expand is marked `braid.packed`, which makes its
      sharding model split each part's features.
    - `"experts"`: whole experts on each rank, the weight split along its
      leading dimension (HuggingFace's grouped_gemm). The batch matmuls it
      reaches over the expert dimension compute each rank's experts, and
      the sum over experts that follows them is annotated split too, so
      that it becomes a partial sum and an all-reduce.
    - `"replicate"`: the same on every rank.
    - `"sequence"`: split along the second-to-last dimension (the sequence);
      one such argument or result makes the activation layout
      sequence-split (sequence parallelism: all-gather before colwise
      layers, reduce-scatter after rowwise ones). When every such argument
      holds one sequence (its dimensions before the sequence are 1), a
      rowwise result is also split along its tokens for its users, and so
      is the residual add it reaches through reshapes and elementwise ops:
      the residual stream between layers stays split.

    Weights are annotated for their users (the contractions the plan
    names); `replicate` and `sequence` arguments are annotated as the
    layout they arrive in, which leaves their users free to take them
    otherwise (a rotary table read beside split heads). Diagnostics name an
    argument by its location when it is a name (the PyTorch front door
    names each after its parameter, `layers.0.mlp.up_proj.weight`).

    The grid is the function's `braid.grid` attribute or the module's only
    `shard.grid`; the plan splits along `braid.grid_axis` (default 0).
    Functions without a plan are left alone.

    ```mlir
    func.func @mlp(%x: tensor<16x64xf32> {braid.parallel = "replicate"},
                   %w_up: tensor<256x64xf32> {braid.parallel = "colwise"},
                   %w_down: tensor<64x256xf32> {braid.parallel = "rowwise"})
        -> (tensor<16x64xf32> {braid.parallel = "replicate"})
    ```
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
  let statistics = [
    Statistic<"numPlannedFunctions", "planned-functions",
              "Number of functions whose plan was applied">
  ];
}

//===----------------------------------------------------------------------===//
// XferToRuntime
//===----------------------------------------------------------------------===//

def ConvertXferToRuntime : Pass<"convert-xfer-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lowers xfer transfers and grid queries to Braid runtime calls";
  let description = [{
    Replaces every `xfer` transfer by a call to the runtime ABI of
    `include/braid/Runtime/braid_rt.h` (`braid_rt_send`, `braid_rt_recv`,
    `braid_rt_all_gather`, ...), every `xfer.wait` by `braid_rt_wait` calls,
    and the grid queries `shard.process_multi_index`,
    `shard.process_linear_index` and `shard.grid_shape` by `braid_rt_coord`
    calls and constants. Buffers are passed as integer addresses (aligned
    pointer plus offset), sizes in bytes or elements, requests as `i64`
    handles. Group handles are created once per function, at its entry.

    ```mlir
    %r = xfer.send %b on @tp axes = [0] offset = 1 step = 2 : memref<4x8xf32>
    xfer.wait %r : !xfer.request
    // becomes
    %g = call @braid_rt_group(%c1, %c4, %c1, %c1, %c1, %c1, %c0) : (...) -> i64
    ...
    %h = call @braid_rt_send(%g, %c1, %addr, %c128, %c2) : (...) -> i64
    call @braid_rt_wait(%h) : (i64) -> ()
    ```

    Symmetric memory lowers the same way: `xfer.symmetric_alloc` to
    `braid_rt_symmetric_site` (the site's persistent buffer), `xfer.peer_view`
    to `braid_rt_symmetric_peer`, `xfer.put` to `braid_rt_put`, `xfer.signal`
    to `braid_rt_signal_add` and `xfer.signal_wait` to
    `braid_rt_signal_wait_next`. The memrefs of the addresses these return are
    built as LLVM memref descriptors, cast to the memref type, which the
    conversion to LLVM folds away.

    Grids may have at most four axes, all of static size. `shard.grid` ops
    that nothing refers to any more are erased, and so are the
    `dist.placement` attributes of function arguments and results.

    The function named by `entry` gets `llvm.emit_c_interface`, so that
    `braid-emit-entry-point` can give runners one way to call it; naming a
    function that does not exist is an error. An empty `entry` skips this.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"\"",
           "Function that runners call (gets llvm.emit_c_interface)">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::memref::MemRefDialect"
  ];
}

def EmitEntryPoint : Pass<"braid-emit-entry-point", "mlir::ModuleOp"> {
  let summary = "Adds the `braid_entry` function runners call";
  let description = [{
    Runs on the LLVM dialect, after `convert-func-to-llvm` has produced the
    C interface `_mlir_ciface_<entry>` of the entry function (which must
    carry `llvm.emit_c_interface`). Adds

    ```mlir
    llvm.func @braid_entry(%argv: !llvm.ptr)
    ```

    where `argv[0]` points to the buffer receiving the result descriptors
    (null when there are none) and `argv[1 + i]` points to the memref
    descriptor of argument `i`, so that `braid-exec` can call any entry
    function through one signature.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"main\"",
           "Name of the entry function">
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

//===----------------------------------------------------------------------===//
// ToGPU
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
      the host. Host code that reads or writes a device buffer is an error.
      Buffers are placed once every function's compute is mapped: a buffer
      handed to a function of the module (a layer function of
      braid-outline-layers) takes the side that function's argument needs,
      and a buffer a call returns is freed on the side its callee
      allocated it on.

    Every contraction gets a remark saying whether it runs on cuBLASLt (and
    with which beta and epilogue) or as a generated kernel, and why.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::memref::MemRefDialect",
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
           "132); grid-stride launches get at most 4 waves of blocks">
  ];
  let statistics = [
    Statistic<"numGemms", "gemms", "Contractions run by cuBLASLt">,
    Statistic<"numKernels", "kernels", "Kernels launched">
  ];
}

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
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
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

    Reductions are reassociated: the partial results are summed in a
    different order than the sequential loop's, as on the cuda target
    (see docs/rationale/cpu-codegen.md). Ops whose innermost dimension indexes an
    operand with a stride (transposes, contractions' B operands), whose
    payload holds a non-elementwise op (`linalg.index`, calls, regions)
    or whose innermost extent is known to be smaller than a vector stay
    for `convert-linalg-to-loops`.

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
           "nothing)">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
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

def NarrowFloatBits : Pass<"braid-narrow-float-bits", "mlir::ModuleOp"> {
  let summary = "Moves bf16 and f16 values through selects, loads and "
                "stores as their i16 bits";
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
    the lanes are blended, loaded and stored as 16-bit integers.
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

#endif // BRAID_CONVERSION_PASSES_TD
