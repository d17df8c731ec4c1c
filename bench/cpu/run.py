#!/usr/bin/env python3
"""CPU benchmark: every overlap pattern, forced against off, on 2 and 4 ranks.

For each pattern of the end-to-end suite (test/lib/e2e.py) at growing sizes,
it compiles the program twice (--overlap=force and --overlap=off), timing
braid-compile, then runs each with braid-run (--warmup 1 --repeat N, median
of the slowest rank) and prints compile and run times and the ratios
force / off. Both runs of a row happen back to back, so that the shared
machine's noise hits both alike.

On a machine with fewer cores than ranks the ranks time-share cores, and
MPI on one host moves data by memory copies that compete with the compute:
expect ratios near 1 and read them as "what the schedule costs", not as the
overlap a network of GPUs gets.

Usage: run.py [--bin build/bin] [--ranks 2,4] [--scales 4,16] [--repeat 5]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from e2e_patterns import PATTERNS, Config  # noqa: E402

CASES = [("ag_matmul", "rows"), ("ag_matmul", "reduction"), ("matmul_rs", "rows"),
         ("matmul_ar", "replicated"), ("a2a", "dispatch"), ("a2a", "combine"),
         ("micro_batch", ""), ("async", "")]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", default="2,4")
    parser.add_argument("--scales", default="4,16")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dtype", default="f32")
    args = parser.parse_args()
    header = (f"{'pattern':<22} {'ranks':>5} {'scale':>5} {'compile force s':>15} {'compile off s':>13} "
              f"{'run force ms':>12} {'run off ms':>10} {'run ratio':>9}")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for ranks in [int(r) for r in args.ranks.split(",")]:
            for scale in [int(s) for s in args.scales.split(",")]:
                for pattern, variant in CASES:
                    cfg = Config()
                    cfg.grid, cfg.axis, cfg.group = [ranks], 0, ranks
                    cfg.dtype, cfg.variant, cfg.scale = args.dtype, variant, scale
                    text = PATTERNS[pattern](cfg)[0]
                    program = os.path.join(tmp, "p.mlir")
                    with open(program, "w") as f:
                        f.write(text)
                    results = {}
                    for mode in ("force", "off"):
                        lib = os.path.join(tmp, f"{mode}.so")
                        start = time.perf_counter()
                        subprocess.run([os.path.join(args.bin, "braid-compile"), program, "-o", lib,
                                        f"--overlap={mode}"], check=True, stderr=subprocess.DEVNULL)
                        compile_s = time.perf_counter() - start
                        out = subprocess.run([os.path.join(args.bin, "braid-run"), lib,
                                              "--warmup=1", f"--repeat={args.repeat}"],
                                             check=True, capture_output=True, text=True)
                        m = re.search(r"median ([0-9.]+) ms", out.stdout + out.stderr)
                        results[mode] = (compile_s, float(m.group(1)) if m else float("nan"))
                    name = pattern + (f"/{variant}" if variant else "")
                    (cf, rf), (co, ro) = results["force"], results["off"]
                    print(f"{name:<22} {ranks:>5} {scale:>5} {cf:>15.2f} {co:>13.2f} "
                          f"{rf:>12.2f} {ro:>10.2f} {rf / ro:>9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
