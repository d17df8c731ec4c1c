"""Training steps through the PyTorch front door: a module, a plan, a loss;
Braid compiles the forward and the backward as one program per rank and
returns the loss and every parameter's gradient.

    import torch, braid.pytorch
    step = braid.pytorch.train_step(
        layer, (x,), config.base_model_tp_plan, ranks=4,
        loss_fn=lambda out, target: torch.nn.functional.mse_loss(out, target),
        targets=(target,), kwargs={"position_embeddings": (cos, sin)})
    loss, grads = step(x, targets=(target,), position_embeddings=(cos, sin))
    grads["mlp.up_proj.weight"]          # the whole gradient, as autograd's

The joint graph is PyTorch's own: the loss and its `torch.func.grad`,
functionalized and traced by `make_fx` (with torch-mlir's decompositions)
into one FX graph of aten ops, imported with torch-mlir's
`stateless_fx_import`. Braid then sees
one function from (inputs, targets, parameters, buffers) to (loss, the
gradient of each parameter that requires one). The plan shards the
parameters as for inference; each gradient is laid out like its parameter
(`braid.sharded_like`), so partitioning derives the backward's collectives
(the input gradient's all-reduce under tensor parallelism, the forward's
all-gather's reduce-scatter under sequence parallelism, the replicated
parameters' gradient all-reduce), and the overlap patterns apply to the
backward's contractions as to the forward's. The function is marked
`braid.backward`, which tells braid-apply-parallel-plan that a weight's
later contractions along other dimensions are its gradients'.

The step is traced with the module in eval mode: dropout is off, so that a
step is a function of its inputs (docs/rationale/training.md).
"""
import numpy as np

from . import pytorch as _pt
from .compiler import CompileError, Diagnostic, positive_int
from .compiler import compile as braid_compile

__all__ = ["train_step", "TrainStep", "RankTrainStep", "export_joint"]


def _decompositions():
    """The front door's decomposition table, with the backward ops that
    torch's table writes as index_put (which torch-mlir lowers to
    tm_tensor.scatter, which nothing below it reads) as comparisons with
    every position instead:

    - embedding_dense_backward: the one-hot of the token ids against the
      rows, transposed, times the output gradient: a contraction, which
      partitioning splits like any other (dense: [tokens, vocabulary]);
    - nll_loss_backward: minus the one-hot of the targets, times the
      output gradient (over the total weight for a mean), with class
      weights and ignore_index.
    """
    import torch
    table = _pt._decompositions()
    aten = torch.ops.aten

    def embedding_dense_backward(grad_output, indices, num_weights,
                                 padding_idx, scale_grad_by_freq):
        if scale_grad_by_freq:
            return NotImplemented
        rows = torch.arange(num_weights, device=indices.device)
        hit = (indices.unsqueeze(-1) == rows) & (
            indices != padding_idx).unsqueeze(-1)
        onehot = hit.reshape(-1, num_weights).to(grad_output.dtype)
        return onehot.t() @ grad_output.reshape(-1, grad_output.shape[-1])

    def nll_loss_backward(grad_output, self, target, weight, reduction,
                          ignore_index, total_weight):
        classes = torch.arange(self.shape[-1], device=self.device)
        hit = (target.unsqueeze(-1) == classes) & (
            target != ignore_index).unsqueeze(-1)
        scale = -grad_output
        if reduction == 1:                      # mean
            scale = scale / total_weight
        elif reduction == 0 and scale.dim() > 0:  # none: per sample
            scale = scale.unsqueeze(-1)
        grad = hit.to(self.dtype) * scale
        return grad * weight if weight is not None else grad

    table[aten.embedding_dense_backward.default] = embedding_dense_backward
    table[aten.nll_loss_backward.default] = nll_loss_backward
    return table


def _target_names(targets):
    return [f"target{i}" for i in range(len(targets))]


def _without_targets(exported, num_targets):
    """`exported` as the module's own inputs see it: its tensor inputs
    without the targets that follow them."""
    inputs = exported.num_inputs - num_targets
    return _pt.Exported(None, exported.names[:inputs],
                        exported.shapes[:inputs], inputs)


def _call_tensors(step, inputs, targets, kwargs):
    """The tensors of a call of `step` (a TrainStep or RankTrainStep): its
    inputs in the function's order, then its targets; ValueError for
    another number of either."""
    import torch
    targets = tuple(targets)
    if len(targets) != step._num_targets:
        raise ValueError(f"the step was compiled for {step._num_targets} "
                         f"targets; got {len(targets)}")
    tensors = _pt._input_tensors(
        _without_targets(step.exported, step._num_targets), inputs,
        kwargs if step._kwargs is not None else None)
    return tensors + [torch.as_tensor(t).detach() for t in targets]


def export_joint(module, example_args, loss_fn=None, targets=(), kwargs=None,
                 func_name="main"):
    """Exports one training step of `module`: the loss (`loss_fn(output,
    *targets)`, or the module's output itself when `loss_fn` is None: a
    scalar) and its gradient with respect to every parameter that requires
    one, as linalg-on-tensors MLIR. Returns (exported, grad_names):
    `exported.names` are the tensor inputs, the targets ("target0", ...),
    then parameters and buffers; the function's results are the loss and
    the gradients of `grad_names`, in that order."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.utils import _pytree as pytree
    from torch_mlir import fx

    targets = tuple(targets)
    for index, target in enumerate(targets):
        if not isinstance(target, torch.Tensor):
            raise TypeError(f"targets[{index}] is {type(target).__name__}; "
                            "targets are tensors")
    if loss_fn is not None and not callable(loss_fn):
        raise TypeError(f"loss_fn is {type(loss_fn).__name__}, not callable")
    leaves, spec, input_names, positions = _pt._flatten_inputs(example_args,
                                                               kwargs)
    params = list(module.named_parameters())
    buffers = list(module.named_buffers())
    names = [n for n, _ in params] + [n for n, _ in buffers]
    tensors = [t.detach() for _, t in params] + [t.detach() for _, t in buffers]
    wants = [p.requires_grad for _, p in params] + [False] * len(buffers)
    grad_names = [n for n, w in zip(names, wants) if w]
    if not grad_names:
        raise ValueError(f"{type(module).__name__} has no parameter that "
                         "requires a gradient")
    num_inputs, num_targets = len(positions), len(targets)

    def joint(*flat):
        inputs = flat[:num_inputs]
        given = flat[num_inputs:num_inputs + num_targets]
        weights = flat[num_inputs + num_targets:]
        filled = list(leaves)
        for position, tensor in zip(positions, inputs):
            filled[position] = tensor
        args, kw = pytree.tree_unflatten(filled, spec)

        def loss_of(trainable):
            it = iter(trainable)
            every = [next(it) if want else w for w, want in zip(weights, wants)]
            output = torch.func.functional_call(
                module, dict(zip(names, every)), args, kw)
            loss = output if loss_fn is None else loss_fn(output, *given)
            if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
                raise ValueError(
                    "the loss must be a scalar tensor; got "
                    + (f"shape {tuple(loss.shape)}"
                       if isinstance(loss, torch.Tensor)
                       else type(loss).__name__)
                    + (" (the module's output: pass loss_fn)"
                       if loss_fn is None else " from loss_fn"))
            return loss, loss

        trainable = tuple(w for w, want in zip(weights, wants) if want)
        grads, loss = torch.func.grad(loss_of, has_aux=True)(trainable)
        return (loss, *grads)

    args = tuple(leaves[p] for p in positions) + targets + tuple(tensors)
    # One tensor passed twice (an input that is also the target) must stay
    # two arguments: make_fx would trace both uses to one of them.
    seen, distinct = set(), []
    for tensor in args:
        distinct.append(tensor.clone() if id(tensor) in seen else tensor)
        seen.add(id(tensor))
    args = tuple(distinct)
    undo_frames = _pt._model_frames_only()
    undo_experts = _pt._experts_everywhere(module)
    was_training = module.training
    module.eval()
    # Attention as its math (matmuls and a softmax), so that autograd
    # records those and their gradients: torch-mlir has no fused
    # attention's backward.
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel([SDPBackend.MATH]):
            # Functionalized: decompositions write in place (rms_norm's
            # add_), which torch-mlir's stateless import cannot take.
            graph = make_fx(torch.func.functionalize(
                                joint, remove="mutations"),
                            decomposition_table=_decompositions(),
                            record_stack_traces=True)(*args)
        imported = fx.stateless_fx_import(graph,
                                          output_type="linalg-on-tensors",
                                          model_name=func_name)
    except ValueError:
        raise
    except Exception as error:  # tracing and torch-mlir raise anything
        message = str(error).strip().split("\n")[0] or type(error).__name__
        raise CompileError(
            f"torch-mlir could not export a training step of "
            f"{type(module).__name__}",
            [Diagnostic(f"error: torch-mlir: {type(error).__name__}: "
                        f"{message}")]) from error
    finally:
        module.train(was_training)
        undo_experts()
        undo_frames()
    text = imported.operation.get_asm(enable_debug_info=True)
    if "ml_program" in text:
        raise RuntimeError("torch-mlir embedded tensors in the module instead "
                           "of passing them as arguments")
    shapes = [tuple(a.shape) for a in args]
    exported = _pt.Exported(text, input_names + _target_names(targets) + names,
                            shapes, num_inputs + num_targets)
    return exported, grad_names


class TrainStep(_pt.ParallelModule):
    """One training step of a torch module compiled by Braid for `ranks` CPU
    ranks (made by train_step). Calling it with the example's structure of
    inputs (and `targets=`) runs forward and backward on the module's
    current parameters and returns `(loss, grads)`: the loss as a 0-d
    tensor, and a dict of each parameter's whole gradient by name (as
    `module.named_parameters()` names them), equal to what torch autograd
    gives on the unpartitioned module. The parameters are not changed: an
    optimizer of the user's (torch.optim) takes the gradients."""

    def __init__(self, module, exported, text, artifact, grad_names, kwargs,
                 styles, num_targets):
        super().__init__(module, exported, text, artifact, "replicate",
                         kwargs=kwargs, styles=styles)
        self.grad_names = grad_names
        self._num_targets = num_targets

    def __call__(self, *inputs, targets=(), **run_options):
        kwargs = {k: run_options.pop(k) for k in list(run_options)
                  if self._kwargs is not None and k in self._kwargs}
        tensors = _call_tensors(self, inputs, targets, kwargs)
        tensors += [t for _, t in self.module.named_parameters()]
        tensors += [t for _, t in self.module.named_buffers()]
        values = [_numpy(t) for t in tensors]
        outputs = self.artifact.run(self.shard(values), **run_options)
        specs = self.artifact.results
        loss = _torch(outputs[0][0], specs[0].dtype)
        shapes = dict(zip(self.exported.names, self.exported.shapes))
        # Gradients are replicated over a data axis: one row of ranks.
        data = self.exported.data
        row = outputs[:data.tensor_parallel] if data else outputs
        grads = {}
        for index, name in enumerate(self.grad_names, start=1):
            pieces = [rank_outputs[index] for rank_outputs in row]
            whole = assemble(name, pieces, shapes[name],
                             self._styles.get(name))
            grads[name] = _torch(whole, specs[index].dtype)
        return loss, grads


class RankTrainStep(_pt.RankModule):
    """One training step run in this process as one rank of the job (made
    by train_step(..., per_rank=True) on every rank, as parallelize's
    RankModule). `parameters` holds this rank's part of each trained
    parameter (name -> leaf tensor, cut once from the module: no global
    copy is kept), which the next call reads as it is then: update them in
    place, for example with a torch.optim optimizer over
    `parameters.values()` after setting each `.grad`. A call takes this
    rank's part of each input (a whole global input is cut to it) and the
    targets (whole), and returns `(loss, grads)`: the loss, and this rank's
    part of each gradient, laid out as `parameters[name]`. Every rank
    calls it, in the same order. `reshard()` cuts the parts again from the
    module's current parameters."""

    def __init__(self, module, exported, program, grad_names, kwargs,
                 styles, num_targets):
        self.grad_names, self._num_targets = grad_names, num_targets
        super().__init__(module, exported, program, "replicate", kwargs,
                         styles)

    def reshard(self):
        super().reshard()
        # The trained parts as leaves for the job's optimizer; the program
        # reads the same storage.
        first = self.exported.num_inputs
        self.parameters = {}
        for index, name in enumerate(self.exported.names[first:]):
            if name in self.grad_names:
                leaf = self._weights[index].requires_grad_(True)
                self.parameters[name] = leaf
                self._weights[index] = leaf.detach()

    def __call__(self, *inputs, targets=(), **kwargs):
        tensors = _call_tensors(self, inputs, targets, kwargs)
        results = self.program(*self._parts(tensors), *self._weights,
                               out=self.program.torch_results())
        return results[0], dict(zip(self.grad_names, results[1:]))

    def __repr__(self):
        return (f"<braid.pytorch.RankTrainStep {type(self.module).__name__}, "
                f"rank {self.program.rank} of {self.program.size}>")


def _numpy(tensor):
    import torch
    tensor = tensor.detach().cpu()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.float()
    return tensor.numpy()


def _torch(array, dtype):
    import torch
    tensor = torch.from_numpy(np.array(array, order="C"))
    return tensor.to(torch.bfloat16) if dtype == "bf16" else tensor


def assemble(name, pieces, shape, style=None):
    """The whole value of argument-shaped `name` (global `shape`) from each
    rank's piece: rank_part's inverse (the pieces concatenated along the
    one dimension they split, each packed part separately for
    packed_colwise), or the first piece when nothing is split."""
    shape = tuple(shape)
    local = tuple(np.shape(pieces[0]))
    split = [d for d, (g, p) in enumerate(zip(shape, local)) if g != p]
    if not split:
        return pieces[0]
    d = split[0]
    ranks = len(pieces)
    if len(split) != 1 or shape[d] != ranks * local[d]:
        raise ValueError(f"{name}: cannot assemble shape {shape} from "
                         f"{ranks} pieces of {local}")
    if style == "packed_colwise" and d == len(shape) - 2:
        parts = [np.reshape(p, local[:d] + (_pt.PACKED_PARTS, -1) +
                            local[d + 1:]) for p in pieces]
        return np.concatenate(parts, axis=d + 1).reshape(shape)
    return np.concatenate(pieces, axis=d)


def train_step(module, example_args, plan, loss_fn=None, targets=(), ranks=4,
               input_layout="replicate", kwargs=None, per_rank=False,
               cache=None, communicator=None, data_parallel=1,
               **compile_options):
    """Compiles one training step of `module` for `ranks` CPU ranks under
    the tensor-parallel `plan` (as parallelize's: module or parameter paths
    to styles, HuggingFace's shipped plans, input layouts "replicate" or
    "sequence"). The loss is `loss_fn(output, *targets)` (None: the
    module's output is the loss), a scalar. Returns a TrainStep, whose call
    gives (loss, grads by parameter name). Other keyword arguments go to
    braid.compile (overlap, ...).

    per_rank=True is for a job that is one process per rank (mpirun), as
    parallelize's: every rank calls train_step with the same arguments,
    `ranks` is the size of `communicator` (None: MPI's world), rank 0
    compiles into the `cache` directory every rank sees, and each rank gets
    a RankTrainStep holding its part of the parameters.

    `data_parallel` (a divisor of `ranks`) trains on a 2-D grid, as
    parallelize's: the batch of the inputs and targets split over
    data_parallel rows of ranks, the plan over each row; each row's
    gradients are partial sums over its part of the batch, all-reduced
    over the rows (data parallelism), so that every rank holds the
    gradients of the whole batch's loss."""
    if per_rank:
        from . import program as _program
        if cache is None:
            raise ValueError("per_rank=True needs cache=, a directory every "
                             "rank sees, where rank 0 compiles for the job")
        _, ranks = _program.rank_and_size(communicator)
    ranks = positive_int(ranks, "ranks")
    data_parallel = _pt._data_parallel(ranks, data_parallel)
    exported, grad_names = export_joint(module, tuple(example_args), loss_fn,
                                        targets, kwargs)
    # The loss and the gradients are whole on every row.
    exported.data = _pt._data_split(exported, ranks, data_parallel,
                                    split_results=False)
    for name, shape in zip(exported.names, exported.shapes):
        if 0 in shape:
            raise ValueError(f"{name} has shape {shape}; Braid compiles "
                             "tensors without zero-sized dimensions")
    num_targets = len(tuple(targets))
    shell = _without_targets(exported, num_targets)
    layouts = _pt._input_layouts(shell, input_layout)
    first = next(iter(layouts.values()), "replicate")
    styles, inp, _ = _pt._argument_styles(exported, plan, first, first)
    if inp != first and isinstance(input_layout, str):
        layouts = _pt._input_layouts(shell, inp)
    if exported.data and "sequence" in layouts.values():
        # Partitioning fails on the backward's reshapes of [batch, seq]
        # tokens split over both axes (docs/rationale/frontends.md).
        raise ValueError("train_step with data_parallel > 1 takes "
                         "replicated activations (tensor parallel rows); "
                         "sequence-parallel rows on a data axis are not "
                         "supported")
    styles.update(layouts)
    styles.update({n: "replicate" for n in _target_names(tuple(targets))})
    index = {name: i for i, name in enumerate(exported.names)}
    results = ['braid.parallel = "replicate"']
    results += [f"braid.sharded_like = {index[n]} : i64" for n in grad_names]
    text = _pt.annotate(exported, styles, None, ranks, result_attrs=results,
                        func_attrs="braid.backward")
    kwargs = dict(kwargs) if kwargs is not None else None
    compile_options.setdefault("name", type(module).__name__ + "_train_step")
    if per_rank:
        path = _program.compile_once(text, cache, communicator=communicator,
                                     **compile_options)
        return RankTrainStep(module, exported,
                             _program.Program(path, communicator), grad_names,
                             kwargs, styles, num_targets)
    artifact = braid_compile(text, **compile_options)
    return TrainStep(module, exported, text, artifact, grad_names, kwargs,
                     styles, num_targets)
