"""HuggingFace MoE blocks compiled dense (every expert on every token, the
default) against a capacity per expert (`capacity_factor`), under the
shipped expert-parallel plan, side by side in one run on the same CPU
ranks, one thread per rank.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/moe_capacity.py \\
        [--ranks 4] [--tokens 512,2048] [--factors 1.0,1.25] [--repeat 5] \\
        [--layout sequence]

Two shapes: Mixtral-like (8 experts, top 2, hidden 1024, expert FFN 3584)
and DeepSeek-like (64 experts, top 6, hidden 1024, expert FFN 512), both
as Qwen3-MoE blocks with the Mixtral-like one a Mixtral block. Prints the
median milliseconds of a forward call (the slowest rank) and dense time /
capacity time for each factor (above 1: the capacity export is faster),
with the rows each expert computes and one rank's contraction GFLOP (the
compile report's "compute"). `--layout sequence` splits the tokens along
the sequence: the capacity is per rank's tokens, and the tokens reach
their experts and return by all-to-all; each factor then also gets its
times with --overlap=off and force (force computes the experts per peer
as its rows arrive: a2a_dispatch).
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import header, time_program  # noqa: E402

SHAPES = {
    "mixtral-like": dict(experts=8, top_k=2, hidden=1024, ffn=3584),
    "deepseek-like": dict(experts=64, top_k=6, hidden=1024, ffn=512),
}


def build_block(name, shape):
    import torch
    import transformers
    torch.manual_seed(0)
    if name == "mixtral-like":
        from transformers.models.mixtral.modeling_mixtral import \
            MixtralSparseMoeBlock as Block
        c = transformers.MixtralConfig(
            hidden_size=shape["hidden"], intermediate_size=shape["ffn"],
            num_local_experts=shape["experts"],
            num_experts_per_tok=shape["top_k"], num_hidden_layers=1,
            num_attention_heads=8, num_key_value_heads=8, vocab_size=128)
    else:
        from transformers.models.qwen3_moe.modeling_qwen3_moe import \
            Qwen3MoeSparseMoeBlock as Block
        c = transformers.Qwen3MoeConfig(
            hidden_size=shape["hidden"], moe_intermediate_size=shape["ffn"],
            num_experts=shape["experts"], num_experts_per_tok=shape["top_k"],
            num_hidden_layers=1, num_attention_heads=8,
            num_key_value_heads=8, vocab_size=128)
    c._experts_implementation = "batched_mm"
    block = Block(c).eval()
    with torch.no_grad():
        for p in block.parameters():
            p.normal_(0, 0.02)
    return block, c


def rank_gflops(bin_dir, tmp, name, text):
    """One rank's contraction GFLOP as the compile report counts them."""
    import json
    import subprocess
    source = os.path.join(tmp, f"{name}-flops.mlir")
    report = os.path.join(tmp, f"{name}-flops.json")
    with open(source, "w") as f:
        f.write(text)
    subprocess.run([os.path.join(bin_dir, "braid-compile"), source,
                    "--emit=dist", f"--report={report}", "-o", os.devnull],
                   check=True, stderr=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f)["compute"]["flops"] / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--tokens", default="512,2048")
    parser.add_argument("--factors", default="1.0,1.25")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--layout", default="replicate",
                        choices=["replicate", "sequence"])
    args = parser.parse_args()
    sequence = args.layout == "sequence"
    import torch
    import braid.pytorch as bp
    factors = [float(f) for f in args.factors.split(",")]
    print(f"HF MoE blocks under the shipped expert-parallel plan, "
          f"{args.ranks} ranks, one thread per rank, f32, tokens "
          f"{'split along the sequence' if sequence else 'replicated'}")
    columns = ["shape", "tokens", "dense ms", "GFLOP/rank"]
    for f in factors:
        columns += [f"cf {f} ms", "ratio", "rows/expert", "GFLOP/rank"]
        if sequence:
            columns += ["overlap off ms", "overlap force ms"]
    print(header(*columns))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.shapes.split(","):
            shape = SHAPES[name]
            block, c = build_block(name, shape)
            for tokens in (int(t) for t in args.tokens.split(",")):
                x = torch.randn(1, tokens, shape["hidden"])
                _, dense, _, _ = bp.to_mlir(block, (x,), c.base_model_ep_plan,
                                            args.ranks,
                                            input_layout=args.layout)
                base = time_program(args.bin, tmp, "dense", dense, args.ranks,
                                    args.repeat, threads=1)
                row = [f"{name:>14}", f"{tokens:>6}", f"{base:>9.1f}",
                       f"{rank_gflops(args.bin, tmp, 'dense', dense):>10.1f}"]
                for f in factors:
                    _, text, _, _ = bp.to_mlir(block, (x,),
                                               c.base_model_ep_plan,
                                               args.ranks, capacity_factor=f,
                                               input_layout=args.layout)
                    t = time_program(args.bin, tmp, "capacity", text,
                                     args.ranks, args.repeat, threads=1)
                    per = tokens // args.ranks if sequence else tokens
                    rows = bp.expert_capacity(per, shape["experts"],
                                              shape["top_k"], f)
                    rows *= args.ranks if sequence else 1
                    gflops = rank_gflops(args.bin, tmp, "capacity", text)
                    row += [f"{t:>{len(str(f)) + 7}.1f}",
                            f"{base / t:>6.2f}", f"{rows:>12}",
                            f"{gflops:>10.1f}"]
                    if sequence:
                        for mode in ("off", "force"):
                            t = time_program(args.bin, tmp, f"capacity-{mode}",
                                             text, args.ranks, args.repeat,
                                             flags=[f"--overlap={mode}"],
                                             threads=1)
                            row += [f"{t:>{len(mode) + 11}.1f}"]
                print(" ".join(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
