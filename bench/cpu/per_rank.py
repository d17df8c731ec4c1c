"""Braid inside the job against Braid's harness and PyTorch's own tensor
parallelism: a HuggingFace Llama decoder layer under its shipped plan, per
forward call, on the same CPU ranks, one thread per rank.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/per_rank.py \\
        [--ranks 2] [--tokens 512] [--dtypes f32,bf16] [--repeat 10]

Per dtype, the median milliseconds of a call:
- torch: `parallelize_module` over gloo, eager (rank 0, after a barrier);
- per-rank: `braid.pytorch.parallelize(..., per_rank=True)`, the RankModule
  called in each rank's own process (rank 0, after a barrier), torch
  tensors in and out;
- harness: the same module through `ParallelModule`, which starts braid-run
  and its ranks and moves `.npy` files on every call;
- backend: the parallelize_module layer under `torch.compile(backend=
  "braid")` (braid.torch_backend), and under torch.compile's default
  (inductor; "-" where it does not compile);
and the ratios to per-rank. The torch, per-rank and backend rows run in the
same processes (one mpirun job, gloo initialized from Braid's ranks).
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
               kv_heads=4, ffn=2816, dtypes="f32,bf16")


def worker(args, out):
    """One rank of the mpirun job: the torch and per-rank rows."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor.parallel import parallelize_module
    import braid.pytorch as bp
    rank, _, mesh = gloo_mesh(out)
    rows = {}
    for dtype in args.dtypes.split(","):
        layer, x, kwargs, c = build_layer(args, dtype)
        with torch.no_grad():
            module = bp.parallelize(layer, (x,), c.base_model_tp_plan,
                                    per_rank=True, cache=out + ".cache",
                                    kwargs=kwargs)
            per_rank = median_ms(lambda: module(x, **kwargs), dist.barrier, args)
            parallelize_module(layer, mesh, torch_plan(c))
            eager = median_ms(lambda: layer(x, **kwargs), dist.barrier, args)
            ours = torch.compile(layer, backend="braid",
                                 options={"cache": out + ".cache"})
            backend = median_ms(lambda: ours(x, **kwargs), dist.barrier, args)
            torch._dynamo.reset()
            try:
                theirs = torch.compile(layer)
                inductor = median_ms(lambda: theirs(x, **kwargs), dist.barrier, args)
            except Exception as error:  # inductor may not build here
                print(f"torch.compile (inductor) failed: {error}", file=sys.stderr)
                inductor = None
            torch._dynamo.reset()
        rows[dtype] = {"torch": eager, "per_rank": per_rank, "backend": backend,
                       "inductor": inductor}
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
    print(f"Llama decoder layer (hidden {args.hidden}, {args.heads} heads, "
          f"{args.kv_heads} KV heads, FFN {args.ffn}), {args.tokens} tokens, "
          f"TP {args.ranks}, one thread per rank; ms per call")
    print(f"{'dtype':>5} {'torch':>8} {'per-rank':>9} {'ratio':>6} "
          f"{'harness':>8} {'ratio':>6} {'backend':>8} {'ratio':>6} "
          f"{'inductor':>8} {'ratio':>6}")
    for dtype, row in rows.items():
        harness = harness_ms(args, dtype)
        mine = row["per_rank"]
        inductor = (f"{row['inductor']:8.1f} {row['inductor'] / mine:6.2f}"
                    if row["inductor"] else f"{'-':>8} {'-':>6}")
        print(f"{dtype:>5} {row['torch']:8.1f} {mine:9.1f} "
              f"{row['torch'] / mine:6.2f} {harness:8.1f} {harness / mine:6.2f} "
              f"{row['backend']:8.1f} {row['backend'] / mine:6.2f} {inductor}")


if __name__ == "__main__":
    main()
