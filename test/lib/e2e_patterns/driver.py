"""End-to-end numerical tests of Braid's schedules on CPU ranks.

For one pattern and one configuration (grid, axis, element type, sizes),
this script writes an SPMD program in upstream `shard` form, draws per-rank
inputs, computes the expected per-rank results with numpy (test/lib/spmd.py,
independent of Braid), then for each overlap mode compiles the program with
braid-compile, runs it with braid-exec on as many MPI ranks as the grid has,
and compares. With --expect, it also checks from the JSON report that the
schedule under test was really applied.

Usage: e2e.py PATTERN --grid 4|2x2 [--axis A] [--dtype f32|f16|bf16]
              [--variant V] [--modes force,off] [--expect STRATEGY]
              [--expect-transport symmetric|two-sided]
              [--expect-balanced yes|no] [--expect-remark TEXT] [--repeat N]
              [--bin BUILD/bin] [--keep DIR]
              [--target cpu|cuda [--sm 90a] [--compile-only]
               [--transport loopback|nccl|nccl-file]]
              [--build-only DIR | --prebuilt DIR]
Exit status 0 when every mode matches the reference, 1 otherwise.

With --target cuda the program is compiled for the GPU (kernels as cubins
through ptxas) and, unless --compile-only, run by braid-exec-cuda: as N
logical ranks on one GPU (--transport loopback, the default) or one process
per GPU under mpirun (nccl), or one process per GPU with NCCL bootstrapped
through a file instead of MPI (nccl-file, no launcher needed). Each run may
take --run-timeout seconds (the runner's own --timeout, which names the
rank and step that hung; the process is killed 15 s later).
--compile-only also assembles the kernels' PTX with `ptxas -v` and fails if
any kernel spills registers. Braid's binaries get BRAID_RUN_LIBRARY_PATH in
front of their LD_LIBRARY_PATH when it is set (test/lib/launch.py).

--build-only DIR compiles the program for each mode into DIR and stops;
--prebuilt DIR runs and checks what --build-only left there, without a
compiler (bench/gpu/ builds on a development machine and runs on a GPU
machine that has no LLVM). Inputs and references come from --seed alike.

The patterns are the modules of this package (e2e_patterns/__init__.py
finds them); this module is the command line of test/lib/e2e.py.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import launch
import spmd

from . import PATTERNS
from .core import (DTYPES, Config, load, quantize, relative_error, to_storage,
                   tolerance)

LIB = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        sys.stdout.write(f"command failed ({proc.returncode}): {' '.join(cmd)}\n")
        sys.stdout.write(proc.stdout + proc.stderr)
    return proc


def check_ptx(args, compile_cmd, lib, label, mode):
    """--compile-only: the library was built (cubins through ptxas); now
    the kernels' PTX through `ptxas -v`, which must report no spills.
    Returns True on failure."""
    ptx = lib + ".ptx"
    cmd = [c for c in compile_cmd if not c.startswith("--report=")]
    cmd[cmd.index("-o") + 1] = ptx
    if run(cmd + ["--emit=ptx"]).returncode != 0:
        return True
    with open(ptx) as f:
        text = f.read()
    if ".entry" not in text:
        # Everything ran on cuBLASLt and the runtime: no kernel to check.
        print(f"PASS {label} mode={mode} sm_{args.sm}: compiled, 0 kernels")
        return False
    if f".target sm_{args.sm}" not in text:
        print(f"FAIL {label} mode={mode}: the PTX does not target sm_{args.sm}")
        return True
    # Dynamic shared memory must be an extern, unsized array: a sized or
    # static declaration is laid out among the static variables (the
    # reduction buffers) and the launch's dynamic bytes overlap them.
    # Declarations start with a directive; loads and stores that address
    # the array directly ("ld.shared.v4.b32 ..., [__dynamic_shmem__0]") are
    # not declarations.
    shmem = re.findall(r"^\s*(\.\S.*\b__dynamic_shmem__\d+\b.*);", text, re.M)
    shmem = [d for d in shmem if ".shared" in d]
    bad = [d for d in shmem if not re.fullmatch(
        r"\.extern \.shared \.align \d+ \.b8 __dynamic_shmem__\d+\[\]", d.strip())]
    if bad:
        print(f"FAIL {label} mode={mode}: dynamic shared memory declared as {bad}")
        return True
    extern = "dynamic shared memory .extern" if shmem else "no dynamic shared memory"
    proc = run([args.ptxas, f"-arch=sm_{args.sm}", "-v", ptx, "-o", os.devnull])
    if proc.returncode != 0:
        return True
    report = proc.stdout + proc.stderr
    kernels = report.count("Compiling entry function")
    spills = [line.strip() for line in report.splitlines()
              if any(int(n) for n in re.findall(r"(\d+) bytes spill", line))]
    if kernels == 0 or spills:
        print(f"FAIL {label} mode={mode}: {kernels} kernels; spills: {spills}")
        return True
    print(f"PASS {label} mode={mode} sm_{args.sm}: compiled, {kernels} kernels, no spills, {extern}")
    return False


def parse_args(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("pattern", choices=sorted(PATTERNS))
    parser.add_argument("--grid", default="4")
    parser.add_argument("--axis", type=int, default=0)
    parser.add_argument("--dtype", default="f32", choices=DTYPES)
    parser.add_argument("--variant", default="")
    parser.add_argument("--modes", default="force,off")
    parser.add_argument("--expect", default="",
                        help="strategy the force run must apply (from the report)")
    parser.add_argument("--expect-transport", default="",
                        help="transport (symmetric or two-sided) the force "
                             "run's --expect strategy must use")
    parser.add_argument("--expect-balanced", choices=["yes", "no"],
                        default="",
                        help="whether the force run's ring_attention must "
                             "be balanced (the report's scores.balanced)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="calls of the compiled program per run (the "
                             "results of every call must match)")
    parser.add_argument("--compile-flags", action="append", default=[],
                        help="braid-compile flags (space-separated; may be "
                             "given more than once)")
    parser.add_argument("--expect-remark", default="",
                        help="text a remark of every compile must hold")
    parser.add_argument("--expect-divergent", action="store_true",
                        help="the ranks of a group must get different results "
                             "(inputs that are not replicated must show)")
    parser.add_argument("--bin", default=os.path.join(LIB, "..", "..", "build", "bin"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scale", type=int, default=1,
                        help="multiplies the pattern's sizes (keeping their divisibility)")
    parser.add_argument("--keep", default="")
    parser.add_argument("--target", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--sm", default="90a")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--emulate", action="store_true",
                        help="cuda: compile for and run on the emulated "
                        "device (every kernel from its PTX, on the CPU)")
    parser.add_argument("--transport", default="loopback",
                        choices=["loopback", "nccl", "nccl-file"])
    parser.add_argument("--build-only", default="")
    parser.add_argument("--prebuilt", default="")
    parser.add_argument("--ptxas", default="ptxas",
                        help="ptxas for --compile-only spill checks")
    parser.add_argument("--run-timeout", type=float, default=60,
                        help="seconds a run may take (the runner's --timeout)")
    return parser.parse_args(argv)


def config(args):
    cfg = Config()
    cfg.grid = [int(s) for s in args.grid.split("x")]
    cfg.axis = args.axis
    cfg.group = cfg.grid[args.axis]
    cfg.dtype = args.dtype
    cfg.variant = args.variant
    cfg.scale = args.scale
    return cfg


def draw_inputs(seed, specs, grid, work):
    """Saves each rank's inputs as WORK/a{index}.r{rank}.npy; returns per
    argument the per-rank float64 values the program sees."""
    rng = np.random.default_rng(seed)
    inputs = []
    for index, spec in enumerate(specs):
        shape, dtype = spec[0], spec[1]
        replicated = len(spec) > 2 and spec[2] == "replicated"
        per_rank = []
        shared = rng.uniform(-1, 1, size=shape)
        for rank in range(grid.size):
            raw = shared if replicated else rng.uniform(-1, 1, size=shape)
            np.save(os.path.join(work, f"a{index}.r{rank}.npy"), to_storage(raw, dtype))
            per_rank.append(quantize(raw, dtype))
        inputs.append(per_rank)
    return inputs


def check_report(args, report, label, mode):
    """--expect and friends against the force run's report; True on
    failure."""
    with open(report) as f:
        records = json.load(f)["collectives"]
    strategies = [c["strategy"] for c in records]
    if args.expect not in strategies:
        print(f"FAIL {label} mode={mode}: expected strategy {args.expect}, report has {strategies}")
        return True
    transports = [c["transport"] for c in records
                  if c["strategy"] == args.expect]
    if args.expect_transport and args.expect_transport not in transports:
        print(f"FAIL {label} mode={mode}: expected {args.expect} "
              f"over {args.expect_transport}, report has {transports}")
        return True
    balanced = [c.get("scores", {}).get("balanced") for c in records
                if c["strategy"] == "ring_attention"]
    want = args.expect_balanced == "yes"
    if args.expect_balanced and (not balanced or
                                 any(b != want for b in balanced)):
        print(f"FAIL {label} mode={mode}: expected ring_attention "
              f"balanced={want}, report has {balanced}")
        return True
    return False


def execute(args, grid, lib, work, mode, inputs, results):
    """Runs the library on the grid's ranks, reading WORK/a{i}.r{rank}.npy
    and writing WORK/{mode}.o{k}.r{rank}.npy; returns the process."""
    id_file = None
    if args.target == "cuda" and args.transport == "loopback":
        run_cmd = [os.path.join(args.bin, "braid-exec-cuda"), lib,
                   f"--loopback={grid.size}"]
    elif args.target == "cuda" and args.transport == "nccl-file":
        run_cmd = [os.path.join(args.bin, "braid-exec-cuda"), lib]
        id_file = os.path.join(work, f"nccl-id-{mode}")
    else:
        runner = "braid-exec-cuda" if args.target == "cuda" else "braid-exec"
        run_cmd = launch.mpirun(grid.size, os.path.join(args.bin, runner), lib)
    run_cmd.append(f"--timeout={args.run_timeout:g}")
    if args.target == "cuda" and args.emulate:
        run_cmd.append("--emulate")
    if args.repeat > 1:
        run_cmd.append(f"--repeat={args.repeat}")
    run_cmd += [f"--input=@{work}/a{i}.r{{rank}}.npy" for i in range(inputs)]
    run_cmd += [f"--output=@{work}/{mode}.o{k}.r{{rank}}.npy" for k in range(results)]
    # Past its own timeout the runner reports and exits; the kill is for a
    # runner that cannot (a hung driver call).
    limit = args.run_timeout + 15
    if id_file:
        proc = launch.run_ranks(run_cmd, grid.size, id_file, limit)
    else:
        proc = launch.run(run_cmd, limit)
    if proc.returncode != 0:
        sys.stdout.write(f"command failed ({proc.returncode}): {' '.join(run_cmd)}\n")
        sys.stdout.write(proc.stdout + proc.stderr)
    return proc


def compare(grid, work, mode, label, result_dtypes, expected, tolerances):
    """Each rank's results against the reference, printing every one past
    its tolerance. Returns (status, largest error): status None when all
    match, "values" when some do not, "shape" when a result has the wrong
    shape (the check stops there)."""
    worst, status = 0.0, None
    for rank in range(grid.size):
        for k, dtype in enumerate(result_dtypes):
            got = load(os.path.join(work, f"{mode}.o{k}.r{rank}.npy"), dtype)
            want = expected[rank][k]
            if got.shape != want.shape:
                print(f"FAIL {label} mode={mode}: rank {rank} result {k} has shape {got.shape}, expected {want.shape}")
                return "shape", worst
            err, index = relative_error(got, want)
            worst = max(worst, err)
            if not err <= tolerances[k]:
                print(f"FAIL {label} mode={mode}: rank {rank} result {k} element {list(index)}: "
                      f"got {got[index]}, expected {want[index]} (relative error {err:.3g} > {tolerances[k]})")
                status = "values"
    return status, worst


def divergent(grid, work, mode, label, axis, dtype):
    """--expect-divergent: the first results of rank 0's group must not
    all be equal; True on failure."""
    first = [load(os.path.join(work, f"{mode}.o0.r{r}.npy"), dtype)
             for r in grid.group(0, [axis])]
    if all(np.array_equal(first[0], other) for other in first[1:]):
        print(f"FAIL {label} mode={mode}: every rank of a group got the same "
              "result, but their inputs differ")
        return True
    return False


def main(argv=None):
    args = parse_args(argv)
    cfg = config(args)
    grid = spmd.Grid(cfg.grid)
    made = PATTERNS[args.pattern](cfg)
    text, specs, result_dtypes, reference = made[:4]
    # A pattern may bound its results by a looser element type than theirs
    # (an f32 result of products rounded to bf16 on the way).
    tolerances = made[4] if len(made) > 4 else [tolerance(d) for d in result_dtypes]

    work = args.keep or tempfile.mkdtemp(prefix="braid-e2e-")
    os.makedirs(work, exist_ok=True)
    try:
        program = os.path.join(work, "program.mlir")
        with open(program, "w") as f:
            f.write(text)
        expected = reference(grid, draw_inputs(args.seed, specs, grid, work))

        label = f"{args.pattern}{('/' + cfg.variant) if cfg.variant else ''} grid={args.grid} axis={cfg.axis} {cfg.dtype}"
        failed = False
        for mode in args.modes.split(","):
            built = args.build_only or args.prebuilt
            if built:
                os.makedirs(built, exist_ok=True)
            lib = os.path.join(built or work, f"prog-{mode}.so")
            report = os.path.join(built or work, f"report-{mode}.json")
            compile_cmd = [os.path.join(args.bin, "braid-compile"), program, "-o", lib,
                           f"--overlap={mode}", f"--report={report}",
                           "--check-schedule"] + " ".join(args.compile_flags).split()
            if args.target == "cuda":
                compile_cmd += ["--target=cuda", f"--sm={args.sm}"]
                if args.emulate:
                    compile_cmd.append("--emulate")
            if not args.prebuilt:
                proc = run(compile_cmd)
                if proc.returncode != 0:
                    return 1
                if args.expect_remark and args.expect_remark not in proc.stderr:
                    print(f"FAIL {label} mode={mode}: no remark says "
                          f"'{args.expect_remark}'")
                    return 1
            if args.build_only:
                print(f"BUILT {label} mode={mode}: {lib}")
                continue
            if mode == "force" and args.expect and check_report(args, report, label, mode):
                return 1
            if args.compile_only:
                if check_ptx(args, compile_cmd, lib, label, mode):
                    return 1
                continue
            if execute(args, grid, lib, work, mode, len(specs), len(result_dtypes)).returncode != 0:
                print(f"FAIL {label} mode={mode}: the run failed")
                return 1
            status, worst = compare(grid, work, mode, label, result_dtypes, expected, tolerances)
            if status == "shape":
                return 1
            failed |= status is not None
            if args.expect_divergent and not failed:
                failed = divergent(grid, work, mode, label, cfg.axis, result_dtypes[0])
            if not failed:
                print(f"PASS {label} mode={mode} (max relative error {worst:.2e})")
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
