#!/usr/bin/env python3
"""The cpu target's vectorized kernels against numpy, on CPU ranks.

One program per element type (f32, bf16, f16) holds the memory-bound
patterns of transformer layers on a torch-mlir-like 3-D activation
(2 x 3 x 100: 100 columns are six 16-lane vectors and a scalar remainder):
layernorm, RMSNorm, softmax, bias + GELU (tanh) + residual, SiLU-gated
product, GELU in its erf form, log-sum-exp and a softmax under an i1 mask
(HF's attention masks), so that exp, tanh, erf,
log, rsqrt, sum and max reductions and row and column broadcasts all go
through braid-vectorize-kernels and braid-polynomial-math. Each program is
compiled with --vector-bytes=64 (the default) and 0 (scalar loops), run on
RANKS ranks (no collectives: every rank computes the same) with braid-exec,
the vectorized build once per code path BRAID_CPU_DISPATCH allows
(generic, x86-64-v3, x86-64-v4; paths wider than this CPU fall back to the
widest it has), and every result is compared with numpy in float64 from
the same, rounded, inputs.

With --threads=N each rank runs its kernels' tiles on N threads
(BRAID_NUM_THREADS, braid_rt_parallel_for).

Usage: vector_check.py BIN_DIR RANKS WORK_DIR [--threads N]
Exit status 0 when every result matches.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                "python"))
import launch  # noqa: E402
from braid.dtypes import TOLERANCE, from_storage, quantize, to_storage  # noqa: E402
from braid.models import Function, Grid, gelu, silu  # noqa: E402

SHAPE = (2, 3, 100)
EPS = 1e-5
PATHS = ("generic", "x86-64-v3", "x86-64-v4")


def program(ranks, dtype):
    """(MLIR text, input shapes, [(name, reference(*inputs))])."""
    fn = Function(Grid([ranks]))
    hidden = SHAPE[-1]
    rows = (0, 1)
    x = fn.arg("x", SHAPE, dtype)
    w = fn.arg("w", (hidden,), dtype)
    b = fn.arg("b", (hidden,), dtype)
    r = fn.arg("res", SHAPE, dtype)
    results, checks = [], []

    total = fn.reduce_last(fn.map([x], "f32", lambda s, v: v), "sum")
    mean = fn.map([total], "f32", lambda s, v: s.div(v, s.const(hidden)))
    centered = fn.map([x, (mean, rows)], "f32", lambda s, v, m: s.sub(v, m))
    var = fn.reduce_last(
        fn.map([centered], "f32", lambda s, v: s.mul(v, v)), "sum")
    inv = fn.map([var], "f32", lambda s, v: s.rsqrt(
        s.add(s.div(v, s.const(hidden)), s.const(EPS))))
    results.append(fn.map(
        [centered, (inv, rows), (w, (2,)), (b, (2,))], dtype,
        lambda s, c, i, wv, bv: s.add(s.mul(s.mul(c, i), wv), bv)))

    def layernorm(x, w, b, r, mask):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + EPS) * w + b
    checks.append(("layernorm", layernorm))

    squares = fn.reduce_last(
        fn.map([x], "f32", lambda s, v: s.mul(v, v)), "sum")
    inv = fn.map([squares], "f32", lambda s, v: s.rsqrt(
        s.add(s.div(v, s.const(hidden)), s.const(EPS))))
    results.append(fn.map([x, (inv, rows), (w, (2,))], dtype,
                          lambda s, v, i, wv: s.mul(s.mul(v, i), wv)))
    checks.append(("rmsnorm", lambda x, w, b, r, mask: x / np.sqrt(
        (x * x).mean(-1, keepdims=True) + EPS) * w))

    peak = fn.reduce_last(fn.map([x], "f32", lambda s, v: v), "max")
    e = fn.map([x, (peak, rows)], "f32", lambda s, v, m: s.exp(s.sub(v, m)))
    esum = fn.reduce_last(e, "sum")
    results.append(fn.map([e, (esum, rows)], dtype,
                          lambda s, v, t: s.div(v, t)))

    def softmax(x, w, b, r, mask):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    checks.append(("softmax", softmax))

    results.append(fn.map([x, (b, (2,)), r], dtype,
                          lambda s, v, bv, rv: s.add(s.gelu(s.add(v, bv)), rv)))
    checks.append(("bias + GELU + residual",
                   lambda x, w, b, r, mask: gelu(x + b) + r))

    results.append(fn.map([x, r], dtype, lambda s, v, rv: s.mul(s.silu(v), rv)))
    checks.append(("SiLU-gated", lambda x, w, b, r, mask: silu(x) * r))

    def erf_gelu(s, v):
        scaled = s.mul(v, s.const(0.7071067811865476))
        erf = s.emit(f"math.erf {scaled} : f32")
        return s.mul(s.mul(v, s.const(0.5)), s.add(erf, s.const(1.0)))
    results.append(fn.map([x], dtype, erf_gelu))
    from math import erf
    verf = np.vectorize(erf)
    checks.append(("GELU (erf)",
                   lambda x, w, b, r, mask: 0.5 * x * (1 + verf(x / np.sqrt(2)))))

    lse = fn.reduce_last(fn.map([x], "f32", lambda s, v: s.exp(v)), "sum")
    results.append(fn.map(
        [lse], dtype, lambda s, v: s.emit(f"math.log {v} : f32")))
    checks.append(("log-sum-exp",
                   lambda x, w, b, r, mask: np.log(np.exp(x).sum(-1))))

    # A masked softmax (an i1 mask, as HF's attention masks: a byte per
    # element in memory, so its op stays scalar; the rest vectorizes).
    mask = fn.arg("mask", SHAPE, "i1")
    masked = fn.map([x, mask], "f32", lambda s, v, m: s.emit(
        f"arith.select {m}, {v}, {s.const(-3.0e38)} : f32"))
    peak = fn.reduce_last(masked, "max")
    e = fn.map([masked, (peak, rows)], "f32",
               lambda s, v, m: s.exp(s.sub(v, m)))
    esum = fn.reduce_last(e, "sum")
    results.append(fn.map([e, (esum, rows)], dtype,
                          lambda s, v, t: s.div(v, t)))

    def masked_softmax(x, w, b, r, mask):
        e = np.where(mask, np.exp(x - np.where(mask, x, -np.inf).max(
            -1, keepdims=True)), 0.0)
        return e / e.sum(-1, keepdims=True)
    checks.append(("masked softmax", masked_softmax))

    shapes = [SHAPE, (hidden,), (hidden,), SHAPE]
    return fn.grid.mlir() + fn.text(results), shapes, checks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("ranks", type=int)
    parser.add_argument("work")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(5)
    failed = False
    for dtype in ("f32", "bf16", "f16"):
        text, shapes, checks = program(args.ranks, dtype)
        source = os.path.join(args.work, f"{dtype}.mlir")
        with open(source, "w") as f:
            f.write(text)
        raw = [rng.uniform(-2, 2, size=s) for s in shapes]
        inputs = [quantize(v, dtype) for v in raw]
        # Every row keeps its first column.
        mask = rng.random(SHAPE) < 0.7
        mask[..., 0] = True
        paths = []
        for i, value in enumerate(raw):
            paths.append(os.path.join(args.work, f"{dtype}.in{i}.npy"))
            np.save(paths[-1], to_storage(value, dtype))
        paths.append(os.path.join(args.work, f"{dtype}.mask.npy"))
        np.save(paths[-1], mask)
        inputs.append(mask)
        builds = []
        for vector_bytes in (64, 0):
            lib = os.path.join(args.work, f"{dtype}.v{vector_bytes}.so")
            compiled = subprocess.run(
                [os.path.join(args.bin, "braid-compile"), source,
                 f"--vector-bytes={vector_bytes}", "-o", lib],
                capture_output=True, text=True)
            if compiled.returncode:
                sys.exit(f"FAIL: braid-compile {dtype}:\n{compiled.stderr}")
            if vector_bytes:
                builds += [(lib, f"{dtype} {path}", path) for path in PATHS]
            else:
                builds.append((lib, f"{dtype} scalar loops", "generic"))
        for lib, label, path in builds:
            outs = [os.path.join(args.work, f"{dtype}.out{j}.{{rank}}.npy")
                    for j in range(len(checks))]
            cmd = (launch.mpirun(args.ranks, "-x", f"BRAID_CPU_DISPATCH={path}",
                                 "-x", f"BRAID_NUM_THREADS={args.threads}",
                                 os.path.join(args.bin, "braid-exec"), lib,
                                 "--timeout=60")
                   + [f"--input=@{p}" for p in paths]
                   + [f"--output=@{o}" for o in outs])
            ran = subprocess.run(cmd, capture_output=True, text=True)
            if ran.returncode:
                sys.exit(f"FAIL {label}: braid-exec:\n{ran.stdout}{ran.stderr}")
            worst, bad = 0.0, False
            limit = TOLERANCE["kernel"][dtype]
            for rank in range(args.ranks):
                for out, (name, reference) in zip(outs, checks):
                    want = reference(*inputs)
                    got = from_storage(np.load(out.replace("{rank}", str(rank))),
                                       dtype).astype(np.float64)
                    if got.shape != want.shape:
                        bad = True
                        print(f"FAIL {label} {name}: shape {got.shape}, "
                              f"expected {want.shape}")
                        continue
                    scale = max(1.0, float(np.abs(want).max()))
                    error = float(np.abs(got - want).max()) / scale
                    worst = max(worst, error)
                    if not error <= limit:
                        bad = True
                        print(f"FAIL {label} rank {rank} {name}: max error "
                              f"{error:.3g} > {limit}")
            failed |= bad
            print(f"{'FAIL' if bad else 'PASS'} {label} "
                  f"(max error {worst:.2e})")
    sys.exit(1 if failed else 0)


main()
