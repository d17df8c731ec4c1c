//===- HalfFloat.h - Software f16 and bf16 conversions ----------*- C++ -*-===//
//
// Part of Braid.
//
//===----------------------------------------------------------------------===//
//
// Conversions between float and the two 16-bit float formats the runtime
// reduces and braid-exec reads, writes and generates. They are done in
// software on purpose: _Float16 and __bf16 depend on the compiler version and
// the target, and the runtime must round exactly like numpy and the compiled
// code do (IEEE round-to-nearest-even) on every machine.
//
// Header-only so that braid-exec can share it without exporting non-ABI
// symbols from libBraidRuntime.so.
//
//===----------------------------------------------------------------------===//

#ifndef BRAID_RUNTIME_HALFFLOAT_H
#define BRAID_RUNTIME_HALFFLOAT_H

#include <cstdint>
#include <cstring>

namespace braid::rt {

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// IEEE binary16 -> float; exact for every input.
inline float halfToFloat(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1Fu;
  uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0) {
    // Subnormal (or zero): mantissa * 2^-24 fits a float exactly.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
    return bitsToFloat(sign | floatBits(magnitude));
  }
  if (exponent == 0x1F) // Infinity or NaN; keep the NaN payload.
    return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));
  // Rebias the exponent from 15 to 127.
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// float -> IEEE binary16, rounding to nearest even; overflow goes to
/// infinity, NaN stays a (quiet) NaN.
inline uint16_t floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {
    if (magnitude == 0x7F800000u)
      return static_cast<uint16_t>(sign | 0x7C00u);
    // Force the quiet bit so that a payload living only in the low bits does
    // not turn into infinity.
    return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  // 65520 is the midpoint between the largest half (65504) and 2^16; ties go
  // to the even neighbour, which is infinity.
  if (magnitude >= 0x477FF000u)
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude < 0x38800000u) {
    // Below 2^-14 the result is a half subnormal: round(value / 2^-24).
    int exponent = static_cast<int>(magnitude >> 23);
    if (exponent < 102) // Below 2^-25, which itself ties down to zero.
      return static_cast<uint16_t>(sign);
    uint32_t mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    int shift = 126 - exponent; // 14..24
    uint32_t result = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1u)))
      ++result; // May carry into the smallest normal, which is correct.
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias 127 -> 15 and drop 13 mantissa bits; a carry out of the
  // mantissa correctly increments the exponent.
  uint32_t result = (magnitude - 0x38000000u) >> 13;
  uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u)))
    ++result;
  return static_cast<uint16_t>(sign | result);
}

/// bfloat16 -> float; exact (bf16 is the top half of a float).
inline float bf16ToFloat(uint16_t value) {
  return bitsToFloat(static_cast<uint32_t>(value) << 16);
}

/// float -> bfloat16, rounding to nearest even; NaN stays a quiet NaN.
inline uint16_t floatToBf16(float value) {
  uint32_t bits = floatBits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t roundingBias = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + roundingBias) >> 16);
}

} // namespace braid::rt

#endif // BRAID_RUNTIME_HALFFLOAT_H
