#!/usr/bin/env python3
"""Symmetric memory against two-sided transfers, per ring pattern, on CPU ranks.

For the all-gather + GEMM and GEMM + reduce-scatter rings (bf16 operands,
f32 products) at a few token counts, on 4 ranks, it times with braid-exec
(median of --repeat runs, slowest rank) the program compiled with
--overlap=force and --comm=two-sided (MPI send/receive) and with
--comm=symmetric (puts into the peers' slots of an MPI shared window, a
data and a credit flag per channel), both in one run, and prints the ratio
two-sided / symmetric (> 1: symmetric is faster), and the symmetric program
again with --zero-copy=false (the receiver copies each piece out of its
slot) against the default, where readers read the slot. Small token counts are
where the transfers' fixed costs matter; large ones where their bandwidth
does.

Then whole collectives (--overlap=off: kept, so two-sided is MPI's own
collective, MPI_Iallreduce / MPI_Iallgather, against direct puts to every
peer): an f32 all-reduce of [tokens, hidden] (one shot up to 64 KiB, else a
reduce-scatter then an all-gather) and a bf16 all-gather of
[tokens / ranks, hidden].

Usage: symmetric.py [--bin build/bin] [--ranks 4] [--repeat 7]
                    [--tokens 8,64,512,2048] [--hidden 1024]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import ag_gemm_program, gemm_rs_program, rank_args, time_program  # noqa: E402


def programs(ranks, tokens, hidden):
    """(name, MLIR text, overlap mode)."""
    local = tokens // ranks
    all_reduce = (f"shard.grid @g(shape = {ranks})\n"
                  f"func.func @main(%x: tensor<{tokens}x{hidden}xf32>) -> tensor<{tokens}x{hidden}xf32> {{\n"
                  f"  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<{tokens}x{hidden}xf32> -> tensor<{tokens}x{hidden}xf32>\n"
                  f"  return %r : tensor<{tokens}x{hidden}xf32>\n}}\n")
    all_gather = (f"shard.grid @g(shape = {ranks})\n"
                  f"func.func @main(%x: tensor<{local}x{hidden}xbf16>) -> tensor<{tokens}x{hidden}xbf16> {{\n"
                  f"  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<{local}x{hidden}xbf16> -> tensor<{tokens}x{hidden}xbf16>\n"
                  f"  return %g : tensor<{tokens}x{hidden}xbf16>\n}}\n")
    return [("ag_gemm", ag_gemm_program(ranks, tokens, hidden, hidden), "force"),
            ("gemm_rs", gemm_rs_program(ranks, tokens, hidden, hidden), "force"),
            ("ar", all_reduce, "off"),
            ("ag", all_gather, "off")]


def main():
    args = rank_args(7, tokens=(8, 64, 512, 2048), hidden=1024)
    print(f"{'pattern':<8} {'tokens':>7} {'two-sided ms':>13} "
          f"{'symmetric ms':>13} {'ratio':>6} {'copies ms':>10} {'copies/zero':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in args.tokens:
            for name, text, mode in programs(args.ranks, tokens, args.hidden):
                times = {}
                variants = [("two-sided", ["--comm=two-sided"]),
                            ("symmetric", ["--comm=symmetric"]),
                            ("copies", ["--comm=symmetric", "--zero-copy=false"])]
                for variant, flags in variants:
                    times[variant] = time_program(
                        args.bin, tmp, f"{name}-{tokens}-{variant}", text,
                        args.ranks, args.repeat, [f"--overlap={mode}", *flags])
                print(f"{name:<8} {tokens:>7} {times['two-sided']:13.2f} "
                      f"{times['symmetric']:13.2f} "
                      f"{times['two-sided'] / times['symmetric']:6.2f} "
                      f"{times['copies']:10.2f} "
                      f"{times['copies'] / times['symmetric']:11.2f}",
                      flush=True)


if __name__ == "__main__":
    sys.exit(main())
