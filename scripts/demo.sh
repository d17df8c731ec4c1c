#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs Braid's main job on the
# bundled example: a sequence-parallel transformer MLP on a 4-way grid in
# upstream `shard` form. Pass another .mlir file to use it instead.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
INPUT="${1:-$ROOT/examples/sp_mlp.mlir}"
"$ROOT/scripts/setup.sh" >/dev/null

OPT="$BUILD/bin/braid-opt"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "== Braid demo on ${INPUT#$ROOT/}"
echo "-- import from upstream shard, verify, list the collectives"
"$OPT" "$INPUT" --verify-each --mlir-print-op-on-diagnostic=false \
  --pass-pipeline='builtin.module(braid-import-shard,func.func(braid-list-collectives))' \
  -o "$WORK/dist.mlir" 2>"$WORK/remarks.txt" || { cat "$WORK/remarks.txt" >&2; exit 1; }
if grep -q 'shard\.\(all_\|reduce_scatter\|shift\|broadcast\)' "$WORK/dist.mlir"; then
  echo "error: shard collectives left after import" >&2
  exit 1
fi
echo "   verified; no shard collective left"
echo
printf '   %-6s %s\n' "line" "collective"
sed -n 's/^[^:]*:\([0-9]*\):[0-9]*: remark: \(.*\)$/\1\t\2/p' "$WORK/remarks.txt" |
  while IFS=$'\t' read -r line text; do printf '   %-6s %s\n' "$line" "$text"; done
echo
echo "-- the imported program, dist ops"
grep -E 'dist\.|func.func' "$WORK/dist.mlir" | sed 's/^  /   /'
