//===- DistBase.td - Dist dialect definition ---------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTBASE_TD
#define BRAID_DIALECT_DIST_IR_DISTBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::braid::dist";
  let summary = "Distributed tensors and collectives in SPMD form";
  let description = [{
    The `dist` dialect models the per-rank (SPMD) program of a partitioned
    tensor computation: collectives on tensors over groups of a device grid,
    in synchronous form and in asynchronous form (a start op returning a token
    and the future value, and a wait), and placements stating how a value is
    laid out over the grid, so that later passes can prove facts such as
    "this operand is replicated along grid axis 0".

    The device grid itself is upstream's `shard.grid`; `dist` attaches a
    topology to it with the discardable attribute `dist.topology`, an array
    with one `#dist.link` per grid axis:

    ```mlir
    shard.grid @tp(shape = 2x4) {dist.topology = [
        #dist.link<network, bandwidth = 50.0, latency = 5.0>,
        #dist.link<nvlink, bandwidth = 450.0, latency = 1.0>]}
    ```

    Ranks are numbered row-major over the grid, as upstream `shard` defines;
    the group of a collective over `axes` is the set of ranks that differ
    only in their coordinates along those axes, ordered row-major over the
    listed axes in the order they are listed.
  }];
  let dependentDialects = [
    "::mlir::shard::ShardDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect"
  ];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
    void registerTypes();

    /// Name of the discardable attribute holding a grid's topology.
    static constexpr ::llvm::StringLiteral getTopologyAttrName() {
      return ::llvm::StringLiteral("dist.topology");
    }
    /// Name of the discardable attribute numbering a collective's transfers
    /// for diagnostics and traces: the ring step for schedule steps, the
    /// collective's position in its function otherwise.
    static constexpr ::llvm::StringLiteral getStepAttrName() {
      return ::llvm::StringLiteral("dist.step");
    }
    /// Name of the unit attribute on a ring shift that braid-overlap chose to
    /// move through symmetric memory (put + signal); bufferization passes it
    /// on to the shift's send and receive, which braid-symmetric-transfers
    /// rewrites.
    static constexpr ::llvm::StringLiteral getSymmetricAttrName() {
      return ::llvm::StringLiteral("dist.symmetric");
    }
    /// Name of the unit attribute on a loop nest that braid-fuse-memory-bound
    /// formed as one kernel; braid-outline-kernels outlines it on CPUs and
    /// braid-map-to-gpu launches it on GPUs.
    static constexpr ::llvm::StringLiteral getKernelAttrName() {
      return ::llvm::StringLiteral("braid.kernel");
    }
    /// Name of the string attribute on an all-gather that
    /// braid-quantize-all-gather made send fewer bits ("bf16" or
    /// "fp8-e4m3"); braid-overlap reports it with its error bound.
    static constexpr ::llvm::StringLiteral getQuantizedAttrName() {
      return ::llvm::StringLiteral("dist.quantized");
    }
    /// Name of the module's f64 attribute that braid-quantize-all-gather
    /// sets: the largest relative error its quantized all-gathers may add
    /// to an element. The artifact's manifest carries it to the runners.
    static constexpr ::llvm::StringLiteral getQuantizationBoundAttrName() {
      return ::llvm::StringLiteral("dist.quantization_bound");
    }
    /// Name of the argument/result attribute holding a placement.
    static constexpr ::llvm::StringLiteral getPlacementAttrName() {
      return ::llvm::StringLiteral("dist.placement");
    }
  }];
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Dist_ReductionKind : I32EnumAttr<"ReductionKind",
    "reduction applied across the ranks of a group", [
  I32EnumAttrCase<"Sum", 0, "sum">,
  I32EnumAttrCase<"Max", 1, "max">,
  I32EnumAttrCase<"Min", 2, "min">,
  I32EnumAttrCase<"Product", 3, "product">,
  I32EnumAttrCase<"BitAnd", 4, "bitand">,
  I32EnumAttrCase<"BitOr", 5, "bitor">,
  I32EnumAttrCase<"BitXor", 6, "bitxor">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::braid::dist";
}

def Dist_ReductionKindAttr
    : EnumAttr<Dist_Dialect, Dist_ReductionKind, "reduction"> {
  let assemblyFormat = "$value";
}

def Dist_LinkClass : I32EnumAttr<"LinkClass",
    "class of the interconnect along one grid axis", [
  I32EnumAttrCase<"NVLink", 0, "nvlink">,
  I32EnumAttrCase<"PCIe", 1, "pcie">,
  I32EnumAttrCase<"Network", 2, "network">,
  I32EnumAttrCase<"SharedMemory", 3, "shm">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::braid::dist";
}

def Dist_PlacementKind : I32EnumAttr<"PlacementKind",
    "how a value is laid out along one grid axis", [
  I32EnumAttrCase<"Replicate", 0, "replicate">,
  I32EnumAttrCase<"Shard", 1, "shard">,
  I32EnumAttrCase<"Partial", 2, "partial">
]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::braid::dist";
}

#endif // BRAID_DIALECT_DIST_IR_DISTBASE_TD
