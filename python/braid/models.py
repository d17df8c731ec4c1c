"""Transformer blocks in upstream `shard` SPMD form, with numpy references.

The model builder that Braid's examples, tests and benchmarks use. Each block
is written as one rank's program (per-rank shapes, explicit `shard`
collectives along one axis of a 1-D or 2-D grid), the form in which
Megatron-LM-style tensor, sequence and expert parallelism is usually
written by hand:

  MLP        GPT (GELU) or Llama (SwiGLU) feed-forward; tp: column-parallel
             up (and gate), row-parallel down, all-reduce; sp: all-gather of
             the sequence-sharded input first, reduce-scatter last.
  Attention  causal multi-head self-attention; heads split over the group,
             fused QKV projection, row-parallel output projection, tp or sp
             as above.
  MoE        expert parallelism: tokens already grouped by destination
             expert (capacity C per expert and source rank) go to their
             experts with an all-to-all, through each expert's MLP, and come
             back with a second all-to-all, weighted by the router's gates.
  Transformer  layers of Attention then MLP, residuals included.

Every block computes in f32 and stores activations in its dtype (f32, f16,
bf16): matmuls accumulate in f32, collectives carry the f32 accumulators,
residual sums are rounded back to the dtype. `reference()` computes the
same per-rank results in float64 numpy with the same roundings, independent
of Braid.

    block = MLP(Grid([4]), tokens=64, hidden=32, ffn=128, parallel="sp")
    artifact = braid.compile(block.mlir(), overlap="force")
    inputs = block.random_inputs(seed=0)
    outputs = artifact.run(inputs)
    expected = block.reference(inputs)
"""
import math

import numpy as np

from .compiler import integer, positive_int
from .dtypes import FLOAT_TYPES, TOLERANCE, quantize, relative_error, to_storage

__all__ = ["Grid", "Function", "MLP", "Attention", "MoE", "Transformer"]


# --- grids -------------------------------------------------------------------

class Grid:
    """A device grid: `shape` (1-D or 2-D), ranks in row-major order, as
    upstream `shard` defines them."""

    def __init__(self, shape, name="g"):
        try:
            self.shape = tuple(positive_int(s, "each size") for s in shape)
        except (TypeError, ValueError) as error:
            raise type(error)(f"bad grid shape {shape}: {error}") from None
        if not self.shape:
            raise ValueError(f"bad grid shape {shape}: no axes")
        self.name = name

    @property
    def size(self):
        return math.prod(self.shape)

    def coords(self, rank):
        out = []
        for extent in reversed(self.shape):
            out.append(rank % extent)
            rank //= extent
        return tuple(reversed(out))

    def rank(self, coords):
        rank = 0
        for c, extent in zip(coords, self.shape):
            rank = rank * extent + c
        return rank

    def groups(self, axis):
        """The groups a collective along `axis` runs in: lists of ranks that
        differ only in their `axis` coordinate, in coordinate order."""
        seen, groups = set(), []
        for rank in range(self.size):
            if rank in seen:
                continue
            base = list(self.coords(rank))
            group = []
            for i in range(self.shape[axis]):
                base[axis] = i
                group.append(self.rank(base))
            seen.update(group)
            groups.append(group)
        return groups

    def mlir(self):
        return f"shard.grid @{self.name}(shape = {'x'.join(map(str, self.shape))})"


# --- building functions ------------------------------------------------------

# Bytes per element, to refuse tensors whose size no 64-bit count holds.
_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "i1": 1, "i8": 1,
                  "i16": 2, "i32": 4}


def tensor_type(shape, dtype):
    if not shape:
        return f"tensor<{dtype}>"
    if any(d < 1 for d in shape):
        raise ValueError(f"tensor of shape {tuple(shape)}: every dimension "
                         "must be positive")
    if math.prod(shape) * _ELEMENT_BYTES.get(dtype, 8) >= 2 ** 63:
        raise ValueError(f"tensor of shape {tuple(shape)} ({dtype}) is too "
                         "large: its size in bytes does not fit in 64 bits")
    return f"tensor<{'x'.join(str(d) for d in shape)}x{dtype}>"


class Value:
    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype = name, tuple(shape), dtype

    @property
    def type(self):
        return tensor_type(self.shape, self.dtype)

    def __str__(self):
        return self.name


def _map(rank, dims):
    loops = ", ".join(f"d{i}" for i in range(rank))
    return f"affine_map<({loops}) -> ({', '.join(f'd{i}' for i in dims)})>"


class Function:
    """Writes one func.func in shard SPMD form, an op at a time."""

    def __init__(self, grid, name="main"):
        self.grid, self.name = grid, name
        self.args, self.lines, self.counter = [], [], 0
        self.specs = []  # (name, shape, dtype) of each argument

    def fresh(self, hint="v"):
        self.counter += 1
        return f"%{hint}{self.counter}"

    def arg(self, hint, shape, dtype):
        value = Value(f"%{hint}", shape, dtype)
        if any(a.name == value.name for a in self.args):
            raise ValueError(f"argument {hint} declared twice")
        self.args.append(value)
        self.specs.append((hint, tuple(shape), dtype))
        return value

    def emit(self, text):
        self.lines.append("  " + text)

    def _result(self, hint, shape, dtype, text):
        value = Value(self.fresh(hint), shape, dtype)
        self.emit(f"{value} = {text}")
        return value

    # -- tensors --

    def empty(self, shape, dtype):
        return self._result("e", shape, dtype,
                            f"tensor.empty() : {tensor_type(shape, dtype)}")

    def filled(self, shape, dtype, value):
        c = self._result("c", (), dtype, f"arith.constant {value} : {dtype}")
        e = self.empty(shape, dtype)
        t = tensor_type(shape, dtype)
        return self._result("f", shape, dtype,
                            f"linalg.fill ins({c.name} : {dtype}) outs({e} : {t}) -> {t}")

    def matmul(self, a, b, acc="f32"):
        """a[m, k] @ b[k, n], accumulated in `acc`."""
        (m, k), (k2, n) = a.shape, b.shape
        assert k == k2, (a.shape, b.shape)
        init = self.filled((m, n), acc, "0.0")
        t = tensor_type((m, n), acc)
        return self._result("mm", (m, n), acc,
                            f"linalg.matmul ins({a}, {b} : {a.type}, {b.type}) "
                            f"outs({init} : {t}) -> {t}")

    def batch_matmul(self, a, b, acc="f32"):
        """a[e, m, k] @ b[e, k, n] for each e."""
        (e, m, k), (e2, k2, n) = a.shape, b.shape
        assert e == e2 and k == k2, (a.shape, b.shape)
        init = self.filled((e, m, n), acc, "0.0")
        t = tensor_type((e, m, n), acc)
        return self._result("bmm", (e, m, n), acc,
                            f"linalg.batch_matmul ins({a}, {b} : {a.type}, {b.type}) "
                            f"outs({init} : {t}) -> {t}")

    def transpose(self, x, perm):
        shape = tuple(x.shape[p] for p in perm)
        init = self.empty(shape, x.dtype)
        t = tensor_type(shape, x.dtype)
        return self._result("tr", shape, x.dtype,
                            f"linalg.transpose ins({x} : {x.type}) outs({init} : {t}) "
                            f"permutation = [{', '.join(map(str, perm))}]")

    def expand(self, x, shape, reassociation):
        groups = ", ".join("[" + ", ".join(map(str, g)) + "]" for g in reassociation)
        return self._result("ex", shape, x.dtype,
                            f"tensor.expand_shape {x} [{groups}] output_shape "
                            f"[{', '.join(map(str, shape))}] : {x.type} into "
                            f"{tensor_type(shape, x.dtype)}")

    def collapse(self, x, reassociation):
        shape = tuple(math.prod(x.shape[i] for i in g) for g in reassociation)
        groups = ", ".join("[" + ", ".join(map(str, g)) + "]" for g in reassociation)
        return self._result("co", shape, x.dtype,
                            f"tensor.collapse_shape {x} [{groups}] : {x.type} into "
                            f"{tensor_type(shape, x.dtype)}")

    def slice(self, x, offsets, sizes):
        shape = tuple(sizes)
        return self._result("sl", shape, x.dtype,
                            f"tensor.extract_slice {x}[{', '.join(map(str, offsets))}] "
                            f"[{', '.join(map(str, sizes))}] [{', '.join('1' for _ in sizes)}] "
                            f": {x.type} to {tensor_type(shape, x.dtype)}")

    def map(self, inputs, out_dtype, body, shape=None, index=False):
        """An elementwise linalg.generic over `shape` (default: the first
        input's). Each input is a Value or (Value, dims): the loop dims it
        is indexed by (broadcasting the others). `body(b, *args)` gets f32
        block values (extended from f16/bf16) and returns the f32 result,
        which is rounded to `out_dtype`. With `index`, body also receives
        the loop indices (as index values) after the args."""
        inputs = [i if isinstance(i, tuple) else (i, None) for i in inputs]
        shape = tuple(shape or inputs[0][0].shape)
        rank = len(shape)
        maps, types, names = [], [], []
        for value, dims in inputs:
            dims = tuple(range(rank)) if dims is None else dims
            maps.append(_map(rank, dims))
            types.append(value.type)
            names.append(value.name)
        maps.append(_map(rank, range(rank)))
        init = self.empty(shape, out_dtype)
        out_type = tensor_type(shape, out_dtype)
        b = _Body(self)
        block_args = [b.fresh("a") for _ in inputs]
        out_arg = b.fresh("o")
        sig = ", ".join(f"{n}: {v.dtype}" for n, (v, _) in zip(block_args, inputs))
        sig += f", {out_arg}: {out_dtype}"
        f32_args = [b.extend(n, v.dtype) for n, (v, _) in zip(block_args, inputs)]
        if index:
            f32_args += [b.index(d) for d in range(rank)]
        result = b.truncate(body(b, *f32_args), out_dtype)
        result_name = self.fresh("g")
        iterators = ", ".join(['"parallel"'] * rank)
        text = [f"{result_name} = linalg.generic {{indexing_maps = [{', '.join(maps)}], "
                f"iterator_types = [{iterators}]}}",
                f"    ins({', '.join(names)} : {', '.join(types)}) outs({init} : {out_type}) {{",
                f"  ^bb0({sig}):"]
        text += [f"    {line}" for line in b.lines]
        text += [f"    linalg.yield {result} : {out_dtype}", f"  }} -> {out_type}"]
        self.lines.append("  " + "\n  ".join(text))
        return Value(result_name, shape, out_dtype)

    def reduce_last(self, x, kind):
        """max or sum of an f32 tensor over its last dimension."""
        rank = len(x.shape)
        shape = x.shape[:-1]
        init = self.filled(shape, "f32", "-3.0e+38" if kind == "max" else "0.0")
        op = "arith.maximumf" if kind == "max" else "arith.addf"
        iters = ", ".join(['"parallel"'] * (rank - 1) + ['"reduction"'])
        out_type = tensor_type(shape, "f32")
        name = self.fresh("red")
        self.lines.append(
            f"  {name} = linalg.generic {{indexing_maps = [{_map(rank, range(rank))}, "
            f"{_map(rank, range(rank - 1))}], iterator_types = [{iters}]}}\n"
            f"      ins({x} : {x.type}) outs({init} : {out_type}) {{\n"
            f"    ^bb0(%in: f32, %acc: f32):\n"
            f"      %r = {op} %acc, %in : f32\n"
            f"      linalg.yield %r : f32\n"
            f"  }} -> {out_type}")
        return Value(name, shape, "f32")

    def position(self, axis):
        """This rank's index along grid `axis` (an index value)."""
        return self._result("pos", (), "index",
                            f"shard.process_multi_index on @{self.grid.name} "
                            f"axes = [{axis}] : index")

    # -- collectives --

    def _axes(self, axis):
        return f"on @{self.grid.name} grid_axes = [{axis}]"

    def all_gather(self, x, axis, dim):
        n = self.grid.shape[axis]
        shape = tuple(d * n if i == dim else d for i, d in enumerate(x.shape))
        return self._result("ag", shape, x.dtype,
                            f"shard.all_gather {x} {self._axes(axis)} gather_axis = {dim} "
                            f": {x.type} -> {tensor_type(shape, x.dtype)}")

    def reduce_scatter(self, x, axis, dim):
        n = self.grid.shape[axis]
        if x.shape[dim] % n:
            raise ValueError(f"dimension {dim} of {x.shape} does not divide by {n}")
        shape = tuple(d // n if i == dim else d for i, d in enumerate(x.shape))
        return self._result("rs", shape, x.dtype,
                            f"shard.reduce_scatter {x} {self._axes(axis)} scatter_axis = {dim} "
                            f": {x.type} -> {tensor_type(shape, x.dtype)}")

    def all_reduce(self, x, axis):
        return self._result("ar", x.shape, x.dtype,
                            f"shard.all_reduce {x} {self._axes(axis)} : {x.type} -> {x.type}")

    def all_to_all(self, x, axis, split, concat):
        n = self.grid.shape[axis]
        shape = list(x.shape)
        shape[split] //= n
        shape[concat] *= n
        return self._result("a2a", shape, x.dtype,
                            f"shard.all_to_all {x} {self._axes(axis)} split_axis = {split} "
                            f"concat_axis = {concat} : {x.type} -> {tensor_type(shape, x.dtype)}")

    # -- the function --

    def text(self, results):
        args = ", ".join(f"{a}: {a.type}" for a in self.args)
        rtypes = ", ".join(r.type for r in results)
        body = "\n".join(self.lines)
        return (f"func.func @{self.name}({args}) -> ({rtypes}) {{\n{body}\n"
                f"  return {', '.join(r.name for r in results)} : {rtypes}\n}}\n")


class _Body:
    """Scalar ops inside a linalg.generic body, in f32."""

    def __init__(self, fn):
        self.fn, self.lines, self.counter = fn, [], 0

    def fresh(self, hint="s"):
        self.counter += 1
        return f"%{hint}{self.counter}"

    def emit(self, text, hint="s"):
        name = self.fresh(hint)
        self.lines.append(f"{name} = {text}")
        return name

    def extend(self, name, dtype):
        if dtype == "f32" or dtype.startswith("i"):
            return name
        return self.emit(f"arith.extf {name} : {dtype} to f32")

    def truncate(self, name, dtype):
        if dtype == "f32":
            return name
        return self.emit(f"arith.truncf {name} : f32 to {dtype}")

    def index(self, dim):
        return self.emit(f"linalg.index {dim} : index", "i")

    def const(self, value):
        return self.emit(f"arith.constant {float(value):.9e} : f32")

    def binary(self, op, a, b):
        return self.emit(f"arith.{op} {a}, {b} : f32")

    def add(self, a, b):
        return self.binary("addf", a, b)

    def sub(self, a, b):
        return self.binary("subf", a, b)

    def mul(self, a, b):
        return self.binary("mulf", a, b)

    def div(self, a, b):
        return self.binary("divf", a, b)

    def exp(self, a):
        return self.emit(f"math.exp {a} : f32")

    def rsqrt(self, a):
        return self.emit(f"math.rsqrt {a} : f32")

    def philox_uniform(self, row, col, seed):
        """A uniform u32 from Philox-4x32-10 keyed by `seed` at counter
        (col, row, 0, 0) (`row`, `col`: index values); returns the first
        output word as i32. Matches philox_uniform() below."""
        def i32(value):
            value &= 0xFFFFFFFF
            signed = value - (1 << 32) if value >= 1 << 31 else value
            return self.emit(f"arith.constant {signed} : i32", "k")
        c = [self.emit(f"arith.index_cast {col} : index to i32", "c"),
             self.emit(f"arith.index_cast {row} : index to i32", "c"),
             i32(0), i32(0)]
        keys = _philox_keys(seed)
        m0, m1 = i32(PHILOX_M0), i32(PHILOX_M1)
        for k0, k1 in keys:
            lo0 = self.fresh("lo")
            hi0 = self.fresh("hi")
            self.lines.append(f"{lo0}, {hi0} = arith.mului_extended {m0}, {c[0]} : i32")
            lo1 = self.fresh("lo")
            hi1 = self.fresh("hi")
            self.lines.append(f"{lo1}, {hi1} = arith.mului_extended {m1}, {c[2]} : i32")
            x0 = self.emit(f"arith.xori {hi1}, {c[1]} : i32", "x")
            x0 = self.emit(f"arith.xori {x0}, {i32(k0)} : i32", "x")
            x2 = self.emit(f"arith.xori {hi0}, {c[3]} : i32", "x")
            x2 = self.emit(f"arith.xori {x2}, {i32(k1)} : i32", "x")
            c = [x0, lo1, x2, lo0]
        return c[0]

    def tanh(self, a):
        return self.emit(f"math.tanh {a} : f32")

    def gelu(self, x):
        """GELU, tanh approximation (as GPT-2)."""
        x3 = self.mul(self.mul(x, x), x)
        inner = self.mul(self.add(x, self.mul(x3, self.const(0.044715))),
                         self.const(0.7978845608028654))
        return self.mul(self.mul(x, self.const(0.5)),
                        self.add(self.tanh(inner), self.const(1.0)))

    def silu(self, x):
        one = self.const(1.0)
        return self.div(x, self.add(one, self.exp(self.sub(self.const(0.0), x))))


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def silu(x):
    return x / (1.0 + np.exp(-x))


# Philox-4x32-10 (Salmon et al., SC'11): counter-based, so a dropout mask is
# a pure function of (seed, row, column), the same on every rank and run.
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85


def _philox_keys(seed):
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    keys = []
    for _ in range(10):
        keys.append((k0, k1))
        k0, k1 = (k0 + PHILOX_W0) & 0xFFFFFFFF, (k1 + PHILOX_W1) & 0xFFFFFFFF
    return keys


def philox_uniform(rows, cols, seed):
    """The first output word of Philox-4x32-10 at counters (col, row, 0, 0)
    for every row in `rows` and column in `cols` (uint32, [rows, cols])."""
    mask = np.uint64(0xFFFFFFFF)
    c0 = np.broadcast_to(np.asarray(cols, np.uint64)[None, :], (len(rows), len(cols))).copy()
    c1 = np.broadcast_to(np.asarray(rows, np.uint64)[:, None], c0.shape).copy()
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    for k0, k1 in _philox_keys(seed):
        p0 = np.uint64(PHILOX_M0) * c0
        p1 = np.uint64(PHILOX_M1) * c2
        hi0, lo0 = p0 >> np.uint64(32), p0 & mask
        hi1, lo1 = p1 >> np.uint64(32), p1 & mask
        c0, c1, c2, c3 = (hi1 ^ c1 ^ np.uint64(k0)), lo1, (hi0 ^ c3 ^ np.uint64(k1)), lo0
    return c0.astype(np.uint32)


# --- blocks ------------------------------------------------------------------

class Block:
    """Common parts: the function, inputs and the reference."""

    name = "block"
    #: The kind of check (braid.dtypes.TOLERANCE) whose tolerance bounds
    #: the error relative to the largest magnitude of a result.
    CHECK = "block"

    def __init__(self, grid, axis, dtype):
        self.grid = grid if isinstance(grid, Grid) else Grid(grid)
        axis = integer(axis, "axis")
        if not 0 <= axis < len(self.grid.shape):
            raise ValueError(f"axis {axis} is not an axis of grid {self.grid.shape}")
        if dtype not in ("f32", "f16", "bf16"):
            raise ValueError(f"dtype must be f32, f16 or bf16, not {dtype!r}")
        self.axis, self.dtype = axis, dtype
        self.n = self.grid.shape[axis]

    @property
    def tolerance(self):
        return TOLERANCE[self.CHECK][self.dtype]

    def _require(self, value, what):
        if value % self.n:
            raise ValueError(f"{what} = {value} must divide by the group size {self.n}")

    def mlir(self):
        """The whole module: the grid and one function."""
        fn = Function(self.grid, self.name)
        x = fn.arg("x", self.input_shape(), self.dtype)
        out = self.emit(fn, x, "")
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return f"{self.grid.mlir()}\n{fn.text(outs)}"

    def signature(self):
        """(name, per-rank shape, dtype) of each argument."""
        fn = Function(self.grid, self.name)
        x = fn.arg("x", self.input_shape(), self.dtype)
        self.emit(fn, x, "")
        return fn.specs

    def random_inputs(self, seed=0, scale=1.0):
        """One list of arrays per rank, in the argument order, drawn so
        that values replicated over a group (the tp input) agree, and
        stored in the block's dtype (bf16 as float32 values)."""
        rng = np.random.default_rng(seed)
        specs = self.signature()
        per_rank = [[None] * len(specs) for _ in range(self.grid.size)]
        for group in self.grid.groups(self.axis):
            for i, (name, shape, dtype) in enumerate(specs):
                std = self._std(name, shape) * scale
                shared = rng.standard_normal(shape) * std
                for rank in group:
                    value = shared if self._replicated(name) else rng.standard_normal(shape) * std
                    per_rank[rank][i] = _stored(value, dtype)
        return per_rank

    def _std(self, name, shape):
        # Weights scaled by 1/sqrt(fan-in) keep activations near unit size.
        if name == "x" or name.endswith("_x") or name.startswith("gates"):
            return 1.0
        fan_in = shape[-2] if len(shape) >= 2 else 1
        return 1.0 / math.sqrt(fan_in)

    def _replicated(self, name):
        return False

    def reference(self, inputs):
        """Expected per-rank results (float64) for per-rank `inputs`."""
        specs = self.signature()
        values = [[quantize(np.asarray(a, dtype=np.float64)
                            if np.asarray(a).dtype != np.uint16 else
                            np.asarray(a), dtype)
                   for a, (_, _, dtype) in zip(rank_inputs, specs)]
                  for rank_inputs in inputs]
        x = [v[0] for v in values]
        weights = [v[1:] for v in values]
        return [list(y) if isinstance(y, tuple) else [y]
                for y in self.forward(x, weights, "")]

    def check(self, outputs, inputs):
        """Largest error of `outputs` against the reference, relative to the
        reference's largest magnitude; raises AssertionError past the
        block's tolerance."""
        expected = self.reference(inputs)
        worst = 0.0
        for rank, (got, want) in enumerate(zip(outputs, expected)):
            for g, w in zip(got, want):
                g = np.asarray(g, dtype=np.float64)
                if g.shape != w.shape:
                    raise AssertionError(f"rank {rank}: shape {g.shape}, expected {w.shape}")
                # Relative to at least 1: a reference near zero is checked
                # absolutely.
                err, _ = relative_error(g, w, floor=1.0)
                worst = max(worst, err)
        if not worst <= self.tolerance:
            raise AssertionError(f"{self.name}: relative error {worst:.3g} exceeds "
                                 f"{self.tolerance:g} ({self.dtype})")
        return worst

    # Group helpers for references.
    def _gather(self, values, dim):
        out = [None] * self.grid.size
        for group in self.grid.groups(self.axis):
            full = np.concatenate([values[r] for r in group], axis=dim)
            for r in group:
                out[r] = full
        return out

    def _reduce(self, values, scatter_dim=None):
        out = [None] * self.grid.size
        for group in self.grid.groups(self.axis):
            total = sum(values[r] for r in group)
            parts = (np.split(total, self.n, axis=scatter_dim)
                     if scatter_dim is not None else [total] * self.n)
            for i, r in enumerate(group):
                out[r] = parts[i]
        return out

    def _all_to_all(self, values, split, concat):
        out = [None] * self.grid.size
        for group in self.grid.groups(self.axis):
            pieces = {r: np.split(values[r], self.n, axis=split) for r in group}
            for i, r in enumerate(group):
                out[r] = np.concatenate([pieces[s][i] for s in group], axis=concat)
        return out


def _stored(values, dtype):
    """Random values as the block's inputs: rounded to dtype, as numpy
    arrays of the storage type (float32 for bf16, exactly representable)."""
    q = quantize(values, dtype)
    if dtype == "bf16":
        return q.astype(np.float32)
    return q.astype({"f32": np.float32, "f16": np.float16}[dtype])


class _ActivationBlock(Block):
    """A block on [tokens, hidden] activations with its residual, in tensor
    ("tp": replicated over the group) or sequence ("sp": split by rows)
    parallelism: the input is all-gathered first under sp, and the
    partial sums are all-reduced (tp) or reduce-scattered (sp) last."""

    def __init__(self, grid, axis, dtype, tokens, hidden, parallel):
        super().__init__(grid, axis, dtype)
        tokens = positive_int(tokens, "tokens")
        hidden = positive_int(hidden, "hidden")
        if parallel not in ("tp", "sp"):
            raise ValueError(f"parallel must be tp or sp, not {parallel!r}")
        if parallel == "sp":
            self._require(tokens, "tokens")
        self.tokens, self.hidden, self.parallel = tokens, hidden, parallel

    def input_shape(self):
        t = self.tokens // self.n if self.parallel == "sp" else self.tokens
        return (t, self.hidden)

    def _replicated(self, name):
        return self.parallel == "tp" and name == "x"

    def _gathered(self, fn, x):
        return fn.all_gather(x, self.axis, 0) if self.parallel == "sp" else x

    def _reduced_residual(self, fn, y, x):
        if self.parallel == "sp":
            y = fn.reduce_scatter(y, self.axis, 0)
        else:
            y = fn.all_reduce(y, self.axis)
        return fn.map([y, x], self.dtype, lambda b, a, r: b.add(a, r))

    def _gathered_ref(self, x):
        return self._gather(x, 0) if self.parallel == "sp" else x

    def _reduced_residual_ref(self, partial, x):
        y = self._reduce(partial, 0 if self.parallel == "sp" else None)
        return [quantize(y[r] + x[r], self.dtype) for r in range(self.grid.size)]


class MLP(_ActivationBlock):
    """A transformer MLP block with its residual: out = x + MLP(x).

    kind      "gpt" (up, GELU, down) or "llama" (SwiGLU: gate, up, down)
    parallel  "tp": x [tokens, hidden] replicated over the group, out
              likewise; "sp": x and out sharded by rows [tokens/n, hidden]
    Weights per rank: w_up [hidden, ffn/n] (and w_gate), w_down
    [ffn/n, hidden].
    """

    name = "mlp"

    def __init__(self, grid, tokens, hidden, ffn, axis=0, dtype="f32",
                 kind="gpt", parallel="tp"):
        super().__init__(grid, axis, dtype, tokens, hidden, parallel)
        if kind not in ("gpt", "llama"):
            raise ValueError(f"kind must be gpt or llama, not {kind!r}")
        ffn = positive_int(ffn, "ffn")
        self._require(ffn, "ffn")
        self.ffn, self.kind = ffn, kind

    def emit(self, fn, x, prefix):
        h, f, dt = self.hidden, self.ffn // self.n, self.dtype
        w_gate = fn.arg(f"{prefix}w_gate", (h, f), dt) if self.kind == "llama" else None
        w_up = fn.arg(f"{prefix}w_up", (h, f), dt)
        w_down = fn.arg(f"{prefix}w_down", (f, h), dt)
        xg = self._gathered(fn, x)
        up = fn.matmul(xg, w_up)
        if self.kind == "llama":
            gate = fn.matmul(xg, w_gate)
            act = fn.map([gate, up], dt, lambda b, g, u: b.mul(b.silu(g), u))
        else:
            act = fn.map([up], dt, lambda b, u: b.gelu(u))
        return self._reduced_residual(fn, fn.matmul(act, w_down), x)

    def forward(self, x, weights, prefix):
        dt = self.dtype
        xg = self._gathered_ref(x)
        partial = []
        for rank in range(self.grid.size):
            w = weights[rank]
            if self.kind == "llama":
                w_gate, w_up, w_down = w[:3]
                act = quantize(silu(xg[rank] @ w_gate) * (xg[rank] @ w_up), dt)
            else:
                w_up, w_down = w[:2]
                act = quantize(gelu(xg[rank] @ w_up), dt)
            partial.append(act @ w_down)
        return self._reduced_residual_ref(partial, x)

    def num_weights(self):
        return 3 if self.kind == "llama" else 2


class Attention(_ActivationBlock):
    """Causal multi-head self-attention with its residual:
    out = x + softmax(q k^T / sqrt(d) + causal mask) v W_o.

    The group splits the heads: per rank w_qkv [hidden, 3 * heads/n *
    head_dim] (q, k, v side by side) and w_o [heads/n * head_dim, hidden].
    parallel "tp" or "sp" as for MLP.
    """

    name = "attention"

    def __init__(self, grid, tokens, hidden, heads, head_dim=None, axis=0,
                 dtype="f32", parallel="tp", causal=True):
        super().__init__(grid, axis, dtype, tokens, hidden, parallel)
        heads = positive_int(heads, "heads")
        self._require(heads, "heads")
        if head_dim is None:
            head_dim = self.hidden // heads
            if head_dim < 1:
                raise ValueError(f"hidden = {self.hidden} is smaller than "
                                 f"heads = {heads}; give head_dim")
        self.heads = heads
        self.head_dim = positive_int(head_dim, "head_dim")
        self.causal = causal

    def emit(self, fn, x, prefix):
        t, h, dt = self.tokens, self.hidden, self.dtype
        hl, d = self.heads // self.n, self.head_dim
        w_qkv = fn.arg(f"{prefix}w_qkv", (h, 3 * hl * d), dt)
        w_o = fn.arg(f"{prefix}w_o", (hl * d, h), dt)
        xg = self._gathered(fn, x)
        qkv = fn.matmul(xg, w_qkv)

        def heads_of(i):
            part = fn.slice(qkv, (0, i * hl * d), (t, hl * d))
            return fn.expand(part, (t, hl, d), [[0], [1, 2]])
        q = fn.transpose(heads_of(0), (1, 0, 2))   # [hl, t, d]
        k = fn.transpose(heads_of(1), (1, 2, 0))   # [hl, d, t]
        v = fn.transpose(heads_of(2), (1, 0, 2))   # [hl, t, d]
        scores = fn.batch_matmul(q, k)             # [hl, t, t]
        scale = 1.0 / math.sqrt(d)
        causal = self.causal

        def masked(b, s, head, i, j):
            scaled = b.mul(s, b.const(scale))
            if not causal:
                return scaled
            future = b.emit(f"arith.cmpi ugt, {j}, {i} : index", "p")
            return b.emit(f"arith.select {future}, {b.const(-1.0e30)}, {scaled} : f32")
        s = fn.map([scores], "f32", masked, index=True)
        m = fn.reduce_last(s, "max")
        e = fn.map([s, (m, (0, 1))], "f32", lambda b, a, mx: b.exp(b.sub(a, mx)))
        z = fn.reduce_last(e, "sum")
        p = fn.map([e, (z, (0, 1))], "f32", lambda b, a, zz: b.div(a, zz))
        ctx = fn.batch_matmul(p, v)                # [hl, t, d]
        ctx = fn.collapse(fn.transpose(ctx, (1, 0, 2)), [[0], [1, 2]])
        ctx = fn.map([ctx], dt, lambda b, a: a)    # stored in dt for W_o
        return self._reduced_residual(fn, fn.matmul(ctx, w_o), x)

    def forward(self, x, weights, prefix):
        dt, t = self.dtype, self.tokens
        hl, d = self.heads // self.n, self.head_dim
        xg = self._gathered_ref(x)
        partial = []
        for rank in range(self.grid.size):
            w_qkv, w_o = weights[rank][:2]
            qkv = xg[rank] @ w_qkv
            q, k, v = (qkv[:, i * hl * d:(i + 1) * hl * d].reshape(t, hl, d).transpose(1, 0, 2)
                       for i in range(3))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            if self.causal:
                s = np.where(np.triu(np.ones((t, t), bool), 1), -1.0e30, s)
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p = p / p.sum(axis=-1, keepdims=True)
            ctx = quantize((p @ v).transpose(1, 0, 2).reshape(t, hl * d), dt)
            partial.append(ctx @ w_o)
        return self._reduced_residual_ref(partial, x)

    def num_weights(self):
        return 2


class MoE(Block):
    """An expert-parallel mixture-of-experts MLP (GELU experts).

    Each rank holds `experts_per_rank` experts; expert j*E + e lives on
    rank j of the group (E = experts_per_rank). The router has already
    grouped each rank's tokens by destination: x [E, n*C, hidden] holds, at
    [e, j*C + c], the c-th token this rank sends to expert e of rank j
    (zeros where fewer than C tokens go). An all-to-all delivers them; each
    expert runs its MLP (w1 [E, hidden, ffn], w2 [E, ffn, hidden]); a
    second all-to-all returns the results, scaled by gates [E, n*C] (the
    router's weight of each token, 0 for padding). With one expert per rank
    the expert dimension is dropped (x [n*C, hidden], w1 [hidden, ffn], ...)
    and the experts are plain matmuls, which Braid can fuse with the
    all-to-alls.
    """

    name = "moe"

    def __init__(self, grid, capacity, hidden, ffn, experts_per_rank=1,
                 axis=0, dtype="f32"):
        super().__init__(grid, axis, dtype)
        self.capacity = positive_int(capacity, "capacity")
        self.hidden = positive_int(hidden, "hidden")
        self.ffn = positive_int(ffn, "ffn")
        self.experts = positive_int(experts_per_rank, "experts_per_rank")

    def _lead(self):
        return () if self.experts == 1 else (self.experts,)

    def input_shape(self):
        return self._lead() + (self.n * self.capacity, self.hidden)

    def emit(self, fn, x, prefix):
        lead, dt, h, f = self._lead(), self.dtype, self.hidden, self.ffn
        slots = self.n * self.capacity
        gates = fn.arg(f"{prefix}gates", lead + (slots,), dt)
        w1 = fn.arg(f"{prefix}w1", lead + (h, f), dt)
        w2 = fn.arg(f"{prefix}w2", lead + (f, h), dt)
        dim = len(lead)
        routed = fn.all_to_all(x, self.axis, dim, dim)
        mm = fn.batch_matmul if lead else fn.matmul
        act = fn.map([mm(routed, w1)], dt, lambda b, u: b.gelu(u))
        back = fn.all_to_all(mm(act, w2), self.axis, dim, dim)
        gate_dims = tuple(range(dim + 1))
        return fn.map([back, (gates, gate_dims)], dt, lambda b, y, g: b.mul(y, g))

    def _std(self, name, shape):
        if name == "gates":
            return 0.5
        return super()._std(name, shape)

    def forward(self, x, weights, prefix):
        dt, dim = self.dtype, len(self._lead())
        routed = self._all_to_all(x, dim, dim)
        ys = []
        for rank in range(self.grid.size):
            gates, w1, w2 = weights[rank][:3]
            act = quantize(gelu(routed[rank] @ w1), dt)
            ys.append(act @ w2)
        back = self._all_to_all(ys, dim, dim)
        return [quantize(back[r] * weights[r][0][..., None], dt)
                for r in range(self.grid.size)]

    def num_weights(self):
        return 3


class Norm(_ActivationBlock):
    """What follows a row-parallel layer: its partial sums reduced
    (all-reduce under tp, reduce-scatter under sp), dropout, bias and the
    residual added, then a layernorm or RMSNorm. Returns the normalized
    activations and the new residual stream; memory-bound fusion makes the
    whole epilogue one kernel with two outputs.

    Per rank: x (the residual) [tokens or tokens/n, hidden], a [tokens,
    k/n] and w [k/n, hidden] (the row-parallel layer), bias, gamma (and
    beta for layernorm) [hidden]. Dropout with probability `dropout` keeps
    element (i, j) when Philox-4x32-10 keyed by `seed` at counter (j, global
    row i) is at least dropout * 2^32, and scales kept values by
    1 / (1 - dropout): the mask depends on the seed and the element's place
    in the whole tensor only, so it is the same for any number of ranks and
    on every run.
    """

    name = "norm"
    EPSILON = 1e-5

    def __init__(self, grid, tokens, hidden, k, axis=0, dtype="f32",
                 parallel="sp", norm="layernorm", dropout=0.0, seed=0):
        super().__init__(grid, axis, dtype, tokens, hidden, parallel)
        if norm not in ("layernorm", "rmsnorm"):
            raise ValueError(f"norm must be layernorm or rmsnorm, not {norm!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), not {dropout}")
        k = positive_int(k, "k")
        self._require(k, "k")
        seed = integer(seed, "seed")
        if not 0 <= seed < 2 ** 64:
            raise ValueError(f"seed must be in [0, 2**64) (Philox's key), "
                             f"not {seed}")
        self.k, self.norm, self.dropout, self.seed = k, norm, dropout, seed

    def _threshold(self):
        return int(round(self.dropout * 2.0 ** 32))

    def emit(self, fn, x, prefix):
        t, h, dt = self.tokens, self.hidden, self.dtype
        a = fn.arg(f"{prefix}a", (t, self.k // self.n), dt)
        w = fn.arg(f"{prefix}w", (self.k // self.n, h), dt)
        bias = fn.arg(f"{prefix}bias", (h,), dt)
        gamma = fn.arg(f"{prefix}gamma", (h,), dt)
        beta = fn.arg(f"{prefix}beta", (h,), dt) if self.norm == "layernorm" else None
        y = fn.matmul(a, w)
        if self.parallel == "sp":
            y = fn.reduce_scatter(y, self.axis, 0)
        else:
            y = fn.all_reduce(y, self.axis)
        rows = y.shape[0]
        row0 = None
        if self.dropout and self.parallel == "sp":
            position = fn.position(self.axis)
            row0 = fn._result("row0", (), "index",
                              f"arith.muli {position}, {fn._result('c', (), 'index', f'arith.constant {rows} : index')} : index")
        threshold, scale, seed = self._threshold(), 1.0 / (1.0 - self.dropout), self.seed

        def residual(b, yv, bv, xv, i, j):
            value = yv
            if threshold:
                row = b.emit(f"arith.addi {i}, {row0} : index", "r") if row0 else i
                u = b.philox_uniform(row, j, seed)
                limit = b.emit(f"arith.constant {threshold - (1 << 32) if threshold >= 1 << 31 else threshold} : i32", "k")
                keep = b.emit(f"arith.cmpi uge, {u}, {limit} : i32", "p")
                scaled = b.mul(value, b.const(scale))
                value = b.emit(f"arith.select {keep}, {scaled}, {b.const(0.0)} : f32")
            return b.add(b.add(value, bv), xv)
        hsum = fn.map([y, (bias, (1,)), x], dt, residual, index=True)
        zero = "0.0"
        mean = None
        if self.norm == "layernorm":
            total = fn.reduce_last(fn.map([hsum], "f32", lambda b, v: v), "sum")
            mean = fn.map([total], "f32", lambda b, v: b.div(v, b.const(h)))
            centered = fn.map([hsum, (mean, (0,))], "f32", lambda b, v, m: b.sub(v, m))
            squares = fn.map([centered], "f32", lambda b, v: b.mul(v, v))
        else:
            squares = fn.map([hsum], "f32", lambda b, v: b.mul(v, v))
        var = fn.reduce_last(squares, "sum")
        eps = self.EPSILON

        def normalize(b, v, s, g, *rest):
            rs = b.rsqrt(b.add(b.div(s, b.const(h)), b.const(eps)))
            if self.norm == "layernorm":
                m, bt = rest
                return b.add(b.mul(b.mul(b.sub(v, m), rs), g), bt)
            return b.mul(b.mul(v, rs), g)
        inputs = [hsum, (var, (0,)), (gamma, (1,))]
        if self.norm == "layernorm":
            inputs += [(mean, (0,)), (beta, (1,))]
        del zero
        out = fn.map(inputs, dt, normalize)
        return out, hsum

    def forward(self, x, weights, prefix):
        dt, h = self.dtype, self.hidden
        partial = [weights[r][0] @ weights[r][1] for r in range(self.grid.size)]
        y = self._reduce(partial, 0 if self.parallel == "sp" else None)
        results = []
        for rank in range(self.grid.size):
            bias, gamma = weights[rank][2], weights[rank][3]
            value = y[rank]
            if self.dropout:
                rows = np.arange(value.shape[0])
                if self.parallel == "sp":
                    group = next(g for g in self.grid.groups(self.axis) if rank in g)
                    rows = rows + group.index(rank) * value.shape[0]
                u = philox_uniform(rows, np.arange(h), self.seed)
                keep = u.astype(np.uint64) >= self._threshold()
                value = np.where(keep, value * (1.0 / (1.0 - self.dropout)), 0.0)
            hsum = quantize(value + bias + x[rank], dt)
            if self.norm == "layernorm":
                beta = weights[rank][4]
                mean = hsum.mean(axis=1, keepdims=True)
                var = ((hsum - mean) ** 2).mean(axis=1, keepdims=True)
                out = (hsum - mean) / np.sqrt(var + self.EPSILON) * gamma + beta
            else:
                ms = (hsum ** 2).mean(axis=1, keepdims=True)
                out = hsum / np.sqrt(ms + self.EPSILON) * gamma
            results.append((quantize(out, dt), hsum))
        return results

    def num_weights(self):
        return 5 if self.norm == "layernorm" else 4


class Transformer(_ActivationBlock):
    """`layers` transformer layers (Attention then MLP, each with its
    residual) in one function; weights are the layers' in order, named
    l{i}_w_qkv, l{i}_w_o, l{i}_w_up, ..."""

    name = "transformer"
    CHECK = "transformer"

    def __init__(self, grid, layers, tokens, hidden, heads, ffn, head_dim=None,
                 axis=0, dtype="f32", kind="llama", parallel="sp",
                 causal=True):
        super().__init__(grid, axis, dtype, tokens, hidden, parallel)
        self.layers = positive_int(layers, "layers")
        self.attention = Attention(grid, tokens, hidden, heads, head_dim, axis,
                                   dtype, parallel, causal)
        self.mlp = MLP(grid, tokens, hidden, ffn, axis, dtype, kind, parallel)

    def emit(self, fn, x, prefix):
        for i in range(self.layers):
            x = self.attention.emit(fn, x, f"{prefix}l{i}_")
            x = self.mlp.emit(fn, x, f"{prefix}l{i}_")
        return x

    def forward(self, x, weights, prefix):
        na, nm = self.attention.num_weights(), self.mlp.num_weights()
        offset = 0
        for _ in range(self.layers):
            x = self.attention.forward(x, [w[offset:offset + na] for w in weights], "")
            offset += na
            x = self.mlp.forward(x, [w[offset:offset + nm] for w in weights], "")
            offset += nm
        return x


# --- command line ------------------------------------------------------------

def main(argv=None):
    """python -m braid.models BLOCK [sizes] [-o FILE]: writes a block in
    upstream shard form (what examples/ and bench/ use)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m braid.models",
        description="Writes a transformer block in upstream shard SPMD form.")
    parser.add_argument("block", choices=["mlp", "attention", "moe", "transformer"])
    parser.add_argument("--grid", default="4",
                        help="grid shape, e.g. 8 or 2x4 (default 4)")
    parser.add_argument("--axis", type=int, default=0,
                        help="the grid axis the block is parallel over")
    parser.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    parser.add_argument("--parallel", default="sp", choices=["tp", "sp"])
    parser.add_argument("--kind", default="llama", choices=["gpt", "llama"])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--hidden", type=int, default=8192)
    parser.add_argument("--heads", type=int, default=64)
    parser.add_argument("--head-dim", type=int, default=None)
    parser.add_argument("--ffn", type=int, default=28672)
    parser.add_argument("--capacity", type=int, default=512,
                        help="moe: tokens per expert and source rank")
    parser.add_argument("--experts-per-rank", type=int, default=1)
    parser.add_argument("--name", default=None, help="function name")
    parser.add_argument("-o", "--output", default="-")
    args = parser.parse_args(argv)
    try:
        grid = Grid([int(s) for s in args.grid.split("x")])
        if args.block == "mlp":
            block = MLP(grid, args.tokens, args.hidden, args.ffn, args.axis,
                        args.dtype, args.kind, args.parallel)
        elif args.block == "attention":
            block = Attention(grid, args.tokens, args.hidden, args.heads,
                              args.head_dim, args.axis, args.dtype, args.parallel)
        elif args.block == "moe":
            block = MoE(grid, args.capacity, args.hidden, args.ffn,
                        args.experts_per_rank, args.axis, args.dtype)
        else:
            block = Transformer(grid, args.layers, args.tokens, args.hidden,
                                args.heads, args.ffn, args.head_dim, args.axis,
                                args.dtype, args.kind, args.parallel)
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    if args.name:
        block.name = args.name
    command = " ".join(["python -m braid.models"] + list(argv or sys.argv[1:]))
    text = f"// Generated by: {command}\n{block.mlir()}"
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
