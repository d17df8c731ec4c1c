"""A per-weight tensor-parallel plan (braid.parallel attributes) on a
global-view MLP: partitioned by Braid, run on 2 and 4 CPU ranks, checked
against numpy. The same path the PyTorch front door takes, without torch."""
import numpy as np
import pytest

import braid

def linear(out, x, w, bias, t, d_in, d_out, relu):
    """%out = %x @ %w^T + %bias, ReLU'd if `relu`: torch's nn.Linear, the
    weight [d_out, d_in] used through linalg.transpose."""
    def f32(*shape):
        return "tensor<" + "x".join(str(d) for d in shape) + "xf32>"
    act = ("    %r = arith.maximumf %s, %zero : f32\n    linalg.yield %r : f32\n"
           if relu else "    linalg.yield %s : f32\n")
    return (
        f"  %{out}_et = tensor.empty() : {f32(d_in, d_out)}\n"
        f"  %{out}_wt = linalg.transpose ins(%{w} : {f32(d_out, d_in)}) "
        f"outs(%{out}_et : {f32(d_in, d_out)}) permutation = [1, 0]\n"
        f"  %{out}_e = tensor.empty() : {f32(t, d_out)}\n"
        f"  %{out}_z = linalg.fill ins(%zero : f32) outs(%{out}_e : {f32(t, d_out)}) -> {f32(t, d_out)}\n"
        f"  %{out}_mm = linalg.matmul ins(%{x}, %{out}_wt : {f32(t, d_in)}, {f32(d_in, d_out)}) "
        f"outs(%{out}_z : {f32(t, d_out)}) -> {f32(t, d_out)}\n"
        f"  %{out} = linalg.generic {{indexing_maps = [#id, #row, #id], "
        f"iterator_types = [\"parallel\", \"parallel\"]}}\n"
        f"      ins(%{out}_mm, %{bias} : {f32(t, d_out)}, {f32(d_out)}) outs(%{out}_e : {f32(t, d_out)}) {{\n"
        f"  ^bb0(%v: f32, %c: f32, %o: f32):\n    %s = arith.addf %v, %c : f32\n" + act +
        f"  }} -> {f32(t, d_out)}\n")


def mlp(ranks, layout, t, h, f):
    """A global-view MLP in torch's layout (ReLU between the linears), each
    weight with its braid.parallel plan."""
    return (
        f"shard.grid @g(shape = {ranks})\n"
        "#id = affine_map<(d0, d1) -> (d0, d1)>\n"
        "#row = affine_map<(d0, d1) -> (d1)>\n"
        f"func.func @mlp(%x: tensor<{t}x{h}xf32> {{braid.parallel = \"{layout}\"}},\n"
        f"               %up: tensor<{f}x{h}xf32> {{braid.parallel = \"colwise\"}},\n"
        f"               %b_up: tensor<{f}xf32> {{braid.parallel = \"colwise\"}},\n"
        f"               %down: tensor<{h}x{f}xf32> {{braid.parallel = \"rowwise\"}},\n"
        f"               %b_down: tensor<{h}xf32> {{braid.parallel = \"replicate\"}})\n"
        f"    -> (tensor<{t}x{h}xf32> {{braid.parallel = \"{layout}\"}}) {{\n"
        "  %zero = arith.constant 0.0 : f32\n"
        + linear("a", "x", "up", "b_up", t, h, f, relu=True)
        + linear("o", "a", "down", "b_down", t, f, h, relu=False)
        + f"  return %o : tensor<{t}x{h}xf32>\n}}\n")


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_global_view_plan(ranks, layout, overlap):
    t, h, f = 16, 16, 32
    artifact = braid.compile(
        mlp(ranks, layout, t, h, f),
        overlap=overlap, check_schedule=True)
    rng = np.random.default_rng(ranks)
    x = rng.standard_normal((t, h)).astype(np.float32)
    up = (rng.standard_normal((f, h)) / 4).astype(np.float32)
    b_up = rng.standard_normal(f).astype(np.float32)
    down = (rng.standard_normal((h, f)) / 6).astype(np.float32)
    b_down = rng.standard_normal(h).astype(np.float32)
    expected = np.maximum(x @ up.T + b_up, 0) @ down.T + b_down

    # Per rank: weights split as the plan says, x and the result by layout.
    shapes = [a.shape for a in artifact.arguments]
    assert shapes[1] == (f // ranks, h) and shapes[3] == (h, f // ranks)
    assert shapes[2] == (f // ranks,) and shapes[4] == (h,)
    inputs = []
    for r in range(ranks):
        xr = np.split(x, ranks)[r] if layout == "sequence" else x
        inputs.append([xr, np.split(up, ranks)[r], np.split(b_up, ranks)[r],
                       np.split(down, ranks, axis=1)[r], b_down])
    outputs = artifact.run(inputs)
    for r in range(ranks):
        want = np.split(expected, ranks)[r] if layout == "sequence" else expected
        np.testing.assert_allclose(outputs[r][0], want, rtol=1e-4, atol=1e-4)

    kinds = sorted(c["kind"] for c in artifact.report["collectives"])
    assert kinds == (["all_gather", "reduce_scatter"] if layout == "sequence"
                     else ["all_reduce"])
