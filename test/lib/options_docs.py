#!/usr/bin/env python3
"""Checks that each entry point's documentation names every option it
takes, as the options model (braidGetOptions) describes them.

Usage: options_docs.py BIN_DIR SOURCE_ROOT
"""
import os
import re
import subprocess
import sys

BIN, ROOT = sys.argv[1:3]
sys.path.insert(0, os.path.join(ROOT, "python"))
import braid  # noqa: E402
from braid.compiler import _keyword  # noqa: E402

MODEL = braid.options_model()


def options(scope, internal=True):
    return [o for o in MODEL if scope in o["scopes"] and
            (internal or "internal" not in o["stages"])]


def check(what, text, wanted, spell):
    missing = []
    for option in wanted:
        if spell(option) not in text:
            missing.append(spell(option))
        for value in option.get("values", []):
            if value["name"] not in text:
                missing.append(f"{option['flag']}={value['name']}")
    if missing:
        sys.exit(f"FAIL: {what} does not mention {missing}")
    print(f"ok: {what} ({len(wanted)} options)")


def help_of(*args):
    return subprocess.run([os.path.join(BIN, args[0]), *args[1:]],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True).stdout


check("braid-compile --help", help_of("braid-compile", "--help"),
      options("compile", internal=False),
      lambda o: ("-" if len(o["flag"]) == 1 else "--") + o["flag"])
check("braid-run --help", help_of("braid-run", "--help"),
      [o for o in MODEL if ("compile" in o["scopes"] or "run" in o["scopes"])
       and "internal" not in o["stages"]
       and o["flag"] not in ("target", "emit")],
      lambda o: "--" + o["flag"])
opt_help = help_of("braid-opt", "--help")
start = opt_help.find("--braid-pipeline")
check("braid-opt --help", opt_help[start:start + 20000],
      options("pipeline"), lambda o: "--" + o["flag"])
with open(os.path.join(ROOT, "include", "braid-c", "Braid.h")) as f:
    header = f.read()
listing = header[header.index("/// The options ("):]
listing = listing[:listing.index("MLIR_CAPI_EXPORTED")]
check("include/braid-c/Braid.h", listing,
      [o for o in MODEL if o["scopes"]], lambda o: o["flag"])
check("braid.compile.__doc__", braid.compile.__doc__,
      [o for o in options("compile", internal=False)
       if o["flag"] not in ("target", "emit")],
      lambda o: _keyword(o["flag"]))
