#!/usr/bin/env python3
"""Generates an N-layer transformer in upstream `shard` SPMD form for the
benchmarks, with Braid's model builder (python/braid/models.py).

Each layer is a sequence-parallel (Megatron-LM) Llama block on a 1-D
tensor-parallel grid: all-gather of the sequence-sharded activations, fused
QKV projection (column-parallel), causal attention over the local heads,
output projection (row-parallel), reduce-scatter, residual; then the SwiGLU
MLP: all-gather, gate and up projections, SiLU, down projection,
reduce-scatter, residual. Defaults are Llama-3-70B's sizes.

Usage: gen_transformer.py --layers N [--tp 4] [--seq 8192] [--hidden 8192]
                          [--heads 64] [--ffn 28672] [--dtype bf16] [-o FILE]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from braid import models  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--tp", type=int, default=4)
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--ffn", type=int, default=28672)
    parser.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args()
    models.main(["transformer", "--grid", str(args.tp), "--layers", str(args.layers),
                 "--tokens", str(args.seq), "--hidden", str(args.hidden),
                 "--heads", str(args.heads), "--ffn", str(args.ffn),
                 "--dtype", args.dtype, "--name", "transformer", "-o", args.output])


if __name__ == "__main__":
    main()
