"""One training step (forward and backward, loss and every gradient) of a
HuggingFace Llama decoder layer under its shipped plan, tensor parallel on
the same CPU ranks, one thread per rank: Braid's per-rank step against
PyTorch's own tensor parallelism.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/train_step.py \\
        [--ranks 2] [--tokens 512] [--repeat 10] [--data-parallel D] \\
        [--hidden 1024] [--ffn 2816] [--heads 16] [--kv-heads 4]

The median milliseconds of a step, on rank 0 after a barrier:
- torch: `parallelize_module` over gloo, eager: the layer's forward, the
  MSE loss and `loss.backward()` (gradients on the DTensor parameters);
- braid off / auto / force: `braid.pytorch.train_step(..., per_rank=True)`
  compiled with `overlap=` off, auto and force, each rank calling its
  RankTrainStep in process (loss and this rank's gradient parts);
With --data-parallel D the ranks are D rows of ranks / D tensor-parallel
ranks and the tokens a batch of D sequences (one per row); the torch row is
then DistributedDataParallel over gloo (its 25 MB gradient buckets
overlapped with the backward), for D equal to the ranks only, and Braid
adds a row "auto -bkt": auto without gradient buckets (bucket_bytes=-1).
Torch's time over each row (above 1: Braid is faster). All rows run in the
same processes (one mpirun job, gloo initialized from Braid's ranks). The
last column is the job's peak resident memory per rank (ru_maxrss, MiB)
after the row, which only grows: it bounds each row from above.
"""
import json
import os
import resource
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from common import gloo_mesh, median_ms, rank_args, worker_rows  # noqa: E402
from torch_tp import build_layer, torch_plan  # noqa: E402

OPTIONS = dict(ranks=2, warmup=2, tokens=512, hidden=1024, heads=16,
               kv_heads=4, ffn=2816, data_parallel=1)
#: Braid's rows: name -> compile options.
ROWS = {"off": dict(overlap="off"), "auto": dict(overlap="auto"),
        "force": dict(overlap="force"),
        "auto -bkt": dict(overlap="auto", bucket_bytes=-1)}


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(args, out):
    """One rank of the mpirun job."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor.parallel import parallelize_module
    import braid.pytorch as bp
    rank, _, mesh = gloo_mesh(out)

    def mse(output, target):
        return torch.nn.functional.mse_loss(output, target)

    dp = args.data_parallel
    layer, x, kwargs, c = build_layer(args, "f32", batch=dp)
    target = torch.randn_like(x)
    rows = {}
    for name, options in ROWS.items():
        if dp == 1 and "bucket_bytes" in options:
            continue
        step = bp.train_step(layer, (x,), c.base_model_tp_plan, loss_fn=mse,
                             targets=(target,), kwargs=kwargs, per_rank=True,
                             cache=out + ".cache", data_parallel=dp,
                             **options)
        ms = median_ms(lambda: step(x, targets=(target,), **kwargs),
                       dist.barrier, args)
        rows[name] = (ms, peak_mib())
    if dp > 1:
        if dp == args.ranks:
            rows["torch"] = ddp_row(layer, x, target, kwargs, rank, args, mse)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(rows, f)
        dist.destroy_process_group()
        return
    parallelize_module(layer, mesh, torch_plan(c))

    def torch_step():
        loss = mse(layer(x, **kwargs), target)
        loss.backward()
        layer.zero_grad(set_to_none=True)
    rows["torch"] = (median_ms(torch_step, dist.barrier, args), peak_mib())
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def ddp_row(layer, x, target, kwargs, rank, args, mse):
    """PyTorch's data parallelism: DistributedDataParallel over gloo, this
    rank's sequence of the batch."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    model = DistributedDataParallel(layer)
    mine = slice(rank, rank + 1)
    part = {k: tuple(t[mine] for t in v) for k, v in kwargs.items()}

    def torch_step():
        loss = mse(model(x[mine], **part), target[mine])
        loss.backward()
        model.zero_grad(set_to_none=True)
    return median_ms(torch_step, dist.barrier, args), peak_mib()


def main():
    args, rows = worker_rows(__file__, lambda: rank_args(10, **OPTIONS),
                             worker)
    if rows is None:
        return
    dp = args.data_parallel
    grid = (f"DP {dp} x TP {args.ranks // dp}" if dp > 1
            else f"TP {args.ranks}")
    print(f"Llama decoder layer training step (hidden {args.hidden}, "
          f"{args.heads} heads, {args.kv_heads} KV heads, FFN {args.ffn}), "
          f"{args.tokens} tokens, f32, {grid}, one thread per rank")
    print(f"{'row':>16} {'ms/step':>8} {'torch/row':>9} {'peak MiB':>9}")
    theirs = rows.get("torch", [None])[0]
    for name in ["torch"] + list(ROWS):
        if name not in rows:
            continue
        ms, peak = rows[name]
        label = name if name == "torch" else f"braid {name}"
        ratio = f"{theirs / ms:9.2f}" if theirs else f"{'n/a':>9}"
        print(f"{label:>16} {ms:8.1f} {ratio} {peak:9.0f}")


if __name__ == "__main__":
    main()
