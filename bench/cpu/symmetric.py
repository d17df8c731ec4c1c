#!/usr/bin/env python3
"""Symmetric memory against two-sided transfers, per ring pattern, on CPU ranks.

For the all-gather + GEMM and GEMM + reduce-scatter rings (bf16 operands,
f32 products) at a few token counts, on 4 ranks, it times with braid-exec
(median of --repeat runs, slowest rank) the program compiled with
--overlap=force and --comm=two-sided (MPI send/receive) and with
--comm=symmetric (puts into the peers' slots of an MPI shared window, a
data and a credit flag per channel), both in one run, and prints the ratio
two-sided / symmetric (> 1: symmetric is faster). Small token counts are
where the transfers' fixed costs matter; large ones where their bandwidth
does.

Usage: symmetric.py [--bin build/bin] [--ranks 4] [--repeat 7]
                    [--tokens 64,512,2048] [--hidden 1024]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ag_gemm_program, gemm_rs_program, time_program  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))


def programs(ranks, tokens, hidden):
    return [("ag_gemm", ag_gemm_program(ranks, tokens, hidden, hidden)),
            ("gemm_rs", gemm_rs_program(ranks, tokens, hidden, hidden))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tokens", default="64,512,2048")
    parser.add_argument("--hidden", type=int, default=1024)
    args = parser.parse_args()
    print(f"{'pattern':<8} {'tokens':>7} {'two-sided ms':>13} "
          f"{'symmetric ms':>13} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            for name, text in programs(args.ranks, tokens, args.hidden):
                times = {}
                for comm in ("two-sided", "symmetric"):
                    times[comm] = time_program(
                        args.bin, tmp, f"{name}-{tokens}-{comm}", text,
                        args.ranks, args.repeat,
                        ["--overlap=force", f"--comm={comm}"])
                print(f"{name:<8} {tokens:>7} {times['two-sided']:13.2f} "
                      f"{times['symmetric']:13.2f} "
                      f"{times['two-sided'] / times['symmetric']:6.2f}",
                      flush=True)


if __name__ == "__main__":
    sys.exit(main())
