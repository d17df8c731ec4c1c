#!/usr/bin/env python3
"""Collectives inside kernels against the library's collective plus a
separate kernel, on CPU ranks.

A bf16 partial [tokens, hidden] is all-reduced (or reduce-scattered along
the rows), the residual added, and the result RMSNorm-ed (a decoder
layer's attention or MLP output). For each size it times with braid-exec
(median of --repeat runs, slowest rank), in one run:

- library: --fuse-collectives=off --overlap=off --comm=two-sided, MPI's
  collective (MPI_Iallreduce / MPI_Ireduce_scatter), then the residual
  and the norm as one fused kernel;
- one-shot: --fuse-collectives=one-shot, the partial put into the peers'
  symmetric slots and summed inside that kernel (one_shot_ar,
  one_shot_rs);
- two-shot (all-reduces): --fuse-collectives=two-shot, each peer's block
  summed in the kernel of the residual and the norm on 1/n of the rows,
  both results then put to every peer (two_shot_ar; `-` where it does
  not apply: with one token the rows split along the hidden dimension,
  so only the residual add moves);
- auto: the defaults, whatever the cost model picks (its strategy shown);

and prints library / each (> 1: that form is faster). The residual and
the norm weight are placed replicated (as in a tensor-parallel layer), so
that two shot applies.

A second table gathers instead (sequence parallelism before a column-
parallel matmul): this rank's rows plus the residual, RMSNorm-ed, then
all-gathered into x @ W [hidden, --out]:

- library: MPI's all-gather (MPI_Iallgather), then the matmul;
- ring: --overlap=force --fuse-collectives=off, ring_ag_matmul (the
  transport as comm=auto decides);
- push: --fuse-collectives=force, push_ag_matmul (the chunk put to every
  peer in one round, the matmul on each as it lands), the norm's kernel
  storing into the peers' slots;
- push, puts: the same with --fuse-puts=false (the kernel writes its own
  buffer and a put copies it to each peer);
- auto.

A third table reduce-scatters a matmul's rows instead (sequence
parallelism after a row-parallel matmul): x [tokens, --rs-inner] @ W
[--rs-inner, --hidden] on each rank, then the rows' blocks summed:

- library: the matmul, then MPI's reduce-scatter;
- ring: --overlap=force --fuse-collectives=off, ring_matmul_rs;
- push: --fuse-collectives=force, push_matmul_rs (each peer's block
  computed on its own and written by its matmul into the owner's slot);
- push, puts: the same with --fuse-puts=false (each block's matmul
  writes its own buffer and a put copies it to the owner);
- auto.

Usage: fuse_collectives.py [--bin build/bin] [--ranks 4] [--repeat 9]
                           [--tokens 1,8,64,512] [--hidden 4096]
                           [--gather-tokens 4,16,64,512] [--out 1024]
                           [--rs-tokens 64,512] [--rs-inner 1024]
(an empty list skips its table)
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import (collective_norm_program, gemm_rs_program, norm_gather_program,  # noqa: E402
                    rank_args, report_records, time_program)


def strategy(bin_dir, tmp, name, text, flags=()):
    records = report_records(bin_dir, tmp, f"{name}-strategy", text, flags)
    return records[0]["strategy"] or records[0]["decision"]


def main():
    args = rank_args(9, tokens=(1, 8, 64, 512), hidden=4096, gather_tokens=(4, 16, 64, 512), out=1024,
                     rs_tokens=(64, 512), rs_inner=1024)
    print(f"{'collective':<15} {'tokens':>6} {'library ms':>11} {'one-shot':>9} "
          f"{'ratio':>6} {'two-shot':>9} {'ratio':>6} {'auto ms':>8} {'ratio':>6}  auto picks")
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in args.tokens:
            for scatter in (False, True):
                if scatter and tokens % args.ranks:
                    continue
                kind = "reduce_scatter" if scatter else "all_reduce"
                name = f"{kind}-{tokens}"
                text = collective_norm_program(args.ranks, tokens, args.hidden, scatter,
                                               replicated=not scatter)
                variants = [("library", ["--fuse-collectives=off", "--overlap=off",
                                         "--comm=two-sided"]),
                            ("one-shot", ["--fuse-collectives=one-shot"])]
                if not scatter:
                    variants.append(("two-shot", ["--fuse-collectives=two-shot"]))
                variants.append(("auto", []))
                times = {variant: time_program(args.bin, tmp, f"{name}-{variant}", text,
                                               args.ranks, args.repeat, flags)
                         for variant, flags in variants}
                picked = strategy(args.bin, tmp, name, text)
                forms = {variant: strategy(args.bin, tmp, f"{name}-{variant}", text, flags)
                         for variant, flags in variants if variant.endswith("-shot")}

                def cell(variant):
                    # The form did not apply (another schedule ran): `-`.
                    if variant not in times or "_shot_" not in forms[variant]:
                        return f"{'-':>9} {'-':>6}"
                    return f"{times[variant]:9.3f} {times['library'] / times[variant]:6.2f}"
                print(f"{kind:<15} {tokens:>6} {times['library']:11.3f} {cell('one-shot')} "
                      f"{cell('two-shot')} {times['auto']:8.3f} "
                      f"{times['library'] / times['auto']:6.2f}  {picked}", flush=True)
        gather_table(args, tmp)
        scatter_table(args, tmp)


# The schedules the gather and scatter tables compare, by column.
MATMUL_VARIANTS = [("library", ["--fuse-collectives=off", "--overlap=off", "--comm=two-sided"]),
                   ("ring", ["--fuse-collectives=off", "--overlap=force"]),
                   ("push", ["--fuse-collectives=force"]),
                   ("puts", ["--fuse-collectives=force", "--fuse-puts=false"]),
                   ("auto", [])]


def matmul_table(args, tmp, kind, token_sizes, program):
    """A collective fused with a matmul, `program(tokens)` its program:
    library, ring, push (with and without the kernels' stores into the
    peers' slots), auto."""
    print(f"\n{kind:<14} {'tokens':>6} {'library ms':>11} {'ring':>8} {'ratio':>6} "
          f"{'push':>8} {'ratio':>6} {'puts':>8} {'ratio':>6} {'auto ms':>8} {'ratio':>6}  auto picks")
    for tokens in token_sizes:
        if tokens % args.ranks:
            continue
        name = f"{kind}-{tokens}"
        text = program(tokens)
        times = {variant: time_program(args.bin, tmp, f"{name}-{variant}", text,
                                       args.ranks, args.repeat, flags)
                 for variant, flags in MATMUL_VARIANTS}
        picked = strategy(args.bin, tmp, name, text)
        cells = " ".join(f"{times[v]:8.3f} {times['library'] / times[v]:6.2f}"
                         for v in ("ring", "push", "puts", "auto"))
        print(f"{'':<14} {tokens:>6} {times['library']:11.3f} {cells}  {picked}", flush=True)


def gather_table(args, tmp):
    """The norm's rows all-gathered into a matmul."""
    matmul_table(args, tmp, "all_gather", args.gather_tokens,
                 lambda t: norm_gather_program(args.ranks, t, args.hidden, args.out))


def scatter_table(args, tmp):
    """A matmul's rows reduce-scattered."""
    matmul_table(args, tmp, "reduce_scatter", args.rs_tokens,
                 lambda t: gemm_rs_program(args.ranks, t, args.rs_inner, args.hidden))


if __name__ == "__main__":
    main()
