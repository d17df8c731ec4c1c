"""Expert-parallel all-to-all around a matmul."""
import spmd

from .core import acc_type, header, matmul, tensor


def pattern_a2a(cfg):
    """Expert-parallel all-to-all: dispatch feeding the expert matmul, or
    combine after it."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    t, h, f = 2 * n * z, 8 * z, 6 * z
    if cfg.variant == "dispatch":
        text = (header(cfg.grid) +
                f"func.func @main(%x: {tensor((t, h), dt)}, %w: {tensor((h, f), dt)}) -> {tensor((t, f), acc)} {{\n"
                f"  %zero = arith.constant 0.0 : {acc}\n"
                f"  %d = shard.all_to_all %x on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, h), dt)} -> {tensor((t, h), dt)}\n" +
                matmul("y", "d", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc) +
                f"  return %y : {tensor((t, f), acc)}\n}}\n")

        def ref(grid, ins):
            x, w = ins
            d = spmd.all_to_all(grid, x, [cfg.axis], 0, 0)
            return [[dr @ wr] for dr, wr in zip(d, w)]
        return text, [((t, h), dt), ((h, f), dt)], [acc], ref
    text = (header(cfg.grid) +
            f"func.func @main(%x: {tensor((t, h), dt)}, %w: {tensor((h, f), dt)}) -> {tensor((t, f), acc)} {{\n"
            f"  %zero = arith.constant 0.0 : {acc}\n" +
            matmul("y", "x", "w", tensor((t, h), dt), tensor((h, f), dt), (t, f), acc) +
            f"  %c = shard.all_to_all %y on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 0 : {tensor((t, f), acc)} -> {tensor((t, f), acc)}\n"
            f"  return %c : {tensor((t, f), acc)}\n}}\n")

    def ref(grid, ins):
        x, w = ins
        return [[c] for c in spmd.all_to_all(grid, [xr @ wr for xr, wr in zip(x, w)], [cfg.axis], 0, 0)]
    return text, [((t, h), dt), ((h, f), dt)], [acc], ref


PATTERNS = {
    "a2a": pattern_a2a,
}
