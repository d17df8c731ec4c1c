#!/usr/bin/env python3
"""Overlap on CPU ranks at Llama-3-8B shapes: measured R beside the model's.

For the two ring patterns at Llama-3-8B TP 4 shapes (2048 tokens, hidden
4096, FFN 14336 / 4, bf16) on 4 ranks:

  ag_gemm  all-gather of x [512, 4096] then x @ W [4096, 3584]
  gemm_rs  h [2048, 3584] @ W [3584, 4096] then reduce-scatter of the rows

it times with braid-exec (median of --repeat runs, slowest rank) the
program with --overlap=force (T_fused) and --overlap=off (T_serial), the
product alone on the whole operands (T_compute) and the collective alone
(T_comm), and prints R = T_fused / max(T_compute, T_comm) (1 is perfect
overlap, T_serial / max(...) no overlap at all) beside the cost model's R
from the report of the forced build (its predicted overlapped time over
the larger of its compute and communication times).

Usage: overlap.py [--bin build/bin] [--ranks 4] [--repeat 5]
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (ag_gemm_program, bf16_matmul, gemm_rs_program,  # noqa: E402
                    rank_args, time_program)


TOKENS, HIDDEN, FFN = 2048, 4096, 14336


def programs(ranks):
    t, h, f = TOKENS, HIDDEN, FFN // ranks
    local = t // ranks
    grid = f"shard.grid @g(shape = {ranks})\n"

    def main(params, body, result):
        """@main taking `params` (name -> type), returning (name, type)."""
        args = ", ".join(f"%{name}: {type_}" for name, type_ in params.items())
        return (grid + f"func.func @main({args}) -> {result[1]} {{\n" + body
                + f"  return %{result[0]} : {result[1]}\n}}\n")

    def bf16(rows, cols):
        return f"tensor<{rows}x{cols}xbf16>"

    ag = ag_gemm_program(ranks, t, h, f)
    ag_compute = main({"x": bf16(t, h), "w": bf16(h, f)}, bf16_matmul("%x", "%w", t, h, f),
                      ("mm", f"tensor<{t}x{f}xf32>"))
    ag_comm = main({"x": bf16(local, h)},
                   f"  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : {bf16(local, h)} -> {bf16(t, h)}\n",
                   ("g", bf16(t, h)))
    rs = gemm_rs_program(ranks, t, f, h)
    rs_compute = main({"x": bf16(t, f), "w": bf16(f, h)}, bf16_matmul("%x", "%w", t, f, h),
                      ("mm", f"tensor<{t}x{h}xf32>"))
    rs_comm = main({"x": f"tensor<{t}x{h}xf32>"},
                   f"  %r = shard.reduce_scatter %x on @g grid_axes = [0] scatter_axis = 0 : "
                   f"tensor<{t}x{h}xf32> -> tensor<{local}x{h}xf32>\n",
                   ("r", f"tensor<{local}x{h}xf32>"))
    return [("ag_gemm", ag, ag_compute, ag_comm),
            ("gemm_rs", rs, rs_compute, rs_comm)]


def timed(args, tmp, name, text, overlap, report=None):
    flags = [f"--overlap={overlap}"] + ([f"--report={report}"] if report else [])
    return time_program(args.bin, tmp, f"{name}-{overlap}", text, args.ranks,
                        args.repeat, flags)


def main():
    args = rank_args(5)
    print(f"{'pattern':<8} {'fused ms':>9} {'serial ms':>10} {'compute ms':>11} "
          f"{'comm ms':>8} {'R':>6} {'R serial':>9} {'model R':>8} "
          f"{'model compute ms':>17} {'model comm ms':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fused, compute, comm in programs(args.ranks):
            report = os.path.join(tmp, f"{name}.json")
            t_fused = timed(args, tmp, name, fused, "force", report)
            t_serial = timed(args, tmp, name, fused, "off")
            t_compute = timed(args, tmp, name + "_compute", compute, "off")
            t_comm = timed(args, tmp, name + "_comm", comm, "off")
            with open(report) as f:
                predicted = json.load(f)["collectives"][0]["predicted"]
            bound = max(t_compute, t_comm)
            model_bound = max(predicted["compute_us"], predicted["comm_us"])
            print(f"{name:<8} {t_fused:9.1f} {t_serial:10.1f} {t_compute:11.1f} "
                  f"{t_comm:8.1f} {t_fused / bound:6.2f} {t_serial / bound:9.2f} "
                  f"{predicted['overlapped_us'] / model_bound:8.2f} "
                  f"{predicted['compute_us'] / 1e3:17.1f} "
                  f"{predicted['comm_us'] / 1e3:14.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
