// The cases on which the device's order (loader/gather/order_kernels.h)
// and the host's (loader/sampler.h) are compared: sizes across the exact
// shuffle's boundary (64), powers of two and their neighbours up to 2^40,
// 10^9, 2^40 + 1 and random sizes; every rank of worlds 1..4, shuffled and
// not, the uneven tail padded and dropped, from the epoch's start and from
// its middle, under rotating seeds and epochs; and the positions to read.
// Shared by the host test (tests/loader/sampler_test.cc) and the GPU test
// (tests/transfer/order_kernels_test.cc), so both check the same cases.
#ifndef PINWHEEL_TESTS_SUPPORT_ORDER_CASES_H_
#define PINWHEEL_TESTS_SUPPORT_ORDER_CASES_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "loader/epoch_order.h"

namespace pinwheel::testing_support {

// Returns the sizes: 0..130, 2^k - 1, 2^k, 2^k + 1 for k in 7..40, 10^9,
// 2^40 + 1, and `random` sizes spread over 1..2^41 (log-uniform).
inline std::vector<int64_t> OrderSizes(int random) {
  std::vector<int64_t> sizes;
  for (int64_t size = 0; size <= 130; ++size) sizes.push_back(size);
  for (int k = 7; k <= 40; ++k) {
    const int64_t power = int64_t{1} << k;
    for (int64_t size : {power - 1, power, power + 1}) {
      if (size > 130) sizes.push_back(size);
    }
  }
  sizes.push_back(1000000000);
  sizes.push_back((int64_t{1} << 40) + 1);
  order::SplitMix64Stream draws(0x5eed0f0bd3a15ULL);
  for (int i = 0; i < random; ++i) {
    const int bits = 1 + static_cast<int>(draws.Bounded(41));
    sizes.push_back(1 +
                    static_cast<int64_t>(draws.Bounded(uint64_t{1} << bits)));
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

// One DistributedSampler's parameters, and the epoch read.
struct DealCase {
  int64_t size = 0;
  int world_size = 1;
  int rank = 0;
  bool shuffle = false;
  bool drop_tail = false;
  int64_t start = 0;
  uint64_t seed = 0;
  int64_t epoch = 0;

  std::string Describe() const {
    return absl::StrCat("size ", size, ", rank ", rank, " of ", world_size,
                        shuffle ? ", shuffled" : ", in order",
                        drop_tail ? ", tail dropped" : ", tail padded",
                        ", start ", start, ", seed ", seed, ", epoch ", epoch);
  }
};

// Returns every case for `size`: worlds 1..4 with every rank, shuffle on
// and off, drop_tail both ways, start 0 and size / 2 (mid-epoch); the
// seeds and epochs rotate with `*counter` (advanced), so that over many
// sizes every pair appears.
inline std::vector<DealCase> DealCases(int64_t size, uint64_t* counter) {
  static constexpr uint64_t kSeeds[] = {0, 7, 0x9e3779b97f4a7c15ULL,
                                        0xffffffffffffffffULL};
  static constexpr int64_t kEpochs[] = {0, 1, 17, int64_t{1} << 40};
  std::vector<DealCase> cases;
  for (int world = 1; world <= 4; ++world) {
    for (int rank = 0; rank < world; ++rank) {
      for (bool shuffle : {true, false}) {
        for (bool drop_tail : {false, true}) {
          for (int64_t start : {int64_t{0}, size / 2}) {
            const uint64_t n = (*counter)++;
            cases.push_back({.size = size,
                             .world_size = world,
                             .rank = rank,
                             .shuffle = shuffle,
                             .drop_tail = drop_tail,
                             .start = start,
                             .seed = kSeeds[n % 4],
                             .epoch = kEpochs[(n / 4) % 4]});
          }
        }
      }
    }
  }
  return cases;
}

// A run of consecutive positions [first, first + count).
struct PositionRun {
  int64_t first = 0;
  int64_t count = 0;
};

// Returns the runs of positions to read from a sampler of `positions`
// positions: all of them up to `all_up_to`; beyond it the first
// `all_up_to`, the last 16 and `random_runs` runs of 16 at positions drawn
// from `*draws`.
inline std::vector<PositionRun> PositionRuns(int64_t positions,
                                             int64_t all_up_to, int random_runs,
                                             order::SplitMix64Stream* draws) {
  if (positions <= all_up_to) return {{0, positions}};
  std::vector<PositionRun> runs = {{0, all_up_to}, {positions - 16, 16}};
  for (int i = 0; i < random_runs; ++i) {
    const auto first = static_cast<int64_t>(
        draws->Bounded(static_cast<uint64_t>(positions - 16)));
    runs.push_back({first, 16});
  }
  return runs;
}

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_SUPPORT_ORDER_CASES_H_
