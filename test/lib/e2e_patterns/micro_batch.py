"""An all-reduce no ring can split, in micro-batches."""
import spmd

from .core import acc_type, matmul, program, tensor


def pattern_micro_batch(cfg):
    """All-reduce after a matmul whose result no ring can split (no dimension
    divides by the group size), feeding a row norm."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    # No dimension divides by the group size; one divides into micro-batches.
    z = cfg.scale  # odd multipliers keep the sizes indivisible
    m, k, c = (9 * z, 8 * z, 5 * z) if n == 2 else (6 * z, 8 * z, 6 * z)
    text = program(cfg.grid, {"a": tensor((m, k), dt), "b": tensor((k, c), dt)}, (
        matmul("y", "a", "b", tensor((m, k), dt), tensor((k, c), dt), (m, c), acc) +
        f"  %r = shard.all_reduce %y on @g grid_axes = [{cfg.axis}] : {tensor((m, c), acc)} -> {tensor((m, c), acc)}\n"
        f"  %e = tensor.empty() : {tensor((m,), acc)}\n"
        f"  %z = linalg.fill ins(%zero : {acc}) outs(%e : {tensor((m,), acc)}) -> {tensor((m,), acc)}\n"
        f"  %s = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i)>], "
        f"iterator_types = [\"parallel\", \"reduction\"]}} ins(%r : {tensor((m, c), acc)}) outs(%z : {tensor((m,), acc)}) {{\n"
        f"  ^bb0(%v: {acc}, %s0: {acc}):\n    %q = arith.mulf %v, %v : {acc}\n    %t = arith.addf %s0, %q : {acc}\n"
        f"    linalg.yield %t : {acc}\n  }} -> {tensor((m,), acc)}\n"),
        ("s", tensor((m,), acc)), zero=acc)

    def ref(grid, ins):
        a, b = ins
        r = spmd.all_reduce(grid, [ar @ br for ar, br in zip(a, b)], [cfg.axis])
        return [[(x * x).sum(axis=1)] for x in r]
    return text, [((m, k), dt), ((k, c), dt)], [acc], ref


PATTERNS = {
    "micro_batch": pattern_micro_batch,
}
