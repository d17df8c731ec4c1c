#!/usr/bin/env bash
# The bundle's bin/braid-exec-cuda in run-all-dry.test: logs how it was
# started (LD_LIBRARY_PATH included) to $FAKE_CALLS, then
#   - a program matching $FAKE_HANG hangs the way Braid's runtime reports
#     it: for its --timeout, then one line naming the rank and step, exit 1;
#   - one matching $FAKE_STUCK hangs for good (ignoring --timeout), as a
#     wedged driver call would;
#   - one matching $FAKE_FAIL fails at once;
#   - the overlap and fusion programs (GEMMs of Llama-70B size, kernels)
#     print a median instead of running;
#   - everything else runs: the real runner (braid-exec-cuda.real), which
#     the test puts on the emulated device.
library="" timeout=120
for arg in "$@"; do
  case "$arg" in
    --timeout=*) timeout="${arg#--timeout=}" ;;
    -*) ;;
    *) [[ -z "$library" ]] && library="$arg" ;;
  esac
done
echo "braid-exec-cuda $(basename "$(dirname "$library")")/$(basename "$library") rank=${BRAID_RANK:-} LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >> "${FAKE_CALLS:-/dev/null}"
matches() { [[ -n "$1" ]] && [[ "$library" =~ $1 ]]; }
if matches "${FAKE_HANG:-}"; then
  sleep "$timeout"
  echo "braid: rank 0: recv step 1 (peer 1): timed out after $timeout s in braid_rt_synchronize" >&2
  exit 1
fi
if matches "${FAKE_STUCK:-}"; then
  exec sleep 1000
fi
if matches "${FAKE_FAIL:-}"; then
  echo "braid: rank 0: cuLaunchKernel in mgpuLaunchKernel (kernel main_kernel): an illegal memory access was encountered" >&2
  exit 1
fi
case "$library" in
  */overlap/* | */fusion/*)
    [[ "${BRAID_RANK:-0}" == 0 ]] && echo "braid-exec: median 1.250 ms over 20 runs (max over ranks)"
    exit 0 ;;
esac
exec "$(dirname "$0")/braid-exec-cuda.real" "$@"
