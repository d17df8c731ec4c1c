#!/usr/bin/env bash
# Times braid-opt import against parse+verify+print on 1, 10 and 100 layers.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exec /usr/bin/python3 "$ROOT/bench/import/bench.py" --braid-opt "$ROOT/build/bin/braid-opt" "$@"
