#!/usr/bin/env bash
#===- scripts/stress-tests.sh - Repeat the MPI tests to find flaky ones ----===#
#
# Part of Braid.
#
#===------------------------------------------------------------------------===#
#
#   scripts/stress-tests.sh [N] [FILTER]
#
# Runs every lit test that starts MPI ranks (mpirun, braid-run, braid-exec,
# the end-to-end drivers) N times (default 10), each round in a fresh
# shuffled order with BRAID_LIT_JOBS workers (default 2, so that both cores
# are busy and concurrent jobs meet, as in scripts/test.sh). FILTER, a
# regular expression, narrows the tests (lit's --filter). Prints each
# round's failures and a summary: every failing test and how many rounds it
# failed in. Exits 1 if any round failed. Needs a build (scripts/setup.sh).
#
#===------------------------------------------------------------------------===#
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BRAID_BUILD_DIR:-$ROOT/build}"
ROUNDS="${1:-10}"
FILTER="${2:-.*}"
JOBS="${BRAID_LIT_JOBS:-2}"
LIT=/usr/lib/llvm-22/bin/lit

[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || {
  echo "stress-tests.sh: N must be a positive integer, got '$ROUNDS'" >&2
  exit 2
}
[[ -f "$BUILD/test/lit.site.cfg.py" ]] || {
  echo "stress-tests.sh: no build at $BUILD (run scripts/setup.sh)" >&2
  exit 2
}

# The tests that start ranks, as paths in the build tree (lit maps them to
# the sources).
mapfile -t TESTS < <(cd "$ROOT/test" &&
  grep -rlE --exclude-dir=Inputs \
    '%mpirun|braid-run|braid-exec|e2e\.py|_check\.py|REQUIRES:.*mpi' \
    --include='*.test' --include='*.mlir' . | sed 's|^\./||' | sort |
  while read -r t; do echo "$BUILD/test/$t"; done)
((${#TESTS[@]})) || { echo "stress-tests.sh: no MPI tests found" >&2; exit 2; }
echo "stress-tests.sh: ${#TESTS[@]} tests, $ROUNDS rounds, $JOBS workers"

declare -A FAILED=()
bad_rounds=0
start=$(date +%s)
for ((round = 1; round <= ROUNDS; ++round)); do
  log="$(mktemp)"
  set +e
  "$LIT" -v --shuffle -j "$JOBS" --filter "$FILTER" "${TESTS[@]}" >"$log" 2>&1
  status=$?
  set -e
  failures=$(grep -E '^  BRAID :: ' "$log" | sed 's/^  BRAID :: //' || true)
  if ((status != 0)); then
    bad_rounds=$((bad_rounds + 1))
    echo "round $round: FAILED"
    if [[ -n "$failures" ]]; then
      while read -r t; do
        echo "  $t"
        FAILED["$t"]=$((${FAILED["$t"]:-0} + 1))
      done <<<"$failures"
    else
      tail -20 "$log" | sed 's/^/  | /'
    fi
    cp "$log" "${TMPDIR:-/tmp}/braid-stress-round$round.log"
    echo "  (log: ${TMPDIR:-/tmp}/braid-stress-round$round.log)"
  else
    echo "round $round: passed"
  fi
  rm -f "$log"
done

echo "== stress-tests.sh summary: $ROUNDS rounds of ${#TESTS[@]} MPI tests" \
  "with $JOBS workers in $(($(date +%s) - start)) s: $bad_rounds rounds failed"
for t in "${!FAILED[@]}"; do
  echo "  $t: failed in ${FAILED[$t]} of $ROUNDS rounds"
done
((bad_rounds == 0))
