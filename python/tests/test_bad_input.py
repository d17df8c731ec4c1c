"""Bad arguments to braid.compile, Artifact and the model builder are
exceptions (TypeError for the wrong kind of value, ValueError for a value
out of range), raised before native code sees them: never a signal that
ends the host process (issue 34), and never silently wrong output."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import braid
from braid.models import MLP, Attention, Grid, MoE, Norm, Transformer
from test_compile import AG_MATMUL  # the all-gather + matmul program

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Integer and boolean arguments: an all-reduce of i32, an i1 passed through.
INTEGERS = """
shard.grid @g(shape = 2)
func.func @main(%x: tensor<4xi32>, %m: tensor<4xi1>) -> (tensor<4xi32>, tensor<4xi1>) {
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<4xi32> -> tensor<4xi32>
  return %r, %m : tensor<4xi32>, tensor<4xi1>
}
"""


@pytest.fixture(scope="module")
def ag_matmul():
    return braid.compile(AG_MATMUL)


@pytest.fixture(scope="module")
def integers():
    return braid.compile(INTEGERS)


def _inputs():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(2)]
    w = rng.standard_normal((16, 8)).astype(np.float32)
    return xs, w


# --- braid.compile and Artifact.ir -------------------------------------------

@pytest.mark.parametrize("source", [None, AG_MATMUL.encode(), 3, ["a"]])
def test_compile_source_of_the_wrong_type(source):
    with pytest.raises(TypeError, match="takes MLIR text or the path"):
        braid.compile(source)


def test_compile_name_and_option_values():
    with pytest.raises(TypeError, match="name must be a string"):
        braid.compile(AG_MATMUL, name=5)
    with pytest.raises(ValueError, match="'cuda-path' holds a NUL"):
        braid.compile(AG_MATMUL, cuda_path="/opt/cu\0da")
    # Numbers out of an int option's range, NaN and inf: located errors of
    # the options parser, not crashes.
    for key, value in [("vector_bytes", 10 ** 30), ("sub_chunks", float("inf")),
                       ("opt_level", float("nan")), ("sub_chunks", -1)]:
        with pytest.raises(braid.CompileError, match="expects an integer"):
            braid.compile(AG_MATMUL, **{key: value})


@pytest.mark.parametrize("stage", [["dist"], None, 3])
def test_ir_stage_of_the_wrong_type(ag_matmul, stage):
    with pytest.raises(ValueError, match="unknown stage"):
        ag_matmul.ir(stage)


# --- Artifact.run -------------------------------------------------------------

@pytest.mark.parametrize("ranks, error, message", [
    (0, ValueError, "ranks must be a positive integer, not 0"),
    (-1, ValueError, "ranks must be a positive integer, not -1"),
    (2.5, TypeError, "ranks must be an integer, not float"),
    (True, TypeError, "ranks must be an integer, not bool"),
    ("2", TypeError, "ranks must be an integer, not str"),
])
def test_run_bad_ranks(ag_matmul, ranks, error, message):
    xs, w = _inputs()
    with pytest.raises(error, match=message):
        ag_matmul.run([[xs[0], w], [xs[1], w]], ranks=ranks)


@pytest.mark.parametrize("timeout, error, message", [
    (float("nan"), ValueError, "timeout must be a positive number of seconds"),
    (0, ValueError, "timeout must be a positive number of seconds"),
    (-1.0, ValueError, "timeout must be a positive number of seconds"),
    (-float("inf"), ValueError, "timeout must be a positive number of seconds"),
    ("10", TypeError, "timeout must be a number of seconds, not str"),
    (True, TypeError, "timeout must be a number of seconds, not bool"),
])
def test_run_bad_timeout(ag_matmul, timeout, error, message):
    xs, w = _inputs()
    with pytest.raises(error, match=message):
        ag_matmul.run([[xs[0], w], [xs[1], w]], timeout=timeout)


@pytest.mark.parametrize("threads", [1.5, "2", True])
def test_run_threads_of_the_wrong_type(ag_matmul, threads):
    xs, w = _inputs()
    with pytest.raises(TypeError, match="threads must be an integer"):
        ag_matmul.run([[xs[0], w], [xs[1], w]], threads=threads)


@pytest.mark.parametrize("make, dtype", [
    (lambda x: x.astype(np.complex64), "complex64"),
    (lambda x: np.full(x.shape, "a"), "<U1"),
    (lambda x: np.full(x.shape, None), "object"),
])
def test_run_arrays_that_are_not_numbers(ag_matmul, make, dtype):
    """Complex values lost their imaginary part and None became NaN, in
    silence; strings and objects are refused as well."""
    xs, w = _inputs()
    with pytest.raises(ValueError, match=f"input 0 of rank 1 has dtype {dtype}"):
        ag_matmul.run([[xs[0], w], [make(xs[1]), w]])


def test_run_takes_any_layout_and_float_type(ag_matmul):
    """Non-contiguous, Fortran-order and float64 arrays arrive as the
    values they hold; an infinite timeout waits without limit."""
    xs, w = _inputs()
    strided = np.zeros((4, 32), np.float32)
    strided[:, ::2] = xs[0]
    inputs = [[strided[:, ::2], np.asfortranarray(w)],
              [xs[1].astype(np.float64), w.astype(np.float64)]]
    outputs = ag_matmul.run(inputs, timeout=float("inf"))
    expected = np.concatenate(xs) @ w
    for rank in range(2):
        np.testing.assert_allclose(outputs[rank][0], expected, rtol=1e-5,
                                   atol=1e-5)


@pytest.mark.parametrize("x, message", [
    (np.array([1.0, np.nan, 3.0, 4.0]), "holds NaN or infinite values; a i32"),
    (np.array([1.0, np.inf, 3.0, 4.0]), "holds NaN or infinite values; a i32"),
    (np.array([1.0, 2.5, 3.0, 4.0]), "holds fractions; a i32"),
    (np.array([1, 2, 3, 2 ** 40]), "holds values from 1 to 1099511627776; a i32"),
    (np.array([-2 ** 31 - 1, 0, 0, 0]),
     "holds values from -2147483649 to 0; a i32 argument holds -2147483648 to"),
    (np.array([0, 0, 0, 2 ** 64 - 1], np.uint64),
     "holds values from 0 to 18446744073709551615; a i32"),
])
def test_run_integer_arguments_refuse_values_they_cannot_hold(integers, x,
                                                              message):
    """These were wrapped or truncated into other numbers in silence."""
    mask = np.array([True, False, True, False])
    with pytest.raises(ValueError, match=f"input 0 of rank 0 {message}"):
        integers.run([[x, mask], [np.arange(4), mask]])


def test_run_integer_arguments_take_integral_floats(integers):
    outputs = integers.run([[np.array([1.0, 2.0, 3.0, 4.0]),
                             np.array([0.0, 1.0, 2.0, -1.0])],
                            [np.arange(4, dtype=np.int64),
                             np.array([1, 0, 0, 0], np.int8)]])
    np.testing.assert_array_equal(outputs[0][0], [1, 3, 5, 7])
    np.testing.assert_array_equal(outputs[0][1], [False, True, True, True])
    np.testing.assert_array_equal(outputs[1][1], [True, False, False, False])
    with pytest.raises(ValueError, match="NaN or infinite values; a i1"):
        integers.run([[np.arange(4), np.array([0.0, np.nan, 1.0, 1.0])],
                      [np.arange(4), np.ones(4)]])


# --- the model builder ----------------------------------------------------------

@pytest.mark.parametrize("build, error, message", [
    (lambda: Grid([0]), ValueError, r"bad grid shape \[0\]: each size must be a positive"),
    (lambda: Grid([2, -1]), ValueError, "bad grid shape"),
    (lambda: Grid([]), ValueError, "no axes"),
    (lambda: Grid([2.5]), TypeError, "each size must be an integer, not float"),
    (lambda: MLP(Grid([4]), tokens=0, hidden=32, ffn=128), ValueError,
     "tokens must be a positive integer, not 0"),
    (lambda: MLP(Grid([4]), tokens=64, hidden=0, ffn=128), ValueError,
     "hidden must be a positive integer, not 0"),
    (lambda: MLP(Grid([4]), tokens=64, hidden=32, ffn=0), ValueError,
     "ffn must be a positive integer, not 0"),
    (lambda: MLP(Grid([4]), tokens=-4, hidden=32, ffn=128), ValueError,
     "tokens must be a positive integer, not -4"),
    (lambda: MLP(Grid([4]), tokens=64.0, hidden=32, ffn=128), TypeError,
     "tokens must be an integer, not float"),
    (lambda: MLP(Grid([4]), tokens=64, hidden=32, ffn=128, axis=0.5),
     TypeError, "axis must be an integer"),
    (lambda: MLP(Grid([4]), tokens=2 ** 62, hidden=2 ** 62, ffn=128).mlir(),
     ValueError, "is too large"),
    (lambda: Attention(Grid([4]), tokens=64, hidden=32, heads=0), ValueError,
     "heads must be a positive integer, not 0"),
    (lambda: Attention(Grid([4]), tokens=64, hidden=32, heads=4, head_dim=0),
     ValueError, "head_dim must be a positive integer, not 0"),
    (lambda: Attention(Grid([4]), tokens=64, hidden=2, heads=4), ValueError,
     "hidden = 2 is smaller than heads = 4; give head_dim"),
    (lambda: MoE(Grid([4]), capacity=0, hidden=32, ffn=64), ValueError,
     "capacity must be a positive integer, not 0"),
    (lambda: MoE(Grid([4]), capacity=4, hidden=32, ffn=64,
                 experts_per_rank=0), ValueError,
     "experts_per_rank must be a positive integer, not 0"),
    (lambda: Transformer(Grid([4]), layers=0, tokens=64, hidden=32, heads=4,
                         ffn=128), ValueError,
     "layers must be a positive integer, not 0"),
    (lambda: Transformer(Grid([4]), layers=-1, tokens=64, hidden=32, heads=4,
                         ffn=128), ValueError,
     "layers must be a positive integer, not -1"),
    (lambda: Norm(Grid([4]), tokens=64, hidden=32, k=0), ValueError,
     "k must be a positive integer, not 0"),
    (lambda: Norm(Grid([4]), tokens=64, hidden=32, k=64, seed=-1), ValueError,
     r"seed must be in \[0, 2\*\*64\)"),
    (lambda: Norm(Grid([4]), tokens=64, hidden=32, k=64, seed=1.5), TypeError,
     "seed must be an integer"),
    (lambda: Norm(Grid([4]), tokens=64, hidden=32, k=64,
                  dropout=float("nan")), ValueError, r"dropout must be in \[0, 1\)"),
])
def test_model_builder_bad_sizes(build, error, message):
    """Zero sizes reached the compiler, which crashed on them (SIGFPE,
    SIGSEGV); negative ones and floats gave parse errors far from the
    cause; layers <= 0 built an empty model in silence."""
    with pytest.raises(error, match=message):
        build()


def test_model_builder_command_line_reports_bad_sizes():
    for args, message in [(["mlp", "--grid", "0"], "bad grid shape"),
                          (["mlp", "--tokens", "0"], "tokens must be a positive")]:
        result = subprocess.run(
            [sys.executable, "-m", "braid.models", *args], cwd=PYTHON_DIR,
            capture_output=True, text=True)
        assert result.returncode == 2, result
        assert message in result.stderr and "Traceback" not in result.stderr


def test_bad_calls_end_in_exceptions_not_signals():
    """The calls that once crashed, each in a child: the child must see an
    exception (exit 0 here) rather than die of a signal."""
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {PYTHON_DIR!r})
        import numpy as np
        import braid
        from braid.models import MLP, MoE, Grid
        calls = [
            lambda: braid.compile(MLP(Grid([4]), tokens=64, hidden=0,
                                      ffn=128).mlir()),
            lambda: braid.compile(MLP(Grid([4]), tokens=0, hidden=32, ffn=128,
                                      parallel="sp").mlir(), overlap="force"),
            lambda: braid.compile(MoE(Grid([4]), capacity=0, hidden=32,
                                      ffn=64).mlir(), overlap="force"),
            lambda: braid.compile(MLP(Grid([4]), tokens=2 ** 62,
                                      hidden=2 ** 62, ffn=128).mlir()),
        ]
        for call in calls:
            try:
                call()
            except (TypeError, ValueError) as error:
                print("raised:", error, flush=True)
            else:
                sys.exit("no exception")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.count("raised:") == 4, result.stdout


# --- the compiler itself ----------------------------------------------------------

# Programs that once crashed the compiler (issue 34): grids without ranks or
# with more than Braid compiles for are located errors.
EMPTY_GRID = """
shard.grid @g(shape = 0)
func.func @main(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = shard.sharding @g split_axes = [[0]] : !shard.sharding
  %y = shard.shard %x to %s : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
"""

REDUCE_ADD = """
shard.grid @g(shape = {grid})
func.func @main(%x: tensor<{shape}xf32>, %b: tensor<{shape}xf32>) -> tensor<{shape}xf32> {{
  %r = shard.all_reduce %x on @g grid_axes = [0] : tensor<{shape}xf32> -> tensor<{shape}xf32>
  %e = tensor.empty() : tensor<{shape}xf32>
  %y = linalg.add ins(%r, %b : tensor<{shape}xf32>, tensor<{shape}xf32>)
      outs(%e : tensor<{shape}xf32>) -> tensor<{shape}xf32>
  return %y : tensor<{shape}xf32>
}}
"""


@pytest.mark.parametrize("source, message", [
    (EMPTY_GRID, "2:1: error: 'shard.grid' op axis 0 has size 0; every grid "
                 "axis needs at least one rank"),
    (REDUCE_ADD.format(grid=2 ** 40, shape="64x32"),
     "2:1: error: 'shard.grid' op spans 1099511627776 ranks; Braid compiles "
     "for grids of at most 1048576 ranks"),
])
def test_compile_bad_grid(source, message):
    """SIGFPE in the import, and a put per peer until memory ran out."""
    with pytest.raises(braid.CompileError, match=re.escape(message)):
        braid.compile(source, name="grid.mlir")


@pytest.mark.parametrize("shape, options", [
    ("8x0", {}),                      # SIGFPE fusing the add (0-byte rows)
    ("0x16", {}),                     # 0-byte symmetric buffer at run time
    ("0x16", {"fuse_collectives": "force", "comm": "symmetric"}),
])
def test_zero_sized_tensors_compile_and_run(shape, options):
    rows, cols = (int(d) for d in shape.split("x"))
    artifact = braid.compile(REDUCE_ADD.format(grid=2, shape=shape),
                             overlap="force", **options)
    x = np.zeros((rows, cols), np.float32)
    outputs = artifact.run([[x, x], [x, x]])
    assert [o[0].shape for o in outputs] == [(rows, cols)] * 2


def test_zero_sized_gather_into_matmul_compiles_and_runs():
    """SIGSEGV in the ring decomposition (linalg::computeTileSizes)."""
    source = AG_MATMUL.replace("4x16xf32", "0x16xf32").replace(
        "8x16xf32", "0x16xf32").replace("8x8xf32", "0x8xf32")
    artifact = braid.compile(source, overlap="force")
    x, w = np.zeros((0, 16), np.float32), np.ones((16, 8), np.float32)
    outputs = artifact.run([[x, w], [x, w]])
    assert [o[0].shape for o in outputs] == [(0, 8)] * 2


def test_compiler_crash_is_an_exception():
    """A crash inside the compiler (forced by the C API's test-only hook,
    BRAID_CAPI_TEST_CRASH) is a CompileError; the process lives on and
    compiles again. In a child, so that a regression ends only the child."""
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {PYTHON_DIR!r})
        import braid
        source = {AG_MATMUL!r}
        for kind in ["segv", "fpe", "abort", "fatal"]:
            os.environ["BRAID_CAPI_TEST_CRASH"] = kind
            try:
                braid.compile(source, name="crash.mlir")
            except braid.CompileError as error:
                print("raised:", str(error).splitlines()[-1], flush=True)
            else:
                sys.exit("no exception for " + kind)
        del os.environ["BRAID_CAPI_TEST_CRASH"]
        print("ranks after:", braid.compile(source).ranks)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    lines = result.stdout.splitlines()
    assert lines == [
        "raised: error: internal compiler error: braidCompileSource crashed "
        "(signal 11, Segmentation fault) while compiling 'crash.mlir'; "
        "please report it",
        "raised: error: internal compiler error: braidCompileSource crashed "
        "(signal 8, Floating point exception) while compiling 'crash.mlir'; "
        "please report it",
        "raised: error: internal compiler error: braidCompileSource crashed "
        "(signal 6, Aborted) while compiling 'crash.mlir'; please report it",
        "raised: error: internal compiler error: braidCompileSource stopped "
        "on a fatal error (BRAID_CAPI_TEST_CRASH=fatal) while compiling "
        "'crash.mlir'; please report it",
        "ranks after: 2"], result.stdout
