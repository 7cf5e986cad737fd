// Float to IEEE half and to bfloat16, rounding to nearest even: the host
// loops of the device stage's transforms use these so that they produce the
// bits CUDA's __float2half_rn and __float2bfloat16_rn produce.
#ifndef PINWHEEL_TRANSFER_INTERNAL_FLOAT16_H_
#define PINWHEEL_TRANSFER_INTERNAL_FLOAT16_H_

#include <cstdint>
#include <cstring>

namespace pinwheel::internal {

// Returns the binary16 bits nearest `f` (ties to even; overflow to
// infinity; NaN stays a quiet NaN of the same sign).
inline uint16_t FloatToHalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // infinity or NaN
    return static_cast<uint16_t>(sign |
                                 (magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u));
  }
  if (magnitude >= 0x477ff000u) {  // >= 65520: rounds to infinity
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (magnitude < 0x38800000u) {  // below 2^-14: a subnormal half, or zero
    if (magnitude < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(magnitude >> 23);  // 14..24
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (magnitude - 0x38000000u) >> 13;  // rebias 127 -> 15
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

// Returns the bfloat16 bits nearest `f` (ties to even; NaN stays a quiet
// NaN of the same sign).
inline uint16_t FloatToBFloat16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  }
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_TRANSFER_INTERNAL_FLOAT16_H_
