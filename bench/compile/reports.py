#!/usr/bin/env python3
"""Compares what two builds of Braid decide, program by program.

For every FILE.mlir of a corpus (with an optional FILE.flags beside it:
extra braid-compile options on one line), compiles with each build's
braid-compile to `--emit=dist` under several option sets and compares,
byte for byte: the IR after import and overlap, the diagnostics (remarks
included) and the JSON report. A restructuring of a pass that must not
change behaviour shows no difference here (and bitwise.py then shows the
results unchanged).

Usage: reports.py --old OLD/build/bin --new NEW/build/bin CORPUS_DIR
              [--sets force,auto,symmetric,in-kernel,bf16,fp8] [--keep DIR]
Exit status 0 when every output is equal, 1 otherwise (the first
differences are printed).
"""
import argparse
import concurrent.futures
import difflib
import glob
import os
import subprocess
import sys
import tempfile

SETS = {
    "force": ["--overlap=force"],
    "auto": ["--overlap=auto"],
    "symmetric": ["--overlap=auto", "--comm=symmetric"],
    "in-kernel": ["--overlap=auto", "--fuse-collectives=force",
                  "--comm=symmetric"],
    "bf16": ["--overlap=auto", "--quantize-all-gather=bf16"],
    "fp8": ["--overlap=force", "--quantize-all-gather=fp8"],
}


def compile_one(tools, source, flags, out_dir, tag):
    report = os.path.join(out_dir, tag + ".report.json")
    proc = subprocess.run(
        [os.path.join(tools, "braid-compile"), source, "--emit=dist",
         f"--report={report}", *flags], capture_output=True, text=True)
    result = {"status": str(proc.returncode), "ir": proc.stdout,
              # The report's path appears in messages about it.
              "diagnostics": proc.stderr.replace(out_dir, "DIR")}
    try:
        with open(report) as f:
            result["report"] = f.read()
    except OSError:
        result["report"] = ""
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", required=True, help="bin/ of one build")
    parser.add_argument("--new", required=True, help="bin/ of the other")
    parser.add_argument("corpus", help="a folder of FILE.mlir [+ FILE.flags]")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    sets = args.sets.split(",")
    for name in sets:
        if name not in SETS:
            parser.error(f"unknown option set '{name}' (one of {', '.join(SETS)})")
    programs = sorted(glob.glob(os.path.join(args.corpus, "*.mlir")))
    if not programs:
        parser.error(f"no .mlir files in {args.corpus}")

    def job(item):
        source, name = item
        flags_path = source[:-5] + ".flags"
        extra = open(flags_path).read().split() if os.path.exists(flags_path) else []
        flags = SETS[name] + extra
        tag = os.path.basename(source)[:-5] + "." + name
        with tempfile.TemporaryDirectory() as old_dir, \
                tempfile.TemporaryDirectory() as new_dir:
            old = compile_one(args.old, source, flags, old_dir, tag)
            new = compile_one(args.new, source, flags, new_dir, tag)
        diffs = []
        for key in ("status", "ir", "diagnostics", "report"):
            if old[key] != new[key]:
                diff = difflib.unified_diff(
                    old[key].splitlines(), new[key].splitlines(),
                    f"old/{tag}.{key}", f"new/{tag}.{key}", lineterm="", n=1)
                diffs.append("\n".join(list(diff)[:40]))
        return tag, diffs

    items = [(p, s) for p in programs for s in sets]
    differing = 0
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for tag, diffs in pool.map(job, items):
            if diffs:
                differing += 1
                if differing <= 10:
                    print("\n".join(diffs))
    print(f"{len(items) - differing} of {len(items)} compilations equal "
          f"({len(programs)} programs x {len(sets)} option sets)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
