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
    if cfg.variant == "experts":
        return experts_dispatch(cfg)
    if cfg.variant == "experts-combine":
        return experts_combine(cfg)
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


def batch_matmul(out, a, b, a_type, b_type, out_type, acc):
    """%out = %a x %b per batch into a zero-filled accumulator (needs
    %zero: acc)."""
    return (f"  %{out}_e = tensor.empty() : {out_type}\n"
            f"  %{out}_z = linalg.fill ins(%zero : {acc}) outs(%{out}_e : {out_type}) -> {out_type}\n"
            f"  %{out} = linalg.batch_matmul ins(%{a}, %{b} : {a_type}, {b_type}) "
            f"outs(%{out}_z : {out_type}) -> {out_type}\n")


def experts_dispatch(cfg):
    """The dispatch of HuggingFace experts with a capacity per rank's
    tokens: each rank's rows [1, experts, capacity, hidden] go to their
    experts' ranks ([ranks, local experts, capacity, hidden] arrive), are
    transposed to [local experts, ranks, capacity, hidden] and collapsed
    to [local experts, ranks x capacity, hidden] for the experts' batch
    matmul."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    local, c, h, f = 2, 3 * z, 8 * z, 6 * z
    e = local * n
    x_t, w_t = tensor((1, e, c, h), dt), tensor((local, h, f), dt)
    got, moved = tensor((n, local, c, h), dt), tensor((local, n, c, h), dt)
    rows, out = tensor((local, n * c, h), dt), tensor((local, n * c, f), acc)
    text = program(cfg.grid, {"x": x_t, "w": w_t}, (
        f"  %d = shard.all_to_all %x on @g grid_axes = [{cfg.axis}] split_axis = 1 concat_axis = 0 : {x_t} -> {got}\n"
        f"  %te = tensor.empty() : {moved}\n"
        f"  %t = linalg.transpose ins(%d : {got}) outs(%te : {moved}) permutation = [1, 0, 2, 3]\n"
        f"  %r = tensor.collapse_shape %t [[0], [1, 2], [3]] : {moved} into {rows}\n"
        + batch_matmul("y", "r", "w", rows, w_t, out, acc)),
        ("y", out), zero=acc)

    def ref(grid, ins):
        x, w = ins
        d = spmd.all_to_all(grid, x, [cfg.axis], 1, 0)
        results = []
        for dr, wr in zip(d, w):
            r = dr.transpose(1, 0, 2, 3).reshape(local, n * c, h)
            results.append([r @ wr])
        return results
    return text, [((1, e, c, h), dt), ((local, h, f), dt)], [acc], ref


def experts_combine(cfg):
    """The combine of HuggingFace experts with a capacity per rank's
    tokens: the local experts' outputs [local experts, ranks x capacity,
    features], expanded to [local experts, ranks, capacity, features],
    transposed to [ranks, local experts, ...], and each rank's rows sent
    back ([1, experts, capacity, features] arrive)."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    z = cfg.scale
    local, c, h, f = 2, 3 * z, 8 * z, 6 * z
    h_t, w_t = tensor((local, n * c, h), dt), tensor((local, h, f), dt)
    out = tensor((local, n * c, f), acc)
    grouped, moved = tensor((local, n, c, f), acc), tensor((n, local, c, f), acc)
    back = tensor((1, local * n, c, f), acc)
    text = program(cfg.grid, {"h": h_t, "w": w_t}, (
        batch_matmul("y", "h", "w", h_t, w_t, out, acc) +
        f"  %g = tensor.expand_shape %y [[0], [1, 2], [3]] output_shape [{local}, {n}, {c}, {f}] : {out} into {grouped}\n"
        f"  %te = tensor.empty() : {moved}\n"
        f"  %t = linalg.transpose ins(%g : {grouped}) outs(%te : {moved}) permutation = [1, 0, 2, 3]\n"
        f"  %b = shard.all_to_all %t on @g grid_axes = [{cfg.axis}] split_axis = 0 concat_axis = 1 : {moved} -> {back}\n"),
        ("b", back), zero=acc)

    def ref(grid, ins):
        hs, w = ins
        sent = [(hr @ wr).reshape(local, n, c, f).transpose(1, 0, 2, 3)
                for hr, wr in zip(hs, w)]
        return [[b] for b in spmd.all_to_all(grid, sent, [cfg.axis], 0, 1)]
    return text, [((local, n * c, h), dt), ((local, h, f), dt)], [acc], ref


PATTERNS = {
    "a2a": pattern_a2a,
}
