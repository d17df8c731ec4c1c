#!/usr/bin/env python3
"""Prints a braid-overlap JSON report (braid-compile --report) as a table."""
import json
import sys


def main():
    if len(sys.argv) != 2:
        print("usage: report_table.py REPORT.json", file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        report = json.load(f)
    rows = [("collective", "where", "decision", "with", "strategy", "chunks",
             "compute us", "comm us", "serial us", "overlapped us")]
    for c in report["collectives"]:
        p = c["predicted"]
        rows.append((c["kind"], c["loc"].rsplit("/", 1)[-1], c["decision"],
                     c["with"] or "-", c["strategy"] or "-", str(c["chunks"] or "-"),
                     f"{p['compute_us']:.1f}", f"{p['comm_us']:.1f}",
                     f"{p['serial_us']:.1f}", f"{p['overlapped_us']:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print(f"   target preset {report['target_preset']}, overlap={report['mode']}")
    for r in rows:
        print("   " + "  ".join(v.ljust(w) if i < 6 else v.rjust(w)
                                for i, (v, w) in enumerate(zip(r, widths))))
    for c in report["collectives"]:
        if c["reason"]:
            print(f"   {c['loc'].rsplit('/', 1)[-1]}: {c['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
