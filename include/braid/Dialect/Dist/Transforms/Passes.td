//===- Passes.td - Dist transformation passes --------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_TRANSFORMS_PASSES_TD
#define BRAID_DIALECT_DIST_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def ListCollectives
    : InterfacePass<"braid-list-collectives", "mlir::FunctionOpInterface"> {
  let summary = "Reports every collective of a function as a remark";
  let description = [{
    Emits one remark per `dist` collective, at its location: its kind, grid,
    axes and group size, the shapes it moves, the bytes each rank receives,
    and the op that consumes its result and the op that produces its input.
    The IR is not changed. `scripts/demo.sh` uses it to show what the import
    found.

    ```
    sp_mlp.mlir:17:9: remark: all_gather on @tp axes [0] (4 ranks) dim 0:
      tensor<256x512xbf16> -> tensor<1024x512xbf16>, receives 768.0 KiB;
      input from a function argument, result used by linalg.matmul
    ```
  }];
  let statistics = [
    Statistic<"numCollectives", "collectives", "Number of collectives found">
  ];
}

#endif // BRAID_DIALECT_DIST_TRANSFORMS_PASSES_TD
