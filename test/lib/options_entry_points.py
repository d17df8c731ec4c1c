#!/usr/bin/env python3
"""Every option through every entry point gives the same report.

Usage: options_entry_points.py BIN_DIR PYTHON_DIR PROGRAM.mlir WORK_DIR

For each setting below (one or two options of the options model with a
value other than the default), compiles PROGRAM.mlir through

  braid-compile, braid-run --check, braid-opt --braid-pipeline,
  the C API's braidRunPipeline and braidCompileSource (braid-capi-test),
  and Python's braid.compile,

and checks that the JSON reports are identical, and that the report's
"options" block holds the value given (and the target's defaults resolved:
target=cuda decides with the h200 preset everywhere). Settings that cannot
run here (target=cuda) skip braid-run. Prints one line per setting; exits
non-zero on the first disagreement, naming the entry points and the keys
that differ.
"""
import json
import os
import subprocess
import sys

BIN, PYTHON_DIR, PROGRAM, WORK = sys.argv[1:5]
sys.path.insert(0, PYTHON_DIR)
import braid  # noqa: E402
from braid.compiler import _keyword, quote  # noqa: E402

CUDA = os.path.exists(os.path.join(BIN, "braid-exec-cuda"))

# (setting, what the report's "options" must say beyond the setting)
SETTINGS = [
    ({}, {"target-preset": "cpu"}),
    ({"overlap": "force"}, {}),
    ({"overlap": "off"}, {}),
    ({"target-preset": "h100"}, {}),
    ({"fuse": "off"}, {}),
    ({"gemm": "generated"}, {}),
    ({"vector-bytes": "0"}, {}),
    ({"vector-bytes": "32"}, {}),
    ({"quantize-all-gather": "bf16"}, {}),
    ({"overlap": "force", "sub-chunks": "2"}, {}),
    ({"overlap": "force", "bucket-bytes": "-1"}, {}),
    ({"overlap": "force", "bidirectional": "on"}, {}),
    ({"overlap": "force", "balance-attention": "off"}, {}),
    ({"overlap": "force", "check-schedule": "true"}, {}),
    ({"overlap": "force", "comm": "symmetric"}, {}),
    ({"overlap": "force", "comm": "symmetric", "zero-copy": "false"}, {}),
    ({"comm": "two-sided"}, {}),
    ({"fuse-collectives": "force", "comm": "symmetric"}, {}),
    ({"fuse-collectives": "off"}, {}),
    ({"fuse-collectives": "force", "fuse-puts": "false"}, {}),
    ({"fuse-collectives": "force", "kernel-signals": "false"}, {}),
    ({"entry": "mlp"}, {}),
    ({"O": "0", "cpu": "x86-64"}, {}),
    ({"timing": "true"}, {}),
    ({"outline-layers": "false"}, {}),
    ({"sink-all-reduce": "false"}, {}),
    ({"memory-plan": "false"}, {}),
    ({"attention-block-bytes": "0"}, {}),
]
if CUDA:
    SETTINGS += [
        # The preset split: every entry point decides with h200 for cuda.
        ({"target": "cuda"}, {"target-preset": "h200"}),
        ({"target": "cuda", "sm": "80", "overlap": "force"}, {}),
        ({"target": "cuda", "cuda-path": "/usr/local/cuda"}, {}),
        ({"target": "cuda", "gpu-format": "isa"}, {}),
        # emulate resolves gpu-format=auto to isa (PTX).
        ({"target": "cuda", "emulate": "true"}, {"gpu-format": "isa"}),
        ({"target": "cuda", "gemm": "generated", "allow-tf32": "true"}, {}),
    ]


def run(args, what):
    result = subprocess.run(args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        sys.exit(f"FAIL: {what} exited {result.returncode}:\n{result.stdout}")
    return result.stdout


def read(path):
    with open(path) as f:
        return json.load(f)


def reports(setting, index):
    cuda = setting.get("target") == "cuda"
    words = [f"{k}={quote(v)}" for k, v in setting.items()]
    flags = [f"--{k}={v}" for k, v in setting.items()]
    pipeline_words = [w for w, k in zip(words, setting)
                      if k not in ("O", "cpu", "timing")]
    out = {}

    def path(name):
        return os.path.join(WORK, f"s{index}-{name}.json")

    run([os.path.join(BIN, "braid-compile"), PROGRAM, *flags, "--emit=dist",
         f"--report={path('compile')}", "-o", os.devnull], "braid-compile")
    out["braid-compile"] = read(path("compile"))
    if not cuda:
        run([os.path.join(BIN, "braid-run"), PROGRAM, "--check",
             *[f for f in flags if not f.startswith("--target=")],
             f"--report={path('run')}"], "braid-run --check")
        out["braid-run --check"] = read(path("run"))
    text = " ".join(pipeline_words +
                    ["stop-after=dist", f"report={quote(path('opt'))}"])
    run([os.path.join(BIN, "braid-opt"), PROGRAM,
         f"--braid-pipeline={text}", "-o", os.devnull], "braid-opt")
    out["braid-opt --braid-pipeline"] = read(path("opt"))
    text = " ".join(pipeline_words +
                    ["stop-after=dist", f"report={quote(path('capi-p'))}"])
    run([os.path.join(BIN, "braid-capi-test"), "report-pipeline", PROGRAM,
         text], "braidRunPipeline")
    out["braidRunPipeline"] = read(path("capi-p"))
    text = " ".join(words + ["emit=dist", f"report={quote(path('capi-c'))}"])
    run([os.path.join(BIN, "braid-capi-test"), "report-compile", PROGRAM,
         text], "braidCompileSource")
    out["braidCompileSource"] = read(path("capi-c"))
    kwargs = {_keyword(k): v for k, v in setting.items() if k != "target"}
    try:
        artifact = braid.compile(PROGRAM, target=setting.get("target", "cpu"),
                                 **kwargs)
    except braid.BraidError as error:
        sys.exit(f"FAIL: braid.compile: {error}")
    out["braid.compile"] = artifact.report
    return out


def typed(option, value):
    return {"int": int, "bool": lambda v: v == "true"}.get(
        option["kind"], str)(value)


def main():
    os.makedirs(WORK, exist_ok=True)
    model = {o["flag"]: o for o in braid.options_model()}
    covered = set()
    for index, (setting, resolved) in enumerate(SETTINGS):
        got = reports(setting, index)
        # Stage times: in every report a compile wrote, never the same
        # twice, and only there.
        for name, report in got.items():
            times = report.pop("timing", None)
            compiled = not name.startswith(("braid-opt", "braidRunPipeline"))
            if setting.get("timing") == "true" and compiled:
                if (not times or times[0]["stage"] != "dist" or
                        any(t["seconds"] < 0 for t in times)):
                    sys.exit(f"FAIL: {name}: the report's timing is {times}")
            elif times is not None:
                sys.exit(f"FAIL: {setting}: {name} reports times unasked")
            # The memory plan: only a compile past the xfer stage (braid-run
            # and braid.compile build libraries; the others stop at dist),
            # on either target, with the plan on, writes it.
            memory = report.pop("memory", None)
            planned = (name in ("braid-run --check", "braid.compile") and
                       setting.get("memory-plan") != "false")
            if (memory is not None) != planned:
                sys.exit(f"FAIL: {setting}: {name} reports the memory plan "
                         f"{memory} (expected {'one' if planned else 'none'})")
            # A rank's FLOPs: every compile writes them (the driver counts
            # them after the dist stage), the pipeline alone does not.
            compute = report.pop("compute", None)
            if (compute is not None) != compiled or (
                    compute and compute["flops"] <= 0):
                sys.exit(f"FAIL: {setting}: {name} reports the FLOPs "
                         f"{compute} (expected "
                         f"{'a count' if compiled else 'none'})")
        names = list(got)
        first = got[names[0]]
        for name in names[1:]:
            if got[name] != first:
                keys = sorted(k for k in set(first) | set(got[name])
                              if first.get(k) != got[name].get(k))
                sys.exit(f"FAIL: {setting}: {names[0]} and {name} disagree "
                         f"on {keys}:\n{json.dumps(first.get('options'))}\n"
                         f"{json.dumps(got[name].get('options'))}")
        options = first["options"]
        for flag, value in setting.items():
            if "report" not in model[flag]["stages"]:
                continue
            if options[flag] != typed(model[flag], value):
                sys.exit(f"FAIL: {setting}: the report says {flag}="
                         f"{options[flag]!r}")
        for flag, value in resolved.items():
            if options[flag] != value:
                sys.exit(f"FAIL: {setting}: the report says {flag}="
                         f"{options[flag]!r}, expected {value!r}")
        covered |= set(setting)
        print(f"ok: {json.dumps(setting)} gives one report through "
              f"{len(names)} entry points")
    # Every option an entry point takes from the user has a setting above
    # (report is how the reports are read).
    wanted = {o["flag"] for o in model.values()
              if "compile" in o["scopes"]} - {"report", "emit"}
    if not CUDA:
        wanted -= {"target", "sm", "cuda-path", "gpu-format", "emulate"}
    missing = wanted - covered
    if missing:
        sys.exit(f"FAIL: no setting covers {sorted(missing)}")
    print(f"ok: every compile option covered ({len(covered)})")


main()
