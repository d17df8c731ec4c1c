"""braid.program as a job uses it: run under mpirun, every rank compiles
once for the job (rank 0 compiles, the others wait for its artifact),
loads the program for its rank and calls it many times with its own numpy
arrays, against braid.models' float64 reference of the same block.

    mpirun -np N python3 program_check.py CACHE_DIR [--dtype D] [--calls K]
        [--parallel tp|sp] [--kind gpt|llama] [--torch]
        [--die R | --die-mid R | --hang R]

Checks on every rank: each call's results within the block's tolerance of
the reference; resident memory flat over the calls; the arguments unchanged by the calls (the same arrays are
passed again); every call with the same inputs bit-identical; a second
compile_once served from the cache (no new file); the refusals a caller can
act on (argument count, shape, dtype of out=); with --torch, the same
results from torch tensors, and out= torch tensors filled. --die R and
--hang R make rank R exit, or sleep, before its first call, and --die-mid R
makes it exit while every rank calls the program in a loop (a thread of
rank R exits the process a moment into the loop, most likely inside a
call; the others wait inside theirs), for the tests of a job that must end
instead of hanging. Rank 0 prints one line per
check ("OK ..."); any failure raises, which ends the job non-zero.
"""
import argparse
import os
import shutil
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
import braid.program  # noqa: E402
from braid import BraidError  # noqa: E402
from braid.dtypes import relative_error  # noqa: E402
from braid.models import MLP, Grid  # noqa: E402


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--parallel", default="sp")
    parser.add_argument("--kind", default="llama")
    parser.add_argument("--die", type=int, default=-1,
                        help="this rank exits before its first call")
    parser.add_argument("--die-mid", type=int, default=-1,
                        help="this rank exits while the ranks call in a loop")
    parser.add_argument("--hang", type=int, default=-1,
                        help="this rank never makes its first call")
    parser.add_argument("--torch", action="store_true",
                        help="also call with torch tensors, and out= tensors")
    args = parser.parse_args()
    rank, ranks = braid.program.rank_and_size()
    block = MLP(Grid([ranks]), tokens=8 * ranks, hidden=32, ffn=16 * ranks,
                dtype=args.dtype, kind=args.kind, parallel=args.parallel)
    path = braid.program.compile_once(block.mlir(), args.cache, overlap="force")
    program = braid.program.Program(path)

    def ok(what):
        if rank == 0:
            print("OK", what, flush=True)

    assert (program.rank, program.size) == (rank, ranks)
    ok(f"compiled once and loaded: {program!r}")

    if rank == args.die:
        os._exit(3)  # a rank that dies: the others wait in their first call
    if rank == args.hang:
        time.sleep(3600)  # a rank that never calls: the others time out

    # Every rank draws the same global inputs and keeps its own part.
    inputs = [block.random_inputs(seed=s) for s in range(3)]
    if args.die_mid >= 0:
        if rank == args.die_mid:
            threading.Timer(0.5, os._exit, (3,)).start()
        while True:  # until the job ends: no rank leaves the loop
            program(*inputs[0][rank])
    expected = [block.reference(i)[rank] for i in inputs]
    mine = [i[rank] for i in inputs]
    kept = [[a.copy() for a in m] for m in mine]
    first = {}
    resident = {}
    middle = (20 + args.calls - 1) // 2
    for call in range(args.calls):
        if call in (20, middle, args.calls - 1):
            resident[call] = resident_bytes()
        k = call % len(inputs)
        got = program(*mine[k])
        for g, w in zip(got, expected[k]):
            err, _ = relative_error(np.asarray(g, np.float64), w, floor=1.0)
            assert err <= block.tolerance, (call, err, block.tolerance)
        if k in first:
            assert all(np.array_equal(a, b) for a, b in zip(got, first[k])), call
        else:
            first[k] = got
    ok(f"{args.calls} calls within {block.tolerance:g} of the reference, "
       "repeated calls bit-identical")
    # A leak grows both halves of the calls; a one-off growth (pages the
    # MPI library touches late on a loaded machine: 76 KiB once, in a
    # clean clone's lit run beside other jobs) only one of them.
    first_half = resident[middle] - resident[20]
    second_half = resident[args.calls - 1] - resident[middle]
    assert min(first_half, second_half) < 32 << 10, \
        f"resident memory grew by {first_half} and then {second_half} bytes"
    ok("resident memory flat over the calls")
    assert all(np.array_equal(a, b) for m, c in zip(mine, kept) for a, b in zip(m, c))
    ok("the arguments are never written")

    # out=: results written into the caller's arrays.
    out = [np.empty(s.shape, np.float32 if s.dtype in ("f32", "bf16") else np.float16)
           for s in program.results]
    if all(s.dtype != "bf16" for s in program.results):
        assert program(*mine[0], out=out) is out
        assert all(np.array_equal(a, b) for a, b in zip(out, first[0]))
        ok("out= is written in place")

    if args.torch:
        import torch
        dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
        tensors = [torch.from_numpy(np.asarray(a, np.float32)).to(dtype) for a in mine[0]]
        kept = [t.clone() for t in tensors]
        got = program(*tensors)
        assert all(np.array_equal(a, b) for a, b in zip(got, first[0]))
        out = [torch.empty(s.shape, dtype=dtype) for s in program.results]
        assert program(*tensors, out=out) is out
        assert all(np.array_equal(t.float().numpy(), b) for t, b in zip(out, first[0]))
        assert all(torch.equal(a, b) for a, b in zip(tensors, kept))
        ok(f"torch {dtype} tensors in and out= give the same results, unchanged")

    # Another program with the same entry name (@mlp) in the same process:
    # each runs its own code.
    other_block = MLP(Grid([ranks]), tokens=8 * ranks, hidden=32, ffn=16 * ranks,
                      dtype=args.dtype, kind="gpt" if args.kind == "llama" else "llama",
                      parallel=args.parallel)
    # (Compiled with comm=symmetric: the compile option, not the MPI
    # communicator, which is communicator=.)
    other = braid.program.Program(braid.program.compile_once(
        other_block.mlir(), args.cache, overlap="force", comm="symmetric"))
    other_inputs = other_block.random_inputs(seed=5)
    other_want = other_block.reference(other_inputs)[rank]
    # Rank 0 calls late, its peers run ahead into its slots: programs
    # that shared their symmetric sites (the same site numbers) would
    # count each other's raises and waits on the same flags.
    if rank == 0:
        time.sleep(0.5)
    for _ in range(2):
        for g, w in zip(other(*other_inputs[rank]), other_want):
            err, _ = relative_error(np.asarray(g, np.float64), w, floor=1.0)
            assert err <= other_block.tolerance, err
        assert all(np.array_equal(a, b) for a, b in zip(program(*mine[0]), first[0]))
    other.close()
    ok("a second program with the same entry name runs its own code")

    # A library rebuilt at a path this process loaded (a new file there, as
    # a compiler writes one) is refused: dlopen would return the old code.
    # Each rank its own file.
    moved = os.path.join(args.cache, f"moved-{rank}.so")

    def put(source):
        for suffix in ("", ".manifest"):
            shutil.copy(source + suffix, moved + suffix + ".new")
            os.replace(moved + suffix + ".new", moved + suffix)
    put(path)
    braid.program.Program(moved).close()
    put(other.path)
    try:
        braid.program.Program(moved)
    except BraidError as e:
        if rank == 0:
            print("refused:", str(e).replace(moved, "MOVED"), flush=True)
    else:
        raise AssertionError("a rebuilt library was loaded")
    for suffix in ("", ".manifest"):
        os.remove(moved + suffix)

    # MPI's world by its Fortran handle (0 in Open MPI) is the same
    # communicator; anything else but None, a handle or mpi4py is refused.
    same = braid.program.Program(path, communicator=0)
    assert all(np.array_equal(a, b) for a, b in zip(same(*mine[0]), first[0]))
    same.close()
    try:
        braid.program.Program(path, communicator="world")
    except TypeError as e:
        if rank == 0:
            print("refused:", e, flush=True)
    else:
        raise AssertionError("communicator='world' accepted")
    ok("a second program on the world's Fortran handle")

    before = sorted(os.listdir(args.cache))
    again = braid.program.compile_once(block.mlir(), args.cache, overlap="force")
    assert again == path and sorted(os.listdir(args.cache)) == before
    ok("a second compile_once is served from the cache")

    for call, error in [(lambda: program(*mine[0][:-1]), ValueError),
                        (lambda: program(mine[0][0][:1], *mine[0][1:]), ValueError),
                        (lambda: program(*mine[0], out=[np.empty((1,), np.int8)]), TypeError)]:
        try:
            call()
        except error as e:
            if rank == 0:
                print("refused:", e, flush=True)
        else:
            raise AssertionError(f"no {error.__name__}")
    try:
        braid.program.Program(os.path.join(args.cache, "missing.so"))
    except BraidError as e:
        if rank == 0:
            print("refused:", e, flush=True)
    else:
        raise AssertionError("a missing artifact loaded")
    program.close()
    try:
        program(*mine[0])
    except BraidError as e:
        if rank == 0:
            print("refused:", e, flush=True)
    ok("done")


if __name__ == "__main__":
    main()
