#!/usr/bin/env python3
"""Inputs, references and harness pieces for the braid-run tests (test/Tools).

Usage: braid_run_check.py COMMAND ARGS...

  ag-matmul-inputs DIR RANKS
      Writes the inputs of Inputs/braid-run-ag-matmul.mlir: x.rankR.npy
      (f32 [4, 8], different on each rank) and w.npy (f32 [8, 6], the same on
      every rank).
  ag-matmul-check DIR RANKS OUTPUT-PATTERN
      Checks each rank's result (OUTPUT-PATTERN with {rank} replaced)
      against numpy: the rows of every rank's x, stacked in rank order,
      times w.
  npy-info PATH
      Prints the dtype and shape of a .npy file.
  same A B
      Checks that two .npy files hold equal arrays.
  perturbed-compiler OUT BRAID-COMPILE PROGRAM.mlir
      Writes OUT, an executable stand-in for braid-compile (for braid-run's
      BRAID_COMPILE) that compiles a perturbed copy of PROGRAM.mlir (its
      f32 zero constants become 0.5) whenever it is asked for
      --overlap=off, and PROGRAM.mlir otherwise: a compiler whose
      overlapped and plain builds disagree, for --check to catch.
  expect-exit CODE COMMAND ARGS...
      Runs COMMAND with its stdout and stderr merged into this script's
      stdout, and checks that it exits with CODE (lit's `not` accepts any
      non-zero code).

Prints one line saying what was checked; exits non-zero on any mismatch.
"""
import os
import stat
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runtime_check import fail, run_command  # noqa: E402


def ag_matmul_inputs(directory, ranks):
    rng = np.random.default_rng(2024)
    for rank in range(ranks):
        x = rng.uniform(-1, 1, size=(4, 8)).astype(np.float32)
        np.save(f"{directory}/x.rank{rank}.npy", x)
    np.save(f"{directory}/w.npy", rng.uniform(-1, 1, size=(8, 6)).astype(np.float32))
    print(f"wrote ag-matmul inputs for {ranks} ranks")


def ag_matmul_check(directory, ranks, pattern):
    xs = [np.load(f"{directory}/x.rank{rank}.npy") for rank in range(ranks)]
    w = np.load(f"{directory}/w.npy")
    reference = np.concatenate(xs).astype(np.float64) @ w.astype(np.float64)
    for rank in range(ranks):
        path = pattern.replace("{rank}", str(rank))
        out = np.load(path)
        if out.dtype != np.float32 or out.shape != reference.shape:
            fail(f"{path}: dtype {out.dtype} shape {out.shape}, expected "
                 f"float32 {reference.shape}")
        if not np.allclose(out, reference, rtol=1e-5, atol=1e-5):
            fail(f"{path}:\n{out}\ndiffers from the reference\n{reference}")
    print(f"ag-matmul results match numpy on {ranks} ranks")


def perturbed_compiler(out, compiler, program):
    with open(program) as f:
        text = f.read()
    perturbed = text.replace("arith.constant 0.0 : f32", "arith.constant 0.5 : f32")
    if perturbed == text:
        fail(f"{program} has no f32 zero constant to perturb")
    off_program = out + ".off.mlir"
    with open(off_program, "w") as f:
        f.write(perturbed)
    # braid-run calls `braid-compile PROGRAM --target=cpu ... --overlap=MODE`:
    # the program comes first.
    with open(out, "w") as f:
        f.write("#!/bin/sh\n"
                "case \" $* \" in\n"
                f"  *\" --overlap=off \"*) shift; exec '{compiler}' '{off_program}' \"$@\" ;;\n"
                "esac\n"
                f"exec '{compiler}' \"$@\"\n")
    os.chmod(out, os.stat(out).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    print(f"wrote {out}")


def expect_exit(code, command):
    sys.stdout.flush()
    result = subprocess.run(command, stdout=sys.stdout, stderr=subprocess.STDOUT)
    if result.returncode != code:
        fail(f"{command[0]} exited with {result.returncode}, expected {code}")
    print(f"exit code {code}")


COMMANDS = {
    "ag-matmul-inputs": lambda a: ag_matmul_inputs(a[0], int(a[1])),
    "ag-matmul-check": lambda a: ag_matmul_check(a[0], int(a[1]), a[2]),
    "perturbed-compiler": lambda a: perturbed_compiler(a[0], a[1], a[2]),
    "expect-exit": lambda a: expect_exit(int(a[0]), a[1:]),
}


if __name__ == "__main__":
    sys.exit(run_command(sys.argv, COMMANDS, __doc__))
