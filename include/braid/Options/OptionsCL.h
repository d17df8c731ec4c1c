//===- OptionsCL.h - Braid's options as llvm::cl options --------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Binds the options model (Options.h) to LLVM's command-line library: the
// enum values as literal options of a cl parser (what clEnumValN does, from
// the one table), for typed pass options and tool flags alike.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_OPTIONS_OPTIONSCL_H
#define BRAID_OPTIONS_OPTIONSCL_H

#include "braid/Options/Options.h"

#include "llvm/Support/CommandLine.h"

namespace braid::options {

/// A cl modifier that gives an option of enum type E its values, as
/// `cl::values(clEnumValN(...), ...)` would. Usable on cl::opt and on MLIR
/// pass options (Passes.td: the option's additional flags).
template <typename E> struct EnumValues {
  template <typename Opt> void apply(Opt &option) const {
    for (size_t i = 0; i < EnumTraits<E>::size; ++i) {
      const EnumValue &value = EnumTraits<E>::values[i];
      option.getParser().addLiteralOption(
          value.spelling, static_cast<E>(value.value), value.help);
    }
  }
};

/// Registers a flag bound to each field of `options` that `scope` takes
/// (`--overlap`, `--sub-chunks`, ...), in `category`, with the model's help
/// and default. One-letter flags take their value attached (`-O3`). After
/// llvm::cl::ParseCommandLineOptions, check the values with
/// options::validate.
void bindCommandLine(Options &options, Scope scope,
                     llvm::cl::OptionCategory &category);

} // namespace braid::options

#endif // BRAID_OPTIONS_OPTIONSCL_H
