//===- DistOps.td - Dist operations ------------------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_DIST_IR_DISTOPS_TD
#define BRAID_DIALECT_DIST_IR_DISTOPS_TD

include "braid/Dialect/Dist/IR/DistBase.td"
include "braid/Dialect/Dist/IR/DistAttrs.td"
include "braid/Dialect/Dist/IR/DistInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

/// The resource that asynchronous collectives read and write: in-flight
/// transfers are ordered with respect to each other, never reordered or
/// merged.
def Dist_CommResource : Resource<"::braid::dist::CommResource">;

//===----------------------------------------------------------------------===//
// Collectives. Each kind comes as a synchronous op and as `<kind>_start`,
// which returns a token and the future result; `dist.wait` consumes both.
//===----------------------------------------------------------------------===//

defvar Dist_CommonArgs = (ins
  FlatSymbolRefAttr:$grid,
  DenseI16ArrayAttr:$axes
);

class Dist_CollectiveOpBase<string mnemonic, string kind, list<Trait> traits>
    : Dist_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        Dist_CollectiveOpInterface])> {
  string collectiveKind = kind;
  let hasVerifier = 1;
  code commonDecl = [{
    ::llvm::StringRef getCollectiveKind() { return "}] # kind # [{"; }
  }];
}

/// A synchronous collective: `$input` in, `$result` out.
class Dist_SyncCollective<string mnemonic, string kind, dag args,
                          string fmt, list<Trait> traits = []>
    : Dist_CollectiveOpBase<mnemonic, kind, !listconcat([Pure], traits)> {
  let arguments = !con(Dist_CommonArgs, (ins AnyRankedTensor:$input), args);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `on` $grid `axes` `=` $axes " # fmt #
      " attr-dict `:` type($input) `->` type($result)";
  let extraClassDeclaration = commonDecl # [{
    ::mlir::TypedValue<::mlir::RankedTensorType> getCollectiveResult() {
      return ::llvm::cast<::mlir::TypedValue<::mlir::RankedTensorType>>(getResult());
    }
  }];
  let hasCanonicalizer = 1;
}

/// The asynchronous form: returns a token and the future result.
class Dist_StartCollective<string mnemonic, string kind, dag args,
                           string fmt, list<Trait> traits = []>
    : Dist_CollectiveOpBase<mnemonic # "_start", kind, !listconcat([
        MemoryEffects<[MemRead<Dist_CommResource>,
                       MemWrite<Dist_CommResource>]>], traits)> {
  let arguments = !con(Dist_CommonArgs, (ins AnyRankedTensor:$input), args);
  let results = (outs Dist_TokenType:$token, AnyRankedTensor:$future);
  let assemblyFormat = "$input `on` $grid `axes` `=` $axes " # fmt #
      " attr-dict `:` type($input) `->` type($future)";
  let extraClassDeclaration = commonDecl # [{
    ::mlir::TypedValue<::mlir::RankedTensorType> getCollectiveResult() {
      return getFuture();
    }
    ::mlir::Value getAsyncToken() { return getToken(); }
  }];
  let hasCanonicalizer = 1;
}

defvar Dist_AllGatherArgs = (ins I64Attr:$dim);
defvar Dist_AllGatherFmt = "`dim` `=` $dim";

def Dist_AllGatherOp : Dist_SyncCollective<"all_gather", "all_gather",
    Dist_AllGatherArgs, Dist_AllGatherFmt> {
  let summary = "gathers the local tensors of a group along a dimension";
  let description = [{
    Concatenates the local `input` of every rank of the group along tensor
    dimension `dim`, in group order; every rank of the group receives the
    whole result. The result's `dim` is the input's times the group size;
    the other dimensions and the element type are the input's.

    ```mlir
    shard.grid @tp(shape = 4)
    %g = dist.all_gather %x on @tp axes = [0] dim = 0
        : tensor<128x1024xbf16> -> tensor<512x1024xbf16>
    ```
  }];
}

def Dist_AllGatherStartOp : Dist_StartCollective<"all_gather", "all_gather",
    Dist_AllGatherArgs, Dist_AllGatherFmt> {
  let summary = "starts an all-gather";
  let description = [{
    The asynchronous form of `dist.all_gather`: returns a token and the
    future result, which becomes usable through `dist.wait`.

    ```mlir
    %t, %f = dist.all_gather_start %x on @tp axes = [0] dim = 0
        : tensor<128x1024xbf16> -> tensor<512x1024xbf16>
    %g = dist.wait %t, %f : tensor<512x1024xbf16>
    ```
  }];
}

defvar Dist_ReduceScatterArgs = (ins I64Attr:$dim,
    Dist_ReductionKindAttr:$reduction);
defvar Dist_ReduceScatterFmt = "`dim` `=` $dim `reduce` `=` custom<Reduction>($reduction)";

def Dist_ReduceScatterOp : Dist_SyncCollective<"reduce_scatter",
    "reduce_scatter", Dist_ReduceScatterArgs, Dist_ReduceScatterFmt> {
  let summary = "reduces a tensor over a group and scatters the result";
  let description = [{
    Reduces the `input` of every rank of the group elementwise with
    `reduction`, splits the reduced tensor evenly along `dim` into as many
    blocks as the group has ranks, and gives block `i` to the rank at group
    position `i`. `dim` must be divisible by the group size.

    ```mlir
    %s = dist.reduce_scatter %p on @tp axes = [0] dim = 0 reduce = sum
        : tensor<512x1024xf32> -> tensor<128x1024xf32>
    ```
  }];
}

def Dist_ReduceScatterStartOp : Dist_StartCollective<"reduce_scatter",
    "reduce_scatter", Dist_ReduceScatterArgs, Dist_ReduceScatterFmt> {
  let summary = "starts a reduce-scatter";
  let description = [{
    The asynchronous form of `dist.reduce_scatter`.

    ```mlir
    %t, %f = dist.reduce_scatter_start %p on @tp axes = [0] dim = 0
        reduce = sum : tensor<512x1024xf32> -> tensor<128x1024xf32>
    %s = dist.wait %t, %f : tensor<128x1024xf32>
    ```
  }];
}

defvar Dist_AllReduceArgs = (ins Dist_ReductionKindAttr:$reduction);
defvar Dist_AllReduceFmt = "`reduce` `=` custom<Reduction>($reduction)";

def Dist_AllReduceOp : Dist_SyncCollective<"all_reduce", "all_reduce",
    Dist_AllReduceArgs, Dist_AllReduceFmt, [AllTypesMatch<["input", "result"]>]> {
  let summary = "reduces a tensor over a group, every rank gets the result";
  let description = [{
    Reduces the `input` of every rank of the group elementwise with
    `reduction`; every rank of the group receives the reduced tensor. The
    result has the input's type; bitwise reductions need integer elements.

    ```mlir
    %r = dist.all_reduce %p on @tp axes = [0] reduce = sum
        : tensor<512x1024xf32> -> tensor<512x1024xf32>
    ```
  }];
}

def Dist_AllReduceStartOp : Dist_StartCollective<"all_reduce", "all_reduce",
    Dist_AllReduceArgs, Dist_AllReduceFmt, [AllTypesMatch<["input", "future"]>]> {
  let summary = "starts an all-reduce";
  let description = [{
    The asynchronous form of `dist.all_reduce`.

    ```mlir
    %t, %f = dist.all_reduce_start %p on @tp axes = [0] reduce = sum
        : tensor<512x1024xf32> -> tensor<512x1024xf32>
    %r = dist.wait %t, %f : tensor<512x1024xf32>
    ```
  }];
}

defvar Dist_AllToAllArgs = (ins I64Attr:$split_dim, I64Attr:$concat_dim);
defvar Dist_AllToAllFmt = "`split_dim` `=` $split_dim `concat_dim` `=` $concat_dim";

def Dist_AllToAllOp : Dist_SyncCollective<"all_to_all", "all_to_all",
    Dist_AllToAllArgs, Dist_AllToAllFmt> {
  let summary = "exchanges blocks between all ranks of a group";
  let description = [{
    Each rank splits its `input` evenly along `split_dim` into as many blocks
    as the group has ranks and sends block `i` to group position `i`; it
    concatenates the blocks it receives, in group order, along `concat_dim`.
    This is the dispatch and combine of expert parallelism.

    ```mlir
    %e = dist.all_to_all %tok on @ep axes = [0] split_dim = 0 concat_dim = 0
        : tensor<1024x4096xbf16> -> tensor<1024x4096xbf16>
    ```
  }];
}

def Dist_AllToAllStartOp : Dist_StartCollective<"all_to_all", "all_to_all",
    Dist_AllToAllArgs, Dist_AllToAllFmt> {
  let summary = "starts an all-to-all";
  let description = [{
    The asynchronous form of `dist.all_to_all`.

    ```mlir
    %t, %f = dist.all_to_all_start %x on @ep axes = [0] split_dim = 0
        concat_dim = 0 : tensor<1024x4096xbf16> -> tensor<1024x4096xbf16>
    %e = dist.wait %t, %f : tensor<1024x4096xbf16>
    ```
  }];
}

defvar Dist_ShiftArgs = (ins I64Attr:$offset);
defvar Dist_ShiftFmt = "`offset` `=` $offset";

def Dist_ShiftOp : Dist_SyncCollective<"shift", "shift",
    Dist_ShiftArgs, Dist_ShiftFmt, [AllTypesMatch<["input", "result"]>]> {
  let summary = "rotates tensors along one grid axis (ring send/recv)";
  let description = [{
    Along the single grid axis in `axes`, the rank at group position `i`
    sends its `input` to position `(i + offset) mod n` and receives from
    position `(i - offset) mod n`. This is one step of a ring; `offset`
    may be negative.

    ```mlir
    %n = dist.shift %c on @tp axes = [0] offset = 1
        : tensor<128x1024xbf16> -> tensor<128x1024xbf16>
    ```
  }];
}

def Dist_ShiftStartOp : Dist_StartCollective<"shift", "shift",
    Dist_ShiftArgs, Dist_ShiftFmt, [AllTypesMatch<["input", "future"]>]> {
  let summary = "starts a ring shift";
  let description = [{
    The asynchronous form of `dist.shift`.

    ```mlir
    %t, %f = dist.shift_start %c on @tp axes = [0] offset = 1
        : tensor<128x1024xbf16> -> tensor<128x1024xbf16>
    %n = dist.wait %t, %f : tensor<128x1024xbf16>
    ```
  }];
}

defvar Dist_BroadcastArgs = (ins DenseI64ArrayAttr:$root);
defvar Dist_BroadcastFmt = "`root` `=` $root";

def Dist_BroadcastOp : Dist_SyncCollective<"broadcast", "broadcast",
    Dist_BroadcastArgs, Dist_BroadcastFmt, [AllTypesMatch<["input", "result"]>]> {
  let summary = "copies the root's tensor to every rank of the group";
  let description = [{
    Every rank of the group receives the `input` of the rank whose in-group
    coordinates (one per axis in `axes`) are `root`.

    ```mlir
    %b = dist.broadcast %x on @tp axes = [0] root = [0]
        : tensor<1024xf32> -> tensor<1024xf32>
    ```
  }];
}

def Dist_BroadcastStartOp : Dist_StartCollective<"broadcast", "broadcast",
    Dist_BroadcastArgs, Dist_BroadcastFmt, [AllTypesMatch<["input", "future"]>]> {
  let summary = "starts a broadcast";
  let description = [{
    The asynchronous form of `dist.broadcast`.

    ```mlir
    %t, %f = dist.broadcast_start %x on @tp axes = [0] root = [0]
        : tensor<1024xf32> -> tensor<1024xf32>
    %b = dist.wait %t, %f : tensor<1024xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// dist.wait
//===----------------------------------------------------------------------===//

def Dist_WaitOp : Dist_Op<"wait", [
    AllTypesMatch<["future", "result"]>,
    MemoryEffects<[MemRead<Dist_CommResource>, MemWrite<Dist_CommResource>]>]> {
  let summary = "waits for an asynchronous collective";
  let description = [{
    Blocks until the collective that produced `token` has completed on this
    rank and returns its result. `token` and `future` must be the two
    results of one `*_start` op in the same block, and each token is waited
    exactly once. Until the wait, neither the future nor the start's input
    may be relied upon: the input may still be in flight.

    ```mlir
    %t, %f = dist.all_gather_start %x on @tp axes = [0] dim = 0
        : tensor<128x64xf32> -> tensor<512x64xf32>
    %g = dist.wait %t, %f : tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Dist_TokenType:$token, AnyRankedTensor:$future);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$token `,` $future attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The start op this wait completes.
    ::braid::dist::CollectiveOpInterface getStart();
  }];
}

//===----------------------------------------------------------------------===//
// dist.annotate
//===----------------------------------------------------------------------===//

def Dist_AnnotateOp : Dist_Op<"annotate", [
    Pure, AllTypesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "states the placement of a value";
  let description = [{
    Returns `input` unchanged and records that it has `placement` over the
    grid. Transforms rely on the stated fact (for instance, an operand
    annotated `replicate` along an all-reduce's axes is proven replicated);
    stating a false placement makes the program's result undefined.

    ```mlir
    %b = dist.annotate %bias as <@tp, [replicate]> : tensor<1024xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Dist_PlacementAttr:$placement);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input `as` $placement attr-dict `:` type($result)";
  let hasVerifier = 1;
}

#endif // BRAID_DIALECT_DIST_IR_DISTOPS_TD
