// Portable pseudo-random numbers for the samplers and the token windows:
// the same numbers on every platform and standard library, unlike std::
// engines' distributions and std::shuffle (see Note [portable shuffles] in
// loader/sampler.h).
#ifndef PINWHEEL_LOADER_INTERNAL_RANDOM_H_
#define PINWHEEL_LOADER_INTERNAL_RANDOM_H_

#include <cstdint>

#include "absl/strings/string_view.h"

#include "loader/sample_random.h"

namespace pinwheel::internal {

// The mixer and the multiply are SampleRandom's (loader/sample_random.h):
// one copy of each, so the samplers and the per-sample generators cannot
// drift apart.
inline constexpr uint64_t kGoldenGamma = random_detail::kGamma;

// Returns SplitMix64's output function of `z`: a bijective mixer.
inline uint64_t Mix64(uint64_t z) { return random_detail::Mix64(z); }

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
    return random_detail::Bounded(range, [this] { return Next(); });
  }

 private:
  uint64_t state_;
};

// Returns a 64-bit hash of `bytes` (seeded with `seed`) built on Mix64:
// the same on every platform. Not cryptographic.
inline uint64_t HashBytes(absl::string_view bytes, uint64_t seed) {
  uint64_t h = Mix64(seed ^ (bytes.size() * kGoldenGamma));
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word = 0;
    for (int b = 0; b < 8; ++b) {
      word |= uint64_t{static_cast<unsigned char>(bytes[i + b])} << (8 * b);
    }
    h = Mix64(h ^ (word + kGoldenGamma));
  }
  uint64_t tail = 0;
  for (int b = 0; i + b < bytes.size(); ++b) {
    tail |= uint64_t{static_cast<unsigned char>(bytes[i + b])} << (8 * b);
  }
  return Mix64(h ^ (tail + 2 * kGoldenGamma));
}

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_INTERNAL_RANDOM_H_
