"""A contraction alone: the GEMM kernels themselves (no collective), over
shapes, layouts and batches."""
import numpy as np

from .core import acc_type, program, tensor


def pattern_gemm(cfg):
    """Each rank multiplies its own operands. The variant is MxNxK, then
    any of: -tn (A stored k x m), -nt (B stored n x k), -bN (N batches,
    linalg.batch_matmul), -acc (accumulating into a third argument instead
    of a zero fill), -epi (then max(y + bias[n], 0) * 0.5 + residual[m, n],
    an elementwise op that alone reads the product), -skew (A is the
    columns 1..k of an m x (k + 1) argument: a view one element off
    alignment, whose rows are k + 1 apart; -stride: columns 0..k-1 of it,
    aligned but with rows k + 1 apart; -offset: columns 1..k of an
    m x (k + 8) argument, rows a multiple of 8 apart but its start one
    element off), -tf32 (f32 checked at the
    tolerance of products of operands rounded to tf32, for --allow-tf32)."""
    parts = (cfg.variant or "70x50x40").split("-")
    m, n, k = (int(s) for s in parts[0].split("x"))
    flags = set(parts[1:])
    batches = [int(f[1:]) for f in flags if f.startswith("b") and f[1:].isdigit()]
    views = {"skew": (1, 1), "stride": (1, 0), "offset": (8, 1)}
    unknown = (flags - {"tn", "nt", "acc", "epi", "tf32"} - set(views)
               - {f"b{b}" for b in batches})
    if unknown:
        raise SystemExit(f"unknown gemm variant flags {sorted(unknown)}")
    view = next((views[f] for f in views if f in flags), None)
    if ("epi" in flags or view) and batches:
        raise SystemExit("gemm: -epi and the views take no batches")
    if view and "tn" in flags:
        raise SystemExit("gemm: the views take A stored m x k")
    dt, acc = cfg.dtype, acc_type(cfg.dtype)
    lead = (batches[0],) if batches else ()
    a_shape = lead + ((k, m) if "tn" in flags else (m, k))
    b_shape = lead + ((n, k) if "nt" in flags else (k, n))
    out = lead + (m, n)
    dims = "(b, m, n, k)" if lead else "(m, n, k)"
    pre = "b, " if lead else ""
    maps = (f"indexing_maps = [affine_map<{dims} -> ({pre}{'k, m' if 'tn' in flags else 'm, k'})>, "
            f"affine_map<{dims} -> ({pre}{'n, k' if 'nt' in flags else 'k, n'})>, "
            f"affine_map<{dims} -> ({pre}m, n)>] ")
    op = "linalg.batch_matmul" if lead else "linalg.matmul"
    params = {"a": tensor(a_shape, dt), "b": tensor(b_shape, dt)}
    a_name, a_arg = "a", a_shape
    if view:
        a_arg = (m, k + view[0])
        params["a"] = tensor(a_arg, dt)
        a_name = "as"
    if "acc" in flags:
        params["c"] = tensor(out, acc)
        init, body = "c", ""
    else:
        init = "z"
        body = (f"  %e = tensor.empty() : {tensor(out, acc)}\n"
                f"  %z = linalg.fill ins(%zero : {acc}) outs(%e : {tensor(out, acc)}) -> {tensor(out, acc)}\n")
    if view:
        body = (f"  %as = tensor.extract_slice %a[0, {view[1]}] [{m}, {k}] [1, 1] : "
                f"{tensor(a_arg, dt)} to {tensor(a_shape, dt)}\n") + body
    body += (f"  %y = {op} {maps}ins(%{a_name}, %b : {tensor(a_shape, dt)}, {tensor(b_shape, dt)}) "
             f"outs(%{init} : {tensor(out, acc)}) -> {tensor(out, acc)}\n")
    result = "y"
    if "epi" in flags:
        params["bias"] = tensor((n,), acc)
        params["res"] = tensor(out, acc)
        t = tensor(out, acc)
        body += (f"  %half = arith.constant 0.5 : {acc}\n"
                 f"  %floor = arith.constant 0.0 : {acc}\n"
                 f"  %oe = tensor.empty() : {t}\n"
                 f"  %o = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, "
                 f"affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
                 f"iterator_types = [\"parallel\", \"parallel\"]}} "
                 f"ins(%y, %bias, %res : {t}, {tensor((n,), acc)}, {t}) outs(%oe : {t}) {{\n"
                 f"  ^bb0(%p: {acc}, %q: {acc}, %r: {acc}, %s: {acc}):\n"
                 f"    %u = arith.addf %p, %q : {acc}\n"
                 f"    %v = arith.maximumf %u, %floor : {acc}\n"
                 f"    %w = arith.mulf %v, %half : {acc}\n"
                 f"    %x = arith.addf %w, %r : {acc}\n"
                 f"    linalg.yield %x : {acc}\n"
                 f"  }} -> {t}\n")
        result = "o"
    text = program(cfg.grid, params, body, (result, tensor(out, acc)),
                   zero=None if "acc" in flags else acc)

    def reference(grid, ins):
        results = []
        for rank in range(len(ins[0])):
            a, b = ins[0][rank], ins[1][rank]
            if view:
                a = a[:, view[1]:view[1] + k]
            if "tn" in flags:
                a = a.swapaxes(-1, -2)
            if "nt" in flags:
                b = b.swapaxes(-1, -2)
            y = a @ b
            if "acc" in flags:
                y = y + ins[2][rank]
            if "epi" in flags:
                bias, res = ins[-2][rank], ins[-1][rank]
                y = np.maximum(y + bias[None, :], 0) * 0.5 + res
            results.append([y])
        return results

    inputs = [(a_arg, dt), (b_shape, dt)] + ([(out, acc)] if "acc" in flags else [])
    if "epi" in flags:
        inputs += [((n,), acc), (out, acc)]
    if "tf32" in flags:
        # Operands to 10 bits of mantissa: each product within 2^-10.
        return text, inputs, [acc], reference, [5e-3]
    return text, inputs, [acc], reference


PATTERNS = {
    "gemm": pattern_gemm,
}
