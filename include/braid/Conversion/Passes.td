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
    becomes an elementwise cast before the collective). An op that has no
    `dist` counterpart (`shard.gather`, `shard.send`, ...) is an error that
    names it. `shard.grid` and the process-index ops stay: `dist` reuses
    them.

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
    Option<"partition", "partition", "std::string", /*default=*/"\"auto\"",
           "Run upstream sharding propagation and partitioning first: "
           "'auto' (when the module has shard.shard annotations), 'always' "
           "or 'never'">
  ];
  let statistics = [
    Statistic<"numConverted", "converted-collectives",
              "Number of shard collectives converted to dist">,
    Statistic<"numPartitionedFunctions", "partitioned-functions",
              "Number of functions partitioned from the global view">
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
    - `"replicate"`: the same on every rank.
    - `"sequence"`: split along the second-to-last dimension (the sequence);
      one such argument or result makes the activation layout
      sequence-split (sequence parallelism: all-gather before colwise
      layers, reduce-scatter after rowwise ones).

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
