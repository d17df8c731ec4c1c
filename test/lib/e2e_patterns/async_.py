"""Collectives with independent compute around them (pattern `async`)."""
import spmd

from .core import header, matmul, tensor


def pattern_async(cfg):
    """Collectives with independent compute around them: a gradient
    all-reduce, a broadcast, a ring shift and an all-to-all whose results
    only reach the return, while a matmul runs."""
    n, dt = cfg.group, cfg.dtype
    a = cfg.axis
    shapes = {"g": (4, 2 * n), "v": (2 * n, 4), "p": (8, 8)}
    text = (header(cfg.grid) +
            f"func.func @main(%g: {tensor(shapes['g'], dt)}, %v: {tensor(shapes['v'], dt)}, %p: {tensor(shapes['p'], dt)}) -> "
            f"({tensor(shapes['g'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['p'], dt)}) {{\n"
            f"  %zero = arith.constant 0.0 : {dt}\n"
            f"  %r = shard.all_reduce %g on @g grid_axes = [{a}] reduction = max : {tensor(shapes['g'], dt)} -> {tensor(shapes['g'], dt)}\n"
            f"  %b = shard.broadcast %v on @g grid_axes = [{a}] root = [1] : ({tensor(shapes['v'], dt)}) -> {tensor(shapes['v'], dt)}\n"
            f"  %s = shard.shift %v on @g grid_axes = [{a}] shift_axis = {a} offset = -1 rotate : {tensor(shapes['v'], dt)} -> {tensor(shapes['v'], dt)}\n"
            f"  %t = shard.all_to_all %v on @g grid_axes = [{a}] split_axis = 0 concat_axis = 0 : {tensor(shapes['v'], dt)} -> {tensor(shapes['v'], dt)}\n" +
            matmul("m", "p", "p", tensor(shapes['p'], dt), tensor(shapes['p'], dt), shapes['p'], dt) +
            f"  return %r, %b, %s, %t, %m : {tensor(shapes['g'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['v'], dt)}, {tensor(shapes['p'], dt)}\n}}\n")

    def ref(grid, ins):
        g, v, p = ins
        r = spmd.all_reduce(grid, g, [a], "max")
        b = spmd.broadcast(grid, v, [a], [1])
        s = spmd.shift(grid, v, a, -1)
        t = spmd.all_to_all(grid, v, [a], 0, 0)
        return [[r[i], b[i], s[i], t[i], p[i] @ p[i]] for i in range(grid.size)]
    return text, [(shapes["g"], dt), (shapes["v"], dt), (shapes["p"], dt)], [dt] * 5, ref


PATTERNS = {
    "async": pattern_async,
}
