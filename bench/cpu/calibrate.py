#!/usr/bin/env python3
"""Calibration of the cost model's cpu preset from what this backend does.

On RANKS ranks at once (default 4, each with the runtime's default threads,
the cores divided by the ranks), as the suite and the benchmarks run them,
it times with braid-exec (median of --repeat runs, slowest rank):

- a GEMM per rank at a Llama ring-chunk shape, f32 and bf16 (oneDNN):
  FLOP/s per rank, the preset's peakFlops32 and peakFlops16 (with
  gemmEfficiency 1);
- an elementwise add over 64 MiB per operand: bytes moved per second per
  rank, memoryBandwidth (with memoryEfficiency 1);
- an all-gather (overlap off: the runtime's ring of RANKS - 1 steps) of
  64 B and of 16 MiB per rank: each step's latency (the small one's time
  per step, the program's call overhead included) and bandwidth,
  defaultLink.

and prints each figure beside the preset's current one, and the C++ to
paste into CostModel.cpp. Usage: calibrate.py [--bin build/bin] [--ranks 4]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import gemm_program, rank_args, time_program  # noqa: E402


def timed(args, tmp, name, text):
    """Seconds of one run of `text` on all ranks (overlap off)."""
    return time_program(args.bin, tmp, name, text, args.ranks, args.repeat,
                        ["--overlap=off"]) * 1e-3


def add(ranks, rows, cols):
    t = f"tensor<{rows}x{cols}xf32>"
    return f"""shard.grid @g(shape = {ranks})
func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %c = arith.addf %a, %b : {t}
  return %c : {t}
}}
"""


def gather(ranks, rows, cols):
    return f"""shard.grid @g(shape = {ranks})
func.func @main(%a: tensor<{rows}x{cols}xf32>) -> tensor<{rows * ranks}x{cols}xf32> {{
  %g = shard.all_gather %a on @g grid_axes = [0] gather_axis = 0 : tensor<{rows}x{cols}xf32> -> tensor<{rows * ranks}x{cols}xf32>
  return %g : tensor<{rows * ranks}x{cols}xf32>
}}
"""


def main():
    args = rank_args(5)
    r = args.ranks
    with tempfile.TemporaryDirectory() as tmp:
        m, n, k = 512, 3584, 4096
        flops = {}
        for dtype in ("f32", "bf16"):
            seconds = timed(args, tmp, f"gemm_{dtype}", gemm_program(r, m, n, k, dtype))
            flops[dtype] = 2.0 * m * n * k / seconds
        rows, cols = 4096, 4096  # 64 MiB per f32 operand
        seconds = timed(args, tmp, "add", add(r, rows, cols))
        bandwidth = 3.0 * rows * cols * 4 / seconds
        tiny = timed(args, tmp, "ag_tiny", gather(r, 1, 16))  # 64 B
        big_rows, cols = 4096, 1024  # 16 MiB
        big = timed(args, tmp, "ag_big", gather(r, big_rows, cols))
    steps = r - 1
    big_bytes = big_rows * cols * 4
    alpha = tiny / steps
    beta = big_bytes * steps / max(big - tiny, 1e-9)
    current = {"peakFlops32": 2e9, "peakFlops16": 1e9,
               "memoryBandwidth": 10e9, "link bandwidth": 4e9,
               "link latency": 20e-6}
    measured = {"peakFlops32": flops["f32"], "peakFlops16": flops["bf16"],
                "memoryBandwidth": bandwidth, "link bandwidth": beta,
                "link latency": alpha}
    print(f"{r} ranks at once, per rank (the preset's figures are per rank):")
    print(f"{'figure':<18} {'measured':>12} {'preset':>12}")
    for key, value in measured.items():
        print(f"{key:<18} {value:12.3g} {current[key]:12.3g}")
    print("\n// CostModel.cpp, preset \"cpu\":")
    print(f"t.peakFlops16 = {flops['bf16']:.3g};")
    print(f"t.peakFlops32 = {flops['f32']:.3g};")
    print(f"t.memoryBandwidth = {bandwidth:.3g};")
    print(f"t.defaultLink = {{{beta:.3g}, {alpha:.3g}}};")


if __name__ == "__main__":
    sys.exit(main())
