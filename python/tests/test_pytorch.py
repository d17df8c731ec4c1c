"""The PyTorch front door: torch modules exported with torch-mlir,
parallelized by plan on 4 CPU ranks, compared with torch itself. Skipped
where torch and torch-mlir are not installed (scripts/setup-frontends.sh
installs them; scripts/test.sh runs this file in that venv)."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import braid  # noqa: E402
import braid.pytorch as bp  # noqa: E402
from braid.dtypes import TOLERANCE  # noqa: E402


class GPTMLP(nn.Module):
    def __init__(self, hidden=64, ffn=256):
        super().__init__()
        self.up = nn.Linear(hidden, ffn)
        self.down = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class LlamaMLP(nn.Module):
    def __init__(self, hidden=64, ffn=128):
        super().__init__()
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


PLANS = {
    GPTMLP: {"up": "colwise", "down": "rowwise"},
    LlamaMLP: {"gate": "colwise", "up": "colwise", "down": "rowwise"},
}


@pytest.mark.parametrize("model_class", [GPTMLP, LlamaMLP])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_parallel_mlp_matches_torch(model_class, layout):
    torch.manual_seed(0)
    model = model_class().eval()
    x = torch.randn(32, 64)
    tp = bp.parallelize(model, (x,), PLANS[model_class], ranks=4,
                        input_layout=layout, overlap="force",
                        check_schedule=True)
    # Partitioned per the plan: each rank holds a quarter of every weight.
    weight_shapes = [a.shape for a in tp.artifact.arguments[1:]]
    full_shapes = [tuple(p.shape) for _, p in model.named_parameters()]
    for name, got, full in zip(tp.exported.names[1:], weight_shapes, full_shapes):
        if name.endswith("bias") and name.startswith("down"):
            assert got == full
        else:
            assert sum(g != f for g, f in zip(got, full)) == 1, (name, got, full)
    kinds = sorted(c["kind"] for c in tp.artifact.report["collectives"])
    if layout == "sequence":
        assert "reduce_scatter" in kinds and "all_gather" in kinds
    else:
        assert kinds == ["all_reduce"]
    assert all(c["decision"] == "fused" for c in tp.artifact.report["collectives"])

    with torch.no_grad():
        expected = model(x)
        got = tp(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)

    # New weights, same compiled program.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(0.5)
        torch.testing.assert_close(tp(x), model(x), rtol=1e-4, atol=1e-4)


def test_pytorch_parallel_styles():
    dtp = pytest.importorskip("torch.distributed.tensor.parallel")
    placement = pytest.importorskip("torch.distributed.tensor")
    torch.manual_seed(1)
    model = GPTMLP().eval()
    x = torch.randn(16, 64)
    plan = {"up": dtp.ColwiseParallel(input_layouts=placement.Shard(0)),
            "down": dtp.RowwiseParallel(output_layouts=placement.Shard(0))}
    tp = bp.parallelize(model, (x,), plan, ranks=4)
    assert tp.output_layout == "sequence"
    with torch.no_grad():
        torch.testing.assert_close(tp(x), model(x), rtol=1e-4, atol=1e-4)


def test_plan_errors():
    model = GPTMLP()
    x = torch.randn(8, 64)
    with pytest.raises(ValueError, match="unknown parallel style 'diagonal'"):
        bp.parallelize(model, (x,), {"up": "diagonal"})
    with pytest.raises(ValueError, match="no parameters"):
        bp.parallelize(model, (x,), {"upp": "colwise"})
    # 4 ranks cannot split 8 tokens 3 ways: a compile error with a location.
    with pytest.raises(braid.CompileError):
        bp.parallelize(GPTMLP(hidden=64, ffn=90), (x,),
                       {"up": "colwise", "down": "rowwise"}, ranks=4)


@pytest.mark.parametrize("ranks, error, message", [
    (0, ValueError, "ranks must be a positive integer, not 0"),
    (-1, ValueError, "ranks must be a positive integer, not -1"),
    (2.5, TypeError, "ranks must be an integer, not float"),
    ("4", TypeError, "ranks must be an integer, not str"),
    (True, TypeError, "ranks must be an integer, not bool"),
])
@pytest.mark.parametrize("entry", [bp.parallelize, bp.to_mlir])
def test_bad_ranks_are_exceptions(entry, ranks, error, message):
    """ranks=0 once killed the process with SIGFPE (issue 34): the compiler
    divided by the size of a 0-rank grid."""
    x = torch.randn(8, 64)
    with pytest.raises(error, match=message):
        entry(GPTMLP(), (x,), PLANS[GPTMLP], ranks=ranks)


def test_bad_ranks_end_in_an_exception_in_a_child():
    """The reported case as a user ran it: the process must live."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.dirname(__file__))!r})
        import torch, braid.pytorch as bp
        layer = torch.nn.Linear(64, 64)
        try:
            bp.parallelize(layer, (torch.randn(8, 64),), {{}}, ranks=0)
        except ValueError as error:
            print("raised:", error)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert "raised: ranks must be a positive integer" in result.stdout


@pytest.mark.parametrize("build, message", [
    (lambda: (GPTMLP(), torch.randn(0, 64)), r"input0 has shape \(0, 64\)"),
    (lambda: (GPTMLP(hidden=0), torch.randn(8, 0)), r"input0 has shape \(8, 0\)"),
    (lambda: (GPTMLP(ffn=0), torch.randn(8, 64)), r"up.weight has shape \(0, 64\)"),
])
def test_zero_sized_tensors_are_refused(build, message):
    """Zero-sized dimensions crashed the compiler (SIGFPE in memory-bound
    fusion) or aborted every rank at run time."""
    model, x = build()
    with pytest.raises(ValueError, match=message + ".*zero-sized dimensions"):
        bp.parallelize(model, (x,), PLANS[GPTMLP], ranks=4)


class Double(nn.Module):
    def forward(self, x):
        return x * 2.0


def test_bad_calls_of_a_parallel_module():
    torch.manual_seed(2)
    model = GPTMLP().eval()
    x = torch.randn(16, 64)
    tp = bp.parallelize(model, (x,), PLANS[GPTMLP], ranks=4)
    with pytest.raises(ValueError, match=r"compiled for 1 tensor inputs "
                                         r"\(input0\); got 2"):
        tp(x, x)
    with pytest.raises(ValueError, match="got 0"):
        tp()
    with pytest.raises(ValueError, match="input0: cannot split shape"):
        tp(torch.randn(8, 64))
    with pytest.raises(ValueError, match="has dtype complex64"):
        tp(torch.randn(16, 64, dtype=torch.complex64))
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        tp(x, timeout=float("nan"))
    # A transposed (non-contiguous) input and a float64 one are values as
    # any other.
    xt = torch.randn(64, 16).t()
    with torch.no_grad():
        torch.testing.assert_close(tp(xt), model(xt), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(tp(x.double()), model(x), rtol=1e-4,
                                   atol=1e-4)


def test_scalar_input_stays_a_scalar():
    """A 0-d input was made 1-d on the way to the ranks (and refused), and
    a 0-d result came back 1-d."""
    x = torch.tensor(1.5)
    tp = bp.parallelize(Double(), (x,), {}, ranks=2)
    got = tp(x)
    assert got.shape == () and got.item() == 3.0


class SDPA(nn.Module):
    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _context_parallel(text, ranks, local, full):
    """torch-mlir's export of attention over the whole sequence for k and v,
    made context parallel: k and v (arguments 1 and 2) become this rank's
    block of the sequence, all-gathered along it before use."""
    import re
    open_at = text.index("func.func @main(") + len("func.func @main(")
    close_at = text.index(") -> ", open_at)
    args = text[open_at:close_at]
    for name in ("%arg1", "%arg2"):
        args = args.replace(f"{name}: {full}", f"{name}: {local}")
    start = text.index("{", close_at) + 1
    body = re.sub(r"%arg([12])\b", r"%gathered\1", text[start:])
    gathers = "".join(
        f"\n    %gathered{i} = shard.all_gather %arg{i} on @cp grid_axes = [0] "
        f"gather_axis = 2 : {local} -> {full}" for i in (1, 2))
    prefix = text[:open_at] + args + text[close_at:start]
    prefix = prefix.replace("module {", f"module {{\n  shard.grid @cp(shape = {ranks})", 1)
    return prefix + gathers + body


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("masked,dtype", [(False, "f32"), (True, "f32"),
                                          (True, "bf16")])
def test_sdpa_context_parallel_is_ring_attention(ranks, masked, dtype):
    """torch 2.x's scaled_dot_product_attention as torch-mlir exports it
    (k transposed, each product a batch matmul between reshapes, exp(s -
    max) as two ops, the safe softmax's -inf row flag and select), with k
    and v gathered along the sequence: ring attention, against torch over
    the whole sequence. The additive mask is causal with one row masked
    whole, which the safe softmax gives zeros. bf16 runs torch's bf16
    program and is compared with f32 attention of the same inputs."""
    torch.manual_seed(ranks)
    heads, tokens, dim = 2, 8 * ranks, 16
    local = tokens // ranks
    kind = torch.bfloat16 if dtype == "bf16" else torch.float32
    q, k, v = (torch.randn(1, heads, tokens, dim).to(kind) for _ in range(3))
    mask = None
    if masked:
        future = torch.arange(tokens)[None, :] > torch.arange(tokens)[:, None]
        mask = torch.zeros(tokens, tokens).masked_fill(future, float("-inf"))
        mask[3, :] = float("-inf")
    args = (q[:, :, :local], k, v) + ((mask[:local],) if masked else ())
    exported = bp.export(SDPA().eval(), args)
    if masked:
        args = args[:3] + (mask[:local].to(kind),)
    full = f"tensor<1x{heads}x{tokens}x{dim}x{dtype}>"
    block = f"tensor<1x{heads}x{local}x{dim}x{dtype}>"
    text = _context_parallel(exported.text, ranks, block, full)
    artifact = braid.compile(text, overlap="force", check_schedule=True)
    strategies = [c.get("strategy") for c in artifact.report["collectives"]]
    assert strategies == ["ring_attention", "ring_attention"], strategies
    with torch.no_grad():
        expected = F.scaled_dot_product_attention(q.float(), k.float(),
                                                  v.float(), attn_mask=mask)
    if masked:
        assert torch.all(expected[:, :, 3] == 0)
    blocks = lambda t: [t[:, :, r * local:(r + 1) * local].float().numpy()  # noqa: E731
                        for r in range(ranks)]
    inputs = [[qb, kb, vb] for qb, kb, vb in zip(blocks(q), blocks(k), blocks(v))]
    if masked:
        for r, row in enumerate(inputs):
            row.append(mask[r * local:(r + 1) * local].numpy())
    outputs = artifact.run(inputs)
    got = torch.cat([torch.from_numpy(o[0]) for o in outputs], dim=2)
    tolerance = TOLERANCE["attention"][dtype]
    torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)


class SDPAOptions(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                              **self.options)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["causal", "bool_mask", "gqa_scale"])
def test_reduced_precision_sdpa(dtype, case):
    """bf16 and f16 attention exported as torch's CPU kernel computes it:
    f32 scores and softmax, the probabilities rounded to the input type
    for their product with v (on bf16 operands, no f32 GEMM left), against
    torch's own kernel on the module: is_causal, a boolean mask with a row
    masked whole (zeros, as torch gives), grouped-query heads with an
    explicit scale; 2 ranks, each the whole attention."""
    torch.manual_seed(7)
    tokens, dim = 24, 16
    kv_heads = 2 if case == "gqa_scale" else 4
    q = torch.randn(1, 4, tokens, dim).to(dtype)
    k, v = (torch.randn(1, kv_heads, tokens, dim).to(dtype) for _ in range(2))
    options = {"causal": {"is_causal": True}, "bool_mask": {},
               "gqa_scale": {"enable_gqa": True, "scale": 0.3}}[case]
    module = SDPAOptions(**options).eval()
    args = (q, k, v)
    if case == "bool_mask":
        keep = torch.rand(tokens, tokens) > 0.3
        keep[5, :] = False
        args = args + (keep,)
    tp = bp.parallelize(module, args, {}, ranks=2)
    remarks = [r.message for r in tp.artifact.remarks]
    assert not [m for m in remarks if "left in f32" in m], remarks
    with torch.no_grad():
        expected = module(*args)
        got = tp(*args)
    if case == "bool_mask":
        assert torch.all(got[:, :, 5] == 0)
    tolerance = TOLERANCE["attention"][
        "bf16" if dtype == torch.bfloat16 else "f16"]
    torch.testing.assert_close(got.float(), expected.float(), rtol=tolerance,
                               atol=tolerance)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_job(ranks, script, *args):
    """Runs test/lib/SCRIPT under mpirun on `ranks` ranks with this Python;
    returns its output, asserting that the job succeeded."""
    result = subprocess.run(
        [os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", str(ranks),
         sys.executable, os.path.join(ROOT, "test", "lib", script), *args],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_program_takes_torch_tensors(tmp_path, dtype):
    """braid.program under mpirun on 2 ranks with torch tensors: f32 and
    bf16 CPU tensors passed as they are, out= tensors filled, the same
    results as from numpy arrays (test/lib/program_check.py asserts it)."""
    out = run_job(2, "program_check.py", str(tmp_path), "--dtype", dtype,
                  "--torch", "--calls", "30")
    assert "OK torch torch." in out, out


@pytest.mark.parametrize("ranks,module,parallel,dtype", [
    (2, "layer", "tp", "f32"), (2, "layer", "sp", "bf16"),
    (4, "layer", "sp", "f32"), (4, "layer", "tp", "bf16"),
    (2, "model", "tp", "f32"), (4, "model", "tp", "bf16")])
def test_compile_backend(tmp_path, ranks, module, parallel, dtype):
    """torch.compile(model, backend="braid") under mpirun on a Llama decoder
    layer (tensor and sequence parallel) and a whole 2-layer LlamaModel
    from token ids (tensor parallel; its mask path's repeat_kv sizes are
    local constants the backend refits) parallelized by PyTorch's own
    parallelize_module (DTensor over gloo): one graph, run by Braid in
    process on every call, within the module tolerance of eager DTensor,
    repeated calls bit-identical (test/lib/compile_backend_check.py)."""
    out = run_job(ranks, "compile_backend_check.py", str(tmp_path),
                  "--module", module, "--parallel", parallel, "--dtype", dtype)
    assert "1 graph(s) run by Braid in process" in out, out
    assert f"OK compiled by Braid: {module} {parallel} {dtype}" in out, out


@pytest.mark.parametrize("parallel", ["tp", "sp"])
def test_compile_backend_on_mesh_rows(tmp_path, parallel):
    """A (2, 2) device mesh ("dp", "tp") and parallelize_module on
    mesh["tp"], as torchtitan writes dp x tp: each row of two ranks is its
    own tensor- (or sequence-) parallel group with its own input; the
    backend runs each row's program on a communicator of the row's ranks
    split from MPI's world, against eager DTensor on every rank."""
    out = run_job(4, "compile_backend_check.py", str(tmp_path), "--mesh",
                  "2d", "--parallel", parallel, "--calls", "5")
    assert "1 graph(s) run by Braid in process" in out, out
    assert (f"OK compiled by Braid: layer {parallel} f32, 2d mesh, 2 ranks "
            "per program") in out, out


@pytest.mark.parametrize("kind,reason", [
    ("local", "the graph's local code is not the unpartitioned computation"),
    ("op", "Dialect `tm_tensor' not found for custom op 'tm_tensor.sort'"),
    ("grad", "the graph is called with gradients enabled")])
def test_compile_backend_falls_back(tmp_path, kind, reason):
    """A graph the backend cannot take runs eagerly with one warning that
    says why, on every rank, and gives eager's result: local code that
    reduces over a sharded dimension (caught by the first call's check
    against eager), an op Braid does not compile (rank 0's compile error,
    which the other ranks name too) and a call with gradients enabled (the
    backend compiles inference; eager keeps the autograd graph)."""
    out = run_job(2, "compile_backend_check.py", str(tmp_path),
                  "--unsupported", kind, "--calls", "3")
    assert "OK falls back: braid: torch.compile runs this graph eagerly" in out, out
    assert reason in out, out


@pytest.mark.parametrize("ranks,module,layout,dtype", [
    (2, "layer", "sequence", "f32"),
    (4, "layer", "replicate", "bf16"),
    (2, "model", "sequence", "bf16"),
    (4, "model", "replicate", "f32"),
    (4, "moe", "replicate", "f32"),
])
def test_per_rank_module(tmp_path, ranks, module, layout, dtype):
    """parallelize(..., per_rank=True) under mpirun: a Llama decoder layer
    and a 2-layer LlamaModel under the shipped plan, and a Mixtral MoE
    block on a 2 x 2 grid (expert_parallel=2: each row of ranks its
    experts, their features split over the row), each rank calling its
    RankModule in process with its part of the input, against the module
    (test/lib/rank_module_check.py asserts tolerance, bit-identical
    repeats, flat resident memory, and only the rank's part of the weights
    kept)."""
    out = run_job(ranks, "rank_module_check.py", str(tmp_path), "--module",
                  module, "--layout", layout, "--dtype", dtype, "--calls", "50")
    assert f"rank 0 of {ranks}>" in out and "OK keeps" in out, out
