#include "loader/sampler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinwheel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<int64_t> Range(int64_t size) {
  std::vector<int64_t> v(static_cast<size_t>(size));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

std::unique_ptr<DistributedSampler> MakeDistributed(int64_t size, int rank,
                                                    int world_size,
                                                    bool shuffle,
                                                    bool drop_tail,
                                                    uint64_t seed = 3) {
  auto sampler = DistributedSampler::Create(size, rank, world_size, shuffle,
                                            seed, drop_tail);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

// How many times each index appears over all ranks of one epoch.
std::map<int64_t, int> CountOverRanks(int64_t size, int world_size,
                                      bool shuffle, bool drop_tail,
                                      int64_t epoch) {
  std::map<int64_t, int> counts;
  for (int rank = 0; rank < world_size; ++rank) {
    for (int64_t i : MakeDistributed(size, rank, world_size, shuffle, drop_tail)
                         ->Indices(epoch)) {
      ++counts[i];
    }
  }
  return counts;
}

// --- Permutation -----------------------------------------------------------

// Pins the algorithm (SplitMix64 over seed ^ SplitMix64(epoch), Fisher–Yates
// from the back, Lemire's bounded draw): a change here changes every user's
// data order for a given seed, which must be a deliberate decision.
TEST(Permutation, MatchesKnownAnswer) {
  EXPECT_THAT(Permutation(10, 42, 0),
              ElementsAre(8, 1, 5, 3, 6, 0, 2, 9, 4, 7));
  EXPECT_THAT(Permutation(10, 42, 1),
              ElementsAre(3, 8, 9, 2, 4, 6, 7, 0, 5, 1));
  EXPECT_THAT(Permutation(10, 7, 0), ElementsAre(7, 1, 9, 0, 6, 8, 2, 4, 5, 3));
}

TEST(Permutation, HoldsEveryIndexExactlyOnce) {
  for (int64_t size : {0, 1, 2, 3, 17, 1000}) {
    EXPECT_EQ(Sorted(Permutation(size, 42, 5)), Range(size)) << size;
  }
}

TEST(Permutation, IsFixedBySeedAndEpoch) {
  EXPECT_EQ(Permutation(1000, 9, 4), Permutation(1000, 9, 4));
}

TEST(Permutation, DiffersBetweenEpochsAndSeeds) {
  EXPECT_NE(Permutation(1000, 9, 0), Permutation(1000, 9, 1));
  EXPECT_NE(Permutation(1000, 9, 0), Permutation(1000, 10, 0));
  // Seed and epoch are not simply added: (s, e + 1) != (s + 1, e).
  EXPECT_NE(Permutation(1000, 9, 1), Permutation(1000, 10, 0));
}

TEST(Permutation, OfEmptyOrNegativeSizeIsEmpty) {
  EXPECT_THAT(Permutation(0, 1, 0), IsEmpty());
  EXPECT_THAT(Permutation(-3, 1, 0), IsEmpty());
}

// A loose uniformity check: over many seeds each of the 4 values lands in
// position 0 about a quarter of the time (a biased draw, such as a plain
// modulo of a small generator, or an off-by-one in Fisher–Yates, fails it).
TEST(Permutation, PutsEveryValueFirstAboutEquallyOften) {
  constexpr int kTrials = 40000;
  std::vector<int> first(4, 0);
  for (int seed = 0; seed < kTrials; ++seed) {
    ++first[static_cast<size_t>(Permutation(4, seed, 0)[0])];
  }
  for (int count : first) {
    EXPECT_NEAR(count, kTrials / 4, kTrials / 40);  // within 10%
  }
}

// --- SequentialSampler -----------------------------------------------------

TEST(SequentialSampler, ReturnsZeroToSizeEveryEpoch) {
  SequentialSampler sampler(5);
  EXPECT_EQ(sampler.size(), 5);
  EXPECT_THAT(sampler.Indices(0), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(sampler.Indices(7), ElementsAre(0, 1, 2, 3, 4));
}

TEST(SequentialSampler, OfSizeZeroIsEmpty) {
  SequentialSampler sampler(0);
  EXPECT_EQ(sampler.size(), 0);
  EXPECT_THAT(sampler.Indices(0), IsEmpty());
}

// --- RandomSampler ---------------------------------------------------------

TEST(RandomSampler, ReadsEveryIndexExactlyOncePerEpoch) {
  RandomSampler sampler(257, 11);
  EXPECT_EQ(sampler.size(), 257);
  for (int64_t epoch = 0; epoch < 4; ++epoch) {
    EXPECT_EQ(Sorted(sampler.Indices(epoch)), Range(257)) << epoch;
  }
}

TEST(RandomSampler, ShufflesDifferentlyEachEpoch) {
  RandomSampler sampler(100, 11);
  EXPECT_NE(sampler.Indices(0), sampler.Indices(1));
  EXPECT_NE(sampler.Indices(1), sampler.Indices(2));
  EXPECT_NE(sampler.Indices(0), Range(100));
}

TEST(RandomSampler, RepeatsTheOrderForTheSameSeedAndEpoch) {
  RandomSampler a(100, 11);
  RandomSampler b(100, 11);
  EXPECT_EQ(a.Indices(3), b.Indices(3));
  EXPECT_EQ(a.Indices(3), Permutation(100, 11, 3));
  EXPECT_NE(a.Indices(3), RandomSampler(100, 12).Indices(3));
}

TEST(RandomSampler, OfSizeZeroIsEmpty) {
  EXPECT_THAT(RandomSampler(0, 1).Indices(0), IsEmpty());
}

// --- DistributedSampler ----------------------------------------------------

TEST(DistributedSampler, RejectsNegativeSize) {
  auto sampler = DistributedSampler::Create(-1, 0, 1, false, 0, false);
  EXPECT_EQ(sampler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sampler.status().message(), HasSubstr("size is -1"));
}

TEST(DistributedSampler, RejectsWorldSizeBelowOne) {
  auto sampler = DistributedSampler::Create(10, 0, 0, false, 0, false);
  EXPECT_EQ(sampler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sampler.status().message(), HasSubstr("world_size is 0"));
  EXPECT_THAT(sampler.status().message(), HasSubstr(">= 1"));
}

TEST(DistributedSampler, RejectsRankOutsideTheWorld) {
  for (int rank : {-1, 4, 5}) {
    auto sampler = DistributedSampler::Create(10, rank, 4, false, 0, false);
    EXPECT_EQ(sampler.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(sampler.status().message(),
                HasSubstr("rank is " + std::to_string(rank)));
    EXPECT_THAT(sampler.status().message(), HasSubstr("[0, 4)"));
  }
}

TEST(DistributedSampler, GivesRankRTheStrideStartingAtR) {
  // torch, shuffle=False, 10 samples, 3 replicas: padded to 12 with 0, 1.
  EXPECT_THAT(MakeDistributed(10, 0, 3, false, false)->Indices(0),
              ElementsAre(0, 3, 6, 9));
  EXPECT_THAT(MakeDistributed(10, 1, 3, false, false)->Indices(0),
              ElementsAre(1, 4, 7, 0));
  EXPECT_THAT(MakeDistributed(10, 2, 3, false, false)->Indices(0),
              ElementsAre(2, 5, 8, 1));
}

TEST(DistributedSampler, DropsTheTailWhenAsked) {
  // torch, drop_last=True, 10 samples, 3 replicas: 3 each, 9 dropped.
  EXPECT_EQ(MakeDistributed(10, 0, 3, false, true)->size(), 3);
  EXPECT_THAT(MakeDistributed(10, 0, 3, false, true)->Indices(0),
              ElementsAre(0, 3, 6));
  EXPECT_THAT(MakeDistributed(10, 2, 3, false, true)->Indices(0),
              ElementsAre(2, 5, 8));
}

TEST(DistributedSampler, CoversEveryIndexWithTorchPadding) {
  for (bool shuffle : {false, true}) {
    for (int world_size : {1, 2, 3, 4, 7, 8}) {
      const int64_t size = 50;
      const std::map<int64_t, int> counts =
          CountOverRanks(size, world_size, shuffle, false, 2);
      const int64_t per_rank = (size + world_size - 1) / world_size;
      const int64_t padding = per_rank * world_size - size;
      ASSERT_EQ(counts.size(), static_cast<size_t>(size));
      int64_t repeated = 0;
      for (const auto& [index, count] : counts) {
        EXPECT_GE(count, 1);
        EXPECT_LE(count, 2);
        repeated += count - 1;
      }
      EXPECT_EQ(repeated, padding) << "world_size " << world_size;
      EXPECT_EQ(MakeDistributed(size, 0, world_size, shuffle, false)->size(),
                per_rank);
    }
  }
}

TEST(DistributedSampler, PadsWithTheFirstIndicesOfTheOrder) {
  // The padding repeats the start of the (shuffled) global order, as torch's
  // indices += indices[:padding_size].
  const std::vector<int64_t> order = Permutation(10, 3, 1);
  // 10 over 4 ranks: 12 positions; positions 10 and 11 are order[0], order[1]
  // and belong to ranks 2 and 3.
  EXPECT_EQ(MakeDistributed(10, 2, 4, true, false)->Indices(1).back(),
            order[0]);
  EXPECT_EQ(MakeDistributed(10, 3, 4, true, false)->Indices(1).back(),
            order[1]);
}

TEST(DistributedSampler, DropsOnlyTheTailWhenDroppingTail) {
  for (bool shuffle : {false, true}) {
    const std::map<int64_t, int> counts =
        CountOverRanks(50, 4, shuffle, true, 2);
    EXPECT_EQ(counts.size(), 48u);  // 50 - 50 % 4
    for (const auto& [index, count] : counts) {
      EXPECT_EQ(count, 1) << index;
    }
  }
}

TEST(DistributedSampler, SharesOneShuffleAcrossRanks) {
  // Interleaving the ranks' shares gives back the global permutation.
  const int world_size = 4;
  std::vector<std::vector<int64_t>> shares;
  for (int rank = 0; rank < world_size; ++rank) {
    shares.push_back(
        MakeDistributed(40, rank, world_size, true, false, 5)->Indices(6));
  }
  std::vector<int64_t> interleaved;
  for (size_t k = 0; k < shares[0].size(); ++k) {
    for (const auto& share : shares) interleaved.push_back(share[k]);
  }
  EXPECT_EQ(interleaved, Permutation(40, 5, 6));
}

TEST(DistributedSampler, ShufflesDifferentlyEachEpoch) {
  auto sampler = MakeDistributed(100, 1, 2, true, false);
  EXPECT_NE(sampler->Indices(0), sampler->Indices(1));
  EXPECT_EQ(sampler->Indices(1),
            MakeDistributed(100, 1, 2, true, false)->Indices(1));
}

TEST(DistributedSampler, RepeatsFromTheStartWhenSizeIsBelowWorldSize) {
  // torch: 2 samples, 5 replicas -> indices * ceil(3 / 2) -> [0, 1, 0, 1, 0].
  std::vector<int64_t> all;
  for (int rank = 0; rank < 5; ++rank) {
    auto sampler = MakeDistributed(2, rank, 5, false, false);
    EXPECT_EQ(sampler->size(), 1);
    for (int64_t i : sampler->Indices(0)) all.push_back(i);
  }
  EXPECT_THAT(all, ElementsAre(0, 1, 0, 1, 0));
  // With drop_tail every rank gets nothing.
  EXPECT_EQ(MakeDistributed(2, 4, 5, false, true)->size(), 0);
  EXPECT_THAT(MakeDistributed(2, 4, 5, false, true)->Indices(0), IsEmpty());
}

TEST(DistributedSampler, OfSizeZeroIsEmptyOnEveryRank) {
  for (bool drop_tail : {false, true}) {
    for (int rank = 0; rank < 3; ++rank) {
      auto sampler = MakeDistributed(0, rank, 3, true, drop_tail);
      EXPECT_EQ(sampler->size(), 0);
      EXPECT_THAT(sampler->Indices(0), IsEmpty());
    }
  }
}

// --- BatchSampler ----------------------------------------------------------

TEST(BatchSampler, RejectsBatchSizeBelowOne) {
  for (int64_t batch_size : {0, -2}) {
    auto batches = BatchSampler::Create(std::make_unique<SequentialSampler>(10),
                                        batch_size, false);
    EXPECT_EQ(batches.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(batches.status().message(),
                HasSubstr("batch_size is " + std::to_string(batch_size)));
    EXPECT_THAT(batches.status().message(), HasSubstr(">= 1"));
  }
}

TEST(BatchSampler, RejectsNullSampler) {
  auto batches = BatchSampler::Create(nullptr, 4, false);
  EXPECT_EQ(batches.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(batches.status().message(), HasSubstr("sampler is null"));
}

TEST(BatchSampler, KeepsTheShortLastBatchByDefault) {
  auto batches =
      BatchSampler::Create(std::make_unique<SequentialSampler>(10), 4, false);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->batches_per_epoch(), 3);
  EXPECT_EQ(batches->batch_size(), 4);
  EXPECT_EQ(batches->sampler().size(), 10);
  EXPECT_THAT(batches->Batches(0),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7),
                          ElementsAre(8, 9)));
}

TEST(BatchSampler, DropsTheShortLastBatchWhenDropLast) {
  auto batches =
      BatchSampler::Create(std::make_unique<SequentialSampler>(10), 4, true);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->batches_per_epoch(), 2);
  EXPECT_THAT(batches->Batches(0),
              ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
}

TEST(BatchSampler, CountsMatchBatchesForManyShapes) {
  for (int64_t size : {0, 1, 7, 8, 9, 64}) {
    for (int64_t batch_size : {1, 3, 8, 100}) {
      for (bool drop_last : {false, true}) {
        auto batches = BatchSampler::Create(
            std::make_unique<RandomSampler>(size, 1), batch_size, drop_last);
        ASSERT_TRUE(batches.ok());
        const int64_t expected = drop_last
                                     ? size / batch_size
                                     : (size + batch_size - 1) / batch_size;
        EXPECT_EQ(batches->batches_per_epoch(), expected);
        const auto epoch = batches->Batches(1);
        EXPECT_EQ(static_cast<int64_t>(epoch.size()), expected);
        std::vector<int64_t> flat;
        for (const auto& batch : epoch) {
          EXPECT_LE(static_cast<int64_t>(batch.size()), batch_size);
          flat.insert(flat.end(), batch.begin(), batch.end());
        }
        if (!drop_last) {
          EXPECT_EQ(Sorted(flat), Range(size));
        }
      }
    }
  }
}

TEST(BatchSampler, GivesOneShortBatchWhenBatchSizeExceedsSize) {
  auto kept =
      BatchSampler::Create(std::make_unique<SequentialSampler>(3), 8, false);
  ASSERT_TRUE(kept.ok());
  EXPECT_THAT(kept->Batches(0), ElementsAre(ElementsAre(0, 1, 2)));
  auto dropped =
      BatchSampler::Create(std::make_unique<SequentialSampler>(3), 8, true);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->batches_per_epoch(), 0);
  EXPECT_THAT(dropped->Batches(0), IsEmpty());
}

TEST(BatchSampler, BatchesADistributedShare) {
  auto batches =
      BatchSampler::Create(MakeDistributed(10, 1, 3, false, false), 3, false);
  ASSERT_TRUE(batches.ok());
  // Rank 1 of 3 over 10: 1, 4, 7, 0.
  EXPECT_THAT(batches->Batches(0),
              ElementsAre(ElementsAre(1, 4, 7), ElementsAre(0)));
}

TEST(BatchSampler, IsCopyableAndSharesTheSampler) {
  auto batches =
      BatchSampler::Create(std::make_unique<RandomSampler>(20, 4), 5, false);
  ASSERT_TRUE(batches.ok());
  BatchSampler copy = *batches;
  EXPECT_EQ(copy.Batches(2), batches->Batches(2));
  EXPECT_EQ(&copy.sampler(), &batches->sampler());
}

}  // namespace
}  // namespace pinwheel
