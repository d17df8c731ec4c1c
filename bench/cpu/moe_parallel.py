"""A HuggingFace MoE block (dense experts) on the same CPU ranks under the
three ways of splitting it Braid takes, side by side in one run:

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/moe_parallel.py \\
        [--ranks 4] [--tokens 512,2048] [--repeat 5]

- tp: the shipped tensor-parallel plan on a 1-D grid (every expert on
  every rank, its features split), with the experts' partial sums reduced
  after the combine (the default, braid-sink-all-reduce) and where the
  down projection leaves them (--sink-all-reduce=false: [experts, tokens,
  hidden]);
- ep: the shipped expert-parallel plan (grouped_gemm: whole experts per
  rank);
- ep x tp: the tensor-parallel plan with expert_parallel=2 (a 2 x ranks/2
  grid: each row its experts, their features split over the row).

Mixtral-like shape (8 experts, top 2, hidden 1024, expert FFN 3584), f32,
tokens replicated, one thread per rank, overlap auto. Prints each median
(the slowest rank) and the bytes each all-reduce of the program sums per
rank, from its dist IR.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import header, mib, time_program  # noqa: E402
from moe_capacity import SHAPES, build_block  # noqa: E402


def all_reduce_bytes(bin_dir, tmp, name, text, flags):
    """Bytes each all-reduce of `text` sums, from its dist IR."""
    source = os.path.join(tmp, f"{name}-ir.mlir")
    with open(source, "w") as f:
        f.write(text)
    ir = subprocess.run([os.path.join(bin_dir, "braid-compile"), source,
                         "--emit=dist", "--overlap=off", *flags, "-o", "-"],
                        check=True, capture_output=True, text=True).stdout
    sizes = []
    for dims, element in re.findall(
            r"dist\.all_reduce %\S+ on @\w+ axes = \[[0-9, ]*\] reduce = sum"
            r" : tensor<([0-9x]+)x(f32|bf16)>", ir):
        count = 1
        for d in dims.split("x"):
            count *= int(d)
        sizes.append(count * (4 if element == "f32" else 2))
    return sizes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--tokens", default="512,2048")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import torch
    import braid.pytorch as bp
    shape = SHAPES["mixtral-like"]
    block, c = build_block("mixtral-like", shape)
    print(f"A Mixtral-like MoE block (dense experts), {args.ranks} ranks, "
          f"one thread per rank, f32, tokens replicated, overlap auto")
    print(header("layout", "tokens", "ms", "all-reduces (MiB summed)"))
    layouts = [
        ("tp", c.base_model_tp_plan, {}, []),
        ("tp, sum unmoved", c.base_model_tp_plan, {},
         ["--sink-all-reduce=false"]),
        ("ep", c.base_model_ep_plan, {}, []),
        ("ep x tp", c.base_model_tp_plan, {"expert_parallel": 2}, []),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for tokens in (int(t) for t in args.tokens.split(",")):
            x = torch.randn(1, tokens, shape["hidden"])
            for name, plan, options, flags in layouts:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # attention's plan keys
                    _, text, _, _ = bp.to_mlir(block, (x,), plan, args.ranks,
                                               **options)
                key = re.sub(r"\W+", "-", name)
                t = time_program(args.bin, tmp, key, text, args.ranks,
                                 args.repeat, flags=flags, threads=1)
                sizes = all_reduce_bytes(args.bin, tmp, key, text, flags)
                print(f"{name:>16} {tokens:>6} {t:>8.1f} "
                      f"{', '.join(mib(b) for b in sizes)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
