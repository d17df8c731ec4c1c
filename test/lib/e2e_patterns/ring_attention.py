"""Context-parallel attention: k and v all-gathered along the sequence."""
import numpy as np

import spmd

from .core import header, quantize, tensor, tolerance


def pattern_ring_attention(cfg):
    """Context-parallel attention: q, k and v hold this rank's tokens of the
    sequence; k and v are all-gathered along it and feed softmax(q k^T *
    scale [+ mask]) v, written as frontends write it (separate max, exp,
    sum and divide generics). Variants: `causal` (a causal mask on global
    positions, through linalg.index and the rank's position), `full` (no
    mask), `keep` (the causal mask as a select of the kept scores, -inf
    elsewhere), `gqa` (causal, two q heads per k/v head: k and v are broadcast
    over the heads after the gather), `mask` (an additive mask input over
    the whole sequence), `softmax` (linalg.softmax, non-causal),
    `transposed` (non-causal, k transposed after the gather), `iota` (causal
    as HF builds it: a whole-sequence mask tensor of 0 and -inf from iotas
    of the key and row positions, sliced to this rank's rows and added to
    the scores). q/k/v are
    in the test's dtype, the softmax computes in f32, the probabilities are
    stored in the test's dtype for the second product, as frontends do.

    A variant may add `+SPELLING`, another way to write the same softmax
    (not with `softmax`): `select-max` (the row max as a select of the
    larger), `exp2` (the scale moved into exp2 of the difference, times
    log2(e)), `scaled-exp` (the scale in exp(c s - c m)), `reciprocal`
    (the exponentials times 1 / sum), `reciprocal-op` (1 / sum in an op of
    its own), `flash` (the division after the product with v)."""
    n, dt = cfg.group, cfg.dtype
    z = cfg.scale
    variant, _, spelling = (cfg.variant or "causal").partition("+")
    if variant not in ("causal", "keep", "full", "gqa", "mask", "softmax", "transposed",
                       "iota"):
        raise SystemExit(f"unknown variant {variant}")
    if spelling not in ("", "select-max", "exp2", "scaled-exp", "reciprocal",
                        "reciprocal-op", "flash") or (spelling and variant == "softmax"):
        raise SystemExit(f"unknown spelling {spelling} of variant {variant}")
    # The scale inside the exponential: the score ops leave the scores
    # unscaled.
    scale_in_exp = spelling in ("exp2", "scaled-exp")
    # bench/cpu/ring_attention.py sets larger heads and head_dim.
    heads, tl, d = getattr(cfg, "heads", 2), 4 * z, getattr(cfg, "head_dim", 8)
    kv_heads = heads // 2 if variant == "gqa" else heads
    rep = heads // kv_heads
    t = n * tl
    causal = variant in ("causal", "keep", "gqa", "iota")
    scale = 1.0 / np.sqrt(d)
    qs, ks, ss, os_ = (heads, tl, d), (kv_heads, tl, d), (heads, tl, t), (heads, tl, d)
    f32 = "f32"

    def ext(name):
        return f"arith.extf {name} : {dt} to f32" if dt != "f32" else None

    lines = []

    def emit(text):
        lines.append("  " + text)

    def body(args, ops):
        """A generic body: args [(name, type)], ops list of lines; last yields."""
        return ("{\n  ^bb0(" + ", ".join(f"{a}: {ty}" for a, ty in args) + "):\n" +
                "".join(f"    {o}\n" for o in ops) + "  }")

    emit(f"%zero = arith.constant 0.0 : f32")
    emit(f"%low = arith.constant -3.0e+38 : f32")
    emit(f"%kg = shard.all_gather %k on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(ks, dt)} -> {tensor((kv_heads, t, d), dt)}")
    emit(f"%vg = shard.all_gather %v on @g grid_axes = [{cfg.axis}] gather_axis = 1 : {tensor(ks, dt)} -> {tensor((kv_heads, t, d), dt)}")
    kname, vname = "%kg", "%vg"
    if rep > 1:
        for src in ("k", "v"):
            bt = tensor((kv_heads, rep, t, d), dt)
            emit(f"%{src}b0 = tensor.empty() : {bt}")
            emit(f"%{src}b = linalg.generic {{indexing_maps = [affine_map<(a, b, c, e) -> (a, c, e)>, "
                 f"affine_map<(a, b, c, e) -> (a, b, c, e)>], iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"parallel\"]}} "
                 f"ins(%{src}g : {tensor((kv_heads, t, d), dt)}) outs(%{src}b0 : {bt}) "
                 + body([("%x", dt), ("%o", dt)], [f"linalg.yield %x : {dt}"]) + f" -> {bt}")
            emit(f"%{src}r = tensor.collapse_shape %{src}b [[0, 1], [2], [3]] : {bt} into {tensor((heads, t, d), dt)}")
        kname, vname = "%kr", "%vr"
    def contraction(name, maps, a, b, a_type, out_shape, b_type=None):
        """name = sum over the last loop of a * b (in f32), as a generic."""
        out_t = tensor(out_shape, f32)
        emit(f"%{name}e = tensor.empty() : {out_t}")
        emit(f"%{name}z = linalg.fill ins(%zero : f32) outs(%{name}e : {out_t}) -> {out_t}")
        ops, x, y = [], "%a", "%b"
        if dt != "f32":
            ops, x, y = [f"%ae = {ext('%a')}", f"%be = {ext('%b')}"], "%ae", "%be"
        ops += [f"%mul = arith.mulf {x}, {y} : f32", "%add = arith.addf %acc, %mul : f32",
                "linalg.yield %add : f32"]
        emit(f"%{name} = linalg.generic {{indexing_maps = [{', '.join(f'affine_map<{m}>' for m in maps)}], "
             f"iterator_types = [\"parallel\", \"parallel\", \"parallel\", \"reduction\"]}} "
             f"ins({a}, {b} : {a_type}, {b_type or tensor((heads, t, d), dt)}) outs(%{name}z : {out_t}) "
             + body([("%a", dt), ("%b", dt), ("%acc", f32)], ops) + f" -> {out_t}")

    # scores[h, i, j] = sum_c q[h, i, c] k[h, j, c]; variant `transposed`
    # (non-causal): k transposed to [h, c, j] after the gather first.
    key_map = "(h, i, j, c) -> (h, j, c)"
    if variant == "transposed":
        kt = tensor((heads, d, t), dt)
        emit(f"%kte = tensor.empty() : {kt}")
        emit(f"%kt = linalg.transpose ins({kname} : {tensor((heads, t, d), dt)}) outs(%kte : {kt}) permutation = [0, 2, 1]")
        kname, key_map = "%kt", "(h, i, j, c) -> (h, c, j)"
    contraction("s", ["(h, i, j, c) -> (h, i, c)", key_map, "(h, i, j, c) -> (h, i, j)"],
                "%q", kname, tensor(qs, dt), ss, b_type=tensor((heads, d, t), dt) if variant == "transposed" else None)
    # How the score ops scale a score (not at all when the exponential does).
    scaled = ("%y = arith.addf %x, %zero : f32" if scale_in_exp
              else "%y = arith.mulf %x, %scale : f32")
    ident3 = "affine_map<(h, i, j) -> (h, i, j)>"
    rows3 = "affine_map<(h, i, j) -> (h, i)>"
    par3 = '"parallel", "parallel", "parallel"'
    emit(f"%scale = arith.constant {scale!r} : f32")
    emit(f"%me = tensor.empty() : {tensor(ss, f32)}")
    if variant == "iota":
        # HF's create_causal_mask: kv_idx <= q_idx allowed, as 0 / -inf.
        it, mt = tensor((t,), "i64"), tensor((t, t), f32)
        emit(f"%ie = tensor.empty() : {it}")
        emit(f"%iota = linalg.generic {{indexing_maps = [affine_map<(a) -> (a)>], iterator_types = [\"parallel\"]}} "
             f"outs(%ie : {it}) " + body([("%o", "i64")], ["%a = linalg.index 0 : index",
                                                          "%c = arith.index_cast %a : index to i64",
                                                          "linalg.yield %c : i64"]) + f" -> {it}")
        emit(f"%cols = tensor.expand_shape %iota [[0, 1]] output_shape [1, {t}] : {it} into {tensor((1, t), 'i64')}")
        emit(f"%rows = tensor.expand_shape %iota [[0, 1]] output_shape [{t}, 1] : {it} into {tensor((t, 1), 'i64')}")
        emit(f"%c0 = arith.constant 0 : i64")
        emit(f"%mz = arith.constant dense<0.0> : tensor<f32>")
        emit(f"%mi = arith.constant dense<0xFF800000> : tensor<f32>")
        emit(f"%mke = tensor.empty() : {mt}")
        emit(f"%hf = linalg.generic {{indexing_maps = [affine_map<(a, b) -> (0, b)>, affine_map<(a, b) -> (a, 0)>, "
             f"affine_map<(a, b) -> ()>, affine_map<(a, b) -> ()>, affine_map<(a, b) -> (a, b)>], "
             f"iterator_types = [\"parallel\", \"parallel\"]}} "
             f"ins(%cols, %rows, %mz, %mi : {tensor((1, t), 'i64')}, {tensor((t, 1), 'i64')}, tensor<f32>, tensor<f32>) "
             f"outs(%mke : {mt}) "
             + body([("%kv", "i64"), ("%qi", "i64"), ("%z", f32), ("%ni", f32), ("%o", f32)],
                    ["%d = arith.subi %kv, %qi : i64", "%ok = arith.cmpi sle, %d, %c0 : i64",
                     "%r = arith.select %ok, %z, %ni : f32", "linalg.yield %r : f32"]) + f" -> {mt}")
        emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
        emit(f"%tl = arith.constant {tl} : index")
        emit(f"%base = arith.muli %pos, %tl : index")
        emit(f"%mine = tensor.extract_slice %hf[%base, 0] [{tl}, {t}] [1, 1] : {mt} to {tensor((tl, t), f32)}")
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, affine_map<(h, i, j) -> (i, j)>, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s, %mine : {tensor(ss, f32)}, {tensor((tl, t), f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%mk", f32), ("%o", f32)],
                    [scaled, "%r = arith.addf %y, %mk : f32",
                     "linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    elif causal:
        emit(f"%pos = shard.process_multi_index on @g axes = [{cfg.axis}] : index")
        emit(f"%tl = arith.constant {tl} : index")
        emit(f"%base = arith.muli %pos, %tl : index")
        emit(f"%neg = arith.constant {'0xFF800000' if variant == 'keep' else '-1.0e+30'} : f32")
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s : {tensor(ss, f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%o", f32)],
                    ["%i = linalg.index 1 : index", "%j = linalg.index 2 : index",
                     "%gi = arith.addi %base, %i : index"] +
                    (["%past = arith.cmpi sle, %j, %gi : index", scaled,
                      "%r = arith.select %past, %y, %neg : f32"] if variant == "keep" else
                     ["%future = arith.cmpi ugt, %j, %gi : index", scaled,
                      "%r = arith.select %future, %neg, %y : f32"]) +
                    ["linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    elif variant == "mask":
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, affine_map<(h, i, j) -> (i, j)>, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s, %mask : {tensor(ss, f32)}, {tensor((tl, t), f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%mk", f32), ("%o", f32)],
                    [scaled, "%r = arith.addf %y, %mk : f32",
                     "linalg.yield %r : f32"]) + f" -> {tensor(ss, f32)}")
    else:
        emit(f"%sm = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%s : {tensor(ss, f32)}) outs(%me : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%o", f32)], [scaled, "linalg.yield %y : f32"])
             + f" -> {tensor(ss, f32)}")
    pt = tensor(ss, dt)
    if variant == "softmax":
        emit(f"%pe = tensor.empty() : {tensor(ss, f32)}")
        emit(f"%p32 = linalg.softmax dimension(2) ins(%sm : {tensor(ss, f32)}) outs(%pe : {tensor(ss, f32)}) -> {tensor(ss, f32)}")
        if dt != "f32":
            emit(f"%pc = tensor.empty() : {pt}")
            emit(f"%p = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
                 f"ins(%p32 : {tensor(ss, f32)}) outs(%pc : {pt}) "
                 + body([("%x", f32), ("%o", dt)], [f"%y = arith.truncf %x : f32 to {dt}", f"linalg.yield %y : {dt}"])
                 + f" -> {pt}")
        else:
            lines[-1] = lines[-1].replace("%p32 =", "%p =", 1)
    else:
        rt = tensor((heads, tl), f32)
        red = '"parallel", "parallel", "reduction"'
        emit(f"%mx0 = tensor.empty() : {rt}")
        emit(f"%mx1 = linalg.fill ins(%low : f32) outs(%mx0 : {rt}) -> {rt}")
        emit(f"%mx = linalg.generic {{indexing_maps = [{ident3}, {rows3}], iterator_types = [{red}]}} "
             f"ins(%sm : {tensor(ss, f32)}) outs(%mx1 : {rt}) "
             + body([("%x", f32), ("%acc", f32)],
                    (["%c = arith.cmpf ogt, %x, %acc : f32", "%r = arith.select %c, %x, %acc : f32"]
                     if spelling == "select-max" else ["%r = arith.maximumf %acc, %x : f32"])
                    + ["linalg.yield %r : f32"])
             + f" -> {rt}")
        if spelling == "exp2":
            exponential = ["%y = arith.subf %x, %m : f32",
                           f"%c2 = arith.constant {scale / np.log(2.0)!r} : f32",
                           "%y2 = arith.mulf %y, %c2 : f32", "%r = math.exp2 %y2 : f32"]
        elif spelling == "scaled-exp":
            exponential = ["%xs = arith.mulf %x, %scale : f32", "%ms = arith.mulf %m, %scale : f32",
                           "%y = arith.subf %xs, %ms : f32", "%r = math.exp %y : f32"]
        else:
            exponential = ["%y = arith.subf %x, %m : f32", "%r = math.exp %y : f32"]
        emit(f"%ee = tensor.empty() : {tensor(ss, f32)}")
        emit(f"%e = linalg.generic {{indexing_maps = [{ident3}, {rows3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%sm, %mx : {tensor(ss, f32)}, {rt}) outs(%ee : {tensor(ss, f32)}) "
             + body([("%x", f32), ("%m", f32), ("%o", f32)], exponential + ["linalg.yield %r : f32"])
             + f" -> {tensor(ss, f32)}")
        emit(f"%sum1 = linalg.fill ins(%zero : f32) outs(%mx0 : {rt}) -> {rt}")
        emit(f"%sum = linalg.generic {{indexing_maps = [{ident3}, {rows3}], iterator_types = [{red}]}} "
             f"ins(%e : {tensor(ss, f32)}) outs(%sum1 : {rt}) "
             + body([("%x", f32), ("%acc", f32)], ["%r = arith.addf %x, %acc : f32", "linalg.yield %r : f32"])
             + f" -> {rt}")
        emit(f"%pe = tensor.empty() : {pt}")
        store = ([f"%rt = arith.truncf %r : f32 to {dt}", f"linalg.yield %rt : {dt}"] if dt != "f32"
                 else ["linalg.yield %r : f32"])
        divisor = "%sum"
        if spelling == "reciprocal-op":
            emit(f"%ie = tensor.empty() : {rt}")
            emit(f"%inv = linalg.generic {{indexing_maps = [affine_map<(h, i) -> (h, i)>, affine_map<(h, i) -> (h, i)>], "
                 f"iterator_types = [\"parallel\", \"parallel\"]}} ins(%sum : {rt}) outs(%ie : {rt}) "
                 + body([("%x", f32), ("%o", f32)], ["%one = arith.constant 1.0 : f32", "%r = arith.divf %one, %x : f32",
                                                     "linalg.yield %r : f32"]) + f" -> {rt}")
            divisor, div = "%inv", ["%r = arith.mulf %x, %zz : f32"]
        elif spelling == "reciprocal":
            div = ["%one = arith.constant 1.0 : f32", "%i = arith.divf %one, %zz : f32", "%r = arith.mulf %i, %x : f32"]
        elif spelling == "flash":
            # Stored as they are, in the test's dtype.
            div, store = [], ([f"%rt = arith.truncf %x : f32 to {dt}", f"linalg.yield %rt : {dt}"]
                              if dt != "f32" else ["linalg.yield %x : f32"])
        else:
            div = ["%r = arith.divf %x, %zz : f32"]
        if spelling == "flash":
            emit(f"%p = linalg.generic {{indexing_maps = [{ident3}, {ident3}], iterator_types = [{par3}]}} "
                 f"ins(%e : {tensor(ss, f32)}) outs(%pe : {pt}) "
                 + body([("%x", f32), ("%o", dt)], div + store) + f" -> {pt}")
        else:
            emit(f"%p = linalg.generic {{indexing_maps = [{ident3}, {rows3}, {ident3}], iterator_types = [{par3}]}} "
                 f"ins(%e, {divisor} : {tensor(ss, f32)}, {rt}) outs(%pe : {pt}) "
                 + body([("%x", f32), ("%zz", f32), ("%o", dt)], div + store) + f" -> {pt}")
    # out[h, i, c] = sum_j p[h, i, j] v[h, j, c]
    contraction("out", ["(h, i, c, j) -> (h, i, j)", "(h, i, c, j) -> (h, j, c)", "(h, i, c, j) -> (h, i, c)"],
                "%p", vname, pt, os_)
    result = "%out"
    if spelling == "flash":
        # (e v) / sum: the division after the product.
        ot = tensor(os_, f32)
        emit(f"%fe = tensor.empty() : {ot}")
        emit(f"%res = linalg.generic {{indexing_maps = [{ident3}, {rows3}, {ident3}], iterator_types = [{par3}]}} "
             f"ins(%out, %sum : {ot}, {rt}) outs(%fe : {ot}) "
             + body([("%x", f32), ("%zz", f32), ("%o", f32)], ["%r = arith.divf %x, %zz : f32", "linalg.yield %r : f32"])
             + f" -> {ot}")
        result = "%res"
    args = f"%q: {tensor(qs, dt)}, %k: {tensor(ks, dt)}, %v: {tensor(ks, dt)}"
    specs = [(qs, dt), (ks, dt), (ks, dt)]
    if variant == "mask":
        args += f", %mask: {tensor((tl, t), f32)}"
        specs.append(((tl, t), f32))
    text = (header(cfg.grid) + f"func.func @main({args}) -> {tensor(os_, f32)} {{\n" +
            "\n".join(lines) + f"\n  return {result} : {tensor(os_, f32)}\n}}\n")

    def ref(grid, ins):
        q, k, v = ins[:3]
        kg = spmd.all_gather(grid, k, [cfg.axis], 1)
        vg = spmd.all_gather(grid, v, [cfg.axis], 1)
        out = []
        for r in range(grid.size):
            kk = np.repeat(kg[r], rep, axis=0)
            vv = np.repeat(vg[r], rep, axis=0)
            s = np.einsum("hic,hjc->hij", q[r], kk) * np.float32(scale)
            if causal:
                pos = grid.coords(r)[cfg.axis]
                gi = pos * tl + np.arange(tl)[:, None]
                s = np.where(np.arange(t)[None, :] > gi, -1.0e30, s)
            if variant == "mask":
                s = s + ins[3][r]
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            if spelling == "flash":
                o = np.einsum("hij,hjc->hic", quantize(p, dt), vv)
                out.append([o / p.sum(axis=-1, keepdims=True)])
                continue
            p = quantize(p / p.sum(axis=-1, keepdims=True), dt)
            out.append([np.einsum("hij,hjc->hic", p, vv)])
        return out
    # The probabilities are rounded to the test's dtype before the product
    # with v, and the ring rounds them unnormalized, block by block: the
    # result, in f32, is as close as that dtype allows.
    return text, specs, [f32], ref, [tolerance(dt)]


PATTERNS = {
    "ring_attention": pattern_ring_attention,
}
