"""Training steps through the PyTorch front door (braid.pytorch.train_step):
the loss and every parameter's gradient of an MLP and of HuggingFace Llama
decoder layers with their shipped plan, tensor and sequence parallel, on 2
and 4 CPU ranks, against torch autograd on the unpartitioned module. Runs in
the frontends venv (scripts/setup-frontends.sh)."""
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import braid.pytorch as bp  # noqa: E402
from braid.compiler import CompileError  # noqa: E402
from braid.training import assemble  # noqa: E402

F32_TOLERANCE = 1e-4


class MLP(torch.nn.Module):
    def __init__(self, hidden=64, ffn=256, bias=True, rms=False):
        super().__init__()
        self.norm = torch.nn.RMSNorm(hidden) if rms else torch.nn.LayerNorm(
            hidden)
        self.up = torch.nn.Linear(hidden, ffn, bias=bias)
        self.down = torch.nn.Linear(ffn, hidden, bias=bias)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def mse(out, target):
    if isinstance(out, tuple):
        out = out[0]
    return torch.nn.functional.mse_loss(out.float(), target.float())


def reference(module, args, kwargs, loss_fn, targets):
    """The loss and gradients torch autograd gives on the whole module."""
    module.zero_grad()
    loss = loss_fn(module(*args, **(kwargs or {})), *targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in module.named_parameters()
             if p.requires_grad}
    module.zero_grad()
    return loss.detach(), grads


def relative_error(got, expected):
    got, expected = got.double(), expected.double()
    scale = expected.abs().max().item() or 1.0
    return (got - expected).abs().max().item() / scale


def check_step(module, args, plan, ranks, layout="replicate", kwargs=None,
               tolerance=F32_TOLERANCE, overlap="force", **options):
    """Compiles and runs one step; compares loss and every gradient with
    autograd's; returns the step."""
    targets = (torch.randn_like(args[0], dtype=torch.float32),)
    step = bp.train_step(module, args, plan, loss_fn=mse, targets=targets,
                         ranks=ranks, input_layout=layout, kwargs=kwargs,
                         overlap=overlap, check_schedule=True, **options)
    loss, grads = step(*args, targets=targets, **(kwargs or {}))
    expected_loss, expected = reference(module, args, kwargs, mse, targets)
    assert loss.shape == ()
    assert relative_error(loss, expected_loss) <= tolerance
    assert sorted(grads) == sorted(expected)
    for name, grad in grads.items():
        assert grad.shape == expected[name].shape, name
        assert grad.dtype == expected[name].dtype, name
        assert relative_error(grad, expected[name]) <= tolerance, name
    return step


def collectives(step):
    return [(c["kind"], c["strategy"])
            for c in step.artifact.report["collectives"]]


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_mlp_tensor_parallel(ranks, overlap):
    torch.manual_seed(0)
    module = MLP()
    x = torch.randn(16, 64)
    step = check_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                      ranks, overlap=overlap)
    kinds = [k for k, _ in collectives(step)]
    # The forward's all-reduce of down's partial sums, and the backward's
    # of the input gradient up's split weight leaves partial (which the
    # norm's gradient needs whole): Megatron's two.
    assert kinds == ["all_reduce", "all_reduce"], kinds
    if overlap == "force":
        assert all(strategy for _, strategy in collectives(step))


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_mlp_sequence_parallel(ranks, overlap):
    torch.manual_seed(0)
    # RMSNorm (Llama's): torch-mlir computes LayerNorm's variance in f64,
    # which partitioning gathers, forward-only too.
    module = MLP(rms=True)
    x = torch.randn(1, 16, 64)
    step = check_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                      ranks, layout="sequence", overlap=overlap)
    kinds = sorted(k for k, _ in collectives(step))
    # The norm's weight sees each rank's tokens: its gradient is one
    # all-reduce of a hidden-sized vector, the only all-reduce.
    assert kinds.count("all_reduce") == 1, kinds
    if overlap == "off":
        # Forward: the gather before up, the reduce-scatter after down;
        # backward: the output gradient gathered for down's, up's input
        # gradient reduce-scattered back to the sequence split. (Forced
        # schedules gather once per consumer, which the report lists.)
        assert kinds == (["all_gather"] * 2 + ["all_reduce"] +
                         ["reduce_scatter"] * 2), kinds
    else:
        assert all(strategy for kind, strategy in collectives(step)
                   if kind == "reduce_scatter"), collectives(step)


def test_mlp_gradients_laid_out_like_parameters():
    torch.manual_seed(1)
    module = MLP()
    x = torch.randn(16, 64)
    step = check_step(module, (x,), {"up": "colwise", "down": "rowwise"}, 2)
    results = step.artifact.results
    by_name = dict(zip(step.grad_names, results[1:]))
    assert tuple(by_name["up.weight"].shape) == (128, 64)
    assert tuple(by_name["down.weight"].shape) == (64, 128)
    assert tuple(by_name["norm.weight"].shape) == (64,)


def test_frozen_parameters_get_no_gradient():
    torch.manual_seed(2)
    module = MLP()
    module.norm.weight.requires_grad_(False)
    module.norm.bias.requires_grad_(False)
    x = torch.randn(16, 64)
    step = check_step(module, (x,), {"up": "colwise", "down": "rowwise"}, 2)
    assert "norm.weight" not in step.grad_names


def test_repeated_steps_follow_the_parameters():
    """A step reads the module's current parameters: after an SGD update
    by hand, the next step's gradients are the updated module's."""
    torch.manual_seed(3)
    module = MLP()
    x = torch.randn(16, 64)
    target = torch.randn(16, 64)
    step = bp.train_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                         loss_fn=mse, targets=(target,), ranks=2)
    for _ in range(3):
        loss, grads = step(x, targets=(target,))
        expected_loss, expected = reference(module, (x,), None, mse,
                                            (target,))
        assert relative_error(loss, expected_loss) <= F32_TOLERANCE
        for name, grad in grads.items():
            assert relative_error(grad, expected[name]) <= F32_TOLERANCE
        with torch.no_grad():
            for name, parameter in module.named_parameters():
                parameter -= 0.5 * grads[name]
    assert loss < expected_loss + 1  # the loss moved and stayed finite


def llama(ranks, dtype=torch.float32, attn="sdpa"):
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer, LlamaRotaryEmbedding)
    heads = 4 if ranks <= 2 else 8
    c = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                 num_attention_heads=heads,
                                 num_key_value_heads=heads // 2,
                                 head_dim=64 // heads, vocab_size=128,
                                 max_position_embeddings=64)
    # SDPA is HF's default; its fused CPU kernel has no backward torch-mlir
    # lowers, so the step traces its math form.
    c._attn_implementation = attn
    layer = LlamaDecoderLayer(c, 0).to(dtype)
    return c, layer, LlamaRotaryEmbedding(c)


@pytest.mark.parametrize("ranks,attn", [(2, "sdpa"), (4, "sdpa"),
                                        (2, "eager")])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
def test_llama_decoder_layer(ranks, attn, layout):
    torch.manual_seed(4)
    c, layer, rotary = llama(ranks, attn=attn)
    x = torch.randn(1 if layout == "sequence" else 2, 8, 64)
    positions = torch.arange(8).unsqueeze(0).expand(x.shape[0], -1)
    kwargs = {"position_embeddings": rotary(x, positions)}
    step = check_step(layer, (x,), c.base_model_tp_plan, ranks, layout,
                      kwargs)
    kinds = [k for k, _ in collectives(step)]
    if layout == "replicate":
        # After o_proj and down_proj, and the input gradients of q/k/v and
        # of gate/up, each summed before one all-reduce: Megatron's four.
        assert kinds == ["all_reduce"] * 4, kinds
    else:
        # Input gradients go back to the sequence split by reduce-scatters
        # (two in the forward, at least two in the backward), never by an
        # all-reduce of the whole activations.
        assert kinds.count("reduce_scatter") >= 4, kinds
        assert "all_reduce" not in kinds, kinds
        # The backward's too: the output gradients a row-parallel layer's
        # backward gathers pipelined with the contractions that consume
        # them, the input gradients' reduce-scatters with the data
        # gradients' (two of each are the forward's).
        rings = [s.removesuffix("_bidir") for _, s in collectives(step) if s]
        assert rings.count("ring_ag_matmul") > 2, rings
        assert rings.count("ring_matmul_rs") > 2, rings
    assert all(strategy for kind, strategy in collectives(step)
               if kind != "all_gather"), collectives(step)


def test_backward_async_names_its_compute():
    """Under auto, each collective of the step started early and waited
    late (the backward's gathers of output gradients among them) says in
    the report what it runs under: the longest op between its start and
    its wait (docs/rationale/training.md)."""
    torch.manual_seed(4)
    c, layer, rotary = llama(2)
    x = torch.randn(1, 16, 64)
    kwargs = {"position_embeddings": rotary(x, torch.arange(16)[None])}
    step = check_step(layer, (x,), c.base_model_tp_plan, 2, "sequence",
                      kwargs, overlap="auto")
    records = [r for r in step.artifact.report["collectives"]
               if r["strategy"] == "async"]
    assert records, collectives(step)
    for r in records:
        assert r["with"].startswith("linalg."), r
        assert r["predicted"]["compute_us"] > 0, r


def test_llama_decoder_layer_bf16():
    torch.manual_seed(5)
    c, layer, rotary = llama(2, torch.bfloat16)
    x = torch.randn(2, 8, 64).to(torch.bfloat16)
    positions = torch.arange(8).unsqueeze(0).expand(2, -1)
    cos, sin = rotary(x, positions)
    kwargs = {"position_embeddings": (cos.to(x.dtype), sin.to(x.dtype))}
    from braid.dtypes import TOLERANCE
    check_step(layer, (x,), c.base_model_tp_plan, 2, "replicate", kwargs,
               tolerance=TOLERANCE["module"]["bf16"])


@pytest.mark.parametrize("ranks,layout,overlap", [
    (2, "replicate", "off"), (4, "replicate", "force"),
    (2, "sequence", "force"), (4, "sequence", "auto")])
def test_llama_causal_lm_cross_entropy(ranks, layout, overlap):
    """A whole 2-layer LlamaForCausalLM from token ids, under its shipped
    plan, with a cross-entropy loss over the vocabulary: the embedding's
    and the head's gradients too (their backward ops decomposed without
    scatters)."""
    transformers = pytest.importorskip("transformers")
    heads = 4 if ranks <= 2 else 8
    c = transformers.LlamaConfig(hidden_size=64, intermediate_size=128,
                                 num_attention_heads=heads,
                                 num_key_value_heads=heads // 2,
                                 head_dim=64 // heads, num_hidden_layers=2,
                                 vocab_size=128, max_position_embeddings=64)
    torch.manual_seed(7)
    model = transformers.LlamaForCausalLM(c)
    ids = torch.randint(0, 128, (1 if layout == "sequence" else 2, 8))
    labels = torch.randint(0, 128, ids.shape)
    labels[0, 0] = -100                       # ignored, as HF pads

    def cross_entropy(out, labels):
        return torch.nn.functional.cross_entropy(
            out.logits.reshape(-1, c.vocab_size), labels.reshape(-1))

    step = bp.train_step(model, (ids,), c.base_model_tp_plan,
                         loss_fn=cross_entropy, targets=(labels,),
                         ranks=ranks, input_layout=layout, overlap=overlap,
                         check_schedule=True)
    loss, grads = step(ids, targets=(labels,))
    expected_loss, expected = reference(model, (ids,), None, cross_entropy,
                                        (labels,))
    assert relative_error(loss, expected_loss) <= F32_TOLERANCE
    assert sorted(grads) == sorted(expected)
    for name, grad in grads.items():
        assert relative_error(grad, expected[name]) <= F32_TOLERANCE, name
    kinds = [k for k, _ in collectives(step)]
    if layout == "replicate":
        assert kinds == ["all_reduce"] * 8, kinds   # four per layer
    else:
        assert "reduce_scatter" in kinds and "all_gather" in kinds, kinds


@pytest.mark.parametrize("ranks,layout,data_parallel", [
    (2, "sequence", 1), (4, "replicate", 1), (4, "replicate", 2)])
def test_per_rank_training_job(tmp_path, ranks, layout, data_parallel):
    """train_step(..., per_rank=True) under mpirun: each rank holds its part
    of a Llama decoder layer's parameters and trains it with torch.optim
    for three steps, against the whole layer trained by torch
    (test/lib/train_step_check.py asserts losses, gradient parts and the
    trained parameter parts); with data_parallel=2, two rows of two
    tensor-parallel ranks, each row its half of the batch."""
    from test_pytorch import run_job
    out = run_job(ranks, "train_step_check.py", str(tmp_path), "--layout",
                  layout, "--steps", "3", "--data-parallel",
                  str(data_parallel))
    assert f"rank 0 of {ranks}>" in out and "OK keeps" in out, out
    assert "OK parameter parts trained" in out, out


def test_module_output_is_the_loss():
    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mlp = MLP()

        def forward(self, x, target):
            return torch.nn.functional.mse_loss(self.mlp(x), target)

    torch.manual_seed(6)
    module = WithLoss()
    x, target = torch.randn(16, 64), torch.randn(16, 64)
    step = bp.train_step(module, (x, target), {"mlp.up": "colwise",
                                               "mlp.down": "rowwise"},
                         ranks=2)
    loss, grads = step(x, target)
    module.zero_grad()
    expected = module(x, target)
    expected.backward()
    assert relative_error(loss, expected.detach()) <= F32_TOLERANCE
    for name, parameter in module.named_parameters():
        assert relative_error(grads[name], parameter.grad) <= F32_TOLERANCE


def test_input_that_is_also_the_target():
    """An autoencoder's loss compares the output with the input itself:
    one tensor passed twice stays two arguments, so that a later call with
    a different target is not read as the input."""
    torch.manual_seed(9)
    module = MLP()
    x = torch.randn(16, 64)
    step = bp.train_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                         loss_fn=mse, targets=(x,), ranks=2)
    other = torch.randn(16, 64)
    loss, grads = step(x, targets=(other,))
    expected_loss, expected = reference(module, (x,), None, mse, (other,))
    assert relative_error(loss, expected_loss) <= F32_TOLERANCE
    for name, grad in grads.items():
        assert relative_error(grad, expected[name]) <= F32_TOLERANCE, name


@pytest.mark.parametrize("ranks,data_parallel", [(2, 2), (4, 2), (4, 4)])
def test_mlp_data_parallel(ranks, data_parallel):
    """data_parallel rows of ranks / data_parallel tensor-parallel ranks:
    each row's gradients are sums over its part of the batch, all-reduced
    over the rows (data parallelism), never the batch gathered; the loss
    and every gradient as autograd's over the whole batch."""
    torch.manual_seed(0)
    module = MLP()
    x = torch.randn(4, 8, 64)
    step = check_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                      ranks, data_parallel=data_parallel)
    kinds = [k for k, _ in collectives(step)]
    assert set(kinds) == {"all_reduce"}, kinds
    # At least one per gradient (over the rows) and, with two ranks per
    # row, Megatron's two within the rows.
    tensor_parallel = 2 if ranks // data_parallel == 2 else 0
    assert len(kinds) >= 6 + tensor_parallel, kinds


@pytest.mark.parametrize("ranks,data_parallel", [(4, 2), (4, 4)])
def test_llama_decoder_layer_data_parallel(ranks, data_parallel):
    torch.manual_seed(4)
    c, layer, rotary = llama(ranks // data_parallel)
    x = torch.randn(4, 8, 64)
    positions = torch.arange(8).unsqueeze(0).expand(x.shape[0], -1)
    kwargs = {"position_embeddings": rotary(x, positions)}
    step = check_step(layer, (x,), c.base_model_tp_plan, ranks, "replicate",
                      kwargs, data_parallel=data_parallel)
    kinds = [k for k, _ in collectives(step)]
    assert set(kinds) == {"all_reduce"}, kinds


def test_data_parallel_sequence_refused():
    module = MLP(rms=True)
    x = torch.randn(2, 16, 64)
    with pytest.raises(ValueError, match="sequence-parallel rows on a data "
                                         "axis are not supported"):
        bp.train_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                      loss_fn=mse, targets=(torch.randn(2, 16, 64),),
                      ranks=4, input_layout="sequence", data_parallel=2)
    with pytest.raises(ValueError, match="does not divide the 4 ranks"):
        bp.train_step(module, (x,), {"up": "colwise", "down": "rowwise"},
                      loss_fn=mse, targets=(torch.randn(2, 16, 64),),
                      ranks=4, data_parallel=3)


def test_bad_steps_raise():
    module = MLP()
    x = torch.randn(16, 64)
    plan = {"up": "colwise", "down": "rowwise"}
    with pytest.raises(ValueError, match="scalar"):
        bp.train_step(module, (x,), plan, ranks=2)       # output not a loss
    with pytest.raises(TypeError, match="not callable"):
        bp.train_step(module, (x,), plan, loss_fn=3, ranks=2)
    with pytest.raises(TypeError, match="targets"):
        bp.train_step(module, (x,), plan, loss_fn=mse, targets=(1.0,),
                      ranks=2)
    frozen = MLP().requires_grad_(False)
    with pytest.raises(ValueError, match="no parameter"):
        bp.train_step(frozen, (x,), plan, loss_fn=mse,
                      targets=(torch.randn(16, 64),), ranks=2)
    step = bp.train_step(module, (x,), plan, loss_fn=mse,
                         targets=(torch.randn(16, 64),), ranks=2)
    with pytest.raises(ValueError, match="1 targets; got 0"):
        step(x)
    with pytest.raises(ValueError, match="needs cache="):
        bp.train_step(module, (x,), plan, loss_fn=mse,
                      targets=(torch.randn(16, 64),), per_rank=True)

    class Sorts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(64, 64)

        def forward(self, x):
            return torch.sort(self.up(x), dim=-1).values.sum()

    with pytest.raises((CompileError, ValueError)):
        bp.train_step(Sorts(), (x,), {"up": "colwise"}, ranks=2)


def test_assemble_inverts_rank_part():
    import numpy as np
    value = np.arange(4 * 8 * 3, dtype=np.float32).reshape(4, 8, 3)
    for style, shape in [(None, (4, 4, 3)), (None, (2, 8, 3)),
                         ("packed_colwise", (4, 4, 3))]:
        pieces = [bp.rank_part("w", value, shape, 2, r, style)
                  for r in range(2)]
        assert (assemble("w", pieces, value.shape, style) == value).all()
    with pytest.raises(ValueError, match="cannot assemble"):
        assemble("w", [value[:1], value[:1]], value.shape)
