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
    with pytest.raises(braid.CompileError, match="option 'quantize-all-gather' expects off, bf16 or fp8, got 'fp4'"):
        braid.compile(PROGRAM.format(n=2, m=16), quantize_all_gather="fp4")


GATHER = """
shard.grid @g(shape = {n})
func.func @main(%x: tensor<8x64x{t}>) -> tensor<{m}x64x{t}> {{
  %all = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0
      : tensor<8x64x{t}> -> tensor<{m}x64x{t}>
  return %all : tensor<{m}x64x{t}>
}}
"""


def e4m3_grid():
    """The finite non-negative e4m3fn values; code k is value k."""
    subnormal = [m * 2.0 ** -9 for m in range(8)]
    normal = [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8)]
    return np.array(subnormal + normal[:-1])  # e=15, m=7 is NaN


def round_e4m3(values):
    """Nearest e4m3fn value, ties to the even code, saturating at 448."""
    grid = e4m3_grid()
    magnitude = np.minimum(np.abs(values), 448.0)
    above = np.clip(np.searchsorted(grid, magnitude), 1, len(grid) - 1)
    below = above - 1
    d_below = magnitude - grid[below]
    d_above = grid[above] - magnitude
    pick = np.where(d_below < d_above, below,
                    np.where(d_above < d_below, above,
                             np.where(below % 2 == 0, below, above)))
    return np.sign(values) * grid[pick]


@pytest.mark.parametrize("ranks", [2, 4])
def test_fp8_codec_matches_reference(ranks):
    """Each rank's chunk scaled so its largest magnitude is 448, rounded to
    the nearest e4m3fn value (ties to even), decoded with its scale: the
    gathered values equal that, element by element, on every rank."""
    artifact = braid.compile(GATHER.format(n=ranks, m=8 * ranks, t="f32"),
                             quantize_all_gather="fp8")
    # The codes' all-gather carries the bound; the scales' own (one f32 per
    # rank) is a record of its own, sent as it is.
    codes, scales = artifact.report["collectives"]
    assert codes["quantized"]["format"] == "fp8-e4m3"
    assert codes["quantized"]["max_relative_error"] == 2.0 ** -4
    assert scales["kind"] == "all_gather" and "quantized" not in scales
    rng = np.random.default_rng(ranks)
    xs = []
    for _ in range(ranks):
        x = rng.standard_normal((8, 64)) * 10.0 ** rng.uniform(-4, 2, size=(8, 64))
        x[0, :4] = 0.0  # zeros stay zero
        xs.append(x.astype(np.float32))
    outputs = artifact.run([[x] for x in xs])
    expected = []
    for x in xs:
        amax = np.float32(np.abs(x).max())
        scale = np.float32(448.0) / amax
        scaled = (x * scale).astype(np.float32).astype(np.float64)
        expected.append(round_e4m3(scaled) * np.float64(np.float32(amax / np.float32(448.0))))
    expected = np.concatenate(expected)
    for rank in range(ranks):
        got = outputs[rank][0].astype(np.float64)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_fp8_all_gather_within_bound(ranks, overlap):
    """A bf16 all-gather feeding a matmul, sent as fp8: the results stay
    within the reported bound of the unquantized ones, every schedule."""
    program = PROGRAM.replace("8x64xf32", "8x64xbf16").replace(
        "{m}x64xf32", "{m}x64xbf16")
    artifact = braid.compile(program.format(n=ranks, m=8 * ranks),
                             overlap=overlap, quantize_all_gather="fp8",
                             check_schedule=True)
    record = [r for r in artifact.report["collectives"] if r.get("quantized")][0]
    relative = record["quantized"]["max_relative_error"]
    absolute = record["quantized"]["max_absolute_error_over_chunk_amax"]
    rng = np.random.default_rng(10 + ranks)
    xs = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(ranks)]
    w = rng.standard_normal((64, 32)).astype(np.float32)
    outputs = artifact.run([[x, w] for x in xs])
    x = np.concatenate([quantize(x, "bf16") for x in xs])
    amax = np.repeat([np.abs(quantize(c, "bf16")).max() for c in xs], 8)[:, None]
    exact = x @ w
    # Each product term is off by its element's bound; the decode to bf16
    # adds bf16's own rounding of the decoded value.
    element = (relative + 2.0 ** -8) * np.abs(x) + absolute * amax
    bound = element @ np.abs(w) + 1e-4
    for rank in range(ranks):
        got = outputs[rank][0]
        assert np.all(np.abs(got - exact) <= bound)
        assert not np.allclose(got, exact, rtol=1e-4, atol=1e-4)
