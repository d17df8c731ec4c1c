"""Expert-parallel all-to-all around a matmul."""
import spmd

from .core import acc_type, matmul, program, tensor


def pattern_a2a(cfg):
    """Expert-parallel all-to-all: dispatch feeding the expert matmul, or
    combine after it."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    t, h, f = 2 * n * z, 8 * z, 6 * z
    params = {"x": tensor((t, h), dt), "w": tensor((h, f), dt)}
    if cfg.variant == "dispatch":
        text = program(cfg.grid, params, (
            f"  %d = shard.all_to_all %x on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, h), dt)} -> {tensor((t, h), dt)}\n" +
            matmul("y", "d", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc)),
            ("y", tensor((t, f), acc)), zero=acc)

        def ref(grid, ins):
            x, w = ins
            d = spmd.all_to_all(grid, x, [cfg.axis], 0, 0)
            return [[dr @ wr] for dr, wr in zip(d, w)]
        return text, [((t, h), dt), ((h, f), dt)], [acc], ref
    text = program(cfg.grid, params, (
        matmul("y", "x", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc) +
        f"  %c = shard.all_to_all %y on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, f), acc)} -> {tensor((t, f), acc)}\n"),
        ("c", tensor((t, f), acc)), zero=acc)

    def ref(grid, ins):
        x, w = ins
        return [[c] for c in spmd.all_to_all(grid, [xr @ wr for xr, wr in zip(x, w)], [cfg.axis], 0, 0)]
    return text, [((t, h), dt), ((h, f), dt)], [acc], ref


PATTERNS = {
    "a2a": pattern_a2a,
}
