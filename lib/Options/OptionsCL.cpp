//===- OptionsCL.cpp - Braid's options as llvm::cl options ------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//

#include "braid/Options/OptionsCL.h"

#include <deque>
#include <memory>

using namespace braid;
using namespace braid::options;
namespace cl = llvm::cl;

namespace {

/// Help texts outlive the flags that point at them.
llvm::StringRef keep(std::string text) {
  static std::deque<std::string> texts;
  texts.push_back(std::move(text));
  return texts.back();
}

/// Flags live as long as the process, as static cl::opts do.
std::vector<std::unique_ptr<cl::Option>> &flags() {
  static std::vector<std::unique_ptr<cl::Option>> all;
  return all;
}

} // namespace

void options::bindCommandLine(Options &options, Scope scope,
                              cl::OptionCategory &category) {
  visitFields([&](const Info &info, auto member) {
    if (!info.in(scope))
      return;
    using T = std::remove_reference_t<decltype(options.*member)>;
    std::string help = info.help;
    if (info.kind != Kind::Enum && info.kind != Kind::Bool)
      help += " (default: " +
              (info.defaultValue().empty() ? std::string("none")
                                           : info.defaultValue()) +
              ")";
    else if (info.kind == Kind::Enum)
      help += " (default: " + info.defaultValue() + ")";
    cl::desc description(keep(help));
    std::unique_ptr<cl::opt<T, /*ExternalStorage=*/true>> flag;
    if constexpr (std::is_enum_v<T>)
      flag = std::make_unique<cl::opt<T, true>>(
          llvm::StringRef(info.flag), description,
          cl::location(options.*member), cl::cat(category), EnumValues<T>());
    else
      flag = std::make_unique<cl::opt<T, true>>(
          llvm::StringRef(info.flag), description,
          cl::location(options.*member), cl::cat(category));
    if (std::string_view(info.flag).size() == 1)
      flag->setFormattingFlag(cl::Prefix);
    if (info.kind == Kind::Int)
      flag->setValueStr("int");
    flags().push_back(std::move(flag));
  });
}
