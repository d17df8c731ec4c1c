#!/usr/bin/env python3
"""Front-door compile time of HuggingFace models at their real shapes.

For each piece, built from a transformers config with its shipped
tensor-parallel plan (no weights are computed with: parameters are
allocated and never touched, so a 32-layer Llama-3-8B needs about 1 GB):

  export   torch.export + torch-mlir's FX importer to linalg (braid.pytorch),
           and the plan written as braid.parallel attributes;
  import   braid-prepare-import, braid-apply-parallel-plan and
           braid-import-shard (propagation and partitioning), pass work
           from --mlir-timing (parsing and printing excluded);
  compile  braid-compile to a shared library for CPU ranks (the whole
           pipeline with the h100 cost model preset, LLVM codegen and the
           link), wall time of the tool.

Pieces: LlamaModel at Llama-3-8B shapes (hidden 4096, 32 heads, 8 KV heads,
FFN 14336) with 1, 8 and 32 layers, TP 8, bf16, 4096 tokens; decoder layers
of Llama, Qwen2, Qwen3, Mistral, Gemma and Phi-3 at the same shapes, TP 8
and SP 8; Mixtral and Qwen3-MoE sparse blocks (8 experts, top 2, FFN 14336
and 1536) under the shipped plan and expert parallel; GPT-2's MLP and
block at GPT-2 shapes. Not a test: compile only, nothing runs.

Usage (the frontends venv: scripts/setup-frontends.sh):
  ~/.cache/braid/frontends-venv/bin/python bench/frontends/run.py \
      [--only llama] [--layers 1,8,32] [--bin build/bin]
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import braid.pytorch as bp  # noqa: E402

# The --mlir-timing parser of bench/compile/run.py (both scripts are run.py).
_spec = importlib.util.spec_from_file_location(
    "bench_compile_run", os.path.join(ROOT, "bench", "compile", "run.py"))
_compile_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compile_bench)
pass_seconds = _compile_bench.pass_seconds

TP = 8
TOKENS = 4096
LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=128,
                 vocab_size=128256, max_position_embeddings=8192)
IMPORT = ("builtin.module(braid-prepare-import,braid-apply-parallel-plan,"
          "braid-import-shard)")


def untouched(build):
    """Builds a module on the meta device and gives it CPU storage that is
    never written: allocated but not resident."""
    with torch.device("meta"):
        module = build()
    return module.to_empty(device="cpu").to(torch.bfloat16).eval()


def config(kind, **extra):
    fields = dict(LLAMA3_8B)
    fields.update(extra)
    c = getattr(transformers, kind + "Config")(**fields)
    c._attn_implementation = "sdpa"
    return c


def rotary(c, x):
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
    rope = LlamaRotaryEmbedding(c)
    positions = torch.arange(x.shape[1]).unsqueeze(0)
    cos, sin = rope(x, positions)
    return cos.to(x.dtype), sin.to(x.dtype)


def activation(hidden):
    return torch.randn(1, TOKENS, hidden, dtype=torch.bfloat16)


def llama_model(layers):
    c = config("Llama", num_hidden_layers=layers)
    model = untouched(lambda: transformers.LlamaModel(c))
    kwargs = {"inputs_embeds": activation(4096), "use_cache": False}
    return model, (), kwargs, c.base_model_tp_plan, "replicate"


def decoder_layer(kind, layout):
    c = config(kind, num_hidden_layers=1)
    module = __import__(f"transformers.models.{kind.lower()}.modeling_"
                        f"{kind.lower()}", fromlist=["_"])
    cls = getattr(module, kind + "DecoderLayer")
    layer = untouched(lambda: cls(c, 0))
    x = activation(4096)
    return (layer, (x,), {"position_embeddings": rotary(c, x)},
            c.base_model_tp_plan, layout)


def moe_block(kind, parallel):
    ffn = 14336 if kind == "Mixtral" else 1536
    c = config(kind, num_hidden_layers=1, num_local_experts=8,
               num_experts=8, num_experts_per_tok=2, intermediate_size=ffn,
               moe_intermediate_size=ffn)
    c._experts_implementation = "batched_mm"
    path = {"Mixtral": "mixtral", "Qwen3Moe": "qwen3_moe"}[kind]
    module = __import__(f"transformers.models.{path}.modeling_{path}",
                        fromlist=["_"])
    cls = getattr(module, kind + "SparseMoeBlock")
    block = untouched(lambda: cls(c))
    plan = c.base_model_tp_plan if parallel == "tp" else c.base_model_ep_plan
    return block, (activation(4096),), None, plan, "replicate"


def gpt2(piece):
    from transformers.models.gpt2 import modeling_gpt2
    c = transformers.GPT2Config()          # GPT-2 small: 768, 12 heads
    c._attn_implementation = "sdpa"
    if piece == "mlp":
        module = untouched(lambda: modeling_gpt2.GPT2MLP(4 * 768, c))
        plan = {"c_fc": "colwise", "c_proj": "rowwise"}
    else:
        module = untouched(lambda: modeling_gpt2.GPT2Block(c))
        plan = {"attn.c_attn": "colwise", "attn.c_proj": "rowwise",
                "mlp.c_fc": "colwise", "mlp.c_proj": "rowwise"}
    return module, (activation(768),), None, plan, "replicate"


def pieces(only, layer_counts):
    for n in layer_counts:
        yield f"LlamaModel {n} layers, TP", lambda n=n: llama_model(n)
    for kind in ("Llama", "Qwen2", "Qwen3", "Mistral", "Gemma", "Phi3"):
        for layout, name in (("replicate", "TP"), ("sequence", "SP")):
            yield (f"{kind}DecoderLayer, {name}",
                   lambda k=kind, l=layout: decoder_layer(k, l))
    for kind in ("Mixtral", "Qwen3Moe"):
        for parallel in ("tp", "ep"):
            yield (f"{kind}SparseMoeBlock, {parallel.upper()}",
                   lambda k=kind, p=parallel: moe_block(k, p))
    yield "GPT2MLP, TP", lambda: gpt2("mlp")
    yield "GPT2Block, TP", lambda: gpt2("block")


def measure(name, build, tools, tmp):
    module, args, kwargs, plan, layout = build()
    start = time.perf_counter()
    exported, text, _, _ = bp.to_mlir(module, args, plan, ranks=TP,
                                      input_layout=layout, kwargs=kwargs)
    export_s = time.perf_counter() - start
    del module
    path = os.path.join(tmp, "piece.mlir")
    with open(path, "w") as f:
        f.write(text)
    run = subprocess.run(
        [os.path.join(tools, "braid-opt"), path, f"--pass-pipeline={IMPORT}",
         "--mlir-timing", "--mlir-timing-display=list", "-o", os.devnull],
        capture_output=True, text=True)
    if run.returncode:
        return name, export_s, None, None, run.stderr.strip().splitlines()[0]
    import_s = pass_seconds(run.stderr)[0]
    start = time.perf_counter()
    report = os.path.join(tmp, "report.json")
    run = subprocess.run(
        [os.path.join(tools, "braid-compile"), path, "--target-preset=h100",
         f"--report={report}", "-o", os.path.join(tmp, "piece.so")],
        capture_output=True, text=True)
    compile_s = time.perf_counter() - start
    if run.returncode:
        return name, export_s, import_s, None, run.stderr.strip().splitlines()[0]
    with open(report) as f:
        collectives = json.load(f)["collectives"]
    fused = sum(c["decision"] != "kept" for c in collectives)
    ops = text.count("linalg.")
    return (name, export_s, import_s, compile_s,
            f"{ops} linalg ops, {len(collectives)} collectives "
            f"({fused} overlapped)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--layers", default="1,8,32")
    parser.add_argument("--only", default="",
                        help="run the pieces whose name contains this")
    args = parser.parse_args()
    counts = [int(n) for n in args.layers.split(",") if n]
    print(f"{'piece':<32} {'export s':>9} {'import s':>9} {'compile s':>10}  note")
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in pieces(args.only, counts):
            if args.only.lower() not in name.lower():
                continue
            name, export_s, import_s, compile_s, note = measure(
                name, build, args.bin, tmp)
            failed |= compile_s is None

            def cell(value, width):
                return f"{value:>{width}.2f}" if value is not None else \
                    f"{'failed':>{width}}"
            print(f"{name:<32} {cell(export_s, 9)} {cell(import_s, 9)} "
                  f"{cell(compile_s, 10)}  {note}", flush=True)
    print(f"TP {TP}, {TOKENS} tokens, bf16; export: torch-mlir; import: pass "
          "work of prepare-import + apply-parallel-plan + import-shard; "
          "compile: braid-compile to a .so (cpu target, h100 preset).")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
