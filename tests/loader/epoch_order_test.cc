// loader/epoch_order.h on the host: the primitives the device shares
// (tests/transfer/order_kernels_test.cc compares the device's results with
// these, and tests/loader/sampler_test.cc pins the samplers' orders).
#include "loader/epoch_order.h"

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "gtest/gtest.h"

namespace pinwheel::order {
namespace {

__extension__ using Uint128 = unsigned __int128;

// Vigna's splitmix64.c seeded with 0: its first three outputs.
TEST(EpochOrder, SplitMix64MatchesTheReferenceGenerator) {
  SplitMix64Stream stream(0);
  EXPECT_EQ(stream.Next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(stream.Next(), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(stream.Next(), 0x06c45d188009454fULL);
}

// The device takes __umul64hi instead; both must be the exact product.
TEST(EpochOrder, MultiplyHighIsTheExact128BitProduct) {
  std::vector<uint64_t> values = {0,
                                  1,
                                  2,
                                  0xffffffffULL,
                                  0x100000000ULL,
                                  0x7fffffffffffffffULL,
                                  0x8000000000000000ULL,
                                  0xffffffffffffffffULL};
  SplitMix64Stream draws(3);
  for (int i = 0; i < 200; ++i) values.push_back(draws.Next());
  for (uint64_t a : values) {
    for (uint64_t b : values) {
      uint64_t low = 0;
      const uint64_t high = MultiplyHigh(a, b, &low);
      const Uint128 product = Uint128{a} * b;
      ASSERT_EQ(high, static_cast<uint64_t>(product >> 64)) << a << " " << b;
      ASSERT_EQ(low, static_cast<uint64_t>(product)) << a << " " << b;
    }
  }
}

// Lemire's draw against its definition: the high word of word * range,
// words whose low part falls below 2^64 mod range rejected.
TEST(EpochOrder, BoundedIsLemiresDrawForEveryKindOfRange) {
  const uint64_t ranges[] = {1,
                             2,
                             3,
                             1000,
                             (uint64_t{1} << 31) - 1,
                             (uint64_t{1} << 31) + 1,
                             uint64_t{1} << 40,
                             (uint64_t{1} << 63) - 1,
                             (uint64_t{1} << 63) + 1,
                             0xffffffffffffffffULL};
  for (uint64_t range : ranges) {
    SplitMix64Stream stream(range);
    SplitMix64Stream words(range);
    const uint64_t threshold = (0 - range) % range;
    for (int i = 0; i < 2000; ++i) {
      uint64_t want = 0;
      for (;;) {
        const Uint128 product = Uint128{words.Next()} * range;
        if (static_cast<uint64_t>(product) >= threshold) {
          want = static_cast<uint64_t>(product >> 64);
          break;
        }
      }
      const uint64_t got = stream.Bounded(range);
      ASSERT_EQ(got, want) << "range " << range << ", draw " << i;
      ASSERT_LT(got, range);
    }
  }
}

// A kernel receives the structs as bytes: a bytewise copy reads the same.
TEST(EpochOrder, ShuffleAndDealReadTheSameAfterABytewiseCopy) {
  static_assert(std::is_trivially_copyable_v<Shuffle>);
  static_assert(std::is_trivially_copyable_v<Deal>);
  for (int64_t size : {2, 64, 65, 1 << 20}) {
    Deal deal;
    deal.size = size;
    deal.start = size / 3;
    deal.world_size = 3;
    deal.rank = 2;
    deal.shuffle = true;
    deal.epoch_shuffle = MakeShuffle(size, 11, 4);
    Deal copy;
    std::memcpy(&copy, &deal, sizeof(Deal));
    for (int64_t p = 0; p < 100; ++p) {
      ASSERT_EQ(DealAt(copy, p), DealAt(deal, p)) << size << " " << p;
    }
  }
}

// Identity below two; the exact table up to 64; the Feistel network above.
TEST(EpochOrder, ShuffleAtIsAPermutationOnBothSidesOfTheExactBoundary) {
  for (int64_t size : {0, 1, 2, 3, 63, 64, 65, 66, 127, 128, 129, 1000}) {
    const Shuffle shuffle = MakeShuffle(size, 9, 1);
    std::vector<int> seen(static_cast<size_t>(size), 0);
    for (int64_t p = 0; p < size; ++p) {
      const int64_t index = ShuffleAt(shuffle, p);
      ASSERT_GE(index, 0);
      ASSERT_LT(index, size);
      ++seen[static_cast<size_t>(index)];
    }
    for (int64_t i = 0; i < size; ++i)
      ASSERT_EQ(seen[i], 1) << size << " " << i;
  }
}

}  // namespace
}  // namespace pinwheel::order
