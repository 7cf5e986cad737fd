// SampleRandom: the random numbers of one sample's augmentation, a pure
// function of (loader seed, epoch, key). The loader hands each Read() one
// keyed by the dataset index (SampleView::random()), so a random crop or
// flip is the same whichever worker reads the sample, however many workers
// there are, and after a checkpoint/resume or a change of world size.
//
// Example (inside Read):
//   SampleRandom& rng = out.random();
//   const bool flip = rng.Bernoulli(0.5);
//   const float scale = rng.UniformFloat(0.08f, 1.0f);
//
// The numbers are the same on every platform and standard library (no std::
// distributions). Not thread-safe: one generator per sample.
#ifndef PINWHEEL_LOADER_SAMPLE_RANDOM_H_
#define PINWHEEL_LOADER_SAMPLE_RANDOM_H_

#include <cstdint>

#include "loader/epoch_order.h"

namespace pinwheel {

// The building blocks, shared with the samplers' generator
// (loader/internal/random.h) and the device order (pinning/base/
// epoch_order.h): one copy of each. Not part of the API.
namespace random_detail {

inline constexpr uint64_t kGamma = order::kGoldenGamma;
using order::Bounded;       // Lemire's unbiased draw from [0, range)
using order::Mix64;         // SplitMix64's output function
using order::MultiplyHigh;  // the 128-bit product's halves

}  // namespace random_detail

class SampleRandom {
 public:
  // The generator of sample `key` in `epoch` of a loader seeded with `seed`.
  // Different (seed, epoch, key) give unrelated streams.
  SampleRandom(uint64_t seed, int64_t epoch, uint64_t key)
      : state_(Mix(Mix(seed ^ Mix(static_cast<uint64_t>(epoch) + kGamma)) ^
                   (key * kGamma + 0x632be59bd9b4e019ULL))) {}

  // Returns the next 64 random bits.
  uint64_t NextU64() {
    state_ += kGamma;
    return Mix(state_);
  }

  // Returns a uniform draw from [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

  // Returns a uniform draw from [lo, hi). REQUIRES: lo <= hi.
  float UniformFloat(float lo, float hi) {
    const float x = lo + static_cast<float>(Uniform()) * (hi - lo);
    return x < hi ? x : lo;  // rounding can reach hi; [lo, hi) is promised
  }

  // Returns a uniform integer from [lo, hi], unbiased (Lemire's
  // multiply-and-reject). REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi) {
    const uint64_t range =
        static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;
    if (range == 0) return static_cast<int64_t>(NextU64());  // all 2^64
    const uint64_t draw =
        random_detail::Bounded(range, [this] { return NextU64(); });
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + draw);
  }

  // Returns true with probability p (p <= 0: never; p >= 1: always).
  bool Bernoulli(double p) { return Uniform() < p; }

 private:
  static constexpr uint64_t kGamma = random_detail::kGamma;
  static uint64_t Mix(uint64_t z) { return random_detail::Mix64(z); }

  uint64_t state_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_SAMPLE_RANDOM_H_
