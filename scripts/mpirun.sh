#!/usr/bin/env bash
#===- scripts/mpirun.sh - mpirun with a session directory of its own -------===#
#
# Part of Braid.
#
#===------------------------------------------------------------------------===#
#
#   scripts/mpirun.sh -np N PROGRAM ARGS...
#
# Open MPI keeps each job's session directory (its shared-memory backing
# files, the launcher's rendezvous files) under $TMPDIR/ompi.HOST.UID/, a
# folder all jobs of one user share and the last one to finish removes.
# lit gives every test the same $TMPDIR, so two tests starting mpirun at
# once raced: one job's cleanup removed the shared folder while the other
# created its child in it ("orte_init failed"). Every mpirun that Braid's
# tests and benchmarks start goes through this script instead, which gives
# the job a fresh base folder under $TMPDIR (removed afterwards) and the
# flags a container needs (--allow-run-as-root as root; --oversubscribe,
# since tests run more ranks than cores). braid-run does the same itself.
#
# The ranks inherit the private TMPDIR, so their temporary files are the
# job's own too. The exit status is mpirun's (128 + N when a signal N ended
# it, as the shell reports it).
#
#===------------------------------------------------------------------------===#
set -u

base="${TMPDIR:-/tmp}"
[[ -d "$base" && -w "$base" ]] || base=/tmp
dir="$(mktemp -d "$base/braid-mpi.XXXXXXXX")" || {
  echo "mpirun.sh: cannot create a session directory under $base" >&2
  exit 1
}

flags=(--oversubscribe)
[[ "$(id -u)" == 0 ]] && flags=(--allow-run-as-root "${flags[@]}")

# The state and the wait status (/proc's exit_code) of process $1: "Z 256".
proc_state() {
  local line rest
  read -r line 2>/dev/null < "/proc/$1/stat" || return 1
  rest="${line##*) }"
  read -r -a f <<< "$rest"
  echo "${f[0]} ${f[49]:-0}"
}

# Not exec: the folder is removed once mpirun is done. A terminal's ^C
# reaches mpirun directly (same process group: mpirun installs its own
# handler over the ignored SIGINT a script's background job starts with,
# and a second SIGINT would make it skip its orderly teardown, so it is not
# forwarded); this script waits for that teardown instead of dying first.
trap ':' INT
TMPDIR="$dir" "${MPIRUN:-mpirun}" "${flags[@]}" "$@" &
pid=$!
# Open MPI 4.1's mpirun sometimes never returns once its ranks have ended,
# when they end by MPI_Abort on a loaded machine (every rank left unreaped,
# mpirun's threads blocked; one run in about 40 of two ranks aborting alike
# while the cores were busy). A job whose ranks have all ended, unreaped,
# for 10 seconds is over: mpirun is killed and the status is the ranks'
# (1 if any failed).
ended_since=""
status=""
while :; do
  read -r own _ <<< "$(proc_state "$pid")"
  [[ -z "$own" || "$own" == Z ]] && break # mpirun has returned.
  children="$(cat /proc/"$pid"/task/*/children 2>/dev/null)"
  all_ended=1
  failed=0
  for child in $children; do
    read -r state code <<< "$(proc_state "$child")" || continue
    if [[ "$state" != Z ]]; then
      all_ended=0
      break
    fi
    [[ "$code" != 0 ]] && failed=1
  done
  if [[ -n "$children" && "$all_ended" == 1 ]]; then
    now="$(date +%s)"
    ended_since="${ended_since:-$now}"
    if (( now - ended_since >= 10 )); then
      echo "mpirun.sh: every rank has ended but mpirun has not returned for" \
        "10 s (an Open MPI hang); ending it" >&2
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      status="$failed"
      break
    fi
  else
    ended_since=""
  fi
  sleep 0.2
done
if [[ -z "$status" ]]; then
  wait "$pid"
  status=$?
fi
rm -rf "$dir"
exit "$status"
