#!/usr/bin/env python3
"""Collectives inside kernels on the GPU: an all-reduce summed inside the
kernel of the residual add + RMSNorm after it, against NCCL's all-reduce
then Braid's fused residual + norm kernel.

The program is a decoder layer's attention or MLP output: a bf16 partial
[tokens, 8192] all-reduced, plus the residual, then RMSNorm (f32 inside);
the residual stream and the norm weight are replicated, as a
tensor-parallel layer's are. Tokens 1, 16, 128 and 4096 (decode to
prefill). Three programs per size, each timed by braid-exec-cuda (warm-up,
then the median over --repeat runs of the slowest rank):

  library   --fuse-collectives=off --overlap=off: the library's all-reduce
            (NCCL, or the loopback transport's), then the fused kernel
  one_shot  --fuse-collectives=one-shot --comm=symmetric: the partial put
            into every peer's symmetric slot, the sum in the kernel
            (one_shot_ar)
  two_shot  --fuse-collectives=two-shot --comm=symmetric: each peer's
            block, summed in the kernel of the chain on 1/n of the rows,
            both results put to every peer (two_shot_ar; with one token the
            rows split along the hidden dimension and only the residual
            add moves)

and prints library / each (above 1: the in-kernel form is faster), with
the form `--fuse-collectives=auto` would pick (from its report).

Transports: loopback (8 logical ranks on one GPU, transfers as
device-to-device copies: LOOPBACK-ONLY figures, see overlap.py) and NCCL
(one process per GPU, 8 or 2 ranks, when there are 2 or more GPUs).
RESULTS/collectives.json is rewritten after every measurement.

Usage:
  collectives.py prepare BUNDLE [--bin build/bin] [--tps 8,2] [--placeholders]
  collectives.py run BUNDLE RESULTS [--repeat 20] [--transports loopback,nccl]
                 [--gpus N] [--budget S] [--timeout S]
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from overlap import Budget, command_line, dispatch, label, measure  # noqa: E402
from shared import fmt, grouped  # noqa: E402

H = 8192
TOKENS = (1, 16, 128, 4096)
TPS = (8, 2)  # group sizes the bundle carries programs for
LOOPBACK_TP = 8
KINDS = {
    "library": ["--fuse-collectives=off", "--overlap=off"],
    "one_shot": ["--fuse-collectives=one-shot", "--comm=symmetric"],
    "two_shot": ["--fuse-collectives=two-shot", "--comm=symmetric"],
    # Compiled only for its report: the form the defaults pick.
    "auto": [],
}


def folder(bundle, tp):
    # Under overlap/: run-all-dry.test's fake runner times these as it
    # times the overlap programs.
    return os.path.join(bundle, "overlap", "collectives", f"tp{tp}")


def prepare(args):
    # The program bench/cpu/fuse_collectives.py times (its common.py, not
    # this folder's overlap.py, which bench/cpu also has).
    sys.path.append(os.path.join(HERE, "..", "cpu"))
    from common import collective_norm_program
    compiler = os.path.join(args.bin, "braid-compile")
    for tp in [int(t) for t in args.tps.split(",")]:
        out = folder(args.bundle, tp)
        os.makedirs(out, exist_ok=True)
        for tokens in TOKENS:
            text = collective_norm_program(tp, tokens, H, replicated=True)
            source = os.path.join(out, f"t{tokens}.mlir")
            with open(source, "w") as f:
                f.write(text)
            for kind, flags in KINDS.items():
                name = f"{kind}_t{tokens}"
                library = os.path.join(out, name + ".so")
                if args.placeholders:
                    if kind != "auto":
                        open(library, "w").close()
                    continue
                cmd = [compiler, source, "--target=cuda", f"--sm={args.sm}",
                       "--target-preset=h200", *flags,
                       f"--report={os.path.join(out, name + '.report.json')}"]
                cmd += ["--emit=dist", "-o", os.devnull] if kind == "auto" else ["-o", library]
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    sys.exit(f"collectives.py: compiling {name} (TP {tp}) failed:\n{proc.stderr}")
        print(f"collectives.py: built the TP {tp} programs")


def strategy(bundle, tp, name):
    try:
        with open(os.path.join(folder(bundle, tp), name + ".report.json")) as f:
            record = json.load(f)["collectives"][0]
        return record["strategy"] or record["decision"]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def rows_of(args, times, errors, runs):
    rows = []
    for transport, copy, tp in runs:
        for tokens in TOKENS:
            t = {k: times.get((transport, tp, f"{k}_t{tokens}")) for k in KINDS if k != "auto"}
            row = {"transport": transport, "ranks": tp, "tokens": tokens, "hidden": H,
                   "label": label(transport, copy, tp),
                   "loopback_only": transport == "loopback",
                   "auto_picks": strategy(args.bundle, tp, f"auto_t{tokens}"),
                   "errors": {k: errors[(transport, tp, f"{k}_t{tokens}")]
                              for k in t if errors.get((transport, tp, f"{k}_t{tokens}"))}}
            for k, v in t.items():
                row[f"t_{k}_ms"] = v
                row[f"library_over_{k}"] = (t["library"] / v if k != "library" and v
                                            and t["library"] is not None else None)
            rows.append(row)
    return rows


def print_rows(rows):
    print(f"{'tokens':>6} {'library':>9} {'one-shot':>9} {'ratio':>6} {'two-shot':>9} "
          f"{'ratio':>6}  auto picks   (ms; ratio = library / form)")
    def heading(r):
        return f"  -- {r['label']}, AR + residual + RMSNorm, [tokens, {H}] bf16"

    def line(r):
        return (f"{r['tokens']:>6} {fmt(r['t_library_ms'], '9.3f')} {fmt(r['t_one_shot_ms'], '9.3f')} "
                f"{fmt(r['library_over_one_shot'], '6.2f')} {fmt(r['t_two_shot_ms'], '9.3f')} "
                f"{fmt(r['library_over_two_shot'], '6.2f')}  {r['auto_picks'] or '-'}")
    print("\n".join(grouped(rows, heading, line)))


def run(args):
    budget = Budget(args.budget)
    os.makedirs(args.results, exist_ok=True)
    transports = [t for t in args.transports.split(",") if t]
    runs = []
    if "loopback" in transports:
        runs.append(("loopback", "ce", LOOPBACK_TP))
    if "nccl" in transports:
        tp = next((t for t in TPS if t <= args.gpus), None)
        if tp is None or args.gpus < 2:
            print(f"collectives.py: NCCL skipped ({args.gpus} GPU{'s' if args.gpus != 1 else ''}; "
                  "it needs 2 or more)")
        else:
            runs.append(("nccl", "", tp))
    times, errors = {}, {}
    out = os.path.join(args.results, "collectives.json")
    failures, seed = 0, 100
    for transport, copy, tp in runs:
        for tokens in TOKENS:
            for kind in KINDS:
                if kind == "auto":
                    continue
                name = f"{kind}_t{tokens}"
                seed += 1
                ms, why = measure(args, budget, os.path.join(folder(args.bundle, tp), name + ".so"),
                                  (transport, copy, tp), seed, "collectives", name)
                times[(transport, tp, name)], errors[(transport, tp, name)] = ms, why
                failures += ms is None
                with open(out, "w") as f:
                    json.dump({"rows": rows_of(args, times, errors, runs)}, f, indent=2)
    rows = rows_of(args, times, errors, runs)
    with open(out, "w") as f:
        json.dump({"rows": rows}, f, indent=2)
    print_rows(rows)
    return 1 if failures else 0


def main():
    parser, p, _ = command_line(__doc__, budget=300, timeout=30)
    p.add_argument("--tps", default=",".join(str(t) for t in TPS))
    p.add_argument("--placeholders", action="store_true",
                   help="empty libraries (for run_all.sh's dry run)")
    return dispatch(parser.parse_args(), prepare, run)


if __name__ == "__main__":
    sys.exit(main())
