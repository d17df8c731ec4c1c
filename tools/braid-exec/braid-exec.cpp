//===- braid-exec.cpp - Runs a program compiled by Braid --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// One process per rank, started by `mpirun -np N braid-exec ARTIFACT.so ...`.
// Loads the artifact, feeds its entry point inputs (.npy files or seeded
// random data), writes its results as .npy files, and optionally times
// repeated runs and traces the last one. Links only the runtime (which it
// also uses for its own collectives), MPI and libdl: no LLVM or MLIR.
//
// Errors every rank sees alike (usage, manifest, rank count, loading the
// artifact) are agreed on with one all-reduce and reported once by rank 0,
// and every rank exits with 1. Errors of one rank (its input files) abort
// the whole job through braid_rt_abort.
//
//===----------------------------------------------------------------------===//

#include "braid/Runtime/braid_rt.h"

#include "HalfFloat.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace braid::rt;

namespace {

//===----------------------------------------------------------------------===//
// Element types and tensor types
//===----------------------------------------------------------------------===//

enum class DType { F32, F64, F16, BF16, I1, I8, I16, I32, I64 };

struct DTypeInfo {
  DType dtype;
  const char *name;
  int64_t size;
  /// The .npy descr written for results.
  const char *descr;
  /// Every .npy descr accepted for inputs (numpy has no bfloat16, so bf16
  /// travels as its uint16 bit pattern).
  std::vector<const char *> accepted;
};

const std::vector<DTypeInfo> &dtypes() {
  static const std::vector<DTypeInfo> table = {
      {DType::F32, "f32", 4, "<f4", {"<f4"}},
      {DType::F64, "f64", 8, "<f8", {"<f8"}},
      {DType::F16, "f16", 2, "<f2", {"<f2"}},
      {DType::BF16, "bf16", 2, "<u2", {"<u2", "<V2", "|V2"}},
      {DType::I1, "i1", 1, "|b1", {"|b1", "|u1", "|i1"}},
      {DType::I8, "i8", 1, "|i1", {"|i1"}},
      {DType::I16, "i16", 2, "<i2", {"<i2"}},
      {DType::I32, "i32", 4, "<i4", {"<i4"}},
      {DType::I64, "i64", 8, "<i8", {"<i8"}},
  };
  return table;
}

const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &entry : dtypes())
    if (entry.dtype == dtype)
      return entry;
  return dtypes().front();
}

const DTypeInfo *dtypeByName(const std::string &name) {
  for (const DTypeInfo &entry : dtypes())
    if (name == entry.name)
      return &entry;
  return nullptr;
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

struct TensorType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numElements() const {
    int64_t count = 1;
    for (int64_t size : shape)
      count *= size;
    return count;
  }
  int64_t numBytes() const { return numElements() * info(dtype).size; }
  std::string str() const {
    return "shape " + shapeString(shape) + " dtype " + info(dtype).name;
  }
};

std::string format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char small[512];
  int length = std::vsnprintf(small, sizeof(small), fmt, args);
  va_end(args);
  if (length < static_cast<int>(sizeof(small)))
    return std::string(small, length > 0 ? static_cast<size_t>(length) : 0);
  std::string result(static_cast<size_t>(length) + 1, '\0');
  va_start(args, fmt);
  std::vsnprintf(result.data(), result.size(), fmt, args);
  va_end(args);
  result.resize(static_cast<size_t>(length));
  return result;
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

struct Manifest {
  std::string path;
  std::string entry;
  int64_t ranks = 0;
  std::vector<TensorType> args;
  std::vector<TensorType> results;
};

std::vector<std::string> splitWords(const std::string &line) {
  std::istringstream stream(line);
  std::vector<std::string> words;
  std::string word;
  while (stream >> word)
    words.push_back(word);
  return words;
}

/// Parses a non-negative decimal integer that fits int64_t.
bool parseInt(const std::string &text, int64_t &value) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  value = std::strtoll(text.c_str(), nullptr, 10);
  return true;
}

/// Reads the manifest; returns an error message or an empty string.
std::string readManifest(const std::string &path, Manifest &manifest) {
  manifest.path = path;
  std::ifstream file(path);
  if (!file)
    return format("cannot read the manifest %s: %s", path.c_str(),
                  std::strerror(errno));
  std::string line;
  int lineNumber = 0;
  bool sawHeader = false, sawRanks = false;
  while (std::getline(file, line)) {
    ++lineNumber;
    auto fail = [&](const std::string &message) {
      return format("manifest %s:%d: %s", path.c_str(), lineNumber,
                    message.c_str());
    };
    std::vector<std::string> words = splitWords(line);
    // Blank lines and '#' comments keep hand-written manifests readable.
    if (words.empty() || words[0][0] == '#')
      continue;
    const std::string &key = words[0];
    if (!sawHeader) {
      if (key != "braid-manifest" || words.size() != 2)
        return fail("expected 'braid-manifest 1' first, found '" + line + "'");
      if (words[1] != "1")
        return fail("unsupported manifest version " + words[1] +
                    " (this braid-exec reads version 1)");
      sawHeader = true;
      continue;
    }
    if (key == "entry") {
      if (words.size() != 2)
        return fail("expected 'entry NAME'");
      if (!manifest.entry.empty())
        return fail("a second 'entry' line");
      manifest.entry = words[1];
    } else if (key == "ranks") {
      if (words.size() != 2 || !parseInt(words[1], manifest.ranks) ||
          manifest.ranks < 1)
        return fail("expected 'ranks N' with N >= 1");
      if (sawRanks)
        return fail("a second 'ranks' line");
      sawRanks = true;
    } else if (key == "grid") {
      // Informational: the runtime checks each grid it is asked about.
      if (words.size() < 3 || words.size() > 2 + BRAID_RT_MAX_GRID_RANK)
        return fail(format("expected 'grid NAME SIZE...' with 1 to %d sizes",
                           BRAID_RT_MAX_GRID_RANK));
      for (size_t i = 2; i < words.size(); ++i) {
        int64_t size;
        if (!parseInt(words[i], size) || size < 1)
          return fail("grid size '" + words[i] + "' is not a positive integer");
      }
    } else if (key == "arg" || key == "result") {
      std::vector<TensorType> &list =
          key == "arg" ? manifest.args : manifest.results;
      int64_t index;
      if (words.size() < 3 || !parseInt(words[1], index))
        return fail("expected '" + key + " INDEX DTYPE DIM...'");
      if (index != static_cast<int64_t>(list.size()))
        return fail(format("%s %lld out of order (expected %s %zu)",
                           key.c_str(), static_cast<long long>(index),
                           key.c_str(), list.size()));
      const DTypeInfo *dtype = dtypeByName(words[2]);
      if (!dtype)
        return fail("unknown dtype '" + words[2] +
                    "' (expected f32 f64 f16 bf16 i1 i8 i16 i32 i64)");
      TensorType type;
      type.dtype = dtype->dtype;
      for (size_t i = 3; i < words.size(); ++i) {
        int64_t size;
        if (!parseInt(words[i], size))
          return fail("dimension '" + words[i] +
                      "' is not a non-negative integer");
        type.shape.push_back(size);
      }
      int64_t bytes = dtype->size;
      for (int64_t size : type.shape)
        if (__builtin_mul_overflow(bytes, size, &bytes))
          return fail("tensor " + shapeString(type.shape) + " is too large");
      list.push_back(type);
    } else {
      return fail("unknown line '" + line + "'");
    }
  }
  if (!sawHeader)
    return format("manifest %s: empty (expected 'braid-manifest 1')",
                  path.c_str());
  if (manifest.entry.empty())
    return format("manifest %s: no 'entry' line", path.c_str());
  if (!sawRanks)
    return format("manifest %s: no 'ranks' line", path.c_str());
  return std::string();
}

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

/// A minimal parser for the Python literal numpy writes as the header:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  std::string parse(NpyHeader &header) {
    bool sawDescr = false, sawOrder = false, sawShape = false;
    skipSpace();
    if (!consume('{'))
      return "the header is not a dict";
    for (;;) {
      skipSpace();
      if (consume('}'))
        break;
      std::string key;
      if (!parseString(key))
        return "a header key is not a string";
      skipSpace();
      if (!consume(':'))
        return "expected ':' after '" + key + "'";
      skipSpace();
      if (key == "descr") {
        if (!parseString(header.descr))
          return "'descr' is not a string (structured arrays are not "
                 "supported)";
        sawDescr = true;
      } else if (key == "fortran_order") {
        if (text.compare(pos, 4, "True") == 0) {
          header.fortranOrder = true;
          pos += 4;
        } else if (text.compare(pos, 5, "False") == 0) {
          header.fortranOrder = false;
          pos += 5;
        } else {
          return "'fortran_order' is not True or False";
        }
        sawOrder = true;
      } else if (key == "shape") {
        if (!parseShape(header.shape))
          return "'shape' is not a tuple of non-negative integers";
        sawShape = true;
      } else {
        return "unexpected header key '" + key + "'";
      }
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume('}'))
        break;
      return "expected ',' or '}' in the header";
    }
    if (!sawDescr || !sawOrder || !sawShape)
      return "the header lacks 'descr', 'fortran_order' or 'shape'";
    return std::string();
  }

private:
  void skipSpace() {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  bool consume(char c) {
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool parseString(std::string &out) {
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      return false;
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string::npos)
      return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool parseShape(std::vector<int64_t> &shape) {
    if (!consume('('))
      return false;
    for (;;) {
      skipSpace();
      if (consume(')'))
        return true;
      size_t start = pos;
      while (pos < text.size() &&
             std::isdigit(static_cast<unsigned char>(text[pos])))
        ++pos;
      int64_t value;
      if (!parseInt(text.substr(start, pos - start), value))
        return false;
      consume('L'); // Python 2 longs.
      shape.push_back(value);
      skipSpace();
      if (consume(','))
        continue;
      skipSpace();
      if (consume(')'))
        return true;
      return false;
    }
  }

  const std::string &text;
  size_t pos = 0;
};

/// Reads a whole file; returns an error message or an empty string.
std::string readFile(const std::string &path, std::vector<char> &contents) {
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return std::strerror(errno);
  std::fseek(file, 0, SEEK_END);
  long size = std::ftell(file);
  std::fseek(file, 0, SEEK_SET);
  if (size < 0) {
    std::fclose(file);
    return "cannot determine its size";
  }
  contents.resize(static_cast<size_t>(size));
  size_t got = size ? std::fread(contents.data(), 1, contents.size(), file) : 0;
  int readError = std::ferror(file);
  std::fclose(file);
  if (readError || got != contents.size())
    return "read error";
  return std::string();
}

/// Parses the header of a .npy file; returns an error message or "".
std::string parseNpy(const std::vector<char> &contents, NpyHeader &header) {
  static const char magic[] = "\x93NUMPY";
  if (contents.size() < 10 || std::memcmp(contents.data(), magic, 6) != 0)
    return "not a .npy file (bad magic)";
  unsigned major = static_cast<unsigned char>(contents[6]);
  size_t headerLength, headerStart;
  auto byte = [&](size_t i) {
    return static_cast<size_t>(static_cast<unsigned char>(contents[i]));
  };
  if (major == 1) {
    headerLength = byte(8) | byte(9) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (contents.size() < 12)
      return "a truncated .npy header";
    headerLength = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    headerStart = 12;
  } else {
    return format(".npy version %u.%u (supported: 1.0, 2.0, 3.0)", major,
                  static_cast<unsigned>(byte(7)));
  }
  if (headerStart + headerLength > contents.size())
    return "a truncated .npy header";
  std::string text(contents.data() + headerStart, headerLength);
  std::string error = HeaderParser(text).parse(header);
  if (!error.empty())
    return "a malformed .npy header: " + error;
  header.dataOffset = headerStart + headerLength;
  return std::string();
}

/// Loads input `index` from `path` into `buffer` (expected.numBytes()
/// bytes); aborts the job on any mismatch.
void loadInput(int64_t index, const std::string &path,
               const TensorType &expected, char *buffer) {
  auto abortWith = [&](const std::string &found) {
    std::string message = format("input %lld (%s): expected %s, found %s",
                                 static_cast<long long>(index), path.c_str(),
                                 expected.str().c_str(), found.c_str());
    braid_rt_abort(message.c_str());
  };
  std::vector<char> contents;
  std::string error = readFile(path, contents);
  if (!error.empty())
    abortWith("no readable file (" + error + ")");
  NpyHeader header;
  error = parseNpy(contents, header);
  if (!error.empty())
    abortWith(error);
  const DTypeInfo &dtype = info(expected.dtype);
  bool descrOk = std::any_of(
      dtype.accepted.begin(), dtype.accepted.end(),
      [&](const char *accepted) { return header.descr == accepted; });
  std::string found =
      "shape " + shapeString(header.shape) + " dtype " + header.descr;
  if (!descrOk || header.shape != expected.shape)
    abortWith(found);
  if (header.fortranOrder && expected.shape.size() > 1)
    abortWith(found + " in Fortran order (only C order is supported)");
  size_t dataBytes = contents.size() - header.dataOffset;
  if (dataBytes != static_cast<size_t>(expected.numBytes()))
    abortWith(format("%s with %zu data bytes instead of %lld", found.c_str(),
                     dataBytes, static_cast<long long>(expected.numBytes())));
  std::memcpy(buffer, contents.data() + header.dataOffset, dataBytes);
  // Compiled code may rely on an i1 byte being exactly 0 or 1.
  if (expected.dtype == DType::I1)
    for (size_t i = 0; i < dataBytes; ++i)
      buffer[i] = buffer[i] != 0;
}

/// Writes a C-order .npy v1.0 file; returns an error message or "".
std::string writeNpy(const std::string &path, const TensorType &type,
                     const char *data) {
  // Python tuple syntax: (), (4,), (4, 3).
  std::string shape = "(";
  for (size_t i = 0; i < type.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(type.shape[i]);
  shape += type.shape.size() == 1 ? ",)" : ")";
  std::string header = format("{'descr': '%s', 'fortran_order': False, "
                              "'shape': %s, }",
                              info(type.dtype).descr, shape.c_str());
  // numpy pads the header with spaces and a newline so that the data starts
  // 64-byte aligned.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535)
    return "the shape is too long for a .npy v1.0 header";

  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    return std::strerror(errno);
  char preamble[10] = {'\x93',
                       'N',
                       'U',
                       'M',
                       'P',
                       'Y',
                       1,
                       0,
                       static_cast<char>(header.size() & 0xFF),
                       static_cast<char>(header.size() >> 8)};
  bool ok =
      std::fwrite(preamble, 1, sizeof(preamble), file) == sizeof(preamble) &&
      std::fwrite(header.data(), 1, header.size(), file) == header.size();
  size_t bytes = static_cast<size_t>(type.numBytes());
  if (ok && bytes)
    ok = std::fwrite(data, 1, bytes, file) == bytes;
  int savedErrno = errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    savedErrno = errno;
  }
  return ok ? std::string() : std::string(std::strerror(savedErrno));
}

//===----------------------------------------------------------------------===//
// Random inputs
//===----------------------------------------------------------------------===//

uint64_t splitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Fills `buffer` deterministically from (seed, rank, argument). The values
/// are derived from the raw 64-bit stream rather than the std
/// distributions, whose algorithms differ between standard libraries.
void fillRandom(const TensorType &type, uint64_t seed, int64_t rank,
                int64_t argument, char *buffer) {
  uint64_t mixed =
      splitMix64(splitMix64(splitMix64(seed) ^ static_cast<uint64_t>(rank)) ^
                 static_cast<uint64_t>(argument));
  std::mt19937_64 engine(mixed);
  int64_t count = type.numElements();
  // Uniform in [-1, 1) with 53 random bits.
  auto uniform = [&] {
    return static_cast<double>(engine() >> 11) * 0x1.0p-52 - 1.0;
  };
  // Uniform in [-8, 8).
  auto small = [&] { return static_cast<int64_t>(engine() >> 60) - 8; };
  for (int64_t i = 0; i < count; ++i) {
    switch (type.dtype) {
    case DType::F32:
      reinterpret_cast<float *>(buffer)[i] = static_cast<float>(uniform());
      break;
    case DType::F64:
      reinterpret_cast<double *>(buffer)[i] = uniform();
      break;
    case DType::F16:
      reinterpret_cast<uint16_t *>(buffer)[i] =
          floatToHalf(static_cast<float>(uniform()));
      break;
    case DType::BF16:
      reinterpret_cast<uint16_t *>(buffer)[i] =
          floatToBf16(static_cast<float>(uniform()));
      break;
    case DType::I1:
      buffer[i] = static_cast<char>(engine() >> 63);
      break;
    case DType::I8:
      reinterpret_cast<int8_t *>(buffer)[i] = static_cast<int8_t>(small());
      break;
    case DType::I16:
      reinterpret_cast<int16_t *>(buffer)[i] = static_cast<int16_t>(small());
      break;
    case DType::I32:
      reinterpret_cast<int32_t *>(buffer)[i] = static_cast<int32_t>(small());
      break;
    case DType::I64:
      reinterpret_cast<int64_t *>(buffer)[i] = small();
      break;
    }
  }
}

//===----------------------------------------------------------------------===//
// Memref descriptors
//===----------------------------------------------------------------------===//

/// { allocated, aligned, offset, sizes[rank], strides[rank] }, 8 bytes each.
int64_t descriptorWords(const TensorType &type) {
  return 3 + 2 * static_cast<int64_t>(type.shape.size());
}

std::vector<int64_t> inputDescriptor(const TensorType &type, char *buffer) {
  std::vector<int64_t> words(static_cast<size_t>(descriptorWords(type)));
  words[0] = words[1] =
      static_cast<int64_t>(reinterpret_cast<intptr_t>(buffer));
  words[2] = 0;
  size_t rank = type.shape.size();
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    words[3 + i] = type.shape[i];
    words[3 + rank + i] = stride;
    stride *= type.shape[i];
  }
  return words;
}

/// Copies a result described by `words` into contiguous `out`, honouring
/// its offset and strides. Returns an error message or "".
std::string readResult(const int64_t *words, const TensorType &type,
                       char *out) {
  size_t rank = type.shape.size();
  std::vector<int64_t> sizes(words + 3, words + 3 + rank);
  if (sizes != type.shape)
    return "the program returned shape " + shapeString(sizes) +
           " but the manifest says " + shapeString(type.shape);
  int64_t count = type.numElements();
  if (count == 0)
    return std::string();
  const char *aligned =
      reinterpret_cast<const char *>(static_cast<intptr_t>(words[1]));
  if (!aligned)
    return "the program returned a null data pointer";
  int64_t elementSize = info(type.dtype).size;
  const int64_t *strides = words + 3 + rank;
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t element = words[2];
    for (size_t d = 0; d < rank; ++d)
      element += index[d] * strides[d];
    std::memcpy(out + n * elementSize, aligned + element * elementSize,
                static_cast<size_t>(elementSize));
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < type.shape[d])
        break;
      index[d] = 0;
    }
  }
  if (type.dtype == DType::I1)
    for (int64_t i = 0; i < count; ++i)
      out[i] = out[i] != 0;
  return std::string();
}

//===----------------------------------------------------------------------===//
// Command line
//===----------------------------------------------------------------------===//

const char *const usage =
    "usage: mpirun -np N braid-exec ARTIFACT.so [options]\n"
    "\n"
    "Runs a program compiled by Braid, one process per rank.\n"
    "\n"
    "options:\n"
    "  --manifest=PATH   the program's manifest (default "
    "ARTIFACT.so.manifest)\n"
    "  --input=@PATH     an input .npy file, once per argument in order;\n"
    "                    {rank} in PATH becomes the rank (default: random)\n"
    "  --output=@PATH    where to write a result, once per result; without\n"
    "                    {rank} in PATH only rank 0 writes it\n"
    "  --seed=N          seed of the random inputs (default 0)\n"
    "  --timeout=S       abort if a transfer waits longer than S seconds\n"
    "                    (default 120, or $BRAID_TIMEOUT)\n"
    "  --trace=FILE      write a Chrome trace of the last run to FILE\n"
    "  --warmup=N        untimed runs before the timed ones (default 0)\n"
    "  --repeat=N        timed runs; prints their median if N > 1 (default "
    "1)\n";

struct Options {
  std::string artifact;
  std::string manifest;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  uint64_t seed = 0;
  double timeout = 0; // 0: not given.
  std::string trace;
  int64_t warmup = 0;
  int64_t repeat = 1;
  bool help = false;
};

/// Parses the command line; returns an error message or "".
std::string parseOptions(int argc, char **argv, Options &options) {
  auto value = [](const std::string &arg, const char *name, std::string &out) {
    std::string prefix = std::string(name) + "=";
    if (arg.compare(0, prefix.size(), prefix) != 0)
      return false;
    out = arg.substr(prefix.size());
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], text;
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (value(arg, "--manifest", text)) {
      options.manifest = text;
    } else if (value(arg, "--input", text) || value(arg, "--output", text)) {
      bool isInput = arg.compare(0, 8, "--input=") == 0;
      if (text.size() < 2 || text[0] != '@')
        return format("%s expects @PATH, got '%s'",
                      isInput ? "--input" : "--output", text.c_str());
      (isInput ? options.inputs : options.outputs).push_back(text.substr(1));
    } else if (value(arg, "--seed", text)) {
      char *end = nullptr;
      errno = 0;
      options.seed = std::strtoull(text.c_str(), &end, 10);
      if (text.empty() || *end || errno || text[0] == '-')
        return "--seed expects a non-negative integer, got '" + text + "'";
    } else if (value(arg, "--timeout", text)) {
      char *end = nullptr;
      options.timeout = std::strtod(text.c_str(), &end);
      if (text.empty() || *end || !(options.timeout > 0))
        return "--timeout expects a positive number of seconds, got '" + text +
               "'";
    } else if (value(arg, "--trace", text)) {
      if (text.empty())
        return "--trace expects a file name";
      options.trace = text;
    } else if (value(arg, "--warmup", text)) {
      if (!parseInt(text, options.warmup))
        return "--warmup expects a non-negative integer, got '" + text + "'";
    } else if (value(arg, "--repeat", text)) {
      if (!parseInt(text, options.repeat) || options.repeat < 1)
        return "--repeat expects a positive integer, got '" + text + "'";
    } else if (arg.size() > 1 && arg[0] == '-') {
      return "unknown option '" + arg + "' (see --help)";
    } else if (options.artifact.empty()) {
      options.artifact = arg;
    } else {
      return "more than one artifact given ('" + options.artifact + "', '" +
             arg + "')";
    }
  }
  if (options.help)
    return std::string();
  if (options.artifact.empty())
    return "no artifact given (see --help)";
  if (options.manifest.empty())
    options.manifest = options.artifact + ".manifest";
  return std::string();
}

std::string substituteRank(std::string path, int64_t rank) {
  const std::string pattern = "{rank}";
  std::string value = std::to_string(rank);
  for (size_t at = path.find(pattern); at != std::string::npos;
       at = path.find(pattern, at + value.size()))
    path.replace(at, pattern.size(), value);
  return path;
}

//===----------------------------------------------------------------------===//
// Collectives of the runner itself
//===----------------------------------------------------------------------===//

/// The group of all ranks (a 1-D grid over the world).
int64_t worldGroup(int64_t size) {
  return braid_rt_group(1, size, 1, 1, 1, /*naxes=*/1, /*axes_packed=*/0);
}

/// Agrees on whether any rank failed. `rank0Failed` tells whether rank 0
/// did, so that an error every rank sees is printed once.
bool anyFailed(bool failed, int64_t rank, int64_t size, bool &rank0Failed) {
  int32_t flags[2] = {failed ? 1 : 0, rank == 0 && failed ? 1 : 0};
  int32_t result[2] = {0, 0};
  braid_rt_wait(braid_rt_all_reduce(
      worldGroup(size), reinterpret_cast<int64_t>(flags),
      reinterpret_cast<int64_t>(result), 2, BRAID_RT_I32, BRAID_RT_MAX,
      /*step=*/-1));
  rank0Failed = result[1] != 0;
  return result[0] != 0;
}

double maxOverRanks(double value, int64_t size) {
  double result = 0;
  braid_rt_wait(braid_rt_all_reduce(
      worldGroup(size), reinterpret_cast<int64_t>(&value),
      reinterpret_cast<int64_t>(&result), 1, BRAID_RT_F64, BRAID_RT_MAX,
      /*step=*/-1));
  return result;
}

/// A 64-byte aligned buffer (never empty, so that zero-sized tensors still
/// get a distinct, valid pointer).
struct Buffer {
  explicit Buffer(int64_t bytes)
      : size(static_cast<size_t>(bytes)),
        data(static_cast<char *>(std::aligned_alloc(
            64, (std::max<size_t>(size, 1) + 63) / 64 * 64))) {
    if (!data)
      braid_rt_abort(
          format("cannot allocate %zu bytes for an input", size).c_str());
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  size_t size;
  char *data;
};

using EntryFunction = void (*)(void **);

} // namespace

int main(int argc, char **argv) {
  braid_rt_init(&argc, &argv);
  int64_t rank = braid_rt_world_rank();
  int64_t size = braid_rt_world_size();

  // Phase 1: everything every rank checks alike.
  Options options;
  Manifest manifest;
  EntryFunction entry = nullptr;
  std::string error = parseOptions(argc, argv, options);
  if (error.empty() && options.help) {
    if (rank == 0)
      std::fputs(usage, stdout);
    braid_rt_finalize();
    return 0;
  }
  if (error.empty() && options.timeout > 0)
    braid_rt_set_timeout(options.timeout);
  if (error.empty())
    error = readManifest(options.manifest, manifest);
  if (error.empty() && manifest.ranks != size)
    error = format("program needs %lld ranks, started on %lld",
                   static_cast<long long>(manifest.ranks),
                   static_cast<long long>(size));
  if (error.empty() && !options.inputs.empty() &&
      options.inputs.size() != manifest.args.size())
    error = format("%zu --input given, but %s takes %zu arguments (give one "
                   "per argument, or none for random inputs)",
                   options.inputs.size(), manifest.entry.c_str(),
                   manifest.args.size());
  if (error.empty() && !options.outputs.empty() &&
      options.outputs.size() != manifest.results.size())
    error = format("%zu --output given, but %s has %zu results (give one per "
                   "result, or none)",
                   options.outputs.size(), manifest.entry.c_str(),
                   manifest.results.size());
  if (error.empty()) {
    // dlopen searches the library path for names without a slash; the
    // artifact is a file name.
    std::string path = options.artifact.find('/') == std::string::npos
                           ? "./" + options.artifact
                           : options.artifact;
    // RTLD_GLOBAL: the artifact's braid_rt_* references bind to the runtime
    // this process already loaded.
    void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!library) {
      error = format("cannot load %s: %s", options.artifact.c_str(), dlerror());
    } else {
      entry = reinterpret_cast<EntryFunction>(dlsym(library, "braid_entry"));
      if (!entry)
        error = format("%s has no braid_entry (the entry point of %s)",
                       options.artifact.c_str(), manifest.entry.c_str());
    }
  }
  bool rank0Failed = false;
  if (anyFailed(!error.empty(), rank, size, rank0Failed)) {
    if (!error.empty() && (rank == 0 || !rank0Failed)) {
      std::string line =
          rank == 0 ? format("braid: %s\n", error.c_str())
                    : format("braid: rank %lld: %s\n",
                             static_cast<long long>(rank), error.c_str());
      std::fputs(line.c_str(), stderr);
    }
    braid_rt_finalize();
    return 1;
  }

  // Phase 2: inputs.
  size_t numArgs = manifest.args.size();
  std::vector<std::unique_ptr<Buffer>> inputs;
  std::vector<std::vector<int64_t>> descriptors;
  for (size_t i = 0; i < numArgs; ++i) {
    const TensorType &type = manifest.args[i];
    inputs.push_back(std::make_unique<Buffer>(type.numBytes()));
    char *data = inputs.back()->data;
    if (options.inputs.empty())
      fillRandom(type, options.seed, rank, static_cast<int64_t>(i), data);
    else
      loadInput(static_cast<int64_t>(i),
                substituteRank(options.inputs[i], rank), type, data);
    descriptors.push_back(inputDescriptor(type, data));
  }

  // Compiled code may update its arguments in place; every run must see the
  // same inputs.
  int64_t runs = options.warmup + options.repeat;
  std::vector<std::vector<char>> pristine;
  if (runs > 1)
    for (const auto &input : inputs)
      pristine.emplace_back(input->data, input->data + input->size);

  int64_t resultWords = 0;
  for (const TensorType &type : manifest.results)
    resultWords += descriptorWords(type);
  std::vector<int64_t> resultDescriptors(
      static_cast<size_t>(std::max<int64_t>(resultWords, 1)));
  std::vector<void *> entryArgs(1 + numArgs);
  entryArgs[0] = manifest.results.empty() ? nullptr : resultDescriptors.data();
  for (size_t i = 0; i < numArgs; ++i)
    entryArgs[1 + i] = descriptors[i].data();
  std::set<void *> inputPointers;
  for (const auto &input : inputs)
    inputPointers.insert(input->data);

  // Phase 3: run.
  std::vector<double> timesMs;
  std::vector<std::vector<char>> results(manifest.results.size());
  for (int64_t run = 0; run < runs; ++run) {
    bool last = run + 1 == runs;
    if (run > 0)
      for (size_t i = 0; i < inputs.size(); ++i)
        std::memcpy(inputs[i]->data, pristine[i].data(), pristine[i].size());
    std::fill(resultDescriptors.begin(), resultDescriptors.end(), 0);
    braid_rt_barrier();
    if (last && !options.trace.empty())
      braid_rt_trace_begin();
    auto start = std::chrono::steady_clock::now();
    entry(entryArgs.data());
    auto stop = std::chrono::steady_clock::now();
    if (last && !options.trace.empty())
      braid_rt_trace_end(options.trace.c_str());
    if (run >= options.warmup)
      timesMs.push_back(
          std::chrono::duration<double, std::milli>(stop - start).count());

    // Read (last run only) and free the results.
    std::set<void *> freed;
    const int64_t *words = resultDescriptors.data();
    for (size_t i = 0; i < manifest.results.size(); ++i) {
      const TensorType &type = manifest.results[i];
      if (last) {
        results[i].resize(static_cast<size_t>(type.numBytes()));
        std::string problem = readResult(words, type, results[i].data());
        if (!problem.empty())
          braid_rt_abort(format("result %zu: %s", i, problem.c_str()).c_str());
      }
      void *allocated =
          reinterpret_cast<void *>(static_cast<intptr_t>(words[0]));
      // Results are malloc'ed by the callee, but one may be an argument
      // passed through, or the same buffer as another result.
      if (allocated && !inputPointers.count(allocated) &&
          freed.insert(allocated).second)
        std::free(allocated);
      words += descriptorWords(type);
    }
  }

  // Phase 4: outputs and timing.
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    // Without {rank} every rank would write the same file at once; rank 0's
    // result is the one written then.
    if (options.outputs[i].find("{rank}") == std::string::npos && rank != 0)
      continue;
    std::string path = substituteRank(options.outputs[i], rank);
    std::string problem =
        writeNpy(path, manifest.results[i], results[i].data());
    if (!problem.empty())
      braid_rt_abort(format("output %zu (%s): cannot write: %s", i,
                            path.c_str(), problem.c_str())
                         .c_str());
  }
  if (options.repeat > 1) {
    std::sort(timesMs.begin(), timesMs.end());
    size_t n = timesMs.size();
    double median =
        n % 2 ? timesMs[n / 2] : (timesMs[n / 2 - 1] + timesMs[n / 2]) / 2;
    double slowest = maxOverRanks(median, size);
    if (rank == 0)
      std::printf("braid-exec: median %.3f ms over %zu runs (max over ranks)\n",
                  slowest, n);
  }
  std::fflush(stdout);
  braid_rt_finalize();
  return 0;
}
