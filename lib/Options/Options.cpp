//===- Options.cpp - Braid's options as one typed model ---------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Options/Options.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

using namespace braid;
using namespace braid::options;

//===----------------------------------------------------------------------===//
// Enum tables
//===----------------------------------------------------------------------===//

#define BRAID_ENUM(Type, Description)                                          \
  const EnumValue EnumTraits<::braid::Type>::values[] = {
#define BRAID_ENUM_VALUE(Type, Enumerator, Spelling, Help)                     \
  {Spelling, static_cast<int>(::braid::Type::Enumerator), Help},
#define BRAID_ENUM_END(Type)                                                   \
  }                                                                            \
  ;                                                                            \
  const size_t EnumTraits<::braid::Type>::size =                               \
      sizeof(EnumTraits<::braid::Type>::values) / sizeof(EnumValue);
#include "braid/Options/Options.def"

namespace {

//===----------------------------------------------------------------------===//
// Values by type
//===----------------------------------------------------------------------===//

/// How a field of type T reads and prints its words.
template <typename T, typename = void> struct ValueTraits;

template <typename E>
struct ValueTraits<E, std::enable_if_t<std::is_enum_v<E>>> {
  static constexpr Kind kind = Kind::Enum;
  static std::string print(E value) { return spelling(value); }
  static bool parse(std::string_view text, E &value) {
    for (size_t i = 0; i < EnumTraits<E>::size; ++i)
      if (text == EnumTraits<E>::values[i].spelling) {
        value = static_cast<E>(EnumTraits<E>::values[i].value);
        return true;
      }
    return false;
  }
};

template <> struct ValueTraits<bool> {
  static constexpr Kind kind = Kind::Bool;
  static std::string print(bool value) { return value ? "true" : "false"; }
  static bool parse(std::string_view text, bool &value) {
    if (text == "true" || text == "1" || text == "on") {
      value = true;
      return true;
    }
    if (text == "false" || text == "0" || text == "off") {
      value = false;
      return true;
    }
    return false;
  }
};

template <> struct ValueTraits<int64_t> {
  static constexpr Kind kind = Kind::Int;
  static std::string print(int64_t value) { return std::to_string(value); }
  static bool parse(std::string_view text, int64_t &value) {
    std::string copy(text);
    if (copy.empty() || copy.size() > 20)
      return false;
    char *end = nullptr;
    errno = 0;
    long long parsed = std::strtoll(copy.c_str(), &end, 10);
    if (errno || *end || std::isspace(static_cast<unsigned char>(copy[0])))
      return false;
    value = parsed;
    return true;
  }
};

template <> struct ValueTraits<double> {
  static constexpr Kind kind = Kind::Double;
  /// The shortest of %.15g and %.17g that reads back as `value`.
  static std::string print(double value) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.15g", value);
    if (std::strtod(buffer, nullptr) != value)
      std::snprintf(buffer, sizeof(buffer), "%.17g", value);
    return buffer;
  }
  static bool parse(std::string_view text, double &value) {
    std::string copy(text);
    if (copy.empty() || std::isspace(static_cast<unsigned char>(copy[0])))
      return false;
    char *end = nullptr;
    errno = 0;
    double parsed = std::strtod(copy.c_str(), &end);
    // Every double option is a positive quantity (seconds, ...).
    if (errno || *end || !(parsed > 0))
      return false;
    value = parsed;
    return true;
  }
};

template <> struct ValueTraits<std::string> {
  static constexpr Kind kind = Kind::String;
  static std::string print(const std::string &value) { return value; }
  static bool parse(std::string_view text, std::string &value) {
    value = std::string(text);
    return true;
  }
};

/// The table entry of an option with a field of type T.
template <typename T> struct Entry {
  static void describe(Info &info) {
    if constexpr (std::is_enum_v<T>) {
      info.enumDescription = EnumTraits<T>::description;
      info.values = EnumTraits<T>::values;
      info.numValues = EnumTraits<T>::size;
    }
  }
};

/// Whether an int option's value lies in its range (other kinds have none).
template <typename T> bool inRange(const T &value, int64_t min, int64_t max) {
  if constexpr (std::is_same_v<T, int64_t>)
    return value >= min && value <= max;
  return true;
}

std::vector<Info> buildTable() {
  std::vector<Info> table;
#define BRAID_OPTION_ENTRY(Field, Flag, Type, Default, Stages, Help, Min, Max) \
  {                                                                            \
    Info info{                                                                 \
        #Field,                                                                \
        Flag,                                                                  \
        ValueTraits<Type>::kind,                                               \
        static_cast<unsigned>(Stages),                                         \
        Help,                                                                  \
        nullptr,                                                               \
        nullptr,                                                               \
        0,                                                                     \
        Min,                                                                   \
        Max,                                                                   \
        [](const Options &o) { return ValueTraits<Type>::print(o.Field); },    \
        [](Options &o, std::string_view text, std::string &error) {            \
          Type value;                                                          \
          if (!ValueTraits<Type>::parse(text, value))                          \
            return false;                                                      \
          if (!inRange(value, Min, Max))                                       \
            return false;                                                      \
          o.Field = value;                                                     \
          return true;                                                         \
        }};                                                                    \
    Entry<Type>::describe(info);                                               \
    table.push_back(info);                                                     \
  }
#define BRAID_OPTION(Field, Flag, Type, Default, Stages, Help)                 \
  BRAID_OPTION_ENTRY(Field, Flag, Type, Default, Stages, Help, 0, 0)
#define BRAID_INT_OPTION(Field, Flag, Default, Min, Max, Stages, Help)         \
  BRAID_OPTION_ENTRY(Field, Flag, int64_t, Default, Stages, Help, Min, Max)
#include "braid/Options/Options.def"
#undef BRAID_OPTION_ENTRY
  return table;
}

/// JSON string literal of `text`.
std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
        out += buffer;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  return out + "\"";
}

/// The value of `info` in `options` as a JSON value of its kind.
std::string jsonValue(const Info &info, const Options &options) {
  std::string text = info.get(options);
  switch (info.kind) {
  case Kind::Bool:
  case Kind::Int:
  case Kind::Double:
    return text;
  default:
    return jsonString(text);
  }
}

const char *kindName(Kind kind) {
  // In Kind's order.
  static const char *const names[] = {"enum", "bool", "int", "double",
                                      "string"};
  static_assert(std::size(names) == static_cast<size_t>(Kind::String) + 1);
  return names[static_cast<size_t>(kind)];
}

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

} // namespace

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

bool Info::in(Scope scope) const {
  bool pipeline = stages & Pipeline;
  bool internal = stages & Internal;
  bool codegen = stages & Codegen;
  bool run = stages & Run;
  switch (scope) {
  case Scope::Pipeline:
    return pipeline;
  case Scope::Compile:
    return (pipeline && !internal) || codegen;
  case Scope::Run:
    return run;
  case Scope::CompileAndRun:
    return (pipeline && !internal) || codegen || run;
  }
  return false;
}

std::string Info::defaultValue() const { return get(Options()); }

std::string Info::expected() const {
  switch (kind) {
  case Kind::Enum: {
    std::string text;
    for (size_t i = 0; i < numValues; ++i) {
      if (i)
        text += i + 1 == numValues ? " or " : ", ";
      text += values[i].spelling;
    }
    return text;
  }
  case Kind::Bool:
    return "true or false";
  case Kind::Int:
    return "an integer from " + std::to_string(min) + " to " +
           std::to_string(max);
  case Kind::Double:
    return "a positive number";
  case Kind::String:
    return "a string";
  }
  return "";
}

const std::vector<Info> &options::all() {
  static const std::vector<Info> table = buildTable();
  return table;
}

const Info *options::find(std::string_view flag) {
  for (const Info &info : all())
    if (flag == info.flag)
      return &info;
  return nullptr;
}

bool options::set(Options &options, std::string_view flag,
                  std::string_view value, std::string &error) {
  const Info *info = find(flag);
  if (!info) {
    error = "unknown option '" + std::string(flag) + "'";
    return false;
  }
  std::string detail;
  if (info->set(options, value, detail))
    return true;
  error = "option '" + std::string(flag) + "' expects " + info->expected() +
          ", got '" + std::string(value) + "'";
  return false;
}

bool options::splitWords(
    std::string_view text,
    std::vector<std::pair<std::string, std::string>> &words,
    std::string &error) {
  size_t i = 0, n = text.size();
  while (i < n) {
    while (i < n && isSpace(text[i]))
      ++i;
    if (i == n)
      break;
    std::string key, value;
    bool hasValue = false;
    while (i < n && !isSpace(text[i]) && text[i] != '=')
      key += text[i++];
    if (i < n && text[i] == '=') {
      hasValue = true;
      ++i;
      while (i < n && !isSpace(text[i])) {
        char c = text[i];
        if (c == '"' || c == '\'') {
          char quote = c;
          size_t start = i++;
          bool closed = false;
          while (i < n) {
            if (text[i] == quote) {
              closed = true;
              ++i;
              break;
            }
            if (quote == '"' && text[i] == '\\' && i + 1 < n)
              ++i;
            value += text[i++];
          }
          if (!closed) {
            error = "unterminated quote in option '" +
                    std::string(text.substr(start > 40 ? start - 40 : 0)) + "'";
            return false;
          }
          continue;
        }
        value += c;
        ++i;
      }
    }
    size_t dashes = key.find_first_not_of('-');
    key = dashes == std::string::npos ? std::string() : key.substr(dashes);
    if (key.empty()) {
      error = "an option word without a name ('=" + value + "')";
      return false;
    }
    words.emplace_back(key, hasValue ? value : std::string("true"));
  }
  return true;
}

bool options::parseWords(std::string_view text, Options &options, Scope scope,
                         std::string &error) {
  std::vector<std::pair<std::string, std::string>> words;
  if (!splitWords(text, words, error))
    return false;
  for (auto &[key, value] : words) {
    const Info *info = find(key);
    if (info && !info->in(scope)) {
      error =
          "option '" + key + "' is not taken here (it is " +
          (info->in(Scope::Run)       ? "a runner's option"
           : info->in(Scope::Compile) ? "a compile option, not a pipeline one"
                                      : "a pipeline-only option") +
          ")";
      return false;
    }
    if (!set(options, key, value, error))
      return false;
  }
  return true;
}

std::string options::quote(std::string_view value) {
  bool plain = !value.empty();
  for (char c : value)
    if (isSpace(c) || c == '"' || c == '\'' || c == '\\')
      plain = false;
  if (plain)
    return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string options::toWords(const Options &options, Scope scope) {
  std::string words;
  Options defaults;
  for (const Info &info : all()) {
    if (!info.in(scope))
      continue;
    std::string value = info.get(options);
    if (value == info.get(defaults))
      continue;
    if (!words.empty())
      words += ' ';
    words += std::string(info.flag) + "=" + quote(value);
  }
  return words;
}

const char *options::defaultCudaPath() {
#ifdef BRAID_CUDA_ROOT
  return BRAID_CUDA_ROOT;
#else
  return "";
#endif
}

bool options::validate(const Options &options, std::string &error) {
  // Values set directly or through flags (llvm::cl knows only their types)
  // meet the same checks as words: ranges, positive quantities.
  for (const Info &info : all()) {
    Options copy;
    std::string value = info.get(options);
    if (!info.set(copy, value, error)) {
      error = "option '" + std::string(info.flag) + "' expects " +
              info.expected() + ", got '" + value + "'";
      return false;
    }
  }
  if (options.emit == EmitKind::Ptx && !options.cuda()) {
    error = "emit=ptx needs target=cuda";
    return false;
  }
  if (options.emulate && !options.cuda()) {
    error = "emulate needs target=cuda (the cpu target runs on the CPU "
            "already)";
    return false;
  }
  if (options.allowTf32 &&
      !(options.cuda() && options.gemm == GemmMode::Generated)) {
    error = "allow-tf32 applies to Braid's own GEMM kernels on the cuda "
            "target: it needs target=cuda and gemm=generated";
    return false;
  }
  if (!options.cuda())
    return true;
  if (options.emulate && (options.gpuFormat == GpuFormat::Bin ||
                          options.gpuFormat == GpuFormat::Fatbin)) {
    error = std::string("emulate runs kernels from their PTX, and "
                        "gpu-format=") +
            spelling(options.gpuFormat) +
            " gives SASS: use gpu-format=isa or auto";
    return false;
  }
  // sm_XX with an optional feature suffix (a: architecture-specific, f:
  // family); ptxas has the final word on whether it exists.
  const std::string &sm = options.sm;
  size_t digits = 0;
  while (digits < sm.size() && sm[digits] >= '0' && sm[digits] <= '9')
    ++digits;
  bool suffixOk =
      sm.size() == digits ||
      (sm.size() == digits + 1 && (sm[digits] == 'a' || sm[digits] == 'f'));
  if (digits == 0 || digits > 4 || !suffixOk ||
      std::atoi(sm.substr(0, digits).c_str()) < 70) {
    error = "unknown GPU architecture '" + sm +
            "', expected a compute capability such as 90a, 90 or 80 (sm_70 "
            "or newer)";
    return false;
  }
  if (options.gemm == GemmMode::Generated &&
      std::atoi(sm.substr(0, digits).c_str()) < 80) {
    error = "gemm=generated on the cuda target needs sm 80 or newer (its "
            "kernels use mma.sync and ldmatrix), not " +
            sm;
    return false;
  }
  if (options.cudaPath.empty() && !*defaultCudaPath()) {
    error = "the cuda target needs a CUDA toolkit (ptxas, libdevice): this "
            "Braid was configured without one; give its path with cuda-path";
    return false;
  }
  return true;
}

void options::resolveTargetDefaults(Options &options) {
  if (options.targetPreset == TargetPreset::Auto)
    options.targetPreset =
        options.cuda() ? TargetPreset::H200 : TargetPreset::Cpu;
  if (options.gpuFormat == GpuFormat::Auto)
    options.gpuFormat = options.emulate ? GpuFormat::Isa : GpuFormat::Bin;
}

std::string options::reportJson(const Options &options) {
  Options resolved = options;
  resolveTargetDefaults(resolved);
  std::string json = "{";
  bool first = true;
  for (const Info &info : all()) {
    if (!(info.stages & Report))
      continue;
    if (!first)
      json += ", ";
    first = false;
    json += jsonString(info.flag) + ": " + jsonValue(info, resolved);
  }
  return json + "}";
}

std::string options::describeJson() {
  static const std::pair<unsigned, const char *> stageNames[] = {
      {Import, "import"},     {Dist, "dist"},       {Xfer, "xfer"},
      {Llvm, "llvm"},         {Codegen, "codegen"}, {Run, "run"},
      {Internal, "internal"}, {Report, "report"}};
  std::string json = "[";
  Options defaults;
  for (const Info &info : all()) {
    if (json.size() > 1)
      json += ",\n ";
    json += "{\"flag\": " + jsonString(info.flag) +
            ", \"field\": " + jsonString(info.field) +
            ", \"kind\": " + jsonString(kindName(info.kind)) +
            ", \"default\": " + jsonValue(info, defaults) +
            ", \"help\": " + jsonString(info.help) + ", \"stages\": [";
    bool first = true;
    for (auto [bit, name] : stageNames)
      if (info.stages & bit) {
        json += std::string(first ? "" : ", ") + jsonString(name);
        first = false;
      }
    json += "], \"scopes\": [";
    first = true;
    for (auto [scope, name] :
         {std::pair<Scope, const char *>{Scope::Pipeline, "pipeline"},
          {Scope::Compile, "compile"},
          {Scope::Run, "run"}})
      if (info.in(scope)) {
        json += std::string(first ? "" : ", ") + jsonString(name);
        first = false;
      }
    json += "]";
    if (info.kind == Kind::Enum) {
      json += ", \"values\": [";
      for (size_t i = 0; i < info.numValues; ++i)
        json += std::string(i ? ", " : "") +
                "{\"name\": " + jsonString(info.values[i].spelling) +
                ", \"help\": " + jsonString(info.values[i].help) + "}";
      json += "]";
    }
    if (info.kind == Kind::Int)
      json += ", \"min\": " + std::to_string(info.min) +
              ", \"max\": " + std::to_string(info.max);
    json += "}";
  }
  return json + "]\n";
}
