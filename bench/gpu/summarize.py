#!/usr/bin/env python3
"""The last table of bench/gpu/run_all.sh: reads the JSON figures in RESULTS,
prints one table, writes RESULTS/summary.json, and exits 1 when a target is
missed (R > 1.15, epilogue > 1.05x bare GEMM, fused slower than serial, a
fused kernel under 0.85 of copy bandwidth or slower than torch.compile, an
end-to-end failure).

Usage: summarize.py RESULTS
"""
import json
import os
import sys


def load(results, name):
    path = os.path.join(results, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def main():
    results = sys.argv[1]
    e2e = load(results, "e2e.json")
    micro = load(results, "microbench.json")
    overlap = load(results, "overlap.json")
    fusion = load(results, "torch_fusion.json")
    lines, missed, summary = [], [], {}

    if e2e:
        lines.append(f"end-to-end on the GPU: {e2e['passed']}/{e2e['configurations']} configurations pass")
        if e2e["failed"]:
            missed.append("end-to-end failures")
        summary["e2e"] = e2e

    copy_gbps = None
    if micro:
        copy_gbps = micro["copy"]["copy_gbps"]
        lines.append(f"device-to-device copy: {copy_gbps:.0f} GB/s (read + written)")
        lines.append(f"{'GEMM (M, N, K) bf16':26} {'bare ms':>8} {'epilogue':>9} {'separate':>9}  (x bare)")
        for row in micro["gemm_epilogue"]:
            shape = f"({row['M']}, {row['N']}, {row['K']})"
            lines.append(f"{shape:26} {row['t_bare_ms']:8.3f} {row['epilogue_over_bare']:9.3f} {row['separate_over_bare']:9.3f}")
            if row["epilogue_over_bare"] > 1.05:
                missed.append(f"GEMM epilogue {shape} at {row['epilogue_over_bare']:.3f}x bare (target <= 1.05)")
        summary["microbench"] = micro

    if overlap:
        lines.append(f"{'overlap (8 loopback ranks)':26} {'T_gemm':>8} {'T_comm':>8} {'T_serial':>9} {'T_fused':>8} {'R':>6} {'E':>6}")
        for row in overlap["rows"]:
            e = f"{row['E']:.2f}" if row["E"] is not None else "n/a"
            lines.append(f"{row['pattern']:26} {row['t_gemm_ms']:8.3f} {row['t_comm_ms']:8.3f} {row['t_serial_ms']:9.3f} {row['t_fused_ms']:8.3f} {row['R']:6.3f} {e:>6}")
            if row["R"] > 1.15:
                missed.append(f"{row['pattern']}: R = {row['R']:.3f} (target <= 1.15)")
            if row["t_fused_ms"] > row["t_serial_ms"]:
                missed.append(f"{row['pattern']}: fused slower than serial")
        summary["overlap"] = overlap

    if fusion:
        lines.append(f"{'fusion 16384x8192 bf16':26} {'braid ms':>8} {'GB/s':>7} {'/copy':>6} {'eager':>7} {'compile':>8} {'compile/braid':>13}")
        for row in fusion["patterns"]:
            braid_ms = row.get("braid_ms")
            if braid_ms is None:
                lines.append(f"{row['pattern']:26} (no Braid time)")
                missed.append(f"{row['pattern']}: no Braid time")
                continue
            fraction = row["braid_gbps"] / copy_gbps if copy_gbps else float("nan")
            row["braid_over_copy_bandwidth"] = fraction
            lines.append(f"{row['pattern']:26} {braid_ms:8.3f} {row['braid_gbps']:7.0f} {fraction:6.2f} "
                         f"{row['eager_ms']:7.3f} {row['compile_ms']:8.3f} {row['braid_over_compile']:13.2f}")
            if fraction < 0.85:
                missed.append(f"{row['pattern']}: {fraction:.2f} of copy bandwidth (target >= 0.85)")
            if row["braid_over_compile"] < 1.0:
                missed.append(f"{row['pattern']}: {row['braid_over_compile']:.2f}x torch.compile (target >= 1.0)")
        summary["fusion"] = fusion

    summary["missed"] = missed
    with open(os.path.join(results, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print("\n".join(lines))
    print("targets missed:" if missed else "all targets met")
    for m in missed:
        print(f"  - {m}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
