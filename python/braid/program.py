"""Compiled programs run in this process, one process per rank
(include/braid/Runtime/braid_program.h): the way a job that already is one
process per rank (mpirun, or torchrun with MPI beside it) runs Braid,
instead of Artifact.run's harness, which starts processes and moves files
on every call.

Every rank of the job runs the same code:

    import braid.program
    rank, size = braid.program.rank_and_size()  # MPI's world
    path = braid.program.compile_once(text, "/shared/cache", overlap="auto")
    program = braid.program.Program(path)    # this rank's part
    y, = program(x_shard, w_shard)           # any number of calls

Arguments are this rank's per-rank arrays (Program.arguments): numpy arrays
or CPU torch tensors. One that is already C-contiguous in the argument's
storage type (numpy: float32, float16, uint16 bits for bf16, ...; torch:
the same dtype, bfloat16 included) is passed as it is, without a copy;
others are converted first. Results come back as new arrays (bf16 as
float32, like Artifact.run), or are written into `out=`.
"""
import ctypes
import hashlib
import os
import tempfile
import weakref

import numpy as np

from . import _capi
from .compiler import BraidError, TensorSpec, _read_source
from .compiler import compile as _compile_text
from .dtypes import from_storage, numpy_storage_dtype, to_storage

_lib = None

#: torch's dtype names, by Braid's element types.
_TORCH_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16",
                 "bf16": "bfloat16", "i1": "bool", "i8": "int8",
                 "i16": "int16", "i32": "int32", "i64": "int64"}


def _library():
    """libBraidProgram.so, found next to libBraidCAPI.so, with the runtime
    loaded RTLD_GLOBAL first: compiled programs bind their braid_rt_*
    references, and MPI its plugins, to what is global."""
    global _lib
    if _lib is not None:
        return _lib
    capi = None
    for path in _capi._candidates():
        if os.path.exists(path):
            capi = path
            break
    if capi is None:
        raise ImportError("cannot find Braid's libraries (see braid._capi)")
    directory = os.path.dirname(capi)
    ctypes.CDLL(os.path.join(directory, "libBraidRuntime.so"),
                mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.join(directory, "libBraidProgram.so"),
                      mode=ctypes.RTLD_GLOBAL)
    error = (ctypes.c_char_p, ctypes.c_size_t)
    lib.braid_program_load.restype = ctypes.c_int
    lib.braid_program_load.argtypes = (ctypes.c_char_p, ctypes.c_int64,
                                       ctypes.POINTER(ctypes.c_void_p)) + error
    for name in ("rank", "size", "num_args", "num_results"):
        function = getattr(lib, "braid_program_" + name)
        function.restype = ctypes.c_int64
        function.argtypes = (ctypes.c_void_p,)
    lib.braid_program_describe.restype = ctypes.c_int
    lib.braid_program_describe.argtypes = (
        ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
        ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)))
    lib.braid_program_call.restype = ctypes.c_int
    lib.braid_program_call.argtypes = (ctypes.c_void_p,
                                       ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_void_p)) + error
    lib.braid_program_destroy.restype = None
    lib.braid_program_destroy.argtypes = (ctypes.c_void_p,)
    # The runtime's own calls, for compile_once.
    lib.braid_rt_init_on.restype = ctypes.c_char_p
    lib.braid_rt_init_on.argtypes = (ctypes.c_int64,)
    for name in ("braid_rt_world_rank", "braid_rt_world_size"):
        getattr(lib, name).restype = ctypes.c_int64
        getattr(lib, name).argtypes = ()
    lib.braid_rt_barrier.restype = None
    lib.braid_rt_barrier.argtypes = ()
    lib.braid_rt_set_timeout.restype = None
    lib.braid_rt_set_timeout.argtypes = (ctypes.c_double,)
    _lib = lib
    return lib


def _handle_of(communicator):
    """The MPI Fortran handle of `communicator`: None is MPI's world (-1),
    an mpi4py communicator gives its own (py2f), an int is one already.
    (Not `comm`: that is the compile option, two-sided or symmetric.)"""
    if communicator is None:
        return -1
    if hasattr(communicator, "py2f"):
        return int(communicator.py2f())
    if isinstance(communicator, int) and not isinstance(communicator, bool):
        return communicator
    raise TypeError("communicator must be None (MPI's world), an mpi4py "
                    "communicator or an MPI Fortran handle, not "
                    f"{type(communicator).__name__}")


def _start(communicator):
    """Starts the runtime on `communicator`; returns the library."""
    lib = _library()
    problem = lib.braid_rt_init_on(_handle_of(communicator))
    if problem:
        raise BraidError(problem.decode())
    return lib


def _timeout():
    """The wait limit the runtime had before compile_once lifted it."""
    try:
        value = float(os.environ.get("BRAID_TIMEOUT", "120"))
    except ValueError:
        return 120.0
    return value if value > 0 else 120.0


_GROUPS = {}


def _mpi():
    """The MPI library Braid's runtime uses (Debian's OpenMPI)."""
    for name in ("libmpi.so.40", "libmpi.so"):
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
    raise BraidError("cannot load the MPI library (libmpi.so.40)")


def split_world(group):
    """The MPI Fortran handle of a communicator of the world's ranks
    `group` (a list holding this process's rank; its ranks in that order),
    made by MPI_Comm_split over MPI's world: collective over the world,
    every rank calling it with its own group (the groups disjoint, as the
    rows or columns of a device mesh). Call it before Braid's runtime
    starts on a communicator (the runtime takes one per process). MPI is
    initialized here if nothing has (thread level MULTIPLE, finalized when
    the process exits). The same group gives the same handle again."""
    group = [int(r) for r in group]
    key = tuple(group)
    if key in _GROUPS:
        return _GROUPS[key]
    mpi = _mpi()
    flag = ctypes.c_int(0)
    mpi.MPI_Initialized(ctypes.byref(flag))
    if not flag.value:
        provided = ctypes.c_int(0)
        if mpi.MPI_Init_thread(None, None, 3, ctypes.byref(provided)) != 0:
            raise BraidError("MPI_Init_thread failed")
        import atexit

        def finalize():
            done = ctypes.c_int(0)
            if mpi.MPI_Finalized(ctypes.byref(done)) == 0 and not done.value:
                mpi.MPI_Finalize()
        atexit.register(finalize)
    mpi.MPI_Comm_f2c.restype = ctypes.c_void_p
    mpi.MPI_Comm_f2c.argtypes = (ctypes.c_int,)
    mpi.MPI_Comm_c2f.restype = ctypes.c_int
    mpi.MPI_Comm_c2f.argtypes = (ctypes.c_void_p,)
    mpi.MPI_Comm_split.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_void_p))
    mpi.MPI_Comm_rank.argtypes = (ctypes.c_void_p, ctypes.POINTER(ctypes.c_int))
    world = mpi.MPI_Comm_f2c(0)                  # MPI_COMM_WORLD
    rank = ctypes.c_int(-1)
    mpi.MPI_Comm_rank(world, ctypes.byref(rank))
    if rank.value not in group:
        raise ValueError(f"rank {rank.value} is not in the group {group}")
    split = ctypes.c_void_p()
    if mpi.MPI_Comm_split(world, min(group), group.index(rank.value),
                          ctypes.byref(split)) != 0:
        raise BraidError(f"MPI_Comm_split failed for the group {group}")
    _GROUPS[key] = mpi.MPI_Comm_c2f(split)
    return _GROUPS[key]


def rank_and_size(communicator=None):
    """(this process's rank, the number of ranks) of `communicator` (None:
    MPI's world), starting Braid's runtime on it: what a rank needs to know
    before it writes its program."""
    lib = _start(communicator)
    return lib.braid_rt_world_rank(), lib.braid_rt_world_size()


def compile_once(text_or_path, directory, communicator=None, **options):
    """Compiles a program once for the whole job and returns the path of
    its artifact in `directory` (which every rank must see: a shared or
    node-local file system, with one job per node): rank 0 of `communicator`
    compiles unless an artifact of the same source and options is there
    already (a cache keyed by both), and every rank returns once it is.
    Collective over `communicator`; raises CompileError on rank 0, and
    BraidError on the others, when the program does not compile."""
    lib = _start(communicator)
    source, name = _read_source(text_or_path)
    options.setdefault("name", name)
    # Keyed by the compiler too: another Braid compiles another artifact.
    key = hashlib.sha256(repr((_capi.library().braidGetVersion(), source,
                               sorted(options.items()))).encode())
    path = os.path.join(os.fspath(directory), key.hexdigest()[:32] + ".so")
    failure = None
    # Rank 0's reason for a failed compile, for the other ranks' errors.
    reason = path + ".error"
    if lib.braid_rt_world_rank() == 0 and not os.path.exists(path):
        if os.path.exists(reason):
            os.remove(reason)
        try:
            artifact = _compile_text(source, **options)
            os.makedirs(directory, exist_ok=True)
            # The manifest first: a library without one is not an artifact.
            for suffix in (".manifest", ""):
                handle, partial = tempfile.mkstemp(dir=directory, prefix=".partial-")
                with open(artifact.path + suffix, "rb") as f, os.fdopen(handle, "wb") as g:
                    g.write(f.read())
                os.replace(partial, path + suffix)
        except Exception as error:  # told to every rank below
            failure = error
            try:
                os.makedirs(directory, exist_ok=True)
                with open(reason, "w") as f:
                    f.write(str(error).replace("\n", ": "))
            except OSError:
                pass
    # The others wait as long as the compile takes, not BRAID_TIMEOUT.
    lib.braid_rt_set_timeout(float("inf"))
    lib.braid_rt_barrier()
    lib.braid_rt_set_timeout(_timeout())
    if failure is not None:
        raise failure
    if not os.path.exists(path) and os.path.exists(reason):
        with open(reason) as f:
            raise BraidError(f"rank 0 could not compile the program: {f.read()}")
    if not os.path.exists(path):
        raise BraidError(f"rank {lib.braid_rt_world_rank()}: {path} is not "
                         "there after rank 0 compiled it (is the directory "
                         "shared by every rank?)")
    return path


class Program:
    """A compiled program (the path of its .so; its manifest next to it)
    loaded for this process's rank of `communicator` (None: MPI's world).

    rank, size  this process's rank and the communicator's size
    arguments   TensorSpec of each argument (this rank's shapes)
    results     TensorSpec of each result
    """

    def __init__(self, artifact, communicator=None):
        lib = _start(communicator)
        handle = ctypes.c_void_p()
        error = ctypes.create_string_buffer(1024)
        if lib.braid_program_load(os.fsencode(artifact),
                                  _handle_of(communicator),
                                  ctypes.byref(handle), error, len(error)):
            raise BraidError(error.value.decode(errors="replace"))
        self._lib, self._handle = lib, handle
        self._finalizer = weakref.finalize(self, lib.braid_program_destroy, handle)
        self.path = os.fspath(artifact)
        self.rank = lib.braid_program_rank(handle)
        self.size = lib.braid_program_size(handle)
        self.arguments = [self._describe(0, i)
                          for i in range(lib.braid_program_num_args(handle))]
        self.results = [self._describe(1, i)
                        for i in range(lib.braid_program_num_results(handle))]

    def _describe(self, is_result, index):
        dtype, rank = ctypes.c_char_p(), ctypes.c_int64()
        shape = ctypes.POINTER(ctypes.c_int64)()
        self._lib.braid_program_describe(self._handle, is_result, index,
                                         ctypes.byref(dtype), ctypes.byref(rank),
                                         ctypes.byref(shape))
        return TensorSpec(dtype.value.decode(), [shape[d] for d in range(rank.value)])

    def __call__(self, *args, out=None):
        """Runs the program on this rank (every rank calls it, in the same
        order); returns the list of results, or `out` filled. Raises
        ValueError or TypeError for arguments of the wrong number, shape or
        type, before anything runs."""
        if not self._finalizer.alive:
            raise BraidError("the program was closed")
        if len(args) != len(self.arguments):
            raise ValueError(f"the program takes {len(self.arguments)} "
                             f"arguments; {len(args)} given")
        keep, pointers = [], []
        for index, (value, spec) in enumerate(zip(args, self.arguments)):
            pointer, held = _buffer(value, spec, f"argument {index}", writable=False)
            keep.append(held)
            pointers.append(pointer)
        if out is None:
            outputs = [np.empty(spec.shape, numpy_storage_dtype(spec.dtype))
                       for spec in self.results]
        else:
            outputs = list(out)
            if len(outputs) != len(self.results):
                raise ValueError(f"the program has {len(self.results)} "
                                 f"results; out has {len(outputs)}")
        out_pointers = [_buffer(value, spec, f"result {index}", writable=True)[0]
                        for index, (value, spec) in enumerate(zip(outputs, self.results))]
        error = ctypes.create_string_buffer(1024)
        if self._lib.braid_program_call(self._handle, _pointers(pointers),
                                        _pointers(out_pointers), error, len(error)):
            raise BraidError(error.value.decode(errors="replace"))
        del keep
        if out is not None:
            return out
        return [from_storage(a, spec.dtype) for a, spec in zip(outputs, self.results)]

    def torch_results(self):
        """New torch tensors of the results' shapes and dtypes: out= fills
        them as they are (no numpy arrays, no bf16 through float32)."""
        import torch
        return [torch.empty(tuple(s.shape), dtype=getattr(torch, _TORCH_DTYPES[s.dtype]))
                for s in self.results]

    def close(self):
        """Releases the program (also done when it is garbage)."""
        self._finalizer()

    def __repr__(self):
        args = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.arguments)
        res = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.results)
        return f"<braid.program.Program ({args}) -> ({res}), rank {self.rank} of {self.size}>"


def _pointers(values):
    return (ctypes.c_void_p * max(1, len(values)))(*values)


def _buffer(value, spec, what, writable):
    """(address, object to keep alive) of `value` as a buffer of `spec`:
    the value itself when it already is one (C-contiguous, of the storage
    type), else a converted copy (arguments only: a result must be one)."""
    if hasattr(value, "data_ptr") and hasattr(value, "is_contiguous"):  # torch
        expected = _TORCH_DTYPES[spec.dtype]
        if (str(value.dtype) == "torch." + expected and value.is_contiguous()
                and value.device.type == "cpu"):
            _check_shape(tuple(value.shape), spec, what)
            return value.data_ptr(), value
        if writable:
            raise TypeError(f"{what} must be a contiguous CPU torch.{expected} "
                            f"tensor, not {value.dtype} on {value.device}")
        value = value.detach().cpu()
        # numpy has no bfloat16: through float32, which holds it exactly.
        value = (value.float() if str(value.dtype) == "torch.bfloat16" else value).numpy()
    storage = numpy_storage_dtype(spec.dtype)
    if isinstance(value, np.ndarray) and value.dtype == storage and \
            value.flags.c_contiguous:
        _check_shape(value.shape, spec, what)
        if writable and not value.flags.writeable:
            raise ValueError(f"{what} is read-only")
        return value.ctypes.data, value
    if writable:
        raise TypeError(f"{what} must be a C-contiguous numpy array of "
                        f"{np.dtype(storage)} ({spec.dtype})")
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{what} has dtype {array.dtype}; a {spec.dtype} "
                        "argument takes booleans, integers or floats")
    _check_shape(array.shape, spec, what)
    stored = np.ascontiguousarray(to_storage(array, spec.dtype))
    return stored.ctypes.data, stored


def _check_shape(shape, spec, what):
    if tuple(shape) != tuple(spec.shape):
        raise ValueError(f"{what} has shape {tuple(shape)}; this rank's "
                         f"{spec.dtype} part is {tuple(spec.shape)}")
