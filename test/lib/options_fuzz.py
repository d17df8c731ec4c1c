#!/usr/bin/env python3
"""Odd option values through every entry point: exit 0 or 1, one located
line, never a signal, an abort or a stack dump.

Usage: options_fuzz.py BIN_DIR PYTHON_DIR PROGRAM.mlir WORK_DIR [ENTRY...]

ENTRY is any of compile (braid-compile), run (braid-run), opt (braid-opt
--braid-pipeline), capi, python (default: all). For every option of the options model an entry point takes, and for
every value below, the entry point is run on PROGRAM.mlir (in WORK_DIR, so
that odd report paths land there). It must exit 0 or 1; on 1 its output
must hold exactly one error (a line with "error:" or llvm::cl's "for the
--X option:"), and that line must name the option or a location in the
program. The C API and Python cases run in one child process each, so that
a crash there is caught too; the child prints each case before running it.
"""
import json
import os
import re
import subprocess
import sys

BIN, PYTHON_DIR, PROGRAM, WORK = sys.argv[1:5]
SHORT = {"compile": "braid-compile", "run": "braid-run", "opt": "braid-opt",
         "capi": "capi", "python": "python"}
ENTRIES = [SHORT[e] for e in sys.argv[5:]] or list(SHORT.values())
VALUES = ["", " ", "}", "{", ",", "=", "a b", "'", '"', "\\", "a=b", "--",
          "\u00fcn\u00efc\u00f8d\u00e9", "-1", "0", "99999999999999999999",
          "1e308", "nan", "inf", "/nonexistent/dir/x"]
# braid-run starts MPI ranks for every value it accepts; fewer values keep
# the test short.
RUN_VALUES = ["", "}", ",", "a b", "\u00fcn\u00efc\u00f8d\u00e9", "-1",
              "99999999999999999999", "/nonexistent/dir/x"]
CUDA = os.path.exists(os.path.join(BIN, "braid-exec-cuda"))
BAD = re.compile(r"Stack dump|LLVM ERROR|PLEASE submit|Assertion|"
                 r"Segmentation|Aborted|terminate called|core dumped")


def model():
    sys.path.insert(0, PYTHON_DIR)
    import braid
    return braid.options_model()


def quote(value):
    from braid.compiler import quote as q
    return q(value)


def judge(what, flag, code, output, failures):
    """Records a failure unless `output` with exit `code` is acceptable."""
    if code not in (0, 1) or BAD.search(output):
        failures.append(f"{what}: exit {code}\n{output[-2000:]}")
        return
    if code == 0:
        return
    errors = [line for line in output.splitlines()
              if "error:" in line or re.search(r"for the -{1,2}\S+ option", line)]
    if len(errors) != 1:
        failures.append(f"{what}: {len(errors)} error lines, expected 1\n"
                        f"{output[-2000:]}")
        return
    line = errors[0]
    program = os.path.basename(PROGRAM)
    if (flag not in line and not re.search(re.escape(program) + r":\d+:\d+",
                                           line)):
        failures.append(f"{what}: the error names neither --{flag} nor a "
                        f"location of {program}:\n{line}")


def run_tool(args, env=None):
    result = subprocess.run(args, cwd=WORK, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            errors="replace", timeout=300)
    code = result.returncode if result.returncode >= 0 else 128 - result.returncode
    return code, result.stdout


def tool_cases(options):
    for option in options:
        flag = option["flag"]
        scopes = option["scopes"]
        if "compile" in scopes and "internal" not in option["stages"]:
            # Code generation options need code generated.
            emit = ("--emit=obj" if "codegen" in option["stages"]
                    else "--emit=dist")
            for value in VALUES:
                yield ("braid-compile", flag, value,
                       [os.path.join(BIN, "braid-compile"), PROGRAM,
                        f"--{flag}={value}", emit, "-o",
                        os.path.join(WORK, "out")])
        if ("compile" in scopes or "run" in scopes) and flag not in (
                "target", "emit"):
            for value in RUN_VALUES:
                yield ("braid-run", flag, value,
                       [os.path.join(BIN, "braid-run"), PROGRAM,
                        f"--{flag}={value}", "--timeout=60"
                        if flag != "timeout" else "--seed=1"])
        if "pipeline" in scopes:
            for value in VALUES:
                words = f"{flag}={quote(value)} stop-after=dist"
                yield ("braid-opt", flag, value,
                       [os.path.join(BIN, "braid-opt"), PROGRAM,
                        f"--braid-pipeline={words}", "-o", os.devnull])
        # The cuda target's own options reach ptxas: the whole pipeline,
        # typed end to end (a toolkit path was once spliced into pipeline
        # text and aborted the compiler).
        if CUDA and flag in ("sm", "cuda-path", "gpu-format"):
            for value in VALUES:
                yield ("braid-compile", flag, value,
                       [os.path.join(BIN, "braid-compile"), PROGRAM,
                        "--target=cuda", f"--{flag}={value}", "-o",
                        os.path.join(WORK, "out.so")])
                words = f"target=cuda {flag}={quote(value)}"
                yield ("braid-opt", flag, value,
                       [os.path.join(BIN, "braid-opt"), PROGRAM,
                        f"--braid-pipeline={words}", "-o", os.devnull])


CHILD = r"""
import json, sys
sys.path.insert(0, PYTHON_DIR)
import braid
from braid import _capi
from braid.compiler import _keyword, quote
source = open(PROGRAM).read()
for flag, value, entry in json.loads(sys.argv[1]):
    print(json.dumps(["case", flag, value]), flush=True)
    if entry == "capi":
        lib = _capi.library()
        sink = _capi.Collector()
        codegen = flag in ("O", "cpu")
        words = f"{flag}={quote(value)} emit={'obj' if codegen else 'dist'}"
        ok = lib.braidCompileSource(
            _capi.MlirStringRef.of(source), _capi.MlirStringRef.of(PROGRAM),
            _capi.MlirStringRef.of(words),
            _capi.MlirStringRef.of("out.o" if codegen else ""),
            sink.pointer()).value
        lines = [d for d in sink.diagnostics if "error" in d]
    else:
        try:
            kwargs = {_keyword(flag): value} if flag != "target" else {}
            braid.compile(PROGRAM, target=value if flag == "target" else "cpu",
                          **kwargs)
            ok, lines = True, []
        except braid.CompileError as e:
            ok = False
            lines = [d.text.split("\n")[0] for d in e.diagnostics
                     if d.severity == "error"] or [str(e)]
        except (TypeError, ValueError) as e:
            ok, lines = False, [f"error: {e}"]
    print(json.dumps(["done", ok, lines]), flush=True)
"""


def in_process(entry, options, failures):
    """The C API or Python cases, in one child process."""
    cases = []
    for option in options:
        if "compile" not in option["scopes"] or "internal" in option["stages"]:
            continue
        if option["flag"] == "emit" and entry == "capi":
            continue  # the case itself sets emit
        cases += [(option["flag"], v, entry) for v in VALUES]
    code = (f"PYTHON_DIR = {PYTHON_DIR!r}\nPROGRAM = {PROGRAM!r}\n" + CHILD)
    result = subprocess.run([sys.executable, "-c", code, json.dumps(cases)],
                            cwd=WORK, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            errors="replace", timeout=1200)
    current = None
    seen = 0
    for line in result.stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record[0] == "case":
            current = record[1:]
        elif record[0] == "done":
            seen += 1
            ok, lines = record[1], record[2]
            flag, value = current
            what = f"{entry} {flag}={value!r}"
            judge(what, flag, 0 if ok else 1, "\n".join(lines), failures)
    if result.returncode != 0 or seen != len(cases):
        failures.append(f"{entry}: the child exited {result.returncode} "
                        f"after {seen} of {len(cases)} cases (last: "
                        f"{current}):\n{result.stdout[-2000:]}")
    return len(cases)


def main():
    os.makedirs(WORK, exist_ok=True)
    options = model()
    failures = []
    counts = {}
    for entry, flag, value, args in tool_cases(options):
        if entry not in ENTRIES:
            continue
        code, output = run_tool(args)
        judge(f"{entry} --{flag}={value!r}", flag, code, output, failures)
        counts[entry] = counts.get(entry, 0) + 1
    for entry in ("capi", "python"):
        if entry in ENTRIES:
            counts[entry] = in_process(entry, options, failures)
    for failure in failures:
        print("FAIL:", failure)
    for entry, count in counts.items():
        print(f"{entry}: {count} cases")
    if failures:
        sys.exit(f"{len(failures)} failures")
    print("ok: every odd value exits 0 or 1 with one located line")


main()
