#!/usr/bin/env bash
# Shared set-up for scripts/demo.sh and scripts/test.sh: installs what is
# missing from Debian's archive, then configures and builds Braid into
# build/ (tools in build/bin/). Idempotent: a second run reuses the build.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
LLVM_PREFIX=/usr/lib/llvm-22

PACKAGES=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  cmake ninja-build ccache g++
  openmpi-bin libopenmpi-dev libdnnl-dev libopenblas0-pthread
  python3 python3-numpy python3-pytest python3-venv python3-setuptools
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "braid setup: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "braid setup: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# Debian's Python with python3-numpy runs the numpy references and tests;
# never whatever python3 happens to be first on PATH.
PYTHON=/usr/bin/python3

JOBS="${BRAID_JOBS:-$(nproc)}"
# ccache hashes paths relative to the checkout, so that another clone on
# the same machine (a fresh clone for scripts/test.sh) reuses the objects
# this one compiled instead of building everything again.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" \
    -DBRAID_PYTHON="$PYTHON" \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
ninja -C "$BUILD" -j "$JOBS"
