"""Global view: linalg.index and tensor.extract on a tensor split across ranks."""
import numpy as np

from .core import header, tensor


IDENT = "affine_map<(i, j) -> (i, j)>"


def split_program(cfg, t, split, result, body):
    """@main(%x: t): %xs is %x split as `split` over the grid (%e an empty
    tensor of its type), `body` runs, and %`result`, annotated as split the
    same way for its users, is returned."""
    return header(cfg.grid) + (
        f"func.func @main(%x: {t}) -> {t} {{\n"
        f"  %s = shard.sharding @g split_axes = {split} : !shard.sharding\n"
        f"  %xs = shard.shard %x to %s : {t}\n"
        f"  %e = tensor.empty() : {t}\n" + body +
        f"  %{result}s = shard.shard %{result} to %s annotate_for_users : {t}\n"
        f"  return %{result}s : {t}\n}}\n")


def pattern_global_index(cfg):
    """Global view (shard.shard annotations, partitioned by upstream
    propagation): an elementwise op that reads its loop indices
    (linalg.index, as iotas, masks and positions do) on a tensor split
    across ranks. Each rank must see the indices of its own block. Variant
    `rows`: [8 * scale, 6] split along the rows over the grid's first axis;
    `both` (2-D grids): rows over the first axis and columns over the
    second; `axes` (2-D grids): the rows split over both axes at once. The
    op adds 100 * row + column to the input. Variant `extract`: an op
    doubles the split rows, and another reads them in reverse row order
    with tensor.extract at computed indices (as HF's mask code reads its
    positions), which upstream partitioning cloned onto the local block."""
    variant = cfg.variant or "rows"
    m, c = 8 * cfg.scale, 6 * cfg.grid[-1]
    if variant == "extract":
        return global_extract(cfg, m, c)
    if variant == "rows":
        split, blocks = f"[[{cfg.axis}]]", (cfg.grid[cfg.axis], 1)
    elif variant == "both" and len(cfg.grid) == 2:
        split, blocks = "[[0], [1]]", (cfg.grid[0], cfg.grid[1])
    elif variant == "axes" and len(cfg.grid) == 2:
        split, blocks = "[[0, 1]]", (cfg.grid[0] * cfg.grid[1], 1)
    else:
        raise SystemExit("e2e.py: global_index needs --variant rows, or both "
                         "or axes on a 2-D grid")
    local = (m // blocks[0], c // blocks[1])
    t = tensor((m, c), "f32")
    text = split_program(cfg, t, split, "y", (
        f"  %y = linalg.generic {{indexing_maps = [{IDENT}, {IDENT}], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%xs : {t}) outs(%e : {t}) {{\n"
        f"  ^bb0(%a: f32, %o: f32):\n"
        f"    %i = linalg.index 0 : index\n    %j = linalg.index 1 : index\n"
        f"    %c100 = arith.constant 100 : index\n"
        f"    %r = arith.muli %i, %c100 : index\n    %p = arith.addi %r, %j : index\n"
        f"    %pi = arith.index_cast %p : index to i32\n    %pf = arith.sitofp %pi : i32 to f32\n"
        f"    %v = arith.addf %a, %pf : f32\n    linalg.yield %v : f32\n"
        f"  }} -> {t}\n"))

    def ref(grid, ins):
        out = []
        for rank in range(grid.size):
            coords = grid.coords(rank)
            if variant == "rows":
                bi, bj = coords[cfg.axis], 0
            elif variant == "both":
                bi, bj = coords[0], coords[1]
            else:
                bi, bj = coords[0] * cfg.grid[1] + coords[1], 0
            rows = np.arange(bi * local[0], (bi + 1) * local[0])[:, None]
            cols = np.arange(bj * local[1], (bj + 1) * local[1])[None, :]
            out.append([ins[0][rank] + 100 * rows + cols])
        return out
    return text, [(local, "f32")], ["f32"], ref


def global_extract(cfg, m, c):
    n = cfg.grid[cfg.axis]
    local = (m // n, c)
    t = tensor((m, c), "f32")
    text = split_program(cfg, t, f"[[{cfg.axis}]]", "z", (
        f"  %y = linalg.generic {{indexing_maps = [{IDENT}, {IDENT}], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%xs : {t}) outs(%e : {t}) {{\n"
        f"  ^bb0(%a: f32, %o: f32):\n"
        f"    %d = arith.addf %a, %a : f32\n    linalg.yield %d : f32\n"
        f"  }} -> {t}\n"
        f"  %z = linalg.generic {{indexing_maps = [{IDENT}], "
        f"iterator_types = [\"parallel\", \"parallel\"]}} outs(%e : {t}) {{\n"
        f"  ^bb0(%o: f32):\n"
        f"    %i = linalg.index 0 : index\n    %j = linalg.index 1 : index\n"
        f"    %last = arith.constant {m - 1} : index\n"
        f"    %r = arith.subi %last, %i : index\n"
        f"    %v = tensor.extract %y[%r, %j] : {t}\n    linalg.yield %v : f32\n"
        f"  }} -> {t}\n"))

    def ref(grid, ins):
        out = []
        for rank in range(grid.size):
            # The rows of this rank's group along the axis, in its order.
            coords = list(grid.coords(rank))
            group = {}
            for peer in range(grid.size):
                other = list(grid.coords(peer))
                if all(a == b for k, (a, b) in enumerate(zip(coords, other))
                       if k != cfg.axis):
                    group[other[cfg.axis]] = ins[0][peer]
            full = 2 * np.concatenate([group[b] for b in range(n)])[::-1]
            b = coords[cfg.axis]
            out.append([full[b * local[0]:(b + 1) * local[0]]])
        return out
    return text, [(local, "f32")], ["f32"], ref


PATTERNS = {
    "global_index": pattern_global_index,
}
