"""A transformer layer's norm around its collectives: ar_norm (all-reduce, then
residual add and norm) and norm_ag (norm, then all-gather into a matmul),
sequence parallelism's two halves, sharing the norm's text and reference."""
import numpy as np

import spmd

from .core import acc_type, header, matmul, quantize, replicated, tensor, tolerance


class NormText:
    """MLIR text of the residual add and the norm (RMSNorm, or LayerNorm
    with `layer`) over the last dimension of [m, c] rows in `dt`, computing
    in f32: what a transformer layer does around its collectives."""

    def __init__(self, m, c, dt, layer):
        self.m, self.c, self.dt, self.layer = m, c, dt, layer
        self.t2, self.t1 = tensor((m, c), dt), tensor((c,), "f32")
        self.rows = tensor((m,), "f32")

    def ext(self, name):
        return (f"    %{name}f = arith.extf %{name} : {self.dt} to f32\n" if self.dt != "f32" else
                f"    %{name}f = arith.addf %{name}, %cz : f32\n")

    def trunc(self, name):
        return (f"    %{name}t = arith.truncf %{name} : f32 to {self.dt}\n    linalg.yield %{name}t : {self.dt}\n"
                if self.dt != "f32" else f"    linalg.yield %{name} : f32\n")

    def residual(self, out, r, res, bias=None):
        """%out = r (+ bias) + res."""
        dt, t2, t1 = self.dt, self.t2, self.t1
        ij, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (j)>"
        return (f"  %{out}e = tensor.empty() : {t2}\n"
                f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {ij}" + (f", {j_}" if bias else "") +
                f", {ij}], iterator_types = [\"parallel\", \"parallel\"]}} ins(%{r}, %{res}" + (f", %{bias}" if bias else "") +
                f" : {t2}, {t2}" + (f", {t1}" if bias else "") + f") outs(%{out}e : {t2}) {{\n"
                f"  ^bb0(%x: {dt}, %q: {dt}, " + ("%bb: f32, " if bias else "") + f"%o: {dt}):\n"
                "    %cz = arith.constant 0.0 : f32\n" + self.ext("x") + self.ext("q") +
                ("    %xb = arith.addf %xf, %bb : f32\n    %hs = arith.addf %xb, %qf : f32\n" if bias else
                 "    %hs = arith.addf %xf, %qf : f32\n") + self.trunc("hs") + f"  }} -> {t2}\n")

    def norm(self, out, h, gamma, beta=None):
        """%out = norm(%h) * gamma (+ beta); needs %zero (f32) in scope."""
        dt, t2, t1, rows, c = self.dt, self.t2, self.t1, self.rows, self.c
        red2 = '["parallel", "reduction"]'
        par2 = '["parallel", "parallel"]'
        ij, i_, j_ = "affine_map<(i, j) -> (i, j)>", "affine_map<(i, j) -> (i)>", "affine_map<(i, j) -> (j)>"
        text = (f"  %{out}se = tensor.empty() : {rows}\n"
                f"  %{out}sz = linalg.fill ins(%zero : f32) outs(%{out}se : {rows}) -> {rows}\n")
        if self.layer:
            return text + (
                f"  %{out}s1 = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = {red2}}} "
                f"ins(%{h} : {t2}) outs(%{out}sz : {rows}) {{\n"
                f"  ^bb0(%x: {dt}, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n" + self.ext("x") +
                f"    %s = arith.addf %acc, %xf : f32\n    linalg.yield %s : f32\n  }} -> {rows}\n"
                f"  %{out}s2 = linalg.generic {{indexing_maps = [{ij}, {i_}, {i_}], iterator_types = {red2}}} "
                f"ins(%{h}, %{out}s1 : {t2}, {rows}) outs(%{out}sz : {rows}) {{\n"
                f"  ^bb0(%x: {dt}, %mu: f32, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n"
                f"    %inv = arith.constant {1.0 / c:.10e} : f32\n" + self.ext("x") +
                "    %mean = arith.mulf %mu, %inv : f32\n    %d = arith.subf %xf, %mean : f32\n"
                "    %dd = arith.mulf %d, %d : f32\n    %s = arith.addf %acc, %dd : f32\n"
                f"    linalg.yield %s : f32\n  }} -> {rows}\n"
                f"  %{out}e = tensor.empty() : {t2}\n"
                f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {i_}, {i_}, {j_}, {j_}, {ij}], iterator_types = {par2}}} "
                f"ins(%{h}, %{out}s1, %{out}s2, %{gamma}, %{beta} : {t2}, {rows}, {rows}, {t1}, {t1}) outs(%{out}e : {t2}) {{\n"
                f"  ^bb0(%x: {dt}, %mu: f32, %var: f32, %g: f32, %be: f32, %o: {dt}):\n"
                f"    %cz = arith.constant 0.0 : f32\n    %inv = arith.constant {1.0 / c:.10e} : f32\n"
                "    %eps = arith.constant 1.0e-5 : f32\n" + self.ext("x") +
                "    %mean = arith.mulf %mu, %inv : f32\n    %d = arith.subf %xf, %mean : f32\n"
                "    %v = arith.mulf %var, %inv : f32\n    %ve = arith.addf %v, %eps : f32\n"
                "    %rs = math.rsqrt %ve : f32\n    %t = arith.mulf %d, %rs : f32\n"
                "    %tg = arith.mulf %t, %g : f32\n    %u = arith.addf %tg, %be : f32\n" + self.trunc("u") +
                f"  }} -> {t2}\n")
        return text + (
            f"  %{out}ss = linalg.generic {{indexing_maps = [{ij}, {i_}], iterator_types = {red2}}} "
            f"ins(%{h} : {t2}) outs(%{out}sz : {rows}) {{\n"
            f"  ^bb0(%x: {dt}, %acc: f32):\n    %cz = arith.constant 0.0 : f32\n" + self.ext("x") +
            "    %sq = arith.mulf %xf, %xf : f32\n    %s = arith.addf %acc, %sq : f32\n"
            f"    linalg.yield %s : f32\n  }} -> {rows}\n"
            f"  %{out}e = tensor.empty() : {t2}\n"
            f"  %{out} = linalg.generic {{indexing_maps = [{ij}, {i_}, {j_}, {ij}], iterator_types = {par2}}} "
            f"ins(%{h}, %{out}ss, %{gamma} : {t2}, {rows}, {t1}) outs(%{out}e : {t2}) {{\n"
            f"  ^bb0(%x: {dt}, %s: f32, %g: f32, %o: {dt}):\n"
            f"    %cz = arith.constant 0.0 : f32\n    %inv = arith.constant {1.0 / c:.10e} : f32\n"
            "    %eps = arith.constant 1.0e-5 : f32\n" + self.ext("x") +
            "    %m = arith.mulf %s, %inv : f32\n    %v = arith.addf %m, %eps : f32\n"
            "    %rs = math.rsqrt %v : f32\n    %t = arith.mulf %xf, %rs : f32\n"
            "    %u = arith.mulf %t, %g : f32\n" + self.trunc("u") + f"  }} -> {t2}\n")


def norm_reference(h, gamma, beta=None):
    """RMSNorm (beta None) or LayerNorm of the rows of h, in float64."""
    if beta is not None:
        mu = h.mean(axis=1, keepdims=True)
        var = ((h - mu) ** 2).mean(axis=1, keepdims=True)
        return (h - mu) / np.sqrt(var + 1e-5) * gamma + beta
    return h / np.sqrt((h * h).mean(axis=1, keepdims=True) + 1e-5) * gamma


def pattern_ar_norm(cfg):
    """Row-parallel matmul, all-reduce, residual add (variant `rms`) or bias
    + residual add (variant `layer`), then RMSNorm or LayerNorm over the
    hidden dimension; returns the residual stream and the normed rows, as a
    transformer layer does. The activations are in the test's dtype, the
    norm computes in f32. The norm's weights differ per rank (no placement):
    every schedule must apply each rank's own, as the unsplit program does.
    `--scale` multiplies the tokens (4 per unit: decode at 1, prefill at 64
    and more). Variants `sp-rms` and `sp-layer` reduce-scatter the rows
    instead (sequence parallelism): the residual and the results are this
    rank's rows."""
    n, dt = cfg.group, cfg.dtype
    scatter = cfg.variant.startswith("sp-")
    # norm-rep / norm-own: RMSNorm, only the normed rows returned, its
    # weight replicated (placement) or each rank's own.
    norm_only = cfg.variant in ("norm-rep", "norm-own")
    # rms-rep / layer-rep: as rms / layer, every norm weight replicated
    # (placement), so that the whole chain may run on a rank's rows.
    weights_rep = cfg.variant in ("norm-rep", "rms-rep", "layer-rep")
    base = cfg.variant[:-4] if cfg.variant in ("rms-rep", "layer-rep") else cfg.variant
    norm = "rms" if norm_only else base[3:] if scatter else base
    layer = norm == "layer"
    if norm not in ("rms", "layer"):
        raise SystemExit("e2e.py: ar_norm needs --variant rms, layer, rms-rep, "
                         "layer-rep, sp-rms, sp-layer, norm-rep or norm-own")
    k, c = 16, 64
    full = 4 * cfg.scale * (n if scatter else 1)
    m = full // n if scatter else full
    rep = replicated(cfg.grid)
    res_attr = "" if scatter else rep
    ops = NormText(m, c, dt, layer)
    t2, t1 = ops.t2, ops.t1
    tp = tensor((full, c), dt)
    ij = "affine_map<(i, j) -> (i, j)>"
    text = header(cfg.grid)
    text += (f"func.func @main(%a: {tensor((full, k), 'f32')}, %w: {tensor((k, c), 'f32')}, "
             f"%res: {t2}{res_attr}, %gamma: {t1}" + (rep if weights_rep else "") +
             (f", %bias: {t1}{rep}, %beta: {t1}" + (rep if weights_rep else "") if layer else "") +
             (f") -> {t2} {{\n" if norm_only else f") -> ({t2}, {t2}) {{\n") +
             f"  %zero = arith.constant 0.0 : f32\n" +
             matmul("y", "a", "w", tensor((full, k), "f32"), tensor((k, c), "f32"), (full, c), "f32"))
    if dt != "f32":
        text += (f"  %pe = tensor.empty() : {tp}\n"
                 f"  %p = linalg.generic {{indexing_maps = [{ij}, {ij}], iterator_types = [\"parallel\", \"parallel\"]}} "
                 f"ins(%y : {tensor((full, c), 'f32')}) outs(%pe : {tp}) {{\n"
                 f"  ^bb0(%v: f32, %o: {dt}):\n" + ops.trunc("v") + f"  }} -> {tp}\n")
    partial = "p" if dt != "f32" else "y"
    if scatter:
        text += (f"  %r = shard.reduce_scatter %{partial} on @g grid_axes = [{cfg.axis}] "
                 f"scatter_axis = 0 : {tp} -> {t2}\n")
    else:
        text += f"  %r = shard.all_reduce %{partial} on @g grid_axes = [{cfg.axis}] : {t2} -> {t2}\n"
    # The residual stream: r (+ bias) + res, then its norm.
    text += ops.residual("h", "r", "res", "bias" if layer else None)
    text += ops.norm("n", "h", "gamma", "beta" if layer else None)
    text += (f"  return %n : {t2}\n}}\n" if norm_only else
             f"  return %h, %n : {t2}, {t2}\n}}\n")

    def ref(grid, ins):
        a, w, res, gamma = ins[:4]
        partial = [quantize(ar @ wr, dt) for ar, wr in zip(a, w)]
        r = (spmd.reduce_scatter(grid, partial, [cfg.axis], 0) if scatter else
             spmd.all_reduce(grid, partial, [cfg.axis]))
        out = []
        for rank in range(grid.size):
            h = r[rank] + res[rank] + (ins[4][rank] if layer else 0)
            y = norm_reference(h, gamma[rank], ins[5][rank] if layer else None)
            out.append([y] if norm_only else [h, y])
        return out
    specs = [((full, k), "f32"), ((k, c), "f32"),
             ((m, c), dt) if scatter else ((m, c), dt, "replicated"),
             ((c,), "f32", "replicated") if weights_rep else ((c,), "f32")]
    if layer:
        specs += [((c,), "f32", "replicated"),
                  ((c,), "f32", "replicated") if weights_rep else ((c,), "f32")]
    return text, specs, [dt] if norm_only else [dt, dt], ref


def pattern_norm_ag(cfg):
    """Sequence parallelism's other half: this rank's rows, the residual
    add and its norm (RMSNorm, or LayerNorm with variant `layer`), then the
    normed rows all-gathered into a column-parallel matmul (in bf16 with f32
    accumulation for bf16). Returns the residual stream (this rank's rows)
    and the product. The norm's weights differ per rank. Variants
    `rms-after` and `rms-after-rep`: the gather comes first and the norm
    runs on the gathered rows, its weight each rank's own (the chain must
    stay after the gather: the trap) or replicated (it moves before the
    gather, onto this rank's rows). Variant `rms-tf32`: `rms` with the
    product checked at the tolerance of operands rounded to tf32 (for f32
    under --allow-tf32). `--scale` is the tokens per rank."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    if cfg.variant not in ("rms", "layer", "rms-after", "rms-after-rep",
                           "rms-tf32"):
        raise SystemExit("e2e.py: norm_ag needs --variant rms, layer, "
                         "rms-after, rms-after-rep or rms-tf32")
    tf32 = cfg.variant == "rms-tf32"
    layer = cfg.variant == "layer"
    after = cfg.variant.startswith("rms-after")
    m, c, o = cfg.scale, 64, 48
    ops = NormText(m, c, dt, layer)
    whole = NormText(n * m, c, dt, layer)
    t2, t1, tg = ops.t2, ops.t1, tensor((n * m, c), dt)
    rep = replicated(cfg.grid)
    gamma_attr = rep if cfg.variant == "rms-after-rep" else ""
    text = header(cfg.grid)
    text += (f"func.func @main(%xs: {t2}, %res: {t2}, %gamma: {t1}{gamma_attr}" +
             (f", %beta: {t1}" if layer else "") +
             f", %w: {tensor((c, o), dt)}) -> ({t2}, {tensor((n * m, o), acc)}) {{\n"
             f"  %zero = arith.constant 0.0 : f32\n")
    if acc != "f32":
        text += f"  %zacc = arith.constant 0.0 : {acc}\n"
    text += ops.residual("h", "xs", "res")
    if after:
        text += (f"  %hg = shard.all_gather %h on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {t2} -> {tg}\n"
                 + whole.norm("g", "hg", "gamma"))
    else:
        text += (ops.norm("n", "h", "gamma", "beta" if layer else None) +
                 f"  %g = shard.all_gather %n on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {t2} -> {tg}\n")
    text += (matmul("y", "g", "w", tg, tensor((c, o), dt), (n * m, o), acc).replace(
                 "%zero", "%zero" if acc == "f32" else "%zacc") +
             f"  return %h, %y : {t2}, {tensor((n * m, o), acc)}\n}}\n")

    def ref(grid, ins):
        x, res, gamma = ins[:3]
        w = ins[-1]
        hs = [quantize(xr + rr, dt) for xr, rr in zip(x, res)]
        if after:
            gathered = spmd.all_gather(grid, hs, [cfg.axis], 0)
            gs = [quantize(norm_reference(g, gamma[rank]), dt)
                  for rank, g in enumerate(gathered)]
        else:
            ns = [quantize(norm_reference(hs[rank], gamma[rank], ins[3][rank] if layer else None), dt)
                  for rank in range(grid.size)]
            gs = spmd.all_gather(grid, ns, [cfg.axis], 0)
        return [[hs[rank], gs[rank] @ w[rank]] for rank in range(grid.size)]
    specs = [((m, c), dt), ((m, c), dt),
             ((c,), "f32", "replicated") if gamma_attr else ((c,), "f32")]
    if layer:
        specs.append(((c,), "f32"))
    specs.append(((c, o), dt))
    # The product of rows rounded to the dtype: its error is the dtype's
    # (tf32: operands to 10 bits of mantissa, each product within 2^-10).
    return text, specs, [dt, acc], ref, [tolerance(dt),
                                         5e-3 if tf32 else tolerance(dt)]


PATTERNS = {
    "ar_norm": pattern_ar_norm,
    "norm_ag": pattern_norm_ag,
}
