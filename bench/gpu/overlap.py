#!/usr/bin/env python3
"""AllGather + GEMM and GEMM + ReduceScatter at Llama-3-70B shapes:
Braid's fused ring schedules against the serial collective + GEMM.

The shapes are one tensor-parallel layer of Llama-3-70B with sequence
parallelism: S = 4096 tokens, hidden H = 8192, the FFN's 28672 split TP
ways (F = 28672 / TP), bf16 with f32 accumulation:

  ag: x [S/TP, H] --all_gather--> [S, H] @ W [H, F]              (up projection)
  rs: y [S, F] @ W2 [F, H] --reduce_scatter--> [S/TP, H]         (down projection)

Five programs per pattern, each timed by braid-exec-cuda (warm-up, then the
median over --repeat runs of the slowest rank, CUDA events on each rank's
compute stream; inputs restored in device memory before each run):

  fused      the pattern, --overlap=force (the ring schedule, send/receive)
  symmetric  the same schedule with --comm=symmetric: puts into the peers'
             slots of symmetric memory on the copy engines, flags raised
             and waited on the streams, credits back
  serial     the pattern, --overlap=off (collective, then GEMM)
  gemm       the GEMM alone, on the gathered / full operand (cuBLASLt)
  gemm_gen   the same GEMM as Braid's own tensor-core kernel
             (--gemm=generated: ldmatrix + mma.sync, which later steps put
             the communication inside)
  comm       the collective alone

  R = T_fused / max(T_gemm, T_comm)             (FLUX on H800: 1.13-1.14)
  E = 1 - (T_fused - T_gemm) / (T_serial - T_gemm)   (FLUX's efficiency)
  2s/sym = T_fused / T_symmetric    (above 1: the one-sided schedule is faster)
  lib/gen = T_gemm / T_gemm_gen     (Braid's GEMM against cuBLASLt: goal >= 0.85)

Transports:
  loopback   TP = 8 logical ranks in one process on one GPU, transfers as
             device-to-device copies, once by the copy engines (ce) and once
             by an SM copy kernel (sm). LOOPBACK-ONLY figures: CE copies run
             at HBM speed and take no SMs, the GPU does all 8 ranks' work,
             and the serial baseline already overlaps across ranks (one
             rank's GEMM runs while another copies), so R and E say little
             about a real multi-GPU run; SM copies are closer to NCCL's cost.
  nccl       one process per GPU (NCCL through an id file), TP = the largest
             of 8, 4, 2 that the machine's GPUs allow: the real thing.

Failures do not stop the measurements: a program that fails or times out
is reported and its figures are null. RESULTS/overlap.json is rewritten
after every measurement.

Usage:
  overlap.py prepare BUNDLE [--bin build/bin]     compile (development machine)
  overlap.py run BUNDLE RESULTS [--repeat 20] [--transports loopback,nccl]
             [--copies ce,sm] [--gpus N] [--budget S] [--timeout S]
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "test", "lib"))
import launch  # noqa: E402
import shared  # noqa: E402
from shared import overlap_header, overlap_lines  # noqa: E402

S, H, FFN = 4096, 8192, 28672
TPS = (8, 4, 2)  # group sizes the bundle carries programs for
LOOPBACK_TP = 8
KINDS = ("fused", "serial", "gemm", "comm", "symmetric", "gemm_gen")
PATTERNS = (("ag", "AllGather+GEMM"), ("rs", "GEMM+ReduceScatter"))


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + dtype + ">"


def matmul(out, a, b, a_shape, b_shape, shape):
    return (f"  %{out}_e = tensor.empty() : {tensor(shape, 'f32')}\n"
            f"  %{out}_z = linalg.fill ins(%zero : f32) outs(%{out}_e : {tensor(shape, 'f32')}) -> {tensor(shape, 'f32')}\n"
            f"  %{out} = linalg.matmul ins(%{a}, %{b} : {tensor(a_shape, 'bf16')}, {tensor(b_shape, 'bf16')}) "
            f"outs(%{out}_z : {tensor(shape, 'f32')}) -> {tensor(shape, 'f32')}\n")


def program(tp, args, body, result, result_shape, result_dtype="f32"):
    params = ", ".join(f"%{name}: {tensor(shape, dtype)}" for name, shape, dtype in args)
    result_type = tensor(result_shape, result_dtype)
    return (f"shard.grid @g(shape = {tp})\n"
            f"func.func @main({params}) -> {result_type} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n" + body +
            f"  return %{result} : {result_type}\n}}\n")


def programs(tp):
    """name -> (MLIR text, overlap mode, extra flags), for a group of tp
    ranks."""
    F = FFN // tp
    gather = (f"  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : "
              f"{tensor((S // tp, H), 'bf16')} -> {tensor((S, H), 'bf16')}\n")
    ag = program(tp, [("x", (S // tp, H), "bf16"), ("w", (H, F), "bf16")],
                 gather + matmul("y", "g", "w", (S, H), (H, F), (S, F)), "y", (S, F))
    ag_gemm = program(tp, [("g", (S, H), "bf16"), ("w", (H, F), "bf16")],
                      matmul("y", "g", "w", (S, H), (H, F), (S, F)), "y", (S, F))
    ag_comm = program(tp, [("x", (S // tp, H), "bf16")], gather, "g", (S, H), "bf16")
    scatter = (f"  %s = shard.reduce_scatter %y on @g grid_axes = [0] scatter_axis = 0 : "
               f"{tensor((S, H), 'f32')} -> {tensor((S // tp, H), 'f32')}\n")
    rs = program(tp, [("a", (S, F), "bf16"), ("w", (F, H), "bf16")],
                 matmul("y", "a", "w", (S, F), (F, H), (S, H)) + scatter, "s", (S // tp, H))
    rs_gemm = program(tp, [("a", (S, F), "bf16"), ("w", (F, H), "bf16")],
                      matmul("y", "a", "w", (S, F), (F, H), (S, H)), "y", (S, H))
    rs_comm = program(tp, [("y", (S, H), "f32")], scatter, "s", (S // tp, H))
    symmetric = ["--comm=symmetric"]
    generated = ["--gemm=generated"]
    return {
        "ag_fused": (ag, "force", []), "ag_serial": (ag, "off", []),
        "ag_gemm": (ag_gemm, "off", []), "ag_comm": (ag_comm, "off", []),
        "ag_symmetric": (ag, "force", symmetric),
        "ag_gemm_gen": (ag_gemm, "off", generated),
        "rs_fused": (rs, "force", []), "rs_serial": (rs, "off", []),
        "rs_gemm": (rs_gemm, "off", []), "rs_comm": (rs_comm, "off", []),
        "rs_symmetric": (rs, "force", symmetric),
        "rs_gemm_gen": (rs_gemm, "off", generated),
    }


def prepare(args):
    compiler = os.path.join(args.bin, "braid-compile")
    for tp in TPS:
        out = os.path.join(args.bundle, "overlap", f"tp{tp}")
        os.makedirs(out, exist_ok=True)
        for name, (text, mode, flags) in programs(tp).items():
            source = os.path.join(out, name + ".mlir")
            with open(source, "w") as f:
                f.write(text)
            cmd = [compiler, source, "--target=cuda", f"--sm={args.sm}",
                   f"--overlap={mode}", "--target-preset=h200", *flags,
                   f"--report={os.path.join(out, name + '.report.json')}",
                   "-o", os.path.join(out, name + ".so")]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"overlap.py: compiling {name} (TP {tp}) failed:\n{proc.stderr}")
        print(f"overlap.py: built the TP {tp} programs")


class Budget:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


def time_program(args, budget, library, transport, copy, tp, seed):
    """Median ms of `library`, or (None, why)."""
    limit = min(args.timeout, budget.left())
    if limit < 5:
        return None, "skipped: the step's time is up"
    exec_path = os.path.join(args.bundle, "bin", "braid-exec-cuda")
    # The runner's own timeout comes first, so that a hang names its rank
    # and step; the kill is for a runner that cannot report.
    cmd = [exec_path, library, "--warmup=5", f"--repeat={args.repeat}",
           f"--seed={seed}", f"--timeout={max(2.0, limit - 10):g}"]
    env = launch.braid_env({"BRAID_LOOPBACK_COPY": copy} if copy else None)
    if transport == "loopback":
        proc = launch.run(cmd + [f"--loopback={tp}"], limit, env)
    else:
        proc = launch.run_ranks(cmd, tp, os.path.join(args.results, "overlap.nccl-id"),
                                limit, env)
    found = re.search(r"median ([0-9.]+) ms", proc.stdout)
    if proc.returncode != 0 or not found:
        lines = (proc.stdout + proc.stderr).strip().splitlines()
        return None, f"exit {proc.returncode}: " + (lines[-1] if lines else "no output")
    return float(found.group(1)), None


def label(transport, copy, tp):
    if transport == "loopback":
        return (f"loopback-only, {tp} ranks on 1 GPU, "
                f"{'copy-engine' if copy == 'ce' else 'SM-kernel'} copies")
    return f"NCCL, {tp} GPUs"


def rows_of(times, errors, runs):
    rows = []
    for (transport, copy, tp), _ in runs:
        for pattern, name in PATTERNS:
            t = {k: times.get((transport, copy, tp, f"{pattern}_{k}")) for k in KINDS}
            row = {"pattern": name, "transport": transport, "copy": copy,
                   "ranks": tp, "label": label(transport, copy, tp),
                   "loopback_only": transport == "loopback",
                   "shape": {"S": S, "H": H, "F": FFN // tp, "tp": tp},
                   "errors": {k: errors[(transport, copy, tp, f"{pattern}_{k}")]
                              for k in KINDS
                              if errors.get((transport, copy, tp, f"{pattern}_{k}"))}}
            for k in KINDS:
                row[f"t_{k}_ms"] = t[k]
            row["R"] = row["E"] = row["fused_over_serial"] = None
            if t["fused"] is not None and t["gemm"] is not None and t["comm"] is not None:
                row["R"] = t["fused"] / max(t["gemm"], t["comm"])
            if None not in (t["fused"], t["gemm"], t["serial"]) and t["serial"] > t["gemm"]:
                row["E"] = 1 - (t["fused"] - t["gemm"]) / (t["serial"] - t["gemm"])
            if t["fused"] is not None and t["serial"] is not None:
                row["fused_over_serial"] = t["fused"] / t["serial"]
            row["two_sided_over_symmetric"] = None
            if t["fused"] is not None and t["symmetric"]:
                row["two_sided_over_symmetric"] = t["fused"] / t["symmetric"]
            row["library_over_generated"] = None
            if t["gemm"] is not None and t["gemm_gen"]:
                row["library_over_generated"] = t["gemm"] / t["gemm_gen"]
            rows.append(row)
    return rows


def print_rows(rows):
    print(overlap_header(20))
    print("\n".join(overlap_lines(rows, 20)))


def run(args):
    budget = Budget(args.budget)
    os.makedirs(args.results, exist_ok=True)
    runs = []
    transports = [t for t in args.transports.split(",") if t]
    if "loopback" in transports:
        for copy in [c for c in args.copies.split(",") if c]:
            runs.append((("loopback", copy, LOOPBACK_TP), None))
    if "nccl" in transports:
        tp = next((t for t in TPS if t <= args.gpus), None)
        if tp is None or args.gpus < 2:
            print(f"overlap.py: NCCL skipped ({args.gpus} GPU{'s' if args.gpus != 1 else ''}; it needs 2 or more)")
        else:
            runs.append((("nccl", "", tp), None))
    times, errors = {}, {}
    out = os.path.join(args.results, "overlap.json")
    failures = 0
    seed = 0
    for (transport, copy, tp), _ in runs:
        folder = os.path.join(args.bundle, "overlap", f"tp{tp}")
        for name in programs(tp):
            seed += 1
            ms, why = measure(args, budget, os.path.join(folder, name + ".so"),
                              (transport, copy, tp), seed, "overlap", name)
            key = (transport, copy, tp, name)
            times[key], errors[key] = ms, why
            failures += ms is None
            # Whatever happens next, what was measured is on disk.
            with open(out, "w") as f:
                json.dump({"rows": rows_of(times, errors, runs)}, f, indent=2)
    rows = rows_of(times, errors, runs)
    for row in rows:
        # The schedule Braid chose, from the fused program's report.
        prefix = "ag" if row["pattern"] == "AllGather+GEMM" else "rs"
        report = os.path.join(args.bundle, "overlap", f"tp{row['ranks']}",
                              f"{prefix}_fused.report.json")
        try:
            with open(report) as f:
                row["strategy"] = [c["strategy"] for c in json.load(f)["collectives"]]
        except (OSError, ValueError, KeyError):
            row["strategy"] = None
        # And how the symmetric program moved its transfers.
        try:
            with open(report.replace("_fused.", "_symmetric.")) as f:
                row["symmetric_transport"] = [c["transport"] for c in json.load(f)["collectives"]]
        except (OSError, ValueError, KeyError):
            row["symmetric_transport"] = None
    with open(out, "w") as f:
        json.dump({"rows": rows}, f, indent=2)
    print_rows(rows)
    if any(r["loopback_only"] for r in rows):
        print("loopback-only: copies by the copy engines run at HBM speed and take no SMs; the\n"
              "serial baseline already overlaps one rank's GEMM with another's copies; SM copies\n"
              "are closer to what NCCL costs. Only NCCL rows measure a multi-GPU run.")
    return 1 if failures else 0


def command_line(doc, budget, timeout):
    """The command line this benchmark and collectives.py share: shared.py's,
    with the GPU's arch for prepare and the transports and GPUs for run."""
    parser, p, r = shared.command_line(doc, budget, timeout)
    p.add_argument("--sm", default="90a")
    r.add_argument("--transports", default="loopback,nccl")
    r.add_argument("--gpus", type=int, default=1)
    return parser, p, r


def measure(args, budget, library, run, seed, step, name):
    """time_program on `run` = (transport, copy, tp), with a line saying what
    it measured or why it failed: (ms, why)."""
    transport, copy, tp = run
    ms, why = time_program(args, budget, library, transport, copy, tp, seed)
    if ms is None:
        print(f"FAIL {step} {name} ({label(transport, copy, tp)}): {why}", flush=True)
    else:
        print(f"{step}.py: {name} ({label(transport, copy, tp)}): {ms:.3f} ms", flush=True)
    return ms, why


def dispatch(args, prepare, run):
    if args.command == "prepare":
        prepare(args)
        return 0
    return run(args)


def main():
    parser, _, r = command_line(__doc__, budget=600, timeout=60)
    r.add_argument("--copies", default="ce,sm")
    return dispatch(parser.parse_args(), prepare, run)


if __name__ == "__main__":
    sys.exit(main())
