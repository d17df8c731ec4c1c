//===- PtxParser.cpp - PTX text to decoded functions ----------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// A lexer and a recursive parser for the subset of PTX that LLVM's NVPTX
// back end and Braid's runtime emit: module directives, variables of the
// global, const, shared and local spaces (with initializers), kernels with
// their parameters and performance directives, register declarations,
// labels, predicated instructions with vector, address and immediate
// operands. Each instruction is decoded here, once: its opcode's modifiers
// become Instruction fields, registers become slots, symbols become
// variables and labels become instruction indices. Whatever is not
// understood fails the parse with its line.
//
//===----------------------------------------------------------------------===//

#include "Ptx.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>

namespace braid::emu::ptx {

//===----------------------------------------------------------------------===//
// Names of types, spaces, ...
//===----------------------------------------------------------------------===//

namespace {

/// One spelling of an enumerator: what the parser reads and what messages
/// print, from the same table.
template <typename E> struct Spelling {
  const char *name;
  E value;
};

const Spelling<Type> typeNames[] = {
    {"pred", Type::Pred},     {"b8", Type::B8},     {"b16", Type::B16},
    {"b32", Type::B32},       {"b64", Type::B64},   {"b128", Type::B128},
    {"u8", Type::U8},         {"u16", Type::U16},   {"u32", Type::U32},
    {"u64", Type::U64},       {"s8", Type::S8},     {"s16", Type::S16},
    {"s32", Type::S32},       {"s64", Type::S64},   {"f16", Type::F16},
    {"f16x2", Type::F16x2},   {"bf16", Type::BF16}, {"bf16x2", Type::BF16x2},
    {"f32", Type::F32},       {"f64", Type::F64},   {"e4m3x2", Type::E4M3x2},
    {"e5m2x2", Type::E5M2x2},
};
const Spelling<Space> spaceNames[] = {
    {"generic", Space::Generic}, {"global", Space::Global},
    {"shared", Space::Shared},   {"local", Space::Local},
    {"param", Space::Param},     {"const", Space::Const},
};
const Spelling<Sem> semNames[] = {
    {"weak", Sem::Weak},       {"volatile", Sem::Volatile},
    {"relaxed", Sem::Relaxed}, {"acquire", Sem::Acquire},
    {"release", Sem::Release}, {"acq_rel", Sem::AcqRel},
    {"sc", Sem::Sc},
};
// "" is no scope qualifier (membar.gl, gpu scope, is the parser's).
const Spelling<Scope> scopeNames[] = {
    {"", Scope::None},   {"cta", Scope::Cta}, {"cluster", Scope::Cluster},
    {"gpu", Scope::Gpu}, {"sys", Scope::Sys},
};

/// The enumerator `name` spells in `table`, if any.
template <typename E, size_t N>
std::optional<E> parseName(const Spelling<E> (&table)[N],
                           const std::string &name) {
  for (const Spelling<E> &entry : table)
    if (name == entry.name)
      return entry.value;
  return std::nullopt;
}

template <typename E, size_t N>
const char *printName(const Spelling<E> (&table)[N], E value) {
  for (const Spelling<E> &entry : table)
    if (entry.value == value)
      return entry.name;
  return "?";
}

bool typeOf(const std::string &name, Type &type) {
  std::optional<Type> parsed = parseName(typeNames, name);
  if (parsed)
    type = *parsed;
  return parsed.has_value();
}

} // namespace

const char *typeName(Type type) { return printName(typeNames, type); }
const char *spaceName(Space space) { return printName(spaceNames, space); }
const char *semName(Sem sem) { return printName(semNames, sem); }
const char *scopeName(Scope scope) { return printName(scopeNames, scope); }

std::string describe(const Module &module, const Instruction &instruction) {
  (void)module;
  return "line " + std::to_string(instruction.line) + " `" + instruction.text +
         "`";
}

namespace {

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

struct Token {
  enum Kind { End, Ident, Number, String, Punct };
  Kind kind = End;
  std::string text;
  uint32_t line = 0;
};

/// Splits PTX text into tokens. Identifiers take in dots, so that an opcode
/// with its modifiers (`ld.global.v4.b32`), a directive (`.reg`) and a
/// special register (`%tid.x`) are one token each.
bool lex(const std::string &text, std::vector<Token> &tokens,
         std::string &error) {
  uint32_t line = 1;
  size_t i = 0, n = text.size();
  auto identChar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
           c == '$' || c == '%' || c == '.';
  };
  while (i < n) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      while (i < n && text[i] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(text[i] == '*' && text[i + 1] == '/')) {
        if (text[i] == '\n')
          ++line;
        ++i;
      }
      i += 2;
      continue;
    }
    Token token;
    token.line = line;
    if (c == '"') {
      size_t start = ++i;
      while (i < n && text[i] != '"' && text[i] != '\n')
        ++i;
      if (i >= n || text[i] != '"') {
        error = "line " + std::to_string(line) + ": unterminated string";
        return false;
      }
      token.kind = Token::String;
      token.text = text.substr(start, i - start);
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = i;
      // 0f3F800000, 0d..., 0x1F, 42, 1.5, 1e-3, 42U
      while (i < n && (std::isalnum(static_cast<unsigned char>(text[i])) ||
                       text[i] == '.' ||
                       ((text[i] == '-' || text[i] == '+') &&
                        (text[i - 1] == 'e' || text[i - 1] == 'E') &&
                        !(text[start] == '0' && start + 1 < n &&
                          std::strchr("xXfFdD", text[start + 1])))))
        ++i;
      token.kind = Token::Number;
      token.text = text.substr(start, i - start);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
               c == '$' || c == '%' || c == '.') {
      size_t start = i;
      while (i < n && identChar(text[i]))
        ++i;
      token.kind = Token::Ident;
      token.text = text.substr(start, i - start);
    } else {
      token.kind = Token::Punct;
      token.text = std::string(1, c);
      ++i;
    }
    tokens.push_back(std::move(token));
  }
  Token end;
  end.line = line;
  tokens.push_back(end);
  return true;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

std::vector<std::string> splitDots(const std::string &text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot - start));
    if (dot == std::string::npos)
      break;
    start = dot + 1;
  }
  return parts;
}

bool specialOf(const std::string &name, Special &special) {
  static const std::pair<const char *, Special> names[] = {
      {"%tid.x", Special::TidX},
      {"%tid.y", Special::TidY},
      {"%tid.z", Special::TidZ},
      {"%ntid.x", Special::NtidX},
      {"%ntid.y", Special::NtidY},
      {"%ntid.z", Special::NtidZ},
      {"%ctaid.x", Special::CtaidX},
      {"%ctaid.y", Special::CtaidY},
      {"%ctaid.z", Special::CtaidZ},
      {"%nctaid.x", Special::NctaidX},
      {"%nctaid.y", Special::NctaidY},
      {"%nctaid.z", Special::NctaidZ},
      {"%laneid", Special::LaneId},
      {"%warpid", Special::WarpId},
      {"%nwarpid", Special::NWarpId},
      {"%smid", Special::SmId},
      {"%nsmid", Special::NSmId},
      {"%gridid", Special::GridId},
      {"%lanemask_eq", Special::LaneMaskEq},
      {"%lanemask_le", Special::LaneMaskLe},
      {"%lanemask_lt", Special::LaneMaskLt},
      {"%lanemask_ge", Special::LaneMaskGe},
      {"%lanemask_gt", Special::LaneMaskGt},
      {"%clock", Special::Clock},
      {"%clock64", Special::Clock64},
      {"%globaltimer", Special::GlobalTimer},
      {"%dynamic_smem_size", Special::DynamicSmemSize},
      {"%total_smem_size", Special::TotalSmemSize},
  };
  for (const auto &entry : names)
    if (name == entry.first) {
      special = entry.second;
      return true;
    }
  return false;
}

class Parser {
public:
  Parser(const std::string &text, std::vector<Token> tokens, Module &module)
      : tokens(std::move(tokens)), module(module) {
    size_t start = 0;
    for (;;) {
      size_t end = text.find('\n', start);
      module.lines.push_back(text.substr(start, end - start));
      if (end == std::string::npos)
        break;
      start = end + 1;
    }
  }

  bool parseModule();
  std::string error;

private:
  std::vector<Token> tokens;
  size_t at = 0;
  Module &module;

  // Names in scope while a function is parsed (innermost last).
  std::vector<std::map<std::string, int32_t>> registerScopes;
  std::vector<std::map<std::string, int32_t>> variableScopes;
  /// The `.param` variables of call sequences in bodies: kept in the
  /// thread's local memory, which `st.param` and `ld.param` of them use.
  std::set<int32_t> callParameters;
  std::map<std::string, int32_t> moduleVariables;
  Function *function = nullptr;
  std::map<std::string, uint32_t> labels;
  struct Pending {
    size_t instruction, operand;
    std::string label;
    uint32_t line;
  };
  std::vector<Pending> pendingLabels;

  const Token &peek(size_t ahead = 0) const {
    return tokens[std::min(at + ahead, tokens.size() - 1)];
  }
  const Token &next() {
    const Token &token = peek();
    if (at < tokens.size() - 1)
      ++at;
    return token;
  }
  bool is(const char *text, size_t ahead = 0) const {
    return peek(ahead).kind != Token::End && peek(ahead).text == text;
  }
  bool accept(const char *text) {
    if (!is(text))
      return false;
    next();
    return true;
  }
  bool fail(const std::string &message, uint32_t line = 0) {
    if (error.empty())
      error =
          "line " + std::to_string(line ? line : peek().line) + ": " + message;
    return false;
  }
  bool expect(const char *text) {
    if (accept(text))
      return true;
    return fail(std::string("expected '") + text + "', found '" +
                (peek().kind == Token::End ? "end of text" : peek().text) +
                "'");
  }
  /// Skips the rest of a line-based directive (no ';').
  void skipLine(uint32_t line) {
    while (peek().kind != Token::End && peek().line == line)
      next();
  }
  bool parseInteger(const std::string &text, int64_t &value);
  bool parseVariable(Space space, bool external, bool moduleScope);
  bool parseFunction(bool entry);
  bool parseParams(Function &f, bool kernel);
  bool parseBody();
  bool parseStatement();
  bool parseRegisters();
  bool parseInstruction();
  bool parseOperand(Operand &operand, bool allowPair);
  bool parseAddress(Operand &operand);
  bool decode(Instruction &instruction, const std::string &opcode,
              uint32_t line);
  bool decodeAsyncCopy(Instruction &in, const std::string &opcode,
                       const std::vector<std::string> &parts, uint32_t line);
  bool decodeModifiers(Instruction &in, const std::string &opcode,
                       const std::vector<std::string> &parts,
                       std::vector<Type> &types, uint32_t line);
  bool settleTypes(Instruction &in, const std::string &opcode,
                   const std::vector<std::string> &parts,
                   const std::vector<Type> &types, uint32_t line);
  bool checkOperandCount(const Instruction &in, const std::string &opcode,
                         uint32_t line);
  bool unsupported(const std::string &opcode, const std::string &what,
                   uint32_t line) {
    return fail("unsupported instruction '" + opcode + "'" +
                    (what.empty() ? "" : " (" + what + ")"),
                line);
  }
  int32_t findRegister(const std::string &name) const;
  int32_t findVariable(const std::string &name) const;
  bool parseCall(Instruction &instruction, uint32_t line);
  void layoutShared(Function &f);
};

bool Parser::parseInteger(const std::string &text, int64_t &value) {
  const char *s = text.c_str();
  char *end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(s, &end, 0);
  if (end == s || errno)
    return false;
  while (*end == 'U' || *end == 'u')
    ++end;
  if (*end)
    return false;
  value = static_cast<int64_t>(v);
  return true;
}

int32_t Parser::findRegister(const std::string &name) const {
  for (auto it = registerScopes.rbegin(); it != registerScopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return found->second;
  }
  return -1;
}

int32_t Parser::findVariable(const std::string &name) const {
  for (auto it = variableScopes.rbegin(); it != variableScopes.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end())
      return found->second;
  }
  auto found = moduleVariables.find(name);
  return found == moduleVariables.end() ? -1 : found->second;
}

bool Parser::parseModule() {
  bool sawVersion = false, sawTarget = false;
  while (peek().kind != Token::End) {
    const Token &token = peek();
    uint32_t line = token.line;
    if (token.text == ".version") {
      sawVersion = true;
      skipLine(line);
    } else if (token.text == ".target") {
      sawTarget = true;
      next();
      while (peek().kind != Token::End && peek().line == line) {
        const std::string &t = next().text;
        if (t.rfind("sm_", 0) == 0)
          module.smVersion = static_cast<unsigned>(std::atoi(t.c_str() + 3));
      }
    } else if (token.text == ".address_size") {
      next();
      if (peek().text != "64")
        return fail("only .address_size 64 is supported");
      next();
    } else if (token.text == ".file" || token.text == ".loc") {
      skipLine(line);
    } else if (token.text == ".section") {
      // Debug sections: skip their braces.
      next();
      while (peek().kind != Token::End && !is("{"))
        next();
      int depth = 0;
      do {
        if (is("{"))
          ++depth;
        else if (is("}"))
          --depth;
        next();
      } while (depth > 0 && peek().kind != Token::End);
    } else {
      // Linkage, then a variable or a function.
      bool external = false;
      while (is(".visible") || is(".extern") || is(".weak") || is(".common")) {
        external |= is(".extern");
        next();
      }
      if (is(".entry")) {
        next();
        if (!parseFunction(true))
          return false;
      } else if (is(".func")) {
        next();
        if (!parseFunction(false))
          return false;
      } else if (is(".global") || is(".const") || is(".shared")) {
        Space space = is(".global")  ? Space::Global
                      : is(".const") ? Space::Const
                                     : Space::Shared;
        next();
        if (!parseVariable(space, external, true))
          return false;
      } else {
        return fail("unexpected '" + token.text + "' at module scope");
      }
    }
  }
  if (!sawVersion || !sawTarget)
    return fail("not PTX: no .version and .target directives", 1);
  if (module.entries.empty())
    return fail("the module has no .entry", 1);
  return true;
}

/// `[.align N] [.ptr ...] .type name[size]... [= init];` after the space.
bool Parser::parseVariable(Space space, bool external, bool moduleScope) {
  Variable variable;
  variable.space = space;
  variable.external = external;
  variable.line = peek().line;
  Type type = Type::None;
  unsigned vector = 1;
  bool explicitAlign = false;
  while (peek().kind == Token::Ident && peek().text[0] == '.') {
    std::string directive = next().text;
    if (directive == ".align") {
      int64_t align = 0;
      if (!parseInteger(next().text, align) || align <= 0 ||
          (align & (align - 1)))
        return fail("bad .align");
      variable.align = static_cast<uint32_t>(align);
      explicitAlign = true;
    } else if (directive == ".v2" || directive == ".v4") {
      vector = directive == ".v2" ? 2 : 4;
    } else if (directive == ".ptr" || directive == ".global" ||
               directive == ".shared" || directive == ".const" ||
               directive == ".local") {
      // .ptr .space .align N on parameters: attributes only.
    } else if (!typeOf(directive.substr(1), type)) {
      return fail("unsupported variable attribute '" + directive + "'");
    }
  }
  if (type == Type::None)
    return fail("a variable without a type");
  if (peek().kind != Token::Ident)
    return fail("expected a variable name");
  variable.name = next().text;
  uint64_t elementBytes = std::max(1u, bitsOf(type) / 8) * vector;
  if (!explicitAlign)
    variable.align = static_cast<uint32_t>(elementBytes);
  uint64_t count = 1;
  bool unsized = false;
  while (accept("[")) {
    if (accept("]")) {
      unsized = true;
      continue;
    }
    int64_t dim = 0;
    if (!parseInteger(next().text, dim) || dim < 0)
      return fail("bad array size");
    count *= static_cast<uint64_t>(dim);
    if (!expect("]"))
      return false;
  }
  if (unsized && space != Space::Shared)
    return fail("only .extern .shared arrays may be unsized");
  if (unsized)
    variable.external = true;
  variable.size = unsized ? 0 : elementBytes * count;
  if (accept("=")) {
    if (space != Space::Global && space != Space::Const)
      return fail("only global and const variables take initializers");
    std::vector<std::string> values;
    std::function<bool()> items = [&]() -> bool {
      if (accept("{")) {
        if (!accept("}"))
          do {
            if (!items())
              return false;
          } while (accept(","));
        return expect("}") || true;
      }
      bool negative = accept("-");
      if (peek().kind != Token::Number)
        return fail("unsupported initializer '" + peek().text + "'");
      values.push_back((negative ? "-" : "") + next().text);
      return true;
    };
    if (!items())
      return false;
    variable.init.assign(variable.size, 0);
    if (values.size() > count * vector)
      return fail("too many initializers");
    for (size_t i = 0; i < values.size(); ++i) {
      const std::string &text = values[i];
      uint64_t bits = 0;
      bool negative = text[0] == '-';
      std::string digits = negative ? text.substr(1) : text;
      if (digits.size() > 2 && digits[0] == '0' &&
          (digits[1] == 'f' || digits[1] == 'F' || digits[1] == 'd' ||
           digits[1] == 'D')) {
        bits = std::strtoull(digits.c_str() + 2, nullptr, 16);
      } else if (isFloat(type)) {
        double value = std::strtod(digits.c_str(), nullptr);
        value = negative ? -value : value;
        if (type == Type::F32) {
          float f = static_cast<float>(value);
          std::memcpy(&bits, &f, 4);
        } else {
          std::memcpy(&bits, &value, 8);
        }
      } else {
        int64_t value = 0;
        if (!parseInteger(digits, value))
          return fail("bad initializer '" + text + "'");
        bits = static_cast<uint64_t>(negative ? -value : value);
      }
      uint64_t size = elementBytes / vector;
      std::memcpy(variable.init.data() + i * size, &bits, size);
    }
  }
  if (!expect(";"))
    return false;
  auto index = static_cast<int32_t>(module.variables.size());
  if (moduleScope) {
    if (moduleVariables.count(variable.name))
      return fail("'" + variable.name + "' is declared twice");
    moduleVariables[variable.name] = index;
  } else {
    variableScopes.back()[variable.name] = index;
  }
  if (space == Space::Global || space == Space::Const) {
    module.imageBytes = (module.imageBytes + variable.align - 1) /
                        variable.align * variable.align;
    variable.offset = module.imageBytes;
    module.imageBytes += variable.size;
  } else if (space == Space::Local && function) {
    function->localBytes = (function->localBytes + variable.align - 1) /
                           variable.align * variable.align;
    variable.offset = function->localBytes;
    function->localBytes += variable.size;
  }
  module.variables.push_back(std::move(variable));
  return true;
}

bool Parser::parseParams(Function &f, bool kernel) {
  if (!accept("("))
    return true;
  if (accept(")"))
    return true;
  do {
    if (!expect(".param"))
      return false;
    Variable param;
    param.space = Space::Param;
    param.line = peek().line;
    Type type = Type::None;
    while (peek().kind == Token::Ident && peek().text[0] == '.') {
      std::string directive = next().text;
      if (directive == ".align") {
        int64_t align = 0;
        if (!parseInteger(next().text, align) || align <= 0)
          return fail("bad .align");
        param.align = static_cast<uint32_t>(align);
      } else if (directive == ".ptr") {
        // `.ptr [.space] [.align N]` describes the pointee, not the
        // parameter.
        if (is(".global") || is(".shared") || is(".const") || is(".local"))
          next();
        if (accept(".align"))
          next();
      } else if (!typeOf(directive.substr(1), type)) {
        return fail("unsupported parameter attribute '" + directive + "'");
      }
    }
    if (type == Type::None || peek().kind != Token::Ident)
      return fail("expected a parameter type and name");
    param.name = next().text;
    uint64_t count = 1;
    while (accept("[")) {
      int64_t dim = 0;
      if (!parseInteger(next().text, dim) || dim <= 0)
        return fail("bad parameter array size");
      count *= static_cast<uint64_t>(dim);
      if (!expect("]"))
        return false;
    }
    uint64_t bytes = std::max(1u, bitsOf(type) / 8);
    param.size = bytes * count;
    if (param.align == 1)
      param.align = static_cast<uint32_t>(bytes);
    f.paramBytes = (f.paramBytes + param.align - 1) / param.align * param.align;
    param.offset = f.paramBytes;
    f.paramBytes += param.size;
    auto index = static_cast<int32_t>(module.variables.size());
    variableScopes.back()[param.name] = index;
    if (kernel)
      f.params.push_back(index);
    module.variables.push_back(std::move(param));
  } while (accept(","));
  return expect(")");
}

bool Parser::parseFunction(bool entry) {
  auto owned = std::make_unique<Function>();
  Function &f = *owned;
  f.entry = entry;
  f.line = peek().line;
  function = &f;
  registerScopes.assign(1, {});
  variableScopes.assign(1, {});
  labels.clear();
  pendingLabels.clear();
  if (!entry && is("(")) {
    // The return parameter of a .func.
    if (!parseParams(f, false))
      return false;
  }
  if (peek().kind != Token::Ident)
    return fail("expected a function name");
  f.name = next().text;
  if (!parseParams(f, entry))
    return false;
  // Performance directives.
  while (peek().kind == Token::Ident && peek().text[0] == '.') {
    std::string directive = next().text;
    if (directive == ".maxntid" || directive == ".reqntid") {
      uint64_t threads = 1;
      do {
        int64_t value = 0;
        if (!parseInteger(next().text, value) || value <= 0)
          return fail("bad " + directive);
        threads *= static_cast<uint64_t>(value);
      } while (accept(","));
      f.maxThreads = static_cast<uint32_t>(threads);
    } else if (directive == ".minnctapersm" || directive == ".maxnreg" ||
               directive == ".maxnctapersm" || directive == ".maxclusterrank") {
      next();
    } else if (directive == ".noreturn") {
    } else if (directive == ".pragma") {
      next();
      accept(";");
    } else {
      return fail("unsupported function directive '" + directive + "'");
    }
  }
  if (accept(";")) {
    // A declaration (of a function defined elsewhere): nothing to run.
    function = nullptr;
    return true;
  }
  if (!expect("{"))
    return false;
  if (!parseBody())
    return false;
  for (const Pending &pending : pendingLabels) {
    auto found = labels.find(pending.label);
    if (found == labels.end())
      return fail("unknown label '" + pending.label + "'", pending.line);
    f.code[pending.instruction].operands[pending.operand].target =
        found->second;
  }
  // Running off the end is a return.
  if (f.code.empty() ||
      (f.code.back().op != Op::Ret && f.code.back().op != Op::Exit &&
       f.code.back().op != Op::Bra)) {
    Instruction ret;
    ret.op = Op::Ret;
    ret.line = peek().line;
    ret.text = "ret (end of function)";
    f.code.push_back(ret);
  }
  layoutShared(f);
  if (entry) {
    if (module.entries.count(f.name))
      return fail("kernel '" + f.name + "' is defined twice", f.line);
    module.entries[f.name] = &f;
    if (module.name.empty())
      module.name = f.name;
  }
  module.functions.push_back(std::move(owned));
  function = nullptr;
  return true;
}

/// Static shared variables in declaration order (module scope first, then
/// the function's), each at its alignment; the dynamic region after them,
/// at the largest alignment any extern declaration asks (at least 16), so
/// that every `.extern .shared` array of the module starts at the same
/// address, as on the hardware.
void Parser::layoutShared(Function &f) {
  uint64_t offset = 0;
  uint32_t dynamicAlign = 16;
  std::set<int32_t> used;
  for (const Instruction &instruction : f.code)
    for (const Operand &operand : instruction.operands) {
      if (operand.symbol >= 0)
        used.insert(operand.symbol);
      for (const Operand &element : operand.elements)
        if (element.symbol >= 0)
          used.insert(element.symbol);
    }
  for (size_t i = 0; i < module.variables.size(); ++i) {
    const Variable &variable = module.variables[i];
    if (variable.space != Space::Shared)
      continue;
    if (variable.external) {
      dynamicAlign = std::max(dynamicAlign, variable.align);
      continue;
    }
    // Module-scope shared variables belong to every kernel that uses them;
    // function-scope ones (declared inside this function) to it alone.
    if (!used.count(static_cast<int32_t>(i)))
      continue;
    offset = (offset + variable.align - 1) / variable.align * variable.align;
    f.sharedOffsets[static_cast<int32_t>(i)] = offset;
    offset += variable.size;
  }
  f.staticSharedBytes = offset;
  f.dynamicSharedOffset =
      (offset + dynamicAlign - 1) / dynamicAlign * dynamicAlign;
  for (size_t i = 0; i < module.variables.size(); ++i)
    if (module.variables[i].space == Space::Shared &&
        module.variables[i].external)
      f.sharedOffsets[static_cast<int32_t>(i)] = f.dynamicSharedOffset;
}

bool Parser::parseBody() {
  registerScopes.emplace_back();
  variableScopes.emplace_back();
  while (!accept("}")) {
    if (peek().kind == Token::End)
      return fail("unterminated function body");
    if (!parseStatement())
      return false;
  }
  registerScopes.pop_back();
  variableScopes.pop_back();
  return true;
}

bool Parser::parseRegisters() {
  Type type = Type::None;
  while (peek().kind == Token::Ident && peek().text[0] == '.') {
    std::string directive = next().text;
    if (directive == ".v2" || directive == ".v4")
      return fail("vector registers are not supported");
    if (!typeOf(directive.substr(1), type))
      return fail("unsupported register type '" + directive + "'");
  }
  do {
    if (peek().kind != Token::Ident)
      return fail("expected a register name");
    std::string name = next().text;
    int64_t count = -1;
    if (accept("<")) {
      if (!parseInteger(next().text, count) || count < 0)
        return fail("bad register count");
      if (!expect(">"))
        return false;
    }
    auto declare = [&](const std::string &reg) {
      auto slot = static_cast<int32_t>(function->registerNames.size());
      function->registerNames.push_back(reg);
      function->registerTypes.push_back(type);
      registerScopes.back()[reg] = slot;
    };
    if (count < 0)
      declare(name);
    else
      for (int64_t i = 0; i < count; ++i)
        declare(name + std::to_string(i));
  } while (accept(","));
  return expect(";");
}

bool Parser::parseStatement() {
  const Token &token = peek();
  uint32_t line = token.line;
  if (token.text == "{") {
    next();
    return parseBody();
  }
  if (token.text == ".reg") {
    next();
    return parseRegisters();
  }
  if (token.text == ".local" || token.text == ".shared" ||
      token.text == ".param") {
    Space space = token.text == ".local"    ? Space::Local
                  : token.text == ".shared" ? Space::Shared
                                            : Space::Param;
    next();
    // A call's parameters (a call sequence's `.param`s) live in the
    // thread's local memory.
    if (space == Space::Param) {
      if (!parseVariable(Space::Local, false, false))
        return false;
      callParameters.insert(static_cast<int32_t>(module.variables.size() - 1));
      return true;
    }
    return parseVariable(space, false, false);
  }
  if (token.text == ".pragma") {
    next();
    next();
    return expect(";");
  }
  if (token.text == ".loc" || token.text == ".file") {
    skipLine(line);
    return true;
  }
  if (token.kind == Token::Ident && peek(1).text == ":" &&
      token.text[0] != '.') {
    std::string name = next().text;
    next();
    if (labels.count(name))
      return fail("label '" + name + "' is defined twice", line);
    labels[name] = static_cast<uint32_t>(function->code.size());
    return true;
  }
  return parseInstruction();
}

bool Parser::parseAddress(Operand &operand) {
  // After '[': reg, symbol or number, then optional +/- offsets.
  operand.kind = Operand::Address;
  bool first = true;
  while (!accept("]")) {
    int sign = 1;
    if (!first) {
      if (accept("+"))
        sign = 1;
      else if (accept("-"))
        sign = -1;
      else
        return fail("bad address");
    }
    while (accept("-"))
      sign = -sign;
    while (accept("+")) {
    }
    const Token &token = next();
    if (token.kind == Token::Number) {
      int64_t value = 0;
      if (!parseInteger(token.text, value))
        return fail("bad address offset '" + token.text + "'");
      operand.offset += sign * value;
    } else if (token.kind == Token::Ident && sign > 0) {
      int32_t reg = findRegister(token.text);
      if (reg >= 0 && operand.reg < 0) {
        operand.reg = reg;
      } else {
        int32_t symbol = findVariable(token.text);
        if (symbol < 0 || operand.symbol >= 0)
          return fail("unknown name '" + token.text + "' in an address");
        operand.symbol = symbol;
      }
    } else {
      return fail("bad address");
    }
    first = false;
  }
  return true;
}

bool Parser::parseOperand(Operand &operand, bool allowPair) {
  if (accept("[")) {
    return parseAddress(operand);
  }
  if (accept("{")) {
    operand.kind = Operand::Vector;
    do {
      Operand element;
      if (!parseOperand(element, false))
        return false;
      operand.elements.push_back(std::move(element));
    } while (accept(","));
    return expect("}");
  }
  bool negated = accept("!");
  bool minus = accept("-");
  const Token &token = next();
  if (token.kind == Token::Number) {
    operand.kind = Operand::Imm;
    const std::string &t = token.text;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'f' || t[1] == 'F')) {
      // The bits, whatever the instruction's type (mov.b32 %r, 0f4B400001).
      uint64_t bits = std::strtoull(t.c_str() + 2, nullptr, 16) & 0xFFFFFFFFu;
      operand.bits = minus ? bits ^ 0x80000000u : bits;
      operand.hexFloatBits = 32;
    } else if (t.size() > 2 && t[0] == '0' && (t[1] == 'd' || t[1] == 'D')) {
      uint64_t bits = std::strtoull(t.c_str() + 2, nullptr, 16);
      operand.bits = minus ? bits ^ (1ull << 63) : bits;
      operand.hexFloatBits = 64;
    } else if (t.find_first_of(".eE") != std::string::npos &&
               !(t.size() > 1 && (t[1] == 'x' || t[1] == 'X'))) {
      operand.decimalFloat = true;
      operand.real = std::strtod(t.c_str(), nullptr) * (minus ? -1 : 1);
    } else {
      int64_t value = 0;
      if (!parseInteger(t, value))
        return fail("bad number '" + t + "'");
      operand.bits = static_cast<uint64_t>(minus ? -value : value);
    }
    return true;
  }
  if (token.kind != Token::Ident || minus)
    return fail("unexpected '" + token.text + "' in operands");
  if (token.text == "_") {
    operand.kind = Operand::Sink;
  } else if (int32_t reg = findRegister(token.text); reg >= 0) {
    operand.kind = Operand::Reg;
    operand.reg = reg;
    operand.negated = negated;
  } else if (Special special; specialOf(token.text, special)) {
    operand.kind = Operand::Special;
    operand.special = special;
  } else if (int32_t symbol = findVariable(token.text); symbol >= 0) {
    operand.kind = Operand::Symbol;
    operand.symbol = symbol;
  } else if (token.text[0] == '%') {
    return fail("unknown register '" + token.text + "'");
  } else {
    // A label, resolved when the function ends.
    operand.kind = Operand::Label;
    pendingLabels.push_back({function->code.size(), 0, token.text, token.line});
  }
  if (allowPair && accept("|")) {
    Operand second;
    if (!parseOperand(second, false))
      return false;
    Operand pair;
    pair.kind = Operand::Vector;
    pair.elements.push_back(std::move(operand));
    pair.elements.push_back(std::move(second));
    operand = std::move(pair);
  }
  return true;
}

bool Parser::parseInstruction() {
  Instruction instruction;
  uint32_t line = peek().line;
  instruction.line = line;
  if (line <= module.lines.size()) {
    std::string text = module.lines[line - 1];
    size_t start = text.find_first_not_of(" \t");
    size_t end = text.find_last_not_of(" \t\r");
    instruction.text =
        start == std::string::npos ? "" : text.substr(start, end - start + 1);
    // Tabs between opcode and operands read better as one space.
    std::replace(instruction.text.begin(), instruction.text.end(), '\t', ' ');
  }
  if (accept("@")) {
    instruction.guardNegated = accept("!");
    const Token &pred = next();
    instruction.guard = findRegister(pred.text);
    if (instruction.guard < 0)
      return fail("unknown predicate '" + pred.text + "'");
  }
  if (peek().kind != Token::Ident)
    return fail("expected an instruction, found '" + peek().text + "'");
  std::string opcode = next().text;
  if (opcode == "call" || opcode == "call.uni")
    return parseCall(instruction, line);
  size_t firstPending = pendingLabels.size();
  if (!is(";")) {
    do {
      Operand operand;
      if (!parseOperand(operand, true))
        return false;
      instruction.operands.push_back(std::move(operand));
      if (pendingLabels.size() > firstPending &&
          pendingLabels.back().instruction == function->code.size() &&
          instruction.operands.back().kind == Operand::Label)
        pendingLabels.back().operand = instruction.operands.size() - 1;
    } while (accept(","));
  }
  if (!expect(";"))
    return false;
  if (!decode(instruction, opcode, line))
    return false;
  // ld.param and st.param of a call's parameters: local memory.
  if ((instruction.op == Op::Ld || instruction.op == Op::St) &&
      instruction.space == Space::Param) {
    const Operand &address =
        instruction.operands[instruction.op == Op::Ld ? 1 : 0];
    if (address.symbol >= 0 && callParameters.count(address.symbol))
      instruction.space = Space::Local;
  }
  function->code.push_back(std::move(instruction));
  return true;
}

/// `call[.uni] __assertfail, (p0, p1, p2, p3, p4);`: the one call the
/// emulated device runs (a failed device-side assertion, which traps
/// after saying what failed). Any other call is refused.
bool Parser::parseCall(Instruction &instruction, uint32_t line) {
  if (accept("("))
    return fail("calls that return values are not supported", line);
  const Token &callee = next();
  if (callee.text != "__assertfail")
    return fail("calls are not supported (only __assertfail, a device-side "
                "assertion); this one calls '" +
                    callee.text + "'",
                line);
  if (!expect(",") || !expect("("))
    return false;
  do {
    const Token &name = next();
    int32_t symbol = findVariable(name.text);
    if (symbol < 0 || !callParameters.count(symbol))
      return fail("__assertfail's argument '" + name.text +
                      "' is not a parameter of the call sequence",
                  line);
    Operand operand;
    operand.kind = Operand::Address;
    operand.symbol = symbol;
    instruction.operands.push_back(operand);
  } while (accept(","));
  if (!expect(")") || !expect(";"))
    return false;
  if (instruction.operands.size() != 5)
    return fail("__assertfail takes 5 arguments (message, file, line, "
                "function, character size)",
                line);
  instruction.op = Op::AssertFail;
  function->code.push_back(std::move(instruction));
  return true;
}

//===----------------------------------------------------------------------===//
// Decoding opcodes
//===----------------------------------------------------------------------===//

/// The opcode's family, then its modifiers, its types, and its operand
/// count, each checked against what the family takes.
bool Parser::decode(Instruction &in, const std::string &opcode, uint32_t line) {
  std::vector<std::string> parts = splitDots(opcode);
  static const std::map<std::string, Op> ops = {
      {"mov", Op::Mov},
      {"add", Op::Add},
      {"sub", Op::Sub},
      {"mul", Op::Mul},
      {"mad", Op::Mad},
      {"fma", Op::Fma},
      {"div", Op::Div},
      {"rem", Op::Rem},
      {"abs", Op::Abs},
      {"neg", Op::Neg},
      {"min", Op::Min},
      {"max", Op::Max},
      {"copysign", Op::CopySign},
      {"and", Op::And},
      {"or", Op::Or},
      {"xor", Op::Xor},
      {"not", Op::Not},
      {"cnot", Op::CNot},
      {"shl", Op::Shl},
      {"shr", Op::Shr},
      {"shf", Op::Shf},
      {"bfe", Op::Bfe},
      {"bfi", Op::Bfi},
      {"prmt", Op::Prmt},
      {"popc", Op::Popc},
      {"clz", Op::Clz},
      {"brev", Op::Brev},
      {"setp", Op::Setp},
      {"selp", Op::Selp},
      {"cvt", Op::Cvt},
      {"cvta", Op::Cvta},
      {"ld", Op::Ld},
      {"st", Op::St},
      {"atom", Op::Atom},
      {"red", Op::Red},
      {"fence", Op::Fence},
      {"membar", Op::Fence},
      {"bar", Op::Bar},
      {"barrier", Op::Bar},
      {"shfl", Op::Shfl},
      {"vote", Op::Vote},
      {"activemask", Op::ActiveMask},
      {"ldmatrix", Op::Ldmatrix},
      {"mma", Op::Mma},
      {"ex2", Op::Ex2},
      {"lg2", Op::Lg2},
      {"rsqrt", Op::Rsqrt},
      {"sqrt", Op::Sqrt},
      {"rcp", Op::Rcp},
      {"sin", Op::Sin},
      {"cos", Op::Cos},
      {"tanh", Op::Tanh},
      {"testp", Op::Testp},
      {"bra", Op::Bra},
      {"ret", Op::Ret},
      {"exit", Op::Exit},
      {"trap", Op::Trap},
      {"nanosleep", Op::Nanosleep},
  };
  if (parts[0] == "cp" && parts.size() >= 3 && parts[1] == "async")
    return decodeAsyncCopy(in, opcode, parts, line);
  // addc and madc: add and mad that add in the carry flag.
  std::string family = parts[0];
  if (family == "addc" || family == "madc") {
    in.carryIn = true;
    family.pop_back();
  }
  auto found = ops.find(family);
  if (found == ops.end())
    return unsupported(opcode, "", line);
  in.op = found->second;
  std::vector<Type> types;
  return decodeModifiers(in, opcode, parts, types, line) &&
         settleTypes(in, opcode, parts, types, line) &&
         checkOperandCount(in, opcode, line);
}

/// cp.async (sm_80's asynchronous copies from global into shared memory):
/// a copy of 4, 8 or 16 bytes (.cg: 16), with an optional source size
/// (the rest zero-filled), and its commit_group, wait_group N, wait_all.
bool Parser::decodeAsyncCopy(Instruction &in, const std::string &opcode,
                             const std::vector<std::string> &parts,
                             uint32_t line) {
  const std::string &what = parts[2];
  size_t count = in.operands.size();
  if (what == "commit_group" || what == "wait_all") {
    in.op = what == "commit_group" ? Op::CpAsyncCommit : Op::CpAsyncWait;
    in.vector = 0;
    if (parts.size() != 3 || count != 0)
      return unsupported(opcode, "takes no modifiers or operands", line);
    return true;
  }
  if (what == "wait_group") {
    in.op = Op::CpAsyncWait;
    in.vector = 1;
    if (parts.size() != 3 || count != 1 || in.operands[0].kind != Operand::Imm)
      return fail("cp.async.wait_group takes one integer constant", line);
    return true;
  }
  if (what != "ca" && what != "cg")
    return unsupported(opcode, "", line);
  in.op = Op::CpAsync;
  if (parts.size() < 5 || (parts[3] != "shared" && parts[3] != "shared::cta") ||
      parts[4] != "global")
    return unsupported(opcode, "cp.async needs .shared.global", line);
  for (size_t i = 5; i < parts.size(); ++i)
    if (parts[i] != "L2::64B" && parts[i] != "L2::128B" &&
        parts[i] != "L2::256B")
      return unsupported(opcode, "." + parts[i], line);
  if (count < 3 || count > 4 || in.operands[0].kind != Operand::Address ||
      in.operands[1].kind != Operand::Address ||
      in.operands[2].kind != Operand::Imm)
    return fail("cp.async takes [dst], [src], a size and an optional source "
                "size",
                line);
  // The fourth operand is a source size; a predicate (the ignore-src
  // form) would mean the opposite.
  if (count == 4 && in.operands[3].kind == Operand::Reg &&
      function->registerTypes[in.operands[3].reg] == Type::Pred)
    return unsupported(opcode, "with an ignore-src predicate", line);
  int64_t size = static_cast<int64_t>(in.operands[2].bits);
  if (size != 4 && size != 8 && size != 16)
    return fail("cp.async copies 4, 8 or 16 bytes", line);
  if (what == "cg" && size != 16)
    return fail("cp.async.cg copies 16 bytes", line);
  in.space = Space::Shared;
  in.vector = static_cast<uint8_t>(size);
  return true;
}

/// One branch per modifier (or family of them), in the order PTX writes
/// them: the types go to `types`, the rest to `in`'s fields.
bool Parser::decodeModifiers(Instruction &in, const std::string &opcode,
                             const std::vector<std::string> &parts,
                             std::vector<Type> &types, uint32_t line) {
  const std::string &base = parts[0];
  static const std::map<std::string, Cmp> cmps = {
      {"eq", Cmp::Eq},         {"ne", Cmp::Ne},
      {"lt", Cmp::Lt},         {"le", Cmp::Le},
      {"gt", Cmp::Gt},         {"ge", Cmp::Ge},
      {"lo", Cmp::Lo},         {"ls", Cmp::Ls},
      {"hi", Cmp::Hi},         {"hs", Cmp::Hs},
      {"equ", Cmp::Equ},       {"neu", Cmp::Neu},
      {"ltu", Cmp::Ltu},       {"leu", Cmp::Leu},
      {"gtu", Cmp::Gtu},       {"geu", Cmp::Geu},
      {"num", Cmp::Num},       {"nan", Cmp::Nan},
      {"finite", Cmp::Finite}, {"infinite", Cmp::Infinite},
      {"number", Cmp::Number}, {"notanumber", Cmp::NotANumber},
      {"normal", Cmp::Normal}, {"subnormal", Cmp::Subnormal},
  };
  static const std::map<std::string, AtomOp> atomOps = {
      {"add", AtomOp::Add}, {"min", AtomOp::Min}, {"max", AtomOp::Max},
      {"inc", AtomOp::Inc}, {"dec", AtomOp::Dec}, {"and", AtomOp::And},
      {"or", AtomOp::Or},   {"xor", AtomOp::Xor}, {"exch", AtomOp::Exch},
      {"cas", AtomOp::Cas},
  };
  bool sawCmp = false, sawAtom = false;
  // mma's operand layouts: A row-major, then B column-major.
  unsigned layouts = 0;
  bool tensorCore = in.op == Op::Ldmatrix || in.op == Op::Mma;
  bool sawShape = false, sawCount = false, sawSync = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string &m = parts[i];
    Type type;
    if (typeOf(m, type)) {
      types.push_back(type);
      continue;
    }
    // tf32: an f32 register whose low 13 bits the tensor cores ignore.
    if (m == "tf32" && (in.op == Op::Mma || in.op == Op::Cvt)) {
      types.push_back(Type::B32);
      in.tf32 = true;
      continue;
    }
    if (m == "rn" || m == "rz" || m == "rm" || m == "rp" || m == "rni" ||
        m == "rzi" || m == "rmi" || m == "rpi" || m == "rna") {
      in.round = m == "rn"    ? Round::Rn
                 : m == "rz"  ? Round::Rz
                 : m == "rm"  ? Round::Rm
                 : m == "rp"  ? Round::Rp
                 : m == "rni" ? Round::Rni
                 : m == "rzi" ? Round::Rzi
                 : m == "rmi" ? Round::Rmi
                 : m == "rpi" ? Round::Rpi
                              : Round::Rna;
    } else if (m == "ftz") {
      in.ftz = true;
    } else if (m == "sat" || m == "satfinite") {
      in.sat = true;
    } else if (m == "approx" || m == "full") {
      in.approx = true;
    } else if (m == "NaN") {
      in.nan = true;
    } else if (m == "xorsign" || m == "abs" || m == "relu") {
      return unsupported(opcode, "." + m, line);
    } else if ((in.op == Op::Setp || in.op == Op::Testp) && !sawCmp &&
               cmps.count(m)) {
      in.cmp = cmps.at(m);
      sawCmp = true;
    } else if (m == "lo" || m == "hi" || m == "wide") {
      if (in.op == Op::Mul || in.op == Op::Mad)
        in.part = m == "lo"   ? MulPart::Lo
                  : m == "hi" ? MulPart::Hi
                              : MulPart::Wide;
      else
        return unsupported(opcode, "." + m, line);
    } else if (in.op == Op::Shf && (m == "l" || m == "r")) {
      in.shiftLeft = m == "l";
    } else if (in.op == Op::Shf && (m == "wrap" || m == "clamp")) {
      in.clampShift = m == "clamp";
    } else if (m == "cc" && (in.op == Op::Add || in.op == Op::Mad)) {
      in.carryOut = true;
    } else if (m == "uni") {
      in.uniform = true;
    } else if (m == "to") {
      in.toSpace = true;
    } else if (std::optional<Space> space = parseName(spaceNames, m);
               space && *space != Space::Generic) {
      in.space = *space;
    } else if (std::optional<Sem> sem = parseName(semNames, m);
               sem && *sem != Sem::Weak) {
      in.sem = *sem;
    } else if (std::optional<Scope> scope = parseName(scopeNames, m);
               scope && *scope != Scope::None) {
      in.scope = *scope;
    } else if (in.op == Op::Fence && base == "membar" && m == "gl") {
      in.scope = Scope::Gpu;
    } else if ((m == "v2" || m == "v4" || m == "v8") &&
               (in.op == Op::Ld || in.op == Op::St)) {
      in.vector = static_cast<uint8_t>(m == "v2" ? 2 : m == "v4" ? 4 : 8);
    } else if (m == "nc" || m == "ca" || m == "cg" || m == "cs" || m == "lu" ||
               m == "cv" || m == "wb" || m == "wt" || m == "L1::no_allocate" ||
               m == "L2::64B" || m == "L2::128B" || m == "L2::256B" ||
               m == "ptr") {
      // Cache operators and hints do not change what an access reads.
    } else if (m == "sync" && (in.op == Op::Bar || in.op == Op::Shfl ||
                               in.op == Op::Vote || tensorCore)) {
      sawSync = true;
    } else if (m == "aligned" && (in.op == Op::Bar || tensorCore)) {
      in.aligned = true;
    } else if (in.op == Op::Ldmatrix && m == "m8n8") {
      sawShape = true;
    } else if (in.op == Op::Ldmatrix && (m == "x1" || m == "x2" || m == "x4")) {
      in.vector = static_cast<uint8_t>(m[1] - '0');
      sawCount = true;
    } else if (in.op == Op::Ldmatrix && m == "trans") {
      in.transpose = true;
    } else if (in.op == Op::Mma && (m == "m16n8k16" || m == "m16n8k8")) {
      in.mmaK = m == "m16n8k16" ? 16 : 8;
    } else if (in.op == Op::Mma && (m == "row" || m == "col")) {
      if ((layouts == 0 && m != "row") || (layouts == 1 && m != "col") ||
          layouts > 1)
        return unsupported(opcode, "mma layouts other than .row.col", line);
      ++layouts;
    } else if (m == "arrive" && in.op == Op::Bar) {
      in.arrive = true;
    } else if (m == "warp" && in.op == Op::Bar) {
      in.op = Op::BarWarp;
    } else if (in.op == Op::Shfl &&
               (m == "up" || m == "down" || m == "bfly" || m == "idx")) {
      in.shfl = m == "up"     ? ShflMode::Up
                : m == "down" ? ShflMode::Down
                : m == "bfly" ? ShflMode::Bfly
                              : ShflMode::Idx;
    } else if (in.op == Op::Vote &&
               (m == "all" || m == "any" || m == "uni" || m == "ballot")) {
      in.vote = m == "all"   ? VoteMode::All
                : m == "any" ? VoteMode::Any
                : m == "uni" ? VoteMode::Uni
                             : VoteMode::Ballot;
    } else if ((in.op == Op::Atom || in.op == Op::Red) && !sawAtom &&
               atomOps.count(m)) {
      in.atomOp = atomOps.at(m);
      sawAtom = true;
    } else if ((in.op == Op::Setp || in.op == Op::Testp) && !sawCmp &&
               cmps.count(m)) {
      in.cmp = cmps.at(m);
      sawCmp = true;
    } else if (in.op == Op::Setp && sawCmp &&
               (m == "and" || m == "or" || m == "xor")) {
      in.boolOp = m == "and"  ? BoolOp::And
                  : m == "or" ? BoolOp::Or
                              : BoolOp::Xor;
    } else if (in.op == Op::Prmt && (m == "f4e" || m == "b4e" || m == "rc8" ||
                                     m == "ecl" || m == "ecr" || m == "rc16")) {
      return unsupported(opcode, "prmt mode ." + m, line);
    } else {
      return unsupported(opcode, "." + m, line);
    }
  }
  if (in.op == Op::Setp && !sawCmp)
    return unsupported(opcode, "setp needs a comparison and a type", line);
  if (tensorCore && (!in.aligned || !sawSync))
    return unsupported(opcode, "without .sync.aligned", line);
  if (in.op == Op::Ldmatrix && (!sawShape || !sawCount))
    return unsupported(opcode, "ldmatrix needs .m8n8 and .x1, .x2 or .x4",
                       line);
  if (in.op == Op::Mma && (!in.mmaK || layouts != 2))
    return unsupported(opcode,
                       "mma needs the shape m16n8k8 or m16n8k16 and "
                       ".row.col",
                       line);
  if (in.op == Op::Ldmatrix && in.space != Space::Shared)
    return unsupported(opcode, "ldmatrix needs .shared", line);
  return true;
}

/// The instruction's type(s) from the modifiers' types, and the defaults
/// PTX gives a fence, an atomic and a scoped access.
bool Parser::settleTypes(Instruction &in, const std::string &opcode,
                         const std::vector<std::string> &parts,
                         const std::vector<Type> &types, uint32_t line) {
  const std::string &base = parts[0];
  if (base == "membar") {
    in.sem = Sem::Sc;
    if (in.scope == Scope::None)
      return unsupported(opcode, "membar needs .cta, .gl or .sys", line);
  }
  if (in.op == Op::Fence && in.sem == Sem::Weak)
    in.sem = Sem::AcqRel;
  if (in.op == Op::Fence && in.scope == Scope::None)
    in.scope = Scope::Sys;
  if (in.op == Op::Cvt) {
    if (types.size() != 2)
      return unsupported(opcode, "cvt needs two types", line);
    if (in.tf32 && (types[0] != Type::B32 || types[1] != Type::F32 ||
                    in.round != Round::Rna || in.sat))
      return unsupported(opcode, "only cvt.rna.tf32.f32 makes tf32", line);
    in.type = types[0];
    in.type2 = types[1];
  } else if (in.op == Op::Mma) {
    // D, A, B, C.
    bool tf32 = in.tf32 && types.size() == 4 && types[1] == Type::B32 &&
                types[2] == Type::B32 && in.mmaK == 8;
    if (types.size() != 4 || types[0] != Type::F32 || types[3] != Type::F32 ||
        types[1] != types[2] ||
        (types[1] != Type::F16 && types[1] != Type::BF16 && !tf32))
      return unsupported(opcode,
                         "mma of f16 or bf16 (or tf32 at m16n8k8) "
                         "accumulating in f32 only",
                         line);
    in.type = Type::F32;
    in.type2 = types[1];
  } else if (in.op == Op::Setp) {
    if (types.size() != 1)
      return unsupported(opcode, "setp needs a comparison and a type", line);
    in.type = Type::Pred;
    in.type2 = types[0];
  } else if (in.op == Op::Mul || in.op == Op::Mad) {
    if (types.size() != 1)
      return unsupported(opcode, "one type expected", line);
    in.type = types[0];
    if (!isFloat(in.type) && in.part == MulPart::None)
      return unsupported(opcode, "integer mul/mad needs .lo, .hi or .wide",
                         line);
  } else if (in.op == Op::Bar || in.op == Op::BarWarp || in.op == Op::Fence ||
             in.op == Op::Bra || in.op == Op::Ret || in.op == Op::Exit ||
             in.op == Op::Trap || in.op == Op::ActiveMask) {
    if (in.op == Op::ActiveMask)
      in.type = types.empty() ? Type::B32 : types[0];
    if (in.op == Op::Bar && base == "bar" && !in.arrive)
      in.aligned = true; // bar.sync is barrier.sync.aligned
  } else {
    if (types.size() != 1)
      return unsupported(opcode, types.empty() ? "no type" : "several types",
                         line);
    in.type = types[0];
  }
  if (in.op == Op::Bar && !in.arrive && parts.size() > 1 &&
      std::find(parts.begin(), parts.end(), "sync") == parts.end() &&
      std::find(parts.begin(), parts.end(), "arrive") == parts.end())
    return unsupported(opcode, "only bar.sync, barrier.sync and bar.arrive",
                       line);
  if ((in.op == Op::Ld || in.op == Op::St || in.op == Op::Atom ||
       in.op == Op::Red) &&
      (in.sem == Sem::Acquire || in.sem == Sem::Release ||
       in.sem == Sem::AcqRel || in.sem == Sem::Relaxed || in.sem == Sem::Sc) &&
      in.scope == Scope::None)
    in.scope = Scope::Gpu; // PTX's default scope
  if ((in.op == Op::Atom || in.op == Op::Red) && in.sem == Sem::Weak)
    in.sem = Sem::Relaxed;
  if ((in.op == Op::Atom || in.op == Op::Red) && in.scope == Scope::None)
    in.scope = Scope::Gpu;
  // The carry flag: 32- and 64-bit integers; mad.lo or mad.hi; no .sat.
  if (in.carryIn || in.carryOut) {
    bool integer = !isFloat(in.type) && in.type != Type::Pred &&
                   (bitsOf(in.type) == 32 || bitsOf(in.type) == 64);
    if (!integer || in.sat ||
        (in.op == Op::Mad && in.part != MulPart::Lo && in.part != MulPart::Hi))
      return unsupported(opcode,
                         "the carry flag takes 32- or 64-bit integers (mad: "
                         ".lo or .hi), without .sat",
                         line);
  }
  // shf.{l,r}.{wrap,clamp}.b32, each once.
  if (in.op == Op::Shf) {
    int directions = 0, modes = 0;
    for (const std::string &m : parts) {
      directions += m == "l" || m == "r";
      modes += m == "wrap" || m == "clamp";
    }
    if (directions != 1 || modes != 1 || in.type != Type::B32)
      return unsupported(opcode,
                         "shf needs one of .l and .r, one of .wrap and "
                         ".clamp, and .b32",
                         line);
  }
  if (in.op == Op::Ld && (in.sem == Sem::Release || in.sem == Sem::AcqRel))
    return unsupported(opcode, "a load cannot release", line);
  if (in.op == Op::St && (in.sem == Sem::Acquire || in.sem == Sem::AcqRel))
    return unsupported(opcode, "a store cannot acquire", line);
  return true;
}

/// How many operands each opcode takes, and of which kind where it matters.
bool Parser::checkOperandCount(const Instruction &in, const std::string &opcode,
                               uint32_t line) {
  size_t count = in.operands.size();
  auto want = [&](size_t minimum, size_t maximum) {
    if (count < minimum || count > maximum)
      return fail("'" + opcode + "' takes " + std::to_string(minimum) +
                      (maximum != minimum ? " to " + std::to_string(maximum)
                                          : std::string()) +
                      " operands, found " + std::to_string(count),
                  line);
    return true;
  };
  if (isApproximation(in.op))
    return want(2, 2);
  switch (in.op) {
  case Op::Bra:
    if (!want(1, 1) || in.operands[0].kind != Operand::Label)
      return fail("bra needs a label", line);
    return true;
  case Op::Ret:
  case Op::Exit:
  case Op::Trap:
    return want(0, 0);
  case Op::Fence:
    return want(0, 0);
  case Op::Bar:
    return want(0, 2);
  case Op::BarWarp:
  case Op::Nanosleep:
    return want(1, 1);
  case Op::ActiveMask:
    return want(1, 1);
  case Op::Ld:
  case Op::St:
  case Op::Red:
    if (!want(2, 2))
      return false;
    if (in.operands[in.op == Op::Ld ? 1 : 0].kind != Operand::Address)
      return fail("expected an address operand", line);
    if (in.vector > 1 &&
        in.operands[in.op == Op::Ld ? 0 : 1].elements.size() != in.vector)
      return fail("a .v" + std::to_string(in.vector) + " access needs " +
                      std::to_string(in.vector) + " elements",
                  line);
    return true;
  case Op::Atom:
    if (!want(in.atomOp == AtomOp::Cas ? 4 : 3,
              in.atomOp == AtomOp::Cas ? 4 : 3))
      return false;
    if (in.operands[1].kind != Operand::Address)
      return fail("expected an address operand", line);
    return true;
  case Op::Mov:
  case Op::Abs:
  case Op::Neg:
  case Op::Not:
  case Op::CNot:
  case Op::Popc:
  case Op::Clz:
  case Op::Brev:
  case Op::Cvta:
  case Op::Testp:
    return want(2, 2);
  case Op::Cvt:
    // cvt.rn.f16x2.f32 d, a, b packs two.
    return want(2, 3);
  case Op::Mad:
  case Op::Fma:
  case Op::Selp:
  case Op::Bfe:
  case Op::Prmt:
    return want(4, 4);
  case Op::Bfi:
    return want(5, 5);
  case Op::Setp:
    return want(3, 4);
  case Op::Shfl:
    return want(5, 5);
  case Op::Ldmatrix:
    if (!want(2, 2))
      return false;
    if (in.operands[1].kind != Operand::Address)
      return fail("expected an address operand", line);
    if (in.type != Type::B16)
      return fail("ldmatrix of .b16 only", line);
    if (in.operands[0].kind == Operand::Vector
            ? in.operands[0].elements.size() != in.vector
            : in.vector != 1)
      return fail("ldmatrix .x" + std::to_string(in.vector) + " needs " +
                      std::to_string(in.vector) + " destination registers",
                  line);
    return true;
  case Op::Mma: {
    if (!want(4, 4))
      return false;
    // Registers per lane of D, A, B and C.
    // (tf32 at k8 holds one element per register: A 4, B 2.)
    size_t sizes[4] = {4, in.mmaK == 16 || in.tf32 ? 4u : 2u,
                       in.mmaK == 16 || in.tf32 ? 2u : 1u, 4};
    for (size_t i = 0; i < 4; ++i) {
      const Operand &operand = in.operands[i];
      size_t n = operand.kind == Operand::Vector ? operand.elements.size() : 1;
      if (n != sizes[i] ||
          (operand.kind != Operand::Vector && operand.kind != Operand::Reg))
        return fail("mma operand " + std::to_string(i) + " needs " +
                        std::to_string(sizes[i]) + " registers",
                    line);
    }
    return true;
  }
  case Op::Vote:
    return want(3, 3);
  case Op::Shf:
    return want(4, 4);
  default:
    return want(3, 3);
  }
}

} // namespace

std::unique_ptr<Module> parse(const std::string &text, std::string &error) {
  std::vector<Token> tokens;
  if (!lex(text, tokens, error))
    return nullptr;
  auto module = std::make_unique<Module>();
  Parser parser(text, std::move(tokens), *module);
  if (!parser.parseModule()) {
    error = parser.error;
    return nullptr;
  }
  return module;
}

} // namespace braid::emu::ptx
