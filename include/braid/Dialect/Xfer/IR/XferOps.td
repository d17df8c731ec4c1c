//===- XferOps.td - Xfer dialect ---------------------------*- tablegen -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_DIALECT_XFER_IR_XFEROPS_TD
#define BRAID_DIALECT_XFER_IR_XFEROPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "braid/Dialect/Dist/IR/DistBase.td"

def Xfer_Dialect : Dialect {
  let name = "xfer";
  let cppNamespace = "::braid::xfer";
  let summary = "Rank-local transfers on buffers";
  let description = [{
    The `xfer` dialect is the rank-local, buffer-level form of communication
    that `dist` collectives bufferize to: nonblocking point-to-point transfers
    to peers addressed by an offset along a grid axis, nonblocking collectives
    on contiguous buffers, and the waits that complete them.

    Every transfer returns a `!xfer.request`; `xfer.wait` completes requests.
    A request stands for work on the *comm stream*: it progresses while the
    *compute stream* (the ops between the transfer and its wait) runs; the
    wait is the explicit dependency from the comm stream back to compute.
    Until the wait, a transfer's source must not be written and its
    destination must be neither read nor written; `braid-check-schedule`
    proves that, and that every receive has its matching send, for the
    schedules Braid generates.

    Buffers are contiguous (row-major, possibly with an offset); collectives
    exchange blocks along the leading dimension, in group order.
  }];
  // dist owns the reduction kinds xfer collectives carry.
  let dependentDialects = [
    "::braid::dist::DistDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::shard::ShardDialect"
  ];
  let useDefaultTypePrinterParser = 1;
}

def Xfer_RequestType : TypeDef<Xfer_Dialect, "Request"> {
  let mnemonic = "request";
  let summary = "an in-flight transfer or collective";
  let description = [{
    Returned by every transfer; completed by exactly one `xfer.wait`.
  }];
}

/// In-flight transfers are ordered with respect to each other.
def Xfer_CommResource : Resource<"::braid::xfer::CommResource">;

class Xfer_Op<string mnemonic, list<Trait> traits = []>
    : Op<Xfer_Dialect, mnemonic, traits>;

defvar Xfer_ContiguousMemRef = AnyStridedMemRef;

class Xfer_TransferOp<string mnemonic, list<Trait> traits = []>
    : Xfer_Op<mnemonic, !listconcat(traits, [
        MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>]>,
        DeclareOpInterfaceMethods<SymbolUserOpInterface>])> {
  let results = (outs Xfer_RequestType:$request);
  let hasVerifier = 1;
}

defvar Xfer_GroupArgs = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$axes,
                             I64Attr:$step);

//===----------------------------------------------------------------------===//
// Point-to-point
//===----------------------------------------------------------------------===//

def Xfer_SendOp : Xfer_TransferOp<"send"> {
  let summary = "sends a buffer to the peer at an offset along a grid axis";
  let description = [{
    Starts sending `buffer` to the rank whose position along the single axis
    in `axes` is this rank's plus `offset` (modulo the axis size). It matches
    the peer's `xfer.recv` with the opposite offset; between two ranks,
    messages match in the order they are posted. `step` names the transfer
    in diagnostics and traces.

    ```mlir
    %r = xfer.send %chunk on @tp axes = [0] offset = 1 step = 2
        : memref<128x1024xbf16>
    ```
  }];
  let arguments = !con((ins Arg<Xfer_ContiguousMemRef, "", [MemRead]>:$buffer,
                            I64Attr:$offset), Xfer_GroupArgs);
  let assemblyFormat = [{
    $buffer `on` $grid `axes` `=` $axes `offset` `=` $offset `step` `=` $step
    attr-dict `:` type($buffer)
  }];
}

def Xfer_RecvOp : Xfer_TransferOp<"recv"> {
  let summary = "receives into a buffer from the peer at an offset";
  let description = [{
    Starts receiving into `buffer` from the rank whose position along the
    single axis in `axes` is this rank's plus `offset`. A ring step sends
    with offset 1 and receives with offset -1.

    ```mlir
    %r = xfer.recv %next on @tp axes = [0] offset = -1 step = 2
        : memref<128x1024xbf16>
    ```
  }];
  let arguments = !con((ins Arg<Xfer_ContiguousMemRef, "", [MemWrite]>:$buffer,
                            I64Attr:$offset), Xfer_GroupArgs);
  let assemblyFormat = [{
    $buffer `on` $grid `axes` `=` $axes `offset` `=` $offset `step` `=` $step
    attr-dict `:` type($buffer)
  }];
}

//===----------------------------------------------------------------------===//
// Collectives on buffers
//===----------------------------------------------------------------------===//

class Xfer_CollectiveOp<string mnemonic, dag extraArgs, string fmt>
    : Xfer_TransferOp<mnemonic> {
  let arguments = !con((ins Arg<Xfer_ContiguousMemRef, "", [MemRead]>:$source,
                            Arg<Xfer_ContiguousMemRef, "", [MemWrite]>:$dest),
                       Xfer_GroupArgs, extraArgs);
  let assemblyFormat = "$source `,` $dest `on` $grid `axes` `=` $axes " # fmt #
      " `step` `=` $step attr-dict `:` type($source) `,` type($dest)";
}

def Xfer_AllGatherOp : Xfer_CollectiveOp<"all_gather", (ins), ""> {
  let summary = "gathers the sources of a group into every destination";
  let description = [{
    `dest` holds the `source` of every rank of the group, in group order,
    one after the other; it has group-size times as many elements.

    ```mlir
    %r = xfer.all_gather %x, %g on @tp axes = [0] step = 0
        : memref<128x64xf32>, memref<512x64xf32>
    ```
  }];
}

def Xfer_ReduceScatterOp : Xfer_CollectiveOp<"reduce_scatter",
    (ins Dist_ReductionKindAttr:$reduction), "`reduce` `=` custom<Reduction>($reduction)"> {
  let summary = "reduces the sources of a group; each rank keeps one block";
  let description = [{
    `source` is split into group-size blocks along its leading dimension;
    block `i` of the elementwise reduction lands in `dest` on the rank at
    group position `i`.

    ```mlir
    %r = xfer.reduce_scatter %p, %s on @tp axes = [0] reduce = sum step = 1
        : memref<512x64xf32>, memref<128x64xf32>
    ```
  }];
}

def Xfer_AllReduceOp : Xfer_CollectiveOp<"all_reduce",
    (ins Dist_ReductionKindAttr:$reduction), "`reduce` `=` custom<Reduction>($reduction)"> {
  let summary = "reduces the sources of a group into every destination";
  let description = [{
    ```mlir
    %r = xfer.all_reduce %p, %s on @tp axes = [0] reduce = sum step = 1
        : memref<512x64xf32>, memref<512x64xf32>
    ```
  }];
}

def Xfer_AllToAllOp : Xfer_CollectiveOp<"all_to_all", (ins), ""> {
  let summary = "sends block i of the source to group position i";
  let description = [{
    Both buffers hold group-size blocks along the leading dimension; block
    `i` of `source` goes to the rank at group position `i` and block `j` of
    `dest` comes from the rank at position `j`.

    ```mlir
    %r = xfer.all_to_all %x, %y on @ep axes = [0] step = 0
        : memref<8x64x32xf16>, memref<8x64x32xf16>
    ```
  }];
}

def Xfer_BroadcastOp : Xfer_CollectiveOp<"broadcast",
    (ins DenseI64ArrayAttr:$root), "`root` `=` $root"> {
  let summary = "copies the root's source into every destination";
  let description = [{
    `root` holds the in-group coordinates of the root, one per axis.

    ```mlir
    %r = xfer.broadcast %x, %y on @tp axes = [0] root = [0] step = 0
        : memref<1024xf32>, memref<1024xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Symmetric memory
//===----------------------------------------------------------------------===//

def Xfer_SymmetricAllocOp : Xfer_Op<"symmetric_alloc", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "a buffer at the same place on every rank of a group";
  let description = [{
    Returns this rank's copy of a buffer that every rank of the group over
    `axes` of `grid` holds, with the same shape, in memory its peers can
    read and write directly (one MPI shared-memory window on CPU ranks).
    `xfer.peer_view` names a peer's copy; `xfer.put` writes one.

    The buffer is persistent: `site` identifies it within the module, and
    every execution of the op returns the same memory, zero-filled only on
    the first. The first execution is collective over the group, like the
    program's collectives, so every rank of the group must reach it in the
    same order. Flags in symmetric memory therefore keep their epochs
    across calls and layers: nothing ever resets them.

    ```mlir
    %slot = xfer.symmetric_alloc on @tp axes = [0] site = 0
        : memref<128x1024xbf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$axes,
                       I64Attr:$site);
  let results = (outs AnyStaticShapeMemRef:$buffer);
  let assemblyFormat = [{
    `on` $grid `axes` `=` $axes `site` `=` $site attr-dict `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Xfer_PeerViewOp : Xfer_Op<"peer_view", [Pure,
    AllTypesMatch<["buffer", "view"]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the copy of a symmetric buffer that a peer holds";
  let description = [{
    A view of the copy of symmetric buffer `buffer` held by the rank whose
    position along the single axis in `axes` is this rank's plus `offset`
    (modulo the axis size). Kernels and copies load from it and store to it
    directly; ordering those accesses with the peer's is the program's job
    (signals).

    ```mlir
    %next = xfer.peer_view %slot on @tp axes = [0] offset = 1
        : memref<128x1024xbf16>
    ```
  }];
  let arguments = (ins AnyStaticShapeMemRef:$buffer, FlatSymbolRefAttr:$grid,
                       DenseI16ArrayAttr:$axes, I64Attr:$offset);
  let results = (outs AnyStaticShapeMemRef:$view);
  let assemblyFormat = [{
    $buffer `on` $grid `axes` `=` $axes `offset` `=` $offset attr-dict
    `:` type($buffer)
  }];
  let hasVerifier = 1;
}

def Xfer_PutOp : Xfer_TransferOp<"put", [AttrSizedOperandSegments]> {
  let summary = "writes a buffer into a peer's copy of a symmetric buffer";
  let description = [{
    Starts copying `source` into the copy of `dest` (a symmetric buffer, or
    a view of one) held by the peer at `offset` along the single axis in
    `axes`. With `signal`, once the data has landed, flag `flags[index]`
    (a symmetric `i32` buffer) of that peer goes up by one, with release
    semantics: a peer whose `xfer.signal_wait` on it returns sees the data.
    The request completes when `source` may be written again.

    ```mlir
    %r = xfer.put %chunk, %slot on @tp axes = [0] offset = 1
        signal %flags[%c0] step = 2
        : memref<128x1024xbf16>, memref<128x1024xbf16>, memref<8xi32>
    ```
  }];
  let arguments = !con((ins Arg<Xfer_ContiguousMemRef, "", [MemRead]>:$source,
                            Xfer_ContiguousMemRef:$dest,
                            Optional<MemRefRankOf<[I32], [1]>>:$flags,
                            Optional<Index>:$index, I64Attr:$offset),
                       Xfer_GroupArgs);
  let assemblyFormat = [{
    $source `,` $dest `on` $grid `axes` `=` $axes `offset` `=` $offset
    (`signal` $flags^ `[` $index `]`)? `step` `=` $step attr-dict
    `:` type($source) `,` type($dest) (`,` type($flags)^)?
  }];
}

def Xfer_SignalOp : Xfer_Op<"signal", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>,
                   MemRead, MemWrite]>,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "raises a flag of a peer";
  let description = [{
    Adds `add` to flag `flags[index]` of the peer at `offset` along the
    single axis in `axes` (offset 0: this rank's own), with release
    semantics: every access this rank made before the signal is visible to
    a rank whose `xfer.signal_wait` sees the new value. Flags count: their
    value is the number of raises so far (the epoch), and never goes back.

    With `for %slot` (a symmetric buffer), the signal announces data: this
    rank has stored into the peer's copy of `%slot` through an
    `xfer.peer_view` (a kernel writing its result there, braid-fuse-puts),
    and the raise tells the peer that it has landed, as a put's signal
    does. `braid-check-schedule` treats those stores and the signal as one
    delivery into the slot.

    ```mlir
    xfer.signal %flags[%c4] on @tp axes = [0] offset = -1 step = 2
        : memref<8xi32>
    xfer.signal %flags[%c0] on @tp axes = [0] offset = 1 for %slot step = 0
        : memref<8xi32>, memref<128x1024xbf16>
    ```
  }];
  let arguments = (ins MemRefRankOf<[I32], [1]>:$flags, Index:$index,
                       FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$axes,
                       I64Attr:$offset,
                       DefaultValuedAttr<I64Attr, "1">:$add,
                       Optional<AnyStaticShapeMemRef>:$data, I64Attr:$step);
  let assemblyFormat = [{
    $flags `[` $index `]` `on` $grid `axes` `=` $axes `offset` `=` $offset
    (`add` `=` $add^)? (`for` $data^)? `step` `=` $step attr-dict
    `:` type($flags) (`,` type($data)^)?
  }];
  let hasVerifier = 1;
}

def Xfer_SignalWaitOp : Xfer_Op<"signal_wait", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>,
                   MemRead, MemWrite]>]> {
  let summary = "waits until a flag of this rank reaches its next epoch";
  let description = [{
    Each rank counts the waits it has made on each flag, across calls. The
    k-th `xfer.signal_wait` on a flag (k = 1, 2, ...) returns once the flag
    is at least `k - slack`, compared modulo 2^32 so that epochs may wrap,
    with acquire semantics. `slack = 0` waits for the k-th raise (a data
    flag: the k-th put has landed); `slack = s` lets the first `s` waits
    pass at once (a credit flag: a buffer of `s` slots the consumer
    releases one by one). A wait longer than the runtime's timeout aborts
    every rank, naming the step, the flag, the epoch expected and the value
    seen.

    ```mlir
    xfer.signal_wait %flags[%c0] slack = 0 step = 2 : memref<8xi32>
    ```
  }];
  let arguments = (ins MemRefRankOf<[I32], [1]>:$flags, Index:$index,
                       I64Attr:$slack, I64Attr:$step);
  let assemblyFormat = [{
    $flags `[` $index `]` `slack` `=` $slack `step` `=` $step attr-dict
    `:` type($flags)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Flags touched by kernels
//===----------------------------------------------------------------------===//

def Xfer_FlagEpochOp : Xfer_Op<"flag_epoch", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>]>]> {
  let summary = "the value a flag must reach for this rank's next wait on it";
  let description = [{
    Counts a wait on flag `flags[index]` exactly as `xfer.signal_wait` does
    (the k-th wait on a flag, across calls) and returns `k - slack` modulo
    2^32, the value the flag must reach, without waiting: a fused kernel
    waits for it with `xfer.kernel_wait` (`braid-kernel-signals`), so that
    the wait happens in the kernel's blocks rather than on the stream.

    ```mlir
    %e = xfer.flag_epoch %flags[%c0] slack = 0 step = 2 : memref<8xi32>
    ```
  }];
  let arguments = (ins MemRefRankOf<[I32], [1]>:$flags, Index:$index,
                       I64Attr:$slack, I64Attr:$step);
  let results = (outs I32:$epoch);
  let assemblyFormat = [{
    $flags `[` $index `]` `slack` `=` $slack `step` `=` $step attr-dict
    `:` type($flags)
  }];
  let hasVerifier = 1;
}

def Xfer_KernelWaitOp : Xfer_Op<"kernel_wait", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>,
                   MemRead, MemWrite]>]> {
  let summary = "a fused kernel's tiles wait until a flag reaches an epoch";
  let description = [{
    Inside a fused kernel (`scf.forall {braid.kernel}`): each iteration
    waits until flag `flags[index]` of this rank is at least `epoch`
    (compared modulo 2^32, as `xfer.signal_wait` compares), with acquire
    semantics at system scope, before the ops after it. On the cuda target
    one thread of each block polls the flag and the block then
    synchronizes, so that every thread's later loads see what the raiser
    wrote before its release. `epoch` comes from `xfer.flag_epoch`, which
    counted the wait on the host. In a kernel of GEMM segments
    (`braid.gemm_segments`) it sits in a case of the `scf.index_switch`
    over them, and each tile of that case's contraction waits.

    ```mlir
    scf.forall (%i) in (4) {
      xfer.kernel_wait %flags[%c0] until %e step = 2 : memref<8xi32>
      ...
    } {braid.kernel}
    ```
  }];
  let arguments = (ins MemRefRankOf<[I32], [1]>:$flags, Index:$index,
                       I32:$epoch, I64Attr:$step);
  let assemblyFormat = [{
    $flags `[` $index `]` `until` $epoch `step` `=` $step attr-dict
    `:` type($flags)
  }];
  let hasVerifier = 1;
}

def Xfer_KernelSignalOp : Xfer_Op<"kernel_signal", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>,
                   MemRead, MemWrite]>]> {
  let summary = "the last tile of a fused kernel raises a peer's flag";
  let description = [{
    Inside a fused kernel (`scf.forall {braid.kernel}`), among its last
    ops (only other raises after it): every iteration counts itself in
    `arrivals[arrival]` once its accesses are done, and the one that
    completes the count (the kernel's last) resets the count to zero and
    adds `add` to flag `flags[index]`, with release semantics at system
    scope. Consecutive raises on the same arrival word count each
    iteration once, and the last iteration raises all of their flags. `flags` is a peer's copy of a
    symmetric flag buffer (an `xfer.peer_view`), so this is
    `xfer.signal` raised from inside the kernel: every access any
    iteration made before it is visible to the peer whose wait sees the
    new value. `arrivals` is a symmetric `i32` buffer of this rank (device
    memory that starts at zero); each kernel has a word of its own. On the
    cuda target each block synchronizes, one thread adds the block's
    arrival (acquire-release at device scope) and, in the last block,
    raises the flags (`red.release.sys`), so one remote atomic goes out
    per flag and kernel whatever its grid.

    With `for %slot`, the raise announces data, as `xfer.signal`'s does:
    the kernel stored into the peer's copy of `%slot`.

    In a kernel of GEMM segments (`braid.gemm_segments`) it ends a case of
    the `scf.index_switch` over them, after the contraction: each tile of
    that contraction counts itself, and the tile that completes the count
    of the contraction's tiles raises the flag (each contraction that
    raises has an arrival word of its own).

    ```mlir
    %peer = xfer.peer_view %flags on @tp axes = [0] offset = -1
        : memref<8xi32>
    scf.forall (%i) in (4) {
      ...
      xfer.kernel_signal %peer[%c1] arrivals %count[%c0] step = 2
          : memref<8xi32>, memref<2xi32>
    } {braid.kernel}
    ```
  }];
  let arguments = (ins MemRefRankOf<[I32], [1]>:$flags, Index:$index,
                       MemRefRankOf<[I32], [1]>:$arrivals, Index:$arrival,
                       DefaultValuedAttr<I64Attr, "1">:$add,
                       Optional<AnyStaticShapeMemRef>:$data, I64Attr:$step);
  let assemblyFormat = [{
    $flags `[` $index `]` `arrivals` $arrivals `[` $arrival `]`
    (`add` `=` $add^)? (`for` $data^)? `step` `=` $step attr-dict
    `:` type($flags) `,` type($arrivals) (`,` type($data)^)?
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// xfer.wait
//===----------------------------------------------------------------------===//

def Xfer_WaitOp : Xfer_Op<"wait", [
    MemoryEffects<[MemRead<Xfer_CommResource>, MemWrite<Xfer_CommResource>,
                   MemRead, MemWrite]>]> {
  let summary = "completes transfers";
  let description = [{
    Blocks until every request has completed. Afterwards the sources may be
    written again and the destinations hold their data. Each request is
    waited exactly once.

    ```mlir
    xfer.wait %send, %recv : !xfer.request, !xfer.request
    ```
  }];
  let arguments = (ins Variadic<Xfer_RequestType>:$requests);
  let assemblyFormat = "$requests attr-dict `:` type($requests)";
  let hasVerifier = 1;
}

#endif // BRAID_DIALECT_XFER_IR_XFEROPS_TD
