// Portable pseudo-random numbers for the samplers and the token windows:
// the same numbers on every platform and standard library, unlike std::
// engines' distributions and std::shuffle (see Note [portable shuffles] in
// loader/sampler.h).
#ifndef PINWHEEL_LOADER_INTERNAL_RANDOM_H_
#define PINWHEEL_LOADER_INTERNAL_RANDOM_H_

#include <cstdint>

#include "absl/strings/string_view.h"

#include "loader/epoch_order.h"

namespace pinwheel::internal {

// The mixer, the stream and its bounded draw are pinning/base/
// epoch_order.h's, as SampleRandom's are (loader/sample_random.h): one copy
// of each, so the samplers, the per-sample generators and the device
// kernels cannot drift apart.
inline constexpr uint64_t kGoldenGamma = order::kGoldenGamma;
using order::Mix64;       // SplitMix64's output function: a bijective mixer
using order::SplitMix64;  // the SplitMix64 output for a state
// The SplitMix64 stream: Next() and Bounded(range). Not thread-safe.
using SplitMix64Stream = order::SplitMix64Stream;

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
