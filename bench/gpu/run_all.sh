#!/usr/bin/env bash
# Functions run through run_step, which shellcheck cannot follow:
# shellcheck disable=SC2317
# Runs Braid's GPU checks and benchmarks on a machine with NVIDIA GPUs (an
# H200), from what bench/gpu/prepare.sh built: no LLVM, MLIR or network
# needed; CUDA 13 (cudart, cuBLASLt), NCCL and PyTorch come from the machine.
#
#   1. selftest   braid-rt-cuda-selftest: every reduction kind, broadcast,
#                 symmetric buffers and stream signals, on the loopback
#                 transport (4 ranks; copy-engine and SM copies) and on NCCL
#                 (1 rank, and one per GPU when there are 2 or more)
#   2. e2e        the end-to-end patterns of e2e_configs.txt against numpy on
#                 loopback ranks, and on NCCL (one process per GPU) for every
#                 configuration the GPUs can hold when there are 2 or more
#   3. microbench GEMM with a cuBLASLt epilogue against bare GEMM and GEMM + a
#                 separate kernel; device-to-device copy bandwidth
#   4. overlap    AllGather+GEMM and GEMM+ReduceScatter at Llama-70B TP8
#                 shapes: loopback-only figures (copy-engine and SM copies),
#                 and NCCL figures when there are 2 or more GPUs; the GEMM
#                 alone on cuBLASLt and as Braid's generated kernel
#   5. collectives an all-reduce summed inside the residual + RMSNorm kernel
#                 (one shot and two shot) against the library's all-reduce +
#                 Braid's norm kernel, 1 to 4096 tokens x 8192 bf16: loopback,
#                 and NCCL when there are 2 or more GPUs
#   6. fusion     fused layernorm, RMSNorm, softmax, bias + GELU + residual
#                 (checked against numpy, then timed)
#   7. torch      the same patterns in PyTorch eager and torch.compile
#
# The whole script keeps one deadline (BRAID_GPU_DEADLINE, 460 s: it must end
# within 8 minutes of a 15-minute device lease). Each step gets at most its
# own share and what is left; a step that would start too late is skipped
# and says so. Inside a step every configuration and program has a limit of
# its own, shorter than the step's, and Braid's runner a --timeout shorter
# still, so a hang prints which rank and step hung before anything is
# killed; a failure never stops the next measurement. Results go to RESULTS
# as they come (RESULTS/run_all.log has this output); summarize.py prints
# the table last and the exit status is non-zero when a target is missed or
# a figure is missing.
#
# Library paths are scoped: the bundle's libraries and the machine's CUDA
# and NCCL go on LD_LIBRARY_PATH for Braid's binaries only (directly, or
# through BRAID_RUN_LIBRARY_PATH, which the Python drivers hand to the
# processes they start); PyTorch keeps finding its own.
#
# Usage: bench/gpu/run_all.sh RESULTS [BUNDLE]   (default: bench/gpu/artifacts)
# Environment (for tests of this script): PYTHON, NVIDIA_SMI,
#   BRAID_GPU_DEADLINE, BRAID_GPU_CONFIG_TIMEOUT (one e2e configuration, 70),
#   BRAID_GPU_RUN_TIMEOUT (one run's --timeout, 25), BRAID_GPU_SELFTEST_CAP
#   (the self-test step's share, 45), BRAID_GPU_SELFTEST_TIMEOUT (one
#   self-test run, 30), BRAID_GPU_E2E_CONFIGS
#   (the configuration file), BRAID_GPU_LIBRARY_DIRS (where to look for
#   libcudart, libcublasLt and libnccl; by default the toolkit's and
#   PyTorch's folders).
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
RESULTS="${1:?usage: run_all.sh RESULTS [BUNDLE]}"
BUNDLE="$(cd "${2:-$HERE/artifacts}" 2>/dev/null && pwd || echo "${2:-$HERE/artifacts}")"
PYTHON="${PYTHON:-python3}"
NVIDIA_SMI="${NVIDIA_SMI:-nvidia-smi}"
DEADLINE="${BRAID_GPU_DEADLINE:-460}"
CONFIG_TIMEOUT="${BRAID_GPU_CONFIG_TIMEOUT:-70}"
RUN_TIMEOUT="${BRAID_GPU_RUN_TIMEOUT:-25}"
SELFTEST_CAP="${BRAID_GPU_SELFTEST_CAP:-45}"
SELFTEST_TIMEOUT="${BRAID_GPU_SELFTEST_TIMEOUT:-30}"
E2E_CONFIGS="${BRAID_GPU_E2E_CONFIGS:-$HERE/e2e_configs.txt}"
RESERVE=15 # seconds kept for the summary

mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"
: > "$RESULTS/steps.txt"
: > "$RESULTS/selftest.txt"
: > "$RESULTS/e2e.txt"
: > "$RESULTS/e2e.log"
exec > >(tee "$RESULTS/run_all.log") 2>&1
# tee outlives the script unless waited for: whatever reads our output the
# moment we exit (a test, a log collector) would miss the last lines.
TEE_PID=$!
trap 'exec >&- 2>&-; wait "$TEE_PID"' EXIT
export PYTHONUNBUFFERED=1
status=0

left() { echo $((DEADLINE - RESERVE - SECONDS)); }
min() { if (($1 < $2)); then echo "$1"; else echo "$2"; fi; }
record() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >> "$RESULTS/steps.txt"; }

# run_step NAME CAP FUNCTION: FUNCTION runs with STEP_END set to when it must
# be done (at most CAP seconds from now, and never past the deadline).
run_step() {
  local name=$1 cap=$2 fn=$3 budget start rc
  budget=$(min "$cap" "$(left)")
  if ((budget < 10)); then
    echo "== $name: SKIPPED (${SECONDS} s of the ${DEADLINE} s deadline used)"
    record "$name" "skipped: deadline" 0
    status=1
    return
  fi
  echo "== $name (at most $budget s; ${SECONDS} s of $DEADLINE used)"
  start=$SECONDS
  STEP_END=$((SECONDS + budget))
  "$fn"
  rc=$?
  if ((rc == 124 || rc == 137)); then
    echo "TIMEOUT: $name after $((SECONDS - start)) s"
    record "$name" "timed out" $((SECONDS - start))
    status=1
  elif ((rc != 0)); then
    record "$name" "failed (exit $rc)" $((SECONDS - start))
    status=1
  else
    record "$name" ok $((SECONDS - start))
  fi
}

# step_left: seconds the current step has left.
step_left() { echo $((STEP_END - SECONDS)); }

#--- Libraries: Braid's binaries only -----------------------------------------

libdirs="$BUNDLE/lib"
library_search=(/usr/local/cuda/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib)
if [[ -n "${BRAID_GPU_LIBRARY_DIRS:-}" ]]; then
  read -r -a library_search <<< "$BRAID_GPU_LIBRARY_DIRS"
else
  # PyTorch's wheels carry CUDA, cuBLAS and NCCL (nvidia/*/lib).
  while read -r dir; do
    [[ -d "$dir" ]] && library_search+=("$dir")
  done < <("$PYTHON" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
fi
braid_ready=1
for name in libcudart.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find "${library_search[@]}" -name "$name" 2>/dev/null | head -n 1)
  if [[ -z "$found" ]]; then
    echo "run_all.sh: $name not found (looked in ${library_search[*]}): Braid's steps cannot run"
    braid_ready=0
  elif [[ ":$libdirs:" != *":$(dirname "$found"):"* ]]; then
    libdirs="$libdirs:$(dirname "$found")"
  fi
done
BRAID_ENV=(env "LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
export BRAID_RUN_LIBRARY_PATH="$libdirs"
if [[ ! -x "$BUNDLE/bin/braid-exec-cuda" ]]; then
  echo "run_all.sh: no $BUNDLE/bin/braid-exec-cuda: run bench/gpu/prepare.sh on a development machine first"
  braid_ready=0
fi

gpus=$("$NVIDIA_SMI" -L 2>/dev/null | grep -c '^GPU ')
"$NVIDIA_SMI" -L 2>/dev/null
echo "run_all.sh: $gpus GPU(s); deadline ${DEADLINE} s"
((gpus >= 1)) || gpus=1

# nccl_ranks N LIMIT OUT COMMAND...: N processes, one per GPU, NCCL through
# an id file; rank 0's output, then the others', into OUT.
nccl_ranks() {
  local n=$1 limit=$2 out=$3 id r rc=0
  shift 3
  id="$RESULTS/nccl-id.$BASHPID"
  rm -f "$id"
  local pids=()
  for ((r = 0; r < n; r++)); do
    BRAID_NCCL_ID_FILE="$id" BRAID_RANK=$r BRAID_WORLD_SIZE=$n BRAID_LOCAL_RANK=$r \
      timeout -k 5 "$limit" "${BRAID_ENV[@]}" "$@" > "$out.rank$r" 2>&1 &
    pids+=($!)
  done
  for r in "${!pids[@]}"; do
    wait "${pids[$r]}" || rc=$?
  done
  cat "$out.rank0" > "$out"
  for ((r = 1; r < n; r++)); do sed "s/^/[rank $r] /" "$out.rank$r" >> "$out"; done
  rm -f "$out".rank* "$id"
  return "$rc"
}

#--- 1. selftest ----------------------------------------------------------------

selftest_one() { # NAME KIND(loopback|nccl) RANKS [ENV...]
  local name=$1 kind=$2 ranks=$3 limit rc out
  shift 3
  limit=$(min "$SELFTEST_TIMEOUT" "$(step_left)")
  if ((limit < 5)); then
    printf '%s\t%s\t%s\n' "$name" skipped "the step's time is up" >> "$RESULTS/selftest.txt"
    return 1
  fi
  out="$RESULTS/selftest.$(tr -c 'a-zA-Z0-9\n' '-' <<< "$name" | tr -s '-').log"
  if [[ $kind == loopback ]]; then
    timeout -k 5 "$limit" env "$@" BRAID_LOOPBACK="$ranks" BRAID_TIMEOUT=$((limit - 5)) \
      "${BRAID_ENV[@]}" "$BUNDLE/bin/braid-rt-cuda-selftest" > "$out" 2>&1
    rc=$?
  else
    nccl_ranks "$ranks" "$limit" "$out" env BRAID_TIMEOUT=$((limit - 5)) \
      "$BUNDLE/bin/braid-rt-cuda-selftest"
    rc=$?
  fi
  local summary
  summary=$(grep -E '^braid-rt-cuda-selftest: ' "$out" | tail -n 1)
  # Else the first error the ranks printed (rank 0's come first).
  [[ -n "$summary" ]] ||
    summary="exit $rc: $(grep -m 1 'braid: ' "$out" || tail -n 1 "$out")"
  grep -E '^FAIL' "$out"
  echo "$name: $summary"
  printf '%s\t%s\t%s\n' "$name" "$([[ $rc == 0 ]] && echo ok || echo failed)" "$summary" \
    >> "$RESULTS/selftest.txt"
  return "$rc"
}

selftest() {
  local rc=0
  selftest_one "loopback, 4 ranks, copy engine" loopback 4 || rc=1
  selftest_one "loopback, 4 ranks, SM copies" loopback 4 BRAID_LOOPBACK_COPY=sm || rc=1
  selftest_one "NCCL, 1 rank" nccl 1 || rc=1
  if ((gpus >= 2)); then
    selftest_one "NCCL, $(min "$gpus" 8) ranks" nccl "$(min "$gpus" 8)" || rc=1
  fi
  return "$rc"
}

#--- 2. e2e ---------------------------------------------------------------------

e2e_counts() {
  local n passed failed skipped
  n=$(wc -l < "$RESULTS/e2e.txt")
  passed=$(grep -c '^passed' "$RESULTS/e2e.txt")
  failed=$(grep -c '^failed' "$RESULTS/e2e.txt")
  skipped=$(grep -c '^skipped' "$RESULTS/e2e.txt")
  echo "{\"configurations\": $n, \"passed\": $passed, \"failed\": $failed, \"skipped\": $skipped}" \
    > "$RESULTS/e2e.json"
}

# e2e_one N TRANSPORT ARGS...: configuration N of the file (its prebuilt
# programs), on TRANSPORT.
e2e_one() {
  local n=$1 transport=$2 limit run rc what
  shift 2
  what="$* (${transport})"
  limit=$(min "$CONFIG_TIMEOUT" "$(step_left)")
  if ((limit < 15)); then
    echo "SKIPPED: $what (the step's time is up)"
    printf 'skipped\t%s\n' "$what" >> "$RESULTS/e2e.txt"
    e2e_counts
    return 0
  fi
  # Two modes, each with the runner's own timeout, inside the limit.
  run=$(min "$RUN_TIMEOUT" $(((limit - 10) / 2)))
  echo "--- $what" >> "$RESULTS/e2e.log"
  timeout -k 5 "$limit" "$PYTHON" "$ROOT/test/lib/e2e.py" --bin "$BUNDLE/bin" "$@" \
    --target cuda --transport "$transport" --prebuilt "$BUNDLE/e2e/$n" --seed "$n" \
    --run-timeout "$run" >> "$RESULTS/e2e.log" 2>&1
  rc=$?
  if ((rc == 0)); then
    printf 'passed\t%s\n' "$what" >> "$RESULTS/e2e.txt"
  else
    ((rc == 124 || rc == 137)) && echo "TIMEOUT: $what after $limit s" | tee -a "$RESULTS/e2e.log"
    echo "FAILED: $what (see e2e.log)"
    printf 'failed\t%s\n' "$what" >> "$RESULTS/e2e.txt"
  fi
  e2e_counts
  return 0
}

# The number of ranks of a configuration's --grid (2x2 -> 4).
grid_ranks() {
  local grid
  grid=$(sed -n 's/.*--grid \([0-9x]*\).*/\1/p' <<< "$*")
  echo $((${grid//x/*}))
}

e2e() {
  local n=0 line ranks
  local -a nccl=()
  while read -r line; do
    [[ -z "$line" || "$line" == \#* ]] && continue
    n=$((n + 1))
    if [[ "$line" == *"--transport nccl-file"* ]]; then
      # shellcheck disable=SC2086
      e2e_one "$n" nccl-file ${line/--transport nccl-file/}
      continue
    fi
    # shellcheck disable=SC2086
    e2e_one "$n" loopback $line
    # The same programs on NCCL, one process per GPU, when the GPUs fit.
    ranks=$(grid_ranks "$line")
    if ((gpus >= 2 && ranks >= 2 && ranks <= gpus)); then
      nccl+=("$n|$line")
    fi
  done < "$E2E_CONFIGS"
  if ((gpus < 2)); then
    echo "NCCL with 2 or more ranks: skipped ($gpus GPU)"
  fi
  local entry
  for entry in "${nccl[@]}"; do
    # shellcheck disable=SC2086
    e2e_one "${entry%%|*}" nccl-file ${entry#*|}
  done
  grep -E "^(PASS|FAIL|SKIPPED|TIMEOUT)" "$RESULTS/e2e.log"
  e2e_counts
  ! grep -q '^failed' "$RESULTS/e2e.txt"
}

#--- 3.-7. benchmarks -------------------------------------------------------------

microbench() {
  timeout -k 5 "$(step_left)" "${BRAID_ENV[@]}" "$BUNDLE/bin/microbench" \
    "$RESULTS/microbench.json"
}

overlap() {
  local budget
  budget=$(step_left)
  timeout -k 5 "$budget" "$PYTHON" "$HERE/overlap.py" run "$BUNDLE" "$RESULTS" \
    --gpus "$gpus" --budget $((budget - 5)) --timeout 40
}

collectives() {
  local budget
  budget=$(step_left)
  timeout -k 5 "$budget" "$PYTHON" "$HERE/collectives.py" run "$BUNDLE" "$RESULTS" \
    --gpus "$gpus" --budget $((budget - 5)) --timeout 25
}

fusion() {
  local budget
  budget=$(step_left)
  timeout -k 5 "$budget" "$PYTHON" "$HERE/fusion.py" run "$BUNDLE" "$RESULTS" \
    --budget $((budget - 5)) --timeout 30
}

torch() {
  # PyTorch's own libraries: no Braid paths in this environment.
  timeout -k 5 "$(step_left)" env -u BRAID_RUN_LIBRARY_PATH "$PYTHON" \
    "$HERE/torch_fusion.py" "$RESULTS/torch_fusion.json" \
    --braid-times "$RESULTS/braid_times.json"
}

if ((braid_ready)); then
  run_step "1. runtime self-test" "$SELFTEST_CAP" selftest
  run_step "2. end-to-end suite" 150 e2e
  run_step "3. microbench" 45 microbench
  run_step "4. overlap" 120 overlap
  run_step "5. collectives in kernels" 60 collectives
  run_step "6. memory-bound fusion" 60 fusion
else
  record "Braid's steps" "not run: libraries or bundle missing" 0
  status=1
fi
run_step "7. PyTorch eager and torch.compile" 150 torch

echo "== summary (${SECONDS} s)"
timeout -k 2 "$RESERVE" "$PYTHON" "$HERE/summarize.py" "$RESULTS" || status=1
exit $status
