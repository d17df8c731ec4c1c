#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs every test; exits
# non-zero on any failure. `.ci/run` calls this.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/setup.sh"

echo "== lit suite"
# -j: lit tests run MPI ranks of their own; two workers keep a 2-core
# machine responsive.
"/usr/lib/llvm-22/bin/lit" -sv -j "${BRAID_LIT_JOBS:-2}" "$BUILD/test"

echo "== generated docs are current"
"$ROOT/scripts/check-docs.sh"

echo "== all tests passed"
