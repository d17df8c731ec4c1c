#!/usr/bin/env python3
"""A HuggingFace Llama decoder layer (or, with --module model, a 2-layer
LlamaModel that builds its own positions, rotary tables and causal mask),
context parallel through the PyTorch front door, on CPU ranks.

The layer (random weights, sdpa attention with its causal mask, GQA) is
exported by `braid.pytorch.to_mlir` with an empty plan and the input split
along the sequence, then compiled twice and timed with braid-exec (median
of --repeat runs, slowest rank), in one run:

- upstream: --overlap=off, what upstream partitioning gives: the normed
  rows all-gathered before the k and v projections, every rank projecting
  the whole sequence and holding its rows x sequence scores per head;
- auto: --overlap=auto, the projections and k's rotary embedding moved
  before the gather (each rank projects its own rows) and k and v
  gathered instead; the cost model then picks their schedule (on the cpu
  preset, below 256 MiB of scores a rank, the gathers whole and
  asynchronous);
- ring: --overlap=force, the same moves, and k and v as one ring of
  attention with the online softmax; HF's causal mask tensor is read as
  a comparison of positions, so pieces it fills whole are skipped and the
  ring is balanced (each rank also scores the rows of the block it holds);
- unbalanced: the same ring with --balance-attention=off.

It prints the times, upstream / each (> 1: faster than upstream), the
strategies of each report and the bytes of scores a rank holds whole and
per piece of the ring.

Runs in the frontends venv (scripts/setup-frontends.sh):
  ~/.cache/braid/frontends-venv/bin/python bench/cpu/context_parallel.py
      [--bin build/bin] [--ranks 4] [--repeat 3] [--tokens 1024,2048]
      [--hidden 512] [--heads 8] [--kv-heads 2] [--module layer|model]
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import header, mib, rank_args, report_records, time_program  # noqa: E402


def layer_text(ranks, tokens, hidden, heads, kv_heads, module="layer"):
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer, LlamaRotaryEmbedding)
    import braid.pytorch as bp
    c = transformers.LlamaConfig(
        hidden_size=hidden, intermediate_size=2 * hidden,
        num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=hidden // heads, num_hidden_layers=1, vocab_size=128,
        max_position_embeddings=tokens)
    c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    if module == "model":
        c.num_hidden_layers = 2
        model = transformers.LlamaModel(c).eval().to(torch.bfloat16)
        kwargs = {"inputs_embeds": torch.randn(1, tokens, hidden,
                                               dtype=torch.bfloat16),
                  "use_cache": False}
        return bp.to_mlir(model, (), {}, ranks, "sequence", None, kwargs)[1]
    layer = LlamaDecoderLayer(c, 0).eval().to(torch.bfloat16)
    x = torch.randn(1, tokens, hidden, dtype=torch.bfloat16)
    positions = torch.arange(tokens).unsqueeze(0)
    cos, sin = LlamaRotaryEmbedding(c)(x, positions)
    kwargs = {"position_embeddings": (cos.to(x.dtype), sin.to(x.dtype))}
    _, text, _, _ = bp.to_mlir(layer, (x,), {}, ranks, "sequence", None,
                               kwargs)
    return text


def main():
    args = rank_args(3, tokens=(1024, 2048), hidden=512, heads=8, kv_heads=2,
                     module="layer")
    if args.module not in ("layer", "model"):
        raise SystemExit("--module is layer or model")
    print(header(("tokens", 6), "upstream ms", "auto ms", "ratio", "ring ms", "ratio",
                 "unbalanced ms", "ratio", "scores whole", "per piece")
          + "  strategies (auto; ring)")
    with tempfile.TemporaryDirectory(prefix="braid-cp-") as tmp:
        for tokens in args.tokens:
            text = layer_text(args.ranks, tokens, args.hidden, args.heads,
                              args.kv_heads, args.module)
            names = {}
            held = {}
            for mode in ("auto", "force"):
                records = report_records(args.bin, tmp, f"{mode}{tokens}",
                                         text, [f"--overlap={mode}"])
                names[mode] = ", ".join(str(r["strategy"]) for r in records)
                held = next((r["scores"] for r in records if "scores" in r),
                            held)
            flags = {"off": ["--overlap=off"], "auto": ["--overlap=auto"],
                     "force": ["--overlap=force"],
                     "unbalanced": ["--overlap=force",
                                    "--balance-attention=off"]}
            times = {mode: time_program(args.bin, tmp, f"{mode}{tokens}",
                                        text, args.ranks, args.repeat,
                                        flags[mode])
                     for mode in flags}
            print(f"{tokens:>6} {times['off']:>12.2f} {times['auto']:>8.2f} "
                  f"{times['off'] / times['auto']:>6.2f} "
                  f"{times['force']:>8.2f} "
                  f"{times['off'] / times['force']:>6.2f} "
                  f"{times['unbalanced']:>14.2f} "
                  f"{times['off'] / times['unbalanced']:>6.2f} "
                  f"{mib(held.get('materialized_bytes', 0)):>13} "
                  f"{mib(held.get('per_step_bytes', 0)):>10}  "
                  f"{names['auto']}; {names['force']}", flush=True)

if __name__ == "__main__":
    main()
