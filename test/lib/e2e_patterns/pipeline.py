"""Pipeline parallelism through shard.send and shard.recv."""
import numpy as np

import spmd

from .core import header, tensor, tolerance


def pattern_pipeline(cfg):
    """Pipeline parallelism through upstream's point-to-point ops: the
    group along --axis is the stages, each rank's weights its stage's
    layer (tanh(x W1) W2 + x; with a 2-D grid the layer is tensor
    parallel over the other axis, its partial sums all-reduced there). The
    micro-batches go through in ticks, GPipe's forward schedule written
    out: at each tick a rank takes its next micro-batch (the first stage)
    or what the previous stage sent it, computes its layer, and sends the
    result on with shard.send to this rank's position + 1, received by
    shard.recv from the position - 1. The last stage collects the results
    (the others return zeros)."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    tp_axis = None
    if len(cfg.grid) == 2:
        tp_axis = 1 - cfg.axis
    micro, rows, hidden, ffn = 3, 2 * z, 8, 16
    ticks = micro + n - 1
    act, wt = "f32", dt
    xs, w1s, w2s, outs = (micro * rows, hidden), (hidden, ffn), (ffn, hidden), (micro * rows, hidden)
    t_in, t_h, t_x = tensor((rows, hidden), act), tensor((rows, ffn), act), tensor(xs, act)
    lines = []

    def emit(text):
        lines.append("  " + text)

    emit("%zero = arith.constant 0.0 : f32")
    emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
    emit("%c0 = arith.constant 0 : index")
    emit("%c1 = arith.constant 1 : index")
    emit(f"%clast = arith.constant {n - 1} : index")
    emit("%first = arith.cmpi eq, %pos, %c0 : index")
    emit("%last = arith.cmpi eq, %pos, %clast : index")
    emit("%next = arith.addi %pos, %c1 : index")
    emit("%prev = arith.subi %pos, %c1 : index")
    emit(f"%e_in = tensor.empty() : {t_in}")
    emit(f"%zin = linalg.fill ins(%zero : f32) outs(%e_in : {t_in}) -> {t_in}")
    emit(f"%e_out = tensor.empty() : {t_x}")
    emit(f"%out0 = linalg.fill ins(%zero : f32) outs(%e_out : {t_x}) -> {t_x}")
    recv, out = "%zin", "%out0"
    for tick in range(ticks):
        p = f"t{tick}_"
        if tick < micro:
            emit(f"%{p}x = tensor.extract_slice %x[{tick * rows}, 0] [{rows}, {hidden}] [1, 1] : {t_x} to {t_in}")
            xin = f"%{p}x"
        else:
            xin = "%zin"
        emit(f"%{p}in = arith.select %first, {xin}, {recv} : {t_in}")
        emit(f"%{p}he = tensor.empty() : {t_h}")
        emit(f"%{p}hz = linalg.fill ins(%zero : f32) outs(%{p}he : {t_h}) -> {t_h}")
        emit(f"%{p}h = linalg.matmul ins(%{p}in, %w1 : {t_in}, {tensor(w1s, wt)}) outs(%{p}hz : {t_h}) -> {t_h}")
        emit(f"%{p}ae = tensor.empty() : {t_h}")
        emit(f"%{p}a = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%{p}h : {t_h}) outs(%{p}ae : {t_h}) {{\n"
             f"  ^bb0(%v: f32, %o: f32):\n    %th = math.tanh %v : f32\n    linalg.yield %th : f32\n  }} -> {t_h}")
        emit(f"%{p}ye = tensor.empty() : {t_in}")
        emit(f"%{p}yz = linalg.fill ins(%zero : f32) outs(%{p}ye : {t_in}) -> {t_in}")
        emit(f"%{p}yp = linalg.matmul ins(%{p}a, %w2 : {t_h}, {tensor(w2s, wt)}) outs(%{p}yz : {t_in}) -> {t_in}")
        y = f"%{p}yp"
        if tp_axis is not None:
            emit(f"%{p}yr = shard.all_reduce %{p}yp on @g grid_axes = [{tp_axis}] : {t_in} -> {t_in}")
            y = f"%{p}yr"
        emit(f"%{p}re = tensor.empty() : {t_in}")
        emit(f"%{p}y = linalg.add ins({y}, %{p}in : {t_in}, {t_in}) outs(%{p}re : {t_in}) -> {t_in}")
        mb = tick - (n - 1)
        if mb >= 0:
            emit(f"%{p}kept = arith.select %last, %{p}y, %zin : {t_in}")
            emit(f"%{p}out = tensor.insert_slice %{p}kept into {out}[{mb * rows}, 0] [{rows}, {hidden}] [1, 1] : {t_in} into {t_x}")
            out = f"%{p}out"
        if tick < ticks - 1:
            emit(f"%{p}sent = shard.send %{p}y on @g grid_axes = [{cfg.axis}] destination = [%next] : ({t_in}, index) -> {t_in}")
            emit(f"%{p}got = shard.recv %{p}y on @g grid_axes = [{cfg.axis}] source = [%prev] : ({t_in}, index) -> {t_in}")
            recv = f"%{p}got"
    text = (header(cfg.grid) +
            f"func.func @main(%x: {t_x}, %w1: {tensor(w1s, wt)}, %w2: {tensor(w2s, wt)}) -> {t_x} {{\n" +
            "\n".join(lines) + f"\n  return {out} : {t_x}\n}}\n")

    def ref(grid, ins):
        x, w1, w2 = ins
        size = grid.size
        recv_ = [np.zeros((rows, hidden)) for _ in range(size)]
        out_ = [np.zeros(outs) for _ in range(size)]
        pos = [grid.coords(r)[cfg.axis] for r in range(size)]
        for tick in range(ticks):
            inp = []
            for r in range(size):
                xin = x[r][tick * rows:(tick + 1) * rows] if tick < micro else np.zeros((rows, hidden))
                inp.append(xin if pos[r] == 0 else recv_[r])
            part = [np.tanh(inp[r] @ w1[r]) @ w2[r] for r in range(size)]
            if tp_axis is not None:
                part = spmd.all_reduce(grid, part, [tp_axis])
            y = [part[r] + inp[r] for r in range(size)]
            mb = tick - (n - 1)
            if mb >= 0:
                for r in range(size):
                    if pos[r] == n - 1:
                        out_[r][mb * rows:(mb + 1) * rows] = y[r]
            # What the previous stage (rotating, as dist.shift does) sent.
            for r in range(size):
                coords = list(grid.coords(r))
                coords[cfg.axis] = (coords[cfg.axis] - 1) % n
                recv_[r] = y[grid.rank(coords)]
        return [[o] for o in out_]
    # The activations stay f32; products with dt weights round nothing
    # else, but bf16 weights still bound the result by bf16's tolerance.
    return text, [(xs, act), (w1s, wt), (w2s, wt)], [act], ref, [tolerance(dt)]


PATTERNS = {
    "pipeline": pattern_pipeline,
}
