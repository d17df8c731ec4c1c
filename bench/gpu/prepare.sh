#!/usr/bin/env bash
# Builds, on a development machine, everything bench/gpu/run_all.sh needs on
# a bare GPU machine (CUDA 13 toolkit and PyTorch, but no LLVM/MLIR and no
# network), into one git-ignored folder under 64 MiB:
#
#   bin/   braid-exec-cuda, braid-rt-cuda-selftest, microbench (nvcc, sm_90a)
#   lib/   libBraidRuntimeCUDA.so and the MPI libraries it links (runs on
#          the loopback transport never start MPI, but the loader wants them)
#   e2e/   the end-to-end programs of e2e_configs.txt, overlap forced and off
#   overlap/tp{8,4,2}/, overlap/collectives/tp{8,2}/, fusion/   the
#          benchmark programs (overlap.py for groups of 8, 4 and 2 ranks,
#          collectives.py for 8 and 2, fusion.py)
#
# CUDA, cuBLASLt and NCCL themselves are not carried: run_all.sh finds the
# GPU machine's own.
#
# Usage: bench/gpu/prepare.sh [BUNDLE]   (default: bench/gpu/artifacts)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUNDLE="${1:-$HERE/artifacts}"
PYTHON=/usr/bin/python3

"$ROOT/scripts/setup.sh"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
BIN="$BUILD/bin"
if [[ ! -x "$BIN/braid-exec-cuda" ]]; then
  echo "prepare.sh: $BIN/braid-exec-cuda is missing: Braid was configured without the CUDA toolkit" >&2
  exit 1
fi
NVCC="$(sed -n 's/^CUDAToolkit_NVCC_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")"
[[ -x "$NVCC" ]] || NVCC=/usr/local/cuda/bin/nvcc

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
cp "$BIN/braid-exec-cuda" "$BIN/braid-rt-cuda-selftest" "$BUNDLE/bin/"
cp "$BUILD/lib/libBraidRuntimeCUDA.so" "$BUNDLE/lib/"
ldd "$BIN/braid-exec-cuda" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libmpi.so*|libopen-rte.so*|libopen-pal.so*|libhwloc.so*|libevent*|libudev.so*)
      cp -L "$lib" "$BUNDLE/lib/" ;;
  esac
done

echo "prepare.sh: microbench"
"$NVCC" -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a \
  -o "$BUNDLE/bin/microbench" "$HERE/microbench.cu" -lcublasLt

echo "prepare.sh: end-to-end programs"
n=0
while read -r line; do
  [[ -z "$line" || "$line" == \#* ]] && continue
  n=$((n + 1))
  # shellcheck disable=SC2086
  "$PYTHON" "$ROOT/test/lib/e2e.py" --bin "$BIN" $line --target cuda \
    --build-only "$BUNDLE/e2e/$n" > /dev/null
done < "$HERE/e2e_configs.txt"
echo "prepare.sh: $n end-to-end configurations built"

"$PYTHON" "$HERE/overlap.py" prepare "$BUNDLE" --bin "$BIN"
"$PYTHON" "$HERE/collectives.py" prepare "$BUNDLE" --bin "$BIN"
"$PYTHON" "$HERE/fusion.py" prepare "$BUNDLE" --bin "$BIN"

size=$(du -sm "$BUNDLE" | cut -f1)
if ((size >= 64)); then
  echo "prepare.sh: the bundle is $size MiB, over the 64 MiB a GPU run can carry" >&2
  exit 1
fi
echo "prepare.sh: $BUNDLE ready ($size MiB); on the GPU machine run bench/gpu/run_all.sh RESULTS"
