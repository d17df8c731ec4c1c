"""What the bench/cpu scripts share: a one-product program and a timed run.

time_program compiles MLIR text with braid-compile and runs it with
braid-exec on `ranks` ranks (--warmup, --repeat), returning the median in
milliseconds of the slowest rank; report_records returns the overlap
report's records of MLIR text compiled to dist; rank_args parses the
command line the multi-rank benches share. The benches that are an mpirun
job of torch and Braid ranks (per_rank.py, train_step.py) share
worker_rows, gloo_mesh and median_ms.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sizes(text):
    """A comma-separated list of whole numbers, as the benches take sizes."""
    return [int(t) for t in text.split(",") if t]


def rank_args(repeat, **options):
    """The parsed command line: --bin (the build's bin/), --ranks (default
    4), --repeat (default `repeat`) and the bench's own `options`, each
    name=default (kv_heads is --kv-heads), typed as its default: a tuple
    default is a list of sizes, given as 1,2,3, and False a flag. ranks=N
    changes the default of --ranks."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=repeat)
    parser.set_defaults(ranks=options.pop("ranks", 4))
    for name, default in options.items():
        flag = "--" + name.replace("_", "-")
        if default is False:
            parser.add_argument(flag, action="store_true")
        elif isinstance(default, tuple):
            parser.add_argument(flag, type=sizes, default=list(default))
        else:
            parser.add_argument(flag, type=type(default), default=default)
    return parser.parse_args()


def header(*columns):
    """A table's heading: each column a name right-aligned one wider than
    itself, or (name, width); a string after the last column follows it."""
    return " ".join(f"{c:>{len(c) + 1}}" if isinstance(c, str) else f"{c[0]:>{c[1]}}"
                    for c in columns)


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def report_records(bin_dir, tmp, name, text, flags=()):
    """The `collectives` records of braid-overlap's report for `text`
    compiled to dist with `flags`."""
    source = os.path.join(tmp, f"{name}.mlir")
    report = os.path.join(tmp, f"{name}-report.json")
    with open(source, "w") as f:
        f.write(text)
    subprocess.run([os.path.join(bin_dir, "braid-compile"), source, "--emit=dist",
                    *flags, f"--report={report}", "-o", os.devnull],
                   check=True, stderr=subprocess.DEVNULL)
    with open(report) as f:
        return json.load(f)["collectives"]


def gemm_program(ranks, m, n, k, dtype):
    """C[m, n] f32 = A[m, k] . B[k, n] in `dtype`, from zeros, on every rank
    of a grid of `ranks` (no collectives)."""
    a, b, c = (f"tensor<{m}x{k}x{dtype}>", f"tensor<{k}x{n}x{dtype}>",
               f"tensor<{m}x{n}xf32>")
    return f"""shard.grid @g(shape = {ranks})
func.func @main(%a: {a}, %b: {b}) -> {c} {{
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : {c}
  %z = linalg.fill ins(%zero : f32) outs(%e : {c}) -> {c}
  %c = linalg.matmul ins(%a, %b : {a}, {b}) outs(%z : {c}) -> {c}
  return %c : {c}
}}
"""


def time_program(bin_dir, tmp, name, text, ranks, repeat, flags=(),
                 warmup=1, threads=None):
    """Median milliseconds of `repeat` runs (at least 2, so that braid-exec
    prints one) after `warmup`, of `text` compiled with `flags`."""
    source = os.path.join(tmp, f"{name}.mlir")
    with open(source, "w") as f:
        f.write(text)
    lib = os.path.join(tmp, f"{name}.so")
    subprocess.run([os.path.join(bin_dir, "braid-compile"), source, *flags,
                    "-o", lib], check=True, stderr=subprocess.DEVNULL)
    env = dict(os.environ)
    if threads:
        env["BRAID_NUM_THREADS"] = str(threads)
    out = subprocess.run(
        [os.path.join(ROOT, "scripts", "mpirun.sh"), "-np", str(ranks),
         os.path.join(bin_dir, "braid-exec"), lib, f"--warmup={warmup}",
         f"--repeat={max(repeat, 2)}"],
        capture_output=True, text=True, env=env, check=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


def bf16_matmul(a, b, m, k, n, name="mm"):
    """MLIR lines of %name = a [m, k] @ b [k, n] (bf16 operands) into a
    zero-filled f32 product."""
    return (f"  %zero = arith.constant 0.0 : f32\n"
            f"  %e = tensor.empty() : tensor<{m}x{n}xf32>\n"
            f"  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>\n"
            f"  %{name} = linalg.matmul ins({a}, {b} : tensor<{m}x{k}xbf16>, tensor<{k}x{n}xbf16>) "
            f"outs(%z : tensor<{m}x{n}xf32>) -> tensor<{m}x{n}xf32>\n")


def ag_gemm_program(ranks, t, h, f):
    """all_gather of x [t / ranks, h] along the rows, then x @ W [h, f]."""
    local = t // ranks
    return (f"shard.grid @g(shape = {ranks})\n"
            f"func.func @main(%x: tensor<{local}x{h}xbf16>, %w: tensor<{h}x{f}xbf16>) -> tensor<{t}x{f}xf32> {{\n"
            f"  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : tensor<{local}x{h}xbf16> -> tensor<{t}x{h}xbf16>\n"
            + bf16_matmul("%g", "%w", t, h, f) + f"  return %mm : tensor<{t}x{f}xf32>\n}}\n")


def gemm_rs_program(ranks, t, f, h):
    """x [t, f] @ W [f, h], then reduce_scatter of the rows."""
    local = t // ranks
    return (f"shard.grid @g(shape = {ranks})\n"
            f"func.func @main(%x: tensor<{t}x{f}xbf16>, %w: tensor<{f}x{h}xbf16>) -> tensor<{local}x{h}xf32> {{\n"
            + bf16_matmul("%x", "%w", t, f, h) +
            f"  %r = shard.reduce_scatter %mm on @g grid_axes = [0] scatter_axis = 0 : tensor<{t}x{h}xf32> -> tensor<{local}x{h}xf32>\n"
            f"  return %r : tensor<{local}x{h}xf32>\n}}\n")


def collective_norm_program(ranks, t, h, scatter=False, replicated=False):
    """A bf16 partial p [t, h] all-reduced (or reduce-scattered along the
    rows), plus the residual, then RMSNorm over h (in f32, weight per
    rank, or with `replicated` the residual and the weight placed
    replicated, as a tensor-parallel layer's are); returns the residual
    stream and the normed rows."""
    rows = t // ranks if scatter else t
    act, part = f"tensor<{rows}x{h}xbf16>", f"tensor<{t}x{h}xbf16>"
    rep = " {dist.placement = #dist.placement<@g, [replicate]>}" if replicated else ""
    collective = (f"  %r = shard.reduce_scatter %p on @g grid_axes = [0] scatter_axis = 0 : {part} -> {act}\n"
                  if scatter else
                  f"  %r = shard.all_reduce %p on @g grid_axes = [0] : {part} -> {act}\n")
    ij, i_, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
    return (f"shard.grid @g(shape = {ranks})\n"
            f"func.func @main(%p: {part}, %res: {act}{rep}, %gamma: tensor<{h}xf32>{rep}) -> ({act}, {act}) {{\n"
            f"  %zero = arith.constant 0.0 : f32\n" + collective +
            f"  %e = tensor.empty() : {act}\n"
            f"  %hs = linalg.generic {{indexing_maps = [{ij}, {ij}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%r, %res : {act}, {act}) outs(%e : {act}) {{\n"
            f"  ^bb0(%x: bf16, %q: bf16, %o: bf16):\n"
            f"    %xf = arith.extf %x : bf16 to f32\n    %qf = arith.extf %q : bf16 to f32\n"
            f"    %s = arith.addf %xf, %qf : f32\n    %st = arith.truncf %s : f32 to bf16\n"
            f"    linalg.yield %st : bf16\n  }} -> {act}\n"
            f"  %se = tensor.empty() : tensor<{rows}xf32>\n"
            f"  %sz = linalg.fill ins(%zero : f32) outs(%se : tensor<{rows}xf32>) -> tensor<{rows}xf32>\n"
            f"  %ss = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = [\"parallel\", \"reduction\"]}} "
            f"ins(%hs : {act}) outs(%sz : tensor<{rows}xf32>) {{\n"
            f"  ^bb0(%x: bf16, %acc: f32):\n    %xf = arith.extf %x : bf16 to f32\n"
            f"    %sq = arith.mulf %xf, %xf : f32\n    %s = arith.addf %acc, %sq : f32\n"
            f"    linalg.yield %s : f32\n  }} -> tensor<{rows}xf32>\n"
            f"  %n = linalg.generic {{indexing_maps = [{ij}, {i_}, {j_}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%hs, %ss, %gamma : {act}, tensor<{rows}xf32>, tensor<{h}xf32>) outs(%e : {act}) {{\n"
            f"  ^bb0(%x: bf16, %s: f32, %g: f32, %o: bf16):\n"
            f"    %inv = arith.constant {1.0 / h:.10e} : f32\n    %eps = arith.constant 1.0e-5 : f32\n"
            f"    %xf = arith.extf %x : bf16 to f32\n    %m = arith.mulf %s, %inv : f32\n"
            f"    %v = arith.addf %m, %eps : f32\n    %rs = math.rsqrt %v : f32\n"
            f"    %t = arith.mulf %xf, %rs : f32\n    %u = arith.mulf %t, %g : f32\n"
            f"    %ut = arith.truncf %u : f32 to bf16\n    linalg.yield %ut : bf16\n  }} -> {act}\n"
            f"  return %hs, %n : {act}, {act}\n}}\n")


def norm_gather_program(ranks, t, h, f):
    """Sequence parallelism before a column-parallel matmul: this rank's
    rows x [t / ranks, h] plus the residual, RMSNorm over h (in f32, weight
    per rank), the normed rows all-gathered and multiplied by W [h, f]
    (bf16, f32 accumulation); returns the residual stream and the
    product."""
    local = t // ranks
    act = f"tensor<{local}x{h}xbf16>"
    ij, i_, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
    return (f"shard.grid @g(shape = {ranks})\n"
            f"func.func @main(%x: {act}, %res: {act}, %gamma: tensor<{h}xf32>, "
            f"%w: tensor<{h}x{f}xbf16>) -> ({act}, tensor<{t}x{f}xf32>) {{\n"
            f"  %cz = arith.constant 0.0 : f32\n"
            f"  %he = tensor.empty() : {act}\n"
            f"  %hs = linalg.generic {{indexing_maps = [{ij}, {ij}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%x, %res : {act}, {act}) outs(%he : {act}) {{\n"
            f"  ^bb0(%a: bf16, %q: bf16, %o: bf16):\n"
            f"    %af = arith.extf %a : bf16 to f32\n    %qf = arith.extf %q : bf16 to f32\n"
            f"    %s = arith.addf %af, %qf : f32\n    %st = arith.truncf %s : f32 to bf16\n"
            f"    linalg.yield %st : bf16\n  }} -> {act}\n"
            f"  %se = tensor.empty() : tensor<{local}xf32>\n"
            f"  %sz = linalg.fill ins(%cz : f32) outs(%se : tensor<{local}xf32>) -> tensor<{local}xf32>\n"
            f"  %ss = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = [\"parallel\", \"reduction\"]}} "
            f"ins(%hs : {act}) outs(%sz : tensor<{local}xf32>) {{\n"
            f"  ^bb0(%a: bf16, %acc: f32):\n    %af = arith.extf %a : bf16 to f32\n"
            f"    %sq = arith.mulf %af, %af : f32\n    %s = arith.addf %acc, %sq : f32\n"
            f"    linalg.yield %s : f32\n  }} -> tensor<{local}xf32>\n"
            f"  %ne = tensor.empty() : {act}\n"
            f"  %n = linalg.generic {{indexing_maps = [{ij}, {i_}, {j_}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
            f"ins(%hs, %ss, %gamma : {act}, tensor<{local}xf32>, tensor<{h}xf32>) outs(%ne : {act}) {{\n"
            f"  ^bb0(%a: bf16, %s: f32, %g: f32, %o: bf16):\n"
            f"    %inv = arith.constant {1.0 / h:.10e} : f32\n    %eps = arith.constant 1.0e-5 : f32\n"
            f"    %af = arith.extf %a : bf16 to f32\n    %m = arith.mulf %s, %inv : f32\n"
            f"    %v = arith.addf %m, %eps : f32\n    %rs = math.rsqrt %v : f32\n"
            f"    %t = arith.mulf %af, %rs : f32\n    %u = arith.mulf %t, %g : f32\n"
            f"    %ut = arith.truncf %u : f32 to bf16\n    linalg.yield %ut : bf16\n  }} -> {act}\n"
            f"  %gn = shard.all_gather %n on @g grid_axes = [0] gather_axis = 0 : {act} -> tensor<{t}x{h}xbf16>\n"
            + bf16_matmul("%gn", "%w", t, h, f) +
            f"  return %hs, %mm : {act}, tensor<{t}x{f}xf32>\n}}\n")


def worker_rows(script, parse, worker):
    """Runs `script` as an mpirun job of args.ranks ranks (args = parse(),
    the command line), one thread each, and returns (args, what rank 0's
    `worker(args, out)` wrote to `out` as JSON). Started by the job itself
    (`script --worker OUT ...`), runs the worker instead and returns
    (None, None)."""
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        out = sys.argv[2]
        del sys.argv[1:3]
        worker(parse(), out)
        return None, None
    args = parse()
    with tempfile.TemporaryDirectory(prefix="braid-bench-") as tmp:
        out = os.path.join(tmp, "rows.json")
        env = dict(os.environ, BRAID_NUM_THREADS="1", OMP_NUM_THREADS="1")
        subprocess.run([os.path.join(ROOT, "scripts", "mpirun.sh"), "-np",
                        str(args.ranks), sys.executable, os.path.abspath(script),
                        "--worker", out, *sys.argv[1:]], check=True, env=env)
        with open(out) as f:
            return args, json.load(f)


def gloo_mesh(out):
    """This rank's (rank, ranks, mesh): one thread, torch.distributed on
    gloo initialized from Braid's ranks (a file store beside `out`), and a
    1-D device mesh of them."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    import braid.program
    torch.set_num_threads(1)
    rank, ranks = braid.program.rank_and_size()
    dist.init_process_group("gloo", init_method=f"file://{out}.store",
                            rank=rank, world_size=ranks)
    return rank, ranks, init_device_mesh("cpu", (ranks,))


def median_ms(call, barrier, args):
    """Median ms of `call` over --repeat calls after --warmup, each after
    `barrier`."""
    times = []
    for i in range(args.warmup + args.repeat):
        barrier()
        start = time.perf_counter()
        call()
        if i >= args.warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
