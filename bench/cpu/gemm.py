#!/usr/bin/env python3
"""GEMM throughput of the cpu target against PyTorch, side by side.

For each shape and dtype (1024^3 in f32 and bf16 with f32 accumulation,
and Llama-3-8B-shaped ring chunks: 2048 tokens over TP 4 against hidden
4096 and FFN 14336 / 4), it compiles a one-rank program of one product
with braid-compile (--gemm=library: oneDNN; --gemm=generated: the loops
Braid generates, with --generated: two runs, since they are slow), runs it with braid-exec
(--warmup, --repeat, BRAID_NUM_THREADS), and times torch.matmul with the
same thread count in the frontends venv (or any Python with torch given by
--torch-python), in the same run. Prints milliseconds, GFLOP/s and the
ratio to PyTorch.

Usage: gemm.py [--bin build/bin] [--threads 1] [--torch-python PY] [--generated]
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import gemm_program, time_program  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
VENV = os.path.expanduser("~/.cache/braid/frontends-venv/bin/python")

SHAPES = [  # (name, m, n, k)
    ("1024^3", 1024, 1024, 1024),
    ("AG chunk: 512x14336/4x4096", 512, 3584, 4096),
    ("RS chunk: 512x4096x14336/4", 512, 4096, 3584),
]

TORCH = r"""
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
m, n, k = map(int, sys.argv[2:5])
dtype = getattr(torch, sys.argv[5])
a = torch.randn(m, k, dtype=dtype)
b = torch.randn(k, n, dtype=dtype)
for _ in range(2):
    torch.matmul(a, b)
times = []
for _ in range(int(sys.argv[6])):
    t = time.perf_counter()
    torch.matmul(a, b)
    times.append(time.perf_counter() - t)
times.sort()
print(times[len(times) // 2] * 1e3)
"""


def braid_ms(args, tmp, m, n, k, dtype, gemm, repeat):
    return time_program(args.bin, tmp, f"mm-{gemm}", gemm_program(1, m, n, k, dtype),
                        1, repeat, [f"--gemm={gemm}"],
                        warmup=1 if repeat > 2 else 0, threads=args.threads)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--torch-python", default=VENV)
    parser.add_argument("--generated", action="store_true",
                        help="also time the generated loops (slow)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    torch = os.path.exists(args.torch_python)
    print(f"{'shape':<28} {'dtype':<5} {'braid ms':>9} {'GFLOP/s':>8} "
          f"{'torch ms':>9} {'vs torch':>9}"
          + (f" {'generated ms':>13}" if args.generated else ""))
    with tempfile.TemporaryDirectory() as tmp:
        for name, m, n, k in SHAPES:
            for dtype, torch_dtype in (("f32", "float32"),
                                       ("bf16", "bfloat16")):
                ms = braid_ms(args, tmp, m, n, k, dtype, "library",
                              args.repeat)
                flops = 2.0 * m * n * k / (ms * 1e-3) / 1e9
                line = f"{name:<28} {dtype:<5} {ms:9.2f} {flops:8.1f}"
                if torch:
                    ref = float(subprocess.run(
                        [args.torch_python, "-c", TORCH, str(args.threads),
                         str(m), str(n), str(k), torch_dtype,
                         str(args.repeat)],
                        capture_output=True, text=True,
                        check=True).stdout.split()[-1])
                    line += f" {ref:9.2f} {ref / ms:8.2f}x"
                else:
                    line += f" {'-':>9} {'-':>9}"
                if args.generated:
                    slow = braid_ms(args, tmp, m, n, k, dtype, "generated", 2)
                    line += f" {slow:13.1f}"
                print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
