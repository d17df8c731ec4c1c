"""Element types between numpy and Braid's programs.

numpy has no bfloat16: bf16 travels as its uint16 bit pattern, converted
from float arrays by rounding to nearest even and returned as float32.
The tolerances results are checked with, per kind of check and element
type, are here too (TOLERANCE), so that every check reads one table.
"""
import numpy as np

_STORAGE = {"f32": np.float32, "f64": np.float64, "f16": np.float16,
            "bf16": np.uint16, "i1": np.bool_, "i8": np.int8,
            "i16": np.int16, "i32": np.int32, "i64": np.int64}

FLOAT_TYPES = ("f32", "f16", "bf16", "f64")


def numpy_storage_dtype(dtype):
    """The numpy dtype a buffer of Braid type `dtype` is stored in."""
    try:
        return np.dtype(_STORAGE[dtype])
    except KeyError:
        raise ValueError(f"unknown element type {dtype!r}") from None


def bf16_bits(values):
    """Rounds float values to bfloat16 (nearest even); returns the bits."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_values(bits):
    """float32 values of bfloat16 bit patterns."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(
        np.float32)


def to_storage(array, dtype):
    """`array` as the buffer a `dtype` argument takes."""
    array = np.asarray(array)
    if dtype == "bf16":
        if array.dtype == np.uint16:
            return array
        return bf16_bits(array)
    return array.astype(numpy_storage_dtype(dtype), copy=False)


def from_storage(array, dtype):
    """A result buffer as the numpy array users get (bf16 as float32)."""
    return bf16_values(array) if dtype == "bf16" else array


def quantize(values, dtype):
    """float64 values after rounding to `dtype`: what a program sees."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "bf16":
        return bf16_values(bf16_bits(values)).astype(np.float64)
    if dtype in ("f16", "f32"):
        return values.astype(_STORAGE[dtype]).astype(np.float64)
    return values


#: The largest error a result may have against its float64 reference, per
#: kind of check and element type: the one table of the Python library and
#: the tests. The reference starts from the same rounded inputs; the error
#: is relative_error's (relative to the reference's largest magnitude)
#: unless an entry says otherwise. The kinds differ on purpose, by what a
#: result has been through.
TOLERANCE = {
    # A whole end-to-end program (test/lib/e2e_patterns): contractions in
    # the element type (f16 accumulating in f16) whose sums the schedules
    # split and reorder, then elementwise work.
    "program": {"f32": 2e-4, "f16": 2e-2, "bf16": 4e-2},
    # One memory-bound kernel (test/lib/vector_check.py: a norm, a softmax,
    # GELU along a row): one rounding to the element type and, in f32, the
    # polynomial approximations of exp, tanh, erf and log. Relative to at
    # least 1.
    "kernel": {"f32": 2e-5, "f16": 4e-3, "bf16": 2e-2},
    # One block of braid.models (MLP, attention, MoE, norm), whose
    # reference rounds where the block does. Relative to at least 1.
    "block": {"f32": 1e-4, "f16": 1e-2, "bf16": 3e-2},
    # braid.models.Transformer: layers of blocks, each one's error feeding
    # the next, so looser than one block.
    "transformer": {"f32": 1e-3, "f16": 3e-2, "bf16": 6e-2},
    # A PyTorch module parallelized by Braid against the module run by
    # torch in the same dtype (python/tests/test_hf.py): in bf16 both round
    # at every op, in different orders. A test may assert a tighter bound
    # where its module allows one.
    "module": {"f32": 1e-4, "bf16": 4e-2},
    # Attention through braid.pytorch.export against torch's f32 attention
    # of the same inputs (python/tests/test_pytorch.py), elementwise: the
    # rtol and atol of torch.testing.assert_close. In bf16 the
    # probabilities round to bf16 (f16) before the product with v.
    "attention": {"f32": 1e-5, "f16": 4e-3, "bf16": 3e-2},
}


def relative_error(got, want, floor=1e-6):
    """The largest |got - want| relative to the largest |want| (at least
    `floor`), and the index where it is. A NaN or infinity in one and not the
    other is an infinite error (a NaN must never pass a tolerance check by
    comparing false); where both hold the same non-finite value, the
    element agrees."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(same, 0.0, np.abs(got - want))
    diff = np.where(np.isnan(diff), np.inf, diff)
    finite = want[np.isfinite(want)]
    scale = max(float(np.abs(finite).max()) if finite.size else 0.0, floor)
    if diff.size == 0:
        return 0.0, ()
    index = np.unravel_index(int(np.argmax(diff)), diff.shape)
    return float(diff[index]) / scale, index
