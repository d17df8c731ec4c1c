#!/usr/bin/env python3
"""Compares the results of two builds of Braid bit for bit.

Compiles each program with the braid-compile of both builds (say, before
and after a change to code generation), runs both artifacts on the same
random inputs (braid-exec --seed) on the program's ranks, and compares
every rank's every result byte for byte. Programs: the bundled example,
a 4-layer bf16 transformer from gen_transformer.py, four sequence-parallel
blocks in a residual stream, and any MLIR files given.

Usage: bitwise.py --old OLD/build/bin --new NEW/build/bin [FILE.mlir:RANKS ...]
       bitwise.py --old-options=--outline-layers=false [FILE.mlir:RANKS ...]
(the second compares one build with itself under different options).
"""
import argparse
import filecmp
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def run(tools, source, ranks, tmp, tag, options):
    artifact = os.path.join(tmp, f"{tag}.so")
    subprocess.run([os.path.join(tools, "braid-compile"), source, *options,
                    "-o", artifact], check=True, stderr=subprocess.DEVNULL)
    pattern = os.path.join(tmp, f"{tag}.{{rank}}.npy")
    subprocess.run([os.path.join(ROOT, "scripts", "mpirun.sh"), "-np",
                    str(ranks), os.path.join(tools, "braid-exec"), artifact,
                    "--seed=7", f"--output=@{pattern}"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [pattern.replace("{rank}", str(r)) for r in range(ranks)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", help="bin/ of one build (default: --new)")
    parser.add_argument("--new", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--old-options", default="",
                        help="extra braid-compile options of the old side, "
                             "space-separated")
    parser.add_argument("programs", nargs="*", help="FILE.mlir:RANKS")
    args = parser.parse_args()
    args.old = args.old or args.new
    if args.old == args.new and not args.old_options:
        parser.error("give --old, --old-options or both")
    with tempfile.TemporaryDirectory() as tmp:
        layers = os.path.join(tmp, "layers.mlir")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench",
                                                     "gen_transformer.py"),
                        "--layers", "4", "--tp", "4", "--seq", "64",
                        "--hidden", "64", "--heads", "4", "--ffn", "128",
                        "--dtype", "bf16", "-o", layers], check=True)
        programs = [(os.path.join(ROOT, "examples", "sp_mlp.mlir"), 4),
                    (layers, 4),
                    (os.path.join(ROOT, "test", "E2E", "Inputs",
                                  "sp-residual-stream.mlir"), 4)]
        for spec in args.programs:
            path, _, ranks = spec.rpartition(":")
            programs.append((path, int(ranks)))
        differ = 0
        for path, ranks in programs:
            for overlap in ("off", "force"):
                options = [f"--overlap={overlap}"]
                old = run(args.old, path, ranks, tmp, "old",
                          options + args.old_options.split())
                new = run(args.new, path, ranks, tmp, "new", options)
                same = all(filecmp.cmp(a, b, shallow=False)
                           for a, b in zip(old, new))
                differ += not same
                print(f"{os.path.basename(path):<28} overlap={overlap:<6} "
                      f"{ranks} ranks: {'identical' if same else 'DIFFER'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
