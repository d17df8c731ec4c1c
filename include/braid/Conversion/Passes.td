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

#endif // BRAID_CONVERSION_PASSES_TD
