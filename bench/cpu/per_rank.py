"""Braid inside the job against Braid's harness and PyTorch's own tensor
parallelism: a HuggingFace Llama decoder layer (or a 2-layer LlamaModel)
under its shipped plan, tensor or sequence parallel, per forward call, on
the same CPU ranks, one thread per rank.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/per_rank.py \\
        [--ranks 2] [--tokens 512] [--dtypes f32,bf16] [--repeat 10] \\
        [--module layer|model] [--layout replicate|sequence] [--no-harness]

Per dtype, the median milliseconds of a call:
- torch: `parallelize_module` over gloo, eager (rank 0, after a barrier);
  under --layout sequence Megatron's sequence parallelism as torchtitan
  writes it (layer only: "-" for the model);
- per-rank: `braid.pytorch.parallelize(..., per_rank=True)`, the RankModule
  called in each rank's own process (rank 0, after a barrier), torch
  tensors in and out (this rank's rows under the sequence layout), with
  overlap "auto" (the default) and "off";
- harness: the same module through `ParallelModule`, which starts braid-run
  and its ranks and moves `.npy` files on every call (layer, tensor
  parallel; not with --no-harness);
- backend: the parallelize_module layer under `torch.compile(backend=
  "braid")` (braid.torch_backend), and under torch.compile's default
  (inductor; "-" where it does not compile);
and the ratios of each to per-rank (above 1: Braid is faster), and how
far rank 0's resident memory rose above where it was while it ran torch
eager and Braid per-rank (VmHWM, reset before each, less VmRSS then: the
calls' intermediates, and Braid's arena, whose pages the first call
faults in). The torch, per-rank and backend rows run in the same processes
(one mpirun job, gloo initialized from Braid's ranks).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import gloo_mesh, median_ms, rank_args, worker_rows  # noqa: E402
from torch_tp import build_layer, torch_plan  # noqa: E402

OPTIONS = dict(ranks=2, warmup=2, tokens=512, hidden=1024, heads=16,
               kv_heads=4, ffn=2816, dtypes="f32,bf16", module="layer",
               layout="replicate", no_harness=False)


def status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_ms_mib(call, barrier, args):
    """median_ms of `call`, and how far above its resident memory before
    them this process's resident memory rose while they ran (MiB: the
    kernel's high-water mark, reset first): the calls' intermediates, and
    for the first Braid call its arena's pages."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kib("VmRSS")
    ms = median_ms(call, barrier, args)
    return ms, (status_kib("VmHWM") - before) / 1024


def build(args, dtype):
    """The module (the layer, or a 2-layer LlamaModel of its config called
    with `inputs_embeds`), its call's arguments, keyword arguments and
    config."""
    import torch
    import transformers
    layer, x, kwargs, c = build_layer(args, dtype)
    if args.module == "model":
        c.num_hidden_layers = 2
        torch.manual_seed(0)
        layer = transformers.LlamaModel(c).eval().to(x.dtype)
        return layer, (), {"inputs_embeds": x, "use_cache": False}, c
    return layer, (x,), kwargs, c


def worker(args, out):
    """One rank of the mpirun job: the torch and per-rank rows."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor.parallel import parallelize_module
    import braid.pytorch as bp
    rank, ranks, mesh = gloo_mesh(out)
    sequence = args.layout == "sequence"
    rows = {}

    def part(tensor):
        """This rank's part of an activation (its rows under "sequence")."""
        if not sequence:
            return tensor
        n = tensor.shape[-2] // ranks
        return tensor[..., rank * n:(rank + 1) * n, :].contiguous()

    for dtype in args.dtypes.split(","):
        module, call_args, kwargs, c = build(args, dtype)
        mine_args = tuple(part(a) for a in call_args)
        mine_kwargs = {k: part(v) if k == "inputs_embeds" else v
                       for k, v in kwargs.items()}
        row = {}
        with torch.no_grad():
            for overlap in ("auto", "off"):
                braid_module = bp.parallelize(
                    module, call_args, c.base_model_tp_plan, per_rank=True,
                    cache=out + ".cache", kwargs=kwargs,
                    input_layout=args.layout, overlap=overlap)
                key = "per_rank" if overlap == "auto" else "per_rank_off"
                row[key], row[key + "_mib"] = peak_ms_mib(
                    lambda: braid_module(*mine_args, **mine_kwargs),
                    dist.barrier, args)
            if sequence and args.module == "model":
                row["torch"] = row["torch_mib"] = None
            else:
                parallelize_module(module, mesh, torch_plan(c, args.layout)
                                   if args.module == "layer" else
                                   {f"layers.{i}.{k}": v
                                    for i in range(c.num_hidden_layers)
                                    for k, v in torch_plan(c).items()})
                row["torch"], row["torch_mib"] = peak_ms_mib(
                    lambda: module(*mine_args, **mine_kwargs), dist.barrier,
                    args)
                ours = torch.compile(module, backend="braid",
                                     options={"cache": out + ".cache"})
                row["backend"] = median_ms(
                    lambda: ours(*mine_args, **mine_kwargs), dist.barrier, args)
                torch._dynamo.reset()
                try:
                    theirs = torch.compile(module)
                    row["inductor"] = median_ms(
                        lambda: theirs(*mine_args, **mine_kwargs),
                        dist.barrier, args)
                except Exception as error:  # inductor may not build here
                    print(f"torch.compile (inductor) failed: {error}",
                          file=sys.stderr)
                torch._dynamo.reset()
        rows[dtype] = row
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def harness_ms(args, dtype):
    """ParallelModule's call, from this (one) process."""
    import torch
    import braid.pytorch as bp
    layer, x, kwargs, c = build_layer(args, dtype)
    module = bp.parallelize(layer, (x,), c.base_model_tp_plan, ranks=args.ranks,
                            kwargs=kwargs)
    with torch.no_grad():
        return median_ms(lambda: module(x, **kwargs, threads=1), lambda: None, args)


def main():
    args, rows = worker_rows(__file__, lambda: rank_args(10, **OPTIONS),
                             worker)
    if rows is None:
        return
    what = ("Llama decoder layer" if args.module == "layer"
            else "2-layer LlamaModel")
    parallel = "SP" if args.layout == "sequence" else "TP"
    print(f"{what} (hidden {args.hidden}, {args.heads} heads, "
          f"{args.kv_heads} KV heads, FFN {args.ffn}), {args.tokens} tokens, "
          f"{parallel} {args.ranks}, one thread per rank; ms per call, "
          f"ratio = other / Braid per-rank (auto)")

    def cell(value, mine):
        return (f"{value:8.1f} {value / mine:6.2f}" if value
                else f"{'-':>8} {'-':>6}")

    print(f"{'dtype':>5} {'per-rank':>9} {'torch':>8} {'ratio':>6} "
          f"{'inductor':>8} {'ratio':>6} {'backend':>8} {'ratio':>6} "
          f"{'off':>8} {'ratio':>6} {'harness':>8} {'ratio':>6} "
          f"{'+MiB torch':>10} {'+MiB braid':>10}")
    for dtype, row in rows.items():
        harness = (None if args.no_harness or args.module != "layer" or
                   args.layout != "replicate" else harness_ms(args, dtype))
        mine = row["per_rank"]
        torch_mib = (f"{row['torch_mib']:10.1f}"
                     if row.get("torch_mib") is not None else f"{'-':>10}")
        print(f"{dtype:>5} {mine:9.1f} {cell(row.get('torch'), mine)} "
              f"{cell(row.get('inductor'), mine)} "
              f"{cell(row.get('backend'), mine)} "
              f"{cell(row['per_rank_off'], mine)} {cell(harness, mine)} "
              f"{torch_mib} {row['per_rank_mib']:10.1f}")


if __name__ == "__main__":
    main()
