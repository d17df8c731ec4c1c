#!/usr/bin/env python3
"""Times braid-opt's import on generated N-layer transformers.

For N = 1, 10, 100 layers (SPMD shard form, Llama-70B-like shapes, TP 4) it
times `braid-opt FILE --braid-import-shard -o /dev/null` (parse, import,
verify, print) against `braid-opt FILE -o /dev/null` (parse, verify, print),
side by side in one run: repetitions alternate between the two so that
machine noise hits both. Prints medians, the ratio import/baseline, and each
N's cost relative to one layer.

Targets (issue 2): import adds at most 1.5x; 100 layers cost at most 110x one
layer.

Usage: bench.py [--braid-opt build/bin/braid-opt] [--repeat 7] [--layers 1,10,100]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(cmd):
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def pass_time(cmd, name):
    """Wall time of pass `name` from --mlir-timing, in seconds."""
    proc = subprocess.run(cmd + ["--mlir-timing"], check=True, capture_output=True, text=True)
    for line in proc.stderr.splitlines():
        fields = line.split()
        if fields and fields[-1] == name:
            return float(fields[0])
    raise RuntimeError(f"no timing for {name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--braid-opt", default=os.path.join(ROOT, "build", "bin", "braid-opt"))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--layers", default="1,10,100")
    args = parser.parse_args()
    layer_counts = [int(n) for n in args.layers.split(",")]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in layer_counts:
            path = os.path.join(tmp, f"t{n}.mlir")
            subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_transformer.py"),
                            "--layers", str(n), "-o", path], check=True)
            base_cmd = [args.braid_opt, path, "-o", os.devnull]
            import_cmd = [args.braid_opt, path, "--braid-import-shard", "-o", os.devnull]
            run(base_cmd), run(import_cmd)  # warm the page cache
            base, imp, pass_only = [], [], []
            for _ in range(args.repeat):
                base.append(run(base_cmd))
                imp.append(run(import_cmd))
                pass_only.append(pass_time(import_cmd, "ImportShard"))
            rows.append((n, os.path.getsize(path), statistics.median(base), statistics.median(imp),
                         statistics.median(pass_only)))

    one = rows[0][4] if rows and rows[0][0] == 1 else None
    print(f"{'layers':>6} {'MiB':>6} {'parse+verify+print':>19} {'+import':>10} {'ratio':>6} "
          f"{'import pass':>12} {'pass vs 1 layer':>16}")
    for n, size, base, imp, pass_s in rows:
        scale = f"{pass_s / one:.1f}x" if one else "-"
        print(f"{n:>6} {size / 2**20:>6.2f} {base * 1e3:>16.1f} ms {imp * 1e3:>7.1f} ms {imp / base:>5.2f}x "
              f"{pass_s * 1e3:>9.2f} ms {scale:>16}")
    print("whole-process times include start-up; 'import pass' is the pass alone (--mlir-timing).")
    print("targets: ratio <= 1.50x; import pass on 100 layers <= 110x one layer")


if __name__ == "__main__":
    main()
