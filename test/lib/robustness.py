#!/usr/bin/env python3
"""Feeds awkward inputs to a Braid tool and checks it never crashes.

Usage: robustness.py TOOL [TOOL-ARGS...] -- INPUT...

For every input the tool must exit with 0 or 1 (never a signal, an abort or
any other code) and print no crash report; when it exits with 1 it must have
printed at least one located diagnostic (`file:line:col: error: ...`), or,
for a file that cannot be read, an error naming the file. Prints one line per
input and exits non-zero if any input breaks these rules.
"""
import os
import re
import subprocess
import sys

LOCATED = re.compile(r"^[^\s:]+:\d+:\d+: error: ", re.MULTILINE)
CRASH_MARKERS = ("PLEASE submit a bug report", "Stack dump", "Segmentation fault",
                 "Assertion", "terminate called")


def main(argv):
    if "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    split = argv.index("--")
    tool, inputs = argv[1:split], argv[split + 1:]
    bad = 0
    for path in inputs:
        proc = subprocess.run(tool + [path], capture_output=True, text=True,
                              errors="replace", timeout=120)
        err = proc.stderr
        problems = []
        if proc.returncode not in (0, 1):
            problems.append(f"exit code {proc.returncode}")
        for marker in CRASH_MARKERS:
            if marker in err:
                problems.append(f"crash marker '{marker}'")
        if proc.returncode == 1:
            unreadable = not os.path.exists(path) and path in err
            if not LOCATED.search(err) and not unreadable:
                problems.append("exit 1 without a located diagnostic")
        status = "ok" if not problems else "FAIL (" + "; ".join(problems) + ")"
        print(f"{os.path.basename(path)}: exit {proc.returncode}: {status}")
        if problems:
            bad += 1
            sys.stdout.write(err)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
