//===- Artifact.cpp - Manifests and .npy files of programs ----------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The parts of braid-exec that braid-run needs too: the dtype table, the
// manifest reader and the .npy reader and writer. Messages are braid-exec's,
// which its tests and users rely on.
//
//===----------------------------------------------------------------------===//

#include "braid/Runtime/Artifact.h"
#include "braid/Runtime/braid_rt.h"

#include "HalfFloat.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace braid::artifact;

//===----------------------------------------------------------------------===//
// Element types and tensor types
//===----------------------------------------------------------------------===//

const std::vector<DTypeInfo> &braid::artifact::dtypes() {
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

const DTypeInfo &braid::artifact::info(DType dtype) {
  for (const DTypeInfo &entry : dtypes())
    if (entry.dtype == dtype)
      return entry;
  return dtypes().front();
}

const DTypeInfo *braid::artifact::dtypeByName(const std::string &name) {
  for (const DTypeInfo &entry : dtypes())
    if (name == entry.name)
      return &entry;
  return nullptr;
}

bool braid::artifact::isFloatingPoint(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

std::string braid::artifact::shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

int64_t TensorType::numElements() const {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

std::string TensorType::str() const {
  return "shape " + shapeString(shape) + " dtype " + info(dtype).name;
}

double braid::artifact::elementToDouble(DType dtype, const void *data,
                                        int64_t index) {
  const char *element = static_cast<const char *>(data) +
                        index * static_cast<int64_t>(info(dtype).size);
  // memcpy: results and inputs are byte buffers with no alignment promise.
  auto load = [&](auto value) {
    std::memcpy(&value, element, sizeof(value));
    return value;
  };
  switch (dtype) {
  case DType::F32:
    return load(float());
  case DType::F64:
    return load(double());
  case DType::F16:
    return braid::rt::halfToFloat(load(uint16_t()));
  case DType::BF16:
    return braid::rt::bf16ToFloat(load(uint16_t()));
  case DType::I1:
    return *element != 0 ? 1.0 : 0.0;
  case DType::I8:
    return load(int8_t());
  case DType::I16:
    return load(int16_t());
  case DType::I32:
    return load(int32_t());
  case DType::I64:
    return static_cast<double>(load(int64_t()));
  }
  return 0;
}

//===----------------------------------------------------------------------===//
// Small helpers
//===----------------------------------------------------------------------===//

std::string braid::artifact::format(const char *fmt, ...) {
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

bool braid::artifact::parseInt(const std::string &text, int64_t &value) {
  if (text.empty() || text.size() > 18 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return false;
  value = std::strtoll(text.c_str(), nullptr, 10);
  return true;
}

std::string braid::artifact::substituteRank(std::string path, int64_t rank) {
  const std::string pattern = "{rank}";
  std::string value = std::to_string(rank);
  for (size_t at = path.find(pattern); at != std::string::npos;
       at = path.find(pattern, at + value.size()))
    path.replace(at, pattern.size(), value);
  return path;
}

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Memref descriptors
//===----------------------------------------------------------------------===//

int64_t braid::artifact::descriptorWords(const TensorType &type) {
  return 3 + 2 * static_cast<int64_t>(type.shape.size());
}

std::vector<int64_t> braid::artifact::inputDescriptor(const TensorType &type,
                                                      void *buffer) {
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

std::string braid::artifact::readResult(const int64_t *words,
                                        const TensorType &type, char *out,
                                        CopyFunction copy) {
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
  int64_t first = words[2], last = words[2];
  for (size_t d = 0; d < rank; ++d) {
    int64_t extent = (type.shape[d] - 1) * strides[d];
    (extent < 0 ? first : last) += extent;
  }
  std::vector<char> staging(
      static_cast<size_t>((last - first + 1) * elementSize));
  copy(staging.data(), aligned + first * elementSize,
       static_cast<int64_t>(staging.size()));
  std::vector<int64_t> index(rank, 0);
  for (int64_t n = 0; n < count; ++n) {
    int64_t element = words[2] - first;
    for (size_t d = 0; d < rank; ++d)
      element += index[d] * strides[d];
    std::memcpy(out + n * elementSize, staging.data() + element * elementSize,
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

static std::vector<std::string> splitWords(const std::string &line) {
  std::istringstream stream(line);
  std::vector<std::string> words;
  std::string word;
  while (stream >> word)
    words.push_back(word);
  return words;
}

std::string braid::artifact::readManifest(const std::string &path,
                                          Manifest &manifest) {
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
    } else if (key == "target") {
      bool cpu = words.size() == 2 && words[1] == "cpu";
      bool cuda =
          words.size() == 3 && words[1] == "cuda" &&
          (words[2] == "ptx" || words[2] == "cubin" || words[2] == "fatbin");
      if (!cpu && !cuda)
        return fail("expected 'target cpu' or 'target cuda ptx|cubin|fatbin'");
      if (!manifest.target.empty())
        return fail("a second 'target' line");
      manifest.target = words[1];
      if (cuda)
        manifest.kernels = words[2];
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
    } else if (key == "quantized") {
      char *end = nullptr;
      double bound =
          words.size() == 2 ? std::strtod(words[1].c_str(), &end) : 0;
      if (words.size() != 2 || !end || *end || !(bound > 0 && bound < 1))
        return fail("expected 'quantized BOUND' with 0 < BOUND < 1");
      if (manifest.quantized > 0)
        return fail("a second 'quantized' line");
      manifest.quantized = bound;
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

namespace {

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

} // namespace

/// Reads a whole file; returns an error message or an empty string.
static std::string readFile(const std::string &path,
                            std::vector<char> &contents) {
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
static std::string parseNpy(const std::vector<char> &contents,
                            NpyHeader &header) {
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

std::string braid::artifact::readNpy(const std::string &path,
                                     const TensorType &expected,
                                     NpyHeader &header,
                                     std::vector<char> &data) {
  std::vector<char> contents;
  std::string error = readFile(path, contents);
  if (!error.empty())
    return "no readable file (" + error + ")";
  error = parseNpy(contents, header);
  if (!error.empty())
    return error;
  const DTypeInfo &dtype = info(expected.dtype);
  bool descrOk = std::any_of(
      dtype.accepted.begin(), dtype.accepted.end(),
      [&](const char *accepted) { return header.descr == accepted; });
  std::string found =
      "shape " + shapeString(header.shape) + " dtype " + header.descr;
  if (!descrOk || header.shape != expected.shape)
    return found;
  if (header.fortranOrder && expected.shape.size() > 1)
    return found + " in Fortran order (only C order is supported)";
  size_t dataBytes = contents.size() - header.dataOffset;
  if (dataBytes != static_cast<size_t>(expected.numBytes()))
    return format("%s with %zu data bytes instead of %lld", found.c_str(),
                  dataBytes, static_cast<long long>(expected.numBytes()));
  // In place: inputs can be large, and the header is a few dozen bytes.
  contents.erase(contents.begin(),
                 contents.begin() + static_cast<ptrdiff_t>(header.dataOffset));
  data.swap(contents);
  // Compiled code may rely on an i1 byte being exactly 0 or 1.
  if (expected.dtype == DType::I1)
    for (char &byte : data)
      byte = byte != 0;
  return std::string();
}

std::string braid::artifact::writeNpy(const std::string &path,
                                      const TensorType &type,
                                      const void *data) {
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
