#!/usr/bin/env python3
"""Braid's fused memory-bound kernels on one GPU: layernorm, RMSNorm,
softmax, and bias + GELU + residual, at LLM sizes (16384 x 8192 bf16).

Each pattern is one program (written with braid.models.Function) that
braid-fuse-memory-bound turns into one kernel, compiled for the cuda target;
a fifth, a GEMM with bias + GELU (cuBLASLt's epilogue on the GPU), is only
checked.
`run` first checks each program against numpy at a small size, then times
it at the full size with braid-exec-cuda (one rank; warm-up, median of
--repeat runs) and writes braid_times.json for torch_fusion.py, which times
PyTorch eager and torch.compile on the same patterns and computes achieved
bandwidth.

Each run may take --timeout seconds (the runner's own timeout, then a
kill), and all of them --budget seconds (later ones are skipped); a failure
is reported and the next pattern runs; braid_times.json is rewritten after
every timing.

Usage:
  fusion.py prepare BUNDLE [--bin build/bin] [--target cuda|cpu]
  fusion.py run BUNDLE RESULTS [--repeat 20] [--exec braid-exec-cuda]
                [--budget S] [--timeout S]
  fusion.py check [--bin build/bin]   the programs on one CPU rank against
                                      numpy (a test; no GPU needed)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
from braid.dtypes import bf16_bits, bf16_values  # noqa: E402
from braid.models import Function, Grid, gelu  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
import launch  # noqa: E402

sys.path.insert(0, HERE)
import shared  # noqa: E402

FULL = (16384, 8192)
SMALL = (64, 2048)
EPS = 1e-5


def pattern_programs(rows, hidden, dtype="bf16"):
    """name -> (MLIR text, argument shapes, numpy reference(*f64 inputs)),
    with arguments and results in `dtype` (computed in f32)."""
    grid = Grid([1])
    programs = {}

    fn = Function(grid)
    x = fn.arg("x", (rows, hidden), dtype)
    w = fn.arg("w", (hidden,), dtype)
    b = fn.arg("b", (hidden,), dtype)
    total = fn.reduce_last(fn.map([x], "f32", lambda s, v: v), "sum")
    mean = fn.map([total], "f32", lambda s, v: s.div(v, s.const(hidden)))
    centered = fn.map([x, (mean, (0,))], "f32", lambda s, v, m: s.sub(v, m))
    var = fn.reduce_last(fn.map([centered], "f32", lambda s, v: s.mul(v, v)), "sum")
    inv = fn.map([var], "f32", lambda s, v: s.rsqrt(s.add(s.div(v, s.const(hidden)), s.const(EPS))))
    y = fn.map([centered, (inv, (0,)), (w, (1,)), (b, (1,))], dtype,
               lambda s, c, r, wv, bv: s.add(s.mul(s.mul(c, r), wv), bv))

    def layernorm(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + EPS) * w + b
    programs["layernorm"] = (grid.mlir() + fn.text([y]),
                             [(rows, hidden), (hidden,), (hidden,)], layernorm)

    fn = Function(grid)
    x = fn.arg("x", (rows, hidden), dtype)
    w = fn.arg("w", (hidden,), dtype)
    ms = fn.reduce_last(fn.map([x], "f32", lambda s, v: s.mul(v, v)), "sum")
    inv = fn.map([ms], "f32", lambda s, v: s.rsqrt(s.add(s.div(v, s.const(hidden)), s.const(EPS))))
    y = fn.map([x, (inv, (0,)), (w, (1,))], dtype, lambda s, v, r, wv: s.mul(s.mul(v, r), wv))
    programs["rmsnorm"] = (grid.mlir() + fn.text([y]), [(rows, hidden), (hidden,)],
                           lambda x, w: x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS) * w)

    fn = Function(grid)
    x = fn.arg("x", (rows, hidden), dtype)
    peak = fn.reduce_last(fn.map([x], "f32", lambda s, v: v), "max")
    e = fn.map([x, (peak, (0,))], "f32", lambda s, v, m: s.exp(s.sub(v, m)))
    total = fn.reduce_last(e, "sum")
    y = fn.map([e, (total, (0,))], dtype, lambda s, v, t: s.div(v, t))

    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    programs["softmax"] = (grid.mlir() + fn.text([y]), [(rows, hidden)], softmax)

    fn = Function(grid)
    x = fn.arg("x", (rows, hidden), dtype)
    b = fn.arg("b", (hidden,), dtype)
    r = fn.arg("r", (rows, hidden), dtype)
    y = fn.map([x, (b, (1,)), r], dtype, lambda s, v, bv, rv: s.add(s.gelu(s.add(v, bv)), rv))
    programs["bias_gelu_residual"] = (grid.mlir() + fn.text([y]),
                                      [(rows, hidden), (hidden,), (rows, hidden)],
                                      lambda x, b, r: gelu(x + b) + r)

    # Checked, not timed: a GEMM whose bias + GELU becomes cuBLASLt's
    # epilogue on the cuda target (microbench times that path).
    n = 256
    fn = Function(grid)
    x = fn.arg("x", (rows, hidden), dtype)
    w = fn.arg("w", (hidden, n), dtype)
    b = fn.arg("b", (n,), dtype)
    y = fn.map([fn.matmul(x, w), (b, (1,))], dtype, lambda s, v, bv: s.gelu(s.add(v, bv)))
    programs["gemm_bias_gelu"] = (grid.mlir() + fn.text([y]),
                                  [(rows, hidden), (hidden, n), (n,)],
                                  lambda x, w, b: gelu(x @ w + b))
    return programs


# The patterns fusion.py times (and torch_fusion.py compares).
TIMED = ("layernorm", "rmsnorm", "softmax", "bias_gelu_residual")


def compile_all(args, out, size, target, names=None):
    compiler = os.path.join(args.bin, "braid-compile")
    for name, (text, _, _) in pattern_programs(*size).items():
        if names is not None and name not in names:
            continue
        source = os.path.join(out, f"{name}.mlir")
        with open(source, "w") as f:
            f.write(text)
        cmd = [compiler, source, f"--target={target}", "-o", os.path.join(out, f"{name}.so")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"fusion.py: compiling {name} failed:\n{proc.stderr}")
        fused = re.findall(r"remark: fused (\d+) ops into one kernel", proc.stderr)
        epilogues = re.findall(r"as its epilogue", proc.stderr)
        print(f"fusion.py: built {name} {size[0]}x{size[1]} for {target} "
              f"(ops fused into one kernel: {', '.join(fused) or 'none'}"
              f"{'; cuBLASLt epilogue' if epilogues else ''})")


def prepare(args):
    for size, folder in ((FULL, "full"), (SMALL, "small")):
        out = os.path.join(args.bundle, "fusion", folder)
        os.makedirs(out, exist_ok=True)
        compile_all(args, out, size, args.target,
                    TIMED if folder == "full" else None)


def limits(deadline, timeout):
    """(runner --timeout, kill) seconds for the next run, or None when the
    budget is spent."""
    left = timeout if deadline is None else min(timeout, deadline - time.monotonic())
    if left < 5:
        return None
    return max(2.0, left - 10), left


def check_numerics(runner, directory, size, label, deadline=None, timeout=60):
    """Runs each pattern of `directory` on seeded inputs; compares with numpy.
    Returns the number of failures."""
    failures = 0
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="braid-fusion-") as work:
        for name, (_, shapes, reference) in pattern_programs(*size).items():
            inputs = []
            for i, shape in enumerate(shapes):
                bits = bf16_bits(rng.uniform(-2, 2, size=shape))
                np.save(os.path.join(work, f"{name}.a{i}.npy"), bits)
                inputs.append(bf16_values(bits).astype(np.float64))
            out = os.path.join(work, f"{name}.out.npy")
            limit = limits(deadline, timeout)
            if limit is None:
                print(f"FAIL {name} {label}: skipped, the step's time is up")
                failures += 1
                continue
            cmd = runner + [os.path.join(directory, f"{name}.so"), f"--timeout={limit[0]:g}"]
            cmd += [f"--input=@{os.path.join(work, f'{name}.a{i}.npy')}" for i in range(len(shapes))]
            cmd += [f"--output=@{out}"]
            proc = launch.run(cmd, limit[1])
            if proc.returncode != 0:
                print(f"FAIL {name} {label}: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
                failures += 1
                continue
            try:
                got = bf16_values(np.load(out)).astype(np.float64)
            except (OSError, ValueError) as error:
                print(f"FAIL {name} {label}: no result: {error}")
                failures += 1
                continue
            want = reference(*inputs)
            err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-6)
            ok = err < 2e-2
            failures += not ok
            print(f"{'PASS' if ok else 'FAIL'} {name} {label}: max relative error {err:.2e}")
    return failures


def run(args):
    deadline = time.monotonic() + args.budget
    exec_path = args.exec or os.path.join(args.bundle, "bin", "braid-exec-cuda")
    runner = [exec_path, "--loopback=1"] if "cuda" in os.path.basename(exec_path) else [exec_path]
    failures = check_numerics(runner, os.path.join(args.bundle, "fusion", "small"), SMALL,
                              "small", deadline, args.timeout)
    times = {}
    full = os.path.join(args.bundle, "fusion", "full")
    os.makedirs(args.results, exist_ok=True)
    for seed, name in enumerate(TIMED):
        limit = limits(deadline, args.timeout)
        if limit is None:
            print(f"FAIL timing {name}: skipped, the step's time is up")
            failures += 1
            continue
        cmd = runner + [os.path.join(full, f"{name}.so"), "--warmup=5",
                        f"--repeat={args.repeat}", f"--seed={seed + 1}",
                        f"--timeout={limit[0]:g}"]
        proc = launch.run(cmd, limit[1])
        found = re.search(r"median ([0-9.]+) ms", proc.stdout)
        if proc.returncode != 0 or not found:
            print(f"FAIL timing {name}: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
            failures += 1
            continue
        times[name] = float(found.group(1))
        print(f"fusion.py: {name} {FULL[0]}x{FULL[1]} bf16: {times[name]:.3f} ms", flush=True)
        with open(os.path.join(args.results, "braid_times.json"), "w") as f:
            json.dump(times, f, indent=2)
    with open(os.path.join(args.results, "braid_times.json"), "w") as f:
        json.dump(times, f, indent=2)
    sys.exit(1 if failures else 0)


def check(args):
    with tempfile.TemporaryDirectory(prefix="braid-fusion-") as out:
        compile_all(args, out, SMALL, "cpu")
        runner = launch.mpirun(1, os.path.join(args.bin, "braid-exec"))
        sys.exit(1 if check_numerics(runner, out, SMALL, "cpu") else 0)


def main():
    parser, p, r, c = shared.command_line(__doc__, budget=600, timeout=60, more=("check",))
    p.add_argument("--target", default="cuda")
    r.add_argument("--exec", default="")
    c.add_argument("--bin", default=shared.DEFAULT_BIN)
    args = parser.parse_args()
    {"prepare": prepare, "run": run, "check": check}[args.command](args)


if __name__ == "__main__":
    main()
