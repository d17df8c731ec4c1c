#!/usr/bin/env python3
"""End-to-end numerical tests of Braid's schedules on CPU ranks.

For one pattern and one configuration (grid, axis, element type, sizes),
this script writes an SPMD program in upstream `shard` form, draws per-rank
inputs, computes the expected per-rank results with numpy (test/lib/spmd.py,
independent of Braid), then for each overlap mode compiles the program with
braid-compile, runs it with braid-exec on as many MPI ranks as the grid has,
and compares. With --expect, it also checks from the JSON report that the
schedule under test was really applied.

Usage: e2e.py PATTERN --grid 4|2x2 [--axis A] [--dtype f32|f16|bf16]
              [--variant V] [--modes force,off] [--expect STRATEGY]
              [--expect-transport symmetric|two-sided]
              [--expect-balanced yes|no] [--repeat N]
              [--bin BUILD/bin] [--keep DIR]
              [--target cpu|cuda [--sm 90a] [--compile-only]
               [--transport loopback|nccl|nccl-file]]
              [--build-only DIR | --prebuilt DIR]
Exit status 0 when every mode matches the reference, 1 otherwise.

With --target cuda the program is compiled for the GPU (kernels as cubins
through ptxas) and, unless --compile-only, run by braid-exec-cuda: as N
logical ranks on one GPU (--transport loopback, the default) or one process
per GPU under mpirun (nccl), or one process per GPU with NCCL bootstrapped
through a file instead of MPI (nccl-file, no launcher needed). Each run may
take --run-timeout seconds (the runner's own --timeout, which names the
rank and step that hung; the process is killed 15 s later).
--compile-only also assembles the kernels' PTX with `ptxas -v` and fails if
any kernel spills registers. Braid's binaries get BRAID_RUN_LIBRARY_PATH in
front of their LD_LIBRARY_PATH when it is set (test/lib/launch.py).

--build-only DIR compiles the program for each mode into DIR and stops;
--prebuilt DIR runs and checks what --build-only left there, without a
compiler (bench/gpu/ builds on a development machine and runs on a GPU
machine that has no LLVM). Inputs and references come from --seed alike.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch  # noqa: E402

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spmd  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))), "python"))
from braid.dtypes import relative_error  # noqa: E402

TOLERANCE = {"f32": 2e-4, "f16": 2e-2, "bf16": 4e-2}


# --- element types -------------------------------------------------------

def to_bf16_bits(values):
    """Rounds float32 values to bfloat16 (nearest even) and returns bits."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def quantize(values, dtype):
    """The float64 values the program actually sees for `dtype` inputs."""
    if dtype == "bf16":
        return from_bf16_bits(to_bf16_bits(values)).astype(np.float64)
    if dtype == "f16":
        return values.astype(np.float16).astype(np.float64)
    return values.astype(np.float32).astype(np.float64)


def storage(values, dtype):
    if dtype == "bf16":
        return to_bf16_bits(values)
    return values.astype({"f16": np.float16, "f32": np.float32}[dtype])


def load(path, dtype):
    data = np.load(path)
    if dtype == "bf16":
        return from_bf16_bits(data).astype(np.float64)
    return data.astype(np.float64)


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + dtype + ">"


# --- patterns --------------------------------------------------------------
# Each returns (mlir text, input specs [(shape, dtype[, "replicated"])],
# result dtypes,
# reference function(grid, inputs) -> per-rank list of result lists).

MATMUL_MAPS = {
    "nn": "",
    "nt": ("indexing_maps = [affine_map<(m, n, k) -> (m, k)>, "
           "affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>] "),
}


def matmul(out, a, b, a_type, b_type, shape, acc, maps="nn"):
    return (f"  %{out}_e = tensor.empty() : {tensor(shape, acc)}\n"
            f"  %{out}_z = linalg.fill ins(%zero : {acc}) outs(%{out}_e : {tensor(shape, acc)}) -> {tensor(shape, acc)}\n"
            f"  %{out} = linalg.matmul {MATMUL_MAPS[maps]}ins(%{a}, %{b} : {a_type}, {b_type}) "
            f"outs(%{out}_z : {tensor(shape, acc)}) -> {tensor(shape, acc)}\n")


def header(grid_shape):
    return f"shard.grid @g(shape = {'x'.join(str(s) for s in grid_shape)})\n"


def acc_type(dtype):
    # bf16 operands accumulate in f32 (mixed precision); f16 and f32 in their
    # own type (uniform precision).
    return "f32" if dtype == "bf16" else dtype


def pattern_ag_matmul(cfg):
    """all_gather feeding a matmul: rows of A, columns of B (through a
    transposed-B matmul), or the reduction dimension."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    m, k, c = 4 * z, 16 * z, 12 * z
    if cfg.variant == "rows":
        xs, ws = (m, k), (k, c)
        g = (n * m, k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "g", "w", tensor(g, dt), tensor(ws, dt), (n * m, c), acc))
        ref = lambda grid, x, w: [gx @ wr for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 0), w)]
        out = (n * m, c)
    elif cfg.variant == "cols":
        xs, ws = (c, k), (m, k)        # x: this rank's rows of B^T; w: A
        g = (n * c, k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "w", "g", tensor(ws, dt), tensor(g, dt), (m, n * c), acc, maps="nt"))
        ref = lambda grid, x, w: [wr @ gx.T for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 0), w)]
        out = (m, n * c)
    elif cfg.variant == "reduction":
        xs, ws = (m, k), (n * k, c)
        g = (m, n * k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "g", "w", tensor(g, dt), tensor(ws, dt), (m, c), acc))
        ref = lambda grid, x, w: [gx @ wr for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 1), w)]
        out = (m, c)
    else:
        raise SystemExit(f"unknown variant {cfg.variant}")
    text = (header(cfg.grid) +
            f"func.func @main(%x: {tensor(xs, dt)}, %w: {tensor(ws, dt)}) -> {tensor(out, acc)} {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" + body +
            f"  return %y : {tensor(out, acc)}\n}}\n")
    return text, [(xs, dt), (ws, dt)], [acc], lambda grid, ins: [[y] for y in ref(grid, *ins)]


def pattern_matmul_rs(cfg):
    """A matmul whose result is reduce-scattered along rows or columns."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    m, k, c = 4 * n * z, 16 * z, 4 * n * z
    dim = 0 if cfg.variant == "rows" else 1
    out = (m // n, c) if dim == 0 else (m, c // n)
    text = (header(cfg.grid) +
            f"func.func @main(%a: {tensor((m, k), dt)}, %b: {tensor((k, c), dt)}) -> {tensor(out, acc)} {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" +
            matmul("y", "a", "b", tensor((m, k), dt), tensor((k, c), dt), (m, c), acc) +
            f"  %s = shard.reduce_scatter %y on @g grid_axes = [{cfg.axis}] scatter_axis = {dim} : {tensor((m, c), acc)} -> {tensor(out, acc)}\n"
            f"  return %s : {tensor(out, acc)}\n}}\n")

    def ref(grid, ins):
        a, b = ins
        ys = [ar @ br for ar, br in zip(a, b)]
        return [[s] for s in spmd.reduce_scatter(grid, ys, [cfg.axis], dim)]
    return text, [((m, k), dt), ((k, c), dt)], [acc], ref


GELU = """\
  ^bb0(%v: f32, %bb: f32, %o: f32):
    %s = arith.addf %v, %bb : f32
    %t = math.tanh %s : f32
    %act = arith.mulf %s, %t : f32
    linalg.yield %act : f32"""


def pattern_matmul_ar(cfg):
    """Row-parallel matmul, all-reduce, then bias + activation + residual +
    cast. Variant `replicated`: the bias carries a replicate placement and
    the residual is an all-gather result, so the elementwise work moves
    between reduce-scatter and all-gather. Variant `unproven`: the same
    program without the placement (each rank's bias differs): the work must
    stay after the all-reduce and each rank's result differs."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    m, k, c = 4 * n * z, 8 * z, 12 * z
    bias_attr = (f" {{dist.placement = #dist.placement<@g, [{', '.join('replicate' for _ in cfg.grid)}]>}}"
                 if cfg.variant == "replicated" else "")
    maps2 = "[affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>]"
    maps3 = "[affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>]"
    text = (header(cfg.grid) +
            f"func.func @main(%h: {tensor((m, k), 'f32')}, %w: {tensor((k, c), 'f32')}, "
            f"%bias: {tensor((c,), 'f32')}{bias_attr}, %xs: {tensor((m // n, c), 'f32')}) -> {tensor((m, c), dt)} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n" +
            matmul("y", "h", "w", tensor((m, k), "f32"), tensor((k, c), "f32"), (m, c), "f32") +
            f"  %x = shard.all_gather %xs on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor((m // n, c), 'f32')} -> {tensor((m, c), 'f32')}\n"
            f"  %r = shard.all_reduce %y on @g grid_axes = [{cfg.axis}] : {tensor((m, c), 'f32')} -> {tensor((m, c), 'f32')}\n"
            f"  %e = tensor.empty() : {tensor((m, c), 'f32')}\n"
            f"  %b = linalg.generic {{indexing_maps = {maps2}, iterator_types = [\"parallel\", \"parallel\"]}}\n"
            f"      ins(%r, %bias : {tensor((m, c), 'f32')}, {tensor((c,), 'f32')}) outs(%e : {tensor((m, c), 'f32')}) {{\n{GELU}\n"
            f"  }} -> {tensor((m, c), 'f32')}\n"
            f"  %e2 = tensor.empty() : {tensor((m, c), dt)}\n"
            f"  %o = linalg.generic {{indexing_maps = {maps3}, iterator_types = [\"parallel\", \"parallel\"]}}\n"
            f"      ins(%b, %x : {tensor((m, c), 'f32')}, {tensor((m, c), 'f32')}) outs(%e2 : {tensor((m, c), dt)}) {{\n"
            f"  ^bb0(%v: f32, %res: f32, %out: {dt}):\n"
            f"    %s = arith.addf %v, %res : f32\n" +
            (f"    %t = arith.truncf %s : f32 to {dt}\n    linalg.yield %t : {dt}\n" if dt != "f32"
             else "    linalg.yield %s : f32\n") +
            f"  }} -> {tensor((m, c), dt)}\n"
            f"  return %o : {tensor((m, c), dt)}\n}}\n")

    def ref(grid, ins):
        h, w, bias, xs = ins
        r = spmd.all_reduce(grid, [hr @ wr for hr, wr in zip(h, w)], [cfg.axis])
        x = spmd.all_gather(grid, xs, [cfg.axis], 0)
        out = []
        for rank in range(grid.size):
            s = r[rank] + bias[rank]
            out.append([s * np.tanh(s) + x[rank]])
        return out
    # The placement promises the same bias on every rank: the inputs keep
    # the promise.
    bias_spec = ((c,), "f32", "replicated") if cfg.variant == "replicated" else ((c,), "f32")
    specs = [((m, k), "f32"), ((k, c), "f32"), bias_spec, ((m // n, c), "f32")]
    return text, specs, [dt], ref


def pattern_a2a(cfg):
    """Expert-parallel all-to-all: dispatch feeding the expert matmul, or
    combine after it."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    t, h, f = 2 * n * z, 8 * z, 6 * z
    if cfg.variant == "dispatch":
        text = (header(cfg.grid) +
                f"func.func @main(%x: {tensor((t, h), dt)}, %w: {tensor((h, f), dt)}) -> {tensor((t, f), acc)} {{\n"
                f"  %zero = arith.constant 0.0 : {acc}\n"
                f"  %d = shard.all_to_all %x on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, h), dt)} -> {tensor((t, h), dt)}\n" +
                matmul("y", "d", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc) +
                f"  return %y : {tensor((t, f), acc)}\n}}\n")

        def ref(grid, ins):
            x, w = ins
            d = spmd.all_to_all(grid, x, [cfg.axis], 0, 0)
            return [[dr @ wr] for dr, wr in zip(d, w)]
        return text, [((t, h), dt), ((h, f), dt)], [acc], ref
    text = (header(cfg.grid) +
            f"func.func @main(%x: {tensor((t, h), dt)}, %w: {tensor((h, f), dt)}) -> {tensor((t, f), acc)} {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" +
            matmul("y", "x", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc) +
            f"  %c = shard.all_to_all %y on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, f), acc)} -> {tensor((t, f), acc)}\n"
            f"  return %c : {tensor((t, f), acc)}\n}}\n")

    def ref(grid, ins):
        x, w = ins
        return [[c] for c in spmd.all_to_all(grid, [xr @ wr for xr, wr in zip(x, w)], [cfg.axis], 0, 0)]
    return text, [((t, h), dt), ((h, f), dt)], [acc], ref


def pattern_micro_batch(cfg):
    """All-reduce after a matmul whose result no ring can split (no dimension
    divides by the group size), feeding a row norm."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    # No dimension divides by the group size; one divides into micro-batches.
    z = cfg.scale  # odd multipliers keep the sizes indivisible
    m, k, c = (9 * z, 8 * z, 5 * z) if n == 2 else (6 * z, 8 * z, 6 * z)
    text = (header(cfg.grid) +
            f"func.func @main(%a: {tensor((m, k), dt)}, %b: {tensor((k, c), dt)}) -> {tensor((m,), acc)} {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" +
            matmul("y", "a", "b", tensor((m, k), dt), tensor((k, c), dt), (m, c), acc) +
            f"  %r = shard.all_reduce %y on @g grid_axes = [{cfg.axis}] : {tensor((m, c), acc)} -> {tensor((m, c), acc)}\n"
            f"  %e = tensor.empty() : {tensor((m,), acc)}\n"
            f"  %z = linalg.fill ins(%zero : {acc}) outs(%e : {tensor((m,), acc)}) -> {tensor((m,), acc)}\n"
            f"  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], "
            f"iterator_types = [\"parallel\", \"reduction\"]}} ins(%r : {tensor((m, c), acc)}) outs(%z : {tensor((m,), acc)}) {{\n"
            f"  ^bb0(%v: {acc}, %s0: {acc}):\n    %q = arith.mulf %v, %v : {acc}\n    %t = arith.addf %s0, %q : {acc}\n"
            f"    linalg.yield %t : {acc}\n  }} -> {tensor((m,), acc)}\n"
            f"  return %s : {tensor((m,), acc)}\n}}\n")

    def ref(grid, ins):
        a, b = ins
        r = spmd.all_reduce(grid, [ar @ br for ar, br in zip(a, b)], [cfg.axis])
        return [[(x * x).sum(axis=1)] for x in r]
    return text, [((m, k), dt), ((k, c), dt)], [acc], ref


def pattern_async(cfg):
    """Collectives with independent compute around them: a gradient
    all-reduce, a broadcast, a ring shift and an all-to-all whose results
    only reach the return, while a matmul runs."""
    n, dt = cfg.group, cfg.dtype
    a = cfg.axis
    shapes = {"g": (4, 2 * n), "v": (2 * n, 4), "p": (8, 8)}
    text = (header(cfg.grid) +
            f"func.func @main(%g: {tensor(shapes['g'], dt)}, %v: {tensor(shapes['v'], dt)}, %p: {tensor(shapes['p'], dt)}) -> "
            f"({tensor(shapes['g'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['p'], dt)}) {{\n"
            f"  %zero = arith.constant 0.0 : {dt}\n"
            f"  %r = shard.all_reduce %g on @g grid_axes = [{a}] reduction = max : {tensor(shapes['g'], dt)} -> {tensor(shapes['g'], dt)}\n"
            f"  %b = shard.broadcast %v on @g grid_axes = [{a}] root = [1] : ({tensor(shapes['v'], dt)}) -> {tensor(shapes['v'], dt)}\n"
            f"  %s = shard.shift %v on @g grid_axes = [{a}] shift_axis = {a} offset = -1 rotate : {tensor(shapes['v'], dt)} -> {tensor(shapes['v'], dt)}\n"
            f"  %t = shard.all_to_all %v on @g grid_axes = [{a}] split_axis = 0 concat_axis = 0 : {tensor(shapes['v'], dt)} -> {tensor(shapes['v'], dt)}\n" +
            matmul("m", "p", "p", tensor(shapes['p'], dt), tensor(shapes['p'], dt), shapes['p'], dt) +
            f"  return %r, %b, %s, %t, %m : {tensor(shapes['g'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['p'], dt)}\n}}\n")

    def ref(grid, ins):
        g, v, p = ins
        r = spmd.all_reduce(grid, g, [a], "max")
        b = spmd.broadcast(grid, v, [a], [1])
        s = spmd.shift(grid, v, a, -1)
        t = spmd.all_to_all(grid, v, [a], 0, 0)
        return [[r[i], b[i], s[i], t[i], p[i] @ p[i]] for i in range(grid.size)]
    return text, [(shapes["g"], dt), (shapes["v"], dt), (shapes["p"], dt)], [dt] * 5, ref


def pattern_rooted(cfg):
    """Upstream's rooted collectives: a gather along the columns to the last
    rank, a reduce (max, bf16/f16 converted to f32 first) to the first, and
    a scatter of rows from rank 1."""
    n, dt = cfg.group, cfg.dtype
    a = cfg.axis
    z = cfg.scale
    rows, cols = 2 * n * z, 3 * z
    last = n - 1
    x_t = tensor((rows, cols), dt)
    # Variant `dynamic`: the roots are computed at run time (from the
    # group's size), and a broadcast from the last rank joins them.
    dynamic = cfg.variant == "dynamic"
    roots = {"last": f"{last}", "first": "0", "second": f"{1 % n}"}
    prologue = ""
    if dynamic:
        prologue = (f"  %n = shard.grid_shape @g axes = [{a}] : index\n"
                    f"  %c1 = arith.constant 1 : index\n"
                    f"  %last = arith.subi %n, %c1 : index\n"
                    f"  %first = arith.subi %n, %n : index\n"
                    f"  %second = arith.remui %c1, %n : index\n")
        roots = {k: f"%{k}" for k in roots}
    root_types = ", index" if dynamic else ""
    results = [tensor((rows, cols * n), dt), tensor((rows, cols), "f32"), tensor((rows // n, cols), dt)]
    if dynamic:
        results.append(x_t)
    text = (header(cfg.grid) +
            f"func.func @main(%x: {x_t}) -> ({', '.join(results)}) {{\n" + prologue +
            f"  %g = shard.gather %x on @g grid_axes = [{a}] gather_axis = 1 root = [{roots['last']}] : ({x_t}{root_types}) -> {results[0]}\n"
            f"  %r = shard.reduce %x on @g grid_axes = [{a}] reduction = max root = [{roots['first']}] : ({x_t}{root_types}) -> {results[1]}\n"
            f"  %s = shard.scatter %x on @g grid_axes = [{a}] scatter_axis = 0 root = [{roots['second']}] : ({x_t}{root_types}) -> {results[2]}\n" +
            (f"  %b = shard.broadcast %x on @g grid_axes = [{a}] root = [%last] : ({x_t}, index) -> {x_t}\n" if dynamic else "") +
            f"  return %g, %r, %s{', %b' if dynamic else ''} : {', '.join(results)}\n}}\n")

    def ref(grid, ins):
        (x,) = ins
        g = spmd.gather(grid, x, [a], 1, [last])
        r = spmd.all_reduce(grid, [v.astype(np.float32) for v in x], [a], "max")
        s = spmd.scatter(grid, x, [a], 0, [1 % n])
        b = spmd.broadcast(grid, x, [a], [last])
        return [[g[i], r[i], s[i]] + ([b[i]] if dynamic else []) for i in range(grid.size)]
    return text, [((rows, cols), dt)], [dt, "f32", dt] + ([dt] if dynamic else []), ref


def pattern_halo(cfg):
    """shard.update_halo, then a stencil over the haloed tile: a 3-point one
    along the group's axis (1-D), or (variant `2d`, a 2-D grid split over
    both axes) a 3 x 3 box sum, which reads the corners. Variants `conv`
    and `conv2d`: linalg.conv_1d / conv_2d over the haloed tile with a
    kernel input (the overlap pass computes their interior while the halos
    travel). The global array's ends have no neighbour: their halos keep
    the zeros the tile starts with."""
    dt, z = cfg.dtype, cfg.scale
    conv = cfg.variant in ("conv", "conv2d")
    two_d = cfg.variant in ("2d", "conv2d")
    if two_d and len(cfg.grid) != 2:
        raise SystemExit(f"e2e.py: halo --variant {cfg.variant} needs a 2-D grid")
    shape = (4 * z, 3 * z) if two_d else (4 * z,)
    padded = tuple(d + 2 for d in shape)
    split = "[[0], [1]]" if two_d else f"[[{cfg.axis}]]"
    halos = "[1, 1, 1, 1]" if two_d else "[1, 1]"
    offsets = ", ".join("1" for _ in shape)
    sizes = ", ".join(str(d) for d in shape)
    ones = ", ".join("1" for _ in shape)
    # The taps: offsets into the haloed tile, with the stencil's weights
    # (a convolution's come from its kernel input).
    shifts = ([(i, j) for i in range(3) for j in range(3)] if two_d
              else [(i,) for i in range(3)])
    weights = [1.0] * 9 if two_d else [1.0, 2.0, 1.0]
    kernel = (3, 3) if two_d else (3,)
    args = f"%x: {tensor(shape, dt)}" + (f", %w: {tensor(kernel, dt)}" if conv else "")
    text = header(cfg.grid) + f"func.func @main({args}) -> {tensor(shape, dt)} {{\n"
    text += f"  %zero = arith.constant 0.0 : {dt}\n"
    text += f"  %e = tensor.empty() : {tensor(padded, dt)}\n"
    text += f"  %f = linalg.fill ins(%zero : {dt}) outs(%e : {tensor(padded, dt)}) -> {tensor(padded, dt)}\n"
    text += (f"  %d = tensor.insert_slice %x into %f[{offsets}] [{sizes}] [{ones}] : "
             f"{tensor(shape, dt)} into {tensor(padded, dt)}\n")
    text += (f"  %h = shard.update_halo %d on @g split_axes = {split} halo_sizes = {halos} : "
             f"{tensor(padded, dt)}\n")
    text += f"  %y0 = tensor.empty() : {tensor(shape, dt)}\n"
    if conv:
        op = "linalg.conv_2d" if two_d else "linalg.conv_1d"
        text += (f"  %yz = linalg.fill ins(%zero : {dt}) outs(%y0 : {tensor(shape, dt)}) -> {tensor(shape, dt)}\n"
                 f"  %y = {op} ins(%h, %w : {tensor(padded, dt)}, {tensor(kernel, dt)}) "
                 f"outs(%yz : {tensor(shape, dt)}) -> {tensor(shape, dt)}\n")
    else:
        names = []
        for k, shift in enumerate(shifts):
            at = ", ".join(str(o) for o in shift)
            text += (f"  %s{k} = tensor.extract_slice %h[{at}] [{sizes}] [{ones}] : "
                     f"{tensor(padded, dt)} to {tensor(shape, dt)}\n")
            names.append(f"%s{k}")
        dims = ", ".join(f"d{k}" for k in range(len(shape)))
        maps = ", ".join([f"affine_map<({dims}) -> ({dims})>"] * (len(names) + 1))
        block_args = ", ".join(f"%a{k}: {dt}" for k in range(len(names)))
        body = f"  ^bb0({block_args}, %out: {dt}):\n"
        acc = "%a0"  # weights[0] is 1
        for k in range(1, len(names)):
            term = f"%a{k}"
            if weights[k] != 1.0:
                body += f"    %w{k} = arith.constant {weights[k]} : {dt}\n"
                body += f"    %m{k} = arith.mulf %a{k}, %w{k} : {dt}\n"
                term = f"%m{k}"
            body += f"    %t{k} = arith.addf {acc}, {term} : {dt}\n"
            acc = f"%t{k}"
        body += f"    linalg.yield {acc} : {dt}\n"
        iters = ", ".join('"parallel"' for _ in shape)
        text += (f"  %y = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}} "
                 f"ins({', '.join(names)} : {', '.join(tensor(shape, dt) for _ in names)}) "
                 f"outs(%y0 : {tensor(shape, dt)}) {{\n{body}  }} -> {tensor(shape, dt)}\n")
    text += f"  return %y : {tensor(shape, dt)}\n}}\n"

    def ref(grid, ins):
        x = ins[0]
        axes = [0, 1] if two_d else [cfg.axis]
        out = []
        for r in range(grid.size):
            # The whole array along the split axes, as the group holds it.
            members = grid.group(r, axes)
            blocks = np.empty([grid.shape[a] for a in axes], dtype=object)
            for m in members:
                blocks[tuple(grid.coords(m)[a] for a in axes)] = x[m].astype(np.float64)
            whole = np.block(blocks.tolist()) if two_d else np.concatenate(list(blocks))
            pad = np.pad(whole, 1)
            start = [grid.coords(r)[a] * s for a, s in zip(axes, shape)]
            taps = ([(k, ins[1][r][k]) for k in np.ndindex(*kernel)] if conv
                    else zip(shifts, weights))
            acc = np.zeros(shape)
            for shift, weight in taps:
                index = tuple(slice(st + o, st + o + s) for st, o, s in zip(start, shift, shape))
                acc += weight * pad[index]
            out.append([acc])
        return out
    specs = [(shape, dt)] + ([(kernel, dt)] if conv else [])
    return text, specs, [dt], ref


class NormText:
    """MLIR text of the residual add and the norm (RMSNorm, or LayerNorm
    with `layer`) over the last dimension of [m, c] rows in `dt`, computing
    in f32: what a transformer layer does around its collectives."""

    def __init__(self, m, c, dt, layer):
        self.m, self.c, self.dt, self.layer = m, c, dt, layer
        self.t2, self.t1 = tensor((m, c), dt), tensor((c,), "f32")
        self.rows = tensor((m,), "f32")

    def ext(self, name):
        return (f"    %{name}f = arith.extf %{name} : {self.dt} to f32\n" if self.dt != "f32" else
                f"    %{name}f = arith.addf %{name}, %cz : f32\n")

    def trunc(self, name):
        return (f"    %{name}t = arith.truncf %{name} : f32 to {self.dt}\n    linalg.yield %{name}t : {self.dt}\n"
                if self.dt != "f32" else f"    linalg.yield %{name} : f32\n")

    def residual(self, out, r, res, bias=None):
        """%out = r (+ bias) + res."""
        dt, t2, t1 = self.dt, self.t2, self.t1
        ij, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (j)>"
        return (f"  %{out}e = tensor.empty() : {t2}\n"
                f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {ij}" + (f", {j_}" if bias else "") +
                f", {ij}], iterator_types = [\"parallel\", \"parallel\"]}} ins(%{r}, %{res}" + (f", %{bias}" if bias else "") +
                f" : {t2}, {t2}" + (f", {t1}" if bias else "") + f") outs(%{out}e : {t2}) {{\n"
                f"  ^bb0(%x: {dt}, %q: {dt}, " + ("%bb: f32, " if bias else "") + f"%o: {dt}):\n"
                "    %cz = arith.constant 0.0 : f32\n" + self.ext("x") + self.ext("q") +
                ("    %xb = arith.addf %xf, %bb : f32\n    %hs = arith.addf %xb, %qf : f32\n" if bias else
                 "    %hs = arith.addf %xf, %qf : f32\n") + self.trunc("hs") + f"  }} -> {t2}\n")

    def norm(self, out, h, gamma, beta=None):
        """%out = norm(%h) * gamma (+ beta); needs %zero (f32) in scope."""
        dt, t2, t1, rows, c = self.dt, self.t2, self.t1, self.rows, self.c
        red2 = '["parallel", "reduction"]'
        par2 = '["parallel", "parallel"]'
        ij, i_, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
        text = (f"  %{out}se = tensor.empty() : {rows}\n"
                f"  %{out}sz = linalg.fill ins(%zero : f32) outs(%{out}se : {rows}) -> {rows}\n")
        if self.layer:
            return text + (
                f"  %{out}s1 = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = {red2}}} "
                f"ins(%{h} : {t2}) outs(%{out}sz : {rows}) {{\n"
                f"  ^bb0(%x: {dt}, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n" + self.ext("x") +
                f"    %s = arith.addf %acc, %xf : f32\n    linalg.yield %s : f32\n  }} -> {rows}\n"
                f"  %{out}s2 = linalg.generic {{indexing_maps = [{ij}, {i_}, {i_}], iterator_types = {red2}}} "
                f"ins(%{h}, %{out}s1 : {t2}, {rows}) outs(%{out}sz : {rows}) {{\n"
                f"  ^bb0(%x: {dt}, %mu: f32, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n"
                f"    %inv = arith.constant {1.0 / c:.10e} : f32\n" + self.ext("x") +
                "    %mean = arith.mulf %mu, %inv : f32\n    %d = arith.subf %xf, %mean : f32\n"
                "    %dd = arith.mulf %d, %d : f32\n    %s = arith.addf %acc, %dd : f32\n"
                f"    linalg.yield %s : f32\n  }} -> {rows}\n"
                f"  %{out}e = tensor.empty() : {t2}\n"
                f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {i_}, {i_}, {j_}, {j_}, {ij}], iterator_types = {par2}}} "
                f"ins(%{h}, %{out}s1, %{out}s2, %{gamma}, %{beta} : {t2}, {rows}, {rows}, {t1}, {t1}) outs(%{out}e : {t2}) {{\n"
                f"  ^bb0(%x: {dt}, %mu: f32, %var: f32, %g: f32, %be: f32, %o: {dt}):\n"
                f"    %cz = arith.constant 0.0 : f32\n    %inv = arith.constant {1.0 / c:.10e} : f32\n"
                "    %eps = arith.constant 1.0e-5 : f32\n" + self.ext("x") +
                "    %mean = arith.mulf %mu, %inv : f32\n    %d = arith.subf %xf, %mean : f32\n"
                "    %v = arith.mulf %var, %inv : f32\n    %ve = arith.addf %v, %eps : f32\n"
                "    %rs = math.rsqrt %ve : f32\n    %t = arith.mulf %d, %rs : f32\n"
                "    %tg = arith.mulf %t, %g : f32\n    %u = arith.addf %tg, %be : f32\n" + self.trunc("u") +
                f"  }} -> {t2}\n")
        return text + (
            f"  %{out}ss = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = {red2}}} "
            f"ins(%{h} : {t2}) outs(%{out}sz : {rows}) {{\n"
            f"  ^bb0(%x: {dt}, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n" + self.ext("x") +
            "    %sq = arith.mulf %xf, %xf : f32\n    %s = arith.addf %acc, %sq : f32\n"
            f"    linalg.yield %s : f32\n  }} -> {rows}\n"
            f"  %{out}e = tensor.empty() : {t2}\n"
            f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {i_}, {j_}, {ij}], iterator_types = {par2}}} "
            f"ins(%{h}, %{out}ss, %{gamma} : {t2}, {rows}, {t1}) outs(%{out}e : {t2}) {{\n"
            f"  ^bb0(%x: {dt}, %s: f32, %g: f32, %o: {dt}):\n"
            f"    %cz = arith.constant 0.0 : f32\n    %inv = arith.constant {1.0 / c:.10e} : f32\n"
            "    %eps = arith.constant 1.0e-5 : f32\n" + self.ext("x") +
            "    %m = arith.mulf %s, %inv : f32\n    %v = arith.addf %m, %eps : f32\n"
            "    %rs = math.rsqrt %v : f32\n    %t = arith.mulf %xf, %rs : f32\n"
            "    %u = arith.mulf %t, %g : f32\n" + self.trunc("u") + f"  }} -> {t2}\n")


def norm_reference(h, gamma, beta=None):
    """RMSNorm (beta None) or LayerNorm of the rows of h, in float64."""
    if beta is not None:
        mu = h.mean(axis=1, keepdims=True)
        var = ((h - mu) ** 2).mean(axis=1, keepdims=True)
        return (h - mu) / np.sqrt(var + 1e-5) * gamma + beta
    return h / np.sqrt((h * h).mean(axis=1, keepdims=True) + 1e-5) * gamma


def pattern_ar_norm(cfg):
    """Row-parallel matmul, all-reduce, residual add (variant `rms`) or bias
    + residual add (variant `layer`), then RMSNorm or LayerNorm over the
    hidden dimension; returns the residual stream and the normed rows, as a
    transformer layer does. The activations are in the test's dtype, the
    norm computes in f32. The norm's weights differ per rank (no placement):
    every schedule must apply each rank's own, as the unsplit program does.
    `--scale` multiplies the tokens (4 per unit: decode at 1, prefill at 64
    and more). Variants `sp-rms` and `sp-layer` reduce-scatter the rows
    instead (sequence parallelism): the residual and the results are this
    rank's rows."""
    n, dt = cfg.group, cfg.dtype
    scatter = cfg.variant.startswith("sp-")
    # norm-rep / norm-own: RMSNorm, only the normed rows returned, its
    # weight replicated (placement) or each rank's own.
    norm_only = cfg.variant in ("norm-rep", "norm-own")
    # rms-rep / layer-rep: as rms / layer, every norm weight replicated
    # (placement), so that the whole chain may run on a rank's rows.
    weights_rep = cfg.variant in ("norm-rep", "rms-rep", "layer-rep")
    base = cfg.variant[:-4] if cfg.variant in ("rms-rep", "layer-rep") else cfg.variant
    norm = "rms" if norm_only else base[3:] if scatter else base
    layer = norm == "layer"
    if norm not in ("rms", "layer"):
        raise SystemExit("e2e.py: ar_norm needs --variant rms, layer, rms-rep, "
                         "layer-rep, sp-rms, sp-layer, norm-rep or norm-own")
    k, c = 16, 64
    full = 4 * cfg.scale * (n if scatter else 1)
    m = full // n if scatter else full
    rep = f" {{dist.placement = #dist.placement<@g, [{', '.join('replicate' for _ in cfg.grid)}]>}}"
    res_attr = "" if scatter else rep
    ops = NormText(m, c, dt, layer)
    t2, t1 = ops.t2, ops.t1
    tp = tensor((full, c), dt)
    ij = "affine_map<(i, j) -> (i, j)>"
    text = header(cfg.grid)
    text += (f"func.func @main(%a: {tensor((full, k), 'f32')}, %w: {tensor((k, c), 'f32')}, "
             f"%res: {t2}{res_attr}, %gamma: {t1}" + (rep if weights_rep else "") +
             (f", %bias: {t1}{rep}, %beta: {t1}" + (rep if weights_rep else "") if layer else "") +
             (f") -> {t2} {{\n" if norm_only else f") -> ({t2}, {t2}) {{\n") +
             f"  %zero = arith.constant 0.0 : f32\n" +
             matmul("y", "a", "w", tensor((full, k), "f32"), tensor((k, c), "f32"), (full, c), "f32"))
    if dt != "f32":
        text += (f"  %pe = tensor.empty() : {tp}\n"
                 f"  %p = linalg.generic {{indexing_maps = [{ij}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
                 f"ins(%y : {tensor((full, c), 'f32')}) outs(%pe : {tp}) {{\n"
                 f"  ^bb0(%v: f32, %o: {dt}):\n" + ops.trunc("v") + f"  }} -> {tp}\n")
    partial = "p" if dt != "f32" else "y"
    if scatter:
        text += (f"  %r = shard.reduce_scatter %{partial} on @g grid_axes = [{cfg.axis}] "
                 f"scatter_axis = 0 : {tp} -> {t2}\n")
    else:
        text += f"  %r = shard.all_reduce %{partial} on @g grid_axes = [{cfg.axis}] : {t2} -> {t2}\n"
    # The residual stream: r (+ bias) + res, then its norm.
    text += ops.residual("h", "r", "res", "bias" if layer else None)
    text += ops.norm("n", "h", "gamma", "beta" if layer else None)
    text += (f"  return %n : {t2}\n}}\n" if norm_only else
             f"  return %h, %n : {t2}, {t2}\n}}\n")

    def ref(grid, ins):
        a, w, res, gamma = ins[:4]
        partial = [quantize(ar @ wr, dt) for ar, wr in zip(a, w)]
        r = (spmd.reduce_scatter(grid, partial, [cfg.axis], 0) if scatter else
             spmd.all_reduce(grid, partial, [cfg.axis]))
        out = []
        for rank in range(grid.size):
            h = r[rank] + res[rank] + (ins[4][rank] if layer else 0)
            y = norm_reference(h, gamma[rank], ins[5][rank] if layer else None)
            out.append([y] if norm_only else [h, y])
        return out
    specs = [((full, k), "f32"), ((k, c), "f32"),
             ((m, c), dt) if scatter else ((m, c), dt, "replicated"),
             ((c,), "f32", "replicated") if weights_rep else ((c,), "f32")]
    if layer:
        specs += [((c,), "f32", "replicated"),
                  ((c,), "f32", "replicated") if weights_rep else ((c,), "f32")]
    return text, specs, [dt] if norm_only else [dt, dt], ref


def pattern_norm_ag(cfg):
    """Sequence parallelism's other half: this rank's rows, the residual
    add and its norm (RMSNorm, or LayerNorm with variant `layer`), then the
    normed rows all-gathered into a column-parallel matmul (in bf16 with f32
    accumulation for bf16). Returns the residual stream (this rank's rows)
    and the product. The norm's weights differ per rank. Variants
    `rms-after` and `rms-after-rep`: the gather comes first and the norm
    runs on the gathered rows, its weight each rank's own (the chain must
    stay after the gather: the trap) or replicated (it moves before the
    gather, onto this rank's rows). `--scale` is the tokens per rank."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    if cfg.variant not in ("rms", "layer", "rms-after", "rms-after-rep"):
        raise SystemExit("e2e.py: norm_ag needs --variant rms, layer, "
                         "rms-after or rms-after-rep")
    layer = cfg.variant == "layer"
    after = cfg.variant.startswith("rms-after")
    m, c, o = cfg.scale, 64, 48
    ops = NormText(m, c, dt, layer)
    whole = NormText(n * m, c, dt, layer)
    t2, t1, tg = ops.t2, ops.t1, tensor((n * m, c), dt)
    rep = f" {{dist.placement = #dist.placement<@g, [{', '.join('replicate' for _ in cfg.grid)}]>}}"
    gamma_attr = rep if cfg.variant == "rms-after-rep" else ""
    text = header(cfg.grid)
    text += (f"func.func @main(%xs: {t2}, %res: {t2}, %gamma: {t1}{gamma_attr}" +
             (f", %beta: {t1}" if layer else "") +
             f", %w: {tensor((c, o), dt)}) -> ({t2}, {tensor((n * m, o), acc)}) {{\n"
             f"  %zero = arith.constant 0.0 : f32\n")
    if acc != "f32":
        text += f"  %zacc = arith.constant 0.0 : {acc}\n"
    text += ops.residual("h", "xs", "res")
    if after:
        text += (f"  %hg = shard.all_gather %h on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {t2} -> {tg}\n"
                 + whole.norm("g", "hg", "gamma"))
    else:
        text += (ops.norm("n", "h", "gamma", "beta" if layer else None) +
                 f"  %g = shard.all_gather %n on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {t2} -> {tg}\n")
    text += (matmul("y", "g", "w", tg, tensor((c, o), dt), (n * m, o), acc).replace(
                 "%zero", "%zero" if acc == "f32" else "%zacc") +
             f"  return %h, %y : {t2}, {tensor((n * m, o), acc)}\n}}\n")

    def ref(grid, ins):
        x, res, gamma = ins[:3]
        w = ins[-1]
        hs = [quantize(xr + rr, dt) for xr, rr in zip(x, res)]
        if after:
            gathered = spmd.all_gather(grid, hs, [cfg.axis], 0)
            gs = [quantize(norm_reference(g, gamma[rank]), dt)
                  for rank, g in enumerate(gathered)]
        else:
            ns = [quantize(norm_reference(hs[rank], gamma[rank], ins[3][rank] if layer else None), dt)
                  for rank in range(grid.size)]
            gs = spmd.all_gather(grid, ns, [cfg.axis], 0)
        return [[hs[rank], gs[rank] @ w[rank]] for rank in range(grid.size)]
    specs = [((m, c), dt), ((m, c), dt),
             ((c,), "f32", "replicated") if gamma_attr else ((c,), "f32")]
    if layer:
        specs.append(((c,), "f32"))
    specs.append(((c, o), dt))
    # The product of rows rounded to the dtype: its error is the dtype's.
    return text, specs, [dt, acc], ref, [TOLERANCE[dt], TOLERANCE[dt]]


def pattern_ring_attention(cfg):
    """Context-parallel attention: q, k and v hold this rank's tokens of the
    sequence; k and v are all-gathered along it and feed softmax(q k^T *
    scale [+ mask]) v, written as frontends write it (separate max, exp,
    sum and divide generics). Variants: `causal` (a causal mask on global
    positions, through linalg.index and the rank's position), `full` (no
    mask), `keep` (the causal mask as a select of the kept scores, -inf
    elsewhere), `gqa` (causal, two q heads per k/v head: k and v are broadcast
    over the heads after the gather), `mask` (an additive mask input over
    the whole sequence), `softmax` (linalg.softmax, non-causal),
    `transposed` (non-causal, k transposed after the gather), `iota` (causal
    as HF builds it: a whole-sequence mask tensor of 0 and -inf from iotas
    of the key and row positions, sliced to this rank's rows and added to
    the scores). q/k/v are
    in the test's dtype, the softmax computes in f32, the probabilities are
    stored in the test's dtype for the second product, as frontends do."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    variant = cfg.variant or "causal"
    if variant not in ("causal", "keep", "full", "gqa", "mask", "softmax", "transposed",
                       "iota"):
        raise SystemExit(f"unknown variant {variant}")
    # bench/cpu/ring_attention.py sets larger heads and head_dim.
    heads, tl, d = getattr(cfg, "heads", 2), 4 * z, getattr(cfg, "head_dim", 8)
    kv_heads = heads // 2 if variant == "gqa" else heads
    rep = heads // kv_heads
    t = n * tl
    causal = variant in ("causal", "keep", "gqa", "iota")
    scale = 1.0 / np.sqrt(d)
    qs, ks, ss, os_ = (heads, tl, d), (kv_heads, tl, d), (heads, tl, t), (heads, tl, d)
    f32 = "f32"

    def ext(name):
        return f"arith.extf {name} : {dt} to f32" if dt != "f32" else None

    lines = []

    def emit(text):
        lines.append("  " + text)

    def body(args, ops):
        """A generic body: args [(name, type)], ops list of lines; last yields."""
        return ("{\n  ^bb0(" + ", ".join(f"{a}: {ty}" for a, ty in args) + "):\n" +
                "".join(f"    {o}\n" for o in ops) + "  }")

    emit(f"%zero = arith.constant 0.0 : f32")
    emit(f"%low = arith.constant -3.0e+38 : f32")
    emit(f"%kg = shard.all_gather %k on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(ks, dt)} -> {tensor((kv_heads, t, d), dt)}")
    emit(f"%vg = shard.all_gather %v on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(ks, dt)} -> {tensor((kv_heads, t, d), dt)}")
    kname, vname = "%kg", "%vg"
    if rep > 1:
        for src in ("k", "v"):
            bt = tensor((kv_heads, rep, t, d), dt)
            emit(f"%{src}b0 = tensor.empty() : {bt}")
            emit(f"%{src}b = linalg.generic {{indexing_maps = [affine_map<(a, b, c, e) -> (a, c, e)>, "
                 f"affine_map<(a, b, c, e) -> (a, b, c, e)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"parallel\"]}} "
                 f"ins(%{src}g : {tensor((kv_heads, t, d), dt)}) outs(%{src}b0 : {bt}) "
                 + body([("%x", dt), ("%o", dt)], [f"linalg.yield %x : {dt}"]) + f" -> {bt}")
            emit(f"%{src}r = tensor.collapse_shape %{src}b [[0, 1], [2], [3]] : {bt} into {tensor((heads, t, d), dt)}")
        kname, vname = "%kr", "%vr"
    def contraction(name, maps, a, b, a_type, out_shape, b_type=None):
        """name = sum over the last loop of a * b (in f32), as a generic."""
        out_t = tensor(out_shape, f32)
        emit(f"%{name}e = tensor.empty() : {out_t}")
        emit(f"%{name}z = linalg.fill ins(%zero : f32) outs(%{name}e : {out_t}) -> {out_t}")
        ops, x, y = [], "%a", "%b"
        if dt != "f32":
            ops, x, y = [f"%ae = {ext('%a')}", f"%be = {ext('%b')}"], "%ae", "%be"
        ops += [f"%mul = arith.mulf {x}, {y} : f32", "%add = arith.addf %acc, %mul : f32",
                "linalg.yield %add : f32"]
        emit(f"%{name} = linalg.generic {{indexing_maps = [{', '.join(f'affine_map<{m}>' for m in maps)}], "
             f"iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"reduction\"]}} "
             f"ins({a}, {b} : {a_type}, {b_type or tensor((heads, t, d), dt)}) outs(%{name}z : {out_t}) "
             + body([("%a", dt), ("%b", dt), ("%acc", f32)], ops) + f" -> {out_t}")

    # scores[h, i, j] = sum_c q[h, i, c] k[h, j, c]; variant `transposed`
    # (non-causal): k transposed to [h, c, j] after the gather first.
    key_map = "(h, i, j, c) -> (h, j, c)"
    if variant == "transposed":
        kt = tensor((heads, d, t), dt)
        emit(f"%kte = tensor.empty() : {kt}")
        emit(f"%kt = linalg.transpose ins({kname} : {tensor((heads, t, d), dt)}) outs(%kte : {kt}) permutation = [0, 2, 1]")
        kname, key_map = "%kt", "(h, i, j, c) -> (h, c, j)"
    contraction("s", ["(h, i, j, c) -> (h, i, c)", key_map, "(h, i, j, c) -> (h, i, j)"],
                "%q", kname, tensor(qs, dt), ss, b_type=tensor((heads, d, t), dt) if variant == "transposed" else None)
    ident3 = "affine_map<(h, i, j) -> (h, i, j)>"
    rows3 = "affine_map<(h, i, j) -> (h, i)>"
    par3 = '"parallel", "parallel", "parallel"'
    emit(f"%scale = arith.constant {scale!r} : f32")
    emit(f"%me = tensor.empty() : {tensor(ss, f32)}")
    if variant == "iota":
        # HF's create_causal_mask: kv_idx <= q_idx allowed, as 0 / -inf.
        it, mt = tensor((t,), "i64"), tensor((t, t), f32)
        emit(f"%ie = tensor.empty() : {it}")
        emit(f"%iota = linalg.generic {{indexing_maps = [affine_map<(a) -> (a)>], iterator_types = [\"parallel\"]}} "
             f"outs(%ie : {it}) " + body([("%o", "i64")], ["%a = linalg.index 0 : index",
                                                          "%c = arith.index_cast %a : index to i64",
                                                          "linalg.yield %c : i64"]) + f" -> {it}")
        emit(f"%cols = tensor.expand_shape %iota [[0, 1]] output_shape [1, {t}] : {it} into {tensor((1, t), 'i64')}")
        emit(f"%rows = tensor.expand_shape %iota [[0, 1]] output_shape [{t}, 1] : {it} into {tensor((t, 1), 'i64')}")
        emit(f"%c0 = arith.constant 0 : i64")
        emit(f"%mz = arith.constant dense<0.0> : tensor<f32>")
        emit(f"%mi = arith.constant dense<0xFF800000> : tensor<f32>")
        emit(f"%mke = tensor.empty() : {mt}")
        emit(f"%hf = linalg.generic {{indexing_maps = [affine_map<(a, b) -> (0, b)>, affine_map<(a, b) -> (a, 0)>, "
             f"affine_map<(a, b) -> ()>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> (a, b)>], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} "
             f"ins(%cols, %rows, %mz, %mi : {tensor((1, t), 'i64')}, {tensor((t, 1), 'i64')}, tensor<f32>, tensor<f32>) "
             f"outs(%mke : {mt}) "
             + body([("%kv", "i64"), ("%qi", "i64"), ("%z", f32), ("%ni", f32), ("%o", f32)],
                    ["%d = arith.subi %kv, %qi : i64", "%ok = arith.cmpi sle, %d, %c0 : i64",
                     "%r = arith.select %ok, %z, %ni : f32", "linalg.yield %r : f32"]) + f" -> {mt}")
        emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
        emit(f"%tl = arith.constant {tl} : index")
        emit(f"%base = arith.muli %pos, %tl : index")
        emit(f"%mine = tensor.extract_slice %hf[%base, 0] [{tl}, {t}] [1, 1] : {mt} to {tensor((tl, t), f32)}")
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, affine_map<(h, i, j) -> (i, j)>, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s, %mine : {tensor(ss, f32)}, {tensor((tl, t), f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%mk", f32), ("%o", f32)],
                    ["%y = arith.mulf %x, %scale : f32", "%r = arith.addf %y, %mk : f32",
                     "linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    elif causal:
        emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
        emit(f"%tl = arith.constant {tl} : index")
        emit(f"%base = arith.muli %pos, %tl : index")
        emit(f"%neg = arith.constant {'0xFF800000' if variant == 'keep' else '-1.0e+30'} : f32")
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s : {tensor(ss, f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%o", f32)],
                    ["%i = linalg.index 1 : index", "%j = linalg.index 2 : index",
                     "%gi = arith.addi %base, %i : index"] +
                    (["%past = arith.cmpi sle, %j, %gi : index", "%y = arith.mulf %x, %scale : f32",
                      "%r = arith.select %past, %y, %neg : f32"] if variant == "keep" else
                     ["%future = arith.cmpi ugt, %j, %gi : index", "%y = arith.mulf %x, %scale : f32",
                      "%r = arith.select %future, %neg, %y : f32"]) +
                    ["linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    elif variant == "mask":
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, affine_map<(h, i, j) -> (i, j)>, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s, %mask : {tensor(ss, f32)}, {tensor((tl, t), f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%mk", f32), ("%o", f32)],
                    ["%y = arith.mulf %x, %scale : f32", "%r = arith.addf %y, %mk : f32",
                     "linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    else:
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s : {tensor(ss, f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%o", f32)], ["%y = arith.mulf %x, %scale : f32", "linalg.yield %y : f32"])
             + f" -> {tensor(ss, f32)}")
    pt = tensor(ss, dt)
    if variant == "softmax":
        emit(f"%pe = tensor.empty() : {tensor(ss, f32)}")
        emit(f"%p32 = linalg.softmax dimension(2) ins(%sm : {tensor(ss, f32)}) outs(%pe : {tensor(ss, f32)}) -> {tensor(ss, f32)}")
        if dt != "f32":
            emit(f"%pc = tensor.empty() : {pt}")
            emit(f"%p = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
                 f"ins(%p32 : {tensor(ss, f32)}) outs(%pc : {pt}) "
                 + body([("%x", f32), ("%o", dt)], [f"%y = arith.truncf %x : f32 to {dt}", f"linalg.yield %y : {dt}"])
                 + f" -> {pt}")
        else:
            lines[-1] = lines[-1].replace("%p32 =", "%p =", 1)
    else:
        rt = tensor((heads, tl), f32)
        red = '"parallel", "parallel", "reduction"'
        emit(f"%mx0 = tensor.empty() : {rt}")
        emit(f"%mx1 = linalg.fill ins(%low : f32) outs(%mx0 : {rt}) -> {rt}")
        emit(f"%mx = linalg.generic {{indexing_maps = [{ident3}, {rows3}], iterator_types = [{red}]}} "
             f"ins(%sm : {tensor(ss, f32)}) outs(%mx1 : {rt}) "
             + body([("%x", f32), ("%acc", f32)], ["%r = arith.maximumf %acc, %x : f32", "linalg.yield %r : f32"])
             + f" -> {rt}")
        emit(f"%ee = tensor.empty() : {tensor(ss, f32)}")
        emit(f"%e = linalg.generic {{indexing_maps = [{ident3}, {rows3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%sm, %mx : {tensor(ss, f32)}, {rt}) outs(%ee : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%m", f32), ("%o", f32)],
                    ["%y = arith.subf %x, %m : f32", "%r = math.exp %y : f32", "linalg.yield %r : f32"])
             + f" -> {tensor(ss, f32)}")
        emit(f"%sum1 = linalg.fill ins(%zero : f32) outs(%mx0 : {rt}) -> {rt}")
        emit(f"%sum = linalg.generic {{indexing_maps = [{ident3}, {rows3}], iterator_types = [{red}]}} "
             f"ins(%e : {tensor(ss, f32)}) outs(%sum1 : {rt}) "
             + body([("%x", f32), ("%acc", f32)], ["%r = arith.addf %x, %acc : f32", "linalg.yield %r : f32"])
             + f" -> {rt}")
        emit(f"%pe = tensor.empty() : {pt}")
        div = ["%r = arith.divf %x, %zz : f32"]
        div += [f"%rt = arith.truncf %r : f32 to {dt}", f"linalg.yield %rt : {dt}"] if dt != "f32" else ["linalg.yield %r : f32"]
        emit(f"%p = linalg.generic {{indexing_maps = [{ident3}, {rows3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%e, %sum : {tensor(ss, f32)}, {rt}) outs(%pe : {pt}) "
             + body([("%x", f32), ("%zz", f32), ("%o", dt)], div) + f" -> {pt}")
    # out[h, i, c] = sum_j p[h, i, j] v[h, j, c]
    contraction("out", ["(h, i, c, j) -> (h, i, j)", "(h, i, c, j) -> (h, j, c)", "(h, i, c, j) -> (h, i, c)"],
                "%p", vname, pt, os_)
    args = f"%q: {tensor(qs, dt)}, %k: {tensor(ks, dt)}, %v: {tensor(ks, dt)}"
    specs = [(qs, dt), (ks, dt), (ks, dt)]
    if variant == "mask":
        args += f", %mask: {tensor((tl, t), f32)}"
        specs.append(((tl, t), f32))
    text = (header(cfg.grid) + f"func.func @main({args}) -> {tensor(os_, f32)} {{\n" +
            "\n".join(lines) + f"\n  return %out : {tensor(os_, f32)}\n}}\n")

    def ref(grid, ins):
        q, k, v = ins[:3]
        kg = spmd.all_gather(grid, k, [cfg.axis], 1)
        vg = spmd.all_gather(grid, v, [cfg.axis], 1)
        out = []
        for r in range(grid.size):
            kk = np.repeat(kg[r], rep, axis=0)
            vv = np.repeat(vg[r], rep, axis=0)
            s = np.einsum("hic,hjc->hij", q[r], kk) * np.float32(scale)
            if causal:
                pos = grid.coords(r)[cfg.axis]
                gi = pos * tl + np.arange(tl)[:, None]
                s = np.where(np.arange(t)[None, :] > gi, -1.0e30, s)
            if variant == "mask":
                s = s + ins[3][r]
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p = quantize(p / p.sum(axis=-1, keepdims=True), dt)
            out.append([np.einsum("hij,hjc->hic", p, vv)])
        return out
    # The probabilities are rounded to the test's dtype before the product
    # with v, and the ring rounds them unnormalized, block by block: the
    # result, in f32, is as close as that dtype allows.
    return text, specs, [f32], ref, [TOLERANCE[dt]]


def pattern_layers(cfg):
    """Repeated sequence-parallel layers whose compute is all contractions
    (so the cuda target runs them on cuBLASLt, without generated kernels):
    each layer all-gathers this rank's rows, multiplies them by its two
    weights and reduce-scatters the product back to the rows. Variant `3`
    or `2` is the number of layers (default 3); braid-outline-layers makes
    one function of a layer, called per layer."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    layers = int(cfg.variant or "3")
    z = cfg.scale
    m, h, f = 2 * z, 16 * z, 32 * z
    if dt != acc:
        raise SystemExit("e2e.py: layers needs an element type that is its "
                         "own accumulator (f32 or f16)")
    rows, full = tensor((m, h), dt), tensor((n * m, h), dt)
    args = ", ".join(f"%w{i}a: {tensor((h, f), dt)}, %w{i}b: {tensor((f, h), dt)}"
                     for i in range(layers))
    text = header(cfg.grid) + f"func.func @main(%x0: {rows}, {args}) -> {rows} {{\n"
    text += f"  %zero = arith.constant 0.0 : {dt}\n"
    for i in range(layers):
        text += (f"  %g{i} = shard.all_gather %x{i} on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {rows} -> {full}\n"
                 + matmul(f"y{i}", f"g{i}", f"w{i}a", full, tensor((h, f), dt), (n * m, f), dt)
                 + matmul(f"z{i}", f"y{i}", f"w{i}b", tensor((n * m, f), dt), tensor((f, h), dt), (n * m, h), dt)
                 + f"  %x{i + 1} = shard.reduce_scatter %z{i} on @g grid_axes = [{cfg.axis}] scatter_axis = 0 : {full} -> {rows}\n")
    text += f"  return %x{layers} : {rows}\n}}\n"

    def ref(grid, ins):
        xs = ins[0]
        for i in range(layers):
            wa, wb = ins[1 + 2 * i], ins[2 + 2 * i]
            gs = spmd.all_gather(grid, xs, [cfg.axis], 0)
            zs = [quantize(quantize(g @ a, dt) @ b, dt) for g, a, b in zip(gs, wa, wb)]
            xs = spmd.reduce_scatter(grid, zs, [cfg.axis], 0)
        return [[x] for x in xs]
    specs = [((m, h), dt)] + [((h, f), dt), ((f, h), dt)] * layers
    return text, specs, [dt], ref


def pattern_global_index(cfg):
    """Global view (shard.shard annotations, partitioned by upstream
    propagation): an elementwise op that reads its loop indices
    (linalg.index, as iotas, masks and positions do) on a tensor split
    across ranks. Each rank must see the indices of its own block. Variant
    `rows`: [8 * scale, 6] split along the rows over the grid's first axis;
    `both` (2-D grids): rows over the first axis and columns over the
    second; `axes` (2-D grids): the rows split over both axes at once. The
    op adds 100 * row + column to the input. Variant `extract`: an op
    doubles the split rows, and another reads them in reverse row order
    with tensor.extract at computed indices (as HF's mask code reads its
    positions), which upstream partitioning cloned onto the local block."""
    variant = cfg.variant or "rows"
    m, c = 8 * cfg.scale, 6 * cfg.grid[-1]
    if variant == "extract":
        return global_extract(cfg, m, c)
    if variant == "rows":
        split, blocks = f"[[{cfg.axis}]]", (cfg.grid[cfg.axis], 1)
    elif variant == "both" and len(cfg.grid) == 2:
        split, blocks = "[[0], [1]]", (cfg.grid[0], cfg.grid[1])
    elif variant == "axes" and len(cfg.grid) == 2:
        split, blocks = "[[0, 1]]", (cfg.grid[0] * cfg.grid[1], 1)
    else:
        raise SystemExit("e2e.py: global_index needs --variant rows, or both "
                         "or axes on a 2-D grid")
    local = (m // blocks[0], c // blocks[1])
    t = tensor((m, c), "f32")
    text = header(cfg.grid) + (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %s = shard.sharding @g split_axes = {split} : !shard.sharding\n"
        f"  %xs = shard.shard %x to %s : {t}\n"
        f"  %e = tensor.empty() : {t}\n"
        f"  %y = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%xs : {t}) outs(%e : {t}) {{\n"
        f"  ^bb0(%a: f32, %o: f32):\n"
        f"    %i = linalg.index 0 : index\n    %j = linalg.index 1 : index\n"
        f"    %c100 = arith.constant 100 : index\n"
        f"    %r = arith.muli %i, %c100 : index\n    %p = arith.addi %r, %j : index\n"
        f"    %pi = arith.index_cast %p : index to i32\n    %pf = arith.sitofp %pi : i32 to f32\n"
        f"    %v = arith.addf %a, %pf : f32\n    linalg.yield %v : f32\n"
        f"  }} -> {t}\n"
        f"  %ys = shard.shard %y to %s annotate_for_users : {t}\n"
        f"  return %ys : {t}\n}}\n")

    def ref(grid, ins):
        out = []
        for rank in range(grid.size):
            coords = grid.coords(rank)
            if variant == "rows":
                bi, bj = coords[cfg.axis], 0
            elif variant == "both":
                bi, bj = coords[0], coords[1]
            else:
                bi, bj = coords[0] * cfg.grid[1] + coords[1], 0
            rows = np.arange(bi * local[0], (bi + 1) * local[0])[:, None]
            cols = np.arange(bj * local[1], (bj + 1) * local[1])[None, :]
            out.append([ins[0][rank] + 100 * rows + cols])
        return out
    return text, [(local, "f32")], ["f32"], ref


def global_extract(cfg, m, c):
    n = cfg.grid[cfg.axis]
    local = (m // n, c)
    t = tensor((m, c), "f32")
    ident = "affine_map<(i, j) -> (i, j)>"
    text = header(cfg.grid) + (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %s = shard.sharding @g split_axes = [[{cfg.axis}]] : !shard.sharding\n"
        f"  %xs = shard.shard %x to %s : {t}\n"
        f"  %e = tensor.empty() : {t}\n"
        f"  %y = linalg.generic {{indexing_maps = [{ident}, {ident}], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%xs : {t}) outs(%e : {t}) {{\n"
        f"  ^bb0(%a: f32, %o: f32):\n"
        f"    %d = arith.addf %a, %a : f32\n    linalg.yield %d : f32\n"
        f"  }} -> {t}\n"
        f"  %z = linalg.generic {{indexing_maps = [{ident}], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} outs(%e : {t}) {{\n"
        f"  ^bb0(%o: f32):\n"
        f"    %i = linalg.index 0 : index\n    %j = linalg.index 1 : index\n"
        f"    %last = arith.constant {m - 1} : index\n"
        f"    %r = arith.subi %last, %i : index\n"
        f"    %v = tensor.extract %y[%r, %j] : {t}\n    linalg.yield %v : f32\n"
        f"  }} -> {t}\n"
        f"  %zs = shard.shard %z to %s annotate_for_users : {t}\n"
        f"  return %zs : {t}\n}}\n")

    def ref(grid, ins):
        out = []
        for rank in range(grid.size):
            # The rows of this rank's group along the axis, in its order.
            coords = list(grid.coords(rank))
            group = {}
            for peer in range(grid.size):
                other = list(grid.coords(peer))
                if all(a == b for k, (a, b) in enumerate(zip(coords, other))
                       if k != cfg.axis):
                    group[other[cfg.axis]] = ins[0][peer]
            full = 2 * np.concatenate([group[b] for b in range(n)])[::-1]
            b = coords[cfg.axis]
            out.append([full[b * local[0]:(b + 1) * local[0]]])
        return out
    return text, [(local, "f32")], ["f32"], ref


def pattern_pipeline(cfg):
    """Pipeline parallelism through upstream's point-to-point ops: the
    group along --axis is the stages, each rank's weights its stage's
    layer (tanh(x W1) W2 + x; with a 2-D grid the layer is tensor
    parallel over the other axis, its partial sums all-reduced there). The
    micro-batches go through in ticks, GPipe's forward schedule written
    out: at each tick a rank takes its next micro-batch (the first stage)
    or what the previous stage sent it, computes its layer, and sends the
    result on with shard.send to this rank's position + 1, received by
    shard.recv from the position - 1. The last stage collects the results
    (the others return zeros)."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    tp_axis = None
    if len(cfg.grid) == 2:
        tp_axis = 1 - cfg.axis
    micro, rows, hidden, ffn = 3, 2 * z, 8, 16
    ticks = micro + n - 1
    act, wt = "f32", dt
    xs, w1s, w2s, outs = (micro * rows, hidden), (hidden, ffn), (ffn, hidden), (micro * rows, hidden)
    t_in, t_h, t_x = tensor((rows, hidden), act), tensor((rows, ffn), act), tensor(xs, act)
    lines = []

    def emit(text):
        lines.append("  " + text)

    emit("%zero = arith.constant 0.0 : f32")
    emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
    emit("%c0 = arith.constant 0 : index")
    emit("%c1 = arith.constant 1 : index")
    emit(f"%clast = arith.constant {n - 1} : index")
    emit("%first = arith.cmpi eq, %pos, %c0 : index")
    emit("%last = arith.cmpi eq, %pos, %clast : index")
    emit("%next = arith.addi %pos, %c1 : index")
    emit("%prev = arith.subi %pos, %c1 : index")
    emit(f"%e_in = tensor.empty() : {t_in}")
    emit(f"%zin = linalg.fill ins(%zero : f32) outs(%e_in : {t_in}) -> {t_in}")
    emit(f"%e_out = tensor.empty() : {t_x}")
    emit(f"%out0 = linalg.fill ins(%zero : f32) outs(%e_out : {t_x}) -> {t_x}")
    recv, out = "%zin", "%out0"
    for tick in range(ticks):
        p = f"t{tick}_"
        if tick < micro:
            emit(f"%{p}x = tensor.extract_slice %x[{tick * rows}, 0] [{rows}, {hidden}] [1, 1] : {t_x} to {t_in}")
            xin = f"%{p}x"
        else:
            xin = "%zin"
        emit(f"%{p}in = arith.select %first, {xin}, {recv} : {t_in}")
        emit(f"%{p}he = tensor.empty() : {t_h}")
        emit(f"%{p}hz = linalg.fill ins(%zero : f32) outs(%{p}he : {t_h}) -> {t_h}")
        emit(f"%{p}h = linalg.matmul ins(%{p}in, %w1 : {t_in}, {tensor(w1s, wt)}) outs(%{p}hz : {t_h}) -> {t_h}")
        emit(f"%{p}ae = tensor.empty() : {t_h}")
        emit(f"%{p}a = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%{p}h : {t_h}) outs(%{p}ae : {t_h}) {{\n"
             f"  ^bb0(%v: f32, %o: f32):\n    %th = math.tanh %v : f32\n    linalg.yield %th : f32\n  }} -> {t_h}")
        emit(f"%{p}ye = tensor.empty() : {t_in}")
        emit(f"%{p}yz = linalg.fill ins(%zero : f32) outs(%{p}ye : {t_in}) -> {t_in}")
        emit(f"%{p}yp = linalg.matmul ins(%{p}a, %w2 : {t_h}, {tensor(w2s, wt)}) outs(%{p}yz : {t_in}) -> {t_in}")
        y = f"%{p}yp"
        if tp_axis is not None:
            emit(f"%{p}yr = shard.all_reduce %{p}yp on @g grid_axes = [{tp_axis}] : {t_in} -> {t_in}")
            y = f"%{p}yr"
        emit(f"%{p}re = tensor.empty() : {t_in}")
        emit(f"%{p}y = linalg.add ins({y}, %{p}in : {t_in}, {t_in}) outs(%{p}re : {t_in}) -> {t_in}")
        mb = tick - (n - 1)
        if mb >= 0:
            emit(f"%{p}kept = arith.select %last, %{p}y, %zin : {t_in}")
            emit(f"%{p}out = tensor.insert_slice %{p}kept into {out}[{mb * rows}, 0] [{rows}, {hidden}] [1, 1] : {t_in} into {t_x}")
            out = f"%{p}out"
        if tick < ticks - 1:
            emit(f"%{p}sent = shard.send %{p}y on @g grid_axes = [{cfg.axis}] destination = [%next] : ({t_in}, index) -> {t_in}")
            emit(f"%{p}got = shard.recv %{p}y on @g grid_axes = [{cfg.axis}] source = [%prev] : ({t_in}, index) -> {t_in}")
            recv = f"%{p}got"
    text = (header(cfg.grid) +
            f"func.func @main(%x: {t_x}, %w1: {tensor(w1s, wt)}, %w2: {tensor(w2s, wt)}) -> {t_x} {{\n" +
            "\n".join(lines) + f"\n  return {out} : {t_x}\n}}\n")

    def ref(grid, ins):
        x, w1, w2 = ins
        size = grid.size
        recv_ = [np.zeros((rows, hidden)) for _ in range(size)]
        out_ = [np.zeros(outs) for _ in range(size)]
        pos = [grid.coords(r)[cfg.axis] for r in range(size)]
        for tick in range(ticks):
            inp = []
            for r in range(size):
                xin = x[r][tick * rows:(tick + 1) * rows] if tick < micro else np.zeros((rows, hidden))
                inp.append(xin if pos[r] == 0 else recv_[r])
            part = [np.tanh(inp[r] @ w1[r]) @ w2[r] for r in range(size)]
            if tp_axis is not None:
                part = spmd.all_reduce(grid, part, [tp_axis])
            y = [part[r] + inp[r] for r in range(size)]
            mb = tick - (n - 1)
            if mb >= 0:
                for r in range(size):
                    if pos[r] == n - 1:
                        out_[r][mb * rows:(mb + 1) * rows] = y[r]
            # What the previous stage (rotating, as dist.shift does) sent.
            for r in range(size):
                coords = list(grid.coords(r))
                coords[cfg.axis] = (coords[cfg.axis] - 1) % n
                recv_[r] = y[grid.rank(coords)]
        return [[o] for o in out_]
    # The activations stay f32; products with dt weights round nothing
    # else, but bf16 weights still bound the result by bf16's tolerance.
    return text, [(xs, act), (w1s, wt), (w2s, wt)], [act], ref, [TOLERANCE[dt]]


PATTERNS = {
    "pipeline": pattern_pipeline,
    "layers": pattern_layers,
    "global_index": pattern_global_index,
    "ring_attention": pattern_ring_attention,
    "ar_norm": pattern_ar_norm,
    "norm_ag": pattern_norm_ag,
    "halo": pattern_halo,
    "rooted": pattern_rooted,
    "ag_matmul": pattern_ag_matmul,
    "matmul_rs": pattern_matmul_rs,
    "matmul_ar": pattern_matmul_ar,
    "a2a": pattern_a2a,
    "micro_batch": pattern_micro_batch,
    "async": pattern_async,
}


# --- driver ------------------------------------------------------------------

class Config:
    pass


def run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        sys.stdout.write(f"command failed ({proc.returncode}): {' '.join(cmd)}\n")
        sys.stdout.write(proc.stdout + proc.stderr)
    return proc


def check_ptx(args, compile_cmd, lib, label, mode):
    """--compile-only: the library was built (cubins through ptxas); now
    the kernels' PTX through `ptxas -v`, which must report no spills.
    Returns True on failure."""
    ptx = lib + ".ptx"
    cmd = [c for c in compile_cmd if not c.startswith("--report=")]
    cmd[cmd.index("-o") + 1] = ptx
    if run(cmd + ["--emit=ptx"]).returncode != 0:
        return True
    with open(ptx) as f:
        text = f.read()
    if ".entry" not in text:
        # Everything ran on cuBLASLt and the runtime: no kernel to check.
        print(f"PASS {label} mode={mode} sm_{args.sm}: compiled, 0 kernels")
        return False
    if f".target sm_{args.sm}" not in text:
        print(f"FAIL {label} mode={mode}: the PTX does not target sm_{args.sm}")
        return True
    # Dynamic shared memory must be an extern, unsized array: a sized or
    # static declaration is laid out among the static variables (the
    # reduction buffers) and the launch's dynamic bytes overlap them.
    # Declarations start with a directive; loads and stores that address
    # the array directly ("ld.shared.v4.b32 ..., [__dynamic_shmem__0]") are
    # not declarations.
    shmem = re.findall(r"^\s*(\.\S.*\b__dynamic_shmem__\d+\b.*);", text, re.M)
    shmem = [d for d in shmem if ".shared" in d]
    bad = [d for d in shmem if not re.fullmatch(
        r"\.extern \.shared \.align \d+ \.b8 __dynamic_shmem__\d+\[\]", d.strip())]
    if bad:
        print(f"FAIL {label} mode={mode}: dynamic shared memory declared as {bad}")
        return True
    extern = "dynamic shared memory .extern" if shmem else "no dynamic shared memory"
    proc = run([args.ptxas, f"-arch=sm_{args.sm}", "-v", ptx, "-o", os.devnull])
    if proc.returncode != 0:
        return True
    report = proc.stdout + proc.stderr
    kernels = report.count("Compiling entry function")
    spills = [line.strip() for line in report.splitlines()
              if any(int(n) for n in re.findall(r"(\d+) bytes spill", line))]
    if kernels == 0 or spills:
        print(f"FAIL {label} mode={mode}: {kernels} kernels; spills: {spills}")
        return True
    print(f"PASS {label} mode={mode} sm_{args.sm}: compiled, {kernels} kernels, no spills, {extern}")
    return False


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pattern", choices=sorted(PATTERNS))
    parser.add_argument("--grid", default="4")
    parser.add_argument("--axis", type=int, default=0)
    parser.add_argument("--dtype", default="f32", choices=sorted(TOLERANCE))
    parser.add_argument("--variant", default="")
    parser.add_argument("--modes", default="force,off")
    parser.add_argument("--expect", default="",
                        help="strategy the force run must apply (from the report)")
    parser.add_argument("--expect-transport", default="",
                        help="transport (symmetric or two-sided) the force "
                             "run's --expect strategy must use")
    parser.add_argument("--expect-balanced", choices=["yes", "no"],
                        default="",
                        help="whether the force run's ring_attention must "
                             "be balanced (the report's scores.balanced)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="calls of the compiled program per run (the "
                             "results of every call must match)")
    parser.add_argument("--compile-flags", default="")
    parser.add_argument("--expect-divergent", action="store_true",
                        help="the ranks of a group must get different results "
                             "(inputs that are not replicated must show)")
    parser.add_argument("--bin", default=os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "bin"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=int, default=1,
                        help="multiplies the pattern's sizes (keeping their divisibility)")
    parser.add_argument("--keep", default="")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sm", default="90a")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--emulate", action="store_true",
                        help="cuda: compile for and run on the emulated "
                        "device (every kernel from its PTX, on the CPU)")
    parser.add_argument("--transport", default="loopback",
                        choices=["loopback", "nccl", "nccl-file"])
    parser.add_argument("--build-only", default="")
    parser.add_argument("--prebuilt", default="")
    parser.add_argument("--ptxas", default="ptxas",
                        help="ptxas for --compile-only spill checks")
    parser.add_argument("--run-timeout", type=float, default=60,
                        help="seconds a run may take (the runner's --timeout)")
    args = parser.parse_args()

    cfg = Config()
    cfg.grid = [int(s) for s in args.grid.split("x")]
    cfg.axis = args.axis
    cfg.group = cfg.grid[args.axis]
    cfg.dtype = args.dtype
    cfg.variant = args.variant
    cfg.scale = args.scale
    grid = spmd.Grid(cfg.grid)
    made = PATTERNS[args.pattern](cfg)
    text, specs, result_dtypes, reference = made[:4]
    # A pattern may bound its results by a looser element type than theirs
    # (an f32 result of products rounded to bf16 on the way).
    tolerances = made[4] if len(made) > 4 else [TOLERANCE[d] for d in result_dtypes]

    work = args.keep or tempfile.mkdtemp(prefix="braid-e2e-")
    os.makedirs(work, exist_ok=True)
    try:
        program = os.path.join(work, "program.mlir")
        with open(program, "w") as f:
            f.write(text)
        rng = np.random.default_rng(args.seed)
        inputs = []  # per argument: per-rank float64 values the program sees
        for index, spec in enumerate(specs):
            shape, dtype = spec[0], spec[1]
            replicated = len(spec) > 2 and spec[2] == "replicated"
            per_rank = []
            shared = rng.uniform(-1, 1, size=shape)
            for rank in range(grid.size):
                raw = shared if replicated else rng.uniform(-1, 1, size=shape)
                np.save(os.path.join(work, f"a{index}.r{rank}.npy"), storage(raw, dtype))
                per_rank.append(quantize(raw, dtype))
            inputs.append(per_rank)
        expected = reference(grid, inputs)

        label = f"{args.pattern}{('/' + cfg.variant) if cfg.variant else ''} grid={args.grid} axis={cfg.axis} {cfg.dtype}"
        failed = False
        for mode in args.modes.split(","):
            built = args.build_only or args.prebuilt
            if built:
                os.makedirs(built, exist_ok=True)
            lib = os.path.join(built or work, f"prog-{mode}.so")
            report = os.path.join(built or work, f"report-{mode}.json")
            compile_cmd = [os.path.join(args.bin, "braid-compile"), program, "-o", lib,
                           f"--overlap={mode}", f"--report={report}",
                           "--check-schedule"] + args.compile_flags.split()
            if args.target == "cuda":
                compile_cmd += ["--target=cuda", f"--sm={args.sm}"]
                if args.emulate:
                    compile_cmd.append("--emulate")
            if not args.prebuilt and run(compile_cmd).returncode != 0:
                return 1
            if args.build_only:
                print(f"BUILT {label} mode={mode}: {lib}")
                continue
            if mode == "force" and args.expect:
                with open(report) as f:
                    records = json.load(f)["collectives"]
                strategies = [c["strategy"] for c in records]
                if args.expect not in strategies:
                    print(f"FAIL {label} mode={mode}: expected strategy {args.expect}, report has {strategies}")
                    return 1
                transports = [c["transport"] for c in records
                              if c["strategy"] == args.expect]
                if args.expect_transport and args.expect_transport not in transports:
                    print(f"FAIL {label} mode={mode}: expected {args.expect} "
                          f"over {args.expect_transport}, report has {transports}")
                    return 1
                balanced = [c.get("scores", {}).get("balanced") for c in records
                            if c["strategy"] == "ring_attention"]
                want = args.expect_balanced == "yes"
                if args.expect_balanced and (not balanced or
                                             any(b != want for b in balanced)):
                    print(f"FAIL {label} mode={mode}: expected ring_attention "
                          f"balanced={want}, report has {balanced}")
                    return 1
            if args.compile_only:
                if check_ptx(args, compile_cmd, lib, label, mode):
                    return 1
                continue
            id_file = None
            if args.target == "cuda" and args.transport == "loopback":
                run_cmd = [os.path.join(args.bin, "braid-exec-cuda"), lib,
                           f"--loopback={grid.size}"]
            elif args.target == "cuda" and args.transport == "nccl-file":
                run_cmd = [os.path.join(args.bin, "braid-exec-cuda"), lib]
                id_file = os.path.join(work, f"nccl-id-{mode}")
            else:
                runner = "braid-exec-cuda" if args.target == "cuda" else "braid-exec"
                run_cmd = launch.mpirun(grid.size, os.path.join(args.bin, runner), lib)
            run_cmd.append(f"--timeout={args.run_timeout:g}")
            if args.target == "cuda" and args.emulate:
                run_cmd.append("--emulate")
            if args.repeat > 1:
                run_cmd.append(f"--repeat={args.repeat}")
            run_cmd += [f"--input=@{work}/a{i}.r{{rank}}.npy" for i in range(len(specs))]
            run_cmd += [f"--output=@{work}/{mode}.o{k}.r{{rank}}.npy" for k in range(len(result_dtypes))]
            # Past its own timeout the runner reports and exits; the kill
            # is for a runner that cannot (a hung driver call).
            limit = args.run_timeout + 15
            if id_file:
                proc = launch.run_ranks(run_cmd, grid.size, id_file, limit)
            else:
                proc = launch.run(run_cmd, limit)
            if proc.returncode != 0:
                sys.stdout.write(f"command failed ({proc.returncode}): {' '.join(run_cmd)}\n")
                sys.stdout.write(proc.stdout + proc.stderr)
                print(f"FAIL {label} mode={mode}: the run failed")
                return 1
            worst = 0.0
            for rank in range(grid.size):
                for k, dtype in enumerate(result_dtypes):
                    got = load(os.path.join(work, f"{mode}.o{k}.r{rank}.npy"), dtype)
                    want = expected[rank][k]
                    if got.shape != want.shape:
                        print(f"FAIL {label} mode={mode}: rank {rank} result {k} has shape {got.shape}, expected {want.shape}")
                        return 1
                    err, index = relative_error(got, want)
                    worst = max(worst, err)
                    if not err <= tolerances[k]:
                        print(f"FAIL {label} mode={mode}: rank {rank} result {k} element {list(index)}: "
                              f"got {got[index]}, expected {want[index]} (relative error {err:.3g} > {tolerances[k]})")
                        failed = True
            if args.expect_divergent and not failed:
                first = [load(os.path.join(work, f"{mode}.o0.r{r}.npy"), result_dtypes[0])
                         for r in grid.group(0, [cfg.axis])]
                if all(np.array_equal(first[0], other) for other in first[1:]):
                    print(f"FAIL {label} mode={mode}: every rank of a group got the same "
                          "result, but their inputs differ")
                    failed = True
            if not failed:
                print(f"PASS {label} mode={mode} (max relative error {worst:.2e})")
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
