//===- Options.h - Braid's options as one typed model -----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The typed form of Options.def: an enum class per choice, one struct with
// a field per option, and the table every entry point binds to (flags,
// pipeline options, option words, JSON). Plain C++17 without LLVM, so that
// the runners (braid-run, braid-exec), which link no LLVM, share it.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_OPTIONS_OPTIONS_H
#define BRAID_OPTIONS_OPTIONS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace braid {

#define BRAID_ENUM(Type, Description) enum class Type : int {
#define BRAID_ENUM_VALUE(Type, Enumerator, Spelling, Help) Enumerator,
#define BRAID_ENUM_END(Type)                                                   \
  }                                                                            \
  ;
#include "braid/Options/Options.def"

namespace options {

/// What an option affects (Options.def explains each).
enum Stage : unsigned {
  Import = 1u << 0,
  Dist = 1u << 1,
  Xfer = 1u << 2,
  Llvm = 1u << 3,
  Codegen = 1u << 4,
  Run = 1u << 5,
  Internal = 1u << 6,
  Report = 1u << 7,
  /// The pass pipeline's stages.
  Pipeline = Import | Dist | Xfer | Llvm,
};

/// Which options an entry point takes.
enum class Scope {
  /// braid-opt --braid-pipeline and braidRunPipeline.
  Pipeline,
  /// braid-compile, braidCompile*, braid.compile.
  Compile,
  /// The runners: braid-exec, braidArtifactRun, Artifact.run.
  Run,
  /// braid-run, which compiles and runs: Compile and Run together.
  CompileAndRun,
};

enum class Kind { Enum, Bool, Int, Double, String };

struct EnumValue {
  const char *spelling;
  int value;
  const char *help;
};

} // namespace options

struct Options;

namespace options {

/// One option as Options.def describes it.
struct Info {
  const char *field;
  const char *flag;
  Kind kind;
  unsigned stages;
  const char *help;
  /// Enums: the type's description and its values; empty otherwise.
  const char *enumDescription;
  const EnumValue *values;
  size_t numValues;
  /// Ints: the allowed range.
  int64_t min, max;
  /// The value of this option in `options`, spelled as its words take it.
  std::string (*get)(const Options &options);
  /// Sets this option of `options` from `text`; false with `error` set.
  bool (*set)(Options &options, std::string_view text, std::string &error);

  /// Whether an entry point of `scope` takes it.
  bool in(Scope scope) const;
  /// The default value, spelled as words take it.
  std::string defaultValue() const;
  /// "auto, force or off" for enums; "an integer from 0 to 64", ... else.
  std::string expected() const;
};

/// Every option, in Options.def's order.
const std::vector<Info> &all();

/// The option named `flag` (without dashes), or null.
const Info *find(std::string_view flag);

/// The spellings and values of enum `E`.
template <typename E> struct EnumTraits;

#define BRAID_ENUM(Type, Description)                                          \
  template <> struct EnumTraits<::braid::Type> {                               \
    static constexpr const char *description = Description;                    \
    static const EnumValue values[];                                           \
    static const size_t size;                                                  \
  };
#include "braid/Options/Options.def"

/// The spelling of `value` ("auto", "force", ...).
template <typename E> const char *spelling(E value) {
  for (size_t i = 0; i < EnumTraits<E>::size; ++i)
    if (EnumTraits<E>::values[i].value == static_cast<int>(value))
      return EnumTraits<E>::values[i].spelling;
  return "?";
}

/// Sets `flag` of `options` to `value`, checking the value; false with
/// `error` set ("unknown option 'x'", "option 'overlap': expected auto,
/// force or off, got 'x'").
bool set(Options &options, std::string_view flag, std::string_view value,
         std::string &error);

/// Splits option words: whitespace-separated `key=value` (dashes before the
/// key optional; `key` alone means `key=true`), with a value in single or
/// double quotes where it holds spaces ("cuda-path='/opt/cu da'"; in double
/// quotes a backslash escapes the next character). Returns false with
/// `error` set on an unterminated quote.
bool splitWords(std::string_view text,
                std::vector<std::pair<std::string, std::string>> &words,
                std::string &error);

/// Parses option words into `options`, accepting the options `scope` takes;
/// false with `error` set on an unknown option, one `scope` does not take,
/// or a bad value.
bool parseWords(std::string_view text, Options &options, Scope scope,
                std::string &error);

/// `value` as one word for splitWords: as it is when it needs no quotes,
/// else in double quotes with `"` and `\` escaped.
std::string quote(std::string_view value);

/// The words that give `options` (only those differing from the defaults
/// that `scope` takes), for passing options on to another entry point.
std::string toWords(const Options &options, Scope scope);

/// Checks what single values cannot: combinations (emit=ptx needs
/// target=cuda), the GPU architecture's form, a toolkit for target=cuda.
/// False with `error` set.
bool validate(const Options &options, std::string &error);

/// Resolves the defaults that depend on the target (target-preset=auto).
void resolveTargetDefaults(Options &options);

/// The options `Report` marks, resolved, as the JSON object of the report's
/// "options" key.
std::string reportJson(const Options &options);

/// Every option as a JSON array (flag, field, kind, stages, default, help,
/// values, range): what the C API's braidGetOptions returns and the Python
/// package builds its keyword arguments and documentation from.
std::string describeJson();

/// The CUDA toolkit the build found (empty when it found none).
const char *defaultCudaPath();

} // namespace options

/// Every option of Options.def, typed, with its default.
struct Options {
#define BRAID_OPTION(Field, Flag, Type, Default, Stages, Help)                 \
  Type Field = Default;
#include "braid/Options/Options.def"

  bool cuda() const { return target == Target::Cuda; }
};

namespace options {

/// Calls `visit(info, &Options::field)` for every option, in Options.def's
/// order: how binders (command-line flags, pass options) reach each field
/// with its type.
template <typename Visitor> void visitFields(Visitor &&visit) {
#define BRAID_OPTION(Field, Flag, Type, Default, Stages, Help)                 \
  visit(*find(Flag), &Options::Field);
#include "braid/Options/Options.def"
}

} // namespace options

} // namespace braid

#endif // BRAID_OPTIONS_OPTIONS_H
