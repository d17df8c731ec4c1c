#!/usr/bin/env python3
"""Memory-bound patterns on the GPU: PyTorch eager and torch.compile, against
the fewest bytes each must move, optionally next to Braid's fused kernels.

Patterns, at 16384 x 8192 bf16 (rows x hidden), fresh torch.randn inputs each:
  layernorm           y = layer_norm(x, (8192,), w, b), eps 1e-5
  rmsnorm             y = x * rsqrt(mean(x^2, -1) + 1e-6) * w, in f32, then
                      cast back
  softmax             y = softmax(x, -1), in f32, cast back
  bias_gelu_residual  y = gelu(x + b, approximate='tanh') + r

Each time is the median of RUNS runs after WARMUP warm-ups, torch.cuda.Event
around each run; torch.compile (default mode) compiles before its warm-ups,
outside the timing. Bytes moved are the minimum: every input read once
(vectors included) and the output written once. The compiled result is
checked against eager (relative L2 error) before timing.

Usage:
  python3 bench/gpu/torch_fusion.py OUT.json [--braid-times FILE.json]
FILE.json holds Braid's times of the same patterns, measured elsewhere, as
{"layernorm": ms, ...}; each row then also gets braid_ms, braid_gbps and
braid_over_compile = compile_ms / braid_ms (>= 1.0: Braid at least as fast).
Writes {"device": ..., "patterns": [row, ...]} to OUT.json and prints a
table. Exits 2 when there is no CUDA device, 1 when a pattern fails (the
others still run; OUT.json is rewritten after each).
"""
import argparse
import json
import statistics
import sys

ROWS = 16384
HIDDEN = 8192
WARMUP = 5
RUNS = 25
MAX_REL_ERR = 2e-2


def make_patterns(torch):
    """(name, function, make_inputs) for each pattern; make_inputs draws
    fresh bf16 CUDA tensors."""
    functional = torch.nn.functional

    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)

    def layernorm(x, w, b):
        return functional.layer_norm(x, (HIDDEN,), w, b, eps=1e-5)

    def rmsnorm(x, w):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (y * w.float()).to(x.dtype)

    def softmax(x):
        return torch.softmax(x.float(), -1).to(x.dtype)

    def bias_gelu_residual(x, b, r):
        return functional.gelu(x + b, approximate="tanh") + r

    return [
        ("layernorm", layernorm,
         lambda: (randn(ROWS, HIDDEN), randn(HIDDEN), randn(HIDDEN))),
        ("rmsnorm", rmsnorm, lambda: (randn(ROWS, HIDDEN), randn(HIDDEN))),
        ("softmax", softmax, lambda: (randn(ROWS, HIDDEN),)),
        ("bias_gelu_residual", bias_gelu_residual,
         lambda: (randn(ROWS, HIDDEN), randn(HIDDEN), randn(ROWS, HIDDEN))),
    ]


def median_ms(torch, fn, inputs):
    """Median over RUNS event-timed calls of fn(*inputs), after WARMUP."""
    for _ in range(WARMUP):
        fn(*inputs)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(RUNS):
        start.record()
        fn(*inputs)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def gbps(nbytes, ms):
    return nbytes / (ms * 1e-3) / 1e9


def rel_l2_error(torch, got, want):
    got, want = got.double(), want.double()
    return (torch.linalg.vector_norm(got - want)
            / torch.linalg.vector_norm(want)).item()


def bench_pattern(torch, name, fn, make_inputs, braid_times):
    inputs = make_inputs()
    compiled = torch.compile(fn)
    eager_out = fn(*inputs)
    compiled_out = compiled(*inputs)  # compiles here, outside the timing
    torch.cuda.synchronize()
    rel_err = rel_l2_error(torch, compiled_out, eager_out)
    if not rel_err < MAX_REL_ERR:  # also catches NaN
        raise RuntimeError(f"compiled vs eager relative L2 error {rel_err:.3e}"
                           f" (limit {MAX_REL_ERR})")
    nbytes = (sum(t.numel() * t.element_size() for t in inputs)
              + eager_out.numel() * eager_out.element_size())
    del eager_out, compiled_out

    eager_ms = median_ms(torch, fn, inputs)
    compile_ms = median_ms(torch, compiled, inputs)
    row = {
        "pattern": name,
        "shape": [ROWS, HIDDEN],
        "bytes": nbytes,
        "eager_ms": eager_ms,
        "eager_gbps": gbps(nbytes, eager_ms),
        "compile_ms": compile_ms,
        "compile_gbps": gbps(nbytes, compile_ms),
        "compile_rel_err": rel_err,
    }
    if braid_times is not None:
        braid_ms = braid_times.get(name)
        row["braid_ms"] = braid_ms
        missing = braid_ms is None
        row["braid_gbps"] = None if missing else gbps(nbytes, braid_ms)
        row["braid_over_compile"] = None if missing else compile_ms / braid_ms
    return row


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def print_table(rows, with_braid):
    header = (f"{'pattern':<20} {'MB':>7} {'eager ms':>9} {'GB/s':>7}"
              f" {'compile ms':>10} {'GB/s':>7}")
    if with_braid:
        header += f" {'braid ms':>9} {'GB/s':>7} {'compile/braid':>13}"
    print(header)
    for row in rows:
        line = (f"{row['pattern']:<20} {row['bytes'] / 1e6:>7.1f}"
                f" {row['eager_ms']:>9.4f} {row['eager_gbps']:>7.0f}"
                f" {row['compile_ms']:>10.4f} {row['compile_gbps']:>7.0f}")
        if with_braid:
            line += (f" {fmt(row['braid_ms'], '9.4f'):>9}"
                     f" {fmt(row['braid_gbps'], '7.0f'):>7}"
                     f" {fmt(row['braid_over_compile'], '13.3f'):>13}")
        print(line)


def main():
    parser = argparse.ArgumentParser(
        description="Time memory-bound patterns in PyTorch eager and "
                    "torch.compile on CUDA (16384 x 8192 bf16), optionally "
                    "next to Braid's times.")
    parser.add_argument("out", metavar="OUT.json", help="where to write rows")
    parser.add_argument("--braid-times", metavar="FILE.json",
                        help='Braid\'s times as {"layernorm": ms, ...}')
    args = parser.parse_args()

    braid_times = None
    if args.braid_times:
        with open(args.braid_times) as f:
            braid_times = json.load(f)

    try:
        import torch
    except ImportError:
        print("no CUDA device (PyTorch is not installed)")
        return 2
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 2

    device = torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}, {ROWS} x {HIDDEN} "
          f"bf16, median of {RUNS} after {WARMUP} warm-ups", flush=True)
    rows, failed = [], 0
    for name, fn, make_inputs in make_patterns(torch):
        # One pattern failing (torch.compile, a mismatch, memory) does not
        # lose the others; what was measured is written as it comes.
        try:
            rows.append(bench_pattern(torch, name, fn, make_inputs, braid_times))
            print(f"  {name}: done", flush=True)
        except Exception as error:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}: {error}", file=sys.stderr, flush=True)
        with open(args.out, "w") as f:
            json.dump({"device": device, "patterns": rows}, f, indent=2)
            f.write("\n")
    print_table(rows, braid_times is not None)
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
