//===- Ptx.h - PTX modules as the emulated device runs them -----*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// The emulated device executes PTX: the text that ptxas would compile, which
// is the latest point of the cuda lowering that is still portable (after
// MLIR's NVVM lowering, libdevice, LLVM's optimizer and the NVPTX back end),
// and the form the runtime's own hand-written kernels are in. A module is
// parsed once into functions of decoded instructions (registers resolved to
// slots, symbols to spaces and offsets, labels to instruction indices) that
// the interpreter (Interpreter.h) runs per thread.
//
// Anything the parser does not know is an error naming the line, never a
// guess: the emulator refuses a module rather than run it wrongly.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_EMULATOR_PTX_H
#define BRAID_EMULATOR_PTX_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braid::emu::ptx {

/// PTX's fundamental types (and the packed ones the interpreter needs).
enum class Type : uint8_t {
  None,
  Pred,
  B8,
  B16,
  B32,
  B64,
  B128,
  U8,
  U16,
  U32,
  U64,
  S8,
  S16,
  S32,
  S64,
  F16,
  F16x2,
  BF16,
  BF16x2,
  F32,
  F64,
  E4M3x2,
  E5M2x2,
};

inline unsigned bitsOf(Type type) {
  switch (type) {
  case Type::Pred:
    return 1;
  case Type::B8:
  case Type::U8:
  case Type::S8:
    return 8;
  case Type::B16:
  case Type::U16:
  case Type::S16:
  case Type::F16:
  case Type::BF16:
  case Type::E4M3x2:
  case Type::E5M2x2:
    return 16;
  case Type::B32:
  case Type::U32:
  case Type::S32:
  case Type::F32:
  case Type::F16x2:
  case Type::BF16x2:
    return 32;
  case Type::B64:
  case Type::U64:
  case Type::S64:
  case Type::F64:
    return 64;
  case Type::B128:
    return 128;
  case Type::None:
    return 0;
  }
  return 0;
}

inline bool isFloat(Type type) {
  switch (type) {
  case Type::F16:
  case Type::F16x2:
  case Type::BF16:
  case Type::BF16x2:
  case Type::F32:
  case Type::F64:
  case Type::E4M3x2:
  case Type::E5M2x2:
    return true;
  default:
    return false;
  }
}

inline bool isSigned(Type type) {
  return type == Type::S8 || type == Type::S16 || type == Type::S32 ||
         type == Type::S64;
}

const char *typeName(Type type);

/// State spaces.
enum class Space : uint8_t { Generic, Global, Shared, Local, Param, Const };
const char *spaceName(Space space);

/// Memory-ordering semantics of a load, store, atomic or fence.
enum class Sem : uint8_t {
  Weak,
  Volatile,
  Relaxed,
  Acquire,
  Release,
  AcqRel,
  Sc
};
const char *semName(Sem sem);

/// Scopes of a memory operation.
enum class Scope : uint8_t { None, Cta, Cluster, Gpu, Sys };
const char *scopeName(Scope scope);

/// Special registers.
enum class Special : uint8_t {
  TidX,
  TidY,
  TidZ,
  NtidX,
  NtidY,
  NtidZ,
  CtaidX,
  CtaidY,
  CtaidZ,
  NctaidX,
  NctaidY,
  NctaidZ,
  LaneId,
  WarpId,
  NWarpId,
  SmId,
  NSmId,
  GridId,
  LaneMaskEq,
  LaneMaskLe,
  LaneMaskLt,
  LaneMaskGe,
  LaneMaskGt,
  Clock,
  Clock64,
  GlobalTimer,
  DynamicSmemSize,
  TotalSmemSize,
};

/// The operations the interpreter implements. Variants (rounding, the
/// comparison, the atomic operation, ...) are in Instruction's fields.
enum class Op : uint8_t {
  Mov,
  Add,
  Sub,
  Mul,
  Mad,
  Fma,
  Div,
  Rem,
  Abs,
  Neg,
  Min,
  Max,
  CopySign,
  And,
  Or,
  Xor,
  Not,
  CNot,
  Shl,
  Shr,
  Shf, ///< funnel shift: shf.{l,r}.{wrap,clamp}.b32
  Bfe,
  Bfi,
  Prmt,
  Popc,
  Clz,
  Brev,
  Setp,
  Selp,
  Cvt,
  Cvta,
  Ld,
  St,
  Atom,
  Red,
  Fence,
  Bar,
  BarWarp,
  Shfl,
  Vote,
  ActiveMask,
  Ldmatrix, ///< ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16
  Mma,      ///< mma.sync.aligned.m16n8k{8,16}.row.col.f32.{f16,bf16,tf32}.f32
  CpAsync,  ///< cp.async.{ca,cg}.shared.global [dst], [src], size[, src-size]
  CpAsyncCommit, ///< cp.async.commit_group
  CpAsyncWait,   ///< cp.async.wait_group N (vector = 1) or wait_all (0)
  Ex2,
  Lg2,
  Rsqrt,
  Sqrt,
  Rcp,
  Sin,
  Cos,
  Tanh,
  Testp,
  Bra,
  Ret,
  Exit,
  Trap,
  /// A call of CUDA's `__assertfail(message, file, line, function,
  /// charSize)`, the one call the emulated device runs: its operands are
  /// the call's parameters (addresses of the caller's `.param` variables).
  AssertFail,
  Nanosleep,
};

/// The special function unit's one-operand approximations, ex2 to tanh.
inline bool isApproximation(Op op) { return op >= Op::Ex2 && op <= Op::Tanh; }

/// Comparisons of setp (and testp's classes).
enum class Cmp : uint8_t {
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Lo,
  Ls,
  Hi,
  Hs,
  Equ,
  Neu,
  Ltu,
  Leu,
  Gtu,
  Geu,
  Num,
  Nan,
  // testp
  Finite,
  Infinite,
  Number,
  NotANumber,
  Normal,
  Subnormal,
};

/// Boolean combination of setp, and the operation of atom / red / vote.
enum class BoolOp : uint8_t { None, And, Or, Xor };
enum class AtomOp : uint8_t {
  Add,
  Min,
  Max,
  Inc,
  Dec,
  And,
  Or,
  Xor,
  Exch,
  Cas
};
enum class VoteMode : uint8_t { All, Any, Uni, Ballot };
enum class ShflMode : uint8_t { Up, Down, Bfly, Idx };

/// Rounding of float arithmetic and conversions.
enum class Round : uint8_t { None, Rn, Rz, Rm, Rp, Rni, Rzi, Rmi, Rpi, Rna };

/// Multiplication part: mul.lo / .hi / .wide (and mad's).
enum class MulPart : uint8_t { None, Lo, Hi, Wide };

struct Operand {
  enum Kind : uint8_t {
    None,
    Reg,     ///< a register (`reg`), possibly negated (`!%p`)
    Imm,     ///< an integer or float literal
    Special, ///< a special register
    Symbol,  ///< the address of a variable (`mov.u64 %rd1, name`)
    Address, ///< [reg + offset] or [symbol + offset] or [imm]
    Vector,  ///< {a, b, ...}: elements
    Label,   ///< a branch target (instruction index in `target`)
    Sink,    ///< `_`
  };
  Kind kind = None;
  bool negated = false;
  /// A decimal float literal (its value in `real`); else raw bits in
  /// `bits`, of a hex float literal (0f...: 32, 0d...: 64 bits) when
  /// `hexFloatBits` is not 0.
  bool decimalFloat = false;
  uint8_t hexFloatBits = 0;
  ptx::Special special = ptx::Special::TidX;
  int32_t reg = -1;
  int32_t symbol = -1;
  int64_t offset = 0;
  uint64_t bits = 0;
  double real = 0;
  uint32_t target = 0;
  std::vector<Operand> elements;
};

struct Instruction {
  Op op = Op::Mov;
  Type type = Type::None;  ///< the instruction type (cvt: destination)
  Type type2 = Type::None; ///< cvt's source type, setp's compared type
  Space space = Space::Generic;
  Sem sem = Sem::Weak;
  Scope scope = Scope::None;
  Round round = Round::None;
  MulPart part = MulPart::None;
  Cmp cmp = Cmp::Eq;
  BoolOp boolOp = BoolOp::None;
  AtomOp atomOp = AtomOp::Add;
  VoteMode vote = VoteMode::All;
  ShflMode shfl = ShflMode::Bfly;
  bool ftz = false;
  bool sat = false;
  bool approx = false;
  bool nan = false;     ///< min/max .NaN
  bool uniform = false; ///< bra.uni
  /// Extended-precision integer arithmetic: `.cc` writes the carry flag
  /// (carryOut), `addc` / `madc` add it in (carryIn).
  bool carryOut = false, carryIn = false;
  /// shf: the direction (.l) and whether the amount clamps at 32 (.clamp;
  /// .wrap takes it modulo 32).
  bool shiftLeft = false, clampShift = false;
  bool toSpace = false;   ///< cvta.to.<space> (else cvta.<space>)
  bool aligned = false;   ///< bar.sync / barrier.sync.aligned
  bool arrive = false;    ///< bar.arrive
  uint8_t vector = 1;     ///< .v2 / .v4 of ld and st; ldmatrix's .x1 to .x4
  bool transpose = false; ///< ldmatrix .trans
  uint8_t mmaK = 0;       ///< mma's k: 8 or 16 (m16n8)
  /// mma of .tf32 operands; cvt.rna.tf32.f32 (the type fields say b32).
  bool tf32 = false;
  /// Guard predicate: a register (and whether negated), or -1.
  int32_t guard = -1;
  bool guardNegated = false;
  std::vector<Operand> operands;
  /// 1-based line of the instruction in the module text, and its text.
  uint32_t line = 0;
  std::string text;
};

/// A variable of a state space (module or function scope).
struct Variable {
  std::string name;
  Space space = Space::Global;
  uint64_t size = 0;
  uint32_t align = 1;
  bool external = false; ///< `.extern .shared ... []`: dynamic shared memory
  /// Offset in the space's layout (local, param) or, for global and const
  /// variables, the byte offset in the module's image. Shared variables are
  /// laid out per kernel (Function::sharedOffsets).
  uint64_t offset = 0;
  std::vector<uint8_t> init; ///< initial bytes of global / const variables
  uint32_t line = 0;
};

struct Function {
  std::string name;
  bool entry = false;
  std::vector<Instruction> code;
  /// Kernel parameters in order (offsets into the parameter buffer).
  std::vector<int32_t> params;
  uint64_t paramBytes = 0;
  /// Registers: how many slots, and each slot's name (for messages).
  std::vector<std::string> registerNames;
  std::vector<Type> registerTypes;
  /// Shared variables of function scope and of the module it uses, laid
  /// out as the PTX declares them; the dynamic region starts at
  /// `dynamicSharedOffset`.
  uint64_t staticSharedBytes = 0;
  uint64_t dynamicSharedOffset = 0;
  /// Where each shared variable the function uses starts (by variable).
  std::map<int32_t, uint64_t> sharedOffsets;
  uint64_t localBytes = 0;
  /// .maxntid / .reqntid (0: none).
  uint32_t maxThreads = 0;
  uint32_t line = 0;
};

struct Module {
  std::string name;                ///< for messages: the first entry's name
  unsigned smVersion = 0;          ///< .target sm_XX
  std::vector<Variable> variables; ///< every symbol, module and function scope
  std::vector<std::unique_ptr<Function>> functions;
  std::map<std::string, Function *> entries;
  /// The bytes of global and const variables (`Variable::offset` into it).
  uint64_t imageBytes = 0;
  std::vector<std::string> lines;
};

/// Parses `text`. On failure returns null and sets `error` to a message
/// naming the line.
std::unique_ptr<Module> parse(const std::string &text, std::string &error);

/// `line: text` of the instruction, for reports.
std::string describe(const Module &module, const Instruction &instruction);

} // namespace braid::emu::ptx

#endif // BRAID_EMULATOR_PTX_H
