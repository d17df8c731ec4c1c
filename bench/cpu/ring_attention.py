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
  block at hand is scored 512 keys at a time, online softmax).

It prints both times, gathered / ring (> 1: the ring is faster), and the
bytes of scores a rank holds either way (the report's `scores`).

Usage: ring_attention.py [--bin build/bin] [--ranks 4] [--repeat 5]
                         [--tokens 1024,4096] [--heads 8] [--head-dim 64]
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "test", "lib"))
from common import report_records, time_program  # noqa: E402
import e2e  # noqa: E402


def program(ranks, tokens, heads, head_dim):
    cfg = e2e.Config()
    cfg.grid, cfg.axis, cfg.group = [ranks], 0, ranks
    cfg.dtype, cfg.variant = "bf16", "causal"
    cfg.scale = tokens // ranks // 4
    cfg.heads, cfg.head_dim = heads, head_dim
    return e2e.pattern_ring_attention(cfg)[0]


def scores(bin_dir, tmp, text):
    record = report_records(bin_dir, tmp, "scores", text, ["--overlap=force"])[0]
    return record["strategy"], record.get("scores", {})


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tokens", default="1024,4096")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    args = parser.parse_args()
    print(f"{'tokens':>6} {'gathered ms':>12} {'ring ms':>8} {'ratio':>6} "
          f"{'scores gathered':>16} {'scores ring':>12}  strategy")
    with tempfile.TemporaryDirectory(prefix="braid-ring-attention-") as tmp:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            text = program(args.ranks, tokens, args.heads, args.head_dim)
            strategy, held = scores(args.bin, tmp, text)
            gathered = time_program(args.bin, tmp, f"off{tokens}", text, args.ranks,
                                    args.repeat, ["--overlap=off"])
            ring = time_program(args.bin, tmp, f"ring{tokens}", text, args.ranks,
                                args.repeat, ["--overlap=force"])
            print(f"{tokens:>6} {gathered:>12.2f} {ring:>8.2f} {gathered / ring:>6.2f} "
                  f"{mib(held.get('materialized_bytes', 0)):>16} "
                  f"{mib(held.get('per_step_bytes', 0)):>12}  {strategy}")


if __name__ == "__main__":
    main()
