"""torch.compile(model, backend="braid") as a job uses it: run under mpirun
in the frontends venv, every rank builds the same HuggingFace Llama
decoder layer (random weights, the same seed), parallelizes it with
PyTorch's own parallelize_module (DTensor, gloo, a 1-D mesh of the world)
under the tensor-parallel plan (or sequence parallel: the norms
SequenceParallel, the projections taking and giving sequence shards), and
compiles it with Braid's backend, against the eager DTensor module.

    mpirun -np N python compile_backend_check.py CACHE
        [--parallel tp|sp] [--dtype f32|bf16] [--calls K] [--unsupported local|op]
        [--mesh 1d|2d]

--mesh 2d builds a (2, N / 2) mesh ("dp", "tp") and parallelizes the layer
on mesh["tp"]: each row of ranks its own tensor-parallel group with its
own input, which Braid runs on a communicator split from the world.

Asserts on every rank: the backend compiled the graph (no fallback
warning), each call within the module tolerance of eager DTensor, repeated
calls bit-identical. --unsupported compiles a module whose local code
reduces over a sharded dimension (local: a sum of the colwise projection's
local output, which is not the unpartitioned computation) or that sorts
(op: Braid does not compile sorts), is called with gradients enabled
(grad): it must run eagerly, with one warning that says why, and give
eager's result (with its autograd graph, under grad). Rank 0 prints one
line per check.
"""
import argparse
import ctypes
import os
import sys
import warnings

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import transformers  # noqa: E402

import braid.program  # noqa: E402
import braid.pytorch  # noqa: E402,F401  (registers the backend)
import braid.torch_backend  # noqa: E402
from test_hf import SEQ, config, decoder_layer, module_tolerance, rotary  # noqa: E402


def llama_plan(parallel):
    """A decoder layer's plan in PyTorch's own styles: tensor parallel
    ("tp"), or sequence parallel ("sp")."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel,
                                                   SequenceParallel)
    if parallel == "tp":
        plan = {name: ColwiseParallel() for name in
                ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                 "mlp.gate_proj", "mlp.up_proj")}
        plan.update({name: RowwiseParallel() for name in
                     ("self_attn.o_proj", "mlp.down_proj")})
        return plan
    # Megatron's sequence parallelism as torchtitan writes it.
    plan = {"input_layernorm": SequenceParallel(),
            "post_attention_layernorm": SequenceParallel()}
    plan.update({name: ColwiseParallel(input_layouts=Shard(1)) for name in
                 ("mlp.gate_proj", "mlp.up_proj")})
    plan.update({name: ColwiseParallel() for name in
                 ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")})
    plan.update({name: RowwiseParallel(output_layouts=Shard(1)) for name in
                 ("self_attn.o_proj", "mlp.down_proj")})
    return plan


class Unsupported(torch.nn.Module):
    """"local": local code that is not the unpartitioned computation (the
    colwise projection's local output summed over its sharded features);
    "op": an op Braid does not compile (a sort); "grad": an MLP called with
    gradients enabled (the backend compiles inference)."""

    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 64)

    def forward(self, x):
        if self.kind == "op":
            return self.down(torch.relu(self.up(torch.sort(x, dim=-1).values)))
        if self.kind == "grad":
            return self.down(torch.relu(self.up(x)))
        return x * self.up(x).sum(-1, keepdim=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cache")
    parser.add_argument("--parallel", default="tp")
    parser.add_argument("--dtype", default="f32")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--module", default="layer", choices=("layer", "model"))
    parser.add_argument("--unsupported", choices=("local", "op", "grad"))
    parser.add_argument("--mesh", default="1d", choices=("1d", "2d"))
    args = parser.parse_args()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel,
                                                   RowwiseParallel,
                                                   parallelize_module)

    if args.mesh == "2d":
        # Braid's runtime starts on the row's communicator, not the world.
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
    else:
        rank, world = braid.program.rank_and_size()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29400 + os.getppid() % 500))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    if args.mesh == "2d":
        grid = init_device_mesh("cpu", (2, world // 2),
                                mesh_dim_names=("dp", "tp"))
        mesh, ranks = grid["tp"], world // 2
    else:
        mesh, ranks = init_device_mesh("cpu", (world,)), world
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[args.dtype]

    def ok(what):
        if rank == 0:
            print("OK", what, flush=True)

    torch.manual_seed(0)
    if args.unsupported:
        module = Unsupported(args.unsupported).eval().to(dtype)
        module = parallelize_module(module, mesh, {"up": ColwiseParallel(),
                                                   "down": RowwiseParallel()})
        x = torch.randn(2, SEQ, 64).to(dtype)
        call_args, kwargs = (x,), {}
    elif args.module == "model":
        # A whole 2-layer LlamaModel from token ids, tensor parallel: its
        # causal mask sends attention through repeat_kv, whose expand and
        # reshape dynamo writes with the local KV head count (refitted).
        c = config("Llama", ranks)
        module = transformers.LlamaModel(c).eval().to(dtype)
        plan = {f"layers.{i}.{k}": v for i in range(c.num_hidden_layers)
                for k, v in llama_plan("tp").items()}
        module = parallelize_module(module, mesh, plan)
        call_args = ()
        kwargs = {"input_ids": torch.randint(0, 128, (2, SEQ)),
                  "use_cache": False}
    else:
        c = config("Llama", ranks)
        module = decoder_layer("Llama", c).eval().to(dtype)
        module = parallelize_module(module, mesh, llama_plan(args.parallel))
        if args.mesh == "2d":       # each row its own input
            torch.manual_seed(100 + rank // ranks)
        x = torch.randn(1 if args.parallel == "sp" else 2, SEQ, 64).to(dtype)
        tables = rotary(c, x)
        if args.parallel == "sp":   # this rank's rows
            rows = SEQ // ranks
            local = mesh.get_local_rank()
            x = x[:, local * rows:(local + 1) * rows].contiguous()
        call_args, kwargs = (x,), {"position_embeddings": tables}

    compiled = torch.compile(module, backend="braid",
                             options={"cache": args.cache, "overlap": "force"})

    def output(value):
        if hasattr(value, "last_hidden_state"):
            value = value.last_hidden_state
        return value[0] if isinstance(value, tuple) else value

    grad = torch.enable_grad() if args.unsupported == "grad" else torch.no_grad()
    with warnings.catch_warnings(record=True) as caught, grad:
        warnings.simplefilter("always")
        expected = output(module(*call_args, **kwargs))
        first = None
        for call in range(args.calls):
            got = output(compiled(*call_args, **kwargs))
            assert got.shape == expected.shape, (got.shape, expected.shape)
            error = ((got.float() - expected.float()).abs().max() /
                     expected.float().abs().max()).item()
            assert error <= module_tolerance(dtype), (call, error)
            if call >= 1:   # the first call is the eager graph's (checked)
                if first is None:
                    first = got
                assert torch.equal(got.detach(), first.detach()), call
    if args.unsupported == "grad":
        assert got.requires_grad
    ours = [str(w.message) for w in caught if "braid" in str(w.message)]
    if args.unsupported:
        assert len(ours) == 1, ours
        if args.unsupported == "op" and rank != 0:
            assert "rank 0 could not compile the program" in ours[0], ours
        ok(f"falls back: {ours[0]}")
    else:
        assert not ours, ours
        graphs = braid.torch_backend.GRAPHS
        assert graphs and all(g.reason is None and g.calls == args.calls
                              for g in graphs), graphs
        ok(f"{len(graphs)} graph(s) run by Braid in process: {graphs[0]!r}")
        program = graphs[0].program
        assert program.size == ranks, (program.size, ranks)
        ok(f"compiled by Braid: {args.module} {args.parallel} {args.dtype}, "
           f"{args.mesh} mesh, {ranks} ranks per program, {args.calls} calls "
           "within the module tolerance of eager DTensor, bit-identical")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Without interpreter teardown: gloo's worker threads outlive
    # destroy_process_group and may release a tensor (the grad case keeps
    # autograd graphs) after Python finalized, which aborted the process
    # ("terminate called without an active exception") after the checks
    # had passed, once in a clean-clone run. MPI is finalized first, as
    # the runtime's exit handler would (it stops Braid's communication
    # thread inside MPI_Finalize).
    sys.stdout.flush()
    sys.stderr.flush()
    mpi = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
    done = ctypes.c_int(0)
    if mpi.MPI_Finalized(ctypes.byref(done)) == 0 and not done.value:
        mpi.MPI_Finalize()
    os._exit(0)
