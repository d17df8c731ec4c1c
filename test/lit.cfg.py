# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "BRAID"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lib", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.braid_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%braid_src", config.braid_src_root))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%braid_bin", config.braid_tools_dir))
config.substitutions.append(("%braid_obj", config.braid_obj_root))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
tool_dirs = [config.braid_tools_dir, config.llvm_tools_dir]
tools = ["braid-opt", "braid-lsp-server", "braid-compile"]
llvm_config.add_tool_substitutions(tools, tool_dirs)

if config.mpi_found in ("TRUE", "ON", "1"):
    config.available_features.add("mpi")
    # Every job gets an Open MPI session directory of its own (concurrent
    # lit workers shared lit's $TMPDIR, and one job's cleanup removed the
    # folder the other was creating its own in); see scripts/mpirun.sh.
    config.substitutions.append(
        ("%mpirun", os.path.join(config.braid_src_root, "scripts", "mpirun.sh")))
    config.substitutions.append(
        ("%braid_lib", os.path.join(config.braid_obj_root, "lib")))
    llvm_config.add_tool_substitutions(
        ["braid-exec", "braid-run", "braid-rt-selftest", "braid-capi-test",
         "braid-program-host"], tool_dirs)

# cuda: the toolkit is there, so the cuda target is built and its
# compile-only tests (cubins through ptxas) run. cuda-device: a GPU is
# visible too, so compiled programs can run.
if config.cuda_found in ("TRUE", "ON", "1"):
    config.available_features.add("cuda")
    config.substitutions.append(("%cuda_root", config.cuda_root))
    # The emulated device (lib/Emulator): its libraries first, for tools
    # that do not re-run themselves on it as braid-exec-cuda --emulate does
    # (REQUIRES: cuda, mpi: they are built with the cuda runtime).
    config.substitutions.append(
        ("%emulated", "env LD_LIBRARY_PATH=" +
         os.path.join(config.braid_obj_root, "lib", "emulator")))
    llvm_config.add_tool_substitutions(["braid-emulator-selftest"], tool_dirs)
    import shutil
    import subprocess
    smi = shutil.which("nvidia-smi")
    if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
        config.available_features.add("cuda-device")
