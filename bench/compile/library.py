#!/usr/bin/env python3
"""Time to a shared library: braid-compile on generated N-layer transformers.

For N in 1, 8, 80 layers (Llama-3-70B-like, sequence parallel, TP 8, bf16,
overlap forced) it runs braid-compile to a CPU library and reports the wall
time, the peak memory (/usr/bin/time), the kernels the library holds and
each time against one layer; with --old, the same with another build side
by side in the same run (the machine is shared: ratios, not seconds, are
what to compare). Extra MLIR files (the HF models of bench/frontends, as
written by braid.pytorch.to_mlir) can be added by path.

With --stages, the time of each stage braid-compile --timing reports
(MLIR passes, ptxas, translation, LLVM optimization, code generation, link)
is added per row. --old-options compares one build with itself under
other options (--old-options=--outline-layers=false: the flat program).
--target=cuda builds CUDA libraries (ptxas included).

Usage: library.py [--bin build/bin] [--old OTHER/bin] [--old-options OPTS]
                  [--target cpu|cuda] [--stages] [--layers 1,8,80] [FILE.mlir ...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def compile_once(tools, path, tmp, options):
    out = os.path.join(tmp, "out.so")
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "%e %M", os.path.join(tools, "braid-compile"),
         path, "--overlap=force", "--target-preset=h100", "--timing", *options,
         "-o", out],
        capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"braid-compile failed on {path}:\n{proc.stderr[-2000:]}")
    seconds, kbytes = proc.stderr.strip().splitlines()[-1].split()
    stages = {m.group(1): float(m.group(2)) for m in re.finditer(
        r"^braid: timing: (\S+)\s+([0-9.]+) s$", proc.stderr, re.M)}
    stages.pop("total", None)
    symbols = subprocess.run(["nm", "--defined-only", out], capture_output=True,
                             text=True).stdout
    kernels = len(re.findall(r" [tT] \w+_kernel_\d+$", symbols, re.M))
    return float(seconds), int(kbytes) / 1024, kernels, stages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--old", help="bin/ of another build, timed beside")
    parser.add_argument("--old-options", default="",
                        help="braid-compile options of the old side, "
                             "space-separated (default build: --bin)")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--stages", action="store_true",
                        help="add the time of each compile stage")
    parser.add_argument("--layers", default="1,8,80")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    target = [f"--target={args.target}"]
    builds = [("new", args.bin, target)]
    if args.old or args.old_options:
        builds.append(("old", args.old or args.bin,
                       target + args.old_options.split()))
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        for n in [int(x) for x in args.layers.split(",") if x]:
            path = os.path.join(tmp, f"t{n}.mlir")
            subprocess.run([sys.executable, os.path.join(ROOT, "bench",
                                                         "gen_transformer.py"),
                            "--layers", str(n), "--tp", "8", "-o", path],
                           check=True)
            inputs.append((f"{n} layers", path))
        inputs += [(os.path.basename(f), f) for f in args.files]
        header = (f"{'program':<24} {'build':<5} {'seconds':>8} {'peak MB':>8} "
                  f"{'kernels':>8} {'vs first':>9}")
        print(header + ("  stages (s)" if args.stages else ""))
        first = {}
        for name, path in inputs:
            for build, tools, options in builds:
                seconds, mb, kernels, stages = compile_once(tools, path, tmp,
                                                            options)
                first.setdefault(build, seconds)
                line = (f"{name:<24} {build:<5} {seconds:>8.2f} {mb:>8.0f} "
                        f"{kernels:>8} {seconds / first[build]:>8.1f}x")
                if args.stages:
                    line += "  " + " ".join(f"{k} {v:.2f}"
                                            for k, v in stages.items())
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
