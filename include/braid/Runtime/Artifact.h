//===- Artifact.h - Manifests and .npy files of programs --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// What the runners (braid-exec, braid-run) know about a program Braid
// compiled, short of running it: the element types its entry point takes and
// returns, the manifest next to the shared library that describes that entry
// point, and the .npy files its inputs and results travel in.
//
// Plain C++17 (library BraidArtifact): no MPI, LLVM or MLIR, so that a runner
// that only launches or checks runs does not drag in a communication backend
// or a compiler.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_ARTIFACT_H
#define BRAID_RUNTIME_ARTIFACT_H

#include <cstdint>
#include <string>
#include <vector>

namespace braid::artifact {

//===----------------------------------------------------------------------===//
// Element types and tensor types
//===----------------------------------------------------------------------===//

/// The element types of runnable entry points (braid-compile refuses any
/// other).
enum class DType { F32, F64, F16, BF16, I1, I8, I16, I32, I64 };

struct DTypeInfo {
  DType dtype;
  /// The name in manifests and messages: f32, bf16, i1, ...
  const char *name;
  /// Bytes per element (i1 takes a whole byte, 0 or 1).
  int64_t size;
  /// The .npy descr written for results.
  const char *descr;
  /// Every .npy descr accepted for inputs (numpy has no bfloat16, so bf16
  /// travels as its uint16 bit pattern).
  std::vector<const char *> accepted;
};

/// Every supported element type, in the order of DType.
const std::vector<DTypeInfo> &dtypes();
const DTypeInfo &info(DType dtype);
/// The type named `name` in a manifest, or null.
const DTypeInfo *dtypeByName(const std::string &name);
/// True for f32, f64, f16 and bf16.
bool isFloatingPoint(DType dtype);

/// "[4, 3]"; "[]" for a scalar.
std::string shapeString(const std::vector<int64_t> &shape);

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const;
  int64_t numBytes() const { return numElements() * info(dtype).size; }
  /// "shape [4, 3] dtype f32", as messages name an expected type.
  std::string str() const;
};

/// Element `index` of the contiguous array `data` of `dtype`, as a double:
/// exact for every type but i64 beyond 2^53; f16 and bf16 are decoded in
/// software (HalfFloat.h), i1 is 0 or 1.
double elementToDouble(DType dtype, const void *data, int64_t index);

//===----------------------------------------------------------------------===//
// Small helpers the runners share
//===----------------------------------------------------------------------===//

/// printf into a std::string.
std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/// Parses a non-negative decimal integer that fits int64_t (at most 18
/// digits; no sign, spaces or suffix).
bool parseInt(const std::string &text, int64_t &value);

/// `path` with every "{rank}" replaced by `rank`: the per-rank file names of
/// --input and --output.
std::string substituteRank(std::string path, int64_t rank);

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

/// ARTIFACT.so.manifest, written by braid-compile next to the library:
///
///   braid-manifest 1
///   entry NAME
///   ranks N
///   grid NAME SIZE...        (informational, one per grid)
///   arg INDEX DTYPE DIM...   (in order, from 0)
///   result INDEX DTYPE DIM...
///   quantized BOUND          (optional: the largest relative error the
///                             program's quantized collectives may add to
///                             an element, 0 < BOUND < 1)
///
/// Blank lines and lines starting with '#' are ignored.
struct Manifest {
  std::string path;
  std::string entry;
  /// "cpu" or "cuda" ("": a manifest without a target line, as hand-written
  /// ones for tests); for cuda, what its kernels are: "ptx", "cubin" or
  /// "fatbin".
  std::string target;
  std::string kernels;
  int64_t ranks = 0;
  /// The "quantized" line's bound; 0 when the manifest has none.
  double quantized = 0;
  std::vector<TensorType> args;
  std::vector<TensorType> results;
};

/// Reads the manifest at `path`; returns an error message (naming the file
/// and line) or an empty string.
std::string readManifest(const std::string &path, Manifest &manifest);

//===----------------------------------------------------------------------===//
// Memref descriptors
//===----------------------------------------------------------------------===//

/// The words of a memref descriptor of `type`: { allocated, aligned, offset,
/// sizes[rank], strides[rank] }, 8 bytes each.
int64_t descriptorWords(const TensorType &type);

/// The descriptor of `type`'s contiguous elements at `buffer` (row-major,
/// offset 0), as an entry point takes an argument.
std::vector<int64_t> inputDescriptor(const TensorType &type, void *buffer);

/// Copies `bytes` bytes from `source` (the program's memory: host or device)
/// to `destination` (host memory).
using CopyFunction = void (*)(void *destination, const void *source,
                              int64_t bytes);

/// Copies a result described by `words` into contiguous `out`, honouring
/// its offset and strides: the elements' whole extent is first copied to
/// the host with `copy`. Returns an error message or "".
std::string readResult(const int64_t *words, const TensorType &type, char *out,
                       CopyFunction copy);

//===----------------------------------------------------------------------===//
// .npy files
//===----------------------------------------------------------------------===//

/// A parsed .npy header.
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
  size_t dataOffset = 0;
};

/// Reads the .npy file at `path`, which must hold a C-order array of type
/// `expected` (in one of the descrs accepted for its dtype). On success
/// returns "", fills `header`, and leaves in `data` exactly
/// expected.numBytes() bytes of elements (i1 bytes normalized to 0 or 1,
/// which compiled code may rely on). Otherwise returns what was found
/// instead, worded to follow "expected <expected.str()>, found ": "no
/// readable file (No such file or directory)", "not a .npy file (bad
/// magic)", "shape [3, 4] dtype <f4", ...
std::string readNpy(const std::string &path, const TensorType &expected,
                    NpyHeader &header, std::vector<char> &data);

/// Writes `data` (type.numBytes() contiguous bytes) as a C-order .npy v1.0
/// file; returns an error message (strerror's, for a file that cannot be
/// written) or "".
std::string writeNpy(const std::string &path, const TensorType &type,
                     const void *data);

} // namespace braid::artifact

#endif // BRAID_RUNTIME_ARTIFACT_H
