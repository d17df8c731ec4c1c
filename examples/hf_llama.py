"""A HuggingFace LlamaModel (2 layers, random weights) under the
tensor-parallel plan transformers ships, on 4 CPU ranks: tensor parallel
(replicated activations) and sequence parallel ([batch, seq, hidden] split
along seq), each compared with the model itself.

    ~/.cache/braid/frontends-venv/bin/python examples/hf_llama.py

(scripts/setup-frontends.sh makes the venv; scripts/demo.sh runs this when
it exists.)"""
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "python"))

import torch  # noqa: E402
import transformers  # noqa: E402

import braid.pytorch  # noqa: E402

RANKS = 4
config = transformers.LlamaConfig(
    hidden_size=256, intermediate_size=768, num_attention_heads=8,
    num_key_value_heads=4, num_hidden_layers=2, vocab_size=1024,
    max_position_embeddings=128)
config._attn_implementation = "sdpa"
torch.manual_seed(0)
model = transformers.LlamaModel(config).eval()
plan = config.base_model_tp_plan          # "layers.*.self_attn.q_proj": ...

for layout, batch in (("replicate", 2), ("sequence", 1)):
    x = torch.randn(batch, 32, config.hidden_size)
    kwargs = {"inputs_embeds": x, "use_cache": False}
    tp = braid.pytorch.parallelize(model, (), plan, ranks=RANKS,
                                   input_layout=layout, kwargs=kwargs,
                                   overlap="force")
    with torch.no_grad():
        got = tp(**kwargs).last_hidden_state
        expected = model(**kwargs).last_hidden_state
    error = ((got - expected).abs().max() / expected.abs().max()).item()
    print(f"   {layout} ({'TP' if layout == 'replicate' else 'SP'}), "
          f"{RANKS} ranks: relative error {error:.1e}")
    for c in tp.artifact.report["collectives"]:
        print(f"     {c['kind']:<15} {c['decision']:<6} "
              f"{c.get('strategy') or ''}")
    assert error < 1e-4, error
