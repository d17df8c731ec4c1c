"""One training step (forward and backward, loss and every gradient) of a
HuggingFace Llama decoder layer under its shipped plan, tensor parallel on
the same CPU ranks, one thread per rank: Braid's per-rank step against
PyTorch's own tensor parallelism.

    ~/.cache/braid/frontends-venv/bin/python bench/cpu/train_step.py \\
        [--ranks 2] [--tokens 512] [--repeat 10]

The median milliseconds of a step, on rank 0 after a barrier:
- torch: `parallelize_module` over gloo, eager: the layer's forward, the
  MSE loss and `loss.backward()` (gradients on the DTensor parameters);
- braid off / auto / force: `braid.pytorch.train_step(..., per_rank=True)`
  compiled with `overlap=` off, auto and force, each rank calling its
  RankTrainStep in process (loss and this rank's gradient parts);
and torch's time over each (above 1: Braid is faster). All rows run in the
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
               kv_heads=4, ffn=2816)


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

    layer, x, kwargs, c = build_layer(args, "f32")
    target = torch.randn_like(x)
    rows = {}
    for overlap in ("off", "auto", "force"):
        step = bp.train_step(layer, (x,), c.base_model_tp_plan, loss_fn=mse,
                             targets=(target,), kwargs=kwargs, per_rank=True,
                             cache=out + ".cache", overlap=overlap)
        ms = median_ms(lambda: step(x, targets=(target,), **kwargs),
                       dist.barrier, args)
        rows[overlap] = (ms, peak_mib())
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


def main():
    args, rows = worker_rows(__file__, lambda: rank_args(10, **OPTIONS),
                             worker)
    if rows is None:
        return
    print(f"Llama decoder layer training step (hidden {args.hidden}, "
          f"{args.heads} heads, {args.kv_heads} KV heads, FFN {args.ffn}), "
          f"{args.tokens} tokens, f32, TP {args.ranks}, one thread per rank")
    print(f"{'row':>12} {'ms/step':>8} {'torch/row':>9} {'peak MiB':>9}")
    theirs = rows["torch"][0]
    for name in ("torch", "off", "auto", "force"):
        ms, peak = rows[name]
        label = name if name == "torch" else f"braid {name}"
        print(f"{label:>12} {ms:8.1f} {theirs / ms:9.2f} {peak:9.0f}")


if __name__ == "__main__":
    main()
