"""HuggingFace transformers modules through the PyTorch front door: decoder
layers of Llama, Qwen2, Qwen3, Mistral, Gemma and Phi-3, whole LlamaModels,
GPT-2's MLP and block, built from configs with random weights and
parallelized with the plans transformers ships (config.base_model_tp_plan,
given verbatim), on 2 and 4 CPU ranks, tensor and sequence parallel,
compared with the module itself. Runs in the frontends venv
(scripts/setup-frontends.sh installs torch, torch-mlir and transformers)."""
import math
import os
import re
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
transformers = pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import braid  # noqa: E402
import braid.pytorch as bp  # noqa: E402
from braid.dtypes import TOLERANCE  # noqa: E402

SEQ = 8


def config(kind, ranks, attn="sdpa", **extra):
    """A small config: hidden 64, heads and KV heads divisible by `ranks`."""
    heads = 4 if ranks <= 2 else 8
    fields = dict(hidden_size=64, intermediate_size=128,
                  num_attention_heads=heads, num_key_value_heads=heads // 2,
                  head_dim=64 // heads, num_hidden_layers=2, vocab_size=128,
                  max_position_embeddings=64)
    fields.update(extra)
    c = getattr(transformers, kind + "Config")(**fields)
    c._attn_implementation = attn
    return c


def decoder_layer(kind, c):
    module = __import__(f"transformers.models.{kind.lower()}.modeling_"
                        f"{kind.lower()}", fromlist=["_"])
    return getattr(module, kind + "DecoderLayer")(c, 0)


def rotary(c, x):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    batch = x.shape[0]
    positions = torch.arange(x.shape[1]).unsqueeze(0).expand(batch, -1)
    cos, sin = LlamaRotaryEmbedding(c)(x, positions)
    return cos.to(x.dtype), sin.to(x.dtype)


def llama_layer():
    """A 2-rank Llama decoder layer, an input of 2 sequences and the
    rotary tables it is called with, for tests of plans and errors."""
    c = config("Llama", 2)
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(2, SEQ, 64)
    return layer, x, {"position_embeddings": rotary(c, x)}


def relative_error(got, expected):
    got, expected = got.float(), expected.float()
    return ((got - expected).abs().max() / expected.abs().max()).item()


def module_tolerance(dtype):
    """The bound braid.dtypes.TOLERANCE sets for a module in torch `dtype`
    against itself."""
    return TOLERANCE["module"]["f32" if dtype == torch.float32 else "bf16"]


def check(module, args, kwargs, plan, ranks, layout,
          tolerance=module_tolerance(torch.float32), overlap="force",
          expect=None, **options):
    """Parallelizes, runs, compares with the module; returns the
    strategies the report lists."""
    tp = bp.parallelize(module, args, plan, ranks=ranks, input_layout=layout,
                        kwargs=kwargs, overlap=overlap, check_schedule=True,
                        **options)
    with torch.no_grad():
        got = tp(*args, **(kwargs or {}))
        expected = module(*args, **(kwargs or {}))
    if hasattr(expected, "last_hidden_state"):
        got, expected = got.last_hidden_state, expected.last_hidden_state
    if isinstance(expected, tuple):
        got, expected = got[0], expected[0]
    assert got.shape == expected.shape
    assert relative_error(got, expected) <= tolerance
    strategies = [(c["kind"], c["strategy"])
                  for c in tp.artifact.report["collectives"]]
    if expect is not None:
        assert strategies == expect
    return tp, strategies


# The schedules sequence parallelism should get: q/k/v and gate/up from a
# ring all-gather, o_proj and down_proj into a ring reduce-scatter.
SP_RINGS = [("all_gather", "ring_ag_matmul"),
            ("reduce_scatter", "ring_matmul_rs")] * 2
TP_ALL_REDUCES = [("all_reduce", "rs_ring_ag")] * 2


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Llama", "Qwen2", "Qwen3", "Mistral",
                                  "Gemma", "Phi3"])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_decoder_layer(kind, ranks, layout):
    torch.manual_seed(0)
    c = config(kind, ranks)
    layer = decoder_layer(kind, c).eval()
    # Sequence parallel with one sequence; tensor parallel with two.
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    kwargs = {"position_embeddings": rotary(c, x)}
    _, strategies = check(layer, (x,), kwargs, c.base_model_tp_plan, ranks,
                          layout)
    if kind == "Phi3":
        # colwise_gather_output on the packed projections: their outputs
        # are gathered before the chunks are taken.
        assert strategies.count(("all_gather", None)) == 2
    elif layout == "sequence":
        assert strategies == SP_RINGS
    else:
        assert strategies == TP_ALL_REDUCES


def collective_axes(artifact):
    """The grid axes the dist IR's collectives and transfers run on."""
    return set(re.findall(r"dist\.\w+ .*? on @\w+ axes = \[([^\]]*)\]",
                          artifact.ir("dist")))


@pytest.mark.parametrize("kind,dtype", [("Llama", torch.float32),
                                        ("Qwen3", torch.float32),
                                        ("Llama", torch.bfloat16)])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_decoder_layer_data_parallel(kind, dtype, layout):
    """data_parallel=2 on 4 ranks: a 2 x 2 grid, the batch split over its
    rows and the shipped plan over each row's 2 ranks. Each row gets the
    1-D schedules (the all-reduces of tensor parallelism; the rings of
    sequence parallelism, one sequence per row), and nothing crosses the
    data axis."""
    torch.manual_seed(0)
    c = config(kind, 2)
    layer = decoder_layer(kind, c).eval().to(dtype)
    x = torch.randn(2 if layout == "sequence" else 4, SEQ, 64, dtype=dtype)
    kwargs = {"position_embeddings": rotary(c, x)}
    tp, strategies = check(layer, (x,), kwargs, c.base_model_tp_plan, 4,
                           layout, tolerance=module_tolerance(dtype),
                           data_parallel=2)
    expected = SP_RINGS if layout == "sequence" else TP_ALL_REDUCES
    # (bf16 fuses the all-reduce's cast into its ring: rs_ring_ew_ag.)
    assert [k for k, _ in strategies] == [k for k, _ in expected], strategies
    if dtype == torch.float32:
        assert strategies == expected, strategies
    assert all(strategy for _, strategy in strategies), strategies
    assert collective_axes(tp.artifact) == {"1"}


def test_llama_model_data_parallel():
    """A 2-layer LlamaModel from token ids, 2 x 2: the ids' batch split
    over the rows (the model's positions and causal mask built on each
    row's part), the shipped plan within each row."""
    torch.manual_seed(4)
    c = config("Llama", 2)
    model = transformers.LlamaModel(c).eval()
    kwargs = {"input_ids": torch.randint(0, 128, (4, SEQ)),
              "use_cache": False}
    tp, strategies = check(model, (), kwargs, c.base_model_tp_plan, 4,
                           "replicate", data_parallel=2)
    assert strategies == TP_ALL_REDUCES * 2
    assert collective_axes(tp.artifact) == {"1"}


@pytest.mark.parametrize("ranks,data_parallel,batch,message", [
    (4, 3, 6, "data_parallel=3 does not divide the 4 ranks"),
    (4, 2, 3, "the batch of 3 .* does not split over data_parallel=2"),
    (4, 0, 4, "data_parallel must be a positive integer")])
def test_bad_data_parallel(ranks, data_parallel, batch, message):
    c = config("Llama", 2)
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(batch, SEQ, 64)
    with pytest.raises(ValueError, match=message):
        bp.to_mlir(layer, (x,), c.base_model_tp_plan, ranks,
                   kwargs={"position_embeddings": rotary(c, x)},
                   data_parallel=data_parallel)


def test_experts_on_a_data_axis_refused():
    """Expert parallelism with data_parallel: the plan's expert split
    reaches tokens that are not batch-major; a located error, not a wrong
    partition."""
    c, block = sparse_moe("Mixtral", 2)
    with pytest.raises(braid.CompileError) as error:
        bp.parallelize(block, (torch.randn(2, SEQ, 64),), c.base_model_ep_plan,
                       ranks=4, data_parallel=2)
    assert "split by experts on a grid with a data axis" in str(
        error.value.diagnostics), error.value.diagnostics


def assert_causal_ring(tp, strategies, ranks):
    """k and v as one ring of attention that skips the blocks the causal
    mask fills whole and, on more than 2 ranks, is balanced."""
    assert strategies == [("all_gather", "ring_attention")] * 2, strategies
    for record in tp.artifact.report["collectives"]:
        assert record["scores"]["skips_masked"], record
        assert record["scores"]["balanced"] == (ranks > 2), record


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind,dtype,extra", [
    ("Llama", torch.float32, {}),
    ("Qwen2", torch.float32, {}),
    ("Llama", torch.bfloat16, {}),
    # q and k normed per head before the rotary embedding.
    ("Qwen3", torch.float32, {}),
    # q, k and v from one packed projection, split by slices.
    ("Phi3", torch.float32, {}),
    ("Mistral", torch.bfloat16, {}),
    # GELU's tanh approximation in bf16.
    ("Gemma", torch.bfloat16, {}),
    # Partial, interleaved rotary: tables partitioning split and gathered.
    ("Glm", torch.float32, {}),
    # k upcast to f32 for its rotary embedding (a widening cast).
    ("Cohere", torch.bfloat16, {}),
    # No GQA: k and v together are twice the rows' bytes, gathered for
    # the projections' work they save.
    ("Llama", torch.float32, {"mha": True}),
    # Two sequences: the projections read [batch * seq, hidden], whose rows
    # fold the split sequence inside the batch. The work moves before the
    # gathers all the same, q's projection and the attention's rows
    # included (upstream gathers q's rows too here; the MLP's gather, whose
    # result partitioning sliced back to the rank's rows, disappears).
    ("Llama", torch.float32, {"batch": 2}),
    # Projection biases broadcast over the folded rows.
    ("Qwen2", torch.float32, {"batch": 2}),
    ("Mistral", torch.bfloat16, {"batch": 2}),
    # Interleaved partial rotary.
    ("Glm", torch.float32, {"batch": 2}),
])
def test_context_parallel(kind, ranks, dtype, extra):
    """Context parallelism through the front door: every weight replicated
    (an empty plan) and the activations split along the sequence
    (input_layout="sequence"). Upstream propagation gathers the rows the
    k and v projections read; braid-overlap moves the projections and the
    rotary embedding (its tables sliced to the rank's rows) before the
    gather, gathers k and v instead, and runs them as one ring of
    blockwise attention with the online softmax (ring attention), the
    causal mask built from an iota whose indices count from each rank's
    block. That mask reads as a comparison of the scores' indices: the
    ring skips the blocks it fills whole and, on 4 ranks, is balanced
    (each rank also scores the rows of the block it holds, their mask
    rows computed again for their owner)."""
    torch.manual_seed(7)
    extra = dict(extra)
    if extra.pop("mha", False):
        extra["num_key_value_heads"] = 4 if ranks <= 2 else 8
    batch = extra.pop("batch", 1)
    c = config(kind, ranks, **extra)
    layer = decoder_layer(kind, c).eval().to(dtype)
    x = torch.randn(batch, 4 * ranks, 64, dtype=dtype)
    tp, strategies = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                           {}, ranks, "sequence",
                           tolerance=module_tolerance(dtype))
    assert_causal_ring(tp, strategies, ranks)


@pytest.mark.parametrize("layout,plan", [("replicate", "shipped"),
                                         ("sequence", "shipped"),
                                         ("sequence", "context")])
def test_phi_layer_bf16(layout, plan):
    """Phi-2 (partial rotary, gelu_new) in bf16: its MLP truncates f64
    constants to bf16 in a body, which once needed a libgcc helper
    Debian's lacks (__truncdfbf2) and the program did not load."""
    from transformers.models.phi.modeling_phi import PhiRotaryEmbedding
    torch.manual_seed(3)
    c = config("Phi", 2)
    layer = decoder_layer("Phi", c).eval().to(torch.bfloat16)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64,
                    dtype=torch.bfloat16)
    positions = torch.arange(SEQ).unsqueeze(0).expand(x.shape[0], -1)
    cos, sin = PhiRotaryEmbedding(c)(x, positions)
    check(layer, (x,), {"position_embeddings": (cos.to(x.dtype),
                                                sin.to(x.dtype))},
          c.base_model_tp_plan if plan == "shipped" else {}, 2, layout,
          tolerance=module_tolerance(torch.bfloat16))


@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_gemma_layer_bf16(layout):
    """Gemma's MLP (gelu_pytorch_tanh) in bf16: its tanh once left a bf16
    truncation to a libgcc helper Debian's lacks, and the program did not
    load."""
    torch.manual_seed(3)
    c = config("Gemma", 2)
    layer = decoder_layer("Gemma", c).eval().to(torch.bfloat16)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64,
                    dtype=torch.bfloat16)
    check(layer, (x,), {"position_embeddings": rotary(c, x)},
          c.base_model_tp_plan, 2, layout, tolerance=3e-2)


@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_llama_layer_eager_attention(layout):
    torch.manual_seed(1)
    c = config("Llama", 2, attn="eager")
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    check(layer, (x,), {"position_embeddings": rotary(c, x)},
          c.base_model_tp_plan, 2, layout,
          expect=SP_RINGS if layout == "sequence" else TP_ALL_REDUCES)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_llama_layer_bf16(ranks, layout):
    torch.manual_seed(2)
    c = config("Llama", ranks)
    layer = decoder_layer("Llama", c).eval().to(torch.bfloat16)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64,
                    dtype=torch.bfloat16)
    # Against the module in bf16: both round at every op, in other orders.
    check(layer, (x,), {"position_embeddings": rotary(c, x)},
          c.base_model_tp_plan, ranks, layout, tolerance=2e-2)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Llama", "Qwen2", "Mistral"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows", [2, 32])
def test_attention_in_blocks(kind, ranks, dtype, rows):
    """braid-tile-attention: each rank's attention (GQA, causal, 37 tokens,
    batch 2) computed a block of query rows at a time, against the module.
    A budget of 32 rows' scores gives blocks of 16 (an eighth of the rows,
    at least 16, skip more keys): three blocks, each reading only the keys
    its rows see. A budget of 2 rows gives 19 blocks in 7 groups of 6 rows
    (the last of one), each group a loop over its blocks that reads the
    keys its rows see."""
    torch.manual_seed(4)
    c = config(kind, ranks)
    layer = decoder_layer(kind, c).eval().to(dtype)
    tokens = 37
    x = torch.randn(2, tokens, 64, dtype=dtype)
    # f32 scores of one query row: batch x local heads x keys.
    per_row = 2 * (c.num_attention_heads // ranks) * tokens * 4
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, ranks, "replicate",
                  tolerance=module_tolerance(dtype),
                  attention_block_bytes=rows * per_row)
    blocks = [r.message for r in tp.artifact.remarks
              if "attention computed in blocks" in r.message]
    # bf16: each block's probabilities are rounded to bf16 for their
    # product with v (as torch's CPU kernel does), which then multiplies
    # bf16 operands: no contraction of the attention is left in f32.
    at = {(r.file, r.line) for r in tp.artifact.remarks
          if "attention computed in blocks" in r.message}
    wide = [r.text for r in tp.artifact.remarks
            if "left in f32" in r.message and (r.file, r.line) in at]
    if dtype == torch.bfloat16:
        assert not wide, wide
    if rows == 2:
        # Rows 6g to 6g + 5 read keys 0 to 6g + 5, row 36 all 37:
        # (36 * (1 + ... + 6) + 37) / 37**2 = 58%.
        expected = ("attention computed in blocks of 2 query rows (19 "
                    "blocks): 1.2 KiB of scores at a time instead of 21.4 "
                    "KiB; the keys the mask hides from a whole block skipped "
                    "(58% of the scores computed)")
    else:
        # Rows 0-15 read keys 0-15, rows 16-31 keys 0-31, rows 32-36 all
        # 37: (16 * 16 + 16 * 32 + 5 * 37) / 37**2 = 70%.
        expected = ("attention computed in blocks of 16 query rows (3 "
                    "blocks): 9.2 KiB of scores at a time instead of 21.4 "
                    "KiB; the keys the mask hides from a whole block skipped "
                    "(70% of the scores computed)")
    assert blocks == [expected], blocks


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("masks", ["causal", "padded", "packed"])
def test_llama_model_attention_in_blocks(dtype, masks):
    """A 2-layer LlamaModel from token ids builds its own mask: causal,
    and'ed with HF's same-document mask (its positions' packed-sequence
    test) or with a padding mask (three keys padded: rows 0 to 2 see no
    key). The causal part reads as a comparison of positions gathered from
    an iota and the fill is -inf, so each block of query rows skips the
    keys it hides from every row; the other part stays in the mask tensor.
    Given position ids (packed sequences that restart them), the causal
    part compares the ids themselves, data: nothing is skipped. Against
    the module, blocks of 4 of 37 rows."""
    torch.manual_seed(9)
    ranks, tokens = 2, 37
    c = config("Llama", ranks)
    model = transformers.LlamaModel(c).eval().to(dtype)
    kwargs = {"input_ids": torch.randint(0, 128, (1, tokens)),
              "use_cache": False}
    if masks == "packed":
        kwargs["position_ids"] = torch.cat(
            [torch.arange(20), torch.arange(tokens - 20)]).unsqueeze(0)
    elif masks == "padded":
        padding = torch.ones(1, tokens, dtype=torch.int64)
        padding[0, :3] = 0
        kwargs["attention_mask"] = padding
    per_row = (c.num_attention_heads // ranks) * tokens * 4
    tp, _ = check(model, (), kwargs, c.base_model_tp_plan, ranks,
                  "replicate", tolerance=module_tolerance(dtype),
                  attention_block_bytes=4 * per_row)
    blocks = [r.message for r in tp.artifact.remarks
              if "attention computed in blocks" in r.message]
    assert len(blocks) == 2, blocks
    skipped = ["the keys the mask hides from a whole block skipped" in b
               for b in blocks]
    assert skipped == [masks != "packed"] * 2, blocks


def test_llama_layer_auto():
    """overlap=auto: the report says what the cost model chose, and why."""
    torch.manual_seed(3)
    c = config("Llama", 2)
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(1, SEQ, 64)
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, 2, "sequence", overlap="auto")
    for record in tp.artifact.report["collectives"]:
        assert record["decision"] in ("fused", "async", "kept")
        assert record["reason"]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Llama", "Qwen2"])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_decoder_layer_symmetric(kind, ranks, layout, overlap):
    """comm=symmetric on shipped plans: the rings (force) and the whole
    collectives (off) move through symmetric memory, the checker proves
    the signal protocol, and the layer still computes what the module
    does."""
    torch.manual_seed(5)
    c = config(kind, ranks)
    layer = decoder_layer(kind, c).eval()
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, ranks, layout, overlap=overlap,
                  comm="symmetric")
    records = tp.artifact.report["collectives"]
    assert records
    assert all(r["transport"] == "symmetric" for r in records), records


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Llama", "Qwen2"])
@pytest.mark.parametrize("layout,form", [("replicate", "one-shot"),
                                         ("replicate", "two-shot"),
                                         ("sequence", "force")])
def test_decoder_layer_in_kernel(kind, ranks, layout, form):
    """fuse_collectives on shipped plans: the all-reduces (tensor parallel)
    or reduce-scatters (sequence parallel) before the residual adds are
    summed inside the kernels of the residual and the next norm, in one
    shot or in two (each rank's block of the sequence, then the residual
    stream and the normed rows put to every peer: the plan replicates the
    norm weights and the residual stream); under sequence parallelism the
    all-gathers of the normed rows (through torch-mlir's reshape to 2-D)
    are written into the peers' buffers by the norms' kernels
    (push_ag_matmul); and the layer still computes what the module does."""
    torch.manual_seed(6)
    c = config(kind, ranks)
    layer = decoder_layer(kind, c).eval()
    # Two shot splits the first dimension that is not 1: the sequence.
    x = torch.randn(2 if form == "one-shot" else 1, SEQ, 64)
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, ranks, layout,
                  fuse_collectives=form)
    records = tp.artifact.report["collectives"]
    fused = [r for r in records if r.get("in_kernel")]
    want = {"sequence": "one_shot_rs"}.get(layout, form.replace("-", "_") + "_ar")
    expected = [want] * 2 + (["push_ag_matmul"] * 2 if layout == "sequence" else [])
    assert sorted(r["strategy"] for r in fused) == sorted(expected), "\n".join(
        f"{r['strategy']}: {r['reason']}" for r in records)
    assert all(r["transport"] == "symmetric" for r in fused), fused


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind,dtype", [("Llama", torch.float32),
                                        ("Qwen2", torch.bfloat16)])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_decoder_layer_cuda_emulated(kind, dtype, ranks, layout):
    """target="cuda" on Braid's emulated device: the shipped plan's layer
    compiled for sm_90a (its kernels as PTX), every kernel run from its
    PTX on one process per rank over the emulated NCCL, GEMMs on the
    emulated cuBLASLt, the race detector on; the layer still computes what
    the module does, with the schedules it gets on the cpu target."""
    torch.manual_seed(7)
    c = config(kind, ranks)
    layer = decoder_layer(kind, c).eval().to(dtype)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64, dtype=dtype)
    # In bf16 tighter than the module bound: this layer allows it.
    tolerance = module_tolerance(dtype) if dtype == torch.float32 else 3e-2
    tp, strategies = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                           c.base_model_tp_plan, ranks, layout,
                           tolerance=tolerance, target="cuda", emulate=True)
    if layout == "sequence":
        assert strategies == SP_RINGS
    else:
        # Elementwise work may move between the halves (rs_ring_ew_ag).
        assert [k for k, _ in strategies] == ["all_reduce"] * 2
        assert all(s.startswith("rs_ring") for _, s in strategies), strategies
    assert tp.artifact.ir("ptx").count(".entry") >= 2
    if dtype == torch.bfloat16:
        # sdpa's Q K^T reads the bf16 q and k (braid-narrow-contractions):
        # a batched contraction of bf16 buffers into f32, run above on
        # cuBLASLt against the module.
        assert re.search(r"ins\([^)]*: memref<\d+x\d+x\d+xbf16[^>]*>, "
                         r"memref<\d+x\d+x\d+xbf16[^>]*>\) "
                         r"outs\([^)]*: memref<\d+x\d+x\d+xf32",
                         tp.artifact.ir("xfer")), "Q K^T not narrowed"


@pytest.mark.parametrize("ranks,layout,dtype", [
    (2, "replicate", torch.bfloat16), (4, "sequence", torch.float16),
    (2, "sequence", torch.float32)])
def test_decoder_layer_generated_gemms_cuda_emulated(ranks, layout, dtype):
    """gemm="generated" on the cuda target: every contraction of the
    shipped plan's layer (the projections, their ring chunks, attention's
    batched products) runs as Braid's own tensor-core kernel (ldmatrix,
    mma.sync; f32 as tf32 with allow_tf32) instead of cuBLASLt, on the
    emulated device, and the layer still computes what the module does."""
    torch.manual_seed(9)
    c = config("Llama", ranks)
    layer = decoder_layer("Llama", c).eval().to(dtype)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64, dtype=dtype)
    f32 = dtype == torch.float32
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, ranks, layout,
                  tolerance=1e-2 if f32 else 3e-2, target="cuda",
                  emulate=True, gemm="generated", allow_tf32=f32)
    ptx = tp.artifact.ir("ptx")
    assert "mma.sync.aligned." + {
        torch.bfloat16: "m16n8k16.row.col.f32.bf16.bf16",
        torch.float16: "m16n8k16.row.col.f32.f16.f16",
        torch.float32: "m16n8k8.row.col.f32.tf32.tf32"}[dtype] in ptx
    if not f32:
        assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    # Nothing left for cuBLASLt: no contraction has f32 operands here.
    assert "braid_rt_gemm" not in tp.artifact.ir("llvm-mlir")
    generated = [r.message for r in tp.artifact.remarks
                 if "generated tensor-core kernel" in r.message]
    assert generated and not any("not a generated" in m for m in generated)
    if layout == "replicate":
        # The MLP's SiLU(gate) * up is the up projection's epilogue (under
        # sequence parallelism the projections are ring chunks, writing
        # views of the gathered result, which stay unfused).
        assert any("as its epilogue" in m for m in generated), generated


@pytest.mark.parametrize("ranks,dtype", [(2, torch.float16),
                                         (4, torch.bfloat16)])
def test_decoder_layer_tile_waits_cuda_emulated(ranks, dtype):
    """Sequence parallel with the gathers pushed by the norms' kernels and
    generated GEMMs: a gathered projection's chunk GEMMs are one persistent
    tensor-core kernel whose tiles poll their chunk's flag, on the emulated
    device (race detector on), against the module."""
    torch.manual_seed(10)
    c = config("Llama", ranks)
    layer = decoder_layer("Llama", c).eval().to(dtype)
    x = torch.randn(1, SEQ, 64, dtype=dtype)
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, ranks, "sequence", tolerance=3e-2,
                  target="cuda", emulate=True, gemm="generated",
                  fuse_collectives="force")
    strategies = [r["strategy"] for r in tp.artifact.report["collectives"]]
    assert "push_ag_matmul" in strategies, strategies
    polled = [r.message for r in tp.artifact.remarks
              if "each tile polls its contraction's flags" in r.message]
    # A chunked projection of each gather: one kernel over every rank's
    # chunk (the copies into the gathered buffer, the put waits and the
    # credits between the chunk GEMMs moved after it).
    assert len(polled) >= 2, [r.message for r in tp.artifact.remarks]
    assert any(f"runs with {ranks - 1} more contraction(s)" in m
               for m in polled), polled
    assert "ld.acquire.sys.u32" in tp.artifact.ir("ptx")


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_mlp_push_reduce_scatter(ranks, target):
    """Sequence parallel LlamaMLP under fuse_collectives="force": the
    down projection's reduce-scatter, with no chain after it, becomes
    push_matmul_rs, each peer's block of the projection computed on its
    own and written by its GEMM into the owner's slot; on the emulated
    cuda device with generated GEMMs (f32 as tf32), one persistent
    tensor-core kernel whose last tile of each block raises the owner's
    flag (race detector on); against the module. In bf16 a cast follows
    the sum, and at these sizes the model prefers one_shot_rs, which sums
    inside the cast's kernel."""
    from transformers.models.llama.modeling_llama import LlamaMLP
    torch.manual_seed(11)
    c = config("Llama", ranks)
    mlp = LlamaMLP(c).eval()
    x = torch.randn(1, SEQ, 64)
    options = ({"target": "cuda", "emulate": True, "gemm": "generated",
                "allow_tf32": True} if target == "cuda" else {})
    tp, strategies = check(
        mlp, (x,), None, {"gate_proj": "colwise", "up_proj": "colwise",
                          "down_proj": "rowwise"}, ranks, "sequence",
        tolerance=1e-2 if target == "cuda" else module_tolerance(torch.float32),
        fuse_collectives="force", **options)
    assert ("reduce_scatter", "push_matmul_rs") in strategies, strategies
    if target == "cuda":
        raised = [r.message for r in tp.artifact.remarks
                  if "raises flags raises them" in r.message]
        assert any(f"runs with {ranks - 1} more contraction(s)" in m
                   for m in raised), [r.message for r in tp.artifact.remarks]
        assert "red.release.sys.add.u32" in tp.artifact.ir("ptx")


def test_llama_model_cuda_emulated():
    """A whole 2-layer LlamaModel from token ids on the cuda target, on the
    emulated device: the embedding lookup's index checks (device-side
    assertions, calls of __assertfail), the rotary embedding's sin and cos
    (libdevice's extended-precision argument reduction: add.cc, madc,
    funnel shifts), the gathers pushed by the norms into GEMMs that poll
    their chunks' flags per tile; against the module. A token id past the
    vocabulary then fails with the assertion's message, not a hang or a
    wrong result."""
    torch.manual_seed(4)
    c = config("Llama", 4)
    model = transformers.LlamaModel(c).eval().to(torch.bfloat16)
    ids = torch.randint(0, 128, (1, SEQ))
    kwargs = {"input_ids": ids, "use_cache": False}
    tp, strategies = check(model, (), kwargs, c.base_model_tp_plan, 4,
                           "sequence", tolerance=3e-2, target="cuda",
                           emulate=True, gemm="generated",
                           fuse_collectives="force")
    assert ("all_gather", "push_ag_matmul") in strategies, strategies
    assert any("each tile polls" in r.message for r in tp.artifact.remarks)
    bad = ids.clone()
    bad[0, 3] = 500
    with pytest.raises(braid.RunError,
                       match="device-side assertion failed: 'index must be "
                             "smaller than dim size' at .*modeling_llama"):
        tp(input_ids=bad, use_cache=False)


@pytest.mark.parametrize("layout,form", [("replicate", "one-shot"),
                                         ("sequence", "force")])
def test_decoder_layer_in_kernel_cuda_emulated(layout, form):
    """The in-kernel collectives on the emulated device: the norms'
    kernels sum the peers' partials from symmetric memory (and, sequence
    parallel, push their rows into the peers' buffers) on 4 ranks."""
    torch.manual_seed(8)
    c = config("Llama", 4)
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(2 if form == "one-shot" else 1, SEQ, 64)
    tp, _ = check(layer, (x,), {"position_embeddings": rotary(c, x)},
                  c.base_model_tp_plan, 4, layout, fuse_collectives=form,
                  target="cuda", emulate=True)
    fused = [r["strategy"] for r in tp.artifact.report["collectives"]
             if r.get("in_kernel")]
    assert fused, tp.artifact.report["collectives"]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("inputs,layout", [("embeds", "replicate"),
                                           ("embeds", "sequence"),
                                           ("ids", "replicate"),
                                           ("ids", "sequence")])
def test_llama_model(inputs, layout, ranks):
    """A 2-layer LlamaModel with its final norm, the shipped plan verbatim
    (`layers.*.` keys). Sequence parallel from token ids splits the ids
    along their last dimension (the sequence), so the embedding lookup
    gives each rank its rows, as inputs_embeds does."""
    torch.manual_seed(4)
    c = config("Llama", ranks)
    model = transformers.LlamaModel(c).eval()
    batch = 1 if layout == "sequence" else 2
    if inputs == "embeds":
        kwargs = {"inputs_embeds": torch.randn(batch, SEQ, 64),
                  "use_cache": False}
    else:
        kwargs = {"input_ids": torch.randint(0, 128, (batch, SEQ)),
                  "use_cache": False}
    _, strategies = check(model, (), kwargs, c.base_model_tp_plan, ranks,
                          layout)
    # Each layer as a single one gets it: the residual stream between the
    # layers stays split under sequence parallelism.
    assert strategies == (TP_ALL_REDUCES if layout == "replicate"
                          else SP_RINGS) * 2


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("parallel", ["sequence", "context"])
def test_mistral_model_from_ids(ranks, parallel):
    """A whole MistralModel called with token ids, an attention mask with
    padding and position ids ([batch, seq] integers, split along their
    last dimension) under input_layout="sequence" (issue 41 found it split
    the batch): sequence parallel under the shipped plan (each layer's
    rings) and context parallel with an empty plan (a ring of attention
    per layer)."""
    torch.manual_seed(16)
    c = config("Mistral", ranks)
    model = transformers.MistralModel(c).eval()
    mask = torch.ones(1, SEQ, dtype=torch.int64)
    mask[0, :2] = 0
    kwargs = {"input_ids": torch.randint(0, 128, (1, SEQ)),
              "attention_mask": mask,
              "position_ids": torch.arange(SEQ).unsqueeze(0),
              "use_cache": False}
    plan = c.base_model_tp_plan if parallel == "sequence" else {}
    _, strategies = check(model, (), kwargs, plan, ranks, "sequence")
    if parallel == "sequence":
        # Each layer's rings; before them the mask's inputs are gathered.
        assert [s for s in strategies if s in SP_RINGS] == SP_RINGS * 2, \
            strategies
    else:
        assert strategies.count(("all_gather", "ring_attention")) == 4, strategies


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("dtype,masks", [
    (torch.float32, "causal"), (torch.bfloat16, "causal"),
    (torch.float32, "padded"), (torch.bfloat16, "packed")])
def test_llama_model_context_parallel(ranks, dtype, masks):
    """A 2-layer LlamaModel context parallel: the model builds its positions,
    rotary tables and causal mask itself (HF's mask code reads positions
    with computed indices, which partitioning split: the import gathers
    them for it, in a function the layers call). Each layer's k and v go
    around a ring of attention. The causal part of the mask reads as a
    comparison of the gathered positions (an all-gather of each rank's
    iota is the whole iota), so the ring skips the pieces it fills whole
    and, on 4 ranks, is balanced, the owner's mask rows computed again
    (the gathered positions are the same on every rank). And'ed with a
    padding mask (three keys padded) it still skips; given position ids
    (packed sequences that restart them) the mask compares data: the ring
    skips nothing and is not balanced."""
    torch.manual_seed(4)
    c = config("Llama", ranks)
    model = transformers.LlamaModel(c).eval().to(dtype)
    tokens = 4 * ranks
    kwargs = {"use_cache": False}
    if masks == "causal":
        kwargs["inputs_embeds"] = torch.randn(1, tokens, 64, dtype=dtype)
    else:
        kwargs["input_ids"] = torch.randint(0, 128, (1, tokens))
    if masks == "padded":
        padding = torch.ones(1, tokens, dtype=torch.int64)
        padding[0, :3] = 0
        kwargs["attention_mask"] = padding
    elif masks == "packed":
        kwargs["position_ids"] = torch.cat(
            [torch.arange(5), torch.arange(tokens - 5)]).unsqueeze(0)
    tp, strategies = check(model, (), kwargs, {}, ranks, "sequence",
                           tolerance=module_tolerance(dtype))
    assert strategies.count(("all_gather", "ring_attention")) == 4, strategies
    for record in tp.artifact.report["collectives"]:
        if record["strategy"] == "ring_attention":
            skips = masks != "packed"
            assert record["scores"]["skips_masked"] == skips, record
            assert record["scores"]["balanced"] == (skips and ranks > 2), \
                record


@pytest.mark.parametrize("overlap", ["auto", "force"])
def test_llama_model_context_parallel_data_axis(overlap):
    """Context parallel on a 2 x 2 grid: two sequences split over the data
    axis, each sequence over the other. Partitioning computes the mask on
    whole rows here and gathers the scores' rows for it; the mask's
    operands are sliced at this rank's position along the data axis,
    which the replication proof takes as alike along the sequence axis, so
    braid-sink-all-gather moves that work before the gather and each
    layer's k and v go around a ring of attention (before, no ring was
    formed). The mask is not read as causal there: the ring skips nothing
    (docs/rationale/ring-attention.md, "Not built"). Against the module."""
    torch.manual_seed(4)
    c = config("Llama", 2)
    model = transformers.LlamaModel(c).eval()
    kwargs = {"inputs_embeds": torch.randn(2, 8, 64), "use_cache": False}
    tp, strategies = check(model, (), kwargs, {}, 4, "sequence",
                           data_parallel=2, overlap=overlap)
    assert strategies == [("all_gather", "ring_attention")] * 4, strategies
    for record in tp.artifact.report["collectives"]:
        assert not record["scores"]["skips_masked"], record


def test_plan_relative_keys():
    """The model's plan applies to the model inside a wrapper (keys after a
    `model.` prefix) and to one layer (keys above the layer's path)."""
    torch.manual_seed(5)
    c = config("Llama", 2)
    causal = transformers.LlamaForCausalLM(c).eval()
    x = torch.randn(2, SEQ, 64)
    check(causal.model, (), {"inputs_embeds": x, "use_cache": False},
          {"model." + k: v for k, v in c.base_model_tp_plan.items()}, 2,
          "replicate", expect=TP_ALL_REDUCES * 2)


@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_gpt2_mlp(layout):
    """gelu_new (x.pow(3)) and Conv1D weights ([in, out])."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
    torch.manual_seed(6)
    c = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=2,
                                vocab_size=128, n_positions=64)
    mlp = GPT2MLP(256, c).eval()
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    expect = ([("all_gather", "ring_ag_matmul"),
               ("reduce_scatter", "ring_matmul_rs")] if layout == "sequence"
              else [("all_reduce", "rs_ring_ew_ag")])
    check(mlp, (x,), None, {"c_fc": "colwise", "c_proj": "rowwise"}, 2,
          layout, expect=expect)


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_gpt2_block(attn):
    """GPT-2 ships no plan; the packed c_attn, split colwise, is gathered
    before q, k and v are sliced from it."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block
    torch.manual_seed(7)
    c = transformers.GPT2Config(n_embd=64, n_head=4, n_layer=2,
                                vocab_size=128, n_positions=64)
    c._attn_implementation = attn
    block = GPT2Block(c, 0).eval()
    plan = {"attn.c_attn": "colwise", "attn.c_proj": "rowwise",
            "mlp.c_fc": "colwise", "mlp.c_proj": "rowwise"}
    check(block, (torch.randn(2, SEQ, 64),), None, plan, 2, "replicate")


def test_phi3_mlp():
    from transformers.models.phi3.modeling_phi3 import Phi3MLP
    torch.manual_seed(8)
    c = config("Phi3", 2)
    check(Phi3MLP(c).eval(), (torch.randn(2, SEQ, 64),), None,
          {"gate_up_proj": "colwise_gather_output",
           "down_proj": "rowwise_split_input"}, 2, "replicate",
          expect=[("all_gather", None), ("all_reduce", "rs_ring_ag")])


def test_plan_errors():
    torch.manual_seed(9)
    layer, x, kwargs = llama_layer()
    with pytest.raises(ValueError, match="known styles: .*colwise_gather_"
                                         "output.*replicated_with_grad"):
        bp.parallelize(layer, (x,), {"mlp.up_proj": "diagonal"}, ranks=2,
                       kwargs=kwargs)
    # A key without wildcards that names nothing is a typo.
    with pytest.raises(ValueError, match="mlp.upp_proj"):
        bp.parallelize(layer, (x,), {"mlp.upp_proj": "colwise"}, ranks=2,
                       kwargs=kwargs)
    # A template key that names nothing is not (plans list every kind of
    # layer).
    bp.parallelize(layer, (x,), {"layers.*.mlp.experts": "moe_tp_experts"},
                   ranks=2, kwargs=kwargs)


def test_per_input_layouts():
    """A layout per input, by name or in order: the activation split along
    the sequence, the explicit causal mask ([b, 1, s, s]) and the rotary
    tables replicated; unknown names, counts and layouts are errors."""
    torch.manual_seed(13)
    c = config("Llama", 2, attn="eager")
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(1, SEQ, 64)
    mask = torch.full((SEQ, SEQ), float("-inf")).triu(1)[None, None]
    kwargs = {"position_embeddings": rotary(c, x), "attention_mask": mask}
    exported = bp.export(layer, (x,), kwargs)
    names = exported.names[:exported.num_inputs]
    assert names[0] == "input0" and "attention_mask" in names
    by_name = {"input0": "sequence"}
    in_order = ["sequence"] + ["replicate"] * (len(names) - 1)
    for layout in (by_name, in_order):
        check(layer, (x,), kwargs, c.base_model_tp_plan, 2, layout,
              expect=SP_RINGS)
    with pytest.raises(ValueError, match="input_layout names .*'mask'"):
        bp.parallelize(layer, (x,), c.base_model_tp_plan, ranks=2,
                       kwargs=kwargs, input_layout={"mask": "sequence"})
    with pytest.raises(ValueError, match="has 1 entries"):
        bp.parallelize(layer, (x,), c.base_model_tp_plan, ranks=2,
                       kwargs=kwargs, input_layout=["sequence"])
    with pytest.raises(ValueError, match="layout of attention_mask"):
        bp.parallelize(layer, (x,), c.base_model_tp_plan, ranks=2,
                       kwargs=kwargs,
                       input_layout={"attention_mask": "diagonal"})


def test_every_shipped_style_is_known():
    """Every style transformers ships has an entry in braid.pytorch.STYLES
    (a new transformers with a new style fails here, not in a user's plan)."""
    from transformers.integrations import tensor_parallel
    shipped = set(tensor_parallel.ALL_PARALLEL_STYLES)
    assert shipped <= set(bp.STYLES), sorted(shipped - set(bp.STYLES))


def test_errors_name_the_parameter():
    """A plan Braid cannot apply names the parameter, not <string>:LINE."""
    torch.manual_seed(10)
    layer, x, kwargs = llama_layer()
    with pytest.raises(braid.CompileError) as info:
        # input_layernorm's weight feeds no contraction: not colwise.
        bp.parallelize(layer, (x,), {"input_layernorm": "rowwise"}, ranks=2,
                       kwargs=kwargs)
    [error] = [d for d in info.value.diagnostics if d.severity == "error"]
    assert error.file == "input_layernorm.weight" or \
        "input_layernorm.weight" in error.message
    assert "<string>" not in str(info.value)


def test_torch_mlir_failure_is_a_diagnostic():
    class Dynamic(torch.nn.Module):
        def forward(self, x):
            return x[x > 0]          # data-dependent shape: not exportable
    with pytest.raises(braid.CompileError) as info:
        bp.parallelize(Dynamic(), (torch.randn(8),), {}, ranks=2)
    assert info.value.diagnostics
    assert "torch-mlir" in info.value.diagnostics[0].message


def sparse_moe(kind, ranks, experts=4):
    """A Mixtral or Qwen3-MoE sparse block with static-shape experts
    (batched_mm), `experts` experts, top-2 routing; weights large enough
    that the routing is well separated."""
    if kind == "Mixtral":
        from transformers.models.mixtral.modeling_mixtral import \
            MixtralSparseMoeBlock as Block
        c = config("Mixtral", ranks, num_local_experts=experts,
                   num_experts_per_tok=2)
    else:
        from transformers.models.qwen3_moe.modeling_qwen3_moe import \
            Qwen3MoeSparseMoeBlock as Block
        c = config("Qwen3Moe", ranks, num_experts=experts,
                   num_experts_per_tok=2, moe_intermediate_size=32)
    c._experts_implementation = "batched_mm"
    block = Block(c).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0, 0.2)
    return c, block


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Mixtral", "Qwen3Moe"])
@pytest.mark.parametrize("parallel,layout", [("tp", "replicate"),
                                             ("ep", "replicate"),
                                             ("ep", "sequence")])
def test_sparse_moe(kind, ranks, parallel, layout):
    """Top-k routing and the experts under the shipped plans: tensor
    parallel (packed_colwise gate_up, rowwise down, moe_tp_experts) and
    expert parallel (grouped_gemm, ep_dispatch_experts), verbatim."""
    torch.manual_seed(11)
    c, block = sparse_moe(kind, ranks)
    plan = c.base_model_tp_plan if parallel == "tp" else c.base_model_ep_plan
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    _, strategies = check(block, (x,), None, plan, ranks, layout)
    kinds = [k for k, _ in strategies]
    if layout == "replicate":
        # Each rank's experts (or features), then one all-reduce of the
        # partial sums (HuggingFace's AllReduceEP for experts).
        assert kinds == ["all_reduce"]
    else:
        assert kinds == ["all_gather", "reduce_scatter"]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("parallel,layout", [("tp", "replicate"),
                                             ("ep", "sequence")])
def test_sparse_moe_symmetric(ranks, parallel, layout):
    """The MoE block's collectives by direct puts (comm=symmetric)."""
    torch.manual_seed(13)
    c, block = sparse_moe("Mixtral", ranks)
    plan = c.base_model_tp_plan if parallel == "tp" else c.base_model_ep_plan
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    tp, _ = check(block, (x,), None, plan, ranks, layout, comm="symmetric")
    records = tp.artifact.report["collectives"]
    assert records and all(r["transport"] == "symmetric" for r in records)


def moe_all_reduces(tp):
    """The all-reduces of the compiled program's dist IR: (axes, type)."""
    return re.findall(r"dist\.all_reduce(?:_start)? %\S+ on @\w+ axes = "
                      r"\[([0-9, ]*)\] reduce = sum : (tensor<[^>]*>)",
                      tp.artifact.ir("dist"))


@pytest.mark.parametrize("kind", ["Mixtral", "Qwen3Moe"])
def test_tensor_parallel_experts_reduced_after_combine(kind):
    """Under the shipped tensor-parallel plan the down projection leaves
    each expert's partial sums, [experts, tokens, hidden]; they are
    weighed by the (replicated) routing weights and summed over the
    experts, which is linear, so braid-sink-all-reduce moves the
    all-reduce after the combine: one sum of [tokens, hidden], the
    experts' count times fewer bytes (it was [4, 16, 64])."""
    torch.manual_seed(11)
    c, block = sparse_moe(kind, 2)
    x = torch.randn(2, SEQ, 64)
    tp, strategies = check(block, (x,), None, c.base_model_tp_plan, 2,
                           "replicate", overlap="off")
    assert moe_all_reduces(tp) == [("0", f"tensor<{2 * SEQ}x64xf32>")]
    assert any("all_reduce moved after" in d.message and
               "instead of 16.0 KiB" in d.message
               for d in tp.artifact.remarks), tp.artifact.remarks


@pytest.mark.parametrize("kind,ranks,ep,dtype,overlap", [
    ("Mixtral", 2, 2, torch.float32, "auto"),
    ("Mixtral", 4, 2, torch.float32, "off"),
    ("Mixtral", 4, 2, torch.bfloat16, "force"),
    ("Qwen3Moe", 4, 2, torch.float32, "auto"),
    ("Qwen3Moe", 4, 2, torch.bfloat16, "off"),
    ("Mixtral", 8, 2, torch.float32, "force"),
    ("Qwen3Moe", 8, 4, torch.float32, "off"),
])
def test_experts_and_features_on_a_2d_grid(kind, ranks, ep, dtype, overlap):
    """EP x TP: expert_parallel=ep rows of ranks each hold experts / ep
    whole experts, whose features the shipped tensor-parallel plan splits
    over the row (packed gate/up colwise, down rowwise). The down
    projection's sum over the row moves after the combine and meets the
    sum of the rows' experts: one all-reduce over both grid axes of
    [tokens, hidden]. Against the module (dense experts: exact)."""
    torch.manual_seed(11)
    c, block = sparse_moe(kind, ranks, experts=8)
    block = block.to(dtype)
    x = torch.randn(2, SEQ, 64, dtype=dtype)
    tp, strategies = check(block, (x,), None, c.base_model_tp_plan, ranks,
                           "replicate", tolerance=module_tolerance(dtype),
                           overlap=overlap, expert_parallel=ep)
    assert [k for k, _ in strategies] == ["all_reduce"], strategies
    axes = "0, 1" if ranks > ep else "0"
    element = "bf16" if dtype == torch.bfloat16 else "f32"
    reduces = set(moe_all_reduces(tp))
    if overlap == "off":
        assert reduces == {(axes, f"tensor<{2 * SEQ}x64x{element}>")}, \
            reduces
    else:
        # Split by the schedule (micro-batches, or a reduce-scatter and an
        # all-gather), never of [experts, tokens, hidden].
        assert all(a == axes and re.fullmatch(rf"tensor<\d+x64x{element}>", s)
                   for a, s in reduces), reduces
    assert tp.exported.data.grid_shape() == f"{ep}x{ranks // ep}"


@pytest.mark.parametrize("kind", ["Qwen2Moe", "DeepseekV3"])
def test_moe_decoder_layer_experts_and_features(kind):
    """Decoder layers on a 2 x 2 grid under their shipped tensor-parallel
    plans with expert_parallel=2: attention (Qwen2-MoE) and the shared
    expert split over each row of ranks as on a 1-D grid, the routed
    experts over the rows and their features over each row; DeepSeek-V3's
    routing weights come from group-limited top-k with bounds assertions
    in its gathers, and are still proven alike across the ranks, so its
    experts' sums become one."""
    torch.manual_seed(17)
    layer, plan, x, kwargs = moe_layer(kind, 4, "replicate")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # plan keys of dense layers
        tp, _ = check(layer, (x,), kwargs, plan, 4, "replicate",
                      overlap="auto", expert_parallel=2)
    routed = [r for r in moe_all_reduces(tp) if r[0] == "0, 1"]
    assert routed == [("0, 1", f"tensor<{2 * SEQ}x64xf32>")], \
        moe_all_reduces(tp)
    assert all(r[1] == f"tensor<{2 * SEQ}x64xf32>"
               for r in moe_all_reduces(tp)), moe_all_reduces(tp)


def test_mixtral_model_experts_and_features():
    """A 2-layer MixtralModel on a 2 x 2 grid (expert_parallel=2) under its
    shipped tensor-parallel plan: attention split over each row of ranks,
    each layer's experts over the rows and their features over the row.
    Each layer's MoE output is one all-reduce over both axes, the second
    layer's too: its router reads the first layer's output, a sum over the
    expert axis of values alike along the row, which the replication proof
    now follows. Against the module."""
    torch.manual_seed(3)
    c = config("Mixtral", 2, num_local_experts=4, num_experts_per_tok=2)
    c._experts_implementation = "batched_mm"
    model = transformers.MixtralModel(c).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "experts" in name or "gate" in name:
                p.normal_(0, 0.2)
    x = torch.randn(1, SEQ, 64)
    kwargs = {"inputs_embeds": x, "use_cache": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tp, _ = check(model, (), kwargs, c.base_model_tp_plan, 4,
                      "replicate", overlap="off", expert_parallel=2)
    reduces = sorted(moe_all_reduces(tp))
    assert reduces == [("0, 1", f"tensor<{SEQ}x64xf32>")] * 2 + \
        [("1", f"tensor<{SEQ}x64xf32>")] * 2, reduces


@pytest.mark.parametrize("change,message", [
    (dict(plan="ep"), "the plan gives experts.gate_up_proj style 'experts'"),
    (dict(expert_parallel=3), "expert_parallel=3 does not divide the 4 "
                              "ranks"),
    (dict(ranks=8, expert_parallel=8), "has 4 experts, which do not split "
                                       "over expert_parallel=8"),
    (dict(data_parallel=2), "expert_parallel and data_parallel together"),
    (dict(capacity_factor=1.0), "expert_parallel with capacity_factor"),
    (dict(input_layout="sequence"), "expert_parallel takes replicated "
                                    "activations"),
    (dict(expert_parallel=0), "expert_parallel must be a positive"),
])
def test_bad_expert_parallel(change, message):
    c, block = sparse_moe("Mixtral", 4)
    options = dict(ranks=4, expert_parallel=2)
    options.update(change)
    plan = (c.base_model_ep_plan if options.pop("plan", "tp") == "ep"
            else c.base_model_tp_plan)
    x = torch.randn(1, SEQ, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((ValueError, TypeError), match=message):
            bp.to_mlir(block, (x,), plan, **options)


def test_expert_parallel_needs_experts():
    c = config("Llama", 2)
    layer = decoder_layer("Llama", c).eval()
    x = torch.randn(1, SEQ, 64)
    with pytest.raises(ValueError, match="holds no HuggingFace experts"):
        bp.to_mlir(layer, (x,), c.base_model_tp_plan, 4,
                   kwargs={"position_embeddings": rotary(c, x)},
                   expert_parallel=2)


def capacity_reference(module, x, factor, kwargs=None, experts=None,
                       groups=1):
    """The module's output with each expert taking the first `factor` *
    tokens * top_k / experts tokens routed to it, in token order, and the
    rest dropped for that expert: the drops decided by a loop over the
    routing the module computes, and the experts run by HuggingFace's own
    implementation with a dropped choice's weight zeroed. `experts` is the
    experts module (the block's own by default). With `groups`, the tokens
    are that many contiguous groups, each with that capacity of its own
    (computed from the group's tokens)."""
    experts = experts if experts is not None else module.experts
    original = experts.forward

    def dropping(hidden, index, weights):
        tokens, k = index.shape
        per = tokens // groups
        capacity = min(per, max(1, math.ceil(
            factor * per * k / experts.num_experts)))
        kept = weights.clone()
        for t in range(tokens):
            if t % per == 0:
                taken = [0] * experts.num_experts
            for j in range(k):
                e = int(index[t, j])
                if taken[e] < capacity:
                    taken[e] += 1
                else:
                    kept[t, j] = 0
        return original(hidden, index, kept)

    experts.forward = dropping
    try:
        with torch.no_grad():
            out = module(x, **(kwargs or {}))
    finally:
        del experts.forward
    return out[0] if isinstance(out, tuple) else out


def skew_router(block):
    """Every token's top two experts are 0 and 1 (inputs must be
    positive): expert 0 over capacity, experts 2 and 3 empty."""
    with torch.no_grad():
        block.gate.weight.zero_()
        block.gate.weight[0] = 1.0
        block.gate.weight[1] = 0.5


@pytest.mark.parametrize("kind", ["Mixtral", "Qwen3Moe"])
@pytest.mark.parametrize("factor", [2.0, 1.0, 0.5])
@pytest.mark.parametrize("skewed", [False, True])
def test_experts_with_capacity(kind, factor, skewed):
    """The capacity implementation Braid exports (one-hot dispatch and
    combine matmuls over [experts, capacity] rows) against an independent
    loop over the routing: 4 experts, top 2, so factor 2 drops nothing and
    equals the module itself."""
    torch.manual_seed(17)
    c, block = sparse_moe(kind, 2)
    x = torch.randn(2, SEQ, 64)
    if skewed:
        skew_router(block)
        x = x.abs()
    with torch.no_grad(), bp.experts_with_capacity(block, factor):
        got = block(x)
    got = got[0] if isinstance(got, tuple) else got
    expected = capacity_reference(block, x, factor)
    assert relative_error(got, expected) <= 1e-5
    with torch.no_grad():
        plain = block(x)
    plain = plain[0] if isinstance(plain, tuple) else plain
    if factor == 2.0:
        assert relative_error(got, plain) <= 1e-5
    elif skewed:
        # Experts 0 and 1 take a half (factor 1) or a quarter of the
        # tokens routed to them: the drops show.
        assert relative_error(got, plain) > 0.1


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Mixtral", "Qwen3Moe"])
@pytest.mark.parametrize("parallel", ["ep", "tp"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_moe_with_capacity(kind, ranks, parallel, dtype):
    """capacity_factor=1: each expert computes tokens * top_k / experts
    rows (half the dense export's here), under the shipped expert-parallel
    (grouped_gemm: each rank its experts' rows) and tensor-parallel plans,
    against the module with the same tokens dropped."""
    torch.manual_seed(19)
    c, block = sparse_moe(kind, ranks)
    block = block.to(dtype)
    plan = c.base_model_tp_plan if parallel == "tp" else c.base_model_ep_plan
    x = torch.randn(2, SEQ, 64, dtype=dtype)
    tp = bp.parallelize(block, (x,), plan, ranks=ranks, capacity_factor=1.0,
                        overlap="force", check_schedule=True)
    with torch.no_grad():
        got = tp(x)
    expected = capacity_reference(block, x, 1.0)
    assert relative_error(got, expected) <= module_tolerance(dtype)
    kinds = [r["kind"] for r in tp.artifact.report["collectives"]]
    assert kinds == ["all_reduce"]


def test_moe_with_capacity_skewed():
    """Every token routed to experts 0 and 1: expert 0 drops half of them,
    experts 2 and 3 (on the other rank under expert parallelism) compute
    rows of nothing but padding."""
    torch.manual_seed(23)
    c, block = sparse_moe("Mixtral", 2)
    skew_router(block)
    x = torch.randn(2, SEQ, 64).abs()
    tp = bp.parallelize(block, (x,), c.base_model_ep_plan, ranks=2,
                        capacity_factor=1.0)
    with torch.no_grad():
        got = tp(x)
    assert relative_error(got, capacity_reference(block, x, 1.0)) <= 1e-5


@pytest.mark.parametrize("ranks", [2, 4])
def test_capacity_flops_per_rank(ranks):
    """The report's "compute" gives one rank's contraction FLOPs: the dense
    export's are exactly the router's and every local expert's on every
    token; the capacity export's experts compute C rows each, plus the
    router, the row index and the combine, which are bounded here by
    their shapes."""
    torch.manual_seed(19)
    c, block = sparse_moe("Mixtral", ranks)
    x = torch.randn(2, SEQ, 64)
    tokens, hidden, ffn = 2 * SEQ, 64, c.intermediate_size
    experts, top_k = c.num_local_experts, c.num_experts_per_tok
    local = experts // ranks
    router = 2 * tokens * hidden * experts
    per_row = 2 * 3 * hidden * ffn             # gate, up and down

    def compute(factor):
        tp = bp.parallelize(block, (x,), c.base_model_ep_plan, ranks=ranks,
                            capacity_factor=factor)
        return tp.artifact.report["compute"]

    dense = compute(None)
    assert dense["unbounded"] == 0
    assert dense["flops"] == router + local * tokens * per_row, dense
    rows = bp.expert_capacity(tokens, experts, top_k, 1.0)
    sparse = compute(1.0)
    assert sparse["unbounded"] == 0
    experts_flops = local * rows * per_row
    overhead = (router + 2 * tokens * tokens * experts      # row index
                + 2 * experts * rows * tokens               # source rows
                + 2 * tokens * local * rows * hidden)       # combine
    assert experts_flops < sparse["flops"] <= experts_flops + overhead, sparse
    assert sparse["flops"] < dense["flops"]


@pytest.mark.parametrize("factor", [0, -1.0, float("nan"), "1", True])
def test_bad_capacity_factor(factor):
    c, block = sparse_moe("Mixtral", 2)
    with pytest.raises(ValueError, match="capacity_factor must be a "
                                         "positive number"):
        bp.to_mlir(block, (torch.randn(1, SEQ, 64),), c.base_model_ep_plan,
                   2, capacity_factor=factor)


@pytest.mark.parametrize("kind,ranks,dtype,overlap", [
    ("Mixtral", 2, torch.float32, "force"),
    ("Qwen3Moe", 4, torch.float32, "auto"),
    ("Mixtral", 4, torch.bfloat16, "off"),
    ("Qwen3Moe", 2, torch.bfloat16, "force"),
])
def test_moe_dispatch_by_all_to_all(kind, ranks, dtype, overlap):
    """Sequence-split tokens and the shipped expert-parallel plan: each
    rank routes its own tokens into its rows of every expert (a capacity
    per rank's tokens), one all-to-all takes the rows to their experts'
    ranks and one brings the outputs back; nothing else moves. Against the
    module with the same tokens dropped, decided by an independent loop."""
    torch.manual_seed(19)
    c, block = sparse_moe(kind, ranks)
    block = block.to(dtype)
    x = torch.randn(1, 4 * SEQ, 64, dtype=dtype)
    tp = bp.parallelize(block, (x,), c.base_model_ep_plan, ranks=ranks,
                        input_layout="sequence", capacity_factor=1.0,
                        overlap=overlap, check_schedule=True)
    with torch.no_grad():
        got = tp(x)
    expected = capacity_reference(block, x, 1.0, groups=ranks)
    assert relative_error(got, expected) <= module_tolerance(dtype)
    records = tp.artifact.report["collectives"]
    assert [r["kind"] for r in records] == ["all_to_all", "all_to_all"]
    if overlap == "force":
        # The experts' contractions computed per peer as its rows arrive.
        assert records[0]["strategy"] == "a2a_dispatch", records
    # The per-rank capacity drops other tokens than one capacity over all.
    assert relative_error(expected, capacity_reference(block, x, 1.0)) > 0.01


def test_moe_dispatch_dropless_and_skewed():
    """Capacity experts / top_k per rank's tokens drops nothing: the
    module itself; skewed routing (every token to experts 0 and 1, experts
    2 and 3 empty) under the same dispatch."""
    torch.manual_seed(23)
    c, block = sparse_moe("Mixtral", 4)

    def dispatched(x, factor):
        tp = bp.parallelize(block, (x,), c.base_model_ep_plan, ranks=4,
                            input_layout="sequence", capacity_factor=factor)
        kinds = [r["kind"] for r in tp.artifact.report["collectives"]]
        assert kinds == ["all_to_all", "all_to_all"]
        with torch.no_grad():
            return tp(x)

    x = torch.randn(1, 4 * SEQ, 64)
    with torch.no_grad():
        assert relative_error(dispatched(x, 2.0), block(x)[0]) <= 1e-5
    skew_router(block)
    x = x.abs()
    expected = capacity_reference(block, x, 1.0, groups=4)
    assert relative_error(dispatched(x, 1.0), expected) <= 1e-5


def test_moe_capacity_sequence_tensor_parallel():
    """The tensor-parallel plan under sequence parallelism takes the
    capacity per rank's tokens too (the experts' features split, the
    tokens gathered for them and their sum scattered back)."""
    torch.manual_seed(19)
    c, block = sparse_moe("Qwen3Moe", 2)
    x = torch.randn(1, 4 * SEQ, 64)
    with pytest.warns(UserWarning, match="match nothing"):
        tp = bp.parallelize(block, (x,), c.base_model_tp_plan, ranks=2,
                            input_layout="sequence", capacity_factor=1.0)
    with torch.no_grad():
        got = tp(x)
    assert relative_error(got, capacity_reference(block, x, 1.0,
                                                  groups=2)) <= 1e-5


def test_capacity_factor_sequence_needs_one_sequence():
    """A capacity per rank's tokens needs the ranks' tokens contiguous: one
    sequence, no data axis; refused otherwise, saying so."""
    c, block = sparse_moe("Mixtral", 2)
    with pytest.raises(ValueError, match="batch of one sequence"):
        bp.parallelize(block, (torch.randn(2, SEQ, 64),), c.base_model_ep_plan,
                       2, input_layout="sequence", capacity_factor=1.0)
    with pytest.raises(ValueError, match="no data_parallel"):
        bp.parallelize(block, (torch.randn(2, SEQ, 64),), c.base_model_tp_plan,
                       4, input_layout="sequence", capacity_factor=1.0,
                       data_parallel=2)


def deepseek_v3(ranks):
    """A small DeepSeek-V3 config: MLA attention, 8 routed experts in 2
    groups (group-limited top 2 of the top group), one shared expert,
    sigmoid scores with their correction bias, routed scaling."""
    c = transformers.DeepseekV3Config(
        hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
        num_attention_heads=4 if ranks <= 2 else 8, num_key_value_heads=4,
        n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
        n_shared_experts=1, first_k_dense_replace=0, num_hidden_layers=1,
        vocab_size=128, q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8,
        qk_nope_head_dim=8, v_head_dim=16, max_position_embeddings=64,
        routed_scaling_factor=2.5)
    c._attn_implementation = "sdpa"
    return c


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_deepseek_v3_decoder_layer(ranks, layout):
    """A DeepSeek-V3 decoder layer under the plan transformers ships (the
    experts' packed gate_up colwise and down rowwise, the shared expert
    colwise/rowwise; MLA attention replicated): its router's group mask is
    a scatter (tm_tensor.scatter in torch-mlir's export, which Braid
    decomposes) and its top-k indices are read without their values (a
    bare result that upstream partitioning crashed on). Against the
    module; the experts exported dense. The plan's keys for dense layers
    (layers.*.mlp.gate_proj, ...) match nothing in a MoE layer: skipped
    with one warning that lists them, as transformers skips them."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
        DeepseekV3DecoderLayer, DeepseekV3RotaryEmbedding)
    torch.manual_seed(14)
    c = deepseek_v3(ranks)
    layer = DeepseekV3DecoderLayer(c, 0).eval()
    with torch.no_grad():  # the router and experts start uninitialized
        for p in layer.mlp.parameters():
            p.normal_(0, 0.2)
        layer.mlp.gate.e_score_correction_bias.normal_(0, 0.1)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    positions = torch.arange(SEQ).unsqueeze(0).expand(x.shape[0], -1)
    tables = DeepseekV3RotaryEmbedding(c)(x, positions)
    with pytest.warns(UserWarning, match=r"plan keys \['layers\.\*\.mlp\."
                      r"gate_proj', 'layers\.\*\.mlp\.up_proj', 'layers"
                      r"\.\*\.mlp\.down_proj'\] match nothing"):
        _, strategies = check(layer, (x,), {"position_embeddings": tables},
                              c.base_model_tp_plan, ranks, layout)
    kinds = sorted({k for k, _ in strategies})
    assert kinds == (["all_reduce"] if layout == "replicate"
                     else ["all_gather", "reduce_scatter"]), strategies


def moe_layer(kind, ranks, layout):
    """An MoE decoder layer of `kind` (Qwen2Moe, GptOss, DeepseekV3) with
    4 or 8 experts, top 2, its router and experts initialized; returns the
    layer, its shipped plan (gpt-oss has only the expert-parallel one),
    an input for `layout` and the layer's keyword arguments."""
    if kind == "DeepseekV3":
        c = deepseek_v3(ranks)
        plan = c.base_model_tp_plan
    elif kind == "Qwen2Moe":
        c = config(kind, ranks, num_experts=4, num_experts_per_tok=2,
                   moe_intermediate_size=32, shared_expert_intermediate_size=64)
        plan = c.base_model_tp_plan
    else:
        c = config(kind, ranks, num_local_experts=4, num_experts_per_tok=2,
                   sliding_window=None, layer_types=["full_attention"] * 2)
        plan = c.base_model_ep_plan
    module = {"DeepseekV3": "deepseek_v3", "Qwen2Moe": "qwen2_moe",
              "GptOss": "gpt_oss"}[kind]
    models = __import__(f"transformers.models.{module}.modeling_{module}",
                        fromlist=["_"])
    layer = getattr(models, kind + "DecoderLayer")(c, 0).eval()
    with torch.no_grad():  # the router and experts start uninitialized
        for p in layer.mlp.parameters():
            p.normal_(0, 0.2)
        if kind == "DeepseekV3":
            layer.mlp.gate.e_score_correction_bias.normal_(0, 0.1)
    x = torch.randn(1 if layout == "sequence" else 2, SEQ, 64)
    positions = torch.arange(SEQ).unsqueeze(0).expand(x.shape[0], -1)
    tables = getattr(models, kind + "RotaryEmbedding")(c)(x, positions)
    return layer, plan, x, {"position_embeddings": tables}


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Qwen2Moe", "GptOss"])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_moe_decoder_layer(kind, ranks, layout):
    """MoE decoder layers of two more families under the plans
    transformers ships: Qwen2-MoE (tensor parallel: packed experts, and a
    shared expert behind a sigmoid gate) and gpt-oss (expert parallel, its
    only plan: grouped_gemm experts with biases, attention sinks, clamped
    SwiGLU). The biases are split by experts and added to each expert's
    product (braid-apply-parallel-plan follows that add). Against the
    module; the experts exported dense."""
    torch.manual_seed(17)
    layer, plan, x, kwargs = moe_layer(kind, ranks, layout)
    _, strategies = check(layer, (x,), kwargs, plan, ranks, layout)
    kinds = {k for k, _ in strategies}
    assert kinds == ({"all_reduce"} if layout == "replicate"
                     else {"all_gather", "reduce_scatter"}), strategies


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("kind", ["Qwen2Moe", "GptOss", "DeepseekV3"])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_moe_layers_with_capacity(kind, ranks, layout):
    """Decoder layers of three more families with capacity_factor=1 under
    their shipped plans: Qwen2-MoE (experts tensor parallel, a gated
    shared expert), gpt-oss (expert parallel, biases, clamped SwiGLU) and
    DeepSeek-V3 (group-limited sigmoid routing, a shared expert, routed
    scaling), tokens replicated or split along the sequence (a capacity
    per rank's tokens; gpt-oss's expert-parallel experts then dispatched
    by all-to-all), against the module with the same tokens dropped."""
    torch.manual_seed(29)
    layer, plan, x, kwargs = moe_layer(kind, ranks, layout)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # plan keys of dense layers
        tp = bp.parallelize(layer, (x,), plan, ranks=ranks,
                            input_layout=layout, kwargs=kwargs,
                            capacity_factor=1.0, overlap="force",
                            check_schedule=True)
    with torch.no_grad():
        got = tp(x, **kwargs)
    got = got[0] if isinstance(got, tuple) else got
    groups = ranks if layout == "sequence" else 1
    expected = capacity_reference(layer, x, 1.0, kwargs, layer.mlp.experts,
                                  groups=groups)
    assert relative_error(got, expected) <= module_tolerance(torch.float32)
    if kind == "GptOss" and layout == "sequence":
        kinds = [r["kind"] for r in tp.artifact.report["collectives"]]
        assert kinds.count("all_to_all") == 2, kinds


@pytest.mark.parametrize("case", ["mixtral-dense", "mixtral-capacity",
                                  "qwen3moe-capacity", "deepseek-v3-layer"])
def test_moe_on_eight_ranks(case):
    """Eight ranks (issue 41's largest grid): Mixtral and Qwen3-MoE sparse
    blocks with 8 experts under their expert-parallel plans (one expert per
    rank), dense and with capacity_factor=1, and a DeepSeek-V3 decoder
    layer (8 routed experts, group-limited routing) under its shipped
    tensor-parallel plan, against the module."""
    torch.manual_seed(31)
    if case == "deepseek-v3-layer":
        layer, plan, x, kwargs = moe_layer("DeepseekV3", 8, "replicate")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # plan keys of dense layers
            _, strategies = check(layer, (x,), kwargs, plan, 8, "replicate")
        assert {k for k, _ in strategies} == {"all_reduce"}, strategies
        return
    c, block = sparse_moe("Qwen3Moe" if case.startswith("qwen3") else
                          "Mixtral", 8, experts=8)
    x = torch.randn(2, SEQ, 64)
    factor = 1.0 if case.endswith("capacity") else None
    tp = bp.parallelize(block, (x,), c.base_model_ep_plan, ranks=8,
                        capacity_factor=factor, overlap="force",
                        check_schedule=True)
    with torch.no_grad():
        got = tp(x)
        expected = (capacity_reference(block, x, factor) if factor
                    else block(x))
    got = got[0] if isinstance(got, tuple) else got
    expected = expected[0] if isinstance(expected, tuple) else expected
    assert relative_error(got, expected) <= module_tolerance(torch.float32)
    kinds = [r["kind"] for r in tp.artifact.report["collectives"]]
    assert kinds == ["all_reduce"], kinds


def test_scatter_decomposition():
    """scatter (src and value forms) as the export decomposes it, against
    torch's own: repeated indices (the last one wins, as torch's CPU
    kernel writes), an index smaller than the input in the other
    dimensions, every dimension, booleans, integers and bf16."""
    table = bp._decompositions()
    torch.manual_seed(15)
    for shape, dim, index_shape in [((4, 8), 1, (4, 3)), ((4, 8), 0, (2, 8)),
                                    ((3, 5, 6), 1, (2, 2, 4)),
                                    ((4, 8), -1, (2, 6)), ((6,), 0, (9,))]:
        x = torch.randn(shape)
        index = torch.randint(0, shape[dim], index_shape)
        src = torch.randn(index_shape)
        got = table[torch.ops.aten.scatter.src](x, dim, index, src)
        assert torch.equal(got, x.scatter(dim, index, src)), (shape, dim)
        got = table[torch.ops.aten.scatter.value](x, dim, index, 1.5)
        assert torch.equal(got, x.scatter(dim, index, 1.5)), (shape, dim)
        for dtype in (torch.bool, torch.int64, torch.bfloat16):
            y, other = (x > 0).to(dtype), (src > 0).to(dtype)
            got = table[torch.ops.aten.scatter.src](y, dim, index, other)
            assert torch.equal(got, y.scatter(dim, index, other)), dtype


@pytest.mark.parametrize("parallel", ["tensor", "context"])
def test_mixtral_decoder_layer(parallel):
    """Tensor parallel under the shipped plan; context parallel (an empty
    plan, the sequence split): the experts run on each rank's tokens and
    attention is a ring."""
    torch.manual_seed(12)
    c = config("Mixtral", 2, num_local_experts=4, num_experts_per_tok=2)
    c._experts_implementation = "batched_mm"
    layer = decoder_layer("Mixtral", c).eval()
    with torch.no_grad():  # the router and experts start uninitialized
        for p in layer.mlp.parameters():
            p.normal_(0, 0.2)
    if parallel == "tensor":
        x = torch.randn(2, SEQ, 64)
        _, strategies = check(layer, (x,),
                              {"position_embeddings": rotary(c, x)},
                              c.base_model_tp_plan, 2, "replicate")
        assert [k for k, _ in strategies] == ["all_reduce", "all_reduce"]
    else:
        x = torch.randn(1, SEQ, 64)
        _, strategies = check(layer, (x,),
                              {"position_embeddings": rotary(c, x)},
                              {}, 2, "sequence")
        assert strategies == [("all_gather", "ring_attention")] * 2
