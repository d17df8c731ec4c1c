"""Opt-in quantized all-gather (quantize_all_gather="bf16") end to end on 2
and 4 CPU ranks: results equal numpy on bf16-rounded inputs, stay within
the reported bound of the full-precision results, and the schedule still
overlaps."""
import numpy as np
import pytest

import braid
from braid.dtypes import quantize

PROGRAM = """
shard.grid @g(shape = {n})
func.func @main(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<{m}x32xf32> {{
  %all = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0
      : tensor<8x64xf32> -> tensor<{m}x64xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<{m}x32xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<{m}x32xf32>) -> tensor<{m}x32xf32>
  %y = linalg.matmul ins(%all, %w : tensor<{m}x64xf32>, tensor<64x32xf32>)
      outs(%init : tensor<{m}x32xf32>) -> tensor<{m}x32xf32>
  return %y : tensor<{m}x32xf32>
}}
"""


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_quantized_all_gather(ranks, overlap):
    artifact = braid.compile(PROGRAM.format(n=ranks, m=8 * ranks),
                             overlap=overlap, quantize_all_gather="bf16",
                             check_schedule=True)
    [record] = artifact.report["collectives"]
    assert record["quantized"] == {"format": "bf16",
                                   "max_relative_error": 2.0 ** -8}
    if overlap == "force":
        assert record["strategy"] == "ring_ag_matmul"
    rng = np.random.default_rng(ranks)
    xs = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(ranks)]
    w = rng.standard_normal((64, 32)).astype(np.float32)
    outputs = artifact.run([[x, w] for x in xs])
    x = np.concatenate(xs).astype(np.float64)
    exact = x @ w
    rounded = quantize(x, "bf16") @ w
    for rank in range(ranks):
        got = outputs[rank][0]
        np.testing.assert_allclose(got, rounded, rtol=1e-5, atol=1e-4)
        # Each product term is off by at most 2^-8 relative.
        bound = 2.0 ** -8 * (np.abs(x) @ np.abs(w)) + 1e-4
        assert np.all(np.abs(got - exact) <= bound)
        assert not np.allclose(got, exact, rtol=1e-6, atol=1e-6)


def test_quantize_option_errors():
    with pytest.raises(braid.CompileError, match="unknown all-gather quantization 'fp4'"):
        braid.compile(PROGRAM.format(n=2, m=16), quantize_all_gather="fp4")
