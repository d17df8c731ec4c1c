#!/usr/bin/env python3
"""Fused memory-bound kernels of the cpu target against torch.compile.

The patterns are bench/gpu/fusion.py's (layernorm, RMSNorm, softmax and
bias + GELU + residual, each one program that braid-fuse-memory-bound makes
one kernel), here at 4096 x 4096 in f32 and bf16 (computed in f32). Each is
compiled with braid-compile for the cpu target (--cpu, default generic: the
portable baseline the artifacts ship with) and run on one rank by
braid-exec (--warmup 1, median of --repeat, BRAID_NUM_THREADS); PyTorch
eager and torch.compile (default mode, compiled before its warm-ups) time
the same functions with the same thread count in the frontends venv (or
--torch-python), in the same run. Prints milliseconds and
compile_ms / braid_ms (>= 1.0: Braid at least as fast as torch.compile);
--scalar adds the same programs built with --vector-bytes=0 (scalar loops,
what the cpu target generated before its kernels were vectorized).

Usage: fusion.py [--bin build/bin] [--threads 1] [--repeat 10]
                 [--cpu generic] [--dtypes f32,bf16] [--torch-python PY]
                 [--scalar]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import time_program  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.expanduser("~/.cache/braid/frontends-venv/bin/python")
ROWS, HIDDEN = 4096, 4096

spec = importlib.util.spec_from_file_location(
    "gpu_fusion", os.path.join(ROOT, "bench", "gpu", "fusion.py"))
gpu_fusion = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_fusion)

# The same functions as bench/gpu/fusion.py's programs (eps 1e-5, tanh GELU,
# reductions in f32), timed on the CPU; prints {name: [eager_ms, compile_ms]}.
TORCH = r"""
import json, sys, time, torch
threads, rows, hidden, repeat = map(int, sys.argv[1:5])
dtype = getattr(torch, sys.argv[5])
torch.set_num_threads(threads)
F = torch.nn.functional

def layernorm(x, w, b):
    return F.layer_norm(x.float(), (hidden,), w.float(), b.float(), eps=1e-5).to(x.dtype)

def rmsnorm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(x.dtype)

def softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)

def bias_gelu_residual(x, b, r):
    return (F.gelu(x.float() + b.float(), approximate="tanh") + r.float()).to(x.dtype)

shapes = {"layernorm": [(rows, hidden), (hidden,), (hidden,)],
          "rmsnorm": [(rows, hidden), (hidden,)],
          "softmax": [(rows, hidden)],
          "bias_gelu_residual": [(rows, hidden), (hidden,), (rows, hidden)]}

def median_ms(f, inputs):
    for _ in range(2):
        f(*inputs)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        f(*inputs)
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2] * 1e3

out = {}
for name in sys.argv[6].split(","):
    f = globals()[name]
    inputs = [torch.randn(*s).to(dtype) for s in shapes[name]]
    out[name] = [median_ms(f, inputs), median_ms(torch.compile(f), inputs)]
print(json.dumps(out))
"""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--cpu", default="generic")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--patterns", default=",".join(gpu_fusion.TIMED))
    parser.add_argument("--torch-python", default=VENV)
    parser.add_argument("--scalar", action="store_true",
                        help="also time scalar loops (--vector-bytes=0)")
    args = parser.parse_args()
    names = args.patterns.split(",")
    torch = os.path.exists(args.torch_python)
    print(f"{ROWS}x{HIDDEN}, {args.threads} thread(s), --cpu={args.cpu}")
    print(f"{'pattern':<20} {'dtype':<5} {'braid ms':>9} {'eager ms':>9} "
          f"{'compile ms':>11} {'compile/braid':>14}"
          + (f" {'scalar ms':>10}" if args.scalar else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in args.dtypes.split(","):
            programs = gpu_fusion.pattern_programs(ROWS, HIDDEN, dtype)
            ref = {}
            if torch:
                ref = json.loads(subprocess.run(
                    [args.torch_python, "-c", TORCH, str(args.threads),
                     str(ROWS), str(HIDDEN), str(args.repeat),
                     {"f32": "float32", "bf16": "bfloat16",
                      "f16": "float16"}[dtype], ",".join(names)],
                    capture_output=True, text=True,
                    check=True).stdout.splitlines()[-1])
            for name in names:
                ms = time_program(args.bin, tmp, f"{name}-{dtype}",
                                  programs[name][0], 1, args.repeat,
                                  [f"--cpu={args.cpu}"], threads=args.threads)
                line = f"{name:<20} {dtype:<5} {ms:9.2f}"
                if name in ref:
                    eager, compiled = ref[name]
                    line += (f" {eager:9.2f} {compiled:11.2f} "
                             f"{compiled / ms:13.2f}x")
                else:
                    line += f" {'-':>9} {'-':>11} {'-':>14}"
                if args.scalar:
                    slow = time_program(
                        args.bin, tmp, f"{name}-{dtype}-scalar",
                        programs[name][0], 1, args.repeat,
                        [f"--cpu={args.cpu}", "--vector-bytes=0"],
                        threads=args.threads)
                    line += f" {slow:10.2f}"
                print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
