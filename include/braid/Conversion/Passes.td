//===- Passes.td - Braid conversion passes -----------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The conversions between Braid's levels: a framework's IR and upstream
// `shard` into `dist` (with the steps that make it importable), and `xfer`
// into runtime calls. The passes that generate a target's kernels are
// braid/Codegen/Passes.td.
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
      the partitioning stages on each function (upstream
      `sharding-propagation`, `braid-prepare-partition`, upstream
      `shard-partition`, `braid-offset-global-indices`), on a copy and
      under crash recovery, so that a failure or a crash in upstream code
      becomes an error diagnostic and leaves the input untouched, and records the
      sharding of each annotated function argument and result as a
      `dist.placement`. A tensor that a region captures and reads at
      computed indices is gathered whole before partitioning (upstream
      would read the rank's block at global indices), unless every read
      is a `tensor.extract` in a linalg.generic's body whose index along
      the tensor's one split dimension is the `linalg.index` of a loop
      split on the same axes: that read stays on the rank's block, at the
      loop's local index. Propagation runs backward first (upstream's
      default), or forward first for a function marked
      `braid.propagate_forward_first` (a training step on a data axis;
      `braid-apply-parallel-plan` marks it), whose mark it drops;
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
    Two sums reduced over one group and then added (an elementwise `addf`
    of two all-reduce results, through reshapes, or of two reduce-scatter
    results) are added first and reduced once, as Megatron reduces a
    backward's input gradients. Anything else (a send to a fixed device, a receive nothing pairs, a
    collective over a dynamic grid axis) is an error that names it.
    The conversion is one pattern per `shard` op on a conversion target:
    `shard.grid`, the process-index and grid-shape queries and sharding
    values a program hands on stay legal (`dist` reuses them); any other
    `shard` op left is an error at the op, "failed to legalize" where no
    pattern knows it (such as `shard.neighbors_linear_indices`). The
    conversion stops at the first op it cannot convert.

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

def PreparePartition : Pass<"braid-prepare-partition"> {
  let summary = "Readies propagated shardings for upstream partitioning";
  let description = [{
    Runs on each function between upstream `sharding-propagation` and
    `shard-partition`; `braid-import-shard` runs the four stages
    (`sharding-propagation`, this pass, `shard-partition`,
    `braid-offset-global-indices`) on a copy of each function under crash
    recovery. Works on any op holding functions, or on one function.

    - An op propagation left without annotations gets what its users ask
      for (replicated when they disagree or ask nothing), and an unread
      bare result of an annotated op the sharding of a result of the same
      rank (or replicated): upstream partitioning crashes on both.
    - A tensor that a region captures and reads at computed indices
      (`tensor.extract` in a `linalg.generic` body) is annotated to be
      read replicated, so partitioning gathers it when propagation split
      it; except along each dimension that every read indexes with the
      `linalg.index` of one loop split by propagation (and as long as that
      loop): that dimension is read split like the loop, each rank its own
      block at the loop's local index (marked `braid.local_index`). A
      tensor split so already is read as it is; one split along another
      dimension is resharded by one all-to-all (the combine of experts'
      outputs to the ranks whose tokens they are).
    - A `linalg.generic` whose body reads `linalg.index` records, for
      `braid-offset-global-indices`, the grid axes that split each loop
      (`braid.index_axes`), the loops' global extents
      (`braid.index_extents`) and their grid (`braid.index_grid`).
  }];
  let dependentDialects = ["::mlir::shard::ShardDialect"];
}

def OffsetGlobalIndices : Pass<"braid-offset-global-indices"> {
  let summary = "Makes linalg.index count from the rank's block after "
                "partitioning";
  let description = [{
    Runs on each function after upstream `shard-partition`, which clones a
    `linalg.generic` onto its local blocks so that `linalg.index` counts
    from 0 on every rank. For each op `braid-prepare-partition` marked, it
    adds to every index of a split loop the rank's block offset: its
    position in the group over the loop's grid axes (row-major in their
    order) times the block's local extent. Indices marked
    `braid.local_index` stay local. A loop whose global extent its local
    one does not divide is an error at the op. The marks are removed.

    ```mlir
    // before (braid.index_axes = [[0], []], braid.index_extents = [8, 4])
    %i = linalg.index 0 : index
    // after, on a 2-rank grid (local extent 4)
    %p = shard.process_multi_index on @g axes = [0] : index
    %o = arith.muli %p, %c4 : index
    %i = linalg.index 0 : index
    %g = arith.addi %i, %o : index
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::shard::ShardDialect"
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
      the sum over experts that follows them (through elementwise work,
      reshapes, and gathers within each expert: a generic whose body reads
      the outputs at its own loop index along the experts) is annotated
      split too, so that it becomes a partial sum and an all-reduce.
      Under sequence parallelism over one sequence, where such a batch
      matmul reads rows built per rank's tokens ([groups, experts, ...]
      transposed to [experts, groups, ...] and collapsed: Braid's export
      of HuggingFace experts with a capacity per rank's tokens), the
      transpose's input is annotated split along the groups and read
      split along the experts, and the function propagates forward first
      (`braid.propagate_forward_first`): the dispatch is one all-to-all,
      and the routing stays on each rank's tokens.
    - `"replicate"`: the same on every rank.
    - `"sequence"`: split along the sequence: the second-to-last dimension
      (`[batch, seq, hidden]`), the last of integer or boolean tensors of
      rank 1 or 2 (token ids, masks and positions, `[batch, seq]`);
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

    A result with `braid.sharded_like = N` is laid out as argument `N` is
    annotated (a parameter's gradient like the parameter). A function marked
    `braid.backward` holds a training step's backward too (the PyTorch
    front door's `train_step`): a weight's first contraction in program
    order is the forward's, which the plan describes, and its later
    contractions that read it along another dimension compute gradients,
    which take the weight's annotation as propagation gives it instead of
    being refused.

    The grid is the function's `braid.grid` attribute or the module's only
    `shard.grid`; the plan splits along `braid.grid_axis` (default 0).
    Functions without a plan are left alone.

    Data parallelism: `braid.data_axis = N` names another axis of the grid
    that splits the batch. Arguments and results marked `braid.batch`
    (activations: `replicate` or `sequence`) arrive and leave split along
    their leading dimension on it, and every activation the plan annotates
    (a contraction's activation operand and result, a residual) is split
    the same way, outermost: where the plan splits dimension 0 too (tokens
    or heads flattened with the batch), the split is `[[data, plan]]`, the
    batch's blocks the major ones. Weights stay replicated over the data
    axis. A function that also holds its backward (`braid.backward`) is
    marked `braid.propagate_forward_first`, which makes
    `braid-import-shard` propagate forward first: the inputs' batch split
    then reaches the reductions over the batch (the weight gradients, the
    loss), whose partial sums are all-reduced over the data axis, instead
    of the replicated gradients flooding back and gathering the batch.
    `experts` on a grid with a data axis is refused (the experts' tokens
    are not batch-major).

    Expert parallelism beside the plan: `braid.expert_axis = N` names an
    axis that splits the experts of the weights marked `braid.experts`
    (`colwise`, `packed_colwise` or `rowwise` `[experts, ...]` weights,
    whose features the plan splits along its axis). The batch matmuls
    they reach get their other operand and result split along the experts
    on that axis too, and the sum over the experts that combines a
    rowwise one's results is annotated split along it, so that it leaves
    partial sums (one all-reduce once `braid-sink-all-reduce` has moved
    the plan axis's sum after it). `experts` style arguments, a backward,
    and an expert axis equal to the plan's or the data axis are refused.

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

    A dialect conversion: one pattern per op, `!xfer.request` converted to
    `i64`, and a target on which the whole `xfer` dialect and the three
    grid queries are illegal, so an op no pattern can lower (a wait on a
    request that is a block argument rather than a transfer's result) is a
    "failed to legalize" error at that op, never left behind. Grids may have
    at most four axes, all of static size, and buffers must have static
    shapes: both are checked for the whole module before anything is
    rewritten. `shard.grid` ops that nothing refers to any more are erased,
    and so are the `dist.placement` attributes of function arguments and
    results.

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

#endif // BRAID_CONVERSION_PASSES_TD
