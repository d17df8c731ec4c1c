"""Reference semantics of SPMD collectives over a device grid, in numpy.

Independent of Braid: each function takes the per-rank values (a list
indexed by world rank) and returns the per-rank results, following the
definitions of upstream `shard` and Braid's `dist` dialect: ranks are
numbered row-major over the grid; a group over grid axes is the set of
ranks that differ only along those axes; a rank's position in its group is
row-major over the listed axes in the listed order.
"""
import itertools

import numpy as np


class Grid:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.size = int(np.prod(self.shape))

    def coords(self, rank):
        return tuple(int(c) for c in np.unravel_index(rank, self.shape))

    def rank(self, coords):
        return int(np.ravel_multi_index(tuple(coords), self.shape))

    def group(self, rank, axes):
        """The world ranks of `rank`'s group over `axes`, in group order."""
        base = list(self.coords(rank))
        members = []
        for position in itertools.product(*[range(self.shape[a]) for a in axes]):
            c = list(base)
            for a, p in zip(axes, position):
                c[a] = p
            members.append(self.rank(c))
        return members

    def position(self, rank, axes):
        return self.group(rank, axes).index(rank)


def all_gather(grid, xs, axes, dim):
    return [np.concatenate([xs[m] for m in grid.group(r, axes)], axis=dim)
            for r in range(grid.size)]


def _reduce(values, kind):
    ops = {"sum": np.add, "max": np.maximum, "min": np.minimum,
           "product": np.multiply}
    out = values[0].copy()
    for v in values[1:]:
        out = ops[kind](out, v)
    return out


def all_reduce(grid, xs, axes, kind="sum"):
    return [_reduce([xs[m] for m in grid.group(r, axes)], kind)
            for r in range(grid.size)]


def reduce_scatter(grid, xs, axes, dim, kind="sum"):
    out = []
    for r in range(grid.size):
        total = _reduce([xs[m] for m in grid.group(r, axes)], kind)
        n = len(grid.group(r, axes))
        out.append(np.split(total, n, axis=dim)[grid.position(r, axes)])
    return out


def all_to_all(grid, xs, axes, split_dim, concat_dim):
    out = []
    for r in range(grid.size):
        members = grid.group(r, axes)
        n = len(members)
        me = grid.position(r, axes)
        blocks = [np.split(xs[m], n, axis=split_dim)[me] for m in members]
        out.append(np.concatenate(blocks, axis=concat_dim))
    return out


def shift(grid, xs, axis, offset):
    out = []
    for r in range(grid.size):
        members = grid.group(r, [axis])
        n = len(members)
        me = grid.position(r, [axis])
        out.append(xs[members[(me - offset) % n]].copy())
    return out


def broadcast(grid, xs, axes, root):
    out = []
    for r in range(grid.size):
        members = grid.group(r, axes)
        sizes = [grid.shape[a] for a in axes]
        root_position = int(np.ravel_multi_index(tuple(root), sizes))
        out.append(xs[members[root_position]].copy())
    return out


def _root_rank(grid, rank, axes, root):
    members = grid.group(rank, axes)
    sizes = [grid.shape[a] for a in axes]
    return members[int(np.ravel_multi_index(tuple(root), sizes))]


def gather(grid, xs, axes, dim, root):
    """Rooted gather: the root's result is the gathered tensor; upstream
    leaves the others undefined, and Braid gives them the same (an
    all-gather), which is what is compared."""
    return all_gather(grid, xs, axes, dim)


def scatter(grid, xs, axes, dim, root):
    """Each rank's block, at its group position, of the root's tensor."""
    out = []
    for r in range(grid.size):
        n = len(grid.group(r, axes))
        whole = xs[_root_rank(grid, r, axes, root)]
        out.append(np.split(whole, n, axis=dim)[grid.position(r, axes)].copy())
    return out
