"""ctypes bindings of libBraidCAPI.so (include/braid-c/Braid.h).

Only what the package uses: compiling source text and running artifacts.
The library is found, in order, at $BRAID_CAPI_LIBRARY, in the build tree
next to this package (build/lib, when the package is used from its
checkout), where it is installed (../../lib from the package, for a
--prefix install that put the package in PREFIX/python), or at ../lib of a
braid-compile on PATH (what `pip install ./python` relies on).
"""
import ctypes
import os
import shutil

_HERE = os.path.dirname(os.path.abspath(__file__))


class MlirStringRef(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]

    @classmethod
    def of(cls, text):
        data = text.encode() if isinstance(text, str) else bytes(text)
        ref = cls(ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), len(data))
        ref._keep = data  # the bytes must outlive the call
        return ref

    def text(self):
        return ctypes.string_at(self.data, self.length).decode(errors="replace")


class MlirLogicalResult(ctypes.Structure):
    _fields_ = [("value", ctypes.c_int8)]


StringCallback = ctypes.CFUNCTYPE(None, MlirStringRef, ctypes.c_void_p)


class BraidCallbacks(ctypes.Structure):
    _fields_ = [("output", StringCallback), ("report", StringCallback),
                ("diagnostic", StringCallback), ("userData", ctypes.c_void_p)]


class BraidTensorType(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_char_p), ("elementSize", ctypes.c_int64),
                ("rank", ctypes.c_ssize_t),
                ("shape", ctypes.POINTER(ctypes.c_int64))]


def _candidates():
    env = os.environ.get("BRAID_CAPI_LIBRARY")
    if env:
        yield env
    root = os.path.dirname(os.path.dirname(_HERE))
    yield os.path.join(root, "build", "lib", "libBraidCAPI.so")
    yield os.path.join(os.path.dirname(os.path.dirname(_HERE)), "lib",
                       "libBraidCAPI.so")
    compiler = shutil.which("braid-compile")
    if compiler:
        yield os.path.join(os.path.dirname(os.path.dirname(
            os.path.realpath(compiler))), "lib", "libBraidCAPI.so")


_lib = None


def library():
    """Loads libBraidCAPI.so once and declares the functions used."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for path in _candidates():
        tried.append(path)
        if os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        raise ImportError(
            "cannot find libBraidCAPI.so (build Braid with scripts/test.sh "
            "or scripts/demo.sh, then set BRAID_CAPI_LIBRARY or put its "
            "build/bin on PATH); tried: "
            + ", ".join(tried))
    lib.braidGetVersion.restype = ctypes.c_char_p
    lib.braidGetVersion.argtypes = []
    lib.braidGetOptions.restype = ctypes.c_char_p
    lib.braidGetOptions.argtypes = []
    lib.braidCompileSource.restype = MlirLogicalResult
    lib.braidCompileSource.argtypes = [MlirStringRef] * 4 + [
        ctypes.POINTER(BraidCallbacks)]
    lib.braidArtifactLoad.restype = ctypes.c_void_p
    lib.braidArtifactLoad.argtypes = [MlirStringRef,
                                      ctypes.POINTER(BraidCallbacks)]
    lib.braidArtifactDestroy.restype = None
    lib.braidArtifactDestroy.argtypes = [ctypes.c_void_p]
    lib.braidArtifactGetNumRanks.restype = ctypes.c_int64
    lib.braidArtifactGetNumRanks.argtypes = [ctypes.c_void_p]
    for name in ("braidArtifactGetNumArguments", "braidArtifactGetNumResults"):
        getattr(lib, name).restype = ctypes.c_ssize_t
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    for name in ("braidArtifactGetArgumentType", "braidArtifactGetResultType"):
        getattr(lib, name).restype = BraidTensorType
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
    lib.braidArtifactRun.restype = MlirLogicalResult
    lib.braidArtifactRun.argtypes = [
        ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_void_p), MlirStringRef,
        ctypes.POINTER(BraidCallbacks)]
    _lib = lib
    return lib


class Collector:
    """BraidCallbacks that append what arrives to Python lists."""

    def __init__(self):
        self.output, self.report, self.diagnostics = [], [], []

        def sink(target):
            return StringCallback(lambda ref, _: target.append(ref.text()))
        # Keep the callback objects alive as long as the structure.
        self._callbacks = (sink(self.output), sink(self.report),
                           sink(self.diagnostics))
        self.struct = BraidCallbacks(*self._callbacks, None)

    def pointer(self):
        return ctypes.byref(self.struct)
