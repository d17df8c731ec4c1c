"""braid.compile and Artifact: Braid's compiler and runner from Python."""
import ctypes
import json
import numbers
import operator
import os
import re
import shutil
import tempfile
import weakref

import numpy as np

from . import _capi
from .dtypes import from_storage, numpy_storage_dtype, to_storage

__all__ = ["compile", "Artifact", "BraidError", "CompileError", "RunError",
           "Diagnostic", "TensorSpec", "options_model"]

# Text stages Artifact.ir accepts, and braid-compile's name for each.
_STAGES = {"dist": "dist", "xfer": "xfer", "llvm": "llvm-mlir",
           "llvm-mlir": "llvm-mlir", "llvm-ir": "llvm-ir", "ptx": "ptx"}

# Keyword options whose name is not the flag's with "-" as "_".
_ALIASES = {"opt_level": "O"}


def options_model():
    """Every Braid option as the options model describes it (a list of
    dicts: flag, field, kind, default, help, stages, scopes, values, min,
    max), from the C API (braidGetOptions)."""
    global _MODEL
    if _MODEL is None:
        _MODEL = json.loads(_capi.library().braidGetOptions().decode())
    return _MODEL


_MODEL = None


def _keyword(flag):
    for key, value in _ALIASES.items():
        if value == flag:
            return key
    return flag.replace("-", "_")


def _compile_options():
    """{keyword: option} for the options braid.compile takes (target is its
    own argument; emit is Artifact.ir's)."""
    return {_keyword(o["flag"]): o for o in options_model()
            if "compile" in o["scopes"] and o["flag"] not in ("target", "emit")}


def _run_options():
    return {_keyword(o["flag"]): o for o in options_model()
            if "run" in o["scopes"]}


def quote(value):
    """`value` as one option word: as it is, or in double quotes with " and
    \\ escaped when it holds spaces or quotes (the C API's rule)."""
    value = str(value)
    if value and not any(c.isspace() or c in "\"'\\" for c in value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _word(flag, value):
    if isinstance(value, bool):
        value = "true" if value else "false"
    if "\0" in str(value):
        raise ValueError(f"option {flag!r} holds a NUL character: {value!r}")
    return f"{flag}={quote(value)}"


def integer(value, what):
    """`value` as an int: TypeError, naming the argument `what`, for what
    is not an integer (a bool, a float, a string)."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what} must be an integer, not "
                    f"{type(value).__name__} {value!r}")


def positive_int(value, what):
    """`value` as an int >= 1 (ValueError below, TypeError for what is not
    an integer); `what` names the argument."""
    value = integer(value, what)
    if value < 1:
        raise ValueError(f"{what} must be a positive integer, not {value}")
    return value


_DIAGNOSTIC = re.compile(
    r"^(?:(?P<file>.*?):(?P<line>\d+):(?P<col>\d+): )?"
    r"(?P<severity>error|warning|note|remark): (?P<message>.*)$", re.S)


class Diagnostic:
    """One diagnostic of the compiler: severity, message and location
    (file, line, column; None when it has none), with its notes."""

    def __init__(self, text):
        self.text = text
        first, *rest = text.split("\n")
        match = _DIAGNOSTIC.match(first)
        self.file = self.line = self.column = None
        self.severity, self.message = "error", first
        if match:
            self.severity, self.message = match["severity"], match["message"]
            if match["file"] is not None:
                self.file = match["file"]
                self.line, self.column = int(match["line"]), int(match["col"])
        self.notes = [Diagnostic(note) for note in rest]

    def __repr__(self):
        return f"Diagnostic({self.text!r})"

    def __str__(self):
        return self.text


class BraidError(Exception):
    """A failure of the compiler or the runner. `diagnostics` holds every
    diagnostic (a list of Diagnostic); str() shows the errors."""

    def __init__(self, summary, diagnostics=()):
        self.diagnostics = [d if isinstance(d, Diagnostic) else Diagnostic(d)
                            for d in diagnostics]
        shown = [d.text for d in self.diagnostics if d.severity == "error"]
        super().__init__("\n".join([summary] + shown) if shown else summary)


class CompileError(BraidError):
    pass


class RunError(BraidError):
    pass


class TensorSpec:
    """An argument or result of the entry point as each rank sees it."""

    def __init__(self, dtype, shape):
        self.dtype, self.shape = dtype, tuple(shape)

    def __repr__(self):
        return f"TensorSpec({self.dtype!r}, {self.shape})"

    def __eq__(self, other):
        return (isinstance(other, TensorSpec) and
                (self.dtype, self.shape) == (other.dtype, other.shape))


def _read_source(text_or_path):
    if not isinstance(text_or_path, (str, os.PathLike)):
        raise TypeError("braid.compile() takes MLIR text or the path of a "
                        f"file, not {type(text_or_path).__name__}")
    if isinstance(text_or_path, os.PathLike) or (
            isinstance(text_or_path, str) and "\n" not in text_or_path
            and "{" not in text_or_path):
        path = os.fspath(text_or_path)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such MLIR file: {path}")
        with open(path) as f:
            return f.read(), path
    return str(text_or_path), "<string>"


def _option_words(target, options):
    known = _compile_options()
    words = [_word("target", target)]
    for key, value in options.items():
        if key not in known:
            raise TypeError(f"braid.compile() got an unknown option {key!r}; "
                            f"expected one of {', '.join(sorted(known))}")
        if value is not None:
            words.append(_word(known[key]["flag"], value))
    return " ".join(words)


def _compile(source, name, words, output_path=""):
    lib = _capi.library()
    sink = _capi.Collector()
    result = lib.braidCompileSource(
        _capi.MlirStringRef.of(source), _capi.MlirStringRef.of(name),
        _capi.MlirStringRef.of(words), _capi.MlirStringRef.of(output_path),
        sink.pointer())
    diagnostics = [Diagnostic(d) for d in sink.diagnostics]
    if not result.value:
        raise CompileError(f"braid.compile failed for {name}", diagnostics)
    return sink, diagnostics


def compile(text_or_path, target="cpu", name=None, **options):
    """Compiles an MLIR program (text, or the path of a .mlir file) in
    upstream `shard` form, or already in Braid's `dist` dialect, into a
    runnable Artifact.

    `target` is "cpu" or "cuda"; `name` names text in diagnostics (default
    "<string>"; a path names itself); the other keyword options are
    braid-compile's flags with "_" for "-" (opt_level is -O), listed below
    from the options model. Raises CompileError, carrying the located
    diagnostics, when the program or an option is wrong.
    """
    source, read_name = _read_source(text_or_path)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a string, not {type(name).__name__}")
    name = name or read_name
    words = _option_words(target, options)
    directory = tempfile.mkdtemp(prefix="braid-")
    path = os.path.join(directory, "program.so")
    try:
        sink, diagnostics = _compile(source, name, words, path)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    report = json.loads(sink.report[0]) if sink.report else None
    return Artifact(path, source, name, words, report, diagnostics,
                    directory=directory)


class Artifact:
    """A compiled program: a shared library and its manifest.

    report      the parsed JSON report of overlap decisions
    remarks     the compiler's remarks and warnings (Diagnostic)
    arguments   TensorSpec of each argument, per rank
    results     TensorSpec of each result, per rank
    ranks       how many ranks it runs on
    path        the shared library (its manifest is path + ".manifest")
    profile     the per-kernel table of the last run(profile=True), or None
    """

    def __init__(self, path, source, name, words, report, remarks,
                 directory=None):
        self.path, self.report, self.remarks = path, report, remarks
        self.profile = None
        self._source, self._name, self._words = source, name, words
        self._stages = {}
        lib = _capi.library()
        sink = _capi.Collector()
        handle = lib.braidArtifactLoad(_capi.MlirStringRef.of(path),
                                       sink.pointer())
        if not handle:
            raise BraidError(f"cannot load {path}", sink.diagnostics)
        self._handle = handle
        self.ranks = lib.braidArtifactGetNumRanks(handle)

        def spec(tensor_type):
            shape = [tensor_type.shape[i] for i in range(tensor_type.rank)]
            return TensorSpec(tensor_type.dtype.decode(), shape)
        self.arguments = [spec(lib.braidArtifactGetArgumentType(handle, i))
                          for i in range(lib.braidArtifactGetNumArguments(handle))]
        self.results = [spec(lib.braidArtifactGetResultType(handle, i))
                        for i in range(lib.braidArtifactGetNumResults(handle))]
        self._finalizer = weakref.finalize(
            self, Artifact._release, lib, handle, directory)

    @staticmethod
    def _release(lib, handle, directory):
        lib.braidArtifactDestroy(handle)
        if directory:
            shutil.rmtree(directory, ignore_errors=True)

    def ir(self, stage):
        """The program's text at `stage`: "dist" (after import and overlap),
        "xfer" (bufferized transfers), "llvm" (the LLVM dialect), "llvm-ir",
        or "ptx" (only for target="cuda")."""
        if not isinstance(stage, str) or stage not in _STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of "
                             + ", ".join(sorted(_STAGES)))
        if stage == "ptx" and "target=cuda" not in self._words.split():
            raise BraidError("stage 'ptx' needs target='cuda'")
        if stage not in self._stages:
            sink, _ = _compile(self._source, self._name,
                               self._words + f" emit={_STAGES[stage]}")
            self._stages[stage] = "".join(sink.output)
        return self._stages[stage]

    def run(self, inputs, ranks=None, trace=None, timeout=None, threads=None,
            emulate=None, profile=False):
        """Runs the program on `ranks` ranks (default: its grid's size): CPU
        ranks for target="cpu"; for target="cuda", one GPU per rank, or
        Braid's emulated device on the CPU when `emulate` is true (default:
        when it was compiled with emulate=True).

        `inputs` has one entry per rank, each a list with one numpy array
        per argument, of the argument's per-rank shape. Floating-point
        arrays are converted to the argument's type (bf16 rounds to nearest
        even; a uint16 array is taken as bf16 bits). Returns one list per
        rank with one array per result (bf16 results as float32).
        `trace` names a Chrome trace file to write; `timeout` bounds a wait
        for a transfer, in seconds (a positive number; inf waits forever);
        `threads` is each rank's threads for its contractions (default:
        the cores divided by the ranks). With `profile`, the per-kernel
        table of the run (braid-run --profile: calls, time, share and rate
        of each kernel and GEMM, by source location) is left in
        `self.profile`. Raises ValueError or TypeError for
        a bad argument (an array of strings, objects or complex numbers,
        integers that the argument's type cannot hold, a NaN timeout)
        before anything runs.
        """
        words = self._words.split()
        cuda = "target=cuda" in words
        if emulate is None:
            emulate = "emulate=true" in words
        elif not isinstance(emulate, bool):
            raise TypeError(f"emulate must be True or False, not {emulate!r}")
        if emulate and not cuda:
            raise ValueError("emulate runs target='cuda' artifacts; this one "
                             "is for the cpu target")
        ranks = self.ranks if ranks is None else positive_int(ranks, "ranks")
        if len(inputs) != ranks:
            raise ValueError(f"inputs has {len(inputs)} entries; the program "
                             f"runs on {ranks} ranks (one list per rank)")
        buffers, pointers = [], []
        for rank, arrays in enumerate(inputs):
            if len(arrays) != len(self.arguments):
                raise ValueError(f"rank {rank} has {len(arrays)} inputs; the "
                                 f"program takes {len(self.arguments)}")
            for index, (array, spec) in enumerate(zip(arrays, self.arguments)):
                array = np.asarray(array)
                if tuple(array.shape) != spec.shape:
                    raise ValueError(
                        f"input {index} of rank {rank} has shape "
                        f"{tuple(array.shape)}; expected {spec.shape} "
                        f"({spec.dtype})")
                _check_values(array, spec, f"input {index} of rank {rank}")
                stored = np.asarray(to_storage(array, spec.dtype), order="C")
                buffers.append(stored)
                pointers.append(stored.ctypes.data)
        outputs, out_pointers = [], []
        for rank in range(ranks):
            row = []
            for spec in self.results:
                array = np.empty(spec.shape, numpy_storage_dtype(spec.dtype))
                row.append(array)
                out_pointers.append(array.ctypes.data)
            outputs.append(row)
        if not isinstance(profile, bool):
            raise TypeError(f"profile must be True or False, not {profile!r}")
        words = [_word("emulate", True)] if emulate else []
        if profile:
            words.append("profile=true")
        if trace:
            words.append(_word("trace", os.path.abspath(os.fspath(trace))))
        if timeout is not None:
            words.append(_word("timeout", _seconds(timeout, "timeout")))
        if threads is not None:
            threads = integer(threads, "threads")
            if threads:  # 0: the default; the runner checks the range
                words.append(_word("threads", threads))
        lib = _capi.library()
        sink = _capi.Collector()
        in_array = _pointer_array(pointers)
        out_array = _pointer_array(out_pointers)
        result = lib.braidArtifactRun(
            self._handle, ranks, in_array, out_array,
            _capi.MlirStringRef.of(" ".join(words)), sink.pointer())
        del buffers
        if not result.value:
            raise RunError(f"running {self.path} on {ranks} ranks failed",
                           sink.diagnostics)
        if profile:
            text = "".join(sink.output)
            start = text.find("profile of ")
            self.profile = text[start:] if start >= 0 else text
        return [[from_storage(a, spec.dtype) for a, spec in zip(row, self.results)]
                for row in outputs]

    def __repr__(self):
        args = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.arguments)
        res = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.results)
        return f"<braid.Artifact ({args}) -> ({res}) on {self.ranks} ranks>"


def _seconds(value, what):
    """`value` as a positive number of seconds (inf: no limit)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number of seconds, not "
                        f"{type(value).__name__} {value!r}")
    value = float(value)
    if not value > 0:  # also NaN
        raise ValueError(f"{what} must be a positive number of seconds "
                         f"(inf: no limit), not {value}")
    return value


def _check_values(array, spec, what):
    """Raises ValueError when `array` cannot become an argument of type
    spec.dtype without losing what it holds: strings, objects or complex
    numbers for any type; NaN, infinities, fractions or values out of
    range for an integer type (i1 takes any finite number: nonzero is
    true)."""
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{what} has dtype {array.dtype}; a {spec.dtype} "
                         "argument takes booleans, integers or floats")
    if not spec.dtype.startswith("i") or not array.size:
        return
    if array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise ValueError(f"{what} holds NaN or infinite values; a "
                             f"{spec.dtype} argument takes integers")
        if spec.dtype != "i1" and (array != np.trunc(array)).any():
            raise ValueError(f"{what} holds fractions; a {spec.dtype} "
                             "argument takes integers")
    if spec.dtype == "i1":
        return
    info = np.iinfo(numpy_storage_dtype(spec.dtype))
    low, high = array.min().item(), array.max().item()
    if low < info.min or high > info.max:
        raise ValueError(f"{what} holds values from {low} to {high}; a "
                         f"{spec.dtype} argument holds {info.min} to "
                         f"{info.max}")


def _pointer_array(values):
    return (ctypes.c_void_p * max(1, len(values)))(*values)


def _document():
    """Appends the options model's options to braid.compile's docstring."""
    lines = ["", "    Options:"]
    for key, option in sorted(_compile_options().items()):
        values = option.get("values")
        choice = (" | ".join(v["name"] for v in values) if values
                  else option["kind"])
        lines.append(f"      {key} ({choice}; default {option['default']!r}): "
                     f"{option['help']}")
    compile.__doc__ += "\n".join(lines) + "\n"


try:
    _document()
except (ImportError, OSError):  # no libBraidCAPI.so: a shorter docstring
    pass
