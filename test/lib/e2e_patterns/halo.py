"""shard.update_halo feeding a stencil or a convolution."""
import numpy as np

from .core import header, tensor


def pattern_halo(cfg):
    """shard.update_halo, then a stencil over the haloed tile: a 3-point one
    along the group's axis (1-D), or (variant `2d`, a 2-D grid split over
    both axes) a 3 x 3 box sum, which reads the corners. Variants `conv`
    and `conv2d`: linalg.conv_1d / conv_2d over the haloed tile with a
    kernel input (the overlap pass computes their interior while the halos
    travel). The global array's ends have no neighbour: their halos keep
    the zeros the tile starts with."""
    dt, z = cfg.dtype, cfg.scale
    conv = cfg.variant in ("conv", "conv2d")
    two_d = cfg.variant in ("2d", "conv2d")
    if two_d and len(cfg.grid) != 2:
        raise SystemExit(f"e2e.py: halo --variant {cfg.variant} needs a 2-D grid")
    shape = (4 * z, 3 * z) if two_d else (4 * z,)
    padded = tuple(d + 2 for d in shape)
    split = "[[0], [1]]" if two_d else f"[[{cfg.axis}]]"
    halos = "[1, 1, 1, 1]" if two_d else "[1, 1]"
    offsets = ", ".join("1" for _ in shape)
    sizes = ", ".join(str(d) for d in shape)
    ones = ", ".join("1" for _ in shape)
    # The taps: offsets into the haloed tile, with the stencil's weights
    # (a convolution's come from its kernel input).
    shifts = ([(i, j) for i in range(3) for j in range(3)] if two_d
              else [(i,) for i in range(3)])
    weights = [1.0] * 9 if two_d else [1.0, 2.0, 1.0]
    kernel = (3, 3) if two_d else (3,)
    args = f"%x: {tensor(shape, dt)}" + (f", %w: {tensor(kernel, dt)}" if conv else "")
    text = header(cfg.grid) + f"func.func @main({args}) -> {tensor(shape, dt)} {{\n"
    text += f"  %zero = arith.constant 0.0 : {dt}\n"
    text += f"  %e = tensor.empty() : {tensor(padded, dt)}\n"
    text += f"  %f = linalg.fill ins(%zero : {dt}) outs(%e : {tensor(padded, dt)}) -> {tensor(padded, dt)}\n"
    text += (f"  %d = tensor.insert_slice %x into %f[{offsets}] [{sizes}] [{ones}] : "
             f"{tensor(shape, dt)} into {tensor(padded, dt)}\n")
    text += (f"  %h = shard.update_halo %d on @g split_axes = {split} halo_sizes = {halos} : "
             f"{tensor(padded, dt)}\n")
    text += f"  %y0 = tensor.empty() : {tensor(shape, dt)}\n"
    if conv:
        op = "linalg.conv_2d" if two_d else "linalg.conv_1d"
        text += (f"  %yz = linalg.fill ins(%zero : {dt}) outs(%y0 : {tensor(shape, dt)}) -> {tensor(shape, dt)}\n"
                 f"  %y = {op} ins(%h, %w : {tensor(padded, dt)}, {tensor(kernel, dt)}) "
                 f"outs(%yz : {tensor(shape, dt)}) -> {tensor(shape, dt)}\n")
    else:
        names = []
        for k, shift in enumerate(shifts):
            at = ", ".join(str(o) for o in shift)
            text += (f"  %s{k} = tensor.extract_slice %h[{at}] [{sizes}] [{ones}] : "
                     f"{tensor(padded, dt)} to {tensor(shape, dt)}\n")
            names.append(f"%s{k}")
        dims = ", ".join(f"d{k}" for k in range(len(shape)))
        maps = ", ".join([f"affine_map<({dims}) -> ({dims})>"] * (len(names) + 1))
        block_args = ", ".join(f"%a{k}: {dt}" for k in range(len(names)))
        body = f"  ^bb0({block_args}, %out: {dt}):\n"
        acc = "%a0"  # weights[0] is 1
        for k in range(1, len(names)):
            term = f"%a{k}"
            if weights[k] != 1.0:
                body += f"    %w{k} = arith.constant {weights[k]} : {dt}\n"
                body += f"    %m{k} = arith.mulf %a{k}, %w{k} : {dt}\n"
                term = f"%m{k}"
            body += f"    %t{k} = arith.addf {acc}, {term} : {dt}\n"
            acc = f"%t{k}"
        body += f"    linalg.yield {acc} : {dt}\n"
        iters = ", ".join('"parallel"' for _ in shape)
        text += (f"  %y = linalg.generic {{indexing_maps = [{maps}], iterator_types = [{iters}]}} "
                 f"ins({', '.join(names)} : {', '.join(tensor(shape, dt) for _ in names)}) "
                 f"outs(%y0 : {tensor(shape, dt)}) {{\n{body}  }} -> {tensor(shape, dt)}\n")
    text += f"  return %y : {tensor(shape, dt)}\n}}\n"

    def ref(grid, ins):
        x = ins[0]
        axes = [0, 1] if two_d else [cfg.axis]
        out = []
        for r in range(grid.size):
            # The whole array along the split axes, as the group holds it.
            members = grid.group(r, axes)
            blocks = np.empty([grid.shape[a] for a in axes], dtype=object)
            for m in members:
                blocks[tuple(grid.coords(m)[a] for a in axes)] = x[m].astype(np.float64)
            whole = np.block(blocks.tolist()) if two_d else np.concatenate(list(blocks))
            pad = np.pad(whole, 1)
            start = [grid.coords(r)[a] * s for a, s in zip(axes, shape)]
            taps = ([(k, ins[1][r][k]) for k in np.ndindex(*kernel)] if conv
                    else zip(shifts, weights))
            acc = np.zeros(shape)
            for shift, weight in taps:
                index = tuple(slice(st + o, st + o + s) for st, o, s in zip(start, shift, shape))
                acc += weight * pad[index]
            out.append([acc])
        return out
    specs = [(shape, dt)] + ([(kernel, dt)] if conv else [])
    return text, specs, [dt], ref


PATTERNS = {
    "halo": pattern_halo,
}
