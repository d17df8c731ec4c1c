"""Memory-bound fusion end to end: the epilogues of row-parallel layers
(reduction, dropout, bias, residual, layernorm or RMSNorm) and attention's
softmax, fused and not, on 2 and 4 CPU ranks against numpy."""
import re

import numpy as np
import pytest

import braid
from braid.models import Attention, Grid, Norm, philox_uniform


def kernels(artifact):
    return len(re.findall(r"llvm\.func @\w+_kernel_\d+\(", artifact.ir("llvm")))


def run(block, fuse, seed=0, overlap="force"):
    artifact = braid.compile(block.mlir(), overlap=overlap, fuse=fuse,
                             check_schedule=True)
    inputs = block.random_inputs(seed)
    outputs = artifact.run(inputs)
    block.check(outputs, inputs)
    return artifact, outputs


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("grid,parallel", [([4], "sp"), ([2], "tp")])
def test_norm_epilogue(dtype, norm, grid, parallel):
    block = Norm(Grid(grid), tokens=16, hidden=64, k=32, dtype=dtype,
                 parallel=parallel, norm=norm, dropout=0.1, seed=42)
    fused, _ = run(block, "auto")
    unfused, _ = run(block, "off")
    # Dropout, bias, residual and the norm: one kernel writing both the
    # normalized values and the new residual.
    assert any("writing 2 outputs" in d.message and "row reduction" in d.message
               for d in fused.remarks)
    assert kernels(fused) < kernels(unfused)


def test_norm_on_2d_grid():
    run(Norm(Grid([2, 2]), tokens=8, hidden=32, k=16, axis=1, parallel="sp",
             dropout=0.5, seed=3), "auto")


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_attention_softmax_fused(dtype):
    block = Attention(Grid([4]), tokens=16, hidden=32, heads=4, dtype=dtype,
                      parallel="sp")
    fused, _ = run(block, "auto")
    unfused, _ = run(block, "off")
    # Scores, scale and mask, max, exp, sum, divide: one kernel.
    assert any("with 2 row reductions" in d.message for d in fused.remarks)
    assert kernels(fused) < kernels(unfused)


def test_dropout_mask_is_reproducible_across_ranks_and_runs():
    # The same global tensor split over 2 or 4 ranks drops the same
    # elements: the mask is a function of (seed, row, column) only.
    rng = np.random.default_rng(0)
    t, h, k = 16, 32, 8
    x = rng.standard_normal((t, h)).astype(np.float32)
    a = rng.standard_normal((t, k)).astype(np.float32)
    w = rng.standard_normal((k, h)).astype(np.float32)
    ones, zeros = np.ones(h, np.float32), np.zeros(h, np.float32)
    results = {}
    for ranks in (2, 4):
        block = Norm(Grid([ranks]), tokens=t, hidden=h, k=k, parallel="sp",
                     norm="rmsnorm", dropout=0.5, seed=1234)
        artifact = braid.compile(block.mlir())
        # Rank r holds rows r*t/n.. of x and columns of a, rows of w: the
        # reduce-scatter sums to a @ w for every rank count.
        inputs = [[np.split(x, ranks)[r], np.split(a, ranks, axis=1)[r],
                   np.split(w, ranks)[r], zeros, ones] for r in range(ranks)]
        first = artifact.run(inputs)
        again = artifact.run(inputs)
        for r in range(ranks):
            np.testing.assert_array_equal(first[r][1], again[r][1])
        results[ranks] = np.concatenate([out[1] for out in first])
    np.testing.assert_allclose(results[2], results[4], rtol=1e-5, atol=1e-5)
    dropped = np.isclose(results[4], x)
    expected = philox_uniform(np.arange(t), np.arange(h), 1234) < 2 ** 31
    np.testing.assert_array_equal(dropped, expected)


ROW_QUOTIENT = """
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @main(%x: tensor<8x40xf32>, %d: tensor<8xf32>) -> tensor<8x40xf32> {
  %e = tensor.empty() : tensor<8x40xf32>
  %q = linalg.generic {indexing_maps = [#id, #row, #id],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x, %d : tensor<8x40xf32>, tensor<8xf32>) outs(%e : tensor<8x40xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<8x40xf32>
  return %q : tensor<8x40xf32>
}
"""


@pytest.mark.parametrize("vector_bytes", [64, 0])
def test_row_quotient_by_any_divisor(vector_bytes):
    """A division by each row's value, which the cpu target computes as a
    product with a power-of-two-scaled reciprocal: within 1.5 ulp of
    numpy's quotient for divisors whose reciprocal alone would overflow
    (subnormal) or lose bits (beyond 2^126), and the division's zeros,
    infinities and NaNs for 0, inf and NaN divisors; vector loop and
    scalar columns (40 = 2 x 16 + 8), and the scalar loops."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 40)).astype(np.float32)
    x[:, 0] = 0.0
    x[:, 1] = np.inf
    d = np.array([3.0, 1e-39, 1.5e-45, 0.0, np.inf, 3e38, -2e-40, np.nan],
                 dtype=np.float32)
    artifact = braid.compile(ROW_QUOTIENT, vector_bytes=vector_bytes)
    got = artifact.run([[x, d]])[0][0]
    with np.errstate(all="ignore"):
        want = x / d[:, None]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(np.signbit(got[~np.isnan(want)]),
                          np.signbit(want[~np.isnan(want)]))
    finite = np.isfinite(want)
    ulp = np.spacing(np.abs(want[finite]).astype(np.float32))
    assert np.all(np.abs(got[finite] - want[finite]) <= 1.5 * ulp)
