# ===- ptx_mutate.py - Breaking compiled kernels on purpose ------------===#
#
# Part of Braid.
#
# ===----------------------------------------------------------------------===#
"""ptx_mutate.py MUTATION IN.ptx OUT.ptx: a kernel Braid compiled (its
--emit=ptx), broken the way a lowering bug would break it, for the emulated
device to catch (BRAID_EMULATE_PTX_REPLACE runs OUT.ptx in its place):

  drop-reduction-barrier  the bar.sync between the warps' partial sums,
                          stored in a row reduction's shared buffer (upstream
                          gpu.all_reduce's __wg_ buffer), and the reads of
                          them by other warps
  alias-reduction-buffer  the reduction buffer moved onto the start of the
                          dynamic shared memory that holds the row's tile
                          (the aliasing a review once found by reading PTX)
  misalign-vector-load    the first 16-byte shared load 4 bytes off
  skip-flag-poll          the poll of a flag a kernel waits on
                          (braid-kernel-signals) reads it once, relaxed,
                          and goes on: the kernel reads what its peers
                          put without the raise that announces it
  relax-arrivals          the blocks' arrival count relaxed: the last
                          block's raise no longer carries the other
                          blocks' accesses (a raise before their stores
                          are visible)
  drop-tile-barrier       a generated GEMM's bar.sync between its threads'
                          stores of the operand tiles into shared memory
                          and the warps' ldmatrix of them
  drop-tile-reuse-barrier its bar.sync after the last mma.sync of a K tile,
                          before the next tile's stores overwrite what
                          other warps may still be loading
  drop-ldmatrix-trans     B's fragments loaded without .trans (rows where
                          mma.sync wants columns)
  drop-async-wait         every cp.async.wait_group: the warps read tiles
                          whose copies may not have landed
  drop-stage-reuse-barrier  the pipelined GEMM's bar.sync after a K tile's
                          products, before the next cp.async copies into
                          the stage other warps may still be reading

Exits 1, saying why, when IN.ptx has nothing to break that way.
"""
import re
import sys


def drop_reduction_barrier(lines):
    for i, line in enumerate(lines):
        if re.search(r"\bmov\.b64\s+%rd\d+, __wg_\w+;", line):
            for j in range(i + 1, len(lines)):
                if re.match(r"\s*bar\.sync\b", lines[j]):
                    return lines[:j] + lines[j + 1:]
    return None


def alias_reduction_buffer(lines):
    out, changed = [], False
    for line in lines:
        # Uses only ([sym], [sym+N], ", sym;"), not the declaration.
        new = re.sub(r"(?<=[\[ ,\t])(__wg_\w+)(?=[\]+;])", "__dynamic_shmem__0",
                     line) if not line.lstrip().startswith(".shared") else line
        changed |= new != line
        out.append(new)
    return out if changed else None


def misalign_vector_load(lines):
    for i, line in enumerate(lines):
        if re.match(r"\s*ld\.shared\.v4\.", line):
            out = list(lines)
            out[i] = re.sub(r"\]", "+4]", line, count=1)
            return out
    return None


def skip_flag_poll(lines):
    for i, line in enumerate(lines):
        if re.search(r"\bld\.acquire\.sys\.u32\b", line):
            for j in range(i + 1, len(lines)):
                if re.match(r"\s*@%p\d+ bra\b", lines[j]):
                    out = lines[:j] + lines[j + 1:]
                    out[i] = line.replace("ld.acquire.", "ld.relaxed.")
                    return out
    return None


def relax_arrivals(lines):
    out = [line.replace("atom.acq_rel.gpu.add.u32", "atom.relaxed.gpu.add.u32")
           for line in lines]
    return out if out != lines else None


def drop_tile_barrier(lines):
    first = next((i for i, line in enumerate(lines) if "ldmatrix." in line), None)
    if first is None:
        return None
    for j in range(first - 1, -1, -1):
        if re.match(r"\s*bar\.sync\b", lines[j]):
            return lines[:j] + lines[j + 1:]
    return None


def drop_tile_reuse_barrier(lines):
    # The first bar.sync after an mma.sync that shared stores follow (the
    # K loop may be unrolled: not the last one, after which nothing is
    # stored).
    seen_mma = False
    for j, line in enumerate(lines):
        seen_mma |= "mma.sync." in line
        if seen_mma and re.match(r"\s*bar\.sync\b", line) and any(
                re.match(r"\s*st\.shared\.", later) for later in lines[j + 1:]):
            return lines[:j] + lines[j + 1:]
    return None


def drop_ldmatrix_trans(lines):
    out = [line.replace(".x2.trans.", ".x2.") for line in lines]
    return out if out != lines else None


def drop_stage_reuse_barrier(lines):
    # In the pipelined loop: the first bar.sync after the first mma.sync
    # that follows a cp.async copy.
    copy = next((i for i, line in enumerate(lines)
                 if re.match(r"\s*cp\.async\.c[ag]\.", line)), None)
    if copy is None:
        return None
    mma = next((i for i in range(copy, len(lines)) if "mma.sync." in lines[i]), None)
    if mma is None:
        return None
    for j in range(mma, len(lines)):
        if re.match(r"\s*bar\.sync\b", lines[j]):
            return lines[:j] + lines[j + 1:]
    return None


def drop_async_wait(lines):
    out = [line for line in lines if "cp.async.wait_group" not in line]
    return out if len(out) != len(lines) else None


MUTATIONS = {
    "drop-reduction-barrier": drop_reduction_barrier,
    "alias-reduction-buffer": alias_reduction_buffer,
    "misalign-vector-load": misalign_vector_load,
    "skip-flag-poll": skip_flag_poll,
    "relax-arrivals": relax_arrivals,
    "drop-tile-barrier": drop_tile_barrier,
    "drop-tile-reuse-barrier": drop_tile_reuse_barrier,
    "drop-ldmatrix-trans": drop_ldmatrix_trans,
    "drop-async-wait": drop_async_wait,
    "drop-stage-reuse-barrier": drop_stage_reuse_barrier,
}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in MUTATIONS:
        sys.exit(__doc__)
    with open(sys.argv[2]) as f:
        lines = f.read().split("\n")
    mutated = MUTATIONS[sys.argv[1]](lines)
    if mutated is None:
        sys.exit(f"ptx_mutate.py: {sys.argv[2]} has nothing to {sys.argv[1]}")
    with open(sys.argv[3], "w") as f:
        f.write("\n".join(mutated))


if __name__ == "__main__":
    main()
