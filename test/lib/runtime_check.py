#!/usr/bin/env python3
"""Inputs and checks for the runtime and braid-exec tests (test/Runtime).

Usage: runtime_check.py COMMAND ARGS...

  axpy-inputs DIR RANKS
      Writes the inputs of libbraid-test-entry.so (x: f32[4,3], y: bf16[3]
      as uint16 bits) for each rank as DIR/x.rankR.npy and DIR/y.rankR.npy,
      the same data as x.v2.rankR.npy and x.v3.rankR.npy (.npy versions 2.0
      and 3.0) and y.void.rankR.npy (dtype |V2),
      plus broken variants: mixed/x.rankR.npy (right on rank 0, f32[3,4]
      on rank 1), x.wrong-shape.npy (f32[3,4]), x.wrong-dtype.npy
      (f64[4,3]), x.garbage.npy (not a .npy file), x.fortran.npy (f32[4,3]
      in Fortran order) and x.truncated.npy (f32[4,3] missing its last
      bytes).
  axpy-check DIR RANKS OUTPUT-PATTERN
      Checks each rank's result (OUTPUT-PATTERN with {rank} replaced) against
      numpy: sum over ranks r of 2 * x_r + y_r.
  same A B / differ A B
      Checks that two .npy files hold equal (or different) arrays.
  npy-info PATH
      Prints the dtype and shape of a .npy file.
  trace FILE RANKS
      Checks a Chrome trace written by braid_rt_trace_end: valid JSON, "X"
      events of every rank on the compute track (tid 0) and the comm track
      (tid >= 1, named "comm..."), non-negative times, and metadata naming
      the processes and tracks.
  kernels FILE RANKS
      Checks the kernel events of a cpu program's trace: on every rank,
      each on the compute track inside a compute step, named with its
      source location (" at FILE:LINE:COL"), with its bytes and flops, and
      together at least half of the rank's compute time.
  idle-cost FILE
      Checks the output of `braid-rt-selftest idle-cost`: no rank may have
      used more than half a core while it waited.

Prints one line saying what was checked; exits non-zero on any mismatch.
"""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
from braid.dtypes import bf16_bits, bf16_values  # noqa: E402


def fail(message):
    print("error: " + message, file=sys.stderr)
    sys.exit(1)


def axpy_inputs(directory, ranks):
    for rank in range(ranks):
        rng = np.random.default_rng(1234 + rank)
        x = rng.uniform(-4, 4, size=(4, 3)).astype(np.float32)
        y = bf16_bits(rng.uniform(-2, 2, size=3))
        np.save(f"{directory}/x.rank{rank}.npy", x)
        np.save(f"{directory}/y.rank{rank}.npy", y)
        # The same data with .npy 2.0 and 3.0 headers, and y as raw 2-byte
        # voids (how bfloat16 arrays of ml_dtypes appear to plain numpy).
        for version in (2, 3):
            with open(f"{directory}/x.v{version}.rank{rank}.npy", "wb") as f:
                np.lib.format.write_array(f, x, version=(version, 0))
        np.save(f"{directory}/y.void.rank{rank}.npy", y.view("V2"))
    # Rank 1's x has the wrong shape; rank 0's is fine.
    os.makedirs(f"{directory}/mixed", exist_ok=True)
    np.save(f"{directory}/mixed/x.rank0.npy", np.zeros((4, 3), np.float32))
    np.save(f"{directory}/mixed/x.rank1.npy", np.zeros((3, 4), np.float32))
    np.save(f"{directory}/x.wrong-shape.npy", np.zeros((3, 4), np.float32))
    np.save(f"{directory}/x.wrong-dtype.npy", np.zeros((4, 3), np.float64))
    np.save(f"{directory}/x.fortran.npy",
            np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3)))
    with open(f"{directory}/x.garbage.npy", "wb") as f:
        f.write(b"this is not a numpy file\n")
    np.save(f"{directory}/x.truncated.npy", np.zeros((4, 3), np.float32))
    with open(f"{directory}/x.truncated.npy", "r+b") as f:
        f.truncate(f.seek(0, 2) - 4)
    print(f"wrote axpy inputs for {ranks} ranks")


def axpy_check(directory, ranks, pattern):
    reference = np.zeros((4, 3), np.float32)
    for rank in range(ranks):
        x = np.load(f"{directory}/x.rank{rank}.npy")
        y = bf16_values(np.load(f"{directory}/y.rank{rank}.npy"))
        reference = reference + (np.float32(2) * x + y[np.newaxis, :])
    for rank in range(ranks):
        path = pattern.replace("{rank}", str(rank))
        out = np.load(path)
        if out.dtype != np.float32 or out.shape != (4, 3):
            fail(f"{path}: dtype {out.dtype} shape {out.shape}, expected float32 (4, 3)")
        if not np.allclose(out, reference, rtol=1e-6, atol=1e-6):
            fail(f"{path}:\n{out}\ndiffers from the reference\n{reference}")
    print(f"axpy results match numpy on {ranks} ranks")


def load_pair(a, b):
    x, y = np.load(a), np.load(b)
    return x, y, x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def npy_command(command, args):
    """The commands on .npy files that other checkers share: 'same' and
    'differ' (dtype, shape and bits), 'npy-info'. False for any other."""
    if command in ("same", "differ"):
        _, _, equal = load_pair(args[0], args[1])
        if equal != (command == "same"):
            fail(f"{args[0]} and {args[1]} are {'different' if command == 'same' else 'equal'}")
        print(f"{command}: ok")
    elif command == "npy-info":
        array = np.load(args[0])
        print(f"{args[0]}: dtype {array.dtype.str} shape {list(array.shape)}")
    else:
        return False
    return True


def check_trace(path, ranks):
    with open(path) as f:
        trace = json.load(f)
    if trace.get("displayTimeUnit") != "ms":
        fail("displayTimeUnit is not 'ms'")
    events = trace["traceEvents"]
    names = {}
    tracks = {}
    for event in events:
        for key in ("name", "ph", "pid"):
            if key not in event:
                fail(f"event without '{key}': {event}")
        if event["ph"] == "M":
            if event["name"] == "process_name":
                names[event["pid"]] = event["args"]["name"]
            elif event["name"] == "thread_name":
                tracks[(event["pid"], event["tid"])] = event["args"]["name"]
    seen = set()
    for event in events:
        if event["ph"] != "X":
            continue
        if event["ts"] < 0 or event["dur"] < 0:
            fail(f"negative time: {event}")
        track = tracks.get((event["pid"], event["tid"]))
        if track is None:
            fail(f"event on an unnamed track: {event}")
        kind = "compute" if event["tid"] == 0 else "comm"
        if not track.startswith(kind):
            fail(f"tid {event['tid']} is named '{track}': {event}")
        seen.add((event["pid"], kind))
    for rank in range(ranks):
        if names.get(rank) != f"rank {rank}":
            fail(f"process {rank} is named {names.get(rank)!r}")
        for kind in ("compute", "comm"):
            if (rank, kind) not in seen:
                fail(f"rank {rank} has no {kind} events")
    waits = sum(1 for e in events if e["ph"] == "X" and e["name"].startswith("wait "))
    if waits == 0:
        fail("no wait events")
    print(f"trace: {ranks} ranks with compute and comm events")


def check_kernels(path, ranks):
    """The kernel events of a cpu program's trace: on each rank's compute
    track, each inside one of its compute steps, named with the source
    location they came from, never overlapping each other. How much of the
    compute time the kernels take is not checked: on an oversubscribed
    machine a rank can be descheduled between two kernels, inside a step,
    for any length of time."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    for rank in range(ranks):
        mine = [e for e in events if e["pid"] == rank]
        kernels = [e for e in mine if e.get("cat") == "kernel"]
        steps = [e for e in mine if e.get("cat") == "compute" and e["name"] == "compute"]
        if not kernels:
            fail(f"rank {rank} has no kernel events")
        for kernel in kernels:
            if kernel["tid"] != 0:
                fail(f"kernel event off the compute track: {kernel}")
            if not re.search(r" at [^ :]+:\d+:\d+$", kernel["name"]):
                fail(f"kernel event without a source location: {kernel['name']!r}")
            for key in ("bytes", "flops"):
                if not isinstance(kernel["args"].get(key), int) or kernel["args"][key] < 0:
                    fail(f"kernel event without '{key}': {kernel}")
            # Microsecond timestamps printed to a nanosecond.
            inside = [s for s in steps
                      if s["ts"] - 0.002 <= kernel["ts"]
                      and kernel["ts"] + kernel["dur"] <= s["ts"] + s["dur"] + 0.002]
            if not inside:
                fail(f"rank {rank}: kernel {kernel['name']!r} at {kernel['ts']} us is in no compute step")
        ordered = sorted(kernels, key=lambda k: k["ts"])
        for first, second in zip(ordered, ordered[1:]):
            if first["ts"] + first["dur"] > second["ts"] + 0.002:
                fail(f"rank {rank}: kernels {first['name']!r} and {second['name']!r} overlap")
    print(f"kernels: {ranks} ranks, each kernel inside a compute step, named with its location")


def idle_cost(path):
    lines = 0
    with open(path) as f:
        for line in f:
            match = re.match(r"rank (\d+): ([\d.]+) s CPU over ([\d.]+) s", line)
            if not match:
                continue
            lines += 1
            rank, cpu, wall = int(match[1]), float(match[2]), float(match[3])
            if wall > 1 and cpu > 0.5 * wall:
                fail(f"rank {rank} used {cpu} s of CPU while waiting {wall} s")
    if lines == 0:
        fail("no measurements")
    print("idle cost: no rank spun while waiting")


def run_command(argv, commands, usage):
    """Runs the command argv[1] names with the arguments after it: one of
    `commands` (name -> function of the argument list) or a shared .npy
    command (npy_command). Prints `usage` and returns 2 for anything else."""
    if len(argv) < 2:
        print(usage, file=sys.stderr)
        return 2
    command, args = argv[1], argv[2:]
    if command in commands:
        commands[command](args)
    elif not npy_command(command, args):
        print(usage, file=sys.stderr)
        return 2
    return 0


COMMANDS = {
    "axpy-inputs": lambda a: axpy_inputs(a[0], int(a[1])),
    "axpy-check": lambda a: axpy_check(a[0], int(a[1]), a[2]),
    "trace": lambda a: check_trace(a[0], int(a[1])),
    "kernels": lambda a: check_kernels(a[0], int(a[1])),
    "idle-cost": lambda a: idle_cost(a[0]),
}


if __name__ == "__main__":
    sys.exit(run_command(sys.argv, COMMANDS, __doc__))
