"""What bench/gpu's steps share: the prepare/run command line, and the
tables they print, which summarize.py prints again so that a step's own
output and run_all.sh's last table read the same (standard library only:
summarize.py runs where nothing else was built)."""
import argparse
import os

DEFAULT_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin")


def command_line(doc, budget, timeout, more=()):
    """(parser, prepare's subparser, run's subparser, and one for each
    command `more` names) of a step's command line, for the step to add its
    own options to: `prepare BUNDLE [--bin]` and
    `run BUNDLE RESULTS [--repeat] [--budget] [--timeout]`."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("bundle")
    p.add_argument("--bin", default=DEFAULT_BIN)
    r = sub.add_parser("run")
    r.add_argument("bundle")
    r.add_argument("results")
    r.add_argument("--repeat", type=int, default=20)
    r.add_argument("--budget", type=float, default=budget,
                   help="seconds for all measurements; later ones are skipped")
    r.add_argument("--timeout", type=float, default=timeout,
                   help="seconds one program may take")
    return (parser, p, r, *(sub.add_parser(name) for name in more))


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def grouped(rows, heading, line):
    """`line(row)` for each row, with `heading(row)` before each run of rows
    that share a label."""
    lines, current = [], None
    for row in rows:
        if row["label"] != current:
            current = row["label"]
            lines.append(heading(row))
        lines.append(line(row))
    return lines


def overlap_header(width):
    """The heading of overlap_lines' table."""
    return (f"{'pattern':{width}} {'T_gemm':>8} {'T_comm':>8} {'T_serial':>9} {'T_fused':>8} "
            f"{'R':>6} {'E':>6} {'T_sym':>8} {'2s/sym':>6} {'T_gen':>8} {'lib/gen':>7}  (ms)")


def overlap_lines(rows, width):
    """bench/gpu/overlap.py's rows, the pattern column `width` wide."""
    def line(r):
        return (f"{r['pattern']:{width}} {fmt(r['t_gemm_ms'], '8.3f'):>8} {fmt(r['t_comm_ms'], '8.3f'):>8} "
                f"{fmt(r['t_serial_ms'], '9.3f'):>9} {fmt(r['t_fused_ms'], '8.3f'):>8} "
                f"{fmt(r['R'], '6.3f'):>6} {fmt(r['E'], '6.2f'):>6} "
                f"{fmt(r.get('t_symmetric_ms'), '8.3f'):>8} "
                f"{fmt(r.get('two_sided_over_symmetric'), '6.3f'):>6} "
                f"{fmt(r.get('t_gemm_gen_ms'), '8.3f'):>8} "
                f"{fmt(r.get('library_over_generated'), '7.3f'):>7}")
    return grouped(rows, lambda r: f"  -- {r['label']}", line)
