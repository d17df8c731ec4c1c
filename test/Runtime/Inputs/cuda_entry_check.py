# ===- cuda_entry_check.py - Inputs and expected results of entry_cuda.c -===#
#
# Part of Braid.
#
# ===----------------------------------------------------------------------===#
#
#   inputs DIR RANKS   writes DIR/x.rank{r}.npy (small integers: every
#                      result below is exact in f32)
#   check DIR RANKS    compares DIR/out{k}.rank{r}.npy with numpy and prints
#                      "cuda entry results match numpy on RANKS ranks"
#
# ===----------------------------------------------------------------------===#

import sys

import numpy as np


def inputs(directory, ranks):
    for rank in range(ranks):
        x = (np.arange(16, dtype=np.float32).reshape(4, 4) % 5) + 10 * rank
        np.save(f"{directory}/x.rank{rank}.npy", x)


def check(directory, ranks):
    xs = [np.load(f"{directory}/x.rank{rank}.npy") for rank in range(ranks)]
    for rank in range(ranks):
        x = xs[rank]
        expected = [
            np.concatenate(xs, axis=0),
            sum(xs),
            xs[(rank - 1) % ranks],
            x @ x.T + 1.0,
        ]
        for k, want in enumerate(expected):
            got = np.load(f"{directory}/out{k}.rank{rank}.npy")
            if got.dtype != np.float32 or got.shape != want.shape:
                sys.exit(f"rank {rank} result {k}: {got.dtype} {got.shape}, "
                         f"expected float32 {want.shape}")
            if not np.array_equal(got, want):
                sys.exit(f"rank {rank} result {k}: got\n{got}\nexpected\n{want}")
    print(f"cuda entry results match numpy on {ranks} ranks")


if __name__ == "__main__":
    command, directory, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    {"inputs": inputs, "check": check}[command](directory, ranks)
