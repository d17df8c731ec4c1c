#!/usr/bin/env bash
# The bundle's bin/microbench in run-all-dry.test: the JSON the real one
# writes, with made-up figures.
echo "microbench LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}" >> "${FAKE_CALLS:-/dev/null}"
cat > "$1" <<'JSON'
{"device": "fake", "gemm_epilogue": [{"M": 4096, "N": 3584, "K": 8192, "t_bare_ms": 0.5, "epilogue_over_bare": 1.01, "separate_over_bare": 1.2}], "copy": {"copy_gbps": 4000.0}}
JSON
echo "wrote $1"
