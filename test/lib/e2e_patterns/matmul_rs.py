"""A matmul whose result is reduce-scattered."""
import spmd

from .core import acc_type, matmul, program, tensor


def pattern_matmul_rs(cfg):
    """A matmul whose result is reduce-scattered along rows or columns."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    m, k, c = 4 * n * z, 16 * z, 4 * n * z
    dim = 0 if cfg.variant == "rows" else 1
    out = (m // n, c) if dim == 0 else (m, c // n)
    text = program(cfg.grid, {"a": tensor((m, k), dt), "b": tensor((k, c), dt)}, (
        matmul("y", "a", "b", tensor((m, k), dt), tensor((k, c), dt), (m, c), acc) +
        f"  %s = shard.reduce_scatter %y on @g grid_axes = [{cfg.axis}] scatter_axis = {dim} : {tensor((m, c), acc)} -> {tensor(out, acc)}\n"),
        ("s", tensor(out, acc)), zero=acc)

    def ref(grid, ins):
        a, b = ins
        ys = [ar @ br for ar, br in zip(a, b)]
        return [[s] for s in spmd.reduce_scatter(grid, ys, [cfg.axis], dim)]
    return text, [((m, k), dt), ((k, c), dt)], [acc], ref


PATTERNS = {
    "matmul_rs": pattern_matmul_rs,
}
