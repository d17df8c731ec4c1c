"""`torch.compile(model, backend="braid")` for a module parallelized with
PyTorch's own tensor parallelism (torch.distributed.tensor.parallel's
parallelize_module: DTensor parameters on a 1-D device mesh, the whole
job or one dimension of a 2-D mesh), in a job that is one process per
rank (mpirun, with torch.distributed initialized from the same job, as
users run gloo on CPUs):

    import braid.pytorch  # registers "braid" (pip-installed: an entry point)
    model = parallelize_module(model, mesh, plan)
    fast = torch.compile(model, backend="braid",
                         options={"cache": "/shared/braid-cache"})
    y = fast(x)                        # this rank's part, as eager DTensor

Dynamo hands the backend each graph as DTensor code: the parameters are
DTensors (their placements are the plan), activations enter by
`DTensor.from_local` and leave by `redistribute(...).to_local()`. Read
with those boundaries as identities, the graph is the unpartitioned
module's computation, which Braid's front door exports, partitions by the
placements (Shard(0) of a weight is "colwise", Shard(1) "rowwise",
Replicate "replicate"), overlaps and compiles once for the job
(braid.program.compile_once); each rank then runs its part in process
(braid.program.Program) on MPI's world, or for a mesh of some of the
ranks (`mesh["tp"]` of a dp x tp mesh: each row its own tensor-parallel
group) on a communicator of those ranks split from the world
(braid.program.split_world: every rank of the job compiles its graph at
the same time, as SPMD code does, and before Braid's runtime started on
another communicator), with the DTensors' local tensors as its weights
(no copies).

A graph the backend cannot take runs eagerly, with one warning that says
why: a mesh of more than one dimension, a placement or collective it does
not map, an op Braid cannot export or compile, local shapes that are not
the parts Braid's partitioning gives. The first call of every compiled
graph also runs the eager graph and compares (every rank agrees on the
outcome): a graph whose local code is not the unpartitioned computation
(a reshape to a local head count written as a constant, a reduction over
a sharded dimension of a local tensor) falls back with the error it made,
never returns a wrong result. See docs/rationale/frontends.md, "The
torch.compile backend".

Options (torch.compile's `options=`, or backend(...)'s keywords): `cache`
(the directory every rank sees where rank 0 compiles: default
$BRAID_CACHE or ~/.cache/braid/programs), `check` (False skips the first
call's comparison), and braid.compile's options (overlap, comm, ...).
"""
import functools
import logging
import os
import warnings

from .compiler import BraidError, CompileError

__all__ = ["backend", "register", "GRAPHS"]

#: Every graph this process handed to the backend, in order, as a
#: CompiledGraph: what it became (`program`, None when it runs eagerly),
#: `reason` (why it runs eagerly, or None) and `calls` run by Braid.
GRAPHS = []

# Calls and methods of DTensor's boundaries, identities on global values.
_IDENTITY_METHODS = ("to_local", "redistribute", "full_tensor")


class Decline(Exception):
    """Why a graph runs eagerly instead."""


def _is_from_local(node):
    target = node.target
    return (node.op == "call_function" and
            getattr(target, "__name__", "") == "from_local" and
            "torch.distributed.tensor" in getattr(target, "__module__", ""))


def _placement(placements, ndim, what):
    """(kind, dim) of a 1-D mesh's placements: ("R", None) or ("S", d)."""
    from torch.distributed.tensor import Replicate, Shard
    if len(placements) != 1:
        raise Decline(f"{what} is placed on a {len(placements)}-D mesh; the "
                      "backend takes 1-D meshes")
    placement = placements[0]
    if isinstance(placement, Replicate):
        return ("R", None)
    if isinstance(placement, Shard):
        return ("S", placement.dim % ndim if ndim else 0)
    raise Decline(f"{what} has placement {placement}; the backend takes "
                  "Shard and Replicate")


def _weight_style(kind, dim, ndim, what):
    if kind == "R":
        return "replicate"
    if ndim == 2 and dim in (0, 1):
        return ("colwise", "rowwise")[dim]
    if ndim == 1 and dim == 0:
        return "colwise"
    raise Decline(f"{what} is Shard({dim}) of a {ndim}-D tensor; the backend "
                  "maps Shard(0) and Shard(1) of weights and Shard(0) of biases")


def _layout(kind, dim, ndim, what):
    """An activation's Braid layout for a placement."""
    if kind == "R":
        return "replicate"
    if ndim >= 2 and dim == ndim - 2:
        return "sequence"
    raise Decline(f"{what} is Shard({dim}) of a {ndim}-D tensor; activations "
                  "are replicated or split along the sequence (dimension -2)")


def _record(gm, example_inputs):
    """Runs the graph eagerly on the example (DTensor code as the job runs
    it) and returns {node name: the value's (is DTensor, placements, shape
    (the global one of a DTensor), dtype)}."""
    import torch
    from torch.distributed.tensor import DTensor
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node):
            value = super().run_node(node)
            if isinstance(value, DTensor):
                seen[node.name] = (True, value.placements, tuple(value.shape),
                                   value.dtype)
            elif isinstance(value, torch.Tensor):
                seen[node.name] = (False, None, tuple(value.shape), value.dtype)
            return value

    with torch.no_grad():
        Recorder(gm).run(*example_inputs)
    return seen


def _sizes(node):
    """The sizes a view, reshape or expand call names, or None."""
    if node.op != "call_method" or node.target not in ("view", "reshape",
                                                        "expand"):
        return None
    sizes = node.args[1:]
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = sizes[0]
    return list(sizes) if all(isinstance(d, int) for d in sizes) else None


def _refit(node, env):
    """Rewrites the sizes of a view, reshape or expand that dynamo wrote as
    the local constants so that they fit the global input: an expand keeps
    (-1) every dimension its input has whole; a view or reshape scales the
    outermost output dimension of each group of dimensions whose input
    grew by the same factor. Returns whether it rewrote. The first call's
    check against eager guards the result."""
    sizes, local = _sizes(node), node.meta.get("braid_local")
    if sizes is None or local is None:
        return False
    source = node.args[0]
    whole = tuple(env[source].shape)
    local_in, local_out = local
    if len(whole) != len(local_in) or whole == tuple(local_in):
        return False
    if node.target == "expand":
        offset = len(sizes) - len(whole)
        new = [d if i < offset or whole[i - offset] == 1 else -1
               for i, d in enumerate(sizes)]
    else:
        # Groups of input and output dimensions with equal products.
        new, i, j = list(local_out), 0, 0
        while i < len(local_in) and j < len(local_out):
            start_i, start_j = i, j
            have, want = local_in[i], local_out[j]
            i, j = i + 1, j + 1
            while have != want:
                if have < want:
                    have, i = have * local_in[i], i + 1
                else:
                    want, j = want * local_out[j], j + 1
            grown = 1
            for d in range(start_i, i):
                if whole[d] % max(local_in[d], 1):
                    return False
                grown *= whole[d] // max(local_in[d], 1)
            new[start_j] *= grown
    args = (source, *new)
    if args == node.args:
        return False
    node.args = args
    return True


def _local(value):
    """A DTensor's local tensor itself (to_local goes through autograd); a
    plain tensor as it is."""
    local = getattr(value, "_local_tensor", None)
    return value if local is None else local


class _Plan:
    """What the backend reads from one graph: the unpartitioned graph
    (`global_gm`: activations, then weights, as placeholders), the weights'
    styles and global shapes, the activations' layouts, and the outputs'."""

    def __init__(self, gm, example_inputs, ranks):
        import torch
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.tensor import DTensor

        self.ranks = ranks
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(example_inputs):
            raise Decline("the graph's inputs and dynamo's example differ")
        self.activations, self.weights, self.meshes = [], [], []
        self.styles, self.layouts, self.global_shapes = {}, [], []
        mesh = None
        for index, (node, value) in enumerate(zip(placeholders, example_inputs)):
            if isinstance(value, DeviceMesh):
                mesh = self._check_mesh(value, mesh)
                self.meshes.append(index)
            elif isinstance(value, DTensor):
                mesh = self._check_mesh(value.device_mesh, mesh)
                kind, dim = _placement(value.placements, value.ndim, node.name)
                self.weights.append((index, node, value))
                self.styles[self._name(node)] = _weight_style(
                    kind, dim, value.ndim, node.name)
            elif isinstance(value, torch.Tensor):
                self.activations.append((index, node, value))
            else:
                raise Decline(f"input {node.name} is a {type(value).__name__}; "
                              "the backend takes tensors, DTensors and meshes")
        if not self.weights:
            raise Decline("the graph has no DTensor parameters (nothing to "
                          "partition)")
        self.mesh = mesh
        seen = _record(gm, example_inputs)

        # Each activation's layout: the placement its from_local gives it.
        for index, node, value in self.activations:
            kinds = {_placement(use.args[2] if len(use.args) > 2 else
                                use.kwargs["placements"], value.ndim, node.name)
                     for use in node.users if _is_from_local(use)}
            if len(kinds) > 1:
                raise Decline(f"input {node.name} enters the mesh with two "
                              "placements")
            kind, dim = kinds.pop() if kinds else ("R", None)
            layout = _layout(kind, dim, value.ndim, node.name)
            shape = list(value.shape)
            if layout == "sequence":
                shape[-2] *= ranks
            self.layouts.append(layout)
            self.global_shapes.append((tuple(shape), value.dtype))

        # The outputs' layouts: a DTensor's placement; a local tensor's from
        # its shape against the unpartitioned graph's (its whole value, or
        # its block of rows).
        self.global_gm = self._unpartitioned(gm, placeholders, seen)
        (output,) = [n for n in gm.graph.nodes if n.op == "output"]
        results = output.args[0]
        results = list(results) if isinstance(results, (tuple, list)) else [results]
        whole = self._global_shapes(len(results))
        self.outputs = []
        for result, global_shape in zip(results, whole):
            if not isinstance(result, torch.fx.Node) or result.name not in seen:
                raise Decline("an output of the graph is not a tensor it computes")
            if result.op == "placeholder":
                raise Decline(f"output {result.name} is an input of the graph")
            is_dtensor, placements, shape, _ = seen[result.name]
            if is_dtensor:
                kind, dim = _placement(placements, len(shape), result.name)
            elif shape == global_shape:
                kind, dim = "R", None
            elif len(shape) >= 2 and shape[:-2] == global_shape[:-2] and \
                    shape[-1] == global_shape[-1] and \
                    shape[-2] * ranks == global_shape[-2]:
                kind, dim = "S", len(shape) - 2
            else:
                raise Decline(f"output {result.name} is a local tensor of shape "
                              f"{shape}, neither the whole {global_shape} nor "
                              "its block of rows")
            self.outputs.append((is_dtensor, placements,
                                 _layout(kind, dim, len(shape), result.name)))
        if len({layout for _, _, layout in self.outputs}) > 1:
            raise Decline("the graph's outputs have different layouts")

    def _global_shapes(self, count):
        """The unpartitioned graph's output shapes, run on fake tensors (no
        data: a model's own device moves, such as a rotary table's, work on
        them, which they do not on meta tensors). A view, reshape or expand
        whose sizes dynamo wrote as the local constants is refitted to the
        global shapes (_refit); anything else that does not fit declines."""
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        class Fit(torch.fx.Interpreter):
            def run_node(self, node):
                try:
                    return super().run_node(node)
                except RuntimeError:
                    if not _refit(node, self.env):
                        raise
                    return super().run_node(node)

        # Fake tensors log each op that fails before raising; the ones
        # _refit repairs are expected.
        quiet = logging.getLogger("torch._subclasses.fake_tensor")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
                values = [torch.empty(shape, dtype=dtype)
                          for shape, dtype in self.global_shapes]
                values += [torch.empty(tuple(v.shape), dtype=v.dtype)
                           for _, _, v in self.weights]
                outputs = Fit(self.global_gm).run(*values)
        except Exception as error:  # any op may refuse the global shapes
            raise Decline("the graph read as the unpartitioned computation "
                          f"fails: {type(error).__name__}: "
                          f"{str(error).splitlines()[0] if str(error) else ''}"
                          " (a local size written into the graph as a "
                          "constant?)") from None
        finally:
            quiet.setLevel(level)
        self.global_gm.recompile()
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        if len(outputs) != count:
            raise Decline("the unpartitioned graph has another number of outputs")
        return [tuple(o.shape) for o in outputs]

    def arguments(self):
        """(placeholder index, node, example) of each argument of the
        program, in its order: the activations, then the weights."""
        return self.activations + self.weights

    def _check_mesh(self, mesh, known):
        if known is not None and mesh is not known and mesh != known:
            raise Decline("the graph uses two device meshes")
        group = _group(mesh)
        if len(group) != self.ranks:
            raise Decline(f"the device mesh holds ranks {group}; the program "
                          f"runs on {self.ranks}")
        return mesh

    @staticmethod
    def _name(node):
        """A parameter's name for Braid's diagnostics: dynamo's placeholder
        name without its decorations (l_self_modules_up_parameters_weight_ ->
        up.weight)."""
        name = node.name.strip("_")
        for prefix in ("l_self_", "l_s_", "l_"):
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        return name.replace("_modules_", ".").replace("modules_", "").replace(
            "_parameters_", ".").replace("_buffers_", ".")

    def _unpartitioned(self, gm, placeholders, seen):
        """The graph with DTensor's boundaries as identities and the meshes
        gone: placeholders activations first, then weights. A view, reshape
        or expand of a local tensor keeps the local shapes of its input and
        result (`braid_local` in its meta) for _refit."""
        import torch
        graph = torch.fx.Graph()
        env = {}
        order = [node for _, node, _ in self.activations] + \
                [node for _, node, _ in self.weights]
        for node in order:
            env[node] = graph.placeholder(node.name)
        meshes = {placeholders[i] for i in self.meshes}
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                continue
            if node.op == "output":
                graph.output(torch.fx.node.map_arg(node.args[0], env.__getitem__))
                continue
            if _is_from_local(node) or (node.op == "call_method" and
                                        node.target in _IDENTITY_METHODS):
                env[node] = env[node.args[0]]
                continue
            used = []
            torch.fx.node.map_arg((node.args, node.kwargs), used.append)
            if any(n in meshes for n in used):
                raise Decline(f"{node.format_node()} uses the device mesh; the "
                              "backend maps only from_local, redistribute and "
                              "to_local")
            target = getattr(node.target, "__module__", "") or ""
            if "c10d" in str(node.target) or "distributed" in target:
                raise Decline(f"{node.target} is a collective or a DTensor "
                              "call the backend does not map")
            env[node] = graph.node_copy(node, env.__getitem__)
            if _sizes(node) is not None:
                shapes = [seen.get(getattr(n, "name", None))
                          for n in (node.args[0], node)]
                if all(v is not None and not v[0] for v in shapes):
                    env[node].meta["braid_local"] = tuple(v[2] for v in shapes)
        return torch.fx.GraphModule(gm, graph)

    def module(self):
        """The unpartitioned computation as a module whose parameters are
        the weights at their global shapes (uninitialized: export reads
        shapes only), and example activations at global shapes."""
        import torch
        plan = self
        names = [self._name(node) for _, node, _ in self.weights]

        class Unpartitioned(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.graph_module = plan.global_gm
                for name, (_, _, value) in zip(names, plan.weights):
                    owner = self
                    *path, leaf = name.split(".")
                    for part in path:
                        if not hasattr(owner, part):
                            owner.add_module(part, torch.nn.Module())
                        owner = getattr(owner, part)
                    owner.register_parameter(leaf, torch.nn.Parameter(
                        torch.empty(tuple(value.shape), dtype=value.dtype),
                        requires_grad=False))

            def forward(self, *activations):
                # getattr, not get_parameter: export's functional_call puts
                # plain tensors in the parameters' places.
                weights = [functools.reduce(getattr, n.split("."), self)
                           for n in names]
                return self.graph_module(*activations, *weights)

        module = Unpartitioned()
        ordered = [n for n, _ in module.named_parameters()]
        if ordered != names:
            raise Decline(f"parameters {names} do not keep their order")
        example = tuple(torch.zeros(shape, dtype=dtype)
                        for shape, dtype in self.global_shapes)
        return module, example


def _group(mesh):
    """The world ranks of a 1-D device mesh, or Decline."""
    import torch.distributed as dist
    if mesh.ndim != 1:
        raise Decline(f"the device mesh is {mesh.ndim}-D; the backend takes "
                      "a 1-D mesh (a 2-D mesh's dimension, mesh['tp'], "
                      "for each row of ranks)")
    group = mesh.mesh.flatten().tolist()
    if dist.get_rank() not in group:
        raise Decline(f"the device mesh holds ranks {group}, not this one")
    return group


def _communicator(example_inputs):
    """The MPI communicator (None: MPI's world, or a Fortran handle) of the
    graph's device mesh: the world for a mesh of every rank, a split of
    the world for a mesh of some (a row of a 2-D mesh, as
    parallelize_module(model, mesh["tp"], plan) takes)."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor
    from . import program as _program
    for value in example_inputs:
        mesh = (value if isinstance(value, DeviceMesh) else value.device_mesh
                if isinstance(value, DTensor) else None)
        if mesh is None:
            continue
        group = _group(mesh)
        if group == list(range(dist.get_world_size())):
            return None
        try:
            return _program.split_world(group)
        except (BraidError, ValueError) as error:
            raise Decline(f"cannot make the communicator of ranks {group}: "
                          f"{error}") from None
    return None


def _compile(gm, example_inputs, options):
    """(Program, plan) for one graph, or Decline."""
    import torch
    import torch.distributed as dist
    from . import program as _program
    from .pytorch import to_mlir

    if not dist.is_available() or not dist.is_initialized():
        raise Decline("torch.distributed is not initialized (the backend runs "
                      "one process per rank of a job)")
    communicator = _communicator(example_inputs)
    try:
        rank, ranks = _program.rank_and_size(communicator)
    except BraidError as error:
        raise Decline(f"Braid's runtime cannot run on the mesh's ranks: "
                      f"{error}") from None
    if communicator is None and (rank != dist.get_rank() or
                                 ranks != dist.get_world_size()):
        raise Decline(f"MPI's world (rank {rank} of {ranks}) is not "
                      f"torch.distributed's (rank {dist.get_rank()} of "
                      f"{dist.get_world_size()}): start the job with mpirun")
    if torch.is_grad_enabled() and any(
            getattr(v, "requires_grad", False) for v in example_inputs):
        raise Decline("the graph is called with gradients enabled: the backend "
                      "compiles inference (torch.no_grad or "
                      "torch.inference_mode); training steps are not built")
    plan = _Plan(gm, example_inputs, ranks)
    module, example = plan.module()
    try:
        _, text, _, _ = to_mlir(module, example, plan.styles, ranks,
                                input_layout=plan.layouts,
                                output_layout=plan.outputs[0][2])
    except (CompileError, ValueError, RuntimeError) as error:
        raise Decline(f"Braid cannot export the graph: {error}") from None
    cache = options.pop("cache", None) or os.environ.get("BRAID_CACHE") or \
        os.path.join(os.path.expanduser("~"), ".cache", "braid", "programs")
    options.setdefault("name", "torch_compile")
    try:
        path = _program.compile_once(text, cache, communicator=communicator,
                                     **options)
        program = _program.Program(path, communicator)
    except (CompileError, BraidError) as error:
        raise Decline("Braid cannot compile the graph: " +
                      ": ".join(str(error).splitlines()[:2])) from None
    for spec, (_, node, value) in zip(program.arguments, plan.arguments()):
        shape = tuple(_local(value).shape)
        if tuple(spec.shape) != shape:
            raise Decline(f"{node.name}: this rank holds {shape}, Braid's "
                          f"partitioning gives it {tuple(spec.shape)}")
    return program, plan


class CompiledGraph:
    """What dynamo calls instead of the graph: Braid's program on this rank,
    after a first call that is checked against the eager graph."""

    def __init__(self, gm, program, plan, check, reason=None):
        self.gm, self.program, self.plan = gm, program, plan
        self.checked = not check
        self.reason, self.calls = reason, 0
        GRAPHS.append(self)

    def _run(self, args):
        from torch.distributed.tensor import DTensor
        if self.reason is not None:
            return self.gm(*args)
        self.calls += 1
        results = self.program(*[_local(args[i]) for i, _, _ in self.plan.arguments()],
                               out=self.program.torch_results())
        outputs = []
        for tensor, (is_dtensor, placements, _) in zip(results, self.plan.outputs):
            if is_dtensor:
                tensor = DTensor.from_local(tensor, self.plan.mesh, placements,
                                            run_check=False)
            outputs.append(tensor)
        return tuple(outputs)

    def __repr__(self):
        if self.reason is not None:
            return f"<braid CompiledGraph, eager: {self.reason}>"
        return f"<braid CompiledGraph {self.program!r}, {self.calls} calls>"

    def __call__(self, *args):
        if self.checked:
            return self._run(args)
        return self._first(args)

    def _first(self, args):
        """Runs both and keeps Braid's program only if every rank's result
        is within the module tolerance of the eager graph's."""
        import torch
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor
        from .dtypes import TOLERANCE, relative_error
        eager = self.gm(*args)
        eager = tuple(eager) if isinstance(eager, (tuple, list)) else (eager,)
        problem = ""
        try:
            got = self._run(args)
            for index, (g, e) in enumerate(zip(got, eager)):
                if isinstance(g, DTensor):
                    g, e = g.to_local(), e.to_local()
                if g.shape != e.shape:
                    problem = (f"output {index} has shape {tuple(g.shape)}; the "
                               f"eager graph's is {tuple(e.shape)}")
                    break
                kind = "f32" if e.dtype == torch.float32 else "bf16"
                error, _ = relative_error(g.float().numpy(), e.float().numpy(),
                                          floor=1.0)
                if not error <= TOLERANCE["module"][kind]:
                    problem = (f"output {index} differs from the eager graph's "
                               f"by {error:.3g} relative (tolerance "
                               f"{TOLERANCE['module'][kind]}): the graph's "
                               "local code is not the unpartitioned "
                               "computation (a reduction over a sharded "
                               "dimension, a local size written as a constant?)")
                    break
        except (BraidError, ValueError, TypeError, RuntimeError) as error:
            problem = f"Braid's program failed: {error}"
        flag = torch.tensor([1 if problem else 0])
        dist.all_reduce(flag)
        if flag.item():
            warnings.warn("braid: torch.compile runs this graph eagerly: "
                          + (problem or "another rank's first call differs from "
                             "the eager graph"), stacklevel=2)
            self.reason = problem or "another rank's first call differs"
            self.calls = 0
        self.checked = True
        return eager


def backend(gm=None, example_inputs=None, options=None, **keywords):
    """The torch.compile backend. torch.compile(model, backend="braid",
    options={...}) calls it with dynamo's graph; backend(cache=..., overlap=
    ...) with keywords only returns a backend with those options."""
    if gm is None:
        return lambda g, e, options=None: backend(g, e, {**keywords,
                                                         **(options or {})})
    options = dict(options or {}, **keywords)
    check = options.pop("check", True)
    try:
        program, plan = _compile(gm, example_inputs, options)
    except Decline as reason:
        warnings.warn(f"braid: torch.compile runs this graph eagerly: {reason}",
                      stacklevel=2)
        return CompiledGraph(gm, None, None, False, str(reason))
    return CompiledGraph(gm, program, plan, check)


def register():
    """Registers backend() as torch.compile's "braid" (braid.pytorch does
    on import)."""
    from torch._dynamo import list_backends, register_backend
    if "braid" not in list_backends(exclude_tags=()):
        register_backend(name="braid")(backend)
