"""The PyTorch front door: a torch module, a tensor-parallel plan, Braid's
partitioning and overlap, CPU ranks.

    import torch, braid.pytorch
    model = MLP()                      # nn.Linear layers `up` and `down`
    x = torch.randn(64, 256)
    tp = braid.pytorch.parallelize(model, (x,), {"up": "colwise",
                                                 "down": "rowwise"}, ranks=4)
    y = tp(x)                          # runs on 4 ranks; equals model(x)

HuggingFace modules work the same, with the plans transformers ships:

    layer = LlamaDecoderLayer(config, 0)
    tp = braid.pytorch.parallelize(
        layer, (x,), config.base_model_tp_plan, ranks=4,
        kwargs={"position_embeddings": (cos, sin)}, input_layout="sequence")

The module is exported with torch-mlir's FX importer to linalg-on-tensors,
every parameter and buffer becoming a function argument (named after it, so
that errors name `layers.0.mlp.up_proj.weight`); the plan becomes
`braid.parallel` attributes on those arguments (the
braid-apply-parallel-plan pass), which Braid turns into upstream `shard`
annotations, partitions and overlaps.

Plans map module or parameter paths to styles, as PyTorch's
parallelize_module and HuggingFace's `tp_plan` do. Keys may hold `*` for
one path component (`layers.*.mlp.up_proj`) and match relative to the
module given: a key may name the path after a prefix such as `model.`, or
extend above the module (the shipped plan's `layers.*.mlp.up_proj` applied
to one decoder layer's `mlp.up_proj`). A key without `*` that matches
nothing is an error (a typo); template keys that match nothing are skipped
with one warning listing them, as transformers skips them (HuggingFace
plans list dense and sparse layers alike). Styles (STYLES
lists them all): "colwise" (weight and bias split by output features),
"rowwise" (weight split by input features, bias replicated, outputs
all-reduced), "colwise_gather_output" (colwise, output all-gathered),
"rowwise_split_input" (rowwise on a replicated input), "replicate" and
HuggingFace's replicated styles, and the layouts "replicate" or "sequence"
(sequence parallelism: activations split along the sequence dimension,
all-gathered before the colwise layer and reduce-scattered after the
rowwise one). PyTorch's ColwiseParallel and RowwiseParallel objects are
accepted too. An empty plan with the "sequence" layout is context
parallelism: the weights replicated, each rank's block of the sequence
attending to the whole sequence (partitioning gathers what the k and v
projections read).

Needs torch and torch-mlir (scripts/setup-frontends.sh installs both, and
transformers).
"""
import contextlib
import re

import numpy as np

from .compiler import CompileError, Diagnostic, positive_int
from .compiler import compile as braid_compile

__all__ = ["export", "to_mlir", "parallelize", "ParallelModule", "RankModule",
           "Exported", "STYLES", "rank_part", "grid_part", "DataSplit",
           "train_step", "TrainStep",
           "RankTrainStep"]

# Every style a plan may name, and what Braid does with the parameters of a
# module (or the parameter) it names: "colwise", "rowwise", "colwise_gather"
# (colwise, then the output all-gathered), "replicate", or None (the style
# only describes a module's communication, which the parameters' own
# entries and the partitioning imply). HuggingFace's names are those of
# transformers 5.x (ALL_PARALLEL_STYLES).
STYLES = {
    "colwise": "colwise",
    "rowwise": "rowwise",
    "replicate": "replicate",
    "colwise_gather_output": "colwise_gather",
    "colwise_rep": "colwise_gather",
    "rowwise_split_input": "rowwise",
    "rowwise_rep": "rowwise",
    "replicated_with_grad_allreduce": "replicate",
    "sequence_parallel": "replicate",
    # Vocabulary-parallel lookups: Braid keeps the table whole (the lookup
    # is a gather inside a loop body, which partitioning cannot split).
    "embedding_rowwise": "replicate",
    "embedding_colwise": "replicate",
    # Packed projections ([gate; up] stacked), each part split separately.
    "packed_colwise": "packed_colwise",
    # Packed along the input features: kept whole (correct; not split).
    "packed_rowwise": "replicate",
    # Expert parallelism: whole experts on each rank.
    "grouped_gemm": "experts",
    # Module-level communication: implied by the parameters' entries.
    "all_reduce": None,
    "moe_tp_experts": None,
    "moe_identity_expert": None,
    "ep_dispatch_experts": None,
    "mla_kv_a_proj": None,
    "local_params": None,
}
# HuggingFace's packed styles hold two parts ([gate; up]).
PACKED_PARTS = 2
# Layouts of activations (inputs and outputs).
LAYOUTS = ("replicate", "sequence")


class Exported:
    """A torch module in linalg-on-tensors MLIR with its parameters as
    arguments: `text`, `names` (argument names: the inputs "input0", ...
    and keyword inputs by path, then parameter and buffer names such as
    "up.weight"), `shapes`, `num_inputs`, and how to rebuild the module's
    output from the function's results (`output_spec`, `output_leaves`)."""

    def __init__(self, text, names, shapes, num_inputs, output_spec=None,
                 output_leaves=None):
        self.text, self.names, self.shapes = text, names, shapes
        self.num_inputs = num_inputs
        self.output_spec, self.output_leaves = output_spec, output_leaves
        # Data parallelism (to_mlir's data_parallel): a DataSplit, or None.
        self.data = None

    def outputs(self, tensors):
        """The module's output structure with `tensors` (the function's
        results, in order) in place of its tensor leaves."""
        if self.output_spec is None:
            return tensors[0] if len(tensors) == 1 else tuple(tensors)
        from torch.utils import _pytree as pytree
        leaves, it = [], iter(tensors)
        for leaf in self.output_leaves:
            leaves.append(next(it) if leaf is _TENSOR else leaf)
        return pytree.tree_unflatten(leaves, self.output_spec)


_TENSOR = object()


class DataSplit:
    """A [data_parallel, ranks / data_parallel] grid, the plan over axis 1.
    Data parallelism: the activations' batch (their leading dimension)
    split over axis 0, weights replicated over it; `inputs` names the
    tensor inputs split by batch (those whose leading dimension is the
    activations' batch, as the first input's), `results` says it of each
    result. Expert parallelism (`experts`: the expert weights' names, and
    no inputs split): axis 0 splits the experts of those weights, each
    expert's features split over axis 1 by the plan, and everything else
    is replicated over axis 0."""

    def __init__(self, ranks, data_parallel, inputs, results, experts=()):
        self.ranks, self.data_parallel = ranks, data_parallel
        self.tensor_parallel = ranks // data_parallel
        self.inputs, self.results = set(inputs), list(results)
        self.experts = set(experts)

    def grid_shape(self):
        return f"{self.data_parallel}x{self.tensor_parallel}"

    def coordinates(self, rank):
        """(data index, tensor-parallel rank) of `rank` (row-major)."""
        return divmod(rank, self.tensor_parallel)


def _data_parallel(ranks, data_parallel, what="data_parallel"):
    """`data_parallel` checked against `ranks` (before an export): a
    positive divisor, or ValueError / TypeError."""
    data_parallel = positive_int(data_parallel, what)
    if ranks % data_parallel:
        raise ValueError(f"{what}={data_parallel} does not divide the "
                         f"{ranks} ranks")
    return data_parallel


def _data_split(exported, ranks, data_parallel, split_results=True):
    """The DataSplit of `exported` over `ranks` with `data_parallel` groups
    (None for 1), or ValueError where the batch does not split. Without
    `split_results`, every result is whole on every row (a training step's
    loss and gradients)."""
    data_parallel = _data_parallel(ranks, data_parallel)
    if data_parallel == 1:
        return None
    shapes = exported.shapes[:exported.num_inputs]
    if not shapes or not shapes[0]:
        raise ValueError("data_parallel needs a first input with a batch "
                         "dimension")
    batch = shapes[0][0]
    if batch % data_parallel:
        raise ValueError(f"the batch of {batch} (the first input's leading "
                         f"dimension) does not split over data_parallel="
                         f"{data_parallel}")
    names = exported.names[:exported.num_inputs]
    inputs = [n for n, shape in zip(names, shapes) if shape and
              shape[0] == batch]
    results = [split_results and bool(t) and int(t.split("x")[0]) == batch
               for t in _result_dims(exported.text)]
    return DataSplit(ranks, data_parallel, inputs, results)


def _expert_split(module, exported, ranks, expert_parallel, styles):
    """The DataSplit of expert parallelism over `expert_parallel` groups of
    ranks (None for 1): the parameters of HuggingFace experts modules
    ([experts, ...]) split by experts over the groups, each expert's
    features by the plan's tensor-parallel style within a group."""
    expert_parallel = _data_parallel(ranks, expert_parallel, "expert_parallel")
    if expert_parallel == 1:
        return None
    experts = []
    for path, sub in module.named_modules():
        count = getattr(sub, "num_experts", None)
        if not hasattr(sub, "_is_expert_parallel") or not count:
            continue
        if count % expert_parallel:
            raise ValueError(f"{path or type(sub).__name__} has {count} "
                             f"experts, which do not split over "
                             f"expert_parallel={expert_parallel}")
        for name, param in sub.named_parameters(recurse=False):
            if param.dim() >= 2 and param.shape[0] == count:
                experts.append(f"{path}.{name}" if path else name)
    if not experts:
        raise ValueError(f"expert_parallel={expert_parallel}, but "
                         f"{type(module).__name__} holds no HuggingFace "
                         "experts module (with num_experts)")
    for name in experts:
        style = styles.get(name, "replicate")
        if style not in ("colwise", "rowwise", "packed_colwise"):
            raise ValueError(
                f"expert_parallel splits the experts over one grid axis and "
                f"a tensor-parallel plan each expert's features over the "
                f"other; the plan gives {name} style {style!r} (use the "
                f"model's tensor-parallel plan, base_model_tp_plan)")
    results = [False] * len(_result_dims(exported.text))
    return DataSplit(ranks, expert_parallel, (), results, experts)


def _reduced_sdpa(query, key, value, is_causal, attn_mask, scale):
    """Attention of bf16 or f16 q, k and v as torch's CPU kernel computes it
    (and FlashAttention on GPUs): the scores, their softmax and every sum in
    f32, and the probabilities rounded to the input type before their
    product with v, which accumulates in f32. torch's math decomposition,
    which the table holds, keeps the probabilities and v in f32 instead: a
    product of twice the bytes and, on the cpu target, at half the rate
    (docs/rationale/frontends.md, "Attention's probabilities in the input
    type"). Otherwise it is that decomposition's spelling (k scaled before
    the product, a boolean mask as -inf, the safe softmax), which the
    attention matchers read."""
    import math
    import torch
    dtype = query.dtype
    q, k, v = query.float(), key.float(), value.float()
    if q.size(1) != k.size(1):  # grouped-query attention
        k = k.repeat_interleave(q.size(1) // k.size(1), 1)
        v = v.repeat_interleave(q.size(1) // v.size(1), 1)
    factor = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = torch.matmul(q, k.transpose(-2, -1) * factor)
    if is_causal:
        rows, keys = q.size(-2), k.size(-2)
        attn_mask = torch.ones(rows, keys, dtype=torch.bool).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.where(attn_mask, 0.0, float("-inf"))
        scores = scores + attn_mask.float()
    probs = torch.ops.aten._safe_softmax.default(scores, -1)
    out = torch.matmul(probs.to(dtype).float(), v).to(dtype)
    return out, probs.to(dtype)


def _decompositions():
    """torch-mlir's decomposition table, with fixes for what HF models
    hit:

    - sdpa on CPU: the table decomposes _scaled_dot_product_flash_attention
      into a contiguous [b, h, s, d] result, while torch.export traced the
      module against the op's strided one ([b, s, h, d] memory): a later
      `.view` fails, or o_proj becomes a batch matmul over a broadcast
      weight. The decomposition here gives the traced strides, and for
      bf16 and f16 inputs multiplies v by probabilities in the input type
      as torch's CPU kernel does (_reduced_sdpa).
    - cumsum (HF's packed-sequence detection from position ids) becomes a
      masked sum instead of torch-mlir's tm_tensor.scan, which nothing
      below torch-mlir reads; topk becomes k rounds of max instead of
      tm_tensor.sort, and scatter (DeepSeek-V3's group-limited routing) a
      comparison with every position instead of tm_tensor.scatter.
    """
    import torch
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table
    table = dict(get_decomposition_table())
    sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    if sdpa in table:
        inner = table[sdpa]

        def strided_sdpa(query, key, value, dropout_p=0.0, is_causal=False,
                         *, attn_mask=None, scale=None):
            if (query.dtype in (torch.bfloat16, torch.float16) and
                    dropout_p == 0.0 and query.dim() == 4):
                out, lse = _reduced_sdpa(query, key, value, is_causal,
                                         attn_mask, scale)
            else:
                out, lse = inner(query, key, value, dropout_p, is_causal,
                                 attn_mask=attn_mask, scale=scale)
            return out.transpose(1, 2).contiguous().transpose(1, 2), lse
        table[sdpa] = strided_sdpa

    def cumsum(x, dim, dtype=None):
        dim = dim % max(x.dim(), 1)
        n = x.shape[dim]
        index = torch.arange(n, device=x.device)
        lower = (index.view(-1, 1) >= index.view(1, -1)).to(
            dtype or x.dtype)
        moved = x.movedim(dim, -1).to(dtype or x.dtype)
        out = (moved.unsqueeze(-2) * lower).sum(-1)
        return out.movedim(-1, dim)
    table[torch.ops.aten.cumsum.default] = cumsum

    def topk(x, k, dim=-1, largest=True, sorted=True):
        # k rounds of max and argmax: MoE routers take the top 1 to 8 of a
        # few dozen experts, and torch-mlir's sort (tm_tensor.sort) has no
        # lowering below it.
        dim = dim % x.dim()
        work = x if largest else -x
        floor = (torch.finfo(x.dtype).min if x.dtype.is_floating_point
                 else torch.iinfo(x.dtype).min)
        shape = [1] * x.dim()
        shape[dim] = x.shape[dim]
        index = torch.arange(x.shape[dim], device=x.device).view(shape)
        values, indices = [], []
        for _ in range(k):
            value, position = work.max(dim, keepdim=True)
            values.append(value)
            indices.append(position)
            work = torch.where(index == position,
                               torch.full_like(work, floor), work)
        value = torch.cat(values, dim)
        return (value if largest else -value), torch.cat(indices, dim)
    table[torch.ops.aten.topk.default] = topk

    def scatter(x, dim, index, src):
        # A comparison with every position instead of torch-mlir's
        # tm_tensor.scatter (DeepSeek-V3's group mask, `scatter_(1,
        # group_idx, 1)`): index has a few entries per row (the top k), so
        # the [..., k, positions] mask is small. Where an index repeats, the
        # last entry wins, as torch's CPU kernel writes.
        dim = dim % x.dim()
        moved = x.movedim(dim, -1)
        places = index.movedim(dim, -1)
        count = places.shape[-1]
        hit = places.unsqueeze(-1) == torch.arange(moved.shape[-1],
                                                   device=x.device)
        # Counted in f32 whatever x holds (booleans, integers, halves).
        later = (torch.arange(count).view(-1, 1) <
                 torch.arange(count).view(1, -1)).float()
        shadowed = torch.matmul(later, hit.float()) > 0
        keep = hit & ~shadowed                           # [..., k, positions]
        within = tuple(slice(0, n) for n in places.shape)
        if isinstance(src, torch.Tensor):
            values = src.movedim(dim, -1)[within].unsqueeze(-1).to(x.dtype)
            values = torch.where(keep, values,
                                 torch.zeros((), dtype=x.dtype)).sum(-2)
            if x.dtype == torch.bool:
                values = values.bool()
        else:
            values = torch.full_like(moved[within[:-1]], src)
        written = keep.any(-2)
        # An index smaller than x in the other dimensions writes only
        # their first entries.
        pad = []
        for have, want in zip(reversed(places.shape[:-1]),
                              reversed(moved.shape[:-1])):
            pad = pad + [0, want - have]
        if any(pad):
            pad = [0, 0] + pad
            written = torch.nn.functional.pad(written, pad, value=False)
            values = torch.nn.functional.pad(values, pad)
        return torch.where(written, values, moved).movedim(-1, dim)
    table[torch.ops.aten.scatter.src] = scatter
    table[torch.ops.aten.scatter.value] = scatter
    return table


def _expert_outputs(self, dispatched):
    """Every expert of an HF experts module on its rows of `dispatched`
    ([experts, rows, hidden]): batched matmuls over experts, which
    partitioning splits by experts or by features."""
    import torch
    experts = self.num_experts

    def project(x, weight, bias):
        y = torch.matmul(x, weight if self.is_transposed
                         else weight.transpose(1, 2))
        return y if bias is None else y + bias.unsqueeze(1)

    if self.has_gate:
        weight = self.gate_up_proj
        bias = self.gate_up_proj_bias if self.has_bias else None
        default_gate = (getattr(type(self)._apply_gate, "__name__", "") ==
                        "_default_apply_gate")
        if self.is_concatenated and default_gate and not self.is_transposed:
            # [gate; up] seen as its two parts, so that a packed split of
            # the parts stays local.
            parts = weight.view(experts, 2, weight.shape[1] // 2,
                                weight.shape[2])
            biases = (bias.view(experts, 2, bias.shape[1] // 2)
                      if bias is not None else None)
            gate = project(dispatched, parts[:, 0],
                           biases[:, 0] if biases is not None else None)
            up = project(dispatched, parts[:, 1],
                         biases[:, 1] if biases is not None else None)
            hidden = self.act_fn(gate) * up
        else:
            hidden = self._apply_gate(project(dispatched, weight, bias))
    else:
        hidden = self.act_fn(project(dispatched, self.up_proj,
                                     self.up_proj_bias if self.has_bias
                                     else None))
    out = project(hidden, self.down_proj,
                  self.down_proj_bias if self.has_bias else None)
    if self.has_post_expert_norm:
        out = self.post_expert_norm(out)
    return out


def _dense_experts(self, hidden_states, top_k_index, top_k_weights):
    """HuggingFace experts, every expert on every token: each expert gets
    the tokens routed to it (zeros elsewhere), and the outputs are summed
    with the routing weights (zero off the top-k). The same values as the
    sparse implementations, with static shapes and the expert weights as
    operands of batched matmuls, which partitioning splits by experts
    (expert parallelism: the dispatch and the combine become all-to-alls or
    an all-reduce) or by features (tensor parallelism). Costs every
    expert's FLOPs on every token (docs/rationale/frontends.md, "MoE
    experts are exported dense")."""
    import torch
    experts = self.num_experts
    dtype = hidden_states.dtype
    ids = torch.arange(experts, device=hidden_states.device)
    onehot = (top_k_index.unsqueeze(-1) == ids).to(dtype)       # [T, k, E]
    routed = onehot.sum(1).transpose(0, 1)                        # [E, T]
    weights = (onehot * top_k_weights.unsqueeze(-1).to(dtype)).sum(1)
    dispatched = hidden_states.unsqueeze(0) * routed.unsqueeze(-1)  # [E,T,H]
    out = _expert_outputs(self, dispatched)
    combined = (out * weights.transpose(0, 1).unsqueeze(-1)).sum(0)
    return combined.to(dtype)


def expert_capacity(tokens, experts, top_k, factor):
    """The rows each expert computes under `factor`: ceil(factor * tokens *
    top_k / experts), at least 1 and at most `tokens` (where no token can
    be dropped)."""
    import math
    if not (isinstance(factor, (int, float)) and not isinstance(factor, bool)
            and math.isfinite(factor) and factor > 0):
        raise ValueError(f"capacity_factor must be a positive number, not "
                         f"{factor!r}")
    return min(tokens, max(1, math.ceil(factor * tokens * top_k / experts)))


def _capacity_experts(factor):
    """HuggingFace experts with a capacity per expert (GShard and Switch
    Transformer's static-shape routing): expert e computes `capacity` rows,
    the tokens routed to it in token order; a token routed to an expert
    whose rows are taken is dropped for that expert (its other experts and
    the residual stay). The dispatch gathers each row's token, the combine
    gathers each token's rows within each expert and sums them weighed, so
    every shape is static and the experts are batched matmuls over [experts, capacity]
    rows: capacity * experts rows instead of the dense export's tokens *
    experts (docs/rationale/frontends.md, "MoE experts with a capacity")."""

    def experts_forward(self, hidden_states, top_k_index, top_k_weights):
        import torch
        tokens = hidden_states.shape[0]
        experts = self.num_experts
        capacity = expert_capacity(tokens, experts, top_k_index.shape[-1],
                                   factor)
        dtype = hidden_states.dtype
        device = hidden_states.device
        ids = torch.arange(experts, device=device)
        onehot = top_k_index.unsqueeze(-1) == ids                 # [T, k, E]
        routed = onehot.any(1).float()                             # [T, E]
        weights = (onehot.float() *
                   top_k_weights.float().unsqueeze(-1)).sum(1)     # [T, E]
        # A token's row in its expert's buffer: how many earlier tokens the
        # expert took (exact in f32 below 2**24 tokens).
        index = torch.arange(tokens, device=device)
        earlier = (index.view(-1, 1) > index.view(1, -1)).float()  # [T, T]
        row = torch.matmul(earlier, routed)                        # [T, E]
        slots = torch.arange(capacity, device=device).float()
        taken = (row.transpose(0, 1).unsqueeze(1) ==
                 slots.view(1, -1, 1))                             # [E, C, T]
        dispatch = taken.float() * routed.transpose(0, 1).unsqueeze(1)
        # Each row's token (0 for a row no token took; the combine's zero
        # weight drops it), gathered: E x C x H copies, not a matmul over
        # every token.
        source = torch.matmul(dispatch, index.float()).long()      # [E, C]
        buffers = hidden_states[source]                            # [E, C, H]
        out = _expert_outputs(self, buffers)                       # [E, C, H]
        # Each token's output from each expert, gathered within the expert
        # at the token's row (a row past the capacity, or an expert the
        # token was not routed to, weighs 0), then weighed and summed over
        # the experts: E x T x H reads, where a one-hot matmul over every
        # row took E x C x T x H multiply-adds. Experts split over ranks
        # gather within their own rows (braid-import-shard keeps such a
        # gather local) and leave partial sums: one all-reduce.
        keep = routed * (row < capacity).float()                   # [T, E]
        position = torch.clamp(row, max=capacity - 1).long()
        position = position.transpose(0, 1).unsqueeze(-1)         # [E, T, 1]
        picked = out.gather(1, position.expand(experts, tokens,
                                               out.shape[-1]))     # [E, T, H]
        scale = (weights * keep).transpose(0, 1).unsqueeze(-1)     # [E, T, 1]
        return (scale * picked.float()).sum(0).to(dtype)
    return experts_forward


def _grouped_capacity_experts(factor, groups):
    """The capacity implementation with the tokens in `groups` contiguous
    groups (the ranks of a sequence split), each with its own capacity
    per expert: expert e takes, from each group, the group's tokens routed
    to it in token order up to ceil(factor x group tokens x k / E) rows.
    The buffers are [groups, experts, capacity, hidden]; the experts read
    them as [experts, groups x capacity, hidden]. Partitioned with the
    groups split over the ranks and the experts over the same ranks, the
    dispatch and the combine are each one all-to-all (docs/rationale/
    frontends.md, "Expert dispatch by all-to-all")."""

    def experts_forward(self, hidden_states, top_k_index, top_k_weights):
        import torch
        tokens, width = hidden_states.shape
        if tokens % groups:
            raise ValueError(f"{tokens} tokens do not split into {groups} "
                             "groups of equal size")
        per = tokens // groups
        experts = self.num_experts
        k = top_k_index.shape[-1]
        capacity = expert_capacity(per, experts, k, factor)
        dtype = hidden_states.dtype
        device = hidden_states.device
        hidden = hidden_states.view(groups, per, width)
        ids = torch.arange(experts, device=device)
        onehot = top_k_index.view(groups, per, k, 1) == ids       # [G,T,k,E]
        routed = onehot.any(2).float()                             # [G, T, E]
        weights = (onehot.float() *
                   top_k_weights.float().view(groups, per, k, 1)).sum(2)
        index = torch.arange(per, device=device)
        earlier = (index.view(-1, 1) > index.view(1, -1)).float()  # [T, T]
        row = torch.matmul(earlier, routed)                        # [G, T, E]
        slots = torch.arange(capacity, device=device).float()
        taken = (row.transpose(1, 2).unsqueeze(2) ==
                 slots.view(1, 1, -1, 1))                          # [G,E,C,T]
        dispatch = taken.float() * routed.transpose(1, 2).unsqueeze(2)
        source = torch.matmul(dispatch, index.float()).long()      # [G, E, C]
        rows = experts * capacity
        buffers = hidden.gather(1, source.view(groups, rows, 1).expand(
            groups, rows, width))                                  # [G,EC,H]
        buffers = buffers.view(groups, experts, capacity, width)
        buffers = buffers.transpose(0, 1).reshape(
            experts, groups * capacity, width)                     # [E,GC,H]
        out = _expert_outputs(self, buffers)
        out = out.view(experts, groups, capacity, width).transpose(0, 1)
        keep = routed * (row < capacity).float()                   # [G, T, E]
        position = torch.clamp(row, max=capacity - 1).long()
        position = position.transpose(1, 2).unsqueeze(-1)         # [G,E,T,1]
        picked = out.gather(2, position.expand(groups, experts, per,
                                               width))             # [G,E,T,H]
        scale = (weights * keep).transpose(1, 2).unsqueeze(-1)     # [G,E,T,1]
        combined = (scale * picked.float()).sum(1)                 # [G, T, H]
        return combined.view(tokens, width).to(dtype)
    return experts_forward


def _experts_everywhere(module, capacity_factor=None, groups=1):
    """Makes every HuggingFace experts module of `module` use the dense
    implementation (capacity_factor None) or the capacity one (with a
    capacity per group of `groups` token groups) while exporting; returns
    an undo function."""
    if capacity_factor is not None:
        expert_capacity(1, 1, 1, capacity_factor)   # checks the factor
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return lambda: None
    if capacity_factor is None:
        name = "braid_dense"
        ALL_EXPERTS_FUNCTIONS[name] = _dense_experts
    else:
        name = f"braid_capacity_{capacity_factor!r}_{groups}"
        ALL_EXPERTS_FUNCTIONS[name] = (
            _capacity_experts(capacity_factor) if groups == 1 else
            _grouped_capacity_experts(capacity_factor, groups))
    saved = []
    for sub in module.modules():
        config = getattr(sub, "config", None)
        if (hasattr(sub, "_is_expert_parallel") and config is not None and
                hasattr(config, "_experts_implementation")):
            saved.append((config, config._experts_implementation))
            config._experts_implementation = name

    def undo():
        for config, implementation in reversed(saved):
            config._experts_implementation = implementation
    return undo


@contextlib.contextmanager
def experts_with_capacity(module, capacity_factor, groups=1):
    """Within the block, the HuggingFace experts of `module` run with a
    capacity per expert, as parallelize(..., capacity_factor=) compiles
    them: the same tokens dropped, so that the module is the reference of
    the compiled one (and shows what the factor drops). `groups`: the
    capacity is per group of tokens, as under sequence parallelism over
    that many ranks."""
    undo = _experts_everywhere(module, capacity_factor, groups)
    try:
        yield module
    finally:
        undo()


def _flatten_inputs(example_args, example_kwargs):
    """Tensor leaves of (args, kwargs), their names, and how to put the
    pieces back."""
    import torch
    from torch.utils import _pytree as pytree
    leaves, spec = pytree.tree_flatten((tuple(example_args),
                                        dict(example_kwargs or {})))
    paths, _ = pytree.tree_flatten_with_path((tuple(example_args),
                                              dict(example_kwargs or {})))
    names, positions = [], []
    for index, (path, leaf) in enumerate(paths):
        if not isinstance(leaf, torch.Tensor):
            continue
        keys = [getattr(k, "idx", getattr(k, "key", None)) for k in path]
        if keys and keys[0] == 0:      # positional: input<i>[.<j>...]
            name = "input" + ".".join(str(k) for k in keys[1:])
        else:
            name = ".".join(str(k) for k in keys[1:])
        names.append(name)
        positions.append(index)
    return leaves, spec, names, positions


def _input_tensors(exported, inputs, kwargs):
    """The tensors of a call's (inputs, kwargs), detached, in the order of
    the exported function's inputs; ValueError for another number."""
    import torch
    leaves, _, _, positions = _flatten_inputs(inputs, kwargs)
    expected = exported.names[:exported.num_inputs]
    if len(positions) != len(expected):
        raise ValueError(f"the module was compiled for {len(expected)} "
                         f"tensor inputs ({', '.join(expected)}); got "
                         f"{len(positions)}")
    return [torch.as_tensor(leaves[p]).detach() for p in positions]


def _model_frames_only():
    """Makes torch-mlir locate each op at the innermost frame of the model's
    own code (modeling_llama.py:242), not at torch's or Braid's: the line a
    diagnostic should point a user at. Returns an undo function."""
    import os
    import re as _re
    from torch_mlir.extras import fx_importer
    from torch_mlir.ir import Location

    cache = fx_importer.ContextCache
    original = cache.get_node_location
    torch_dir = os.path.dirname(os.path.dirname(os.path.abspath(
        __import__("torch").__file__)))
    own = os.path.dirname(os.path.abspath(__file__))

    def located(self, node):
        trace = node.meta.get("stack_trace") or ""
        frames = _re.findall(r'File "([^"]+)", line ([0-9]+),', trace)
        for path, line in reversed(frames):
            absolute = os.path.abspath(path)
            if absolute.startswith(own) or (
                    absolute.startswith(torch_dir) and
                    os.sep + "torch" + os.sep in absolute[len(torch_dir):]
                    [:len(os.sep + "torch" + os.sep)]):
                continue
            return Location.file(path, int(line), col=0, context=self._c)
        return original(self, node)

    cache.get_node_location = located

    def undo():
        cache.get_node_location = original
    return undo


def export(module, example_args, example_kwargs=None, func_name="main",
           capacity_factor=None, capacity_groups=1):
    """Exports `module` applied to `example_args` (and `example_kwargs`:
    tensors, tuples of them, None, ...) with torch-mlir's FX importer;
    tensor inputs first, then parameters and buffers, as function
    arguments; HuggingFace experts dense, or with a capacity per expert
    under `capacity_factor` (see parallelize). Raises CompileError with
    torch-mlir's message when the export fails."""
    import torch
    from torch.utils import _pytree as pytree
    from torch_mlir import fx

    leaves, spec, input_names, positions = _flatten_inputs(example_args,
                                                           example_kwargs)
    names = [n for n, _ in module.named_parameters()]
    names += [n for n, _ in module.named_buffers()]
    tensors = [t.detach() for _, t in module.named_parameters()]
    tensors += [t.detach() for _, t in module.named_buffers()]
    num_inputs = len(positions)
    output = {}

    class WeightsAsArguments(torch.nn.Module):
        # The model is not registered as a submodule, so that torch.export
        # sees no parameters: every tensor arrives as an input.
        def __init__(self):
            super().__init__()
            object.__setattr__(self, "model", module)

        def forward(self, *flat):
            inputs, weights = flat[:num_inputs], flat[num_inputs:]
            filled = list(leaves)
            for position, tensor in zip(positions, inputs):
                filled[position] = tensor
            args, kwargs = pytree.tree_unflatten(filled, spec)
            result = torch.func.functional_call(
                self.model, dict(zip(names, weights)), args, kwargs)
            out_leaves, out_spec = pytree.tree_flatten(result)
            output["spec"] = out_spec
            output["leaves"] = [_TENSOR if isinstance(x, torch.Tensor) else x
                                for x in out_leaves]
            return tuple(x for x in out_leaves if isinstance(x, torch.Tensor))

    args = tuple(leaves[p] for p in positions) + tuple(tensors)
    undo_frames = _model_frames_only()
    undo_experts = _experts_everywhere(module, capacity_factor,
                                       capacity_groups)
    try:
        imported = fx.export_and_import(WeightsAsArguments().eval(), *args,
                                        output_type="linalg-on-tensors",
                                        func_name=func_name,
                                        decomposition_table=_decompositions())
    except Exception as error:  # torch.export and torch-mlir raise anything
        message = str(error).strip().split("\n")[0] or type(error).__name__
        raise CompileError(
            f"torch-mlir could not export {type(module).__name__}",
            [Diagnostic(f"error: torch-mlir: {type(error).__name__}: "
                        f"{message}")]) from error
    finally:
        undo_experts()
        undo_frames()
    # Debug info carries the locations of the model's own source lines.
    text = imported.operation.get_asm(enable_debug_info=True)
    if "dense_resource" in text or "ml_program" in text:
        raise RuntimeError("torch-mlir embedded tensors in the module instead "
                           "of passing them as arguments")
    shapes = [tuple(a.shape) for a in args]
    return Exported(text, input_names + names, shapes, num_inputs,
                    output.get("spec"), output.get("leaves"))


def _match(key, parts):
    """Whether the plan key (split on ".") names exactly the path `parts`,
    `*` standing for one component."""
    return len(key) == len(parts) and all(
        k == "*" or k == p for k, p in zip(key, parts))


def _aligned(key, path):
    """Whether `key` names `path` relative to the module given: the same
    path, the path after a prefix (`model.`), or a path the key extends
    above the module (the key's leading components dropped)."""
    for start in range(len(path)):
        if _match(key, path[start:]):
            return True
    for start in range(1, len(key)):
        if _match(key[start:], path):
            return True
    return False


def _style_name(style):
    """A plan entry as (STYLES value, input layout, output layout)."""
    if isinstance(style, str):
        if style not in STYLES:
            raise ValueError(
                f"unknown parallel style {style!r}; known styles: "
                + ", ".join(sorted(STYLES)))
        return STYLES[style], None, None
    kind = type(style).__name__
    mapping = {"ColwiseParallel": "colwise", "RowwiseParallel": "rowwise"}
    if kind not in mapping:
        raise ValueError(f"unsupported parallel style {kind}; Braid plans use "
                         "ColwiseParallel, RowwiseParallel or the style names "
                         + ", ".join(sorted(STYLES)))

    def layout(attr):
        value = getattr(style, attr, None)
        if isinstance(value, (tuple, list)):
            value = value[0] if value else None
        return "sequence" if type(value).__name__ == "Shard" else None
    return mapping[kind], layout("input_layouts"), layout("output_layouts")


def _plan_entry(plan, name):
    """The plan's entry for parameter `name`: a key naming the parameter
    itself first, then its module; without wildcards before with."""
    parts = name.split(".")
    best = None
    for key, style in plan.items():
        split = key.split(".")
        rank = 0 if "*" not in split else 1
        if _aligned(split, parts):
            level = (0, rank)                       # the parameter itself
        elif len(parts) > 1 and _aligned(split, parts[:-1]):
            level = (1, rank)                       # its module
        else:
            continue
        if best is None or level < best[0]:
            best = (level, key, style)
    return (best[1], best[2], best[0][0] == 0) if best else (None, None, None)


def _argument_styles(exported, plan, input_layout, output_layout):
    plan = dict(plan or {})
    styles, used = {}, set()
    inp = out = None
    for name, shape in zip(exported.names[exported.num_inputs:],
                           exported.shapes[exported.num_inputs:]):
        key, entry, direct = _plan_entry(plan, name)
        if key is None:
            styles[name] = "replicate"
            continue
        used.add(key)
        style, entry_in, entry_out = _style_name(entry)
        inp, out = entry_in or inp, entry_out or out
        leaf = name.rpartition(".")[2]
        if style is None:
            style = "replicate"
        elif not direct and leaf == "bias" and style in ("rowwise",
                                                         "colwise_gather"):
            style = "replicate"        # added after the reduction / gather
        elif not direct and leaf == "bias" and style == "colwise":
            style = "colwise"
        styles[name] = style
    # A key naming a module above some parameters (a module-level style
    # such as moe_tp_experts, whose parameters have entries of their own)
    # is used too.
    names = [n.split(".") for n in exported.names[exported.num_inputs:]]

    def unmatched(template, parameters):
        """Keys no entry used, with `*` or without, that name no module
        above a parameter (nor, with `parameters`, a parameter)."""
        return [k for k in plan if k not in used and ("*" in k) == template
                and not any(_aligned(k.split("."), n[:j]) for n in names
                            for j in range(1, len(n) + parameters))]

    unused = unmatched(template=False, parameters=False)
    if unused:
        raise ValueError(f"plan names {unused}, which the module has no "
                         "parameters for")
    # Template keys that match nothing here are skipped, as transformers
    # does (a shipped plan lists dense and MoE layers alike); said once.
    skipped = unmatched(template=True, parameters=True)
    if skipped:
        import warnings
        warnings.warn(f"braid: plan keys {skipped} match nothing in "
                      f"{len(names)} parameters of this module; skipped",
                      stacklevel=4)
    return styles, inp or input_layout, out or output_layout


def _input_layouts(exported, input_layout):
    """The layout of each tensor input: `input_layout` a string (every input
    shaped like the first one, the activations; the others, such as rotary
    tables and masks, replicated), a sequence (one per tensor input, in
    order) or a dict (by input name)."""
    names = exported.names[:exported.num_inputs]
    shapes = exported.shapes[:exported.num_inputs]
    if isinstance(input_layout, str):
        layouts = [input_layout if shape == shapes[0] else "replicate"
                   for shape in shapes]
    elif isinstance(input_layout, dict):
        unknown = set(input_layout) - set(names)
        if unknown:
            raise ValueError(f"input_layout names {sorted(unknown)}; the "
                             f"inputs are {names}")
        layouts = [input_layout.get(n, "replicate") for n in names]
    else:
        layouts = list(input_layout)
        if len(layouts) != len(names):
            raise ValueError(f"input_layout has {len(layouts)} entries; the "
                             f"module takes {len(names)} tensor inputs "
                             f"({names})")
    for name, layout in zip(names, layouts):
        if layout not in LAYOUTS:
            raise ValueError(f"layout of {name}: layouts are 'replicate' or "
                             f"'sequence', not {layout!r}")
    return dict(zip(names, layouts))


_SIGNATURE = re.compile(r"func\.func @(?P<name>[\w$.]+)\((?P<args>.*?)\) -> "
                        r"(?P<results>.*?) \{\s*(?P<loc>loc\(.*?\))?\s*$", re.M)
_ARGUMENT = re.compile(r"(%[\w$.]+): (tensor<[^>]*>)( loc\([^()]*(?:\([^()]*\)[^()]*)*\))?")


def _result_dims(text):
    """The dimensions of each result of the exported function, as text
    ("2x8x64"; "" for a scalar)."""
    match = _SIGNATURE.search(text)
    if not match:
        raise RuntimeError("cannot find the function in torch-mlir's output")
    return [re.sub(r"x?[a-z][a-z0-9]*$", "", t)
            for t in re.findall(r"tensor<([^>]*)>", match["results"])]


def annotate(exported, styles, output_layout, ranks, grid="braid_tp",
             result_attrs=None, func_attrs=""):
    """The exported text with the plan as `braid.parallel` attributes, each
    argument named after its input or parameter (its location), and a 1-D
    grid of `ranks` (with `exported.data`, a [data, tensor] grid: the plan
    on axis 1, the batch of the inputs and results it names split on axis
    0). `result_attrs` (one attribute text per result) replaces the
    results' `output_layout`; `func_attrs` adds function attributes
    ("braid.backward")."""
    ranks = positive_int(ranks, "ranks")
    data = exported.data
    match = _SIGNATURE.search(exported.text)
    if not match:
        raise RuntimeError("cannot find the function in torch-mlir's output")
    args = _ARGUMENT.findall(match["args"])
    if len(args) != len(exported.names):
        raise RuntimeError(f"the exported function has {len(args)} arguments; "
                           f"expected {len(exported.names)}")
    def batch(split):
        return ", braid.batch" if split else ""
    def experts(name):
        return ", braid.experts" if data and name in data.experts else ""
    new_args = ", ".join(
        f'{a}: {t} {{braid.parallel = "{styles[n]}"'
        f'{batch(data and n in data.inputs)}{experts(n)}}} loc("{n}")'
        for (a, t, _), n in zip(args, exported.names))
    results = re.findall(r"tensor<[^>]*>", match["results"])
    if result_attrs is None:
        result_attrs = [f'braid.parallel = "{output_layout}"'] * len(results)
    if len(result_attrs) != len(results):
        raise RuntimeError(f"the exported function has {len(results)} "
                           f"results; expected {len(result_attrs)}")
    new_results = ", ".join(
        f"{t} {{{a}{batch(data and data.results[i])}}}"
        for i, (t, a) in enumerate(zip(results, result_attrs)))
    extra = f", {func_attrs}" if func_attrs else ""
    if data and data.experts:
        extra += ", braid.grid_axis = 1 : i64, braid.expert_axis = 0 : i64"
    elif data:
        extra += ", braid.grid_axis = 1 : i64, braid.data_axis = 0 : i64"
    signature = (f"func.func @{match['name']}({new_args}) -> ({new_results}) "
                 f"attributes {{braid.grid = @{grid}{extra}}} {{")
    text = exported.text[:match.start()] + signature + exported.text[match.end():]
    shape = data.grid_shape() if data else ranks
    grid_op = f"shard.grid @{grid}(shape = {shape})"
    module = re.search(r"^module( attributes \{.*\})? \{\s*$", text, re.M)
    if module:
        return text[:module.end()] + "\n  " + grid_op + text[module.end():]
    return grid_op + "\n" + text


class ParallelModule:
    """A torch module compiled by Braid for `ranks` CPU ranks. Calling it
    with the example's structure of arguments runs it on the module's
    current parameters; `artifact` is the braid.Artifact (report, ir(), ...),
    `text` the annotated MLIR."""

    def __init__(self, module, exported, text, artifact, output_layout,
                 kwargs=None, styles=None):
        self.module, self.exported, self.text = module, exported, text
        self.artifact, self.output_layout = artifact, output_layout
        self._kwargs = kwargs
        self._styles = styles or {}

    def shard(self, values):
        """Splits global arrays (inputs, then parameters) into per-rank
        lists, as the compiled function's arguments are partitioned."""
        ranks = self.artifact.ranks
        per_rank = [[] for _ in range(ranks)]
        for name, value, spec in zip(self.exported.names, values,
                                     self.artifact.arguments):
            value = np.asarray(value)
            for rank in range(ranks):
                # order="C", not ascontiguousarray: a 0-d input stays 0-d.
                per_rank[rank].append(np.asarray(
                    grid_part(name, value, spec.shape, ranks, rank,
                              self._styles.get(name), self.exported.data),
                    order="C"))
        return per_rank

    def __call__(self, *inputs, **run_options):
        import torch
        kwargs = {k: run_options.pop(k) for k in list(run_options)
                  if self._kwargs is not None and k in self._kwargs}
        tensors = _input_tensors(self.exported, inputs,
                                 kwargs if self._kwargs is not None else None)
        params = [t.detach().float().cpu().numpy()
                  if t.dtype == torch.bfloat16 else t.detach().cpu().numpy()
                  for _, t in self.module.named_parameters()]
        params += [t.detach().float().cpu().numpy()
                   if t.dtype == torch.bfloat16 else t.detach().cpu().numpy()
                   for _, t in self.module.named_buffers()]
        values = []
        for tensor in tensors:
            tensor = tensor.cpu()
            if tensor.dtype == torch.bfloat16:
                tensor = tensor.float()
            values.append(tensor.numpy())
        outputs = self.artifact.run(self.shard(values + params), **run_options)
        data = self.exported.data
        groups = data.data_parallel if data else 1
        size = len(outputs) // groups
        results = []
        for index, spec in enumerate(self.artifact.results):
            blocks = []
            for group in range(groups):
                pieces = [rank_outputs[index] for rank_outputs in
                          outputs[group * size:(group + 1) * size]]
                if self.output_layout == "sequence" and len(spec.shape) >= 2:
                    blocks.append(np.concatenate(pieces, axis=-2))
                else:
                    blocks.append(pieces[0])
            if data and data.results[index]:
                results.append(np.concatenate(blocks, axis=0))
            else:
                results.append(blocks[0])
        tensors = []
        for array, spec in zip(results, self.artifact.results):
            tensor = torch.from_numpy(np.asarray(array, order="C"))
            if spec.dtype == "bf16":
                tensor = tensor.to(torch.bfloat16)
            tensors.append(tensor)
        return self.exported.outputs(tensors)


def rank_part(name, value, shape, ranks, rank, style=None):
    """Rank `rank`'s part of the global `value` (a numpy array or a torch
    tensor) of the argument `name`, whose per-rank shape is `shape`: the
    value itself where nothing is split, else its block along the one
    dimension that is (each of the PACKED_PARTS parts split separately for
    the packed_colwise style)."""
    shape = tuple(shape)
    split = [d for d, (g, p) in enumerate(zip(value.shape, shape)) if g != p]
    if not split:
        return value
    d = split[0]
    if len(split) != 1 or value.shape[d] != ranks * shape[d]:
        raise ValueError(f"{name}: cannot split shape {tuple(value.shape)} "
                         f"into {ranks} blocks of {shape}")
    index = [slice(None)] * len(shape)
    if style == "packed_colwise" and d == len(shape) - 2:
        width = shape[d] // PACKED_PARTS
        grouped = value.reshape(tuple(value.shape[:d]) + (PACKED_PARTS, -1) +
                                tuple(value.shape[d + 1:]))
        index.insert(d + 1, slice(rank * width, (rank + 1) * width))
        return grouped[tuple(index)].reshape(shape)
    index[d] = slice(rank * shape[d], (rank + 1) * shape[d])
    return value[tuple(index)]


def grid_part(name, value, shape, ranks, rank, style=None, data=None):
    """rank_part on the grid of `data` (a DataSplit, or None for a 1-D
    grid): the batch block of the rank's data group where the argument is
    split by batch, then its tensor-parallel part."""
    if data is not None:
        group, rank = data.coordinates(rank)
        ranks = data.tensor_parallel
        if name in data.inputs or name in data.experts:
            block = value.shape[0] // data.data_parallel
            value = value[group * block:(group + 1) * block]
    return rank_part(name, value, shape, ranks, rank, style)


class RankModule:
    """A torch module compiled by Braid and run in this process as one rank
    of the job (braid.program): made by parallelize(..., per_rank=True) on
    every rank. It keeps only this rank's part of each parameter and
    buffer, cut once when it is made (call `reshard()` after changing the
    module's weights). A call takes this rank's part of each input (per-rank
    shapes: under the "sequence" layout its rows; a whole global input is
    cut to its part too) and returns this rank's part of each output, as
    torch tensors. Every rank calls it, in the same order. `program` is the
    braid.program.Program, `path` its artifact."""

    def __init__(self, module, exported, program, output_layout, kwargs,
                 styles):
        self.module, self.exported, self.program = module, exported, program
        self.output_layout, self._kwargs, self._styles = output_layout, kwargs, styles
        self.path = program.path
        self.reshard()

    def reshard(self):
        """Cuts this rank's part of the module's current parameters and
        buffers (contiguous copies; nothing global is kept)."""
        tensors = [t for _, t in self.module.named_parameters()]
        tensors += [t for _, t in self.module.named_buffers()]
        first = self.exported.num_inputs
        self._weights = []
        for name, tensor, spec in zip(self.exported.names[first:], tensors,
                                      self.program.arguments[first:]):
            part = grid_part(name, tensor.detach().cpu(), spec.shape,
                             self.program.size, self.program.rank,
                             self._styles.get(name), self.exported.data)
            self._weights.append(part.contiguous().clone())

    def _parts(self, tensors):
        """This rank's part of each of the call's tensors (the function's
        leading arguments): a part as it is, a whole global tensor cut."""
        values = []
        for name, tensor, spec in zip(self.exported.names, tensors,
                                      self.program.arguments):
            if tuple(tensor.shape) != tuple(spec.shape):
                try:
                    tensor = grid_part(name, tensor, spec.shape,
                                       self.program.size, self.program.rank,
                                       self._styles.get(name),
                                       self.exported.data)
                except ValueError:
                    raise ValueError(
                        f"input {name} has shape {tuple(tensor.shape)}; this rank "
                        f"takes {tuple(spec.shape)} (its part), or the global "
                        "input, which it cuts") from None
            values.append(tensor)
        return values

    def __call__(self, *inputs, **kwargs):
        tensors = _input_tensors(self.exported, inputs,
                                 kwargs if self._kwargs is not None else None)
        results = self.program(*self._parts(tensors), *self._weights,
                               out=self.program.torch_results())
        return self.exported.outputs(results)

    def __repr__(self):
        return (f"<braid.pytorch.RankModule {type(self.module).__name__}, "
                f"rank {self.program.rank} of {self.program.size}>")


def _capacity_groups(example_args, kwargs, input_layout, ranks,
                     data_parallel, capacity_factor):
    """How many token groups the capacity export counts capacities in: one
    per rank when the tokens are split along the sequence (so that each
    rank's tokens fill their own rows and the dispatch and the combine are
    all-to-alls: docs/rationale/frontends.md, "Expert dispatch by
    all-to-all"), else one."""
    values = (input_layout.values() if isinstance(input_layout, dict)
              else [input_layout] if isinstance(input_layout, str)
              else input_layout)
    if capacity_factor is None or "sequence" not in values:
        return 1
    import torch
    tensors = [x for x in list(example_args) + list((kwargs or {}).values())
               if isinstance(x, torch.Tensor)]
    if data_parallel > 1 or not tensors:
        raise ValueError("capacity_factor with sequence-split tokens needs "
                         "one sequence (no data_parallel)")
    first = tensors[0]
    # The sequence is the last dimension of token ids, else the second to
    # last; the dimensions before it must be ones.
    before = first.shape[:-1] if not first.is_floating_point() \
        else first.shape[:-2]
    if any(size != 1 for size in before):
        raise ValueError(f"capacity_factor with sequence-split tokens needs "
                         f"a batch of one sequence; the first input has "
                         f"shape {tuple(first.shape)}")
    return ranks


def to_mlir(module, example_args, plan, ranks=4, input_layout="replicate",
            output_layout=None, kwargs=None, capacity_factor=None,
            data_parallel=1, expert_parallel=1):
    """What parallelize compiles, without compiling it: the module exported
    and annotated with the plan (arguments as parallelize's). Returns
    (exported, text, styles, output_layout): `text` is the MLIR Braid's
    pipeline takes (`braid-compile` reads it too), `styles` the style of
    each argument by name, `exported.data` the DataSplit of
    data_parallel > 1 or expert_parallel > 1."""
    ranks = positive_int(ranks, "ranks")
    data_parallel = _data_parallel(ranks, data_parallel)
    expert_parallel = _data_parallel(ranks, expert_parallel, "expert_parallel")
    if expert_parallel > 1 and data_parallel > 1:
        raise ValueError("expert_parallel and data_parallel together (a 3-D "
                         "grid) are not supported; give one of them")
    if expert_parallel > 1 and capacity_factor is not None:
        raise ValueError("expert_parallel with capacity_factor is not "
                         "supported: expert_parallel computes the experts "
                         "dense (exact)")
    groups = _capacity_groups(example_args, kwargs, input_layout, ranks,
                              data_parallel, capacity_factor)
    exported = export(module, tuple(example_args), kwargs,
                      capacity_factor=capacity_factor,
                      capacity_groups=groups)
    exported.data = _data_split(exported, ranks, data_parallel)
    for name, shape in zip(exported.names, exported.shapes):
        if 0 in shape:
            raise ValueError(f"{name} has shape {shape}; Braid compiles "
                             "tensors without zero-sized dimensions")
    layouts = _input_layouts(exported, input_layout)
    first = next(iter(layouts.values()), "replicate")
    styles, inp, out = _argument_styles(exported, plan, first,
                                        output_layout or first)
    if inp != first and isinstance(input_layout, str):
        layouts = _input_layouts(exported, inp)
    if out not in LAYOUTS:
        raise ValueError(f"layouts are 'replicate' or 'sequence', not {out!r}")
    styles.update(layouts)
    if expert_parallel > 1:
        if "sequence" in list(layouts.values()) + [out]:
            raise ValueError("expert_parallel takes replicated activations "
                             "(input_layout and output_layout 'replicate')")
        exported.data = _expert_split(module, exported, ranks,
                                      expert_parallel, styles)
    return exported, annotate(exported, styles, out, ranks), styles, out


def parallelize(module, example_args, plan, ranks=4, input_layout="replicate",
                output_layout=None, kwargs=None, per_rank=False, cache=None,
                communicator=None, capacity_factor=None, data_parallel=1,
                expert_parallel=1, **compile_options):
    """Compiles `module` (a torch.nn.Module) for `ranks` CPU ranks under the
    tensor-parallel `plan` ({module or parameter path: style}, see the
    module's documentation; parameters it does not name are replicated).
    `kwargs` are the module's keyword arguments (tensors, tuples of them,
    None, flags), as its parent passes them (`position_embeddings=(cos,
    sin)`). `input_layout` ("replicate" or "sequence"; or one per tensor
    input, as a list or a dict by name) and `output_layout` (default: the
    first input's) are the activations' layouts; "sequence" splits the
    second-to-last dimension ([batch, seq, hidden]: seq), and the last of
    integer or boolean inputs of rank 1 or 2 (token ids, masks, position
    ids: [batch, seq]). Other keyword
    arguments go to braid.compile (overlap, ...). `ranks` is a positive
    integer, and no input, parameter or buffer may have a zero-sized
    dimension (ValueError or TypeError otherwise).

    HuggingFace MoE experts are compiled dense by default (every expert on
    every token, weights zero off the top k: exact, E/k times the expert
    FLOPs). `capacity_factor` (a positive number) gives each expert
    ceil(factor * tokens * top_k / experts) rows instead (at most the
    tokens): the tokens routed to it in token order, the rest dropped for
    that expert, as GShard and Switch Transformer route; factor experts /
    top_k drops nothing. With input_layout="sequence" (one sequence, no
    data_parallel) the capacity counts each rank's tokens apart: expert e
    takes ceil(factor * tokens/ranks * top_k / experts) rows from each
    rank's tokens, and under an expert-parallel plan the tokens reach their
    experts' ranks and return by one all-to-all each way.
    `experts_with_capacity(module, factor, groups=1)` runs the module
    itself with the same rule (groups=ranks for the sequence split).

    per_rank=True is for a job that is one process per rank (mpirun): every
    rank calls parallelize with the same arguments, `ranks` is the size of
    `communicator` (None: MPI's world; an mpi4py communicator or an MPI
    Fortran handle), rank 0 compiles into the `cache` directory every rank
    sees (braid.program.compile_once), and each rank gets a RankModule that
    runs its part in process.

    `data_parallel` (a divisor of `ranks`, default 1) compiles for a 2-D
    grid of data_parallel x (ranks / data_parallel) ranks, rank r at
    (r // tp, r % tp): the plan and the layouts split over each row of
    ranks (axis 1), and the batch of the activations (the leading dimension
    of the inputs and outputs whose leading dimension is the first
    input's) over the rows (axis 0); weights are replicated over the
    rows.

    `expert_parallel` (a divisor of `ranks` and of each MoE block's
    experts, default 1) compiles for a 2-D grid of expert_parallel x
    (ranks / expert_parallel) ranks, rank r at (r // tp, r % tp), with a
    tensor-parallel `plan` (the model's base_model_tp_plan): each row of
    ranks holds experts / expert_parallel whole experts, their features
    split over the row by the plan, as the rest of the model is; the
    activations are replicated, and each MoE block's output is one sum
    over the whole grid (EP x TP). The experts are computed dense (exact);
    no capacity_factor, no sequence layout, no data_parallel with it."""
    if per_rank:
        from . import program as _program
        if cache is None:
            raise ValueError("per_rank=True needs cache=, a directory every "
                             "rank sees, where rank 0 compiles for the job")
        _, ranks = _program.rank_and_size(communicator)
    exported, text, styles, out = to_mlir(module, example_args, plan, ranks,
                                          input_layout, output_layout, kwargs,
                                          capacity_factor, data_parallel,
                                          expert_parallel)
    if per_rank:
        compile_options.setdefault("name", type(module).__name__)
        path = _program.compile_once(text, cache, communicator=communicator,
                                     **compile_options)
        return RankModule(module, exported, _program.Program(path, communicator), out,
                          dict(kwargs) if kwargs is not None else None, styles)
    artifact = braid_compile(text, name=type(module).__name__,
                             **compile_options)
    return ParallelModule(module, exported, text, artifact, out,
                          kwargs=dict(kwargs) if kwargs is not None else None,
                          styles=styles)


# torch.compile(model, backend="braid") for modules parallelized with
# PyTorch's own tensor parallelism (braid.torch_backend).
try:
    from .torch_backend import register as _register_backend
    _register_backend()
except ImportError:  # torch without dynamo: the rest of the module works
    pass


# Training steps (forward and backward): braid.training.
from .training import RankTrainStep, TrainStep, train_step  # noqa: E402
