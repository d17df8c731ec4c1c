#!/usr/bin/env python3
"""The cpu target's GEMMs against numpy, on CPU ranks.

Writes one program of contractions in every form braid_rt_gemm takes (f32
with a bias + GELU epilogue, bf16 operands accumulating into f32 with a
ReLU epilogue, B transposed, a batched product, f16 operands and result,
a product accumulating into a buffer already holding values, a ring-like
chunk of B), compiles it with braid-compile (--gemm=library or generated),
checks from the remarks that each product went where that option says,
runs it on RANKS ranks (every rank computes the same: the program has no
collectives) with braid-exec, and compares every result with numpy in
float64 from the same, rounded, inputs.

Usage: gemm_check.py BIN_DIR RANKS WORK_DIR [--gemm library|generated]
Exit status 0 when every result matches.
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)),
                                "python"))
import launch  # noqa: E402
from braid.dtypes import quantize  # noqa: E402

M, K, N, B = 96, 160, 128, 3

PROGRAM = f"""
shard.grid @g(shape = {{ranks}})
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
func.func @main(%x: tensor<{M}x{K}xf32>, %w: tensor<{K}x{N}xf32>,
                %wt: tensor<{N}x{K}xf32>, %bias: tensor<{N}xf32>,
                %p: tensor<{B}x{M}x{K}xf32>, %q: tensor<{B}x{K}x{N}xf32>,
                %acc: tensor<{M}x{N}xf32>, %big: tensor<{2 * K}x{N}xf32>)
    -> (tensor<{M}x{N}xf32>, tensor<{M}x{N}xf32>, tensor<{M}x{N}xf32>,
        tensor<{B}x{M}x{N}xf32>, tensor<{M}x{N}xf16>, tensor<{M}x{N}xf32>,
        tensor<{M}x{N}xf32>) {{
  %zero = arith.constant 0.0 : f32
  %half = arith.constant 0.5 : f32
  %one = arith.constant 1.0 : f32
  %c0447 = arith.constant 0.044715 : f32
  %s2pi = arith.constant 0.7978845608 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>

  // gelu_tanh(x @ w + bias)
  %xw = linalg.matmul ins(%x, %w : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) outs(%z : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %y0 = linalg.generic {{indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%xw, %bias : tensor<{M}x{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{M}x{N}xf32>) {{
  ^bb0(%v: f32, %bv: f32, %o: f32):
    %y = arith.addf %v, %bv : f32
    %y2 = arith.mulf %y, %y : f32
    %y3 = arith.mulf %y2, %y : f32
    %i1 = arith.mulf %y3, %c0447 : f32
    %i2 = arith.addf %y, %i1 : f32
    %i3 = arith.mulf %i2, %s2pi : f32
    %t = math.tanh %i3 : f32
    %t1 = arith.addf %t, %one : f32
    %hy = arith.mulf %y, %half : f32
    %r = arith.mulf %hy, %t1 : f32
    linalg.yield %r : f32
  }} -> tensor<{M}x{N}xf32>

  // relu(bf16(x) @ bf16(w)), accumulated in f32
  %xb = arith.truncf %x : tensor<{M}x{K}xf32> to tensor<{M}x{K}xbf16>
  %wb = arith.truncf %w : tensor<{K}x{N}xf32> to tensor<{K}x{N}xbf16>
  %xwb = linalg.matmul ins(%xb, %wb : tensor<{M}x{K}xbf16>, tensor<{K}x{N}xbf16>) outs(%z : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %y1 = linalg.generic {{indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%xwb : tensor<{M}x{N}xf32>) outs(%e : tensor<{M}x{N}xf32>) {{
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %zero : f32
    linalg.yield %r : f32
  }} -> tensor<{M}x{N}xf32>

  // x @ wt^T
  %y2 = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
      ins(%x, %wt : tensor<{M}x{K}xf32>, tensor<{N}x{K}xf32>) outs(%z : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>

  // p @ q in batches
  %eb = tensor.empty() : tensor<{B}x{M}x{N}xf32>
  %zb = linalg.fill ins(%zero : f32) outs(%eb : tensor<{B}x{M}x{N}xf32>) -> tensor<{B}x{M}x{N}xf32>
  %y3 = linalg.batch_matmul ins(%p, %q : tensor<{B}x{M}x{K}xf32>, tensor<{B}x{K}x{N}xf32>) outs(%zb : tensor<{B}x{M}x{N}xf32>) -> tensor<{B}x{M}x{N}xf32>

  // f16(x) @ f16(w) in f16
  %xh = arith.truncf %x : tensor<{M}x{K}xf32> to tensor<{M}x{K}xf16>
  %wh = arith.truncf %w : tensor<{K}x{N}xf32> to tensor<{K}x{N}xf16>
  %zh0 = arith.constant 0.0 : f16
  %eh = tensor.empty() : tensor<{M}x{N}xf16>
  %zh = linalg.fill ins(%zh0 : f16) outs(%eh : tensor<{M}x{N}xf16>) -> tensor<{M}x{N}xf16>
  %y4 = linalg.matmul ins(%xh, %wh : tensor<{M}x{K}xf16>, tensor<{K}x{N}xf16>) outs(%zh : tensor<{M}x{N}xf16>) -> tensor<{M}x{N}xf16>

  // acc + x @ w (beta = 1)
  %y5 = linalg.matmul ins(%x, %w : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) outs(%acc : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>

  // x @ big[K:2K] (a chunk: offset rows of a larger buffer)
  %chunk = tensor.extract_slice %big[{K}, 0] [{K}, {N}] [1, 1] : tensor<{2 * K}x{N}xf32> to tensor<{K}x{N}xf32>
  %y6 = linalg.matmul ins(%x, %chunk : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>) outs(%z : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  return %y0, %y1, %y2, %y3, %y4, %y5, %y6 : tensor<{M}x{N}xf32>, tensor<{M}x{N}xf32>, tensor<{M}x{N}xf32>, tensor<{B}x{M}x{N}xf32>, tensor<{M}x{N}xf16>, tensor<{M}x{N}xf32>, tensor<{M}x{N}xf32>
}}
"""


def gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("ranks", type=int)
    parser.add_argument("work")
    parser.add_argument("--gemm", default="library")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    source = os.path.join(args.work, "gemms.mlir")
    with open(source, "w") as f:
        f.write(PROGRAM.replace("{ranks}", str(args.ranks)))
    lib = os.path.join(args.work, "gemms.so")
    compiled = subprocess.run(
        [os.path.join(args.bin, "braid-compile"), source, f"--gemm={args.gemm}",
         "-o", lib], capture_output=True, text=True)
    if compiled.returncode:
        sys.exit(f"FAIL: braid-compile:\n{compiled.stderr}")
    library = compiled.stderr.count("remark: runs on oneDNN")
    folded = [line for line in compiled.stderr.splitlines()
              if "runs on oneDNN" in line and "epilogue" in line]
    want = 7 if args.gemm == "library" else 0
    if library != want:
        sys.exit(f"FAIL: {library} products on oneDNN, expected {want}:\n"
                 f"{compiled.stderr}")
    if args.gemm == "library" and (
            len(folded) != 2 or "bias + GELU" not in folded[0] or
            "ReLU" not in folded[1]):
        sys.exit(f"FAIL: epilogues not folded as expected: {folded}")

    rng = np.random.default_rng(11)
    shapes = [(M, K), (K, N), (N, K), (N,), (B, M, K), (B, K, N), (M, N),
              (2 * K, N)]
    inputs = [rng.standard_normal(s).astype(np.float32) / np.sqrt(K)
              if i != 3 else rng.standard_normal(s).astype(np.float32)
              for i, s in enumerate(shapes)]
    paths = []
    for i, value in enumerate(inputs):
        path = os.path.join(args.work, f"in{i}.npy")
        np.save(path, value)
        paths.append(path)
    outs = [os.path.join(args.work, f"out{j}.{{rank}}.npy") for j in range(7)]
    cmd = (launch.mpirun(args.ranks, os.path.join(args.bin, "braid-exec"),
                         lib, "--timeout=60") +
           [f"--input=@{p}" for p in paths] + [f"--output=@{o}" for o in outs])
    ran = subprocess.run(cmd, capture_output=True, text=True)
    if ran.returncode:
        sys.exit(f"FAIL: braid-exec:\n{ran.stdout}{ran.stderr}")

    x, w, wt, bias, p, q, acc, big = [v.astype(np.float64) for v in inputs]
    bf = lambda v: quantize(v, "bf16")  # noqa: E731
    hf = lambda v: quantize(v, "f16")  # noqa: E731
    expected = [
        ("bias + GELU", gelu(x @ w + bias), 2e-5),
        ("bf16, ReLU", np.maximum(bf(x) @ bf(w), 0), 2e-5),
        ("B transposed", x @ wt.T, 2e-5),
        ("batched", p @ q, 2e-5),
        ("f16", hf(x) @ hf(w), 2e-3),
        ("accumulating", acc + x @ w, 2e-5),
        ("chunk of B", x @ big[K:], 2e-5),
    ]
    failed = False
    for rank in range(args.ranks):
        for j, (name, want_value, tolerance) in enumerate(expected):
            got = np.load(outs[j].replace("{rank}", str(rank))).astype(
                np.float64)
            scale = max(1.0, float(np.abs(want_value).max()))
            error = float(np.abs(got - want_value).max()) / scale
            if not error <= tolerance:
                failed = True
                print(f"FAIL rank {rank} {name}: max error {error:.3g} > "
                      f"{tolerance}")
            elif rank == 0:
                print(f"PASS {name} gemm={args.gemm} (max error {error:.2e})")
    sys.exit(1 if failed else 0)


main()
