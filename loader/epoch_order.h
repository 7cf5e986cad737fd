// The order of an epoch as plain functions of plain values, one
// implementation for the host samplers (loader/sampler.h,
// loader/token_window_dataset.h) and for device kernels: the shuffle of
// (seed, epoch), a rank's deal of it, and a token window's start. Each is a
// pure function of its arguments, built only from 64-bit unsigned
// arithmetic, so a GPU thread and a CPU thread given the same values compute
// the same index (see Note [portable shuffles] and Note [the epoch shuffle]
// in loader/sampler.h for the math and its costs).
//
// Compiles as C++17 or later, with a host compiler or under nvcc; under
// nvcc the evaluating functions are __host__ __device__. The tables
// (MakeShuffle) are built on the host only; the structs are trivially
// copyable, so a kernel takes them by value.
//
// Example (host; a kernel does the same with its own position):
//   const order::Shuffle shuffle = order::MakeShuffle(/*size=*/1000,
//                                                     /*seed=*/7, /*epoch=*/3);
//   int64_t first = order::ShuffleAt(shuffle, /*position=*/0);
#ifndef PINWHEEL_LOADER_EPOCH_ORDER_H_
#define PINWHEEL_LOADER_EPOCH_ORDER_H_

#include <cstdint>

#ifdef __CUDACC__
#define PINWHEEL_HOST_DEVICE __host__ __device__
#else
#define PINWHEEL_HOST_DEVICE
#endif

namespace pinwheel::order {

// SplitMix64's increment (the golden ratio in 64 bits).
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// Returns SplitMix64's output function of `z` (Steele, Lea and Flood 2014;
// the constants of Vigna's reference splitmix64.c): a bijective mixer.
PINWHEEL_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Returns the SplitMix64 output for state `x`.
PINWHEEL_HOST_DEVICE inline uint64_t SplitMix64(uint64_t x) {
  return Mix64(x + kGoldenGamma);
}

// Returns the high 64 bits of a * b and stores the low 64 in *low. On the
// host it is written out in 32-bit halves so that it needs no 128-bit
// integer type; on the device it is the hardware's; both are exact.
PINWHEEL_HOST_DEVICE inline uint64_t MultiplyHigh(uint64_t a, uint64_t b,
                                                  uint64_t* low) {
#ifdef __CUDA_ARCH__
  *low = a * b;
  return __umul64hi(a, b);
#else
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
#endif
}

// Returns a uniform draw from [0, range) taking 64-bit words from `next`,
// by Lemire's multiply-and-reject ("Fast Random Integer Generation in an
// Interval", 2019): unbiased, and usually no division. range == 0 gives 0.
#ifdef __CUDACC__
#pragma nv_exec_check_disable  // `next` may be host-only (host callers)
#endif
template <typename Next>
PINWHEEL_HOST_DEVICE inline uint64_t Bounded(uint64_t range, Next&& next) {
  uint64_t low = 0;
  uint64_t high = MultiplyHigh(next(), range, &low);
  if (low < range) {
    const uint64_t threshold = (0 - range) % range;  // 2^64 mod range
    while (low < threshold) high = MultiplyHigh(next(), range, &low);
  }
  return high;
}

// The SplitMix64 stream. Not thread-safe; one per use.
class SplitMix64Stream {
 public:
  PINWHEEL_HOST_DEVICE explicit SplitMix64Stream(uint64_t state)
      : state_(state) {}

  // Returns the next 64 random bits.
  PINWHEEL_HOST_DEVICE uint64_t Next() {
    const uint64_t out = SplitMix64(state_);
    state_ += kGoldenGamma;
    return out;
  }

  // Returns a uniform draw from [0, range) (Bounded, above).
  // REQUIRES: range > 0.
  PINWHEEL_HOST_DEVICE uint64_t Bounded(uint64_t range) {
    return order::Bounded(range, [this] { return Next(); });
  }

 private:
  uint64_t state_;
};

// Feistel rounds of a shuffle (even: the halves come back to their widths).
inline constexpr int kShuffleRounds = 6;
// Sizes up to this are exact permutations (Note [small shuffles]).
inline constexpr int kExactShuffleMax = 64;
static_assert(kShuffleRounds % 2 == 0, "ShuffleAt relies on an even count");

// The permutation of [0, size) for one (seed, epoch): Note [the epoch
// shuffle] in loader/sampler.h. Made by MakeShuffle; read by ShuffleAt.
// Trivially copyable (128 bytes).
struct Shuffle {
  uint64_t size = 0;
  // size > kExactShuffleMax: the Feistel network's half widths and keys.
  int hi_bits = 0;
  int lo_bits = 0;
  uint64_t keys[kShuffleRounds] = {};
  // 1 < size <= kExactShuffleMax: the permutation itself.
  uint8_t exact[kExactShuffleMax] = {};
};

// Returns the shuffle of [0, size) for (seed, epoch); size < 0 is taken as
// 0. Host only: at most 63 bounded draws or 6 hashes.
inline Shuffle MakeShuffle(int64_t size, uint64_t seed, int64_t epoch) {
  Shuffle shuffle;
  shuffle.size = size > 0 ? static_cast<uint64_t>(size) : 0;
  if (shuffle.size <= 1) return shuffle;  // the identity; no keys needed
  // One stream per (seed, epoch): the epoch is hashed before it meets the
  // seed so that (seed, epoch + 1) and (seed + 1, epoch) are unrelated.
  SplitMix64Stream stream(
      SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch))));
  if (shuffle.size <= kExactShuffleMax) {  // Note [small shuffles]
    for (uint64_t i = 0; i < shuffle.size; ++i) {
      shuffle.exact[i] = static_cast<uint8_t>(i);
    }
    for (uint64_t i = shuffle.size - 1; i > 0; --i) {  // Fisher-Yates
      const uint64_t j = stream.Bounded(i + 1);
      const uint8_t held = shuffle.exact[i];
      shuffle.exact[i] = shuffle.exact[j];
      shuffle.exact[j] = held;
    }
    return shuffle;
  }
  // The smallest power-of-two domain 2^bits >= size, bits >= 2.
  int bits = 0;
  while (((shuffle.size - 1) >> bits) != 0) ++bits;
  if (bits < 2) bits = 2;
  shuffle.hi_bits = bits / 2;
  shuffle.lo_bits = bits - shuffle.hi_bits;
  for (uint64_t& key : shuffle.keys) key = stream.Next();
  return shuffle;
}

// Returns the Feistel network's image of x in [0, 2^(hi_bits + lo_bits)).
// REQUIRES: shuffle.size > kExactShuffleMax.
PINWHEEL_HOST_DEVICE inline uint64_t ShuffleEncrypt(const Shuffle& shuffle,
                                                    uint64_t x) {
  // Round i maps (hi, lo) to (lo, hi ^ F_i(lo)), F_i truncated to hi's
  // width: invertible whatever F_i is. The halves swap widths every round,
  // so even rounds truncate to hi_bits and odd ones to lo_bits.
  const uint64_t hi_mask = (uint64_t{1} << shuffle.hi_bits) - 1;
  const uint64_t lo_mask = (uint64_t{1} << shuffle.lo_bits) - 1;
  uint64_t hi = x >> shuffle.lo_bits;
  uint64_t lo = x & lo_mask;
  for (int round = 0; round < kShuffleRounds; round += 2) {
    uint64_t next_lo = hi ^ (Mix64(lo ^ shuffle.keys[round]) & hi_mask);
    hi = lo;
    lo = next_lo;
    next_lo = hi ^ (Mix64(lo ^ shuffle.keys[round + 1]) & lo_mask);
    hi = lo;
    lo = next_lo;
  }
  return (hi << shuffle.lo_bits) | lo;
}

// Returns the index at `position` of the shuffle's order.
// REQUIRES: 0 <= position < shuffle.size (any position when size <= 1).
PINWHEEL_HOST_DEVICE inline int64_t ShuffleAt(const Shuffle& shuffle,
                                              int64_t position) {
  if (shuffle.size <= 1) return position;
  if (shuffle.size <= kExactShuffleMax) return shuffle.exact[position];
  uint64_t x = static_cast<uint64_t>(position);
  do {
    x = ShuffleEncrypt(shuffle, x);
  } while (x >= shuffle.size);  // cycle walking: Note [the epoch shuffle]
  return static_cast<int64_t>(x);
}

// One rank's deal of one epoch's order (DistributedSampler in
// loader/sampler.h): this rank's position p reads the global position
// P = start + p * world_size + rank, wrapped modulo size, through the
// epoch's shuffle when `shuffle`. Made by DistributedSampler::DealFor.
// Trivially copyable (168 bytes).
struct Deal {
  int64_t size = 0;  // the dataset's (or custom sampler's) size
  int64_t start = 0;
  int64_t world_size = 1;
  int64_t rank = 0;
  bool shuffle = false;
  Shuffle epoch_shuffle;  // read only when `shuffle`
};

// Returns the dataset index at this rank's `position`: what
// DistributedSampler::At(epoch, position) returns for the Deal's epoch.
// REQUIRES: 0 <= position < the sampler's size() (so deal.size > 0).
PINWHEEL_HOST_DEVICE inline int64_t DealAt(const Deal& deal, int64_t position) {
  // position < per-rank size, so the sum stays below
  // size + world_size - 1 < 2^63 + 2^31: exact in 64 unsigned bits. Past
  // the end it wraps (torch's padding), usually by less than one size, so
  // the division is mostly skipped.
  const uint64_t size = static_cast<uint64_t>(deal.size);
  uint64_t global =
      static_cast<uint64_t>(deal.start) +
      static_cast<uint64_t>(position) * static_cast<uint64_t>(deal.world_size) +
      static_cast<uint64_t>(deal.rank);
  if (global >= size) global %= size;
  return deal.shuffle
             ? ShuffleAt(deal.epoch_shuffle, static_cast<int64_t>(global))
             : static_cast<int64_t>(global);
}

// Returns the first token of window `index` of a token file with `starts`
// valid window starts (tokens - seq_len), for a dataset seeded with `seed`:
// the first bounded draw of the window's own SplitMix64 stream, keyed by
// (seed, index). What TokenWindowDataset::WindowStart returns.
// REQUIRES: starts > 0 (0 gives 0).
PINWHEEL_HOST_DEVICE inline int64_t WindowStart(uint64_t seed, int64_t index,
                                                uint64_t starts) {
  SplitMix64Stream stream(Mix64(seed) ^
                          Mix64(static_cast<uint64_t>(index) + kGoldenGamma));
  return static_cast<int64_t>(stream.Bounded(starts));
}

}  // namespace pinwheel::order

#endif  // PINWHEEL_LOADER_EPOCH_ORDER_H_
