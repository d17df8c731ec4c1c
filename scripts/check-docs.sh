#!/usr/bin/env bash
# Fails when docs/Dialects or docs/Passes differ from what the .td files
# generate; `ninja -C build braid-doc` refreshes them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
ninja -C "$BUILD" mlir-doc >/dev/null
status=0
for generated in "$BUILD"/docs/Dialects/*.md; do
  name=$(basename "$generated")
  if ! cmp -s "$generated" "$ROOT/docs/Dialects/$name"; then
    echo "docs/Dialects/$name is stale: run 'ninja -C build braid-doc'" >&2
    status=1
  fi
done
for generated in "$BUILD"/docs/*.md; do
  name=$(basename "$generated")
  if ! cmp -s "$generated" "$ROOT/docs/Passes/$name"; then
    echo "docs/Passes/$name is stale: run 'ninja -C build braid-doc'" >&2
    status=1
  fi
done
exit $status
