#!/usr/bin/env python3
"""Checks compile reports against docs/report.schema.json.

  report_schema.py selftest
      the checker rejects what the schema forbids (so the check can fail)
  report_schema.py file REPORT.json
      checks one report, and prints the memory plan and the FLOPs it gives
  report_schema.py patterns BIN WORK
      compiles every (pattern, variant) that test/E2E's RUN lines run
      (test/lib/e2e_patterns) to dist under two option sets with
      BIN/braid-compile --report, checks each report, and prints the
      strategies seen; fails if one the schema names is never chosen

A small checker of the JSON Schema keywords the schema uses ($ref into
$defs, type, enum, const, oneOf, required, properties,
additionalProperties: false, items, pattern, minimum, exclusiveMinimum,
exclusiveMaximum): Debian's python3 has no jsonschema, and the schema is
meant to stay within these.
"""
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys

LIB = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(LIB))
SCHEMA = os.path.join(ROOT, "docs", "report.schema.json")
KNOWN = {"$schema", "$id", "$defs", "$ref", "title", "description", "type",
         "enum", "const", "oneOf", "required", "properties",
         "additionalProperties", "items", "pattern", "minimum",
         "exclusiveMinimum", "exclusiveMaximum"}

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(value, schema, root, path="$"):
    """Every way `value` breaks `schema`, as 'PATH: what' strings."""
    unknown = set(schema) - KNOWN
    if unknown:
        raise ValueError(f"schema at {path} uses {sorted(unknown)}, which "
                         "this checker does not know")
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return errors(value, root["$defs"][name], root, path)
    found = []
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[k](value) for k in kinds):
            return [f"{path}: {value!r} is not of type {'/'.join(kinds)}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        found.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "oneOf" in schema:
        matching = [s for s in schema["oneOf"] if not errors(value, s, root, path)]
        if len(matching) != 1:
            found.append(f"{path}: {value!r} matches {len(matching)} of oneOf's "
                         "schemas, not one")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                found.append(f"{path}: no {key!r}")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                found += errors(item, properties[key], root, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                found.append(f"{path}: {key!r} is not in the schema")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += errors(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, str) and "pattern" in schema:
        if not re.search(schema["pattern"], value):
            found.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            found.append(f"{path}: {value} < {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            found.append(f"{path}: {value} <= {schema['exclusiveMinimum']}")
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            found.append(f"{path}: {value} >= {schema['exclusiveMaximum']}")
    return found


def load_schema():
    with open(SCHEMA) as f:
        return json.load(f)


def selftest():
    schema = load_schema()
    record = {"kind": "all_gather", "loc": "x.mlir:1:1", "function": "main",
              "calls": 1, "decision": "fused", "with": "linalg.matmul",
              "strategy": "ring_ag_matmul_bidir", "chunks": 4,
              "transport": "two-sided", "reason": "overlap=force",
              "predicted": {"compute_us": 1.0, "comm_us": 2.0,
                            "serial_us": 3.0, "overlapped_us": 2.5},
              "quantized": {"format": "bf16", "max_relative_error": 2 ** -8}}
    good = {"target_preset": "cpu", "mode": "force", "collectives": [record]}
    assert not errors(good, schema, schema), errors(good, schema, schema)

    def broken(change):
        report = json.loads(json.dumps(good))
        change(report, report["collectives"][0])
        return errors(report, schema, schema)

    cases = {
        "an unknown field": lambda r, c: c.update(extra=1),
        "a missing field": lambda r, c: c.pop("reason"),
        "an unknown decision": lambda r, c: c.update(decision="maybe"),
        "an unknown strategy": lambda r, c: c.update(strategy="ring_magic"),
        "a negative time": lambda r, c: c["predicted"].update(comm_us=-1.0),
        "a bound of 1": lambda r, c: c["quantized"].update(max_relative_error=1),
        "chunks as a string": lambda r, c: c.update(chunks="4"),
        "a boolean as a count": lambda r, c: c.update(calls=True),
        "no collectives": lambda r, c: r.pop("collectives"),
        "an unknown preset": lambda r, c: r.update(target_preset="tpu"),
    }
    for what, change in cases.items():
        if not broken(change):
            sys.exit(f"report_schema: selftest: {what} passed the check")
    print(f"ok: the schema's checker rejects {len(cases)} broken reports")


# Option sets: with each configuration's own flags, the first reaches the
# fused schedules, the second the in-kernel ones, symmetric transports,
# quantization and timing.
OPTION_SETS = [
    ["--overlap=force"],
    ["--overlap=auto", "--fuse-collectives=force", "--comm=symmetric",
     "--quantize-all-gather=bf16", "--timing"],
]


def schema_strategies(schema):
    """The strategies the schema's pattern names, a group of them with an
    optional suffix ("(a|b)(_bidir)?") counted once per name: the
    configurations must reach every one under OPTION_SETS."""
    pattern = next(alt["pattern"] for alt in
                   schema["$defs"]["record"]["properties"]["strategy"]["oneOf"]
                   if "pattern" in alt)
    names = set()
    for group, name in re.findall(r"\(([a-z0-9_|]+)\)\([a-z0-9_]+\)\?|([a-z0-9_]+)",
                                  pattern.strip("^$")):
        names.update(group.split("|") if group else [name])
    return names


# The optional fields, each of which some report must have.
OPTIONAL_FIELDS = {"options", "timing", "in_kernel", "kernel", "quantized",
                   "scores", "compute"}


def configurations():
    """The distinct (pattern, variant) configurations of test/E2E's RUN
    lines, each as the driver's parsed arguments (cpu target)."""
    sys.path.insert(0, LIB)
    from e2e_patterns import driver
    seen = {}
    directory = os.path.join(ROOT, "test", "E2E")
    for test in sorted(t for t in os.listdir(directory) if t.endswith(".test")):
        with open(os.path.join(directory, test)) as f:
            for line in f:
                if "RUN:" not in line or "e2e.py" not in line:
                    continue
                words = shlex.split(line.split("e2e.py", 1)[1].split("|")[0])
                if "--bin" in words:
                    at = words.index("--bin")
                    del words[at:at + 2]
                if any(w.startswith("%") for w in words):
                    continue  # a run on files of its own (--prebuilt %t)
                try:
                    with contextlib.redirect_stderr(io.StringIO()):
                        args = driver.parse_args(words)
                except SystemExit:  # a line of e2e.py's own error cases
                    continue
                if args.target == "cpu":
                    seen.setdefault((args.pattern, args.variant), args)
    return driver, list(seen.values())


def patterns(bin_dir, work):
    driver, configs = configurations()
    schema = load_schema()
    os.makedirs(work, exist_ok=True)
    seen, fields, checked, failures = set(), set(), 0, []
    for n, args in enumerate(configs):
        text = driver.PATTERNS[args.pattern](driver.config(args))[0]
        program = os.path.join(work, f"p{n}.mlir")
        with open(program, "w") as f:
            f.write(text)
        for i, flags in enumerate(OPTION_SETS):
            flags = shlex.split(" ".join(args.compile_flags)) + flags
            report = os.path.join(work, f"p{n}.{i}.json")
            what = f"{args.pattern} --variant={args.variant} {' '.join(flags)}"
            done = subprocess.run(
                [os.path.join(bin_dir, "braid-compile"), program, "--emit=dist",
                 f"--report={report}", "-o", os.devnull] + flags,
                capture_output=True, text=True)
            if done.returncode != 0:
                failures.append(f"{what}: braid-compile failed:\n{done.stderr}")
                continue
            with open(report) as f:
                parsed = json.load(f)
            failures += [f"{what}: {e}" for e in errors(parsed, schema, schema)]
            seen |= {r["strategy"] for r in parsed["collectives"] if r["strategy"]}
            fields |= set(parsed).union(*(set(r) for r in parsed["collectives"]))
            checked += 1
    expected = schema_strategies(schema)
    missing = expected - {re.sub("_bidir$", "", s) for s in seen}
    if missing:
        failures.append(f"no report chose {sorted(missing)}")
    absent = OPTIONAL_FIELDS - fields
    if absent:
        failures.append(f"no report has {sorted(absent)}")
    if failures:
        sys.exit("report_schema: " + "\n".join(failures))
    print(f"ok: {checked} reports of {len(configs)} configurations follow "
          f"docs/report.schema.json; each of its {len(expected)} strategies "
          f"chosen: {' '.join(sorted(seen))}")


def check_file(path):
    """One report: follows the schema; prints each function's memory plan."""
    with open(SCHEMA) as f:
        schema = json.load(f)
    with open(path) as f:
        parsed = json.load(f)
    problems = errors(parsed, schema, schema)
    if problems:
        sys.exit("report_schema: " + "\n".join(problems))
    for plan in parsed.get("memory", []):
        if plan["arena_bytes"] > plan["buffer_bytes"]:
            sys.exit(f"report_schema: {plan['function']}: an arena larger "
                     "than its buffers together")
        print(f"memory: {plan['function']}: {plan['buffers']} buffers, "
              f"{plan['buffer_bytes']} bytes in an arena of "
              f"{plan['arena_bytes']}, {plan['heap_bytes']} on the heap")
    if "compute" in parsed:
        c = parsed["compute"]
        print(f"compute: {c['function']}: {c['contractions']} contractions, "
              f"{c['flops']} flops, {c['unbounded']} in loops of unknown "
              "trip count")
    print(f"ok: {path} follows docs/report.schema.json")


if __name__ == "__main__":
    if sys.argv[1:2] == ["selftest"]:
        selftest()
    elif sys.argv[1:2] == ["file"] and len(sys.argv) == 3:
        check_file(sys.argv[2])
    elif sys.argv[1:2] == ["patterns"] and len(sys.argv) == 4:
        patterns(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
