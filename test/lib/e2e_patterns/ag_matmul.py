"""all_gather feeding a matmul."""
import spmd

from .core import acc_type, matmul, program, tensor


def pattern_ag_matmul(cfg):
    """all_gather feeding a matmul: rows of A, columns of B (through a
    transposed-B matmul), or the reduction dimension."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    m, k, c = 4 * z, 16 * z, 12 * z
    if cfg.variant == "rows":
        xs, ws = (m, k), (k, c)
        g = (n * m, k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "g", "w", tensor(g, dt), tensor(ws, dt), (n * m, c), acc))
        ref = lambda grid, x, w: [gx @ wr for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 0), w)]
        out = (n * m, c)
    elif cfg.variant == "cols":
        xs, ws = (c, k), (m, k)        # x: this rank's rows of B^T; w: A
        g = (n * c, k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "w", "g", tensor(ws, dt), tensor(g, dt), (m, n * c), acc, maps="nt"))
        ref = lambda grid, x, w: [wr @ gx.T for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 0), w)]
        out = (m, n * c)
    elif cfg.variant == "reduction":
        xs, ws = (m, k), (n * k, c)
        g = (m, n * k)
        body = (f"  %g = shard.all_gather %x on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(xs, dt)} -> {tensor(g, dt)}\n"
                + matmul("y", "g", "w", tensor(g, dt), tensor(ws, dt), (m, c), acc))
        ref = lambda grid, x, w: [gx @ wr for gx, wr in zip(spmd.all_gather(grid, x, [cfg.axis], 1), w)]
        out = (m, c)
    else:
        raise SystemExit(f"unknown variant {cfg.variant}")
    text = program(cfg.grid, {"x": tensor(xs, dt), "w": tensor(ws, dt)}, body, ("y", tensor(out, acc)), zero=acc)
    return text, [(xs, dt), (ws, dt)], [acc], lambda grid, ins: [[y] for y in ref(grid, *ins)]


PATTERNS = {
    "ag_matmul": pattern_ag_matmul,
}
