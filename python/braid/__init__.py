"""Braid from Python: compile distributed MLIR programs, inspect what the
compiler did, and run them on CPU ranks.

    import braid
    artifact = braid.compile("examples/sp_mlp.mlir", overlap="auto")
    artifact.report          # the overlap decisions (parsed JSON)
    artifact.ir("xfer")      # the program after bufferization
    outputs = artifact.run(inputs)   # inputs[rank][argument] -> numpy

braid.models builds transformer blocks (MLP, attention, MoE) in upstream
`shard` form with numpy references.
"""
from . import models
from .compiler import (Artifact, BraidError, CompileError, Diagnostic,
                       RunError, TensorSpec, compile, options_model)

__all__ = ["compile", "Artifact", "BraidError", "CompileError", "RunError",
           "Diagnostic", "TensorSpec", "models", "options_model", "version"]


def version():
    """Braid's version and the LLVM it was built with."""
    from . import _capi
    return _capi.library().braidGetVersion().decode()
