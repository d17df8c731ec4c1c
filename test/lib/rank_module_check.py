"""braid.pytorch.parallelize(..., per_rank=True) as a job uses it: run under
mpirun in the frontends venv, every rank builds the same HuggingFace module
(random weights, the same seed), parallelizes it under the plan
transformers ships, and calls its RankModule with its own part of the
input, against the unpartitioned module.

    mpirun -np N python program.py CACHE --module layer|model|moe
        [--layout replicate|sequence] [--dtype f32|bf16] [--calls K]

`--module moe` is a Mixtral MoE block with expert_parallel=2: a 2 x (N/2)
grid, the experts split over its rows and their features over each row.

Asserts on every rank: each call within the module tolerance of the
module's own output (this rank's part: its rows under the sequence layout),
repeated calls bit-identical, resident memory flat, a whole global input
cut to the rank's part giving the same result, and that the RankModule
keeps only its part of each weight. Rank 0 prints one line per check.
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
import transformers  # noqa: E402

import braid.program  # noqa: E402
import braid.pytorch as bp  # noqa: E402
from program_check import resident_bytes  # noqa: E402
from test_hf import (SEQ, config, decoder_layer, module_tolerance,  # noqa: E402
                     relative_error, rotary, sparse_moe)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("--module", default="layer")
    parser.add_argument("--layout", default="sequence")
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    rank, ranks = braid.program.rank_and_size()

    def ok(what):
        if rank == 0:
            print("OK", what, flush=True)

    torch.manual_seed(0)
    c = config("Llama", ranks)
    batch = 1 if args.layout == "sequence" else 2
    x = torch.randn(batch, SEQ, 64).to(dtype)
    options = {}
    if args.module == "layer":
        module = decoder_layer("Llama", c).eval().to(dtype)
        call_args, kwargs = (x,), {"position_embeddings": rotary(c, x)}
    elif args.module == "moe":
        c, module = sparse_moe("Mixtral", ranks, experts=4)
        module = module.to(dtype)
        call_args, kwargs = (x,), None
        options["expert_parallel"] = 2
    else:
        module = transformers.LlamaModel(c).eval().to(dtype)
        call_args, kwargs = (), {"inputs_embeds": x, "use_cache": False}
    with torch.no_grad():
        expected = module(*call_args, **(kwargs or {}))
    if hasattr(expected, "last_hidden_state"):
        expected = expected.last_hidden_state
    if isinstance(expected, tuple):
        expected = expected[0]

    tp = bp.parallelize(module, call_args, c.base_model_tp_plan,
                        input_layout=args.layout, kwargs=kwargs, per_rank=True,
                        cache=args.cache, overlap="force", **options)
    ok(f"{tp!r}: {type(module).__name__} {args.layout} {args.dtype}")

    def mine(tensor):
        """This rank's part of a global activation."""
        if args.layout != "sequence":
            return tensor
        rows = tensor.shape[-2] // ranks
        return tensor[..., rank * rows:(rank + 1) * rows, :].contiguous()

    def output(value):
        if hasattr(value, "last_hidden_state"):
            value = value.last_hidden_state
        return value[0] if isinstance(value, tuple) else value

    # This rank's parts of the activations, as a job holds them (the rotary
    # tables stay whole: every rank takes them whole).
    part_args = tuple(mine(a) for a in call_args)
    part_kwargs = {k: mine(v) if k == "inputs_embeds" else v
                   for k, v in (kwargs or {}).items()}
    want = mine(expected)
    first, resident = None, {}
    for call in range(args.calls):
        if call in (10, args.calls - 1):
            resident[call] = resident_bytes()
        got = output(tp(*part_args, **part_kwargs))
        assert got.shape == want.shape, (got.shape, want.shape)
        error = relative_error(got, want)
        assert error <= module_tolerance(dtype), (call, error)
        if first is None:
            first = got
        else:
            assert torch.equal(got, first), call
    ok(f"{args.calls} calls within the module tolerance of the module, bit-identical")
    growth = resident[args.calls - 1] - resident[10]
    assert growth < 256 << 10, f"resident memory grew by {growth} bytes"
    ok("resident memory flat over the calls")

    assert torch.equal(output(tp(*call_args, **(kwargs or {}))), first)
    ok("a whole input is cut to the rank's part")

    whole = sum(p.numel() for p in module.parameters())
    kept = sum(w.numel() for w in tp._weights)
    assert kept < whole, (kept, whole)
    ok(f"keeps {kept / whole:.2f} of the weights' elements")


if __name__ == "__main__":
    main()
