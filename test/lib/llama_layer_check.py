#!/usr/bin/env python3
"""A Llama-3-8B-shaped sequence-parallel layer on CPU ranks, against numpy.

Hidden 4096, FFN 14336, 32 heads of 128, 2048 tokens, bf16, TP 4 on 4 CPU
ranks (braid.models.Transformer: causal attention with a fused QKV
projection, SwiGLU MLP, residuals), compiled with overlap forced, run with
random inputs scaled as a real model's are, and compared on every rank
with the model builder's float64 numpy reference. Prints the schedules
applied, the error, and the seconds of compile, run and reference.

Usage: llama_layer_check.py PYTHON_DIR
"""
import sys
import time

sys.path.insert(0, sys.argv[1])
import braid  # noqa: E402
from braid.models import Grid, Transformer  # noqa: E402

block = Transformer(Grid([4]), layers=1, tokens=2048, hidden=4096, heads=32,
                    ffn=14336, dtype="bf16", parallel="sp")
start = time.perf_counter()
artifact = braid.compile(block.mlir(), overlap="force")
compiled = time.perf_counter()
inputs = block.random_inputs(seed=3)
outputs = artifact.run(inputs)
ran = time.perf_counter()
error = block.check(outputs, inputs)
checked = time.perf_counter()
for strategy in sorted(c.get("strategy") or c["decision"]
                       for c in artifact.report["collectives"]):
    print(f"strategy {strategy}")
print(f"PASS llama-3-8b layer, 4 ranks, bf16: relative error {error:.3g} "
      f"(tolerance {block.tolerance:g})")
print(f"seconds: compile {compiled - start:.1f}, run {ran - compiled:.1f}, "
      f"reference {checked - ran:.1f}", file=sys.stderr)
