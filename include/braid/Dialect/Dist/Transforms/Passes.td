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

    The pass also gives every collective without a `dist.step` its position
    in the function as its step, the number runtime diagnostics and traces
    name its transfers by.
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

def FuseMemoryBound : Pass<"braid-fuse-memory-bound", "mlir::func::FuncOp"> {
  let summary = "Fuses memory-bound chains (elementwise, broadcast, row "
                "reductions, GEMM epilogues) into one kernel each";
  let description = [{
    Most non-GEMM time in a transformer layer is memory-bound: norms,
    softmax, bias + activation + residual, casts. This pass groups each
    producer -> consumer chain of such linalg ops on tensors (elementwise
    ops, broadcasts, fills, reductions over a row's trailing dimensions) and,
    with `epilogues`, the contraction whose result only the chain consumes,
    into one loop nest over row tiles marked `braid.kernel`: one kernel that
    reads each input of the chain once and writes its result once. Softmax,
    layernorm and RMSNorm each become one kernel; bias + GELU + residual
    becomes one kernel, or part of the GEMM's. The tile loop is an
    `scf.forall` mapped to `#gpu.block<linear_dim_i>` (each tile is one
    block of the kernel), so that a chain of a single tile (a decode step's
    one row) stays a kernel: the canonicalizer folds unmapped loops of one
    iteration away.

    Grouping never computes anything twice for different consumers: a
    producer joins a group only when every user of its result is in that
    group; otherwise its result is materialized and it roots a group of its
    own. A producer that feeds two ops of one group is fused twice and the
    identical copies are merged, so a reduction consumed twice is computed
    once per tile. Transposes and contractions other than a group's head
    end a chain. Each group formed is a remark naming how many ops it fused,
    its row reductions and the bytes it moves against the bytes the ops
    moved one by one; `braid-outline-kernels` later makes each group one
    kernel function.

    First, also with `mode=off`, a splat constant that a `linalg.generic`
    reads (directly or through slices and reshapes) becomes its one value,
    a constant in the payload, unless its map alone gives a loop its
    extent: no kernel loads a value known when it is compiled (a mask's
    zeros, cut per block of rows by braid-tile-attention, were read-only
    globals that x86 read with AVX-512 masked loads, a microcode assist
    each on pages the masked-off loads never faulted in).

    ```mlir
    // softmax over rows: four linalg ops (max, exp(x - max), sum, divide)
    // become one scf.for over row tiles {braid.kernel}
    ```
  }];
  let dependentDialects = [
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect"
  ];
  let options = [
    Option<"mode", "mode", "::braid::FuseMode",
           /*default=*/"::braid::FuseMode::Auto",
           "Fuse every chain (auto) or nothing (off)",
           "::braid::options::EnumValues<::braid::FuseMode>()">,
    Option<"epilogues", "epilogues", "bool", /*default=*/"true",
           "Fuse a contraction with the chain that consumes it">,
    Option<"rowTile", "row-tile", "int64_t", /*default=*/"0",
           "Rows per tile (0: as many as fit in tile-bytes, a power of two "
           "dividing the rows)">,
    Option<"tileBytes", "tile-bytes", "int64_t", /*default=*/"65536",
           "Bytes of f32 row data a tile aims at when row-tile is 0">
  ];
  let statistics = [
    Statistic<"numGroups", "kernels", "Fused kernels formed">,
    Statistic<"numFusedOps", "fused-ops", "Ops fused into them">
  ];
}

def TileAttention : Pass<"braid-tile-attention", "mlir::func::FuncOp"> {
  let summary = "Computes an attention with local k and v a block of query "
                "rows at a time, so that only a block's scores are held";
  let description = [{
    As frontends emit it, an attention multiplies q by k into scores of
    rows x keys per head, runs a softmax over the keys and multiplies the
    probabilities by v: each pass over the scores streams all of them
    through memory (at 2048 tokens and 8 heads, 128 MiB of f32 per layer
    and rank). Each query row's softmax reads only its own scores, so this
    pass computes the whole chain a block of query rows at a time, in an
    `scf.for` over blocks (and the rows left over after it): the block's
    slice of q against all of k, the softmax of the block's scores, their
    product with v, inserted into the output. A block holds at most
    `block-bytes` of scores (a multiple of 16 rows where more fit), and its
    intermediates are planned once for the loop (braid-plan-memory), so a
    rank's memory for attention is bounded by the option instead of
    growing with the square of the sequence. Each row is computed by the
    same ops on the same values, so results
    equal the untiled chain's up to the GEMM library's blocking.

    The attention is recognized by ring attention's matcher (any spelling
    of the softmax it reads: torch's safe softmax, reciprocals, exp2 with a
    scale, the division after the product with v) on a product whose k is
    local. A softmax it refuses, a value of the chain read outside it, or
    rows that do not reach the output is a remark saying why; an attention
    whose scores fit in one block is left whole, with a remark. Where the
    attention's mask is an affine comparison of indices that masks more
    keys the further they are (a causal mask, as ring attention reads it),
    blocks are at most an eighth of the rows (at least 16), even for scores
    that would fit whole, and form at most eight groups of consecutive
    blocks: each group reads only the keys up to the last one its rows see,
    one block or a loop over its blocks (the remark gives the share of the
    scores computed: 56% of a causal mask's with eight groups). Unlike a
    flash kernel the keys are not cut into tiles (no online softmax).

    ```mlir
    // scores = q k^T (8x512x512), softmax over the keys, out = p v:
    // becomes scf.for %row = 0 to 512 step 64 over q[:, %row:+64] with
    // scores 8x64x512 per iteration, inserted into out[:, %row:+64]
    ```
  }];
  let dependentDialects = [
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
    "::mlir::arith::ArithDialect"
  ];
  let options = [
    Option<"blockBytes", "block-bytes", "int64_t", /*default=*/"67108864",
           "Bytes of scores a block of rows holds (0: leave attention whole)">
  ];
  let statistics = [
    Statistic<"numTiled", "attentions", "Attentions computed in blocks">
  ];
}

def SinkAllGather : Pass<"braid-sink-all-gather", "mlir::ModuleOp"> {
  let summary = "Moves row-local work after each all-gather before it, on "
                "this rank's rows";
  let description = [{
    Row-local work after each `all_gather` moves before it, on this rank's
    rows only: elementwise ops, reductions along other dimensions, reshapes,
    slices and concatenations of other dimensions, contractions with
    replicated weights (the k and v projections under context parallelism),
    with their other operands replicated and either constant along the rows
    or read at each row's position (rotary tables, sliced to this rank's
    block). Each value used afterwards is gathered instead, when together
    they are no more bytes than the gather moved, or when the work moved
    saves more time than the extra bytes cost; a broadcast or a widening
    cast, and what reads it, stays after the gather. Rows folded with a
    batch by a collapse move too, until an expand separates the sequence
    again. A slice of a new gather that takes back this rank's block reads
    the local value, and a gather left unused is erased. A remark gives the
    ops moved and the bytes.

    It runs before braid-overlap (in the pipeline when `overlap` is not
    `off`), so that the gathers then feed the matmuls the fused schedules
    overlap them with, and ring attention sees both of k and v gathered.
  }];
  let options = [
    Option<"preset", "target-preset", "::braid::TargetPreset",
           /*default=*/"::braid::TargetPreset::Auto",
           "Cost model figures (auto: cpu), which weigh the work moved "
           "against the extra bytes gathered",
           "::braid::options::EnumValues<::braid::TargetPreset>()">
  ];
}

def SinkAllReduce : Pass<"braid-sink-all-reduce", "mlir::ModuleOp"> {
  let summary = "Moves each sum all-reduce after the linear work on its sum "
                "that shrinks it";
  let description = [{
    A sum `all_reduce` commutes with work that is linear in the sum:
    `f(sum_r x_r) = sum_r f(x_r)` when `f` multiplies by (or divides by)
    values that every rank of the group holds alike, adds or subtracts
    linear terms, sums along a dimension into zeros, casts between float
    types, or reshapes, transposes and slices. The pass follows each sum
    all-reduce through such single-use work in its block and moves it to
    the point where its tensor is fewest bytes, never where its elements
    are narrower and no fewer (a cast to bf16 after an f32 sum stays after
    the sum).
    Two sum all-reduces of one grid over disjoint axes, in one block, the
    first read only by the second, become one over both axes. It is a
    module pass: the replication proof follows calls into other functions.

    The combine of a tensor-parallel MoE block is the case it is for: the
    row-parallel expert projection leaves partial sums of
    `[experts, tokens, hidden]`, each expert's output is weighed by its
    routing weight (replicated) and summed over the experts, so the sum of
    `[tokens, hidden]` moves instead (the experts' count times fewer
    bytes); with the experts also split over a second grid axis, the two
    all-reduces meet and merge.

    ```mlir
    // before
    %r = dist.all_reduce %p on @g axes = [0] reduce = sum
        : tensor<8x512x1024xf32> -> tensor<8x512x1024xf32>
    %w = linalg.generic ... ins(%r, %weights ...)   // %r * weight
    %c = linalg.generic ... ins(%w ...) outs(%zeros : tensor<512x1024xf32>)
    // after: %w and %c computed on %p, then
    %r = dist.all_reduce %c on @g axes = [0] reduce = sum
        : tensor<512x1024xf32> -> tensor<512x1024xf32>
    ```

    A remark gives the bytes summed before and after; where the work that
    follows is linear but reads a value not proven alike across the group,
    a remark says which. The sum's order changes (the work runs on each
    rank's part before the reduction), as any reassociation does.
  }];
}

def QuantizeAllGather : Pass<"braid-quantize-all-gather", "mlir::ModuleOp"> {
  let summary = "Sends all-gathers in fewer bits (opt-in; the error bound "
                "is reported)";
  let description = [{
    Opt-in, `format=bf16` makes each all-gather of f32 values send them as
    bf16 (half the bytes; low-bit tensor-parallel communication): the values
    are rounded before the collective, named matmuls consume the bf16 values
    directly (accumulating in f32), other users read them extended back to
    f32. The error bound (2^-8 relative per element) is in the remark and
    under `quantized` in the report. `format=fp8` sends f32, bf16 or f16
    all-gathers as fp8 e4m3 (a quarter or half of the bytes) with one scale
    per rank's chunk (its largest magnitude maps to 448), gathered alongside
    and applied when decoding; each element is within 2^-4 relative (or
    2^-10/448 of its chunk's largest magnitude, below e4m3's normal range).
    The decode sits between the all-gather and its users, so the fused rings
    do not apply to it; the other schedules do.

    Each all-gather it changes carries `dist.quantized` with its format,
    which braid-overlap's report turns into the error bound. It runs
    before braid-overlap (in the pipeline under `quantize-all-gather`), so
    the schedules see the narrow gathers: a ring of k and v then carries
    narrow blocks and widens each.
  }];
  let options = [
    Option<"format", "format", "::braid::QuantizeMode",
           /*default=*/"::braid::QuantizeMode::Off",
           "What all-gathers send",
           "::braid::options::EnumValues<::braid::QuantizeMode>()">
  ];
}

def Overlap : Pass<"braid-overlap", "mlir::ModuleOp"> {
  let summary = "Overlaps collectives with computation, as the cost model "
                "decides";
  let description = [{
    For every collective, in program order, the pass finds the schedules
    that apply, predicts their time with the cost model (alpha-beta links
    from the grid's `dist.topology` or the preset, roofline compute), and
    rewrites the collective into the best one, or leaves it whole when none
    is predicted faster:

    - `all_gather` feeding a contraction (on either operand, along a
      parallel or the reduction loop): a ring of n steps, each computing on
      the chunk at hand while it travels on (`ring_ag_matmul`), optionally on
      two rings in opposite directions (`bidirectional`) and with sub-chunks;
    - a contraction feeding `reduce_scatter`: a ring in which each step
      computes the partial block for the next peer (`ring_matmul_rs`);
    - a contraction feeding `all_reduce`: that ring, then an `all_gather`;
      row-wise work after the all-reduce (elementwise ops, and row
      reductions along dimensions the scatter does not touch, such as a
      norm over the hidden dimension) moves in between, on 1/n of the
      rows, when every other value it reads is proven replicated and one
      of its values is used after it (`rs_ring_ew_ag`, else `rs_ring_ag`
      and a remark saying why);
    - `all_to_all` feeding or fed by a contraction: per-peer exchanges, the
      computation on arrived blocks overlapping those in flight
      (`a2a_dispatch` / `a2a_combine`); a dispatch may reach its
      contraction through transposes and collapses that keep each peer's
      block contiguous along one dimension (the rows of HuggingFace
      experts with a capacity per rank's tokens), which each arriving
      block goes through too, and feed several contractions (the gate and
      up projections), each computed on every block; a combine may be fed
      through expands and transposes the same way (each peer's rows
      computed, then taken through them);
    - `all_gather`s of k and v along the sequence feeding
      `softmax(s(q, k)) v` (context parallelism; separate max, exp, sum and
      divide generics, the form `braid-prepare-import` gives
      `linalg.softmax` and torch-mlir's attention, or torch 2.x's sdpa:
      batch matmuls between reshapes, exp(s - max) as two ops, the safe
      softmax's -inf row flag; any elementwise score ops in between:
      scale, masks through `linalg.index` or a mask tensor): one ring carrying both, with an online softmax (running row
      max and sum, rescaled output, one division at the end), so that a
      rank never holds its whole rows x sequence scores (`ring_attention`,
      under auto when predicted faster or when those scores exceed 256 MiB
      per rank, always under force; the report's `scores` gives the bytes
      a rank holds whole against per piece; `sub-chunks` sets the pieces
      of a block's keys scored at once, by default up to 512 keys; a piece
      that a causal mask, an affine comparison of indices selecting at most
      -1e30 or adding a tensor that is 0 or -inf by such a comparison
      (HF's, built from iotas), fills whole is skipped at run time; under such a mask on 3 or
      more ranks the ring is balanced, `balance-attention`: q travels with
      k and v, each rank also scores the rows of the block it holds
      against its own keys, with the values the chain derives from the
      rank's position computed again for the block's owner, and returns
      that partial to the owner by a shift, so that every rank scores one
      block per step and the ring ends after n / 2 + 1 steps);
    - a halo exchange (the import's ring shifts of `update_halo`) before a
      stencil or convolution: the box of its iterations that reads no halo
      row runs from the tile before the exchange, between the shifts'
      starts and waits, the frame around it after (a remark gives the box);
    - a collective after a computation it needs whole: micro-batches along
      a dimension nothing reduces over (`micro_batch`);
    - small all-reduces of one group, reduction and element type (a
      data-parallel step's gradients), each and all together at most twice
      their latency, whose inputs are ready before any of their results is
      used, the later ones taking no schedule of their own (one the
      options force, or under auto a fused or in-kernel form predicted
      faster): one all-reduce of a flat bucket, the inputs copied in after the
      last of them, started then and waited before the first use, each
      result a slice read back (`bucket_ar`; the report lists the others
      as travelling in it);
    - everything else: the asynchronous form, started right after its input
      and waited right before its first use (`async`).

    In the pipeline, braid-sink-all-gather has moved the row-local work
    after each all-gather before it, and braid-quantize-all-gather (when
    asked) has narrowed the gathers, before this pass decides.

    `mode=force` applies the first schedule that matches regardless of the
    model (for tests); `mode=off` changes nothing.

    An all-gather that braid-quantize-all-gather made send fewer bits
    (`dist.quantized`) is reported with its format and error bound under
    `quantized`.

    `comm` chooses how a ring schedule's shifts travel: `two-sided`
    (send/receive), `symmetric` (each shift is marked `dist.symmetric`, and
    braid-symmetric-transfers makes it a put into the peer's symmetric
    slot with a per-chunk flag), or `auto`: symmetric where the preset has
    a one-sided link (the group shares memory) and the model predicts it
    faster. With `comm=symmetric`, collectives that stay whole (kept, or
    made asynchronous) move by direct transfers too: one marked shift per
    peer offset, posted where the collective starts and waited where it is
    waited, then the assembly or reduction of what arrived (an all-reduce
    in one shot up to 64 KiB, else as a reduce-scatter then an
    all-gather); broadcasts, bitwise reductions and groups over several
    axes have no such form and stay the library's, with the reason. With
    `auto` they always stay the library's collective. The report gives
    each collective's `transport`.

    `fuse-collectives` puts an all-reduce or a reduce-scatter inside a
    kernel: when its result feeds a memory-bound chain (residual, bias,
    RMSNorm, LayerNorm, softmax, casts) and the group shares memory,
    strategy `one_shot_ar` sends each rank's partial to every peer's
    symmetric slot (one marked shift per peer offset, whatever its size),
    `one_shot_rs` each peer's block of it, and the sum of the slots joins
    the kernel that memory-bound fusion makes of the chain: the reduced
    tensor is never written and read back, and the chain runs where the
    collective's result lives, so no operand of it needs to be replicated.
    Strategy `two_shot_ar` sends each peer its block of the partial
    instead, sums the blocks in the kernel of the chain on this rank's
    rows (the first dimension that is not 1), and puts every value the
    chain leaves to every peer; it needs the chain's other operands proven
    replicated, as the ring form `rs_ring_ew_ag` does. An all-gather whose
    input a memory-bound op computes in its block and whose result feeds a
    contraction becomes `push_ag_matmul`: the local chunk goes to every
    peer at once (one marked shift per peer offset) and the contraction
    takes each chunk as it lands, its own first; braid-fuse-puts then has
    the producing kernel store the chunk into the peers' slots itself.
    A contraction whose result is reduce-scattered becomes
    `push_matmul_rs` (under `force` and `auto`, not under `one-shot` or
    `two-shot`, which name their forms): each peer's block of the result
    is computed on its own, the nearest peer's first and this rank's own
    last, and sent to its owner as soon as it is computed (one marked shift
    per peer offset); the owner sums its partial with the n - 1 it
    received, in the kernel of the chain after it where there is one.
    braid-fuse-puts then has each block's contraction write the owner's
    slot itself.
    `auto` applies one of them when the model predicts it beats every other
    schedule (one shot at decode sizes, two shot at prefill), `force` the
    better of the two wherever one applies (an all-gather's one form), `off`
    never. Its record has `"in_kernel": true` and names the kernel.

    Every decision is a remark
    at the collective; `report=FILE` writes them all as JSON, each with the
    function it is in and how often that function runs per run of the
    program (`calls`: a layer function of braid-outline-layers once per
    layer, so a layer's collectives are listed once):

    ```json
    {"collectives": [{"kind": "all_gather", "loc": "mlp.mlir:12:9",
      "function": "main", "calls": 1, "decision": "fused", "with": "linalg.matmul",
      "strategy": "ring_ag_matmul", "chunks": 4, "reason": "...",
      "predicted": {"compute_us": 812.0, "comm_us": 401.5,
                    "serial_us": 1213.5, "overlapped_us": 861.2}}]}
    ```
  }];
  let options = [
    Option<"mode", "mode", "::braid::OverlapMode",
           /*default=*/"::braid::OverlapMode::Auto",
           "Overlap mode",
           "::braid::options::EnumValues<::braid::OverlapMode>()">,
    Option<"preset", "target-preset", "::braid::TargetPreset",
           /*default=*/"::braid::TargetPreset::Auto",
           "Cost model figures (auto: cpu)",
           "::braid::options::EnumValues<::braid::TargetPreset>()">,
    Option<"report", "report", "std::string", /*default=*/"\"\"",
           "Write the decisions as JSON to this file">,
    Option<"subChunks", "sub-chunks", "int64_t", /*default=*/"0",
           "Pieces per peer chunk (0: the model picks 1, 2 or 4; ring "
           "attention: pieces of a block's keys scored at once, 0: up to "
           "512 keys)">,
    Option<"bidirectional", "bidirectional", "::braid::Bidirectional",
           /*default=*/"::braid::Bidirectional::Auto",
           "Ring directions",
           "::braid::options::EnumValues<::braid::Bidirectional>()">,
    Option<"balanceAttention", "balance-attention",
           "::braid::BalanceAttention",
           /*default=*/"::braid::BalanceAttention::Auto",
           "Ring attention: each rank also scores the rows of the block it "
           "holds against its own keys (a causal ring's work balanced)",
           "::braid::options::EnumValues<::braid::BalanceAttention>()">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"0",
           "Largest bucket of all-reduces for bucket_ar, in bytes (0: the "
           "model's, at most twice the latency; -1: no buckets)">,
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"0",
           "Micro-batches for micro_batch (0: the model picks 2, 3 or 4)">,
    Option<"peakTflops", "peak-tflops", "double", /*default=*/"0",
           "Override the preset's 16-bit matmul peak (TFLOP/s; f32 scales)">,
    Option<"memoryBandwidth", "memory-bandwidth", "double", /*default=*/"0",
           "Override the preset's memory bandwidth (GB/s)">,
    Option<"linkBandwidth", "link-bandwidth", "double", /*default=*/"0",
           "Override the preset's default link bandwidth (GB/s)">,
    Option<"linkLatency", "link-latency", "double", /*default=*/"-1",
           "Override the preset's default link latency (us)">,
    Option<"comm", "comm", "::braid::CommMode",
           /*default=*/"::braid::CommMode::Auto",
           "Transport of ring transfers",
           "::braid::options::EnumValues<::braid::CommMode>()">,
    Option<"fuseCollectives", "fuse-collectives",
           "::braid::FuseCollectivesMode",
           /*default=*/"::braid::FuseCollectivesMode::Auto",
           "All-reduces summed inside the kernel of the chain that follows",
           "::braid::options::EnumValues<::braid::FuseCollectivesMode>()">
  ];
  let statistics = [
    Statistic<"numFused", "fused", "Collectives fused with compute">,
    Statistic<"numAsync", "async", "Collectives made asynchronous">,
    Statistic<"numKept", "kept", "Collectives left whole">
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::shard::ShardDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // BRAID_DIALECT_DIST_TRANSFORMS_PASSES_TD
