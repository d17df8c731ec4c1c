"""The PyTorch front door: torch modules exported with torch-mlir,
parallelized by plan on 4 CPU ranks, compared with torch itself. Skipped
where torch and torch-mlir are not installed (scripts/setup-frontends.sh
installs them; scripts/test.sh runs this file in that venv)."""
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import braid  # noqa: E402
import braid.pytorch as bp  # noqa: E402


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
