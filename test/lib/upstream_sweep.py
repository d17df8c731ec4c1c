#!/usr/bin/env python3
"""Runs upstream MLIR's own `shard` tests through Braid's import.

Usage: upstream_sweep.py --bin BUILD/bin DIR [--stage dist|xfer] [-v]

DIR holds the test files of llvm-project's mlir/test/Dialect/Shard (they
are not part of Braid: fetch them from the LLVM release that matches the
installed MLIR). Each file is split at its `// -----` lines as upstream's
RUN lines do, and each part into one module per function (with the grids
and everything else outside functions), unless its functions call each
other; each goes through `braid-opt --braid-pipeline=
"stop-after=STAGE"` (prepare, plan, import and overlap; with `xfer` the
bufferized program too). A part ends in one of:

  imports   exit 0;
  rejected  exit 1 with a located error (`file:line:col: error: ...`);
  CRASH     anything else: a signal, another exit status, a timeout, or an
            exit 1 without a located error.

Parts of upstream's rejection tests (those with `expected-error`) of the
parser and verifiers must be rejected: accepting one is reported as
ACCEPTED. Those of a pass (partitioning that expects every value
annotated) may be taken, since Braid's pipeline annotates first: reported
as `accepted`. Prints one line per part
and a summary; exits 1 when any part crashed or an invalid one was
accepted.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

LOCATED = re.compile(r"^[^:\s]+:\d+:\d+: error: ", re.M)


def parts(text):
    chunks, current = [], []
    for line in text.splitlines(keepends=True):
        if re.match(r"^// -----\s*$", line):
            chunks.append("".join(current))
            current = []
        else:
            current.append(line)
    chunks.append("".join(current))
    return chunks


def functions(part):
    """The part as one module per function: every line outside functions
    (grids, aliases, a module around them) with the lines of one function.
    A part whose functions call each other stays whole."""
    lines = part.splitlines(keepends=True)
    spans, start, indent = [], None, ""
    for number, line in enumerate(lines):
        opening = re.match(r"^(\s*)func\.func\b", line)
        if start is None and opening:
            start, indent = number, opening.group(1)
            if re.search(r"func\.func\s+private\b", line) and "{" not in line:
                # A declaration.
                spans.append((start, number))
                start = None
        elif start is not None and re.match(rf"^{indent}}}\s*$", line):
            spans.append((start, number))
            start = None
    if len(spans) < 2 or re.search(r"\bcall @", part):
        return [part]
    inside = set()
    for first, last in spans:
        inside.update(range(first, last + 1))
    prelude = [i for i in range(len(lines)) if i not in inside]
    out = []
    for first, last in spans:
        keep = sorted(prelude + list(range(first, last + 1)))
        out.append("".join(lines[i] for i in keep))
    return out


def classify(opt, path, stage, timeout):
    cmd = [opt, path, f"--braid-pipeline=stop-after={stage}", "-o",
           os.devnull]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True,
                              errors="replace",
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "CRASH", f"timed out after {timeout} s"
    errors = [line for line in proc.stderr.splitlines()
              if LOCATED.match(line)]
    if proc.returncode == 0:
        return "imports", ""
    if proc.returncode == 1 and errors:
        return "rejected", errors[0].split(": error: ", 1)[1]
    tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
    return "CRASH", f"exit {proc.returncode}: {tail[0]}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--bin", required=True)
    parser.add_argument("--stage", choices=["dist", "xfer"], default="dist")
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    opt = os.path.join(args.bin, "braid-opt")
    files = sorted(f for f in os.listdir(args.dir) if f.endswith(".mlir"))
    if not files:
        print(f"upstream_sweep.py: no .mlir files in {args.dir}")
        return 1
    counts = {}
    bad = 0
    with tempfile.TemporaryDirectory(prefix="braid-sweep-") as work:
        for name in files:
            # Bytes as they are, whatever they hold.
            with open(os.path.join(args.dir, name), encoding="latin-1") as f:
                text = f.read()
            run = " ".join(re.findall(r"//\s*RUN:(.*)", text))
            # Upstream splits only where its RUN line says so.
            split = "split-input-file" in run
            # Its rejection tests of the parser and verifiers must be
            # rejected; those of a pass (partitioning that expects every
            # value annotated, propagation of a declaration) may be
            # accepted: Braid's pipeline establishes their preconditions.
            verifier_only = not re.search(r"pass-pipeline|\s-[a-z]+-[a-z]", run.replace("-split-input-file", "").replace("-verify-diagnostics", ""))
            units = [(f"{i}.{j}" if len(fs) > 1 else f"{i}", f)
                     for i, p in enumerate(parts(text) if split else [text])
                     for fs in [functions(p)] for j, f in enumerate(fs)]
            for index, part in units:
                if not part.strip() or not re.search(r"\S", re.sub(r"//.*", "", part)):
                    continue
                path = os.path.join(work, f"{name[:-5]}.{index}.mlir")
                with open(path, "w", encoding="latin-1") as f:
                    f.write(part)
                invalid = "expected-error" in part
                verdict, detail = classify(opt, path, args.stage, args.timeout)
                if invalid and verdict == "imports":
                    verdict = "ACCEPTED" if verifier_only else "accepted"
                counts[verdict] = counts.get(verdict, 0) + 1
                if verdict in ("CRASH", "ACCEPTED"):
                    bad += 1
                if args.verbose or verdict in ("CRASH", "ACCEPTED"):
                    kind = " (invalid)" if invalid else ""
                    print(f"{name}#{index}{kind}: {verdict}"
                          + (f": {detail}" if detail else ""))
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
