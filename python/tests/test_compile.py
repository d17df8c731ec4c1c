"""braid.compile, Artifact and the errors they raise."""
import os

import numpy as np
import pytest

import braid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SP_MLP = os.path.join(ROOT, "examples", "sp_mlp.mlir")

AG_MATMUL = """
shard.grid @g(shape = 2)
func.func @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<8x8xf32> {
  %all = shard.all_gather %x on @g grid_axes = [0] gather_axis = 0
      : tensor<4x16xf32> -> tensor<8x16xf32>
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8x8xf32>
  %init = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = linalg.matmul ins(%all, %w : tensor<8x16xf32>, tensor<16x8xf32>)
      outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
"""


def test_version():
    assert braid.version().startswith("Braid ")


def test_compile_file_report_and_stages():
    artifact = braid.compile(SP_MLP, overlap="force", target_preset="h100")
    assert artifact.ranks == 4
    assert [a.dtype for a in artifact.arguments] == ["bf16", "bf16", "f32", "bf16"]
    assert artifact.arguments[0].shape == (256, 512)
    report = artifact.report
    assert report["mode"] == "force" and report["target_preset"] == "h100"
    kinds = {c["kind"]: c["decision"] for c in report["collectives"]}
    assert kinds == {"all_gather": "fused", "reduce_scatter": "fused"}
    assert "dist.all_gather" not in artifact.ir("dist")
    assert "dist.shift_start" in artifact.ir("dist")
    assert "xfer.send" in artifact.ir("xfer")
    assert "llvm.func @braid_entry" in artifact.ir("llvm")
    assert "define void @braid_entry" in artifact.ir("llvm-ir")
    with pytest.raises(braid.BraidError, match="target='cuda'"):
        artifact.ir("ptx")
    with pytest.raises(ValueError, match="unknown stage"):
        artifact.ir("asm")


def test_run_matches_numpy_on_two_ranks():
    artifact = braid.compile(AG_MATMUL, overlap="force", check_schedule=True)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2)]
    w = rng.standard_normal((16, 8)).astype(np.float32)
    outputs = artifact.run([[xs[0], w], [xs[1], w]])
    expected = np.concatenate(xs) @ w
    assert len(outputs) == 2 and len(outputs[0]) == 1
    for rank in range(2):
        np.testing.assert_allclose(outputs[rank][0], expected, rtol=1e-5, atol=1e-5)


# A partial sum over tokens into an init chosen per rank (partitioning's
# scf.if: the init on one rank, zeros on the others), all-reduced: the
# norm weight's gradient of a sequence-parallel training step.
PARTIAL_SUM = """
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last = affine_map<(d0, d1, d2) -> (d2)>
module {
  shard.grid @g(shape = 2)
  func.func @main(%a: tensor<8x64xf32> {dist.placement = #dist.placement<@g, [shard<0>]>},
                  %b: tensor<1x8x64xf32> {dist.placement = #dist.placement<@g, [shard<1>]>})
      -> (tensor<64xf32> {dist.placement = #dist.placement<@g, [replicate]>}) {
    %zero = arith.constant 0.0 : f32
    %c0 = arith.constant 0 : index
    %rank = shard.process_linear_index on @g : index
    %first = arith.cmpi eq, %rank, %c0 : index
    %a3 = tensor.expand_shape %a [[0, 1], [2]] output_shape [1, 8, 64] : tensor<8x64xf32> into tensor<1x8x64xf32>
    %e = tensor.empty() : tensor<1x8x64xf32>
    %p = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
        ins(%a3, %b : tensor<1x8x64xf32>, tensor<1x8x64xf32>) outs(%e : tensor<1x8x64xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %m = arith.mulf %x, %y : f32
      linalg.yield %m : f32
    } -> tensor<1x8x64xf32>
    %e1 = tensor.empty() : tensor<1x1x64xf32>
    %c1 = tensor.collapse_shape %e1 [[0, 1, 2]] : tensor<1x1x64xf32> into tensor<64xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%c1 : tensor<64xf32>) -> tensor<64xf32>
    %init = scf.if %first -> (tensor<64xf32>) {
      scf.yield %f1 : tensor<64xf32>
    } else {
      %e2 = tensor.empty() : tensor<64xf32>
      %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64xf32>) -> tensor<64xf32>
      scf.yield %f2 : tensor<64xf32>
    }
    %s = linalg.generic {indexing_maps = [#id, #last], iterator_types = ["reduction", "reduction", "parallel"]}
        ins(%p : tensor<1x8x64xf32>) outs(%init : tensor<64xf32>) {
    ^bb0(%x: f32, %o: f32):
      %r = arith.addf %x, %o : f32
      linalg.yield %r : f32
    } -> tensor<64xf32>
    %sum = dist.all_reduce %s on @g axes = [0] reduce = sum : tensor<64xf32> -> tensor<64xf32>
    return %sum : tensor<64xf32>
  }
}
"""


@pytest.mark.parametrize("overlap", ["force", "auto", "off"])
def test_buffers_a_yield_carries_stay_off_the_arena(overlap, tmp_path):
    """The memory plan leaves to the heap what a yield or a return carries
    out (through braid.compile, whose library links MLIR's shared library,
    it once took every such buffer into the arena: the ring all-reduce of
    this program then read another buffer's bytes as its init), and the
    C API plans as braid-compile does."""
    import json
    import subprocess
    artifact = braid.compile(PARTIAL_SUM, overlap=overlap)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((1, 16, 64)).astype(np.float32)
    outputs = artifact.run([[a[8 * r:8 * r + 8], b[:, 8 * r:8 * r + 8]]
                            for r in range(2)])
    expected = (a[None] * b).sum(axis=(0, 1))
    for rank in range(2):
        np.testing.assert_allclose(outputs[rank][0], expected, rtol=1e-5,
                                   atol=1e-5)
    memory = artifact.report["memory"]
    assert memory and memory[0]["heap_bytes"] > 0, memory
    compiler = os.path.join(ROOT, "build", "bin", "braid-compile")
    if os.path.exists(compiler):
        source = tmp_path / "partial_sum.mlir"
        source.write_text(PARTIAL_SUM)
        report = tmp_path / "report.json"
        subprocess.run([compiler, str(source), f"--overlap={overlap}",
                        f"--report={report}", "-o", str(tmp_path / "p.so")],
                       check=True, capture_output=True)
        assert json.loads(report.read_text())["memory"] == memory


@pytest.mark.parametrize("example", ["sp_mlp.mlir",
                                     "llama3_70b_layer_tp8.mlir"])
def test_library_compiles_as_braid_compile_does(example, tmp_path):
    """braid.compile (the C API, whose library links MLIR's shared
    library) and braid-compile (linked statically) give the same report:
    the same decisions, memory plan and options. They once disagreed on
    the memory plan, because an upstream trait query answered differently
    across the library boundary."""
    import json
    import subprocess
    compiler = os.path.join(ROOT, "build", "bin", "braid-compile")
    if not os.path.exists(compiler):
        pytest.skip("needs the build (build/bin/braid-compile)")
    path = os.path.join(ROOT, "examples", example)
    artifact = braid.compile(path, overlap="force")
    report = tmp_path / "report.json"
    subprocess.run([compiler, path, "--overlap=force", f"--report={report}",
                    "-o", str(tmp_path / "p.so")], check=True,
                   capture_output=True)
    cli = json.loads(report.read_text())
    assert cli.get("memory") and artifact.report.get("memory")
    for key in ("collectives", "memory", "options"):
        assert artifact.report.get(key) == cli.get(key), key


def test_run_profile_is_the_kernel_table():
    """run(profile=True) leaves braid-run's per-kernel table in
    artifact.profile: the ring's GEMM chunks as one row with their calls,
    rate and source line, then the time outside kernels and waiting."""
    artifact = braid.compile(AG_MATMUL, overlap="force", name="ag.mlir")
    assert artifact.profile is None
    x, w = np.ones((4, 16), np.float32), np.ones((16, 8), np.float32)
    outputs = artifact.run([[x, w], [x, w]], profile=True)
    np.testing.assert_array_equal(outputs[0][0], np.full((8, 8), 16.0))
    lines = artifact.profile.splitlines()
    assert lines[0].startswith("profile of the traced run: 2 ranks"), lines
    assert lines[1].split() == ["calls", "total", "ms", "%", "run", "rate", "kernel"]
    gemm = [line for line in lines if " gemm 4x8x16 f32 at ag.mlir:" in line]
    assert len(gemm) == 1 and gemm[0].split()[0] == "2", lines
    assert any("(waiting for transfers)" in line for line in lines), lines
    artifact.run([[x, w], [x, w]])
    with pytest.raises(TypeError, match="profile must be True or False"):
        artifact.run([[x, w], [x, w]], profile="yes")


def test_comm_symmetric_runs_and_reports_its_transport():
    artifact = braid.compile(AG_MATMUL, overlap="force", comm="symmetric",
                             check_schedule=True)
    [record] = artifact.report["collectives"]
    assert record["strategy"] == "ring_ag_matmul"
    assert record["transport"] == "symmetric"
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2)]
    w = rng.standard_normal((16, 8)).astype(np.float32)
    outputs = artifact.run([[xs[0], w], [xs[1], w]])
    expected = np.concatenate(xs) @ w
    for rank in range(2):
        np.testing.assert_allclose(outputs[rank][0], expected, rtol=1e-5, atol=1e-5)
    two_sided = braid.compile(AG_MATMUL, overlap="force", comm="two-sided")
    assert two_sided.report["collectives"][0]["transport"] == "two-sided"
    # cuda: auto keeps two-sided (no measured one-sided link in the preset);
    # symmetric compiles the same schedule with puts and flags.
    cuda_auto = braid.compile(AG_MATMUL, target="cuda", overlap="force")
    record = cuda_auto.report["collectives"][0]
    assert record["transport"] == "two-sided", record
    assert "no measured one-sided link" in record["reason"], record
    cuda_sym = braid.compile(AG_MATMUL, target="cuda", overlap="force", comm="symmetric")
    assert cuda_sym.report["collectives"][0]["transport"] == "symmetric"


def test_program_errors_carry_locations():
    bad = AG_MATMUL.replace("shape = 2", "shape = 3")
    with pytest.raises(braid.CompileError) as info:
        braid.compile(bad)
    errors = [d for d in info.value.diagnostics if d.severity == "error"]
    assert errors, info.value.diagnostics
    first = errors[0]
    assert first.file == "<string>" and first.line == 4 and first.column == 10
    assert "Dimension size mismatch" in first.message
    assert "<string>:4:10: error:" in str(info.value)


def test_option_errors():
    with pytest.raises(braid.CompileError, match="option 'overlap' expects auto, force or off, got 'sometimes'"):
        braid.compile(AG_MATMUL, overlap="sometimes")
    with pytest.raises(TypeError, match="unknown option 'overlapp'"):
        braid.compile(AG_MATMUL, overlapp="force")
    with pytest.raises(FileNotFoundError):
        braid.compile("no/such/file.mlir")


def test_run_argument_errors():
    artifact = braid.compile(AG_MATMUL)
    x, w = np.zeros((4, 16), np.float32), np.zeros((16, 8), np.float32)
    with pytest.raises(ValueError, match="one list per rank"):
        artifact.run([[x, w]])
    with pytest.raises(ValueError, match="expected \\(4, 16\\)"):
        artifact.run([[w, w], [x, w]])
    with pytest.raises(ValueError, match="takes 2"):
        artifact.run([[x], [x]])


def test_remarks_are_diagnostics():
    artifact = braid.compile(AG_MATMUL, overlap="force")
    assert any(d.severity == "remark" and "ring_ag_matmul" in d.message
               for d in artifact.remarks)


def _cuda_built():
    try:
        braid.compile(AG_MATMUL, target="cuda").ir("ptx")
    except braid.CompileError as error:
        if "needs a CUDA toolkit" in str(error.diagnostics):
            return False
        raise
    return True


# AG_MATMUL with an exp after the product: a kernel (the ring's GEMMs and
# their fills all run on cuBLASLt).
AG_MATMUL_EXP = AG_MATMUL.replace("""  return %y : tensor<8x8xf32>""", """\
  %e = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%y : tensor<8x8xf32>) outs(%empty : tensor<8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<8x8xf32>
  return %e : tensor<8x8xf32>""")


def test_cuda_target_ptx_and_emulated_run():
    """target="cuda": the kernels' PTX for the chosen architecture, cuBLASLt
    remarks for the contractions; compiled with emulate=True, Artifact.run
    runs it on the emulated device and computes what the cpu target does;
    a cubin cannot be emulated, nor a cpu artifact."""
    if not _cuda_built():
        pytest.skip("this Braid was configured without the CUDA toolkit")
    artifact = braid.compile(AG_MATMUL_EXP, target="cuda", sm="80",
                             overlap="force")
    ptx = artifact.ir("ptx")
    assert ".target sm_80" in ptx and ".entry" in ptx
    assert any("runs on cuBLASLt" in r.message for r in artifact.remarks)
    rng = np.random.default_rng(3)
    inputs = [[rng.standard_normal((4, 16)).astype(np.float32),
               rng.standard_normal((16, 8)).astype(np.float32)]
              for _ in range(2)]
    with pytest.raises(braid.RunError) as info:
        artifact.run(inputs, emulate=True)
    assert "runs PTX" in str(info.value), \
        info.value.diagnostics
    emulated = braid.compile(AG_MATMUL_EXP, target="cuda", overlap="force",
                             emulate=True)
    cpu = braid.compile(AG_MATMUL_EXP, overlap="force")
    got, want = emulated.run(inputs), cpu.run(inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g[0], w[0], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="emulate runs target='cuda'"):
        cpu.run(inputs, emulate=True)
    with pytest.raises(braid.CompileError, match="unknown GPU architecture"):
        braid.compile(AG_MATMUL, target="cuda", sm="banana")
    with pytest.raises(braid.CompileError, match="emulate runs kernels"):
        braid.compile(AG_MATMUL, target="cuda", emulate=True, gpu_format="bin")


F64_TO_BF16 = """
func.func @main(%x: tensor<8xf64>) -> tensor<8xbf16> {
  %e = tensor.empty() : tensor<8xbf16>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<8xf64>) outs(%e : tensor<8xbf16>) {
  ^bb0(%a: f64, %o: bf16):
    %t = arith.truncf %a : f64 to bf16
    linalg.yield %t : bf16
  } -> tensor<8xbf16>
  return %y : tensor<8xbf16>
}
"""


def test_f64_to_bf16_rounds_once():
    """f64 to bf16 in generated code (braid-round-wide-to-bf16): no libgcc
    helper (the library loads), and each value is rounded once, to
    nearest even, also just above and below ties, where rounding through
    the nearest f32 first would land on the tie and round to even."""
    import math
    tie = 1 + 2**-8
    x = np.array([tie + 2**-40, -(tie + 2**-40), tie - 2**-40,
                  1 + 3 * 2**-8 + 2**-40, 1 + 3 * 2**-8, 3.14159265358979,
                  -2.5e-3, 1e30], dtype=np.float64)

    def bf16(v):
        m, e = math.frexp(v)
        return round(m * 256) * 2.0**(e - 8)

    artifact = braid.compile(F64_TO_BF16)
    got = artifact.run([[x]])[0][0].astype(np.float64)
    assert list(got) == [bf16(v) for v in x]
