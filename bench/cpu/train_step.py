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
from common import rank_args  # noqa: E402
from torch_tp import build_layer, torch_plan  # noqa: E402

OPTIONS = dict(ranks=2, warmup=2, tokens=512, hidden=1024, heads=16,
               kv_heads=4, ffn=2816)


def timed(call, barrier, args):
    """Median ms of `call` over --repeat calls after --warmup, each after
    `barrier`."""
    times = []
    for i in range(args.warmup + args.repeat):
        barrier()
        start = time.perf_counter()
        call()
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker(args, out):
    """One rank of the mpirun job."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    import braid.program
    import braid.pytorch as bp
    torch.set_num_threads(1)
    rank, ranks = braid.program.rank_and_size()
    dist.init_process_group("gloo", init_method=f"file://{out}.store",
                            rank=rank, world_size=ranks)
    mesh = init_device_mesh("cpu", (ranks,))

    def mse(output, target):
        return torch.nn.functional.mse_loss(output, target)

    layer, x, kwargs, c = build_layer(args, "f32")
    target = torch.randn_like(x)
    rows = {}
    for overlap in ("off", "auto", "force"):
        step = bp.train_step(layer, (x,), c.base_model_tp_plan, loss_fn=mse,
                             targets=(target,), kwargs=kwargs, per_rank=True,
                             cache=out + ".cache", overlap=overlap)
        rows[overlap] = (timed(lambda: step(x, targets=(target,), **kwargs),
                               dist.barrier, args), peak_mib())
    parallelize_module(layer, mesh, torch_plan(c))

    def torch_step():
        loss = mse(layer(x, **kwargs), target)
        loss.backward()
        layer.zero_grad(set_to_none=True)
    rows["torch"] = (timed(torch_step, dist.barrier, args), peak_mib())
    if rank == 0:
        with open(out, "w") as f:
            json.dump(rows, f)
    dist.destroy_process_group()


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        out = sys.argv[2]
        sys.argv[1:3] = []
        worker(rank_args(10, **OPTIONS), out)
        return
    args = rank_args(10, **OPTIONS)
    with tempfile.TemporaryDirectory(prefix="braid-train-step-") as tmp:
        out = os.path.join(tmp, "rows.json")
        env = dict(os.environ, BRAID_NUM_THREADS="1", OMP_NUM_THREADS="1")
        subprocess.run([os.path.join(ROOT, "scripts", "mpirun.sh"), "-np",
                        str(args.ranks), sys.executable, os.path.abspath(__file__),
                        "--worker", out, *sys.argv[1:]], check=True, env=env)
        with open(out) as f:
            rows = json.load(f)
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
