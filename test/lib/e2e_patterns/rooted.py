"""Upstream's rooted collectives: gather, reduce, scatter."""
import numpy as np

import spmd

from .core import header, tensor


def pattern_rooted(cfg):
    """Upstream's rooted collectives: a gather along the columns to the last
    rank, a reduce (max, bf16/f16 converted to f32 first) to the first, and
    a scatter of rows from rank 1."""
    n, dt = cfg.group, cfg.dtype
    a = cfg.axis
    z = cfg.scale
    rows, cols = 2 * n * z, 3 * z
    last = n - 1
    x_t = tensor((rows, cols), dt)
    # Variant `dynamic`: the roots are computed at run time (from the
    # group's size), and a broadcast from the last rank joins them.
    dynamic = cfg.variant == "dynamic"
    roots = {"last": f"{last}", "first": "0", "second": f"{1 % n}"}
    prologue = ""
    if dynamic:
        prologue = (f"  %n = shard.grid_shape @g axes = [{a}] : index\n"
                    f"  %c1 = arith.constant 1 : index\n"
                    f"  %last = arith.subi %n, %c1 : index\n"
                    f"  %first = arith.subi %n, %n : index\n"
                    f"  %second = arith.remui %c1, %n : index\n")
        roots = {k: f"%{k}" for k in roots}
    root_types = ", index" if dynamic else ""
    results = [tensor((rows, cols * n), dt), tensor((rows, cols), "f32"), tensor((rows // n, cols), dt)]
    if dynamic:
        results.append(x_t)
    text = (header(cfg.grid) +
            f"func.func @main(%x: {x_t}) -> ({', '.join(results)}) {{\n" + prologue +
            f"  %g = shard.gather %x on @g grid_axes = [{a}] gather_axis = 1 root = [{roots['last']}] : ({x_t}{root_types}) -> {results[0]}\n"
            f"  %r = shard.reduce %x on @g grid_axes = [{a}] reduction = max root = [{roots['first']}] : ({x_t}{root_types}) -> {results[1]}\n"
            f"  %s = shard.scatter %x on @g grid_axes = [{a}] scatter_axis = 0 root = [{roots['second']}] : ({x_t}{root_types}) -> {results[2]}\n" +
            (f"  %b = shard.broadcast %x on @g grid_axes = [{a}] root = [%last] : ({x_t}, index) -> {x_t}\n" if dynamic else "") +
            f"  return %g, %r, %s{', %b' if dynamic else ''} : {', '.join(results)}\n}}\n")

    def ref(grid, ins):
        (x,) = ins
        g = spmd.gather(grid, x, [a], 1, [last])
        r = spmd.all_reduce(grid, [v.astype(np.float32) for v in x], [a], "max")
        s = spmd.scatter(grid, x, [a], 0, [1 % n])
        b = spmd.broadcast(grid, x, [a], [last])
        return [[g[i], r[i], s[i]] + ([b[i]] if dynamic else []) for i in range(grid.size)]
    return text, [((rows, cols), dt)], [dt, "f32", dt] + ([dt] if dynamic else []), ref


PATTERNS = {
    "rooted": pattern_rooted,
}
