#!/usr/bin/env bash
# Runs Braid's GPU checks and benchmarks on a machine with one NVIDIA GPU
# (an H200), from what bench/gpu/prepare.sh built: no LLVM, MLIR or network
# needed; CUDA 13 (cudart, cuBLASLt), NCCL and PyTorch come from the machine.
# Within about 8 minutes:
#   1. the end-to-end suite on the GPU against numpy references (loopback
#      transport with 4 and 8 ranks, NCCL with 1 rank);
#   2. microbench: GEMM with a cuBLASLt epilogue against bare GEMM and GEMM +
#      a separate kernel; device-to-device copy bandwidth;
#   3. overlap.py: AllGather+GEMM and GEMM+ReduceScatter at Llama-70B TP8
#      shapes on 8 loopback ranks: T_gemm, T_comm, T_serial, T_fused, R, E;
#   4. fusion.py and torch_fusion.py: fused layernorm, RMSNorm, softmax and
#      bias + GELU + residual against PyTorch eager and torch.compile.
# Figures go to RESULTS as JSON; the table comes last.
#
# Usage: bench/gpu/run_all.sh RESULTS [BUNDLE]   (default: bench/gpu/artifacts)
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RESULTS="${1:?usage: run_all.sh RESULTS [BUNDLE]}"
BUNDLE="${2:-$HERE/artifacts}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1

if [[ ! -x "$BUNDLE/bin/braid-exec-cuda" ]]; then
  echo "run_all.sh: no $BUNDLE/bin/braid-exec-cuda: run bench/gpu/prepare.sh on a development machine first" >&2
  exit 1
fi

# The machine's CUDA runtime, cuBLAS(Lt) and NCCL: the toolkit's, or the
# ones PyTorch's wheels carry.
libdirs="$BUNDLE/lib"
for name in libcudart.so.13 libcublasLt.so.13 libcublas.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib \
            -name "$name" 2>/dev/null | head -n 1)
  if [[ -z "$found" ]]; then
    echo "run_all.sh: $name not found on this machine" >&2
    exit 1
  fi
  libdirs="$libdirs:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || true

status=0

echo "== 1. end-to-end suite on the GPU"
n=0 passed=0 failed=0
while read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  if timeout 120 "$PYTHON" "$ROOT/test/lib/e2e.py" --bin "$BUNDLE/bin" $line \
       --target cuda --prebuilt "$BUNDLE/e2e/$n" --seed "$n" \
       >> "$RESULTS/e2e.log" 2>&1; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $line (see e2e.log)"
  fi
done < "$HERE/e2e_configs.txt"
grep -E "^(PASS|FAIL)" "$RESULTS/e2e.log" || true
echo "{\"configurations\": $n, \"passed\": $passed, \"failed\": $failed}" > "$RESULTS/e2e.json"
((failed == 0)) || status=1

echo "== 2. microbench"
timeout 150 "$BUNDLE/bin/microbench" "$RESULTS/microbench.json" || status=1

echo "== 3. overlap"
timeout 150 "$PYTHON" "$HERE/overlap.py" run "$BUNDLE" "$RESULTS" || status=1

echo "== 4. memory-bound fusion"
timeout 90 "$PYTHON" "$HERE/fusion.py" run "$BUNDLE" "$RESULTS" || status=1
timeout 150 "$PYTHON" "$HERE/torch_fusion.py" "$RESULTS/torch_fusion.json" \
  --braid-times "$RESULTS/braid_times.json" || status=1

echo "== summary"
"$PYTHON" "$HERE/summarize.py" "$RESULTS" || status=1
exit $status
