//===- MemRefCopy.cpp - The strided copy MLIR's LLVM lowering calls -------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// `memref.copy` between buffers that are not both contiguous lowers to a
// call to `memrefCopy`, which upstream provides in mlir_c_runner_utils.
// Compiled programs must run where no MLIR is installed, so the runtime
// provides the function itself.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

/// The layout MLIR passes for an unranked memref: rank, then a pointer to a
/// ranked descriptor {allocated, aligned, offset, sizes[rank], strides[rank]}.
struct UnrankedMemRef {
  int64_t rank;
  void *descriptor;
};

struct Ranked {
  char *aligned;
  int64_t offset;
  const int64_t *sizes;
  const int64_t *strides;
};

Ranked view(const UnrankedMemRef &memref) {
  auto *words = static_cast<int64_t *>(memref.descriptor);
  Ranked r;
  r.aligned = reinterpret_cast<char *>(words[1]);
  r.offset = words[2];
  r.sizes = words + 3;
  r.strides = words + 3 + memref.rank;
  return r;
}

} // namespace

extern "C" __attribute__((visibility("default"))) void
memrefCopy(int64_t elementSize, UnrankedMemRef *source,
           UnrankedMemRef *target) {
  int64_t rank = source->rank;
  Ranked src = view(*source), dst = view(*target);
  char *from = src.aligned + src.offset * elementSize;
  char *to = dst.aligned + dst.offset * elementSize;
  if (rank == 0) {
    std::memcpy(to, from, elementSize);
    return;
  }
  for (int64_t i = 0; i < rank; ++i)
    if (src.sizes[i] == 0)
      return;
  // Walk the index space with an odometer; the innermost dimension is
  // copied in one piece when both sides are unit-strided there.
  std::vector<int64_t> index(rank, 0);
  int64_t inner = src.sizes[rank - 1];
  bool innerContiguous =
      src.strides[rank - 1] == 1 && dst.strides[rank - 1] == 1;
  for (;;) {
    int64_t srcOffset = 0, dstOffset = 0;
    for (int64_t i = 0; i < rank - 1; ++i) {
      srcOffset += index[i] * src.strides[i];
      dstOffset += index[i] * dst.strides[i];
    }
    if (innerContiguous) {
      std::memcpy(to + dstOffset * elementSize, from + srcOffset * elementSize,
                  inner * elementSize);
    } else {
      for (int64_t j = 0; j < inner; ++j)
        std::memcpy(to + (dstOffset + j * dst.strides[rank - 1]) * elementSize,
                    from +
                        (srcOffset + j * src.strides[rank - 1]) * elementSize,
                    elementSize);
    }
    int64_t d = rank - 2;
    for (; d >= 0; --d) {
      if (++index[d] < src.sizes[d])
        break;
      index[d] = 0;
    }
    if (d < 0)
      return;
  }
}
