// Portable pseudo-random numbers for the samplers and the token windows:
// the same numbers on every platform and standard library, unlike std::
// engines' distributions and std::shuffle (see Note [portable shuffles] in
// loader/sampler.h).
#ifndef PINWHEEL_LOADER_INTERNAL_RANDOM_H_
#define PINWHEEL_LOADER_INTERNAL_RANDOM_H_

#include <cstdint>

namespace pinwheel::internal {

inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// Returns SplitMix64's output function of `z` (Steele, Lea and Flood 2014;
// the constants of Vigna's reference splitmix64.c): a bijective mixer.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Returns the SplitMix64 output for state `x`.
inline uint64_t SplitMix64(uint64_t x) { return Mix64(x + kGoldenGamma); }

// The SplitMix64 stream. Not thread-safe; one per use.
class SplitMix64Stream {
 public:
  explicit SplitMix64Stream(uint64_t state) : state_(state) {}

  // Returns the next 64 random bits.
  uint64_t Next() {
    const uint64_t out = SplitMix64(state_);
    state_ += kGoldenGamma;
    return out;
  }

  // Returns a uniform draw from [0, range) by Lemire's multiply-and-reject
  // ("Fast Random Integer Generation in an Interval", 2019): unbiased, and
  // usually no division.
  // REQUIRES: range > 0.
  uint64_t Bounded(uint64_t range) {
    uint64_t low = 0;
    uint64_t high = MultiplyHigh(Next(), range, &low);
    if (low < range) {
      const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
      while (low < threshold) {
        high = MultiplyHigh(Next(), range, &low);
      }
    }
    return high;
  }

 private:
  // Returns the high 64 bits of a * b and stores the low 64 in *low. Written
  // out in 32-bit halves so that it needs no 128-bit integer type.
  static uint64_t MultiplyHigh(uint64_t a, uint64_t b, uint64_t* low) {
    const uint64_t a_lo = a & 0xffffffffULL;
    const uint64_t a_hi = a >> 32;
    const uint64_t b_lo = b & 0xffffffffULL;
    const uint64_t b_hi = b >> 32;
    const uint64_t lo_lo = a_lo * b_lo;
    const uint64_t hi_lo = a_hi * b_lo;
    const uint64_t lo_hi = a_lo * b_hi;
    const uint64_t hi_hi = a_hi * b_hi;
    const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffULL) + lo_hi;
    *low = (cross << 32) | (lo_lo & 0xffffffffULL);
    return hi_hi + (hi_lo >> 32) + (cross >> 32);
  }

  uint64_t state_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_RANDOM_H_
