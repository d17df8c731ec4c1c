//===- DistAttrs.td - Dist attributes and types ------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTATTRS_TD
#define BRAID_DIALECT_DIST_IR_DISTATTRS_TD

include "braid/Dialect/Dist/IR/DistBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Dist_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dist_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Dist_LinkAttr : Dist_Attr<"Link", "link"> {
  let summary = "interconnect figures for one grid axis";
  let description = [{
    The link between neighbouring ranks along one grid axis: its class, its
    bandwidth per direction in GB/s (10^9 bytes per second) and its one-way
    latency in microseconds. The cost model reads these figures; a grid
    without `dist.topology` gets the figures of the selected target preset.

    ```mlir
    #dist.link<nvlink, bandwidth = 450.0, latency = 1.5>
    ```
  }];
  let parameters = (ins
    EnumParameter<Dist_LinkClass>:$linkClass,
    APFloatParameter<"bandwidth per direction in GB/s">:$bandwidth,
    APFloatParameter<"one-way latency in microseconds">:$latency
  );
  let builders = [
    AttrBuilder<(ins "LinkClass":$linkClass, "double":$bandwidth,
                     "double":$latency), [{
      return $_get($_ctxt, linkClass, ::llvm::APFloat(bandwidth),
                   ::llvm::APFloat(latency));
    }]>
  ];
  let extraClassDeclaration = [{
    /// Bandwidth per direction, bytes per microsecond (= MB/s).
    double getBandwidthGBps() const { return getBandwidth().convertToDouble(); }
    double getLatencyUs() const { return getLatency().convertToDouble(); }
  }];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Dist_PlacementAttr : Dist_Attr<"Placement", "placement"> {
  let summary = "layout of a value over the axes of a device grid";
  let description = [{
    One entry per axis of the grid, saying what the local value held by a
    rank is with respect to the ranks that differ from it along that axis:

    - `replicate`: every such rank holds the same value;
    - `shard<d>`: the local value is this rank's block of a larger tensor,
      split evenly along tensor dimension `d` over this axis (several axes
      may shard the same dimension; the lower-numbered axis is the major
      one);
    - `partial<kind>`: the logical value is the reduction (`sum`, `max`,
      ...) of the local values of all such ranks.

    Placements appear on function arguments and results
    (`{dist.placement = #dist.placement<...>}`) and on values through
    `dist.annotate`. They are facts that transforms may rely on: an operand
    whose placement is `replicate` along the axes of an all-reduce may be
    moved across it.

    ```mlir
    #dist.placement<@grid2d, [shard<0>, replicate]>
    #dist.placement<@grid1d, [partial<sum>]>
    ```
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$grid,
    ArrayRefParameter<"::braid::dist::AxisPlacement", "per-axis placement">:$axes
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// True if the value is the same on all ranks along grid axis `axis`.
    bool isReplicatedAlong(int64_t axis) const;
  }];
}

def Dist_TokenType : TypeDef<Dist_Dialect, "Token"> {
  let mnemonic = "token";
  let summary = "completion token of an asynchronous collective";
  let description = [{
    Returned by every `*_start` op and consumed by exactly one `dist.wait`
    in the same block.
  }];
}

#endif // BRAID_DIALECT_DIST_IR_DISTATTRS_TD
