#!/usr/bin/env python3
"""AllGather + GEMM and GEMM + ReduceScatter at Llama-3-70B TP8 shapes on one
GPU: Braid's fused ring schedules against the serial collective + GEMM.

The shapes are one tensor-parallel layer of Llama-3-70B on 8 GPUs with
sequence parallelism: S = 4096 tokens, hidden H = 8192, the FFN's 28672
split 8 ways (F = 3584), bf16 with f32 accumulation:

  ag: x [S/8, H] --all_gather--> [S, H] @ W [H, F]              (up projection)
  rs: y [S, F] @ W2 [F, H] --reduce_scatter--> [S/8, H]         (down projection)

Each runs on the loopback transport: 8 logical ranks in one process on one
GPU, each with its own compute and comm streams, transfers as device-to-
device copies. The GPU does all 8 ranks' work, so the times are 8 ranks'
worth; what they show is whether the communication hides behind the GEMMs.
Four programs per pattern, all timed by braid-exec-cuda (warm-up, then the
median over --repeat runs, each run's device work synchronized):

  fused   the pattern, --overlap=force (the ring schedule)
  serial  the pattern, --overlap=off (collective, then GEMM)
  gemm    the GEMM alone, on the gathered / full operand
  comm    the collective alone

  R = T_fused / max(T_gemm, T_comm)             (FLUX on H800: 1.13-1.14)
  E = 1 - (T_fused - T_gemm) / (T_serial - T_gemm)   (FLUX's efficiency)

Usage:
  overlap.py prepare BUNDLE [--bin build/bin]   compile (development machine)
  overlap.py run BUNDLE RESULTS [--repeat 20]   time (GPU machine, no LLVM)
"""
import argparse
import json
import os
import re
import subprocess
import sys

TP, S, H, F = 8, 4096, 8192, 3584


def tensor(shape, dtype):
    return "tensor<" + "x".join(str(s) for s in shape) + "x" + dtype + ">"


def matmul(out, a, b, a_shape, b_shape, shape):
    return (f"  %{out}_e = tensor.empty() : {tensor(shape, 'f32')}\n"
            f"  %{out}_z = linalg.fill ins(%zero : f32) outs(%{out}_e : {tensor(shape, 'f32')}) -> {tensor(shape, 'f32')}\n"
            f"  %{out} = linalg.matmul ins(%{a}, %{b} : {tensor(a_shape, 'bf16')}, {tensor(b_shape, 'bf16')}) "
            f"outs(%{out}_z : {tensor(shape, 'f32')}) -> {tensor(shape, 'f32')}\n")


def program(args, body, result, result_shape, result_dtype="f32"):
    params = ", ".join(f"%{name}: {tensor(shape, dtype)}" for name, shape, dtype in args)
    result_type = tensor(result_shape, result_dtype)
    return (f"shard.grid @g(shape = {TP})\n"
            f"func.func @main({params}) -> {result_type} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n" + body +
            f"  return %{result} : {result_type}\n}}\n")


def programs():
    """name -> (MLIR text, overlap mode)."""
    gather = (f"  %g = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0 : "
              f"{tensor((S // TP, H), 'bf16')} -> {tensor((S, H), 'bf16')}\n")
    ag = program([("x", (S // TP, H), "bf16"), ("w", (H, F), "bf16")],
                 gather + matmul("y", "g", "w", (S, H), (H, F), (S, F)), "y", (S, F))
    ag_gemm = program([("g", (S, H), "bf16"), ("w", (H, F), "bf16")],
                      matmul("y", "g", "w", (S, H), (H, F), (S, F)), "y", (S, F))
    ag_comm = program([("x", (S // TP, H), "bf16")], gather, "g", (S, H), "bf16")
    scatter = (f"  %s = shard.reduce_scatter %y on @g grid_axes = [0] scatter_axis = 0 : "
               f"{tensor((S, H), 'f32')} -> {tensor((S // TP, H), 'f32')}\n")
    rs = program([("a", (S, F), "bf16"), ("w", (F, H), "bf16")],
                 matmul("y", "a", "w", (S, F), (F, H), (S, H)) + scatter, "s", (S // TP, H))
    rs_gemm = program([("a", (S, F), "bf16"), ("w", (F, H), "bf16")],
                      matmul("y", "a", "w", (S, F), (F, H), (S, H)), "y", (S, H))
    rs_comm = program([("y", (S, H), "f32")], scatter, "s", (S // TP, H))
    return {
        "ag_fused": (ag, "force"), "ag_serial": (ag, "off"),
        "ag_gemm": (ag_gemm, "off"), "ag_comm": (ag_comm, "off"),
        "rs_fused": (rs, "force"), "rs_serial": (rs, "off"),
        "rs_gemm": (rs_gemm, "off"), "rs_comm": (rs_comm, "off"),
    }


def prepare(args):
    out = os.path.join(args.bundle, "overlap")
    os.makedirs(out, exist_ok=True)
    compiler = os.path.join(args.bin, "braid-compile")
    for name, (text, mode) in programs().items():
        source = os.path.join(out, name + ".mlir")
        with open(source, "w") as f:
            f.write(text)
        cmd = [compiler, source, "--target=cuda", f"--sm={args.sm}",
               f"--overlap={mode}", "--target-preset=h200",
               f"--report={os.path.join(out, name + '.report.json')}",
               "-o", os.path.join(out, name + ".so")]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"overlap.py: compiling {name} failed:\n{proc.stderr}")
        print(f"overlap.py: built {name} (--overlap={mode})")


def time_program(exec_path, library, ranks, repeat, seed):
    cmd = [exec_path, library, f"--loopback={ranks}", "--warmup=5",
           f"--repeat={repeat}", f"--seed={seed}", "--timeout=120"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = re.search(r"median ([0-9.]+) ms", proc.stdout)
    if proc.returncode != 0 or not found:
        sys.exit(f"overlap.py: {' '.join(cmd)} failed ({proc.returncode}):\n"
                 f"{proc.stdout}{proc.stderr}")
    return float(found.group(1))


def run(args):
    out = os.path.join(args.bundle, "overlap")
    exec_path = os.path.join(args.bundle, "bin", "braid-exec-cuda")
    times = {}
    for seed, name in enumerate(programs()):
        times[name] = time_program(exec_path, os.path.join(out, name + ".so"),
                                   TP, args.repeat, seed + 1)
    rows = []
    for pattern, label in (("ag", "AllGather+GEMM"), ("rs", "GEMM+ReduceScatter")):
        t = {kind: times[f"{pattern}_{kind}"] for kind in ("fused", "serial", "gemm", "comm")}
        with open(os.path.join(out, f"{pattern}_fused.report.json")) as f:
            strategies = [c["strategy"] for c in json.load(f)["collectives"]]
        ideal = max(t["gemm"], t["comm"])
        hidden = t["serial"] - t["gemm"]
        rows.append({
            "pattern": label, "shape": {"S": S, "H": H, "F": F, "tp": TP},
            "strategy": strategies,
            "t_gemm_ms": t["gemm"], "t_comm_ms": t["comm"],
            "t_serial_ms": t["serial"], "t_fused_ms": t["fused"],
            "R": t["fused"] / ideal,
            "E": 1 - (t["fused"] - t["gemm"]) / hidden if hidden > 0 else None,
            "fused_over_serial": t["fused"] / t["serial"],
        })
    os.makedirs(args.results, exist_ok=True)
    with open(os.path.join(args.results, "overlap.json"), "w") as f:
        json.dump({"transport": "loopback", "ranks": TP, "rows": rows}, f, indent=2)
    print(f"{'pattern':20} {'T_gemm':>8} {'T_comm':>8} {'T_serial':>9} {'T_fused':>8} {'R':>6} {'E':>6}  (ms, {TP} loopback ranks)")
    for r in rows:
        e = f"{r['E']:.2f}" if r["E"] is not None else "n/a"
        print(f"{r['pattern']:20} {r['t_gemm_ms']:8.3f} {r['t_comm_ms']:8.3f} {r['t_serial_ms']:9.3f} "
              f"{r['t_fused_ms']:8.3f} {r['R']:6.3f} {e:>6}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("bundle")
    p.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "..", "build", "bin"))
    p.add_argument("--sm", default="90a")
    r = sub.add_parser("run")
    r.add_argument("bundle")
    r.add_argument("results")
    r.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    main()
