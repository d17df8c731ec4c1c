#!/usr/bin/env bash
#===- scripts/setup-frontends.sh - The PyTorch front door's Python ---------===#
#
# Creates (idempotently) the virtual environment in which braid.pytorch runs:
# torch, torch-mlir and HuggingFace transformers from PyPI, pinned, plus
# pytest for its tests.
#
#   scripts/setup-frontends.sh            # prints the venv's python at the end
#   BRAID_FRONTENDS_VENV=DIR scripts/setup-frontends.sh
#
# The venv lives outside the checkout (default ~/.cache/braid/frontends-venv)
# so that clean clones share it: it is about 4.7 GB.
#
# Why these pins (docs/rationale/frontends.md, "The PyTorch front door"):
#  - torch-mlir publishes one wheel on PyPI, 20261001 (built on LLVM
#    24.0.0git; the linalg-on-tensors text it prints parses with MLIR 22).
#    Its metadata names no torch version; torch 2.15.0 is the stable release
#    of the same month and works with its FX importer.
#  - PyPI has no CPU-only torch for Linux x86_64: the wheel is the CUDA 13.2
#    build and its libraries (libtorch_cpu.so too) link the CUDA runtime, so
#    the nvidia-* wheels it links against are needed even on CPU. Everything
#    is installed with --no-deps so that triton and other GPU-only packages
#    (about 1 GB) stay out.
#  - transformers 5.23.0 (the models and plans the front door is tested
#    with) with only the packages it imports to build models from configs
#    offline: huggingface-hub 2.x and its httpx2 stack, safetensors, regex,
#    pyyaml, tqdm. tokenizers is not needed for that and stays out.
set -euo pipefail

VENV="${BRAID_FRONTENDS_VENV:-$HOME/.cache/braid/frontends-venv}"
BASE_PYTHON=/usr/bin/python3   # Debian's; not whichever python3 is first on PATH

TORCH=torch==2.15.0
TORCH_MLIR=torch-mlir==20261001
PACKAGES=(
  "$TORCH" "$TORCH_MLIR"
  filelock==4.3.1 typing_extensions==4.16.0 setuptools==84.2.1 sympy==1.14.0
  mpmath==1.3.0 networkx==3.6.1 Jinja2==3.1.6 MarkupSafe==3.0.4
  fsspec==2026.9.0 numpy==2.4.6 packaging==26.4
  # The shared libraries torch's own link against (readelf -d: NEEDED).
  nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86
  nvidia-cuda-nvrtc==13.2.86 nvidia-cublas==13.4.1.3 nvidia-cufft==12.2.0.57
  nvidia-cufile==1.17.1.22 nvidia-cusolver==12.2.0.11
  nvidia-cusparse==12.7.10.12 nvidia-nvjitlink==13.5.37 nvidia-nvtx==13.2.86
  nvidia-cudnn-cu13==9.26.0.51 nvidia-cusparselt-cu13==0.8.1
  nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2
  # HuggingFace transformers, for models built from configs (no downloads).
  transformers==5.23.0 huggingface-hub==2.4.0 safetensors==0.8.0
  regex==2026.11.15 pyyaml==6.0.3 tqdm==4.70.1 httpx2==2.16.2
  httpcore2==2.16.2 h11==0.16.0 idna==3.20 truststore==0.10.5
  # Tests.
  pytest==9.2.0 iniconfig==2.3.1 pluggy==1.7.0 pygments==2.21.0
)

ready() {
  [[ -x "$VENV/bin/python" ]] || return 1
  "$VENV/bin/python" - <<'PY' 2>/dev/null
import importlib.metadata as md
import torch, torch_mlir.fx, pytest, numpy  # noqa: F401  (imports prove the libraries load)
import transformers  # noqa: F401
assert md.version("transformers") == "5.23.0"
assert torch.__version__.split("+")[0] == "2.15.0", torch.__version__
assert md.version("torch-mlir") == "20261001"
assert md.version("pytest") == "9.2.0"
PY
}

if ! ready; then
  echo "== creating the frontends venv at $VENV (torch, torch-mlir; ~4.7 GB)" >&2
  mkdir -p "$(dirname "$VENV")"
  [[ -x "$VENV/bin/python" ]] || "$BASE_PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps \
    --no-cache-dir "${PACKAGES[@]}" >&2
  ready || { echo "error: $VENV does not import torch and torch_mlir" >&2; exit 1; }
fi
echo "$VENV/bin/python"
