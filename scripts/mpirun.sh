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

# Not exec: the folder is removed once mpirun is done. A terminal's ^C
# reaches mpirun directly (same process group); this script waits for it
# to finish its orderly teardown instead of dying first.
trap ':' INT
TMPDIR="$dir" "${MPIRUN:-mpirun}" "${flags[@]}" "$@"
status=$?
rm -rf "$dir"
exit "$status"
