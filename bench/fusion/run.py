#!/usr/bin/env python3
"""Memory-bound fusion on CPU: kernels and bytes moved per pattern, fused
against not, and run time of both side by side.

Patterns (from braid.models): the epilogue of a row-parallel layer (reduce-
scatter, dropout, bias, residual, layernorm; and the RMSNorm variant), the
MLP's bias-free SwiGLU epilogue, and attention (scores, mask, softmax).

Part 1 compiles each pattern at LLM sizes (--tokens x --hidden, bf16, TP 8)
and counts the kernels (functions braid-outline-kernels made) and the bytes
the fused kernels move against what their ops moved one by one (from the
fusion remarks). Part 2 runs each pattern at CPU sizes on 2 ranks with
--fuse=auto and --fuse=off back to back (braid-run --warmup 1 --repeat N,
median of the slowest rank).

Usage: run.py [--bin build/bin] [--tokens 16384] [--hidden 8192] [--repeat 5]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
from braid.models import MLP, Attention, Grid, Norm  # noqa: E402


def patterns(tp, tokens, hidden, dtype):
    grid = Grid([tp])
    return [
        ("layernorm epilogue", Norm(grid, tokens, hidden, k=hidden, dtype=dtype,
                                    parallel="sp", dropout=0.1, seed=1)),
        ("rmsnorm epilogue", Norm(grid, tokens, hidden, k=hidden, dtype=dtype,
                                  parallel="sp", norm="rmsnorm")),
        ("swiglu mlp", MLP(grid, tokens, hidden, ffn=2 * hidden, dtype=dtype,
                           kind="llama", parallel="sp")),
        ("attention", Attention(grid, min(tokens, 2048), hidden,
                                heads=max(tp, hidden // 128), dtype=dtype,
                                parallel="sp")),
    ]


def compile_stats(binary, program, fuse):
    out = subprocess.run([binary, program, "--emit=llvm-mlir", f"--fuse={fuse}",
                          "--overlap=off"], capture_output=True, text=True, check=True)
    kernels = len(re.findall(r"llvm\.func @\w+_kernel_\d+\(", out.stdout))
    moved = [(int(a), int(b)) for a, b in
             re.findall(r"moves (\d+) bytes instead of (\d+)", out.stderr)]
    return kernels, sum(a for a, _ in moved), sum(b for _, b in moved)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    compiler = os.path.join(args.bin, "braid-compile")
    runner = os.path.join(args.bin, "braid-run")
    with tempfile.TemporaryDirectory() as tmp:
        program = os.path.join(tmp, "p.mlir")
        print(f"1. kernels and bytes at {args.tokens} x {args.hidden} bf16, TP 8 (compile only)")
        header = (f"{'pattern':<20} {'kernels off':>11} {'kernels fused':>13} "
                  f"{'fused groups: MiB moved':>24} {'MiB op by op':>13} {'ratio':>6}")
        print(header)
        print("-" * len(header))
        for name, block in patterns(8, args.tokens, args.hidden, "bf16"):
            with open(program, "w") as f:
                f.write(block.mlir())
            k_off, _, _ = compile_stats(compiler, program, "off")
            k_on, after, before = compile_stats(compiler, program, "auto")
            mib = 1 << 20
            print(f"{name:<20} {k_off:>11} {k_on:>13} {after / mib:>24.1f} "
                  f"{before / mib:>13.1f} {after / max(before, 1):>6.2f}", flush=True)

        print()
        print("2. run time on 2 CPU ranks, 1024 tokens x 1024 hidden f32 (median ms)")
        header = f"{'pattern':<20} {'fuse=off':>9} {'fuse=auto':>10} {'ratio':>6}"
        print(header)
        print("-" * len(header))
        for name, block in patterns(2, 1024, 1024, "f32"):
            with open(program, "w") as f:
                f.write(block.mlir())
            times = {}
            for fuse in ("off", "auto"):
                lib = os.path.join(tmp, f"{fuse}.so")
                subprocess.run([compiler, program, "-o", lib, f"--fuse={fuse}",
                                "--overlap=off"], check=True, stderr=subprocess.DEVNULL)
                out = subprocess.run([runner, lib, "--warmup=1", f"--repeat={args.repeat}"],
                                     check=True, capture_output=True, text=True)
                m = re.search(r"median ([0-9.]+) ms", out.stdout + out.stderr)
                times[fuse] = float(m.group(1)) if m else float("nan")
            print(f"{name:<20} {times['off']:>9.2f} {times['auto']:>10.2f} "
                  f"{times['auto'] / times['off']:>6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
