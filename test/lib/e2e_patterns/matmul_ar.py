"""Row-parallel matmul, all-reduce, then elementwise work."""
import numpy as np

import spmd

from .core import header, matmul, replicated, tensor


GELU = """\
  ^bb0(%v: f32, %bb: f32, %o: f32):
    %s = arith.addf %v, %bb : f32
    %t = math.tanh %s : f32
    %act = arith.mulf %s, %t : f32
    linalg.yield %act : f32"""


def pattern_matmul_ar(cfg):
    """Row-parallel matmul, all-reduce, then bias + activation + residual +
    cast. Variant `replicated`: the bias carries a replicate placement and
    the residual is an all-gather result, so the elementwise work moves
    between reduce-scatter and all-gather. Variant `unproven`: the same
    program without the placement (each rank's bias differs): the work must
    stay after the all-reduce and each rank's result differs."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    m, k, c = 4 * n * z, 8 * z, 12 * z
    bias_attr = replicated(cfg.grid) if cfg.variant == "replicated" else ""
    maps2 = "[affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>]"
    maps3 = "[affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>]"
    text = (header(cfg.grid) +
            f"func.func @main(%h: {tensor((m, k), 'f32')}, %w: {tensor((k, c), 'f32')}, "
            f"%bias: {tensor((c,), 'f32')}{bias_attr}, %xs: {tensor((m // n, c), 'f32')}) -> {tensor((m, c), dt)} {{\n"
            f"  %zero = arith.constant 0.0 : f32\n" +
            matmul("y", "h", "w", tensor((m, k), "f32"), tensor((k, c), "f32"), (m, c), "f32") +
            f"  %x = shard.all_gather %xs on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor((m // n, c), 'f32')} -> {tensor((m, c), 'f32')}\n"
            f"  %r = shard.all_reduce %y on @g grid_axes = [{cfg.axis}] : {tensor((m, c), 'f32')} -> {tensor((m, c), 'f32')}\n"
            f"  %e = tensor.empty() : {tensor((m, c), 'f32')}\n"
            f"  %b = linalg.generic {{indexing_maps = {maps2}, iterator_types = [\"parallel\", \"parallel\"]}}\n"
            f"      ins(%r, %bias : {tensor((m, c), 'f32')}, {tensor((c,), 'f32')}) outs(%e : {tensor((m, c), 'f32')}) {{\n{GELU}\n"
            f"  }} -> {tensor((m, c), 'f32')}\n"
            f"  %e2 = tensor.empty() : {tensor((m, c), dt)}\n"
            f"  %o = linalg.generic {{indexing_maps = {maps3}, iterator_types = [\"parallel\", \"parallel\"]}}\n"
            f"      ins(%b, %x : {tensor((m, c), 'f32')}, {tensor((m, c), 'f32')}) outs(%e2 : {tensor((m, c), dt)}) {{\n"
            f"  ^bb0(%v: f32, %res: f32, %out: {dt}):\n"
            f"    %s = arith.addf %v, %res : f32\n" +
            (f"    %t = arith.truncf %s : f32 to {dt}\n    linalg.yield %t : {dt}\n" if dt != "f32"
             else "    linalg.yield %s : f32\n") +
            f"  }} -> {tensor((m, c), dt)}\n"
            f"  return %o : {tensor((m, c), dt)}\n}}\n")

    def ref(grid, ins):
        h, w, bias, xs = ins
        r = spmd.all_reduce(grid, [hr @ wr for hr, wr in zip(h, w)], [cfg.axis])
        x = spmd.all_gather(grid, xs, [cfg.axis], 0)
        out = []
        for rank in range(grid.size):
            s = r[rank] + bias[rank]
            out.append([s * np.tanh(s) + x[rank]])
        return out
    # The placement promises the same bias on every rank: the inputs keep
    # the promise.
    bias_spec = ((c,), "f32", "replicated") if cfg.variant == "replicated" else ((c,), "f32")
    specs = [((m, k), "f32"), ((k, c), "f32"), bias_spec, ((m // n, c), "f32")]
    return text, specs, [dt], ref


PATTERNS = {
    "matmul_ar": pattern_matmul_ar,
}
