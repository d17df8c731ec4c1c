#!/usr/bin/env python3
"""Compile time of Braid's pipeline on generated N-layer transformers.

For N in 1, 10, 40, 80 layers (Llama-3-70B-like, TP 8, bf16) it runs
`braid-opt --braid-pipeline` (import, overlap on the h100 preset, bufferize
to xfer, check the schedule, lower to the LLVM dialect) with --mlir-timing
and reports, from the timing report, the pass work (everything but parsing
and printing), the part spent in Braid's own passes, and each against one
layer. Target (issue 3): under 1 s of pass work for 80 layers, linear in
layers.

Usage: run.py [--braid-opt build/bin/braid-opt] [--layers 1,10,40,80]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BRAID_PASSES = ("ImportShard", "Overlap", "LinearizeCollectives", "CheckSchedule",
                "ConvertXferToRuntime", "OutlineKernels", "EmitEntryPoint")


def pass_seconds(stderr):
    """From a `--mlir-timing-display=list` report: the seconds of pass work
    (the total less parsing and printing) and those of Braid's passes."""
    total = braid = io = 0.0
    for line in stderr.splitlines():
        m = re.match(r"\s*([0-9.]+) \(\s*[0-9.]+%\)\s+(?:[0-9.]+ \(\s*[0-9.]+%\)\s+)?(.+)$", line)
        if not m:
            continue
        seconds, name = float(m.group(1)), m.group(2).strip()
        if name == "Total":
            total = seconds
        elif name in ("Parser", "Output"):
            io += seconds
        elif name in BRAID_PASSES:
            braid += seconds
    return total - io, braid


def timing(braid_opt, path):
    proc = subprocess.run(
        [braid_opt, path, "--braid-pipeline=entry=transformer target-preset=h100 check-schedule=1",
         "--mlir-print-op-on-diagnostic=false", "--mlir-timing", "--mlir-timing-display=list",
         "-o", os.devnull], capture_output=True, text=True, check=True)
    return pass_seconds(proc.stderr)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--braid-opt", default=os.path.join(ROOT, "build", "bin", "braid-opt"))
    parser.add_argument("--layers", default="1,10,40,80")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.layers.split(",")]:
            path = os.path.join(tmp, f"t{n}.mlir")
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_transformer.py"),
                            "--layers", str(n), "--tp", "8", "-o", path], check=True)
            rows.append((n,) + timing(args.braid_opt, path))
    base_total, base_braid = rows[0][1], rows[0][2]
    print(f"{'layers':>6} {'pass work s':>12} {'vs 1 layer':>11} {'Braid passes s':>15} {'vs 1 layer':>11}")
    for n, total, braid in rows:
        print(f"{n:>6} {total:>12.3f} {total / base_total:>10.1f}x {braid:>15.3f} {braid / base_braid:>10.1f}x")
    print("pass work: the whole pipeline to the LLVM dialect, parsing and printing excluded;")
    print("Braid passes: import, overlap, linearize, schedule check, runtime calls, kernel outlining, entry point.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
