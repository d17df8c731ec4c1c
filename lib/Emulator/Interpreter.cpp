//===- Interpreter.cpp - Running PTX kernels on the CPU -------------------===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Registers hold raw bits, sign- or zero-extended to 64 bits by the type of
// the instruction that wrote them; an instruction reads the low bits of its
// own type. Floating-point arithmetic uses the host's IEEE operations with
// the instruction's rounding mode (this file is built with -frounding-math);
// PTX's approximate functions (ex2, rsqrt, rcp, lg2, sin, cos, tanh .approx)
// are computed correctly rounded, which is within their documented error.
//
//===----------------------------------------------------------------------===//

#include "Interpreter.h"

#include "HalfFloat.h"
#include "Memory.h"

#include <algorithm>
#include <cfenv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

namespace braid::emu {

using namespace ptx;
using braid::rt::bf16ToFloat;
using braid::rt::floatToBf16;
using braid::rt::floatToHalf;
using braid::rt::halfToFloat;

namespace {

//===----------------------------------------------------------------------===//
// Bits and numbers
//===----------------------------------------------------------------------===//

inline uint64_t maskOf(unsigned bits) {
  return bits >= 64 ? ~0ull : ((1ull << bits) - 1);
}

inline int64_t signExtend(uint64_t value, unsigned bits) {
  if (bits >= 64)
    return static_cast<int64_t>(value);
  uint64_t sign = 1ull << (bits - 1);
  value &= maskOf(bits);
  return static_cast<int64_t>((value ^ sign) - sign);
}

inline float asF32(uint64_t bits) {
  auto b = static_cast<uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint64_t ofF32(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline double asF64(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
inline uint64_t ofF64(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

inline float flush(float f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f;
}

/// A float operand or result of type `type` (f16, bf16, f32, f64; packed
/// types take their low lane) as a double.
double toReal(uint64_t bits, Type type) {
  switch (type) {
  case Type::F16:
  case Type::F16x2:
    return halfToFloat(static_cast<uint16_t>(bits));
  case Type::BF16:
  case Type::BF16x2:
    return bf16ToFloat(static_cast<uint16_t>(bits));
  case Type::F32:
    return asF32(bits);
  default:
    return asF64(bits);
  }
}

/// e4m3 (no infinities, 0x7F/0xFF NaN, max 448) and e5m2 encodings.
uint8_t toFp8(float value, bool e4m3, bool satfinite) {
  uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value))
    return e4m3 ? 0x7F : 0x7F;
  float magnitude = std::fabs(value);
  const int mantissaBits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  const float maxFinite = e4m3 ? 448.0f : 57344.0f;
  if (std::isinf(magnitude) || magnitude > maxFinite) {
    if (satfinite || e4m3)
      magnitude = maxFinite;
    else
      return sign | 0x7C; // e5m2 infinity
  }
  if (magnitude == 0)
    return sign;
  int exponent;
  std::frexp(magnitude, &exponent); // magnitude = m * 2^exponent, m in [0.5,1)
  int e = exponent - 1;             // magnitude = 1.f * 2^e
  int minNormal = 1 - bias;
  float quantum = std::ldexp(1.0f, std::max(e, minNormal) - mantissaBits);
  float rounded = std::nearbyint(magnitude / quantum) * quantum;
  if (rounded > maxFinite)
    rounded = maxFinite;
  std::frexp(rounded, &exponent);
  e = exponent - 1;
  uint32_t code;
  if (e < minNormal) {
    code = static_cast<uint32_t>(
        std::lround(rounded / std::ldexp(1.0f, minNormal - mantissaBits)));
  } else {
    uint32_t mantissa = static_cast<uint32_t>(std::lround(
        (rounded / std::ldexp(1.0f, e) - 1.0f) * (1 << mantissaBits)));
    code = (static_cast<uint32_t>(e + bias) << mantissaBits) | mantissa;
  }
  return static_cast<uint8_t>(sign | code);
}

float fromFp8(uint8_t code, bool e4m3) {
  const int mantissaBits = e4m3 ? 3 : 2;
  const int bias = e4m3 ? 7 : 15;
  bool negative = code & 0x80;
  uint32_t exponent = (code & 0x7F) >> mantissaBits;
  uint32_t mantissa = code & ((1u << mantissaBits) - 1);
  float value;
  if (e4m3 && (code & 0x7F) == 0x7F)
    return NAN;
  if (!e4m3 && exponent == 31)
    return mantissa ? NAN : (negative ? -INFINITY : INFINITY);
  if (exponent == 0)
    value = std::ldexp(static_cast<float>(mantissa), 1 - bias - mantissaBits);
  else
    value = std::ldexp(1.0f + static_cast<float>(mantissa) /
                                  static_cast<float>(1u << mantissaBits),
                       static_cast<int>(exponent) - bias);
  return negative ? -value : value;
}

/// Rounds `value` to `type` (f16, bf16, f32, f64) and returns its bits; a
/// NaN becomes the canonical NaN the GPU produces (f64: the host's).
uint64_t fromReal(double value, Type type) {
  if (std::isnan(value) && type != Type::F64)
    return bitsOf(type) == 32 ? 0x7FFFFFFFu : 0x7FFFu;
  switch (type) {
  case Type::F16:
  case Type::F16x2:
    return floatToHalf(static_cast<float>(value));
  case Type::BF16:
  case Type::BF16x2:
    return floatToBf16(static_cast<float>(value));
  case Type::F32:
    return ofF32(static_cast<float>(value));
  default:
    return ofF64(value);
  }
}

struct RoundingMode {
  int saved = -1;
  explicit RoundingMode(Round round) {
    int mode = -1;
    switch (round) {
    case Round::Rz:
    case Round::Rzi:
      mode = FE_TOWARDZERO;
      break;
    case Round::Rm:
    case Round::Rmi:
      mode = FE_DOWNWARD;
      break;
    case Round::Rp:
    case Round::Rpi:
      mode = FE_UPWARD;
      break;
    default:
      break;
    }
    if (mode >= 0) {
      saved = std::fegetround();
      std::fesetround(mode);
    }
  }
  ~RoundingMode() {
    if (saved >= 0)
      std::fesetround(saved);
  }
};

double roundIntegral(double value, Round round) {
  switch (round) {
  case Round::Rzi:
    return std::trunc(value);
  case Round::Rmi:
    return std::floor(value);
  case Round::Rpi:
    return std::ceil(value);
  default:
    return std::nearbyint(value); // ties to even
  }
}

//===----------------------------------------------------------------------===//
// Threads and blocks
//===----------------------------------------------------------------------===//

enum Status : uint8_t { Ready, AtBarrier, AtWarp, Done };

struct Thread {
  uint32_t pc = 0;
  Status status = Ready;
  /// The carry flag of extended-precision arithmetic (add.cc, madc).
  bool carry = false;
  uint16_t epoch = 0;
  uint16_t warpEpoch = 0;
  uint32_t linear = 0;
  uint32_t tid[3] = {0, 0, 0};
  uint64_t *regs = nullptr;
  uint8_t *local = nullptr;
  // Where it waits, and what it brings to a warp-synchronous operation.
  uint32_t barrier = 0;
  uint32_t barrierCount = 0;
  uint32_t memberMask = 0;
  uint64_t value = 0;
  uint32_t b = 0, c = 0;
  bool predicate = false;
  // Polling: the last synchronizing load and how often it saw no change.
  uint32_t spinPc = UINT32_MAX;
  uintptr_t spinAddress = 0;
  uint64_t spinValue = 0;
  uint32_t spins = 0;
  bool spun = false;
  // Fences make neighbouring relaxed accesses release or acquire.
  bool releasePending = false;
  uint32_t releaseScope = 0;
  uintptr_t relaxedLoad = 0;
  uint32_t exitLine = 0;
  /// cp.async copies not yet complete, and the group the next one joins
  /// (the number of commit_groups so far).
  struct AsyncCopy {
    uint64_t dst, src;
    uint32_t bytes, srcBytes, group, pc;
  };
  std::vector<AsyncCopy> asyncCopies;
  uint32_t asyncGroup = 0;
};

struct Block {
  uint32_t linear = 0;
  uint32_t ctaid[3] = {0, 0, 0};
  std::vector<Thread> threads;
  std::vector<uint64_t> regs;
  std::vector<uint8_t> local;
  uint8_t *shared = nullptr;
  uint64_t sharedBytes = 0;
  Cell *sharedShadow = nullptr; ///< calloc'ed, one cell per 4 bytes
  VectorClock clock;
  uint32_t releases = 1;
  uint32_t live = 0;
  uint32_t arrivals[16] = {};
  bool overResident = false;
  bool progressed = false;
  ~Block() {
    std::free(shared);
    std::free(sharedShadow);
  }
};

enum class Turn { Blocked, Spun, Exited, Budget, Fault };

constexpr uint32_t kBudget = 1u << 20;

/// BRAID_EMULATE_TRACE=KERNEL[:BLOCK[:THREAD]]: every instruction one
/// thread executes (default block 0, thread 0), with the registers it
/// wrote, on stderr. For debugging a kernel or the emulator.
struct TraceRequest {
  std::string kernel;
  uint64_t block = 0;
  uint32_t thread = 0;
  bool on = false;
};

const TraceRequest &traceRequest() {
  static const TraceRequest request = [] {
    TraceRequest r;
    const char *value = std::getenv("BRAID_EMULATE_TRACE");
    if (!value || !*value)
      return r;
    std::string text = value;
    size_t colon = text.find(':');
    r.kernel = text.substr(0, colon);
    if (colon != std::string::npos) {
      std::string rest = text.substr(colon + 1);
      size_t second = rest.find(':');
      r.block = std::strtoull(rest.substr(0, second).c_str(), nullptr, 10);
      if (second != std::string::npos)
        r.thread = static_cast<uint32_t>(
            std::strtoul(rest.substr(second + 1).c_str(), nullptr, 10));
    }
    r.on = true;
    return r;
  }();
  return request;
}

class Launch {
public:
  Launch(const LaunchConfig &config, VectorClock &clock)
      : config(config), module(*config.module->ptx), kernel(*config.kernel),
        streamClock(clock) {
    threadsPerBlock = config.block[0] * config.block[1] * config.block[2];
    totalBlocks =
        static_cast<uint64_t>(config.grid[0]) * config.grid[1] * config.grid[2];
    sharedBytes = kernel.dynamicSharedOffset + config.dynamicShared;
    hash = kernelHash(kernel.name);
    nameKernel(hash, kernel.name);
    symbols.assign(module.variables.size(), 0);
    for (size_t i = 0; i < module.variables.size(); ++i) {
      const Variable &v = module.variables[i];
      if (v.space == Space::Global || v.space == Space::Const)
        symbols[i] =
            reinterpret_cast<uintptr_t>(config.module->image) + v.offset;
      else if (v.space == Space::Shared) {
        auto found = kernel.sharedOffsets.find(static_cast<int32_t>(i));
        symbols[i] = found == kernel.sharedOffsets.end() ? 0 : found->second;
      } else {
        symbols[i] = v.offset;
      }
    }
    accumulated = streamClock;
    tracing = traceRequest().on && traceRequest().kernel == kernel.name;
  }

  void trace(const Block &block, const Thread &thread,
             const Instruction &in) const;

  LaunchResult run();
  uint64_t instructions() const { return clockTicks; }

private:
  const LaunchConfig &config;
  const Module &module;
  const Function &kernel;
  VectorClock &streamClock;
  VectorClock accumulated;
  uint32_t threadsPerBlock = 0;
  uint64_t totalBlocks = 0;
  uint64_t sharedBytes = 0;
  uint32_t hash = 0;
  bool tracing = false;
  std::vector<uintptr_t> symbols;
  LaunchResult result;
  uint64_t clockTicks = 0;

  Block *current = nullptr;

  uint32_t residency() const;
  std::unique_ptr<Block> makeBlock(uint64_t linear);
  enum class BlockState { Finished, Stalled, Fault };
  BlockState runBlock(Block &block);
  Turn turn(Block &block, Thread &thread);
  bool resolveBarriers(Block &block);
  bool resolveWarps(Block &block);
  bool deadlock(Block &block);
  std::string where(const Block &block, const Thread &thread,
                    const Instruction *instruction) const;
  bool fault(LaunchStatus status, const Block &block, const Thread &thread,
             const Instruction &instruction, const std::string &what);

  // Operands.
  inline __attribute__((always_inline)) uint64_t
  read(const Thread &thread, const Operand &operand, Type type) const;
  inline __attribute__((always_inline)) void write(Thread &thread,
                                                   const Operand &operand,
                                                   Type type,
                                                   uint64_t value) const;
  uint64_t special(const Thread &thread, Special which) const;
  uint64_t addressOf(const Thread &thread, const Operand &operand) const;
  std::string assertion(const Thread &thread, const Instruction &in) const;
  uint64_t addWithCarry(Thread &thread, const Instruction &in, uint64_t x,
                        uint64_t y, unsigned bits) const;

  // Memory.
  struct Target {
    uint8_t *host = nullptr;
    Space space = Space::Global;
    Cell *shadow = nullptr;
    uint64_t shadowOffset = 0;
    SyncPool *pool = nullptr;
    uintptr_t address = 0; ///< global address (sync objects)
    const char *label = "";
  };
  bool resolve(Block &block, Thread &thread, const Instruction &in,
               uint64_t address, Space space, unsigned bytes, bool store,
               Target &target);
  bool recordAccess(Block &block, Thread &thread, const Instruction &in,
                    const Target &target, unsigned bytes, uint8_t kind,
                    bool unchanged = false);
  void release(Block &block, Thread &thread, const Target &target,
               uint32_t scope);
  void acquire(Block &block, const Target &target, uint32_t scope);
  void acquireAddress(Block &block, uintptr_t address, uint32_t scope);
  bool memoryOp(Block &block, Thread &thread, const Instruction &in,
                bool &polled);
  bool atomicOp(Block &block, Thread &thread, const Instruction &in,
                bool &polled);

  bool execute(Block &block, Thread &thread, const Instruction &in,
               bool &polled);
  bool convert(Thread &thread, const Instruction &in);
  bool arithmetic(Block &block, Thread &thread, const Instruction &in);
  bool bitOp(Block &block, Thread &thread, const Instruction &in);
  bool specialFunction(Block &block, Thread &thread, const Instruction &in);
  /// Writes f(a, b, c) of `in`'s float operands (those it has), in its type
  /// and with its rounding, flushing and saturation.
  template <typename F>
  void floatOp(Thread &thread, const Instruction &in, F f);
  bool warpOp(Block &block, const Instruction &in, Thread **lanes,
              uint32_t mask);
  bool asyncCopy(Block &block, Thread &thread, const Instruction &in);
  bool completeCopies(Block &block, Thread &thread, uint32_t before);
  bool loadMatrices(Block &block, const Instruction &in, Thread **lanes);
  void multiplyMatrices(const Instruction &in, Thread **lanes);
};

//===----------------------------------------------------------------------===//
// Operands
//===----------------------------------------------------------------------===//

uint64_t Launch::special(const Thread &thread, Special which) const {
  const Block &block = *current;
  switch (which) {
  case Special::TidX:
    return thread.tid[0];
  case Special::TidY:
    return thread.tid[1];
  case Special::TidZ:
    return thread.tid[2];
  case Special::NtidX:
    return config.block[0];
  case Special::NtidY:
    return config.block[1];
  case Special::NtidZ:
    return config.block[2];
  case Special::CtaidX:
    return block.ctaid[0];
  case Special::CtaidY:
    return block.ctaid[1];
  case Special::CtaidZ:
    return block.ctaid[2];
  case Special::NctaidX:
    return config.grid[0];
  case Special::NctaidY:
    return config.grid[1];
  case Special::NctaidZ:
    return config.grid[2];
  case Special::LaneId:
    return thread.linear % 32;
  case Special::WarpId:
    return thread.linear / 32;
  case Special::NWarpId:
    return (threadsPerBlock + 31) / 32;
  case Special::SmId:
    return block.linear % config.smCount;
  case Special::NSmId:
    return config.smCount;
  case Special::GridId:
    return config.seq;
  case Special::LaneMaskEq:
    return 1u << (thread.linear % 32);
  case Special::LaneMaskLe:
    return maskOf((thread.linear % 32) + 1);
  case Special::LaneMaskLt:
    return maskOf(thread.linear % 32);
  case Special::LaneMaskGe:
    return ~maskOf(thread.linear % 32) & 0xFFFFFFFFu;
  case Special::LaneMaskGt:
    return ~maskOf((thread.linear % 32) + 1) & 0xFFFFFFFFu;
  case Special::Clock:
  case Special::Clock64:
    return clockTicks;
  case Special::GlobalTimer:
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now().time_since_epoch())
            .count());
  case Special::DynamicSmemSize:
    return config.dynamicShared;
  case Special::TotalSmemSize:
    return sharedBytes;
  }
  return 0;
}

inline uint64_t Launch::read(const Thread &thread, const Operand &operand,
                             Type type) const {
  unsigned bits = bitsOf(type);
  switch (operand.kind) {
  case Operand::Reg: {
    uint64_t value = thread.regs[operand.reg];
    if (type == Type::Pred)
      return operand.negated ? !(value & 1) : (value & 1);
    return value & maskOf(bits);
  }
  case Operand::Imm:
    if (operand.hexFloatBits) {
      // Raw bits; converted only between float formats.
      double value = operand.hexFloatBits == 32 ? asF32(operand.bits)
                                                : asF64(operand.bits);
      if (isFloat(type) && bits != operand.hexFloatBits)
        return fromReal(value, type) & maskOf(bits);
      return operand.bits & maskOf(bits);
    }
    if (operand.decimalFloat) {
      if (isFloat(type))
        return fromReal(operand.real, type) & maskOf(bits);
      return static_cast<uint64_t>(static_cast<int64_t>(operand.real)) &
             maskOf(bits);
    }
    return operand.bits & maskOf(bits);
  case Operand::Special:
    return special(thread, operand.special) & maskOf(bits);
  case Operand::Symbol:
    return symbols[operand.symbol] & maskOf(bits);
  default:
    return 0;
  }
}

inline void Launch::write(Thread &thread, const Operand &operand, Type type,
                          uint64_t value) const {
  if (operand.kind != Operand::Reg)
    return; // `_`
  unsigned bits = bitsOf(type);
  if (type == Type::Pred)
    thread.regs[operand.reg] = value & 1;
  else if (isSigned(type))
    thread.regs[operand.reg] = static_cast<uint64_t>(signExtend(value, bits));
  else
    thread.regs[operand.reg] = value & maskOf(bits);
}

/// x + y (of `bits` bits, unsigned) plus the thread's carry flag for
/// addc / madc; with `.cc`, the carry out of the sum becomes the flag.
uint64_t Launch::addWithCarry(Thread &thread, const Instruction &in, uint64_t x,
                              uint64_t y, unsigned bits) const {
  unsigned __int128 sum = static_cast<unsigned __int128>(x & maskOf(bits)) +
                          (y & maskOf(bits)) +
                          (in.carryIn && thread.carry ? 1 : 0);
  if (in.carryOut)
    thread.carry = (sum >> bits) != 0;
  return static_cast<uint64_t>(sum) & maskOf(bits);
}

/// What a call of __assertfail says: its message, file and line (strings
/// of the module's global data, read from the call's parameters).
std::string Launch::assertion(const Thread &thread,
                              const Instruction &in) const {
  auto parameter = [&](size_t i, unsigned bytes) {
    uint64_t value = 0;
    uint64_t offset = addressOf(thread, in.operands[i]);
    if (offset + bytes <= kernel.localBytes)
      std::memcpy(&value, thread.local + offset, bytes);
    return value;
  };
  const uint8_t *image = config.module->image;
  uint64_t imageBytes = config.module->ptx->imageBytes;
  auto text = [&](uint64_t address) {
    auto start = reinterpret_cast<uintptr_t>(image);
    if (address < start || address >= start + imageBytes)
      return std::string("(not in the module's data)");
    std::string out;
    for (uint64_t at = address - start;
         at < imageBytes && image[at] && out.size() < 512; ++at)
      out.push_back(static_cast<char>(image[at]));
    return out;
  };
  return "'" + text(parameter(0, 8)) + "' at " + text(parameter(1, 8)) + ":" +
         std::to_string(static_cast<uint32_t>(parameter(2, 4)));
}

uint64_t Launch::addressOf(const Thread &thread, const Operand &operand) const {
  uint64_t address = 0;
  if (operand.reg >= 0)
    address = thread.regs[operand.reg];
  if (operand.symbol >= 0)
    address += symbols[operand.symbol];
  return address + static_cast<uint64_t>(operand.offset);
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

std::string Launch::where(const Block &block, const Thread &thread,
                          const Instruction *instruction) const {
  char text[160];
  std::snprintf(text, sizeof(text),
                "kernel %s, block (%u,%u,%u), thread (%u,%u,%u)",
                kernel.name.c_str(), block.ctaid[0], block.ctaid[1],
                block.ctaid[2], thread.tid[0], thread.tid[1], thread.tid[2]);
  std::string out = text;
  if (instruction)
    out += ", PTX line " + std::to_string(instruction->line) + " `" +
           instruction->text + "`";
  return out;
}

bool Launch::fault(LaunchStatus status, const Block &block,
                   const Thread &thread, const Instruction &instruction,
                   const std::string &what) {
  result.status = status;
  result.report = what + " (" + where(block, thread, &instruction) + ")";
  return false;
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

static std::string hexAddress(uint64_t address) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(address));
  return text;
}

bool Launch::resolve(Block &block, Thread &thread, const Instruction &in,
                     uint64_t address, Space space, unsigned bytes, bool store,
                     Target &target) {
  const char *verb = store ? "write" : "read";
  if (space == Space::Generic) {
    auto host = reinterpret_cast<uintptr_t>(block.shared);
    auto local = reinterpret_cast<uintptr_t>(thread.local);
    if (block.shared && address >= host && address < host + block.sharedBytes) {
      space = Space::Shared;
      address -= host;
    } else if (kernel.localBytes && address >= local &&
               address < local + kernel.localBytes) {
      space = Space::Local;
      address -= local;
    } else {
      space = Space::Global;
    }
  }
  if (address % bytes != 0)
    return fault(LaunchStatus::MisalignedAddress, block, thread, in,
                 std::string("misaligned ") + spaceName(space) + " " + verb +
                     " of " + std::to_string(bytes) + " bytes at " +
                     hexAddress(address) + " (not a multiple of " +
                     std::to_string(bytes) + ")");
  target.space = space;
  switch (space) {
  case Space::Shared:
    if (address + bytes > block.sharedBytes)
      return fault(
          LaunchStatus::IllegalAddress, block, thread, in,
          "out-of-bounds shared " + std::string(verb) + " of " +
              std::to_string(bytes) + " bytes at offset " +
              std::to_string(address) + ": the block has " +
              std::to_string(block.sharedBytes) + " bytes of shared memory (" +
              std::to_string(kernel.staticSharedBytes) + " static, " +
              std::to_string(config.dynamicShared) + " dynamic from offset " +
              std::to_string(kernel.dynamicSharedOffset) + ")");
    target.host = block.shared + address;
    if (block.sharedShadow) {
      target.shadow = block.sharedShadow;
      target.shadowOffset = address;
    }
    target.label = "shared memory";
    return true;
  case Space::Local:
    if (address + bytes > kernel.localBytes)
      return fault(LaunchStatus::IllegalAddress, block, thread, in,
                   "out-of-bounds local " + std::string(verb) + " at offset " +
                       std::to_string(address) + " (the thread has " +
                       std::to_string(kernel.localBytes) +
                       " bytes of local memory)");
    target.host = thread.local + address;
    return true;
  case Space::Param:
    if (store)
      return fault(LaunchStatus::IllegalAddress, block, thread, in,
                   "a store to kernel parameters");
    if (address + bytes > config.params.size())
      return fault(LaunchStatus::IllegalAddress, block, thread, in,
                   "a parameter read past the parameters");
    target.host = const_cast<uint8_t *>(config.params.data()) + address;
    return true;
  default: {
    Region region;
    std::string why;
    if (!findMemory(address, bytes, region, why))
      return fault(LaunchStatus::IllegalAddress, block, thread, in,
                   "out-of-bounds " + std::string(spaceName(space)) + " " +
                       verb + " of " + std::to_string(bytes) + " bytes at " +
                       hexAddress(address) + ": " + why);
    if (space == Space::Const && region.kind != MemoryKind::Module)
      return fault(LaunchStatus::IllegalAddress, block, thread, in,
                   "a const-space access outside the module's constants");
    target.host = reinterpret_cast<uint8_t *>(address);
    target.shadow = region.shadow;
    target.shadowOffset = address - region.base;
    target.pool = region.pool;
    target.address = address;
    target.label = region.label;
    return true;
  }
  }
}

bool Launch::recordAccess(Block &block, Thread &thread, const Instruction &in,
                          const Target &target, unsigned bytes, uint8_t kind,
                          bool unchanged) {
  if (!target.shadow)
    return true;
  Accessor accessor;
  accessor.clock = &block.clock;
  Access &self = accessor.self;
  std::memset(&self, 0, sizeof(self));
  self.lane = config.lane;
  self.seq = config.seq;
  self.block = block.linear & kNoBlock;
  self.rank = config.device & 0xFF;
  self.clock = block.releases;
  self.thread = static_cast<uint16_t>(thread.linear);
  self.epoch = thread.epoch;
  self.warpEpoch = thread.warpEpoch;
  self.line = in.line;
  self.kernel = hash;
  std::string what = target.space == Space::Shared
                         ? std::string("shared memory")
                         : std::string("a ") + target.label + " at " +
                               hexAddress(target.address - target.shadowOffset);
  std::string race = checkAccess(target.shadow, target.shadowOffset, bytes,
                                 kind, accessor, what, unchanged);
  if (!race.empty() && result.report.empty()) {
    // A race does not stop the kernel (the hardware would not notice);
    // the first one is reported when the launch ends.
    result.status = LaunchStatus::Race;
    result.report = race + " (this access: " + where(block, thread, &in) + ")";
  }
  return true;
}

void Launch::release(Block &block, Thread &thread, const Target &target,
                     uint32_t scope) {
  if (!racesEnabled() || target.space == Space::Shared ||
      target.space == Space::Local)
    return;
  VectorClock known = block.clock;
  known.learn({config.lane, config.seq, block.linear & kNoBlock, block.releases,
               static_cast<uint16_t>(thread.linear), thread.epoch});
  SyncSlot *slot = target.pool
                       ? lockSlot(*target.pool, target.shadowOffset + 1, true)
                       : lockLocalSlot(target.address, true);
  if (slot) {
    releaseTo(*slot, known, scope, config.device);
    unlockSlot(slot);
  }
  ++block.releases;
}

void Launch::acquire(Block &block, const Target &target, uint32_t scope) {
  if (!racesEnabled() || target.space == Space::Shared ||
      target.space == Space::Local)
    return;
  SyncSlot *slot = target.pool
                       ? lockSlot(*target.pool, target.shadowOffset + 1, false)
                       : lockLocalSlot(target.address, false);
  if (slot) {
    acquireFrom(*slot, block.clock, scope, config.device);
    unlockSlot(slot);
  } else if (target.pool && target.pool->overflowed.load()) {
    // A release to this flag may have found no slot: what it made known
    // is lost to this block.
    block.clock.overflowed = 1;
  }
}

void Launch::acquireAddress(Block &block, uintptr_t address, uint32_t scope) {
  Region region;
  std::string why;
  if (!findMemory(address, 1, region, why))
    return;
  Target target;
  target.space = Space::Global;
  target.pool = region.pool;
  target.shadowOffset = address - region.base;
  target.address = address;
  acquire(block, target, scope);
}

template <typename T> inline T loadAs(const uint8_t *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

inline uint64_t loadBits(const uint8_t *p, unsigned bytes, bool strong) {
  if (strong) {
    switch (bytes) {
    case 1:
      return __atomic_load_n(p, __ATOMIC_SEQ_CST);
    case 2:
      return __atomic_load_n(reinterpret_cast<const uint16_t *>(p),
                             __ATOMIC_SEQ_CST);
    case 4:
      return __atomic_load_n(reinterpret_cast<const uint32_t *>(p),
                             __ATOMIC_SEQ_CST);
    case 8:
      return __atomic_load_n(reinterpret_cast<const uint64_t *>(p),
                             __ATOMIC_SEQ_CST);
    }
  }
  switch (bytes) {
  case 1:
    return *p;
  case 2:
    return loadAs<uint16_t>(p);
  case 4:
    return loadAs<uint32_t>(p);
  default:
    return loadAs<uint64_t>(p);
  }
}

inline void storeBits(uint8_t *p, unsigned bytes, uint64_t value, bool strong) {
  if (strong) {
    switch (bytes) {
    case 1:
      __atomic_store_n(p, static_cast<uint8_t>(value), __ATOMIC_SEQ_CST);
      return;
    case 2:
      __atomic_store_n(reinterpret_cast<uint16_t *>(p),
                       static_cast<uint16_t>(value), __ATOMIC_SEQ_CST);
      return;
    case 4:
      __atomic_store_n(reinterpret_cast<uint32_t *>(p),
                       static_cast<uint32_t>(value), __ATOMIC_SEQ_CST);
      return;
    case 8:
      __atomic_store_n(reinterpret_cast<uint64_t *>(p), value,
                       __ATOMIC_SEQ_CST);
      return;
    }
  }
  std::memcpy(p, &value, bytes);
}

/// Notes a synchronizing load of `value` at `address`; true when the same
/// load saw the same value last time (the thread polls).
static bool notePoll(Thread &thread, uintptr_t address, uint64_t value) {
  if (thread.spinPc == thread.pc - 1 && thread.spinAddress == address &&
      thread.spinValue == value) {
    ++thread.spins;
    return true;
  }
  thread.spinPc = thread.pc - 1;
  thread.spinAddress = address;
  thread.spinValue = value;
  thread.spins = 0;
  return false;
}

bool Launch::memoryOp(Block &block, Thread &thread, const Instruction &in,
                      bool &polled) {
  bool load = in.op == Op::Ld;
  const Operand &addressOperand = in.operands[load ? 1 : 0];
  const Operand &data = in.operands[load ? 0 : 1];
  unsigned elementBytes = std::max(1u, bitsOf(in.type) / 8);
  unsigned bytes = elementBytes * in.vector;
  uint64_t address = addressOf(thread, addressOperand);
  Target target;
  if (!resolve(block, thread, in, address, in.space, bytes, !load, target))
    return false;
  bool strong = in.sem != Sem::Weak;
  auto scope = static_cast<uint32_t>(in.scope);
  if (in.sem == Sem::Volatile)
    scope = static_cast<uint32_t>(Scope::Sys);
  if (!load) {
    // A release, or a relaxed store after a fence: release first.
    if (in.sem == Sem::Release || in.sem == Sem::Sc)
      release(block, thread, target, scope);
    else if (strong && thread.releasePending) {
      release(block, thread, target, std::min(scope, thread.releaseScope));
      thread.releasePending = false;
    }
  }
  uint8_t kind = (load ? Read : Write) | (strong ? Atomic : 0);
  if (target.shadow) {
    bool unchanged = false;
    if (!load) {
      unchanged = true;
      for (unsigned i = 0; i < in.vector && unchanged; ++i) {
        const Operand &from = in.vector > 1 ? data.elements[i] : data;
        unchanged = loadBits(target.host + i * elementBytes, elementBytes,
                             false) == read(thread, from, in.type);
      }
    }
    recordAccess(block, thread, in, target, bytes, kind, unchanged);
  }
  if (load) {
    uint64_t first = 0;
    for (unsigned i = 0; i < in.vector; ++i) {
      uint64_t value =
          loadBits(target.host + i * elementBytes, elementBytes, strong);
      if (i == 0)
        first = value;
      const Operand &to = in.vector > 1 ? data.elements[i] : data;
      write(thread, to, in.type, value);
    }
    if (in.sem == Sem::Acquire || in.sem == Sem::Sc)
      acquire(block, target, scope);
    if (strong) {
      thread.relaxedLoad = target.address;
      // Polling: the same load seeing the same value again.
      polled = notePoll(thread, address, first);
    }
    return true;
  }
  for (unsigned i = 0; i < in.vector; ++i) {
    const Operand &from = in.vector > 1 ? data.elements[i] : data;
    storeBits(target.host + i * elementBytes, elementBytes,
              read(thread, from, in.type), strong);
  }
  return true;
}

template <typename T> T combine(AtomOp op, T old, T b, T c, Type type) {
  bool isSignedType = isSigned(type);
  switch (op) {
  case AtomOp::Add:
    if (type == Type::F32)
      return static_cast<T>(ofF32(asF32(old) + asF32(b)));
    if (type == Type::F64)
      return static_cast<T>(ofF64(asF64(old) + asF64(b)));
    return static_cast<T>(old + b);
  case AtomOp::Min:
    if (isSignedType)
      return signExtend(old, sizeof(T) * 8) < signExtend(b, sizeof(T) * 8) ? old
                                                                           : b;
    return std::min(old, b);
  case AtomOp::Max:
    if (isSignedType)
      return signExtend(old, sizeof(T) * 8) > signExtend(b, sizeof(T) * 8) ? old
                                                                           : b;
    return std::max(old, b);
  case AtomOp::Inc:
    return old >= b ? 0 : old + 1;
  case AtomOp::Dec:
    return (old == 0 || old > b) ? b : old - 1;
  case AtomOp::And:
    return old & b;
  case AtomOp::Or:
    return old | b;
  case AtomOp::Xor:
    return old ^ b;
  case AtomOp::Exch:
    return b;
  case AtomOp::Cas:
    return old == b ? c : old;
  }
  return old;
}

template <typename T>
T atomicUpdate(uint8_t *p, AtomOp op, T b, T c, Type type) {
  auto *word = reinterpret_cast<T *>(p);
  T old = __atomic_load_n(word, __ATOMIC_SEQ_CST);
  for (;;) {
    T next = combine<T>(op, old, b, c, type);
    if (__atomic_compare_exchange_n(word, &old, next, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return old;
  }
}

bool Launch::atomicOp(Block &block, Thread &thread, const Instruction &in,
                      bool &polled) {
  bool red = in.op == Op::Red;
  const Operand &addressOperand = in.operands[red ? 0 : 1];
  unsigned bytes = bitsOf(in.type) / 8;
  if (bytes != 4 && bytes != 8)
    return fault(LaunchStatus::IllegalInstruction, block, thread, in,
                 "the emulated device runs 32- and 64-bit atomics only");
  uint64_t address = addressOf(thread, addressOperand);
  Target target;
  if (!resolve(block, thread, in, address, in.space, bytes, true, target))
    return false;
  auto scope = static_cast<uint32_t>(in.scope);
  bool releases =
      in.sem == Sem::Release || in.sem == Sem::AcqRel || in.sem == Sem::Sc;
  bool acquires =
      in.sem == Sem::Acquire || in.sem == Sem::AcqRel || in.sem == Sem::Sc;
  if (releases) {
    release(block, thread, target, scope);
  } else if (thread.releasePending) {
    release(block, thread, target, std::min(scope, thread.releaseScope));
    thread.releasePending = false;
  }
  if (target.shadow)
    recordAccess(block, thread, in, target, bytes,
                 Atomic | Write | (red ? 0 : Read));
  uint64_t b = read(thread, in.operands[red ? 1 : 2], in.type);
  uint64_t c =
      in.atomOp == AtomOp::Cas ? read(thread, in.operands[3], in.type) : 0;
  uint64_t old;
  if (bytes == 4)
    old =
        atomicUpdate<uint32_t>(target.host, in.atomOp, static_cast<uint32_t>(b),
                               static_cast<uint32_t>(c), in.type);
  else
    old = atomicUpdate<uint64_t>(target.host, in.atomOp, b, c, in.type);
  if (acquires)
    acquire(block, target, scope);
  thread.relaxedLoad = target.address;
  if (!red) {
    write(thread, in.operands[0], in.type, old);
    polled = notePoll(thread, address, old);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

/// min / max of floats as PTX defines them: a NaN operand yields the other
/// (both NaN: NaN) unless .NaN; -0 < +0.
double floatMinMax(double a, double b, bool max, bool nanPropagates) {
  if (std::isnan(a) || std::isnan(b)) {
    if (nanPropagates || (std::isnan(a) && std::isnan(b)))
      return NAN;
    return std::isnan(a) ? b : a;
  }
  if (a == b && a == 0)
    return max ? (std::signbit(a) ? b : a) : (std::signbit(a) ? a : b);
  return max ? std::max(a, b) : std::min(a, b);
}

bool compareFloat(Cmp cmp, double a, double b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  switch (cmp) {
  case Cmp::Eq:
    return !unordered && a == b;
  case Cmp::Ne:
    return !unordered && a != b;
  case Cmp::Lt:
    return !unordered && a < b;
  case Cmp::Le:
    return !unordered && a <= b;
  case Cmp::Gt:
    return !unordered && a > b;
  case Cmp::Ge:
    return !unordered && a >= b;
  case Cmp::Equ:
    return unordered || a == b;
  case Cmp::Neu:
    return unordered || a != b;
  case Cmp::Ltu:
    return unordered || a < b;
  case Cmp::Leu:
    return unordered || a <= b;
  case Cmp::Gtu:
    return unordered || a > b;
  case Cmp::Geu:
    return unordered || a >= b;
  case Cmp::Num:
    return !unordered;
  case Cmp::Nan:
    return unordered;
  default:
    return false;
  }
}

bool compareInt(Cmp cmp, uint64_t a, uint64_t b, Type type) {
  unsigned bits = bitsOf(type);
  int64_t sa = signExtend(a, bits), sb = signExtend(b, bits);
  bool s = isSigned(type);
  switch (cmp) {
  case Cmp::Eq:
    return a == b;
  case Cmp::Ne:
    return a != b;
  case Cmp::Lt:
    return s ? sa < sb : a < b;
  case Cmp::Le:
    return s ? sa <= sb : a <= b;
  case Cmp::Gt:
    return s ? sa > sb : a > b;
  case Cmp::Ge:
    return s ? sa >= sb : a >= b;
  case Cmp::Lo:
    return a < b;
  case Cmp::Ls:
    return a <= b;
  case Cmp::Hi:
    return a > b;
  case Cmp::Hs:
    return a >= b;
  default:
    return false;
  }
}

/// Applies a float operation `f` lane-wise for packed types.
template <typename F>
uint64_t floatLanes(Type type, uint64_t a, uint64_t b, uint64_t c, F f) {
  if (type == Type::F16x2 || type == Type::BF16x2) {
    Type lane = type == Type::F16x2 ? Type::F16 : Type::BF16;
    uint64_t lo = fromReal(f(toReal(a & 0xFFFF, lane), toReal(b & 0xFFFF, lane),
                             toReal(c & 0xFFFF, lane)),
                           lane);
    uint64_t hi = fromReal(
        f(toReal(a >> 16, lane), toReal(b >> 16, lane), toReal(c >> 16, lane)),
        lane);
    return (hi << 16) | lo;
  }
  if (type == Type::F32) {
    // Single precision throughout, so that rounding is the f32 one.
    return fromReal(f(asF32(a), asF32(b), asF32(c)), type);
  }
  return fromReal(f(toReal(a, type), toReal(b, type), toReal(c, type)), type);
}

template <typename F>
void Launch::floatOp(Thread &thread, const Instruction &in, F f) {
  const std::vector<Operand> &ops = in.operands;
  Type type = in.type;
  auto a = [&] { return read(thread, ops[1], type); };
  auto b = [&] { return read(thread, ops[2], type); };
  auto finishF32 = [&](float value) {
    if (in.ftz)
      value = flush(value);
    if (in.sat)
      value = std::isnan(value) ? 0.0f : std::min(1.0f, std::max(0.0f, value));
    return value;
  };
  RoundingMode mode(in.round);
  uint64_t x = a(), y = ops.size() > 2 ? b() : 0,
           z = ops.size() > 3 ? read(thread, ops[3], type) : 0;
  if (type == Type::F32) {
    float fx = asF32(x), fy = asF32(y), fz = asF32(z);
    if (in.ftz) {
      fx = flush(fx);
      fy = flush(fy);
      fz = flush(fz);
    }
    float r = finishF32(f(fx, fy, fz));
    // A NaN result is the canonical NaN, as the GPU's.
    write(thread, ops[0], type, std::isnan(r) ? 0x7FFFFFFFu : ofF32(r));
    return;
  }
  if (type == Type::F64) {
    write(thread, ops[0], type, ofF64(f(asF64(x), asF64(y), asF64(z))));
    return;
  }
  uint64_t r = floatLanes(type, x, y, z, [&](double p, double q, double s) {
    double v =
        f(static_cast<float>(p), static_cast<float>(q), static_cast<float>(s));
    if (in.sat)
      v = std::isnan(v) ? 0.0 : std::min(1.0, std::max(0.0, v));
    return v;
  });
  write(thread, ops[0], type, r);
}

/// Integer and float arithmetic: one case per opcode, each its semantics;
/// bit manipulation is bitOp's, special functions specialFunction's.
bool Launch::arithmetic(Block &block, Thread &thread, const Instruction &in) {
  const std::vector<Operand> &ops = in.operands;
  Type type = in.type;
  unsigned bits = bitsOf(type);
  auto a = [&] { return read(thread, ops[1], type); };
  auto b = [&] { return read(thread, ops[2], type); };
  bool fp = isFloat(type);
  auto floatOp = [&](auto f) { this->floatOp(thread, in, f); };
  switch (in.op) {
  case Op::Add:
  case Op::Sub: {
    bool add = in.op == Op::Add;
    if (fp) {
      floatOp([&](auto x, auto y, auto) { return add ? x + y : x - y; });
      return true;
    }
    if (in.sat && type == Type::S32) {
      int64_t x = signExtend(a(), 32), y = signExtend(b(), 32);
      int64_t r = add ? x + y : x - y;
      r = std::min<int64_t>(INT32_MAX, std::max<int64_t>(INT32_MIN, r));
      write(thread, ops[0], type, static_cast<uint64_t>(r));
      return true;
    }
    if (add && (in.carryIn || in.carryOut)) {
      write(thread, ops[0], type, addWithCarry(thread, in, a(), b(), bits));
      return true;
    }
    write(thread, ops[0], type, add ? a() + b() : a() - b());
    return true;
  }
  case Op::Mul:
  case Op::Mad: {
    bool mad = in.op == Op::Mad;
    if (fp) {
      if (mad)
        floatOp([&](auto x, auto y, auto z) { return std::fma(x, y, z); });
      else
        floatOp([&](auto x, auto y, auto) { return x * y; });
      return true;
    }
    bool s = isSigned(type);
    uint64_t x = a(), y = b();
    if (in.part == MulPart::Wide) {
      Type wide = bits == 16   ? (s ? Type::S32 : Type::U32)
                  : bits == 32 ? (s ? Type::S64 : Type::U64)
                               : type;
      if (bits == 64)
        return fault(LaunchStatus::IllegalInstruction, block, thread, in,
                     ".wide of 64-bit operands");
      uint64_t product =
          s ? static_cast<uint64_t>(signExtend(x, bits) * signExtend(y, bits))
            : x * y;
      if (mad)
        product += read(thread, ops[3], wide);
      write(thread, ops[0], wide, product);
      return true;
    }
    uint64_t result;
    if (in.part == MulPart::Hi) {
      if (bits == 64) {
        if (s) {
          __int128 p = static_cast<__int128>(static_cast<int64_t>(x)) *
                       static_cast<int64_t>(y);
          result = static_cast<uint64_t>(p >> 64);
        } else {
          unsigned __int128 p = static_cast<unsigned __int128>(x) * y;
          result = static_cast<uint64_t>(p >> 64);
        }
      } else {
        int64_t p = s ? signExtend(x, bits) * signExtend(y, bits)
                      : static_cast<int64_t>(x * y);
        result = static_cast<uint64_t>(p) >> bits;
      }
    } else {
      result = x * y;
    }
    if (mad && (in.carryIn || in.carryOut))
      result = addWithCarry(thread, in, result & maskOf(bits),
                            read(thread, ops[3], type), bits);
    else if (mad)
      result += read(thread, ops[3], type);
    write(thread, ops[0], type, result);
    return true;
  }
  case Op::Fma:
    floatOp([&](auto x, auto y, auto z) { return std::fma(x, y, z); });
    return true;
  case Op::Div:
  case Op::Rem: {
    if (fp) {
      floatOp([&](auto x, auto y, auto) { return x / y; });
      return true;
    }
    uint64_t x = a(), y = b(), r;
    if (y == 0) {
      r = in.op == Op::Div ? maskOf(bits) : x;
    } else if (isSigned(type)) {
      int64_t sx = signExtend(x, bits), sy = signExtend(y, bits);
      if (sy == -1)
        r = in.op == Op::Div ? static_cast<uint64_t>(-sx) : 0;
      else
        r = static_cast<uint64_t>(in.op == Op::Div ? sx / sy : sx % sy);
    } else {
      r = in.op == Op::Div ? x / y : x % y;
    }
    write(thread, ops[0], type, r);
    return true;
  }
  case Op::Abs:
  case Op::Neg: {
    bool abs = in.op == Op::Abs;
    if (fp) {
      uint64_t x = a();
      uint64_t sign = type == Type::F64   ? 1ull << 63
                      : type == Type::F32 ? 1ull << 31
                      : (type == Type::F16x2 || type == Type::BF16x2)
                          ? 0x80008000ull
                          : 0x8000ull;
      if (type == Type::F32 && in.ftz)
        x = ofF32(flush(asF32(x)));
      write(thread, ops[0], type, abs ? x & ~sign : x ^ sign);
      return true;
    }
    int64_t x = signExtend(a(), bits);
    write(thread, ops[0], type,
          static_cast<uint64_t>(abs ? (x < 0 ? -x : x) : -x));
    return true;
  }
  case Op::Min:
  case Op::Max: {
    bool max = in.op == Op::Max;
    if (fp) {
      floatOp([&](auto x, auto y, auto) {
        return static_cast<decltype(x)>(floatMinMax(x, y, max, in.nan));
      });
      return true;
    }
    uint64_t x = a(), y = b();
    bool less =
        isSigned(type) ? signExtend(x, bits) < signExtend(y, bits) : x < y;
    write(thread, ops[0], type, (less != max) ? x : y);
    return true;
  }
  case Op::CopySign: {
    uint64_t sign = type == Type::F64 ? 1ull << 63 : 1ull << 31;
    write(thread, ops[0], type, (b() & ~sign) | (a() & sign));
    return true;
  }
  default:
    return bitOp(block, thread, in);
  }
}

/// Logic, shifts and bit fields.
bool Launch::bitOp(Block &block, Thread &thread, const Instruction &in) {
  const std::vector<Operand> &ops = in.operands;
  Type type = in.type;
  unsigned bits = bitsOf(type);
  auto a = [&] { return read(thread, ops[1], type); };
  auto b = [&] { return read(thread, ops[2], type); };
  switch (in.op) {
  case Op::And:
    write(thread, ops[0], type, a() & b());
    return true;
  case Op::Or:
    write(thread, ops[0], type, a() | b());
    return true;
  case Op::Xor:
    write(thread, ops[0], type, a() ^ b());
    return true;
  case Op::Not:
    write(thread, ops[0], type, type == Type::Pred ? !a() : ~a());
    return true;
  case Op::CNot:
    write(thread, ops[0], type, a() == 0 ? 1 : 0);
    return true;
  case Op::Shf: {
    // The 64 bits {b, a} shifted; .l keeps the high word, .r the low.
    if (bits != 32)
      return fault(LaunchStatus::IllegalInstruction, block, thread, in,
                   "shf of other than 32 bits");
    uint64_t pair = (b() << 32) | a();
    uint64_t amount = read(thread, ops[3], Type::U32);
    amount = in.clampShift ? std::min<uint64_t>(amount, 32) : amount & 31;
    uint64_t r = in.shiftLeft ? (pair << amount) >> 32 : pair >> amount;
    write(thread, ops[0], type, r & 0xFFFFFFFFu);
    return true;
  }
  case Op::Shl:
  case Op::Shr: {
    uint64_t x = a();
    uint64_t amount = read(thread, ops[2], Type::U32);
    uint64_t r;
    if (in.op == Op::Shl)
      r = amount >= bits ? 0 : x << amount;
    else if (isSigned(type))
      r = static_cast<uint64_t>(signExtend(x, bits) >>
                                std::min<uint64_t>(amount, bits - 1));
    else
      r = amount >= bits ? 0 : x >> amount;
    write(thread, ops[0], type, r);
    return true;
  }
  case Op::Bfe: {
    uint64_t x = a();
    unsigned pos = read(thread, ops[2], Type::U32) & 0xFF;
    unsigned len = read(thread, ops[3], Type::U32) & 0xFF;
    unsigned msb = bits - 1;
    bool s = isSigned(type);
    bool sbit = false;
    if (s && len)
      sbit = (x >> std::min(pos + len - 1, msb)) & 1;
    uint64_t r = 0;
    for (unsigned i = 0; i < bits; ++i) {
      bool bit = (i < len && pos + i <= msb) ? (x >> (pos + i)) & 1 : sbit;
      r |= static_cast<uint64_t>(bit) << i;
    }
    write(thread, ops[0], type, r);
    return true;
  }
  case Op::Bfi: {
    uint64_t insert = a(), base = b();
    unsigned pos = read(thread, ops[3], Type::U32) & 0xFF;
    unsigned len = read(thread, ops[4], Type::U32) & 0xFF;
    for (unsigned i = 0; i < len && pos + i < bits; ++i) {
      uint64_t bit = 1ull << (pos + i);
      base = (base & ~bit) | (((insert >> i) & 1) << (pos + i));
    }
    write(thread, ops[0], type, base);
    return true;
  }
  case Op::Prmt: {
    uint64_t x = read(thread, ops[1], Type::B32);
    uint64_t y = read(thread, ops[2], Type::B32);
    uint64_t selector = read(thread, ops[3], Type::B32);
    uint64_t bytes = (y << 32) | x, r = 0;
    for (unsigned i = 0; i < 4; ++i) {
      unsigned nibble = (selector >> (4 * i)) & 0xF;
      uint64_t byte = (bytes >> (8 * (nibble & 7))) & 0xFF;
      if (nibble & 8)
        byte = (byte & 0x80) ? 0xFF : 0;
      r |= byte << (8 * i);
    }
    write(thread, ops[0], Type::B32, r);
    return true;
  }
  case Op::Popc:
    write(thread, ops[0], Type::U32, __builtin_popcountll(a()));
    return true;
  case Op::Clz: {
    uint64_t x = a();
    write(thread, ops[0], Type::U32,
          x == 0 ? bits : __builtin_clzll(x) - (64 - bits));
    return true;
  }
  case Op::Brev: {
    uint64_t x = a(), r = 0;
    for (unsigned i = 0; i < bits; ++i)
      r |= ((x >> i) & 1) << (bits - 1 - i);
    write(thread, ops[0], type, r);
    return true;
  }
  default:
    return specialFunction(block, thread, in);
  }
}

/// The special function unit's approximations (here the host's functions)
/// and float classification.
bool Launch::specialFunction(Block &block, Thread &thread,
                             const Instruction &in) {
  const std::vector<Operand> &ops = in.operands;
  Type type = in.type;
  auto a = [&] { return read(thread, ops[1], type); };
  auto floatOp = [&](auto f) { this->floatOp(thread, in, f); };
  if (isApproximation(in.op)) {
    Op op = in.op;
    floatOp([&](auto x, auto, auto) -> decltype(x) {
      using T = decltype(x);
      switch (op) {
      case Op::Ex2:
        return std::exp2(x);
      case Op::Lg2:
        return std::log2(x);
      case Op::Rsqrt:
        return T(1) / std::sqrt(x);
      case Op::Sqrt:
        return std::sqrt(x);
      case Op::Rcp:
        return T(1) / x;
      case Op::Sin:
        return std::sin(x);
      case Op::Cos:
        return std::cos(x);
      default:
        return std::tanh(x);
      }
    });
    return true;
  }
  switch (in.op) {
  case Op::Testp: {
    double x = toReal(a(), type);
    bool r;
    switch (in.cmp) {
    case Cmp::Finite:
      r = std::isfinite(x);
      break;
    case Cmp::Infinite:
      r = std::isinf(x);
      break;
    case Cmp::Number:
      r = !std::isnan(x);
      break;
    case Cmp::NotANumber:
      r = std::isnan(x);
      break;
    case Cmp::Normal:
      r = std::isnormal(static_cast<float>(x));
      break;
    default:
      r = std::fpclassify(static_cast<float>(x)) == FP_SUBNORMAL;
      break;
    }
    write(thread, ops[0], Type::Pred, r);
    return true;
  }
  default:
    return fault(LaunchStatus::IllegalInstruction, block, thread, in,
                 "instruction not implemented by the emulated device");
  }
}

bool Launch::convert(Thread &thread, const Instruction &in) {
  const std::vector<Operand> &ops = in.operands;
  Type to = in.type, from = in.type2;
  if (in.tf32) {
    // cvt.rna.tf32.f32: 10 bits of mantissa, rounded to the nearest, ties
    // away from zero (on the magnitude), the low 13 bits zero; infinities
    // and NaNs keep their class.
    auto bits = static_cast<uint32_t>(read(thread, ops[1], Type::F32));
    if ((bits & 0x7F800000u) != 0x7F800000u)
      bits += 0x1000u;
    else if (bits & 0x007FFFFFu)
      bits |= 0x00400000u; // a NaN stays one once its low bits go
    write(thread, ops[0], Type::B32, bits & ~0x1FFFu);
    return true;
  }
  // Packing two f32 into f16x2 / bf16x2 / e4m3x2 / e5m2x2.
  if (ops.size() == 3) {
    float hi = asF32(read(thread, ops[1], Type::F32));
    float lo = asF32(read(thread, ops[2], Type::F32));
    uint64_t r;
    if (to == Type::E4M3x2 || to == Type::E5M2x2) {
      bool e4m3 = to == Type::E4M3x2;
      r = (static_cast<uint64_t>(toFp8(hi, e4m3, in.sat)) << 8) |
          toFp8(lo, e4m3, in.sat);
    } else {
      if (in.sat) {
        hi = std::isnan(hi) ? 0.0f : std::min(1.0f, std::max(0.0f, hi));
        lo = std::isnan(lo) ? 0.0f : std::min(1.0f, std::max(0.0f, lo));
      }
      Type lane = to == Type::BF16x2 ? Type::BF16 : Type::F16;
      r = (fromReal(hi, lane) << 16) | fromReal(lo, lane);
    }
    write(thread, ops[0], to, r);
    return true;
  }
  uint64_t x = read(thread, ops[1], from);
  // Unpacking fp8 pairs to f16x2.
  if (from == Type::E4M3x2 || from == Type::E5M2x2) {
    bool e4m3 = from == Type::E4M3x2;
    uint64_t hi = floatToHalf(fromFp8(static_cast<uint8_t>(x >> 8), e4m3));
    uint64_t lo = floatToHalf(fromFp8(static_cast<uint8_t>(x), e4m3));
    write(thread, ops[0], to, (hi << 16) | lo);
    return true;
  }
  unsigned toBits = bitsOf(to), fromBits = bitsOf(from);
  bool toFloat = isFloat(to), fromFloat = isFloat(from);
  if (!toFloat && !fromFloat) {
    int64_t value = isSigned(from) ? signExtend(x, fromBits)
                                   : static_cast<int64_t>(x & maskOf(fromBits));
    if (in.sat) {
      if (isSigned(to)) {
        int64_t lo = -(1ll << (toBits - 1)), hi = (1ll << (toBits - 1)) - 1;
        if (!isSigned(from) &&
            (x & maskOf(fromBits)) > static_cast<uint64_t>(hi))
          value = hi;
        else
          value = std::min(hi, std::max(lo, value));
      } else {
        uint64_t hi = maskOf(toBits);
        if (isSigned(from) && value < 0)
          value = 0;
        else if (static_cast<uint64_t>(value) > hi)
          value = static_cast<int64_t>(hi);
      }
    }
    write(thread, ops[0], to, static_cast<uint64_t>(value));
    return true;
  }
  if (!fromFloat) {
    // Integer to float, rounded as asked (default: to nearest).
    RoundingMode mode(in.round);
    uint64_t r;
    if (to == Type::F64) {
      r = isSigned(from) ? ofF64(static_cast<double>(signExtend(x, fromBits)))
                         : ofF64(static_cast<double>(x & maskOf(fromBits)));
    } else {
      float f = isSigned(from) ? static_cast<float>(signExtend(x, fromBits))
                               : static_cast<float>(x & maskOf(fromBits));
      r = fromReal(f, to);
    }
    write(thread, ops[0], to, r);
    return true;
  }
  double value = toReal(x, from);
  if (from == Type::F32 && in.ftz)
    value = flush(static_cast<float>(value));
  if (!toFloat) {
    // Float to integer: rounded as asked, saturating, NaN to 0.
    double rounded = roundIntegral(value, in.round);
    int64_t r;
    if (std::isnan(rounded)) {
      r = 0;
    } else if (isSigned(to)) {
      double lo = -std::ldexp(1.0, static_cast<int>(toBits) - 1);
      double hi = std::ldexp(1.0, static_cast<int>(toBits) - 1) - 1;
      r = rounded <= lo ? static_cast<int64_t>(lo)
          : rounded >= hi
              ? (toBits == 64 ? INT64_MAX : static_cast<int64_t>(hi))
              : static_cast<int64_t>(rounded);
    } else {
      double hi = std::ldexp(1.0, static_cast<int>(toBits)) - 1;
      r = rounded <= 0 ? 0
          : rounded >= hi
              ? static_cast<int64_t>(toBits == 64 ? UINT64_MAX : maskOf(toBits))
              : static_cast<int64_t>(static_cast<uint64_t>(rounded));
    }
    write(thread, ops[0], to, static_cast<uint64_t>(r));
    return true;
  }
  // Float to float (a NaN is the target's canonical NaN, but for f64).
  if (std::isnan(value) && !in.sat && to != Type::F64) {
    write(thread, ops[0], to, fromReal(value, to));
    return true;
  }
  if (to == from && (in.round == Round::Rni || in.round == Round::Rzi ||
                     in.round == Round::Rmi || in.round == Round::Rpi))
    value = roundIntegral(value, in.round);
  if (in.sat)
    value = std::isnan(value) ? 0.0 : std::min(1.0, std::max(0.0, value));
  uint64_t r;
  {
    RoundingMode mode(in.round == Round::Rni ? Round::None : in.round);
    if (to == Type::F32 && from == Type::F64)
      r = ofF32(static_cast<float>(value));
    else if (to == Type::F32)
      r = ofF32(static_cast<float>(value));
    else
      r = fromReal(value, to);
  }
  if (to == Type::F32 && in.ftz)
    r = ofF32(flush(asF32(r)));
  write(thread, ops[0], to, r);
  return true;
}

//===----------------------------------------------------------------------===//
// Warp-synchronous operations and barriers
//===----------------------------------------------------------------------===//

/// ldmatrix: lanes 8j to 8j+7 give the row addresses of matrix j (16
/// bytes each, in shared memory); lane l receives, of each matrix, the two
/// 16-bit elements (l / 4, 2 (l % 4)) and (l / 4, 2 (l % 4) + 1), or with
/// .trans those of the transpose.
bool Launch::loadMatrices(Block &block, const Instruction &in, Thread **lanes) {
  uint8_t *rows[4][8];
  for (unsigned j = 0; j < in.vector; ++j)
    for (unsigned r = 0; r < 8; ++r) {
      Thread &t = *lanes[j * 8 + r];
      Target target;
      if (!resolve(block, t, in, t.value, Space::Shared, 16, false, target))
        return false;
      if (target.shadow)
        recordAccess(block, t, in, target, 16, Read, false);
      rows[j][r] = target.host;
    }
  for (unsigned lane = 0; lane < 32; ++lane) {
    Thread &t = *lanes[lane];
    unsigned row = lane / 4, column = 2 * (lane % 4);
    for (unsigned j = 0; j < in.vector; ++j) {
      uint16_t lo, hi;
      if (in.transpose) {
        std::memcpy(&lo, rows[j][column] + 2 * row, 2);
        std::memcpy(&hi, rows[j][column + 1] + 2 * row, 2);
      } else {
        std::memcpy(&lo, rows[j][row] + 2 * column, 2);
        std::memcpy(&hi, rows[j][row] + 2 * (column + 1), 2);
      }
      const Operand &d = in.operands[0];
      write(t, d.kind == Operand::Vector ? d.elements[j] : d, Type::B32,
            lo | uint32_t(hi) << 16);
    }
  }
  return true;
}

/// mma.m16n8k{8,16}.row.col with f32 accumulators: each lane's registers
/// hold the fragments PTX's ISA assigns it (group g = lane / 4, t = lane %
/// 4). Products of f16 and bf16 are exact in f32; the sum over k and C is
/// formed in double and rounded once.
void Launch::multiplyMatrices(const Instruction &in, Thread **lanes) {
  unsigned k = in.mmaK;
  float a[16][16], b[16][8], c[16][8];
  auto half = [&](uint32_t word, unsigned which) {
    return static_cast<float>(
        toReal(which ? word >> 16 : word & 0xFFFF, in.type2));
  };
  // tf32 (m16n8k8): one element per register, the f32 bits' low 13
  // ignored; A: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4); B: (t, g),
  // (t + 4, g).
  auto tf32 = [](uint32_t word) { return asF32(word & ~0x1FFFu); };
  auto reg = [&](Thread &t, const Operand &operand, unsigned i) {
    return static_cast<uint32_t>(
        read(t, operand.kind == Operand::Vector ? operand.elements[i] : operand,
             Type::B32));
  };
  for (unsigned lane = 0; lane < 32 && in.tf32; ++lane) {
    Thread &t = *lanes[lane];
    unsigned g = lane / 4, q = lane % 4;
    for (unsigned r = 0; r < 4; ++r)
      a[g + (r % 2) * 8][q + (r / 2) * 4] = tf32(reg(t, in.operands[1], r));
    for (unsigned r = 0; r < 2; ++r)
      b[q + r * 4][g] = tf32(reg(t, in.operands[2], r));
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    Thread &t = *lanes[lane];
    unsigned g = lane / 4, q = lane % 4;
    // A: registers (g, 2q), (g + 8, 2q), then (g, 2q + 8), (g + 8, 2q + 8).
    for (unsigned r = 0; r < (k == 16 ? 4u : 2u) && !in.tf32; ++r) {
      uint32_t word = reg(t, in.operands[1], r);
      unsigned row = g + (r % 2) * 8, column = 2 * q + (r / 2) * 8;
      a[row][column] = half(word, 0);
      a[row][column + 1] = half(word, 1);
    }
    // B: (2q, g) and (2q + 1, g), then the same 8 rows further.
    for (unsigned r = 0; r < k / 8 && !in.tf32; ++r) {
      uint32_t word = reg(t, in.operands[2], r);
      b[2 * q + r * 8][g] = half(word, 0);
      b[2 * q + 1 + r * 8][g] = half(word, 1);
    }
    for (unsigned i = 0; i < 4; ++i)
      c[g + (i / 2) * 8][2 * q + i % 2] =
          asF32(read(t, in.operands[3].elements[i], Type::F32));
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    Thread &t = *lanes[lane];
    unsigned g = lane / 4, q = lane % 4;
    for (unsigned i = 0; i < 4; ++i) {
      unsigned row = g + (i / 2) * 8, column = 2 * q + i % 2;
      double sum = c[row][column];
      for (unsigned x = 0; x < k; ++x)
        sum += double(a[row][x]) * b[x][column];
      write(t, in.operands[0].elements[i], Type::F32,
            ofF32(static_cast<float>(sum)));
    }
  }
}

bool Launch::warpOp(Block &block, const Instruction &in, Thread **lanes,
                    uint32_t mask) {
  if (in.op == Op::Ldmatrix && !loadMatrices(block, in, lanes))
    return false;
  if (in.op == Op::Mma)
    multiplyMatrices(in, lanes);
  uint32_t ballot = 0;
  bool all = true, any = false;
  bool first = true, uniform = true, firstValue = false;
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(mask & (1u << lane)))
      continue;
    Thread &t = *lanes[lane];
    if (in.op == Op::Vote) {
      bool p = t.predicate;
      ballot |= p ? 1u << lane : 0;
      all &= p;
      any |= p;
      if (first)
        firstValue = p;
      else if (p != firstValue)
        uniform = false;
      first = false;
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    if (!(mask & (1u << lane)))
      continue;
    Thread &t = *lanes[lane];
    if (in.op == Op::Shfl) {
      // PTX's definition: a segment mask and a clamp in c.
      unsigned cval = t.c & 0x1F, segmask = (t.c >> 8) & 0x1F;
      unsigned maxLane = (lane & segmask) | (cval & ~segmask);
      unsigned minLane = lane & segmask;
      int j;
      bool valid;
      unsigned bval = t.b & 0x1F;
      switch (in.shfl) {
      case ShflMode::Up:
        j = static_cast<int>(lane) - static_cast<int>(bval);
        valid = j >= static_cast<int>(maxLane);
        break;
      case ShflMode::Down:
        j = static_cast<int>(lane + bval);
        valid = j <= static_cast<int>(maxLane);
        break;
      case ShflMode::Bfly:
        j = static_cast<int>(lane ^ bval);
        valid = j <= static_cast<int>(maxLane);
        break;
      default:
        j = static_cast<int>(minLane | (bval & ~segmask));
        valid = j <= static_cast<int>(maxLane);
        break;
      }
      if (!valid || j < 0 || j > 31 || !(mask & (1u << j)))
        j = static_cast<int>(lane);
      uint64_t value = lanes[j]->value;
      const Operand &d = in.operands[0];
      if (d.kind == Operand::Vector) {
        write(t, d.elements[0], Type::B32, value);
        write(t, d.elements[1], Type::Pred, valid);
      } else {
        write(t, d, Type::B32, value);
      }
    } else if (in.op == Op::Vote) {
      const Operand &d = in.operands[0];
      switch (in.vote) {
      case VoteMode::All:
        write(t, d, Type::Pred, all);
        break;
      case VoteMode::Any:
        write(t, d, Type::Pred, any);
        break;
      case VoteMode::Uni:
        write(t, d, Type::Pred, uniform);
        break;
      case VoteMode::Ballot:
        write(t, d, Type::B32, ballot);
        break;
      }
    }
    // bar.warp.sync orders the lanes' memory accesses. shfl.sync and
    // vote.sync are taken to as well: every lane's value reaches the
    // exchange, so what a lane read before it is read by the time another
    // lane goes on (upstream's gpu.all_reduce has every lane of its last
    // shuffle store the sum where lane 0 read its partial). ldmatrix and
    // mma.sync are not: nothing relies on them, and not assuming it keeps
    // the detector strict around tensor-core tiles.
    if (in.op != Op::Ldmatrix && in.op != Op::Mma)
      ++t.warpEpoch;
    t.status = Ready;
    ++t.pc;
    if (tracing)
      trace(block, t, in);
  }
  return true;
}

bool Launch::resolveWarps(Block &block) {
  bool progressed = false;
  uint32_t warps = (threadsPerBlock + 31) / 32;
  for (uint32_t w = 0; w < warps; ++w) {
    Thread *lanes[32] = {};
    uint32_t present = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
      uint32_t index = w * 32 + lane;
      if (index < threadsPerBlock) {
        lanes[lane] = &block.threads[index];
        present |= 1u << lane;
      }
    }
    for (unsigned lane = 0; lane < 32; ++lane) {
      Thread *t = lanes[lane];
      if (!t || t->status != AtWarp)
        continue;
      uint32_t mask = t->memberMask;
      const Instruction &in = kernel.code[t->pc];
      if (in.op == Op::ActiveMask) {
        // The lanes executing it together: those that reached it in this
        // round (the others exited, or wait elsewhere).
        uint32_t active = 0;
        for (unsigned other = 0; other < 32; ++other)
          if (lanes[other] && lanes[other]->status == AtWarp &&
              lanes[other]->pc == t->pc)
            active |= 1u << other;
        for (unsigned other = 0; other < 32; ++other)
          if (active & (1u << other)) {
            Thread &o = *lanes[other];
            write(o, in.operands[0], Type::B32, active);
            o.status = Ready;
            ++o.pc;
            if (tracing)
              trace(block, o, in);
          }
        progressed = true;
        continue;
      }
      if (mask & ~present) {
        fault(LaunchStatus::IllegalInstruction, block, *t, in,
              "the member mask names lanes the block does not have");
        return false;
      }
      if (!(mask & (1u << lane))) {
        fault(LaunchStatus::IllegalInstruction, block, *t, in,
              "the member mask does not include the executing lane");
        return false;
      }
      bool ready = true;
      for (unsigned other = 0; other < 32 && ready; ++other) {
        if (!(mask & (1u << other)))
          continue;
        Thread &o = *lanes[other];
        if (o.status == Done) {
          fault(LaunchStatus::IllegalInstruction, block, *t, in,
                "lane " + std::to_string(other) +
                    " of the member mask exited without reaching it (at PTX "
                    "line " +
                    std::to_string(o.exitLine) + ")");
          return false;
        }
        if (o.status != AtWarp) {
          ready = false;
        } else if (o.pc != t->pc || o.memberMask != mask) {
          fault(LaunchStatus::IllegalInstruction, block, *t, in,
                "lane " + std::to_string(other) +
                    " of the member mask waits at another warp-synchronous "
                    "instruction (PTX line " +
                    std::to_string(kernel.code[o.pc].line) + ")");
          return false;
        }
      }
      if (!ready)
        continue;
      if (!warpOp(block, in, lanes, mask))
        return false;
      progressed = true;
    }
  }
  return progressed;
}

bool Launch::resolveBarriers(Block &block) {
  bool progressed = false;
  for (uint32_t id = 0; id < 16; ++id) {
    uint32_t waiting = 0, expected = 0;
    Thread *first = nullptr;
    for (Thread &t : block.threads)
      if (t.status == AtBarrier && t.barrier == id) {
        ++waiting;
        if (!first)
          first = &t;
        expected = t.barrierCount ? t.barrierCount : threadsPerBlock;
      }
    if (!first)
      continue;
    // Not complete yet (threads that exited never arrive: if nothing else
    // can move, deadlock() says so).
    if (waiting + block.arrivals[id] < expected)
      continue;
    // Complete: every waiting thread passes (an aligned barrier must be the
    // same instruction for all).
    for (Thread &t : block.threads) {
      if (t.status != AtBarrier || t.barrier != id)
        continue;
      const Instruction &in = kernel.code[t.pc];
      if (in.aligned && t.pc != first->pc) {
        fault(LaunchStatus::IllegalInstruction, block, t, in,
              "threads of the block wait at different bar.sync instructions "
              "(this one and PTX line " +
                  std::to_string(kernel.code[first->pc].line) +
                  "): an aligned barrier must be the same for every thread");
        return false;
      }
    }
    for (Thread &t : block.threads)
      if (t.status == AtBarrier && t.barrier == id) {
        t.status = Ready;
        ++t.pc;
        ++t.epoch;
        ++t.warpEpoch;
      }
    block.arrivals[id] = 0;
    progressed = true;
  }
  return progressed;
}

bool Launch::deadlock(Block &block) {
  // Nothing can move: describe who waits where.
  for (Thread &t : block.threads) {
    if (t.status == AtBarrier) {
      uint32_t count = 0;
      for (const Thread &o : block.threads)
        count += o.status == AtBarrier && o.barrier == t.barrier;
      const Thread *other = nullptr;
      for (const Thread &o : block.threads)
        if (o.status != AtBarrier || o.barrier != t.barrier) {
          other = &o;
          break;
        }
      std::string elsewhere =
          other ? "; thread (" + std::to_string(other->tid[0]) + "," +
                      std::to_string(other->tid[1]) + "," +
                      std::to_string(other->tid[2]) + ") " +
                      (other->status == Done
                           ? "exited at PTX line " +
                                 std::to_string(other->exitLine)
                           : "waits at PTX line " +
                                 std::to_string(kernel.code[other->pc].line))
                : std::string();
      return fault(LaunchStatus::IllegalInstruction, block, t,
                   kernel.code[t.pc],
                   "deadlock: " + std::to_string(count) +
                       " threads wait at "
                       "barrier " +
                       std::to_string(t.barrier) +
                       ", which can never complete" + elsewhere);
    }
    if (t.status == AtWarp)
      return fault(LaunchStatus::IllegalInstruction, block, t,
                   kernel.code[t.pc],
                   "deadlock: a warp-synchronous instruction whose member "
                   "lanes never all arrive");
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

bool Launch::execute(Block &block, Thread &thread, const Instruction &in,
                     bool &polled) {
  const std::vector<Operand> &ops = in.operands;
  switch (in.op) {
  case Op::Mov: {
    const Operand &d = ops[0], &s = ops[1];
    if (s.kind == Operand::Vector) {
      // Pack: the first element is the least significant.
      unsigned part =
          bitsOf(in.type) / static_cast<unsigned>(s.elements.size());
      Type partType = part == 8 ? Type::B8 : part == 16 ? Type::B16 : Type::B32;
      uint64_t value = 0;
      for (size_t i = 0; i < s.elements.size(); ++i)
        value |= read(thread, s.elements[i], partType) << (part * i);
      write(thread, d, in.type, value);
    } else if (d.kind == Operand::Vector) {
      unsigned part =
          bitsOf(in.type) / static_cast<unsigned>(d.elements.size());
      Type partType = part == 8 ? Type::B8 : part == 16 ? Type::B16 : Type::B32;
      uint64_t value = read(thread, s, in.type);
      for (size_t i = 0; i < d.elements.size(); ++i)
        write(thread, d.elements[i], partType,
              (value >> (part * i)) & maskOf(part));
    } else {
      write(thread, d, in.type, read(thread, s, in.type));
    }
    return true;
  }
  case Op::Setp: {
    Type type = in.type2;
    uint64_t a = read(thread, ops[1], type), b = read(thread, ops[2], type);
    bool r = isFloat(type)
                 ? compareFloat(in.cmp, toReal(a, type), toReal(b, type))
                 : compareInt(in.cmp, a, b, type);
    bool q = !r;
    if (in.boolOp != BoolOp::None) {
      bool c = read(thread, ops[3], Type::Pred);
      auto apply = [&](bool x) {
        switch (in.boolOp) {
        case BoolOp::And:
          return x && c;
        case BoolOp::Or:
          return x || c;
        default:
          return x != c;
        }
      };
      r = apply(r);
      q = apply(q);
    }
    if (ops[0].kind == Operand::Vector) {
      write(thread, ops[0].elements[0], Type::Pred, r);
      write(thread, ops[0].elements[1], Type::Pred, q);
    } else {
      write(thread, ops[0], Type::Pred, r);
    }
    return true;
  }
  case Op::Selp: {
    bool c = read(thread, ops[3], Type::Pred);
    write(thread, ops[0], in.type, read(thread, ops[c ? 1 : 2], in.type));
    return true;
  }
  case Op::Cvt:
    return convert(thread, in);
  case Op::Cvta: {
    uint64_t value = read(thread, ops[1], in.type);
    uint64_t base = 0;
    if (in.space == Space::Shared)
      base = reinterpret_cast<uintptr_t>(block.shared);
    else if (in.space == Space::Local)
      base = reinterpret_cast<uintptr_t>(thread.local);
    else if (in.space == Space::Param)
      base = reinterpret_cast<uintptr_t>(config.params.data());
    write(thread, ops[0], in.type, in.toSpace ? value - base : value + base);
    return true;
  }
  case Op::Ld:
  case Op::St:
    return memoryOp(block, thread, in, polled);
  case Op::Atom:
  case Op::Red:
    return atomicOp(block, thread, in, polled);
  case Op::Fence: {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    auto scope = static_cast<uint32_t>(in.scope);
    // A fence after a relaxed load makes it an acquire; the next relaxed
    // store after it a release.
    if (thread.relaxedLoad) {
      acquireAddress(block, thread.relaxedLoad, scope);
      thread.relaxedLoad = 0;
    }
    thread.releasePending = true;
    thread.releaseScope = scope;
    return true;
  }
  case Op::Nanosleep:
    polled = true;
    return true;
  case Op::CpAsync:
  case Op::CpAsyncCommit:
  case Op::CpAsyncWait:
    return asyncCopy(block, thread, in);
  default:
    return arithmetic(block, thread, in);
  }
}

/// cp.async: a copy is queued, and happens (its global read, its shared
/// write, both recorded for the race detector as this thread's) when a
/// wait_group lets fewer groups stay pending, wait_all, or the thread's
/// exit completes it. Until then shared memory holds what it held, so a
/// read that does not wait sees the old bytes, as it may on the GPU; the
/// write is also recorded when the copy is issued, so that a reader the
/// issue is not ordered after races with it.
bool Launch::asyncCopy(Block &block, Thread &thread, const Instruction &in) {
  if (in.op == Op::CpAsyncCommit) {
    ++thread.asyncGroup;
    return true;
  }
  if (in.op == Op::CpAsyncWait) {
    if (in.vector == 0) // wait_all: commit, then wait for every group
      return completeCopies(block, thread, ++thread.asyncGroup);
    uint64_t pending = in.operands[0].bits;
    return completeCopies(block, thread,
                          pending >= thread.asyncGroup
                              ? 0
                              : thread.asyncGroup -
                                    static_cast<uint32_t>(pending));
  }
  Thread::AsyncCopy copy;
  copy.dst = addressOf(thread, in.operands[0]);
  copy.src = addressOf(thread, in.operands[1]);
  copy.bytes = in.vector;
  copy.srcBytes =
      in.operands.size() > 3
          ? static_cast<uint32_t>(read(thread, in.operands[3], Type::U32))
          : copy.bytes;
  if (copy.srcBytes != 0 && copy.srcBytes != copy.bytes)
    return fault(LaunchStatus::IllegalInstruction, block, thread, in,
                 "the emulated device runs cp.async with a source size of 0 "
                 "or the copy's size only (this one: " +
                     std::to_string(copy.srcBytes) + " of " +
                     std::to_string(copy.bytes) + ")");
  copy.group = thread.asyncGroup;
  copy.pc = thread.pc - 1;
  // The copy may land any time from now until its wait: its write is this
  // thread's from here (a reader that a barrier does not order after the
  // issue races with it, as on the GPU), and again when it lands.
  Target to;
  if (!resolve(block, thread, in, copy.dst, Space::Shared, copy.bytes, true,
               to))
    return false;
  recordAccess(block, thread, in, to, copy.bytes, Write, false);
  thread.asyncCopies.push_back(copy);
  return true;
}

/// Completes `thread`'s copies of the groups before `before`, in order.
bool Launch::completeCopies(Block &block, Thread &thread, uint32_t before) {
  size_t kept = 0;
  for (size_t i = 0; i < thread.asyncCopies.size(); ++i) {
    Thread::AsyncCopy copy = thread.asyncCopies[i];
    if (copy.group >= before) {
      thread.asyncCopies[kept++] = copy;
      continue;
    }
    const Instruction &in = kernel.code[copy.pc];
    Target to, from;
    if (!resolve(block, thread, in, copy.dst, Space::Shared, copy.bytes, true,
                 to))
      return false;
    if (copy.srcBytes) {
      if (!resolve(block, thread, in, copy.src, Space::Global, copy.bytes,
                   false, from))
        return false;
      recordAccess(block, thread, in, from, copy.bytes, Read, false);
    }
    bool unchanged = copy.srcBytes
                         ? std::memcmp(to.host, from.host, copy.bytes) == 0
                         : std::all_of(to.host, to.host + copy.bytes,
                                       [](uint8_t byte) { return byte == 0; });
    recordAccess(block, thread, in, to, copy.bytes, Write, unchanged);
    if (copy.srcBytes)
      std::memcpy(to.host, from.host, copy.bytes);
    else
      std::memset(to.host, 0, copy.bytes);
  }
  thread.asyncCopies.resize(kept);
  return true;
}

void Launch::trace(const Block &block, const Thread &thread,
                   const Instruction &in) const {
  if (block.linear != traceRequest().block ||
      thread.linear != traceRequest().thread)
    return;
  std::string line = "braid emulated device: trace " + kernel.name + " " +
                     std::to_string(in.line) + ": " + in.text;
  auto show = [&](const Operand &o) {
    if (o.kind != Operand::Reg)
      return;
    char value[64];
    std::snprintf(value, sizeof(value), " %s=0x%llx",
                  kernel.registerNames[o.reg].c_str(),
                  static_cast<unsigned long long>(thread.regs[o.reg]));
    line += value;
  };
  if (!in.operands.empty() && in.op != Op::St && in.op != Op::Red &&
      in.op != Op::Bra) {
    const Operand &d = in.operands[0];
    if (d.kind == Operand::Vector)
      for (const Operand &e : d.elements)
        show(e);
    else
      show(d);
  }
  line += "\n";
  std::fputs(line.c_str(), stderr);
}

Turn Launch::turn(Block &block, Thread &thread) {
  const std::vector<Instruction> &code = kernel.code;
  thread.spun = false;
  for (uint32_t budget = 0; budget < kBudget; ++budget) {
    const Instruction &in = code[thread.pc];
    ++clockTicks;
    if (in.guard >= 0) {
      bool p = thread.regs[in.guard] & 1;
      if (p == in.guardNegated) {
        ++thread.pc;
        continue;
      }
    }
    switch (in.op) {
    case Op::Bra:
      thread.pc = in.operands[0].target;
      continue;
    case Op::Ret:
    case Op::Exit:
      // Copies still in flight land before the thread is gone.
      if (!thread.asyncCopies.empty() &&
          !completeCopies(block, thread, UINT32_MAX))
        return Turn::Fault;
      thread.status = Done;
      thread.exitLine = in.line;
      --block.live;
      return Turn::Exited;
    case Op::Trap:
      fault(LaunchStatus::Trap, block, thread, in, "trap");
      return Turn::Fault;
    case Op::AssertFail:
      fault(LaunchStatus::Assert, block, thread, in,
            "device-side assertion failed: " + assertion(thread, in));
      return Turn::Fault;
    case Op::Bar:
      if (in.operands.empty()) {
        thread.barrier = 0;
        thread.barrierCount = 0;
      } else {
        thread.barrier =
            static_cast<uint32_t>(read(thread, in.operands[0], Type::U32));
        thread.barrierCount =
            in.operands.size() > 1
                ? static_cast<uint32_t>(read(thread, in.operands[1], Type::U32))
                : 0;
      }
      if (thread.barrier >= 16) {
        fault(LaunchStatus::IllegalInstruction, block, thread, in,
              "barrier " + std::to_string(thread.barrier) +
                  " (only 0 to 15 exist)");
        return Turn::Fault;
      }
      if (in.arrive) {
        ++block.arrivals[thread.barrier];
        ++thread.pc;
        continue;
      }
      thread.status = AtBarrier;
      return Turn::Blocked;
    case Op::BarWarp:
    case Op::Shfl:
    case Op::Vote:
    case Op::Ldmatrix:
    case Op::Mma:
    case Op::ActiveMask: {
      if (in.op == Op::ActiveMask) {
        thread.memberMask = 0;
      } else if (in.op == Op::Ldmatrix || in.op == Op::Mma) {
        // .aligned: the whole warp executes it together.
        thread.memberMask = 0xFFFFFFFFu;
        if (in.op == Op::Ldmatrix)
          thread.value = addressOf(thread, in.operands[1]);
      } else if (in.op == Op::BarWarp) {
        thread.memberMask =
            static_cast<uint32_t>(read(thread, in.operands[0], Type::B32));
      } else if (in.op == Op::Shfl) {
        thread.value = read(thread, in.operands[1], Type::B32);
        thread.b =
            static_cast<uint32_t>(read(thread, in.operands[2], Type::B32));
        thread.c =
            static_cast<uint32_t>(read(thread, in.operands[3], Type::B32));
        thread.memberMask =
            static_cast<uint32_t>(read(thread, in.operands[4], Type::B32));
      } else {
        thread.predicate = read(thread, in.operands[1], Type::Pred);
        thread.memberMask =
            static_cast<uint32_t>(read(thread, in.operands[2], Type::B32));
      }
      thread.status = AtWarp;
      return Turn::Blocked;
    }
    default: {
      bool polled = false;
      ++thread.pc;
      if (!execute(block, thread, in, polled)) {
        --thread.pc;
        return Turn::Fault;
      }
      if (tracing)
        trace(block, thread, in);
      if (polled) {
        thread.spun = true;
        return Turn::Spun;
      }
      continue;
    }
    }
  }
  return Turn::Budget;
}

std::unique_ptr<Block> Launch::makeBlock(uint64_t linear) {
  auto block = std::make_unique<Block>();
  block->linear = static_cast<uint32_t>(linear);
  block->ctaid[0] = static_cast<uint32_t>(linear % config.grid[0]);
  block->ctaid[1] =
      static_cast<uint32_t>((linear / config.grid[0]) % config.grid[1]);
  block->ctaid[2] = static_cast<uint32_t>(
      linear / (uint64_t(config.grid[0]) * config.grid[1]));
  size_t regs = kernel.registerNames.size();
  block->regs.assign(regs * threadsPerBlock + 1, 0);
  block->local.assign(kernel.localBytes * threadsPerBlock + 1, 0);
  block->sharedBytes = sharedBytes;
  block->shared = static_cast<uint8_t *>(std::aligned_alloc(
      256, (std::max<uint64_t>(sharedBytes, 1) + 255) / 256 * 256));
  // Shared memory starts as garbage on the hardware; a recognizable one.
  std::memset(block->shared, 0xA5, std::max<uint64_t>(sharedBytes, 1));
  if (racesEnabled())
    block->sharedShadow = static_cast<Cell *>(
        std::calloc((sharedBytes + 3) / 4 + 1, sizeof(Cell)));
  block->clock = streamClock;
  block->threads.resize(threadsPerBlock);
  for (uint32_t i = 0; i < threadsPerBlock; ++i) {
    Thread &t = block->threads[i];
    t.linear = i;
    t.tid[0] = i % config.block[0];
    t.tid[1] = (i / config.block[0]) % config.block[1];
    t.tid[2] = i / (config.block[0] * config.block[1]);
    t.regs = block->regs.data() + regs * i;
    t.local = block->local.data() + kernel.localBytes * i;
  }
  block->live = threadsPerBlock;
  return block;
}

Launch::BlockState Launch::runBlock(Block &block) {
  current = &block;
  block.progressed = false;
  for (;;) {
    bool progressed = false, anySpun = false;
    for (Thread &t : block.threads) {
      if (t.status != Ready)
        continue;
      Turn turned = turn(block, t);
      if (turned == Turn::Fault)
        return BlockState::Fault;
      if (turned == Turn::Spun)
        anySpun = true;
      if (turned != Turn::Spun || t.spins == 0)
        progressed = true;
      if (config.cancelled &&
          config.cancelled->load(std::memory_order_relaxed)) {
        result.status = LaunchStatus::Cancelled;
        return BlockState::Fault;
      }
    }
    if (resolveWarps(block))
      progressed = true;
    else if (result.status != LaunchStatus::Success &&
             result.status != LaunchStatus::Race)
      return BlockState::Fault;
    if (resolveBarriers(block))
      progressed = true;
    else if (result.status != LaunchStatus::Success &&
             result.status != LaunchStatus::Race)
      return BlockState::Fault;
    if (block.live == 0)
      return BlockState::Finished;
    if (progressed) {
      block.progressed = true;
      continue;
    }
    if (anySpun)
      return BlockState::Stalled;
    deadlock(block);
    return BlockState::Fault;
  }
}

uint32_t Launch::residency() const {
  unsigned sm = module.smVersion;
  uint64_t sharedPerSM = sm >= 90   ? 228 * 1024
                         : sm >= 80 ? 164 * 1024
                                    : 96 * 1024;
  uint64_t perBlock =
      std::max<uint64_t>(1, 2048 / std::max(threadsPerBlock, 1u));
  perBlock = std::min<uint64_t>(perBlock, 32);
  if (sharedBytes)
    perBlock = std::min<uint64_t>(perBlock, sharedPerSM / (sharedBytes + 1024));
  return static_cast<uint32_t>(std::max<uint64_t>(1, perBlock) *
                               config.smCount);
}

LaunchResult Launch::run() {
  using Clock = std::chrono::steady_clock;
  uint32_t limit = residency();
  std::vector<std::unique_ptr<Block>> resident;
  uint64_t next = 0;
  bool overCommitted = false;
  Clock::time_point stalledSince{};
  bool stalled = false;
  unsigned backoff = 0;
  auto admit = [&](bool over) {
    resident.push_back(makeBlock(next++));
    resident.back()->overResident = over;
    overCommitted |= over;
  };
  while (next < totalBlocks || !resident.empty()) {
    if (resident.empty())
      admit(false);
    bool anyProgress = false;
    for (size_t i = 0; i < resident.size();) {
      Block &block = *resident[i];
      BlockState state = runBlock(block);
      if (state == BlockState::Fault)
        return result;
      bool moved = state == BlockState::Finished || block.progressed;
      if (moved && overCommitted && !block.overResident) {
        // It was stuck until blocks that could not have been resident with
        // it ran: on the hardware it would wait forever.
        Thread &t = block.threads[0];
        result.status = LaunchStatus::Timeout;
        result.report =
            "the grid spins on blocks that cannot be co-resident: block (" +
            std::to_string(block.ctaid[0]) + "," +
            std::to_string(block.ctaid[1]) + "," +
            std::to_string(block.ctaid[2]) + ") waited until block " +
            std::to_string(next - 1) + " ran, but at most " +
            std::to_string(limit) + " blocks of " +
            std::to_string(threadsPerBlock) + " threads with " +
            std::to_string(sharedBytes) +
            " bytes of shared memory fit on the target's " +
            std::to_string(config.smCount) + " SMs at once, and the grid has " +
            std::to_string(totalBlocks) + " (" + where(block, t, nullptr) + ")";
        return result;
      }
      anyProgress |= moved;
      if (state == BlockState::Finished) {
        accumulated.join(block.clock);
        resident.erase(resident.begin() + static_cast<long>(i));
        continue;
      }
      ++i;
    }
    if (anyProgress) {
      stalled = false;
      backoff = 0;
      continue;
    }
    // Every resident block polls without progress.
    if (next < totalBlocks) {
      admit(resident.size() >= limit);
      continue;
    }
    if (!stalled) {
      stalled = true;
      stalledSince = Clock::now();
    }
    double waited =
        std::chrono::duration<double>(Clock::now() - stalledSince).count();
    if (waited > config.timeoutSeconds) {
      Block &block = *resident.front();
      Thread *spinner = &block.threads[0];
      for (Thread &t : block.threads)
        if (t.spun) {
          spinner = &t;
          break;
        }
      char value[64];
      std::snprintf(value, sizeof(value), "0x%llx",
                    static_cast<unsigned long long>(spinner->spinValue));
      result.status = LaunchStatus::Timeout;
      result.report = "a wait that never completes: after " +
                      std::to_string(static_cast<int>(waited)) +
                      " s every running block "
                      "still polls " +
                      hexAddress(spinner->spinAddress) + " (it holds " + value +
                      ") (" +
                      where(block, *spinner,
                            spinner->spinPc < kernel.code.size()
                                ? &kernel.code[spinner->spinPc]
                                : nullptr) +
                      ")";
      return result;
    }
    // Waiting for another stream or rank: let them run.
    std::this_thread::sleep_for(std::chrono::microseconds(
        std::min(1000u, 20u << std::min(backoff++, 6u))));
    if (config.cancelled && config.cancelled->load()) {
      result.status = LaunchStatus::Cancelled;
      return result;
    }
  }
  streamClock = accumulated;
  return result;
}

} // namespace

namespace {

/// BRAID_EMULATE_STATS=1: kernels, threads and instructions the process
/// ran, and the time they took, printed at exit (for docs/Runtime.md's
/// statement of the emulator's speed).
struct Stats {
  std::atomic<uint64_t> launches{0}, threads{0}, instructions{0},
      nanoseconds{0};
  ~Stats() {
    if (!launches.load())
      return;
    double seconds = nanoseconds.load() * 1e-9;
    std::fprintf(stderr,
                 "braid emulated device: %llu launches, %llu threads, %llu "
                 "PTX instructions in %.3f s (%.1f M instructions/s)\n",
                 static_cast<unsigned long long>(launches.load()),
                 static_cast<unsigned long long>(threads.load()),
                 static_cast<unsigned long long>(instructions.load()), seconds,
                 seconds > 0 ? instructions.load() / seconds * 1e-6 : 0.0);
  }
};

Stats *stats() {
  static Stats *instance = [] {
    const char *value = std::getenv("BRAID_EMULATE_STATS");
    if (!value || std::strcmp(value, "1") != 0)
      return static_cast<Stats *>(nullptr);
    static Stats kept;
    return &kept;
  }();
  return instance;
}

} // namespace

LaunchResult runLaunch(const LaunchConfig &config, VectorClock &clock) {
  Launch launch(config, clock);
  beginUse();
  auto start = std::chrono::steady_clock::now();
  LaunchResult result = launch.run();
  if (Stats *s = stats()) {
    s->launches += 1;
    s->threads += uint64_t(config.grid[0]) * config.grid[1] * config.grid[2] *
                  config.block[0] * config.block[1] * config.block[2];
    s->instructions += launch.instructions();
    s->nanoseconds += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start)
            .count());
  }
  endUse();
  return result;
}

bool packParams(const ptx::Module &module, const ptx::Function &kernel,
                void **params, std::vector<uint8_t> &out) {
  out.assign(kernel.paramBytes, 0);
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    const Variable &param = module.variables[kernel.params[i]];
    if (!params || !params[i])
      return false;
    std::memcpy(out.data() + param.offset, params[i], param.size);
  }
  return true;
}

} // namespace braid::emu
