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

def LinearizeCollectives
    : InterfacePass<"braid-linearize-collectives", "mlir::FunctionOpInterface"> {
  let summary = "Rewrites collectives so that they move contiguous blocks";
  let description = [{
    Runtimes (MPI, NCCL) gather, scatter and exchange contiguous blocks in
    group order. A collective along a tensor dimension that has larger
    dimensions before it does not move contiguous blocks; this pass rewrites
    it into a collective along a new leading dimension plus the tensor
    reshapes and transposes that put the data where the original op would.
    Collectives that already move contiguous blocks are left alone, so the
    common cases (gathering or scattering the sequence or batch dimension)
    cost nothing.

    ```mlir
    // before: gather the columns
    %g = dist.all_gather %x on @tp axes = [0] dim = 1
        : tensor<64x32xf32> -> tensor<64x128xf32>
    // after
    %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [1, 64, 32]
        : tensor<64x32xf32> into tensor<1x64x32xf32>
    %g0 = dist.all_gather %e on @tp axes = [0] dim = 0
        : tensor<1x64x32xf32> -> tensor<4x64x32xf32>
    %t = linalg.transpose ins(%g0 : tensor<4x64x32xf32>)
        outs(%init : tensor<64x4x32xf32>) permutation = [1, 0, 2]
    %g = tensor.collapse_shape %t [[0], [1, 2]]
        : tensor<64x4x32xf32> into tensor<64x128xf32>
    ```

    Collectives on tensors with dynamic dimensions that need rewriting are
    reported as errors: the CPU and GPU lowerings need static shapes there.
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // BRAID_DIALECT_DIST_TRANSFORMS_PASSES_TD
