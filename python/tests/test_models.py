"""The model builder's blocks, compiled by Braid and run on 2 and 4 CPU
ranks, against their numpy references."""
import pytest

import braid
from braid.models import MLP, Attention, Grid, MoE, Transformer


def run_block(block, overlap="force", seed=0):
    artifact = braid.compile(block.mlir(), overlap=overlap, check_schedule=True)
    inputs = block.random_inputs(seed)
    outputs = artifact.run(inputs)
    block.check(outputs, inputs)
    return artifact


def strategies(artifact):
    return sorted(c.get("strategy") or c["decision"] for c in artifact.report["collectives"])


@pytest.mark.parametrize("grid,axis", [([4], 0), ([2], 0), ([2, 2], 1)])
@pytest.mark.parametrize("kind", ["gpt", "llama"])
@pytest.mark.parametrize("parallel", ["tp", "sp"])
def test_mlp(grid, axis, kind, parallel):
    block = MLP(Grid(grid), tokens=16, hidden=16, ffn=32, axis=axis,
                kind=kind, parallel=parallel)
    artifact = run_block(block)
    if parallel == "sp":
        assert strategies(artifact) == ["ring_ag_matmul", "ring_matmul_rs"]
    else:
        assert strategies(artifact) == ["rs_ring_ag"]


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_mlp_half_precision(dtype):
    run_block(MLP(Grid([4]), tokens=16, hidden=16, ffn=64, dtype=dtype,
                  kind="llama", parallel="sp"))


@pytest.mark.parametrize("overlap", ["force", "off"])
@pytest.mark.parametrize("grid", [[4], [2]])
def test_moe_one_expert_per_rank(grid, overlap):
    artifact = run_block(MoE(Grid(grid), capacity=4, hidden=16, ffn=32),
                         overlap=overlap)
    if overlap == "force":
        assert strategies(artifact) == ["a2a_combine", "a2a_dispatch"]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_moe_several_experts_per_rank(dtype):
    run_block(MoE(Grid([4]), capacity=2, hidden=8, ffn=16,
                  experts_per_rank=2, dtype=dtype))


def test_moe_on_2d_grid():
    run_block(MoE(Grid([2, 2]), capacity=2, hidden=8, ffn=16, axis=0))


@pytest.mark.parametrize("parallel", ["tp", "sp"])
def test_attention(parallel):
    run_block(Attention(Grid([4]), tokens=8, hidden=16, heads=4,
                        parallel=parallel))


def test_transformer_two_layers_bf16():
    block = Transformer(Grid([2]), layers=2, tokens=8, hidden=16, heads=2,
                        ffn=32, dtype="bf16")
    artifact = run_block(block)
    assert len(artifact.arguments) == 1 + 2 * 5


def test_reference_catches_wrong_results():
    block = MLP(Grid([2]), tokens=4, hidden=8, ffn=8)
    artifact = braid.compile(block.mlir())
    inputs = block.random_inputs(1)
    outputs = artifact.run(inputs)
    outputs[1][0][0, 0] += 1.0
    with pytest.raises(AssertionError, match="relative error"):
        block.check(outputs, inputs)


def test_builder_rejects_bad_sizes():
    with pytest.raises(ValueError, match="divide by the group size 4"):
        MLP(Grid([4]), tokens=16, hidden=8, ffn=30)
    with pytest.raises(ValueError, match="not an axis"):
        MLP(Grid([4]), tokens=16, hidden=8, ffn=32, axis=1)
    with pytest.raises(ValueError, match="dtype"):
        MLP(Grid([4]), tokens=16, hidden=8, ffn=32, dtype="f8")


def test_run_threads():
    """Artifact.run(threads=N) reaches the runner: results unchanged, and a
    bad count is refused."""
    block = MLP(Grid([2]), tokens=16, hidden=16, ffn=32, parallel="sp")
    artifact = braid.compile(block.mlir(), overlap="force")
    inputs = block.random_inputs(1)
    block.check(artifact.run(inputs, threads=1), inputs)
    with pytest.raises(braid.BraidError):
        artifact.run(inputs, threads=5000)
