"""Repeated sequence-parallel layers of contractions."""
import spmd

from .core import acc_type, header, matmul, quantize, tensor


def pattern_layers(cfg):
    """Repeated sequence-parallel layers whose compute is all contractions
    (so the cuda target runs them on cuBLASLt, without generated kernels):
    each layer all-gathers this rank's rows, multiplies them by its two
    weights and reduce-scatters the product back to the rows. Variant `3`
    or `2` is the number of layers (default 3); braid-outline-layers makes
    one function of a layer, called per layer."""
    n, dt, acc = cfg.group, cfg.dtype, acc_type(cfg.dtype)
    layers = int(cfg.variant or "3")
    z = cfg.scale
    m, h, f = 2 * z, 16 * z, 32 * z
    if dt != acc:
        raise SystemExit("e2e.py: layers needs an element type that is its "
                         "own accumulator (f32 or f16)")
    rows, full = tensor((m, h), dt), tensor((n * m, h), dt)
    args = ", ".join(f"%w{i}a: {tensor((h, f), dt)}, %w{i}b: {tensor((f, h), dt)}"
                     for i in range(layers))
    text = header(cfg.grid) + f"func.func @main(%x0: {rows}, {args}) -> {rows} {{\n"
    text += f"  %zero = arith.constant 0.0 : {dt}\n"
    for i in range(layers):
        text += (f"  %g{i} = shard.all_gather %x{i} on @g grid_axes = [{cfg.axis}] gather_axis = 0 : {rows} -> {full}\n"
                 + matmul(f"y{i}", f"g{i}", f"w{i}a", full, tensor((h, f), dt), (n * m, f), dt)
                 + matmul(f"z{i}", f"y{i}", f"w{i}b", tensor((n * m, f), dt), tensor((f, h), dt), (n * m, h), dt)
                 + f"  %x{i + 1} = shard.reduce_scatter %z{i} on @g grid_axes = [{cfg.axis}] scatter_axis = 0 : {full} -> {rows}\n")
    text += f"  return %x{layers} : {rows}\n}}\n"

    def ref(grid, ins):
        xs = ins[0]
        for i in range(layers):
            wa, wb = ins[1 + 2 * i], ins[2 + 2 * i]
            gs = spmd.all_gather(grid, xs, [cfg.axis], 0)
            zs = [quantize(quantize(g @ a, dt) @ b, dt) for g, a, b in zip(gs, wa, wb)]
            xs = spmd.reduce_scatter(grid, zs, [cfg.axis], 0)
        return [[x] for x in xs]
    specs = [((m, h), dt)] + [((h, f), dt), ((f, h), dt)] * layers
    return text, specs, [dt], ref


PATTERNS = {
    "layers": pattern_layers,
}
