"""Small all-reduces of one group sent as one bucket (pattern
`bucket_ar`)."""
import numpy as np

import spmd

from .core import header, matmul, tensor


def pattern_bucket(cfg):
    """A data-parallel step's gradients: a weight's (a contraction over
    the rank's rows), a bias's and a 3-D one, each summed over the group,
    while an independent matmul runs; one all-reduce of a flat bucket."""
    dt, a = cfg.dtype, cfg.axis
    acc = dt
    s = {"x": (4, 16), "dy": (16, 8), "w": (4, 8), "b": (8,),
         "c": (2, 3, 4), "p": (16, 16)}
    t = {k: tensor(v, dt) for k, v in s.items()}
    reduce = ("  %{0}r = shard.all_reduce %{0} on @g grid_axes = [{1}] "
              "reduction = sum : {2} -> {2}\n")
    text = (header(cfg.grid) +
            f"func.func @main(%x: {t['x']}, %dy: {t['dy']}, %b: {t['b']}, "
            f"%c: {t['c']}, %p: {t['p']}) -> ({t['w']}, {t['b']}, {t['c']}, "
            f"{t['p']}) {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" +
            matmul("w", "x", "dy", t["x"], t["dy"], s["w"], acc) +
            reduce.format("w", a, t["w"]) + reduce.format("b", a, t["b"]) +
            reduce.format("c", a, t["c"]) +
            matmul("m", "p", "p", t["p"], t["p"], s["p"], acc) +
            f"  return %wr, %br, %cr, %m : {t['w']}, {t['b']}, {t['c']}, "
            f"{t['p']}\n}}\n")

    def ref(grid, ins):
        x, dy, b, c, p = ins
        w = [x[i] @ dy[i] for i in range(grid.size)]
        wr = spmd.all_reduce(grid, w, [a])
        br = spmd.all_reduce(grid, b, [a])
        cr = spmd.all_reduce(grid, c, [a])
        return [[wr[i], br[i], cr[i], np.matmul(p[i], p[i])]
                for i in range(grid.size)]
    specs = [(s[k], dt) for k in ("x", "dy", "b", "c", "p")]
    return text, specs, [dt] * 4, ref


PATTERNS = {
    "bucket": pattern_bucket,
}
