"""A per-weight tensor-parallel plan (braid.parallel attributes) on a
global-view MLP: partitioned by Braid, run on 2 and 4 CPU ranks, checked
against numpy. The same path the PyTorch front door takes, without torch."""
import numpy as np
import pytest

import braid

# Torch's layout: weights [out, in], used through linalg.transpose; ReLU.
TEMPLATE = """
shard.grid @g(shape = {ranks})
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @mlp(%x: tensor<{t}x{h}xf32> {{braid.parallel = "{layout}"}},
               %up: tensor<{f}x{h}xf32> {{braid.parallel = "colwise"}},
               %b_up: tensor<{f}xf32> {{braid.parallel = "colwise"}},
               %down: tensor<{h}x{f}xf32> {{braid.parallel = "rowwise"}},
               %b_down: tensor<{h}xf32> {{braid.parallel = "replicate"}})
    -> (tensor<{t}x{h}xf32> {{braid.parallel = "{layout}"}}) {{
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<{h}x{f}xf32>
  %upt = linalg.transpose ins(%up : tensor<{f}x{h}xf32>) outs(%e0 : tensor<{h}x{f}xf32>) permutation = [1, 0]
  %e1 = tensor.empty() : tensor<{t}x{f}xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<{t}x{f}xf32>) -> tensor<{t}x{f}xf32>
  %h = linalg.matmul ins(%x, %upt : tensor<{t}x{h}xf32>, tensor<{h}x{f}xf32>) outs(%f1 : tensor<{t}x{f}xf32>) -> tensor<{t}x{f}xf32>
  %a = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%h, %b_up : tensor<{t}x{f}xf32>, tensor<{f}xf32>) outs(%e1 : tensor<{t}x{f}xf32>) {{
  ^bb0(%v: f32, %c: f32, %o: f32):
    %s = arith.addf %v, %c : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  }} -> tensor<{t}x{f}xf32>
  %e2 = tensor.empty() : tensor<{f}x{h}xf32>
  %downt = linalg.transpose ins(%down : tensor<{h}x{f}xf32>) outs(%e2 : tensor<{f}x{h}xf32>) permutation = [1, 0]
  %e3 = tensor.empty() : tensor<{t}x{h}xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<{t}x{h}xf32>) -> tensor<{t}x{h}xf32>
  %y = linalg.matmul ins(%a, %downt : tensor<{t}x{f}xf32>, tensor<{f}x{h}xf32>) outs(%f3 : tensor<{t}x{h}xf32>) -> tensor<{t}x{h}xf32>
  %o = linalg.generic {{indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}}
      ins(%y, %b_down : tensor<{t}x{h}xf32>, tensor<{h}xf32>) outs(%e3 : tensor<{t}x{h}xf32>) {{
  ^bb0(%v: f32, %c: f32, %q: f32):
    %s = arith.addf %v, %c : f32
    linalg.yield %s : f32
  }} -> tensor<{t}x{h}xf32>
  return %o : tensor<{t}x{h}xf32>
}}
"""


@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("layout", ["replicate", "sequence"])
@pytest.mark.parametrize("overlap", ["force", "off"])
def test_global_view_plan(ranks, layout, overlap):
    t, h, f = 16, 16, 32
    artifact = braid.compile(
        TEMPLATE.format(ranks=ranks, layout=layout, t=t, h=h, f=f),
        overlap=overlap, check_schedule=True)
    rng = np.random.default_rng(ranks)
    x = rng.standard_normal((t, h)).astype(np.float32)
    up = (rng.standard_normal((f, h)) / 4).astype(np.float32)
    b_up = rng.standard_normal(f).astype(np.float32)
    down = (rng.standard_normal((h, f)) / 6).astype(np.float32)
    b_down = rng.standard_normal(h).astype(np.float32)
    expected = np.maximum(x @ up.T + b_up, 0) @ down.T + b_down

    # Per rank: weights split as the plan says, x and the result by layout.
    shapes = [a.shape for a in artifact.arguments]
    assert shapes[1] == (f // ranks, h) and shapes[3] == (h, f // ranks)
    assert shapes[2] == (f // ranks,) and shapes[4] == (h,)
    inputs = []
    for r in range(ranks):
        xr = np.split(x, ranks)[r] if layout == "sequence" else x
        inputs.append([xr, np.split(up, ranks)[r], np.split(b_up, ranks)[r],
                       np.split(down, ranks, axis=1)[r], b_down])
    outputs = artifact.run(inputs)
    for r in range(ranks):
        want = np.split(expected, ranks)[r] if layout == "sequence" else expected
        np.testing.assert_allclose(outputs[r][0], want, rtol=1e-4, atol=1e-4)

    kinds = sorted(c["kind"] for c in artifact.report["collectives"])
    assert kinds == (["all_gather", "reduce_scatter"] if layout == "sequence"
                     else ["all_reduce"])
