#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs Braid's main job on the
# bundled example: a sequence-parallel transformer MLP on a 4-way grid in
# upstream `shard` form. Pass another .mlir file to use it instead.
#
#  1. import from upstream shard, verify, list the collectives found;
#  2. the cost model's overlap decisions for an H100 node, as a table, on
#     the example and on a Llama-3-70B layer at tensor parallelism 8
#     (examples/llama3_70b_layer_tp8.mlir);
#  3. compile for CPU ranks with every overlap schedule applied, run on 4
#     MPI ranks with --check against the program with collectives whole,
#     and write a timeline of the run (Chrome trace format);
#  4. a MoE block from Python (braid.models) on 4 ranks against numpy;
#  5. with the CUDA toolkit, the program compiled for the GPU (PTX, cuBLASLt);
#  6. with the frontends venv (scripts/setup-frontends.sh), a HuggingFace
#     LlamaModel under its shipped plan, TP and SP (examples/hf_llama.py).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
INPUT="${1:-$ROOT/examples/sp_mlp.mlir}"
"$ROOT/scripts/setup.sh" >/dev/null

BIN="$BUILD/bin"
PYTHON=/usr/bin/python3
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== Braid demo on ${INPUT#$ROOT/}"
echo
echo "-- 1. import from upstream shard, verify, list the collectives"
"$BIN/braid-opt" "$INPUT" --verify-each --mlir-print-op-on-diagnostic=false \
  --pass-pipeline='builtin.module(braid-import-shard,func.func(braid-list-collectives))' \
  -o "$WORK/dist.mlir" 2>"$WORK/remarks.txt" || { cat "$WORK/remarks.txt" >&2; exit 1; }
if grep -q 'shard\.\(all_\|reduce_scatter\|shift\|broadcast\)' "$WORK/dist.mlir"; then
  echo "error: shard collectives left after import" >&2
  exit 1
fi
echo "   verified; no shard collective left"
printf '   %-6s %s\n' "line" "collective"
sed -n 's/^[^:]*:\([0-9]*\):[0-9]*: remark: \(.*\)$/\1\t\2/p' "$WORK/remarks.txt" |
  while IFS=$'\t' read -r line text; do printf '   %-6s %s\n' "$line" "$text"; done

echo
echo "-- 2. overlap decisions of the cost model for an H100 node (target-preset=h100)"
"$BIN/braid-compile" "$INPUT" --emit=dist --target-preset=h100 \
  --report="$WORK/h100.json" -o "$WORK/h100.mlir" 2>/dev/null
"$PYTHON" "$ROOT/scripts/report_table.py" "$WORK/h100.json"
echo
echo "   the same on a Llama-3-70B layer, TP 8, 8192 tokens:"
"$BIN/braid-compile" "$ROOT/examples/llama3_70b_layer_tp8.mlir" --emit=dist \
  --target-preset=h100 --report="$WORK/llama.json" -o "$WORK/llama.mlir" 2>/dev/null
"$PYTHON" "$ROOT/scripts/report_table.py" "$WORK/llama.json"

echo
echo "-- 3. run on 4 CPU ranks: overlap=force against overlap=off (--check)"
"$BIN/braid-run" "$INPUT" --overlap=force --check \
  --report="$WORK/force.json" --trace="$WORK/trace.json" 2>/dev/null
"$PYTHON" "$ROOT/scripts/report_table.py" "$WORK/force.json"
mkdir -p "$ROOT/build/demo"
cp "$WORK/trace.json" "$ROOT/build/demo/trace.json"
echo "   timeline of the overlapped run: build/demo/trace.json (open it in"
echo "   https://ui.perfetto.dev or chrome://tracing)"

echo
echo "-- 4. from Python: an expert-parallel MoE block from braid.models on 4 ranks"
PYTHONPATH="$ROOT/python" "$PYTHON" - <<'PY'
import braid
from braid.models import Grid, MoE
block = MoE(Grid([4]), capacity=8, hidden=64, ffn=128, dtype="bf16")
artifact = braid.compile(block.mlir(), overlap="force")
inputs = block.random_inputs(seed=0)
outputs = artifact.run(inputs)
error = block.check(outputs, inputs)
for c in artifact.report["collectives"]:
    print(f"   {c['kind']:<11} {c['decision']:<6} {c.get('strategy', '')}")
print(f"   {artifact}: matches numpy (relative error {error:.2g})")
PY

# The cuda target needs the CUDA toolkit at configure time (braid-exec-cuda
# is built with it); the GPU itself is only needed to run.
if [[ -x "$BIN/braid-exec-cuda" ]]; then
  echo
  echo "-- 5. the same program for the GPU (--target=cuda, sm_90a): kernels, GEMMs"
  "$BIN/braid-compile" "$INPUT" --target=cuda --emit=ptx -o "$WORK/kernels.ptx" \
    2> "$WORK/cuda-remarks.txt"
  echo "   $(grep -c '\.entry' "$WORK/kernels.ptx") kernels in one PTX module ($(grep -m1 -o '\.target sm_[0-9a-z]*' "$WORK/kernels.ptx")), $(grep -c 'runs on cuBLASLt' "$WORK/cuda-remarks.txt") contractions on cuBLASLt:"
  grep -o 'runs on cuBLASLt.*' "$WORK/cuda-remarks.txt" | sort | uniq -c | sed 's/^ */   /'
  "$BIN/braid-compile" "$INPUT" --target=cuda -o "$WORK/program.so" 2>/dev/null
  echo "   run it with: braid-run --backend=cuda FILE.mlir (one process per GPU), or"
  echo "   braid-exec-cuda program.so --loopback=4 (4 ranks on one GPU, for measuring)"
fi

FRONTENDS_PYTHON="${BRAID_FRONTENDS_VENV:-$HOME/.cache/braid/frontends-venv}/bin/python"
echo
if [[ -x "$FRONTENDS_PYTHON" ]] && "$FRONTENDS_PYTHON" -c 'import torch_mlir, transformers' 2>/dev/null; then
  echo "-- 6. a HuggingFace LlamaModel (2 layers) under its shipped tensor-parallel plan"
  HF_HUB_OFFLINE=1 "$FRONTENDS_PYTHON" "$ROOT/examples/hf_llama.py" 2> "$WORK/hf.txt" ||
    { cat "$WORK/hf.txt" >&2; exit 1; }
else
  echo "-- 6. (skipped) HuggingFace models: scripts/setup-frontends.sh installs torch,"
  echo "   torch-mlir and transformers (~4.7 GB), then run examples/hf_llama.py"
fi
