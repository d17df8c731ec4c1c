#!/usr/bin/env python3
"""The cost model's predictions for Llama-3-70B-like layers.

Generates one sequence-parallel transformer layer (hidden 8192, FFN 28672,
8192 tokens, bf16) at tensor parallelism 4, 8 and 16, compiles it with
`--overlap=force` (every collective decomposed, so each gets a fused
prediction) on the h100 and h200 presets, and prints, per collective and
its GEMM: T_gemm, T_comm, T_serial, T_fused, R = T_fused / max(T_gemm,
T_comm) and FLUX's efficiency E = 1 - (T_fused - T_gemm) / (T_serial -
T_gemm). FLUX reports R of about 1.13 on H800 for its fused kernels.

These are predictions of Braid's model, not measurements; bench/gpu/ holds
the measurement on a real GPU.

Usage: predict.py [--braid-compile build/bin/braid-compile]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--braid-compile", default=os.path.join(ROOT, "build", "bin", "braid-compile"))
    parser.add_argument("--tp", default="4,8,16")
    parser.add_argument("--presets", default="h100,h200")
    args = parser.parse_args()

    header = (f"{'preset':<6} {'TP':>3} {'collective':<15} {'strategy':<22} {'chunks':>6} "
              f"{'T_gemm':>9} {'T_comm':>9} {'T_serial':>9} {'T_fused':>9} {'R':>6} {'E':>6}")
    print("Predicted times in microseconds (Braid cost model); FLUX on H800: R ~ 1.13")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets.split(","):
            for tp in [int(t) for t in args.tp.split(",")]:
                layer = os.path.join(tmp, f"layer{tp}.mlir")
                subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_transformer.py"),
                                "--layers", "1", "--tp", str(tp), "-o", layer], check=True)
                report = os.path.join(tmp, f"r{tp}{preset}.json")
                subprocess.run([args.braid_compile, layer, "--emit=dist", "--overlap=force",
                                f"--target-preset={preset}", f"--report={report}",
                                "--entry=transformer", "-o", os.devnull],
                               check=True, stderr=subprocess.DEVNULL)
                with open(report) as f:
                    collectives = json.load(f)["collectives"]
                for c in collectives:
                    p = c["predicted"]
                    gemm, comm = p["compute_us"], p["comm_us"]
                    serial, fused = p["serial_us"], p["overlapped_us"]
                    r = fused / max(gemm, comm) if max(gemm, comm) > 0 else float("nan")
                    e = 1 - (fused - gemm) / (serial - gemm) if serial > gemm else float("nan")
                    print(f"{preset:<6} {tp:>3} {c['kind']:<15} {c['strategy'] or '-':<22} {c['chunks']:>6} "
                          f"{gemm:>9.1f} {comm:>9.1f} {serial:>9.1f} {fused:>9.1f} {r:>6.2f} {e:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
