"""A HuggingFace Llama decoder layer under its shipped tensor-parallel plan:
Braid (with and without its static memory plan) against PyTorch's own
tensor parallelism (`parallelize_module` over gloo, eager), side by side in
one run on the same CPU ranks, one thread per rank.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/torch_tp.py \\
        [--ranks 2] [--tokens 512] [--dtypes f32,bf16] [--repeat 10] \\
        [--profile] [--layers L]

With --layers L (2 or more), a LlamaModel of L layers from token ids
(its rotary embedding and causal mask built inside, the final norm) instead
of one decoder layer; the plan is the shipped one with its layer wildcards.

Prints, per dtype, the median milliseconds of a forward call (the slowest
rank for Braid, rank 0 after a barrier for PyTorch) and the ratios
PyTorch time / Braid time (above 1: Braid is faster): Braid as compiled by
default, without its memory plan (--memory-plan=false), and with each
attention's scores computed whole (--attention-block-bytes=0, what
braid-tile-attention replaces); and Braid's arena
against the sum of the buffers it holds (the report's "memory"). With
--profile, also Braid's per-kernel table of one more run (braid-exec
--profile) after each dtype's row.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import rank_args, time_program  # noqa: E402

DTYPES = {"f32": "float32", "bf16": "bfloat16"}


def build_layer(args, dtype_name, batch=1):
    """The layer, its input (`batch` sequences of args.tokens / batch
    tokens), its keyword arguments and its config; with args.layers above
    1, a LlamaModel, no input (None) and its token ids among the keyword
    arguments."""
    import torch
    import transformers
    from transformers.models.llama.modeling_llama import (
        LlamaDecoderLayer, LlamaRotaryEmbedding)
    dtype = getattr(torch, DTYPES[dtype_name])
    c = transformers.LlamaConfig(
        hidden_size=args.hidden, intermediate_size=args.ffn,
        num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        head_dim=args.hidden // args.heads, num_hidden_layers=1,
        vocab_size=128, max_position_embeddings=args.tokens)
    c._attn_implementation = "sdpa"
    torch.manual_seed(0)
    if getattr(args, "layers", 1) > 1:
        c.num_hidden_layers = args.layers
        model = transformers.LlamaModel(c).eval().to(dtype)
        ids = torch.randint(0, c.vocab_size, (batch, args.tokens // batch))
        return model, None, {"input_ids": ids, "use_cache": False}, c
    layer = LlamaDecoderLayer(c, 0).eval().to(dtype)
    x = torch.randn(batch, args.tokens // batch, args.hidden, dtype=dtype)
    positions = torch.arange(args.tokens // batch).unsqueeze(0).expand(
        batch, -1)
    cos, sin = LlamaRotaryEmbedding(c)(x, positions)
    kwargs = {"position_embeddings": (cos.to(dtype), sin.to(dtype))}
    return layer, x, kwargs, c


def torch_plan(c, layout="replicate", model=False):
    """The shipped plan's layer entries as PyTorch's own styles; under the
    sequence layout Megatron's sequence parallelism as torchtitan writes it
    (the norms SequenceParallel, the colwise projections after a norm
    gathering its sequence shards, the rowwise ones scattering to them)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, SequenceParallel)
    sequence = layout == "sequence"
    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    plan = {}
    for key, style in c.base_model_tp_plan.items():
        if not key.startswith("layers.*.") or style not in styles:
            continue
        # A whole model keeps the wildcard, which parallelize_module reads.
        name = key if model else key.split("layers.*.", 1)[1]
        options = {}
        if sequence and style == "rowwise":
            options["output_layouts"] = Shard(1)
        elif sequence and name.startswith("mlp."):
            options["input_layouts"] = Shard(1)
        plan[name] = styles[style](**options)
    if sequence and not model:
        plan.update(input_layernorm=SequenceParallel(),
                    post_attention_layernorm=SequenceParallel())
    return plan


def torch_rank(rank, args, dtype_name, store, out):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=args.ranks)
    mesh = init_device_mesh("cpu", (args.ranks,))
    layer, x, kwargs, c = build_layer(args, dtype_name)
    parallelize_module(layer, mesh, torch_plan(c, model=args.layers > 1))
    inputs = () if x is None else (x,)
    times = []
    with torch.no_grad():
        for i in range(args.warmup + args.repeat):
            dist.barrier()
            start = time.perf_counter()
            layer(*inputs, **kwargs)
            if i >= args.warmup:
                times.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        with open(out, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def torch_ms(args, dtype_name, tmp):
    import torch.multiprocessing as mp
    store = os.path.join(tmp, f"store-{dtype_name}")
    out = os.path.join(tmp, f"torch-{dtype_name}.json")
    mp.spawn(torch_rank, args=(args, dtype_name, store, out),
             nprocs=args.ranks, join=True)
    with open(out) as f:
        return statistics.median(json.load(f))


def braid_layer(args, dtype_name, tmp):
    """The layer's MLIR, and the memory plan the compile reports."""
    import braid.pytorch as bp
    layer, x, kwargs, c = build_layer(args, dtype_name)
    _, text, _, _ = bp.to_mlir(layer, () if x is None else (x,),
                               c.base_model_tp_plan, args.ranks, "replicate",
                               None, kwargs)
    source = os.path.join(tmp, f"layer-{dtype_name}.mlir")
    report = os.path.join(tmp, f"layer-{dtype_name}.json")
    with open(source, "w") as f:
        f.write(text)
    subprocess.run([os.path.join(args.bin, "braid-compile"), source,
                    "--emit=xfer", f"--report={report}", "-o", os.devnull],
                   check=True, stderr=subprocess.DEVNULL)
    with open(report) as f:
        memory = json.load(f).get("memory", [])
    return text, memory


def profile(args, lib):
    """braid-exec --profile's table of one run of `lib` after the warm-up."""
    env = dict(os.environ, BRAID_NUM_THREADS="1")
    return subprocess.run(
        [os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", str(args.ranks),
         os.path.join(args.bin, "braid-exec"), lib,
         f"--warmup={args.warmup}", "--profile"],
        capture_output=True, text=True, env=env, check=True).stdout


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def main():
    # --profile prints Braid's per-kernel profile per dtype.
    args = rank_args(10, ranks=2, warmup=2, tokens=512, hidden=1024, heads=16, kv_heads=4,
                     ffn=2816, dtypes="f32,bf16", profile=False, layers=1)
    what = (f"LlamaModel of {args.layers} layers" if args.layers > 1
            else "Llama decoder layer")
    print(f"{what} (hidden {args.hidden}, {args.heads} heads, "
          f"{args.kv_heads} KV heads, FFN {args.ffn}), {args.tokens} tokens, "
          f"TP {args.ranks}, one thread per rank")
    print(f"{'dtype':>5} {'torch ms':>9} {'braid ms':>9} {'ratio':>6} "
          f"{'no plan ms':>11} {'ratio':>6} {'whole attn ms':>14} "
          f"{'ratio':>6}  arena / buffers")
    with tempfile.TemporaryDirectory(prefix="braid-torch-tp-") as tmp:
        for dtype_name in args.dtypes.split(","):
            text, memory = braid_layer(args, dtype_name, tmp)
            planned = time_program(args.bin, tmp, f"plan-{dtype_name}", text,
                                   args.ranks, args.repeat,
                                   warmup=args.warmup, threads=1)
            unplanned = time_program(args.bin, tmp, f"heap-{dtype_name}",
                                     text, args.ranks, args.repeat,
                                     ["--memory-plan=false"],
                                     warmup=args.warmup, threads=1)
            whole = time_program(args.bin, tmp, f"whole-{dtype_name}",
                                 text, args.ranks, args.repeat,
                                 ["--attention-block-bytes=0"],
                                 warmup=args.warmup, threads=1)
            torch_time = torch_ms(args, dtype_name, tmp)
            arena = sum(m["arena_bytes"] for m in memory)
            held = sum(m["buffer_bytes"] for m in memory)
            print(f"{dtype_name:>5} {torch_time:9.1f} {planned:9.1f} "
                  f"{torch_time / planned:6.2f} {unplanned:11.1f} "
                  f"{torch_time / unplanned:6.2f} {whole:14.1f} "
                  f"{torch_time / whole:6.2f}  {mib(arena)} / {mib(held)}")
            if args.profile:
                print(profile(args, os.path.join(tmp, f"plan-{dtype_name}.so")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
