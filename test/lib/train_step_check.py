"""braid.pytorch.train_step(..., per_rank=True) as a training job uses it:
run under mpirun in the frontends venv, every rank builds the same
HuggingFace Llama decoder layer (random weights, the same seed), compiles
its training step under the plan transformers ships, and trains its part
of the parameters with torch.optim's SGD for a few steps, against the
unpartitioned layer trained by torch alone.

    mpirun -np N python train_step_check.py CACHE [--layout replicate|sequence]
        [--steps K] [--data-parallel D]

With --data-parallel D, the ranks are D rows of N / D tensor-parallel ranks
and the batch (2 sequences per row) is split over the rows.

Asserts on every rank, at every step: the loss within 1e-4 of autograd's
on the whole layer, each gradient this rank's part of autograd's, and after
the steps each parameter part this rank's part of the layer trained by
torch; and that the step keeps only its part of the parameters. Rank 0
prints one line per check.
"""
import argparse
import copy
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import braid.program  # noqa: E402
import braid.pytorch as bp  # noqa: E402
from test_hf import SEQ, config, decoder_layer, rotary  # noqa: E402
from test_training import mse, relative_error  # noqa: E402

TOLERANCE = 1e-4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("--layout", default="sequence")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--data-parallel", type=int, default=1)
    args = parser.parse_args()
    rank, ranks = braid.program.rank_and_size()

    def ok(what):
        if rank == 0:
            print("OK", what, flush=True)

    torch.manual_seed(0)
    c = config("Llama", ranks // args.data_parallel)
    layer = decoder_layer("Llama", c)
    batch = 1 if args.layout == "sequence" else 2 * args.data_parallel
    x = torch.randn(batch, SEQ, 64)
    target = torch.randn(batch, SEQ, 64)
    kwargs = {"position_embeddings": rotary(c, x)}
    twin = copy.deepcopy(layer)
    reference = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9)

    step = bp.train_step(layer, (x,), c.base_model_tp_plan, loss_fn=mse,
                         targets=(target,), input_layout=args.layout,
                         kwargs=kwargs, per_rank=True, cache=args.cache,
                         overlap="force", data_parallel=args.data_parallel)
    ok(f"{step!r}: {args.layout}")
    ours = torch.optim.SGD(step.parameters.values(), lr=0.1, momentum=0.9)

    def mine(name, whole):
        """This rank's part of a parameter-shaped `whole`."""
        return bp.grid_part(name, whole, step.parameters[name].shape, ranks,
                            rank, step._styles.get(name), step.exported.data)

    def rows(tensor):
        """This rank's rows of an activation under the layout."""
        if args.layout != "sequence":
            return tensor
        block = tensor.shape[-2] // ranks
        return tensor[..., rank * block:(rank + 1) * block, :].contiguous()

    for index in range(args.steps):
        loss, grads = step(rows(x), targets=(target,), **kwargs)
        reference.zero_grad()
        expected = mse(twin(x, **kwargs), target)
        expected.backward()
        assert relative_error(loss, expected.detach()) <= TOLERANCE, index
        assert sorted(grads) == sorted(step.parameters), sorted(grads)
        for name, parameter in twin.named_parameters():
            error = relative_error(grads[name], mine(name, parameter.grad))
            assert error <= TOLERANCE, (index, name, error)
        for name, part in step.parameters.items():
            part.grad = grads[name]
        ours.step()
        reference.step()
    ok(f"{args.steps} steps: losses and gradient parts as autograd's")

    for name, parameter in twin.named_parameters():
        got = step.parameters[name].detach()
        error = relative_error(got, mine(name, parameter.detach()))
        assert error <= TOLERANCE, (name, error)
    ok("parameter parts trained as torch trains the whole layer")

    whole = sum(p.numel() for p in layer.parameters())
    kept = sum(p.numel() for p in step.parameters.values())
    assert kept < whole, (kept, whole)
    ok(f"keeps {kept / whole:.2f} of the parameters' elements")


if __name__ == "__main__":
    main()
