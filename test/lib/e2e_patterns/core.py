"""What every end-to-end pattern shares: the configuration it is called
with, element types, and helpers that write program text.

A pattern is a function of a `Config` that returns (mlir text, input specs
[(shape, dtype[, "replicated"])], result dtypes, reference function(grid,
inputs) -> per-rank list of result lists[, per-result tolerances]). The
inputs a reference gets are per argument, per rank, the float64 values the
program sees (`quantize`d to their element type). Without tolerances each
result is checked with its element type's (`tolerance`); a pattern names
its own where a result is bounded by a looser type than its own (an f32
result of products rounded to bf16 on the way).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), "python"))
from braid.dtypes import (TOLERANCE, from_storage, quantize,  # noqa: E402,F401
                          relative_error, to_storage)


class Config:
    """One configuration of a pattern: grid (list of sizes), axis (the
    group's grid axis), group (its size), dtype, variant (a string, "" for
    the pattern's default) and scale (multiplies the sizes); a benchmark
    may add attributes a pattern reads with getattr (ring_attention's heads
    and head_dim)."""


# --- element types -------------------------------------------------------

#: The element types a pattern's --dtype may be.
DTYPES = sorted(TOLERANCE["program"])


def tolerance(dtype):
    """A result's largest relative error against its reference."""
    return TOLERANCE["program"][dtype]


def load(path, dtype):
    """A result a run wrote, as float64 values."""
    return from_storage(np.load(path), dtype).astype(np.float64)


def acc_type(dtype):
    # bf16 operands accumulate in f32 (mixed precision); f16 and f32 in their
    # own type (uniform precision).
    return "f32" if dtype == "bf16" else dtype


# --- program text ----------------------------------------------------------

def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + dtype + ">"


def header(grid_shape):
    return f"shard.grid @g(shape = {'x'.join(str(s) for s in grid_shape)})\n"


def program(grid_shape, params, body, result, zero=None):
    """The text of a program on the grid: @main taking `params` (name ->
    type), running `body` (lines, after `%zero = 0.0 : zero` when `zero` is
    an element type) and returning `result` (name, type)."""
    args = ", ".join(f"%{name}: {type_}" for name, type_ in params.items())
    name, type_ = result
    first = f"  %zero = arith.constant 0.0 : {zero}\n" if zero else ""
    return (header(grid_shape) + f"func.func @main({args}) -> {type_} {{\n" + first + body +
            f"  return %{name} : {type_}\n}}\n")


def replicated(grid_shape):
    """The attribute that promises an argument is the same on every rank."""
    return (f" {{dist.placement = #dist.placement<@g, "
            f"[{', '.join('replicate' for _ in grid_shape)}]>}}")


MATMUL_MAPS = {
    "nn": "",
    "nt": ("indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
           "affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] "),
}


def matmul(out, a, b, a_type, b_type, shape, acc, maps="nn"):
    """%out = %a x %b into a zero-filled accumulator (needs %zero: acc)."""
    return (f"  %{out}_e = tensor.empty() : {tensor(shape, acc)}\n"
            f"  %{out}_z = linalg.fill ins(%zero : {acc}) outs(%{out}_e : {tensor(shape, acc)}) -> {tensor(shape, acc)}\n"
            f"  %{out} = linalg.matmul {MATMUL_MAPS[maps]}ins(%{a}, %{b} : {a_type}, {b_type}) "
            f"outs(%{out}_z : {tensor(shape, acc)}) -> {tensor(shape, acc)}\n")
