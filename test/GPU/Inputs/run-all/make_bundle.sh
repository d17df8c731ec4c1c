#!/usr/bin/env bash
# Builds the bundle run-all-dry.test runs run_all.sh on: Braid's real
# runner behind fake_runner.sh, the real runtime and self-test, the
# end-to-end programs of CONFIGS built for real (their kernels as PTX, for
# the emulated device the test runs them on), the overlap programs built
# for real, empty collectives and fusion programs (fake_runner.sh times
# them), and the fake microbench, nvidia-smi and python.
# Usage: make_bundle.sh BIN LIB CONFIGS BUNDLE
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
BIN=$1 LIB=$2 CONFIGS=$3 BUNDLE=$4
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/fusion/small" "$BUNDLE/fusion/full"
cp "$BIN/braid-exec-cuda" "$BUNDLE/bin/braid-exec-cuda.real"
cp "$BIN/braid-rt-cuda-selftest" "$BUNDLE/bin/"
cp "$LIB/libBraidRuntimeCUDA.so" "$BUNDLE/lib/"
cp "$HERE/fake_runner.sh" "$BUNDLE/bin/braid-exec-cuda"
cp "$HERE/fake_microbench.sh" "$BUNDLE/bin/microbench"
cp "$HERE/fake_nvidia_smi.sh" "$BUNDLE/bin/nvidia-smi"
cp "$HERE/fake_python.sh" "$BUNDLE/bin/python"
chmod +x "$BUNDLE/bin/"*
n=0
while read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  /usr/bin/python3 "$ROOT/test/lib/e2e.py" --bin "$BIN" ${line/--transport nccl-file/} \
    --target cuda --emulate --build-only "$BUNDLE/e2e/$n" > /dev/null
done < "$CONFIGS"
/usr/bin/python3 "$ROOT/bench/gpu/overlap.py" prepare "$BUNDLE" --bin "$BIN" > /dev/null
/usr/bin/python3 "$ROOT/bench/gpu/collectives.py" prepare "$BUNDLE" --placeholders > /dev/null
for name in layernorm rmsnorm softmax bias_gelu_residual gemm_bias_gelu; do
  : > "$BUNDLE/fusion/small/$name.so"
  : > "$BUNDLE/fusion/full/$name.so"
done
