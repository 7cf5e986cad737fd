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

namespace pinwheel {

// The two building blocks, shared with the samplers' generator
// (loader/internal/random.h); not part of the API.
namespace random_detail {

inline constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function (Steele, Lea and Flood 2014; the constants of
// Vigna's reference splitmix64.c): a bijection.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Returns the high 64 bits of a * b and stores the low 64 in *low. Written
// out in 32-bit halves so that it needs no 128-bit integer type.
inline uint64_t MultiplyHigh(uint64_t a, uint64_t b, uint64_t* low) {
  const uint64_t a_lo = a & 0xffffffffULL;
  const uint64_t a_hi = a >> 32;
  const uint64_t b_lo = b & 0xffffffffULL;
  const uint64_t b_hi = b >> 32;
  const uint64_t lo_lo = a_lo * b_lo;
  const uint64_t hi_lo = a_hi * b_lo;
  const uint64_t lo_hi = a_lo * b_hi;
  const uint64_t cross = (lo_lo >> 32) + (hi_lo & 0xffffffffULL) + lo_hi;
  *low = (cross << 32) | (lo_lo & 0xffffffffULL);
  return a_hi * b_hi + (hi_lo >> 32) + (cross >> 32);
}

// Returns a uniform draw from [0, range) taking 64-bit words from `next`,
// by Lemire's multiply-and-reject ("Fast Random Integer Generation in an
// Interval", 2019): unbiased, and usually no division. REQUIRES: range > 0.
template <typename Next>
uint64_t Bounded(uint64_t range, Next&& next) {
  uint64_t low = 0;
  uint64_t high = MultiplyHigh(next(), range, &low);
  if (low < range) {
    const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
    while (low < threshold) high = MultiplyHigh(next(), range, &low);
  }
  return high;
}

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
