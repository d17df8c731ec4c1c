"""`pip install ./python` into a fresh environment: the package installs
offline from the checkout and finds libBraidCAPI.so through a braid-compile
on PATH, as python/README.md says."""
import os
import shutil
import subprocess
import sys

import pytest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(PYTHON_DIR)
BIN = os.path.join(ROOT, "build", "bin")

SCRIPT = """
import braid
from braid.models import MLP, Grid
assert braid.__file__.startswith(VENV), braid.__file__
block = MLP(Grid([2]), tokens=8, hidden=8, ffn=16, kind="llama", parallel="sp")
artifact = braid.compile(block.mlir(), overlap="force")
inputs = block.random_inputs(seed=0)
block.check(artifact.run(inputs), inputs)
print("installed braid ran")
"""


def _venv(tmp_path):
    venv = tmp_path / "venv"
    # System site packages: numpy and setuptools from Debian, so that the
    # install needs no network (--no-index --no-build-isolation).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                    str(venv)], check=True)
    return venv


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "braid-compile")),
                    reason="needs the build (build/bin/braid-compile)")
def test_pip_install_finds_the_library_through_path(tmp_path):
    # Install from a copy, so that the checkout gets no build/ or egg-info.
    source = tmp_path / "python"
    shutil.copytree(PYTHON_DIR, source,
                    ignore=shutil.ignore_patterns("tests", "__pycache__",
                                                  "build", "*.egg-info"))
    venv = _venv(tmp_path)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-index", "--no-build-isolation", str(source)],
                   check=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "BRAID_CAPI_LIBRARY")}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    run = subprocess.run([python, "-c", f"VENV = {str(venv)!r}\n" + SCRIPT],
                         env=env, cwd=str(tmp_path), capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert "installed braid ran" in run.stdout

    # torch.compile's backend="braid" is found through the entry point.
    run = subprocess.run(
        [python, "-c", "from importlib.metadata import entry_points; "
         "print([e.value for e in entry_points(group='torch_dynamo_backends') "
         "if e.name == 'braid'])"], env=env, cwd=str(tmp_path),
        capture_output=True, text=True)
    assert run.stdout.strip() == "['braid.torch_backend:backend']", run.stderr

    # Without braid-compile on PATH or BRAID_CAPI_LIBRARY: a clear error
    # that says what to do, not a ctypes traceback.
    env["PATH"] = "/usr/bin:/bin"
    run = subprocess.run([python, "-c", "import braid; braid.compile('module {}')"],
                         env=env, cwd=str(tmp_path), capture_output=True,
                         text=True)
    assert run.returncode != 0
    assert "cannot find libBraidCAPI.so" in run.stderr
    assert "BRAID_CAPI_LIBRARY" in run.stderr
