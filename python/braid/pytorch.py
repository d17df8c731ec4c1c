"""The PyTorch front door: a torch module, a tensor-parallel plan per
submodule, Braid's partitioning and overlap, CPU ranks.

    import torch, braid.pytorch
    model = MLP()                      # nn.Linear layers `up` and `down`
    x = torch.randn(64, 256)
    tp = braid.pytorch.parallelize(model, (x,), {"up": "colwise",
                                                 "down": "rowwise"}, ranks=4)
    y = tp(x)                          # runs on 4 ranks; equals model(x)

The module is exported with torch-mlir's FX importer to linalg-on-tensors,
every parameter becoming a function argument; the plan becomes
`braid.parallel` attributes on those arguments (see the
braid-apply-parallel-plan pass), which Braid turns into upstream `shard`
annotations, partitions and overlaps. Plans follow PyTorch's
parallelize_module: "colwise" (ColwiseParallel: weight and bias split by
output features), "rowwise" (RowwiseParallel: weight split by input
features, bias replicated, outputs all-reduced), and the input and output
layouts "replicate" or "sequence" (sequence parallelism: activations split
along the sequence dimension, all-gathered before the colwise layer and
reduce-scattered after the rowwise one). PyTorch's own ColwiseParallel and
RowwiseParallel objects are accepted too.

Needs torch and torch-mlir (scripts/setup-frontends.sh installs both).
"""
import re

import numpy as np

from .compiler import compile as braid_compile

__all__ = ["export", "parallelize", "ParallelModule", "Exported"]

_STYLES = ("colwise", "rowwise", "replicate", "sequence")


class Exported:
    """A torch module in linalg-on-tensors MLIR with its parameters as
    arguments: `text`, `names` (argument names: the inputs "input0", ...,
    then parameter names such as "up.weight"), `shapes`."""

    def __init__(self, text, names, shapes, num_inputs):
        self.text, self.names, self.shapes = text, names, shapes
        self.num_inputs = num_inputs


def export(module, example_args, func_name="main"):
    """Exports `module` applied to `example_args` with torch-mlir's FX
    importer, parameters and buffers as function arguments after the
    inputs."""
    import torch
    from torch_mlir import fx

    names = [n for n, _ in module.named_parameters()]
    names += [n for n, _ in module.named_buffers()]
    tensors = [t.detach() for _, t in module.named_parameters()]
    tensors += [t.detach() for _, t in module.named_buffers()]

    class WeightsAsArguments(torch.nn.Module):
        # The model is not registered as a submodule, so that torch.export
        # sees no parameters: every tensor arrives as an input.
        def __init__(self):
            super().__init__()
            object.__setattr__(self, "model", module)

        def forward(self, *args):
            inputs, weights = args[:len(example_args)], args[len(example_args):]
            return torch.func.functional_call(
                self.model, dict(zip(names, weights)), tuple(inputs))

    args = tuple(example_args) + tuple(tensors)
    imported = fx.export_and_import(WeightsAsArguments().eval(), *args,
                                    output_type="linalg-on-tensors",
                                    func_name=func_name)
    text = str(imported)
    if "dense_resource" in text or "ml_program" in text:
        raise RuntimeError("torch-mlir embedded tensors in the module instead "
                           "of passing them as arguments")
    arg_names = [f"input{i}" for i in range(len(example_args))] + names
    shapes = [tuple(a.shape) for a in args]
    return Exported(text, arg_names, shapes, len(example_args))


def _style_name(style):
    """A plan entry as one of _STYLES, plus layouts from PyTorch objects."""
    if isinstance(style, str):
        if style not in _STYLES:
            raise ValueError(f"unknown parallel style {style!r}; expected "
                             + ", ".join(_STYLES))
        return style, None, None
    kind = type(style).__name__
    mapping = {"ColwiseParallel": "colwise", "RowwiseParallel": "rowwise"}
    if kind not in mapping:
        raise ValueError(f"unsupported parallel style {kind}; Braid plans use "
                         "ColwiseParallel, RowwiseParallel or their names")

    def layout(attr):
        value = getattr(style, attr, None)
        if isinstance(value, (tuple, list)):
            value = value[0] if value else None
        return "sequence" if type(value).__name__ == "Shard" else None
    return mapping[kind], layout("input_layouts"), layout("output_layouts")


def _argument_styles(exported, plan, input_layout, output_layout):
    styles = {}
    for name in exported.names[exported.num_inputs:]:
        owner, _, leaf = name.rpartition(".")
        entry = plan.get(owner, plan.get(name))
        if entry is None:
            styles[name] = "replicate"
            continue
        style, inp, out = _style_name(entry)
        input_layout = inp or input_layout
        output_layout = out or output_layout
        if style == "rowwise" and leaf == "bias":
            style = "replicate"      # added after the reduction
        styles[name] = style
    unused = [k for k in plan if not any(
        n == k or n.startswith(k + ".") for n in exported.names)]
    if unused:
        raise ValueError(f"plan names {unused}, which the module has no "
                         "parameters for")
    for i in range(exported.num_inputs):
        styles[f"input{i}"] = input_layout
    return styles, output_layout


_SIGNATURE = re.compile(r"func\.func @(?P<name>[\w$.]+)\((?P<args>.*?)\) -> "
                        r"(?P<results>.*?) \{\s*$", re.M)


def annotate(exported, styles, output_layout, ranks, grid="braid_tp"):
    """The exported text with the plan as `braid.parallel` attributes and a
    1-D grid of `ranks`."""
    match = _SIGNATURE.search(exported.text)
    if not match:
        raise RuntimeError("cannot find the function in torch-mlir's output")
    args = re.findall(r"(%[\w$.]+): (tensor<[^>]*>)", match["args"])
    if len(args) != len(exported.names):
        raise RuntimeError(f"the exported function has {len(args)} arguments; "
                           f"expected {len(exported.names)}")
    new_args = ", ".join(
        f'{a}: {t} {{braid.parallel = "{styles[n]}"}}'
        for (a, t), n in zip(args, exported.names))
    results = re.findall(r"tensor<[^>]*>", match["results"])
    new_results = ", ".join(f'{t} {{braid.parallel = "{output_layout}"}}'
                            for t in results)
    signature = (f"func.func @{match['name']}({new_args}) -> ({new_results}) "
                 f"attributes {{braid.grid = @{grid}}} {{")
    text = exported.text[:match.start()] + signature + exported.text[match.end():]
    grid_op = f"shard.grid @{grid}(shape = {ranks})"
    module = re.search(r"^module( attributes \{.*\})? \{\s*$", text, re.M)
    if module:
        return text[:module.end()] + "\n  " + grid_op + text[module.end():]
    return grid_op + "\n" + text


class ParallelModule:
    """A torch module compiled by Braid for `ranks` CPU ranks. Calling it
    runs it on the module's current parameters; `artifact` is the
    braid.Artifact (report, ir(), ...), `text` the annotated MLIR."""

    def __init__(self, module, exported, text, artifact, output_layout):
        self.module, self.exported, self.text = module, exported, text
        self.artifact, self.output_layout = artifact, output_layout

    def shard(self, values):
        """Splits global arrays (inputs, then parameters) into per-rank
        lists, as the compiled function's arguments are partitioned."""
        ranks = self.artifact.ranks
        per_rank = [[] for _ in range(ranks)]
        for name, value, spec in zip(self.exported.names, values,
                                     self.artifact.arguments):
            value = np.asarray(value)
            split = [d for d, (g, p) in enumerate(zip(value.shape, spec.shape))
                     if g != p]
            if not split:
                parts = [value] * ranks
            elif len(split) == 1 and value.shape[split[0]] == ranks * spec.shape[split[0]]:
                parts = np.split(value, ranks, axis=split[0])
            else:
                raise ValueError(f"{name}: cannot split shape {value.shape} "
                                 f"into {ranks} blocks of {spec.shape}")
            for rank in range(ranks):
                per_rank[rank].append(np.ascontiguousarray(parts[rank]))
        return per_rank

    def __call__(self, *inputs, **run_options):
        import torch
        params = [t.detach().cpu().numpy()
                  for _, t in self.module.named_parameters()]
        params += [t.detach().cpu().numpy()
                   for _, t in self.module.named_buffers()]
        values = [torch.as_tensor(i).detach().cpu().numpy() for i in inputs]
        outputs = self.artifact.run(self.shard(values + params), **run_options)
        results = []
        for index in range(len(self.artifact.results)):
            pieces = [rank_outputs[index] for rank_outputs in outputs]
            if self.output_layout == "sequence":
                results.append(np.concatenate(pieces, axis=-2))
            else:
                results.append(pieces[0])
        results = [torch.from_numpy(np.ascontiguousarray(r)) for r in results]
        return results[0] if len(results) == 1 else tuple(results)


def parallelize(module, example_args, plan, ranks=4, input_layout="replicate",
                output_layout=None, **compile_options):
    """Compiles `module` (a torch.nn.Module) for `ranks` CPU ranks under the
    tensor-parallel `plan`: {submodule name: "colwise" | "rowwise" |
    ColwiseParallel() | RowwiseParallel()}. Parameters the plan does not
    name are replicated. `input_layout` and `output_layout` ("replicate" or
    "sequence"; the output defaults to the input's) are the activations'
    layouts. Other keyword arguments go to braid.compile (overlap, ...)."""
    exported = export(module, tuple(example_args))
    styles, output_layout = _argument_styles(exported, plan, input_layout,
                                             output_layout or input_layout)
    for layout in (styles.get("input0"), output_layout):
        if layout not in ("replicate", "sequence"):
            raise ValueError(f"layouts are 'replicate' or 'sequence', not {layout!r}")
    text = annotate(exported, styles, output_layout, ranks)
    artifact = braid_compile(text, **compile_options)
    return ParallelModule(module, exported, text, artifact, output_layout)
