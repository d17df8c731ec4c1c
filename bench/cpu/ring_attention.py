#!/usr/bin/env python3
"""Ring attention against the materializing schedule, on CPU ranks.

Context-parallel causal attention (q, k, v split along the sequence over
the ranks, k and v all-gathered; the program test/lib/e2e.py's
`ring_attention` pattern writes, bf16 with f32 scores) is compiled twice
and timed with braid-exec (median of --repeat runs, slowest rank), in one
run:

- gathered: --overlap=off, the two all-gathers whole, then each rank's
  whole rows x sequence scores, softmax and product;
- ring: --overlap=force, ring_attention (k and v blocks travelling while the
  block at hand is scored 512 keys at a time, online softmax), skipping the
  pieces the causal mask fills whole, balanced (each rank also scores the
  rows of the block it holds against its own keys, n/2 + 1 steps);
- unbalanced: the same with --balance-attention=off (each rank scores only
  its own rows, n steps: the last rank scores every block);
- ring, every piece: the same, with the mask's row position passed through
  a remainder by 2^40 (the same numbers), which the skip's analysis does
  not follow, so that every piece is computed.

It prints the times, gathered / ring (> 1: the ring is faster), balance
gain (unbalanced / ring), skip gain (every piece / unbalanced), and the bytes of scores a rank holds either way (the
report's `scores`).

Usage: ring_attention.py [--bin build/bin] [--ranks 4] [--repeat 5]
                         [--tokens 1024,4096] [--heads 8] [--head-dim 64]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from common import header, mib, rank_args, report_records, time_program  # noqa: E402
from e2e_patterns import PATTERNS, Config  # noqa: E402


def program(ranks, tokens, heads, head_dim):
    cfg = Config()
    cfg.grid, cfg.axis, cfg.group = [ranks], 0, ranks
    cfg.dtype, cfg.variant = "bf16", "causal"
    cfg.scale = tokens // ranks // 4
    cfg.heads, cfg.head_dim = heads, head_dim
    return PATTERNS["ring_attention"](cfg)[0]


def unskippable(text):
    """The program with the causal mask's row position hidden from the
    skip's analysis (x mod 2^40 is x here)."""
    old = "%gi = arith.addi %base, %i : index"
    assert old in text
    return text.replace(old, "%gi0 = arith.addi %base, %i : index\n"
                        "    %big = arith.constant 1099511627776 : index\n"
                        "    %gi = arith.remui %gi0, %big : index")


def scores(bin_dir, tmp, text):
    record = report_records(bin_dir, tmp, "scores", text, ["--overlap=force"])[0]
    return record["strategy"], record.get("scores", {})


def main():
    args = rank_args(5, tokens=(1024, 4096), heads=8, head_dim=64)
    print(header(("tokens", 6), "gathered ms", "ring ms", "ratio", "unbalanced ms",
                 ("balance gain", 12), "every piece ms", ("skip gain", 9), "scores gathered",
                 "scores ring") + "  strategy")
    with tempfile.TemporaryDirectory(prefix="braid-ring-attention-") as tmp:
        for tokens in args.tokens:
            text = program(args.ranks, tokens, args.heads, args.head_dim)
            strategy, held = scores(args.bin, tmp, text)
            gathered = time_program(args.bin, tmp, f"off{tokens}", text, args.ranks,
                                    args.repeat, ["--overlap=off"])
            ring = time_program(args.bin, tmp, f"ring{tokens}", text, args.ranks,
                                args.repeat, ["--overlap=force"])
            unbalanced = time_program(args.bin, tmp, f"unbalanced{tokens}", text,
                                      args.ranks, args.repeat,
                                      ["--overlap=force", "--balance-attention=off"])
            every = time_program(args.bin, tmp, f"every{tokens}", unskippable(text),
                                 args.ranks, args.repeat, ["--overlap=force"])
            print(f"{tokens:>6} {gathered:>12.2f} {ring:>8.2f} {gathered / ring:>6.2f} "
                  f"{unbalanced:>14.2f} {unbalanced / ring:>12.2f} "
                  f"{every:>15.2f} {every / unbalanced:>9.2f} "
                  f"{mib(held.get('materialized_bytes', 0)):>16} "
                  f"{mib(held.get('per_step_bytes', 0)):>12}  {strategy}")


if __name__ == "__main__":
    main()
