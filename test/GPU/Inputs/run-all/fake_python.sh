#!/usr/bin/env bash
# The PYTHON of run-all-dry.test: Debian's python3, logging which script
# ran with which library paths (PyTorch's step must see none of Braid's).
echo "python $(basename "${1:-}") LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} BRAID_RUN_LIBRARY_PATH=${BRAID_RUN_LIBRARY_PATH:-}" >> "${FAKE_CALLS:-/dev/null}"
exec /usr/bin/python3 "$@"
