// IndexSampler (a caller's order on LoaderBuilder::sampler()) and the
// shipped WeightedRandomSampler and ClassBalancedSampler: distributions
// within stated bounds, the loader delivering the sampler's global order,
// exact and elastic resume, and every bad input as a Status naming it.
#include "loader/index_sampler.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "loader/weighted_sampler.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainEpoch;
using testing_support::PatternDataset;

// Expects `count` draws out of `n` within 5 standard deviations of the
// binomial mean n * p (a false alarm about once in 1.7 million).
void ExpectBinomial(int64_t count, int64_t n, double p,
                    const std::string& what) {
  const double mean = static_cast<double>(n) * p;
  const double sigma = std::sqrt(static_cast<double>(n) * p * (1 - p));
  EXPECT_LE(std::abs(static_cast<double>(count) - mean), 5 * sigma + 1e-9)
      << what << ": " << count << " of " << n << ", expected " << mean;
}

TEST(WeightedRandomSampler, DrawsEachIndexInProportionToItsWeight) {
  const std::vector<double> weights = {0, 1, 2, 3, 4};
  auto sampler = WeightedRandomSampler::Create(weights, /*num_samples=*/100000);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  ASSERT_EQ((*sampler)->size(), 100000);
  ASSERT_EQ((*sampler)->dataset_size(), 5);
  std::vector<int64_t> counts(5, 0);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    for (int64_t p = 0; p < 100000; ++p) {
      const int64_t i = (*sampler)->At(/*seed=*/3, epoch, p);
      ASSERT_GE(i, 0);
      ASSERT_LT(i, 5);
      ++counts[static_cast<size_t>(i)];
    }
  }
  EXPECT_EQ(counts[0], 0) << "a zero weight is never drawn";
  for (size_t i = 1; i < 5; ++i) {
    ExpectBinomial(counts[i], 200000, weights[i] / 10.0,
                   "index " + std::to_string(i));
  }
}

TEST(WeightedRandomSampler, IsAPureFunctionOfSeedEpochAndPosition) {
  const std::vector<double> weights = {5, 1, 1, 1, 1, 1, 1, 1};
  auto a = WeightedRandomSampler::Create(weights, 1000);
  auto b = WeightedRandomSampler::Create(weights, 1000);
  ASSERT_TRUE(a.ok() && b.ok());
  int64_t differ_epoch = 0;
  int64_t differ_seed = 0;
  for (int64_t p = 0; p < 1000; ++p) {
    EXPECT_EQ((*a)->At(9, 2, p), (*b)->At(9, 2, p));
    differ_epoch += (*a)->At(9, 2, p) != (*a)->At(9, 3, p) ? 1 : 0;
    differ_seed += (*a)->At(9, 2, p) != (*a)->At(10, 2, p) ? 1 : 0;
  }
  // Independent draws agree with probability sum p_i^2 = 0.25 here.
  EXPECT_GT(differ_epoch, 600);
  EXPECT_GT(differ_seed, 600);
}

TEST(WeightedRandomSampler, RejectsBadWeightsNamingThem) {
  struct Case {
    std::vector<double> weights;
    int64_t num_samples;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{1, 2, -1}, -1, "weights[2] = -1"},
      {{1, NAN, 1}, -1, "weights[1] = nan"},
      {{INFINITY}, -1, "weights[0] = inf"},
      {{0, 0, 0}, -1, "sum to 0"},
      {{}, -1, "weights is empty"},
      {{1, 1}, -2, "num_samples is -2"},
  };
  for (const Case& c : cases) {
    auto sampler = WeightedRandomSampler::Create(c.weights, c.num_samples);
    ASSERT_FALSE(sampler.ok()) << c.says;
    EXPECT_EQ(sampler.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(sampler.status().message(), HasSubstr(c.says));
  }
}

TEST(WeightedRandomSampler, HugeFiniteWeightsDrawInProportion) {
  // Issue 35: w * n / sum overflowed ({8e307, 8e307, 1} drew index 1 twice
  // as often as index 0) or the sum did ({1e308, 1e308} was refused).
  for (const std::vector<double>& weights :
       {std::vector<double>{8e307, 8e307, 1}, std::vector<double>{1e308, 1e308},
        std::vector<double>{DBL_MAX, DBL_MAX, DBL_MAX, 0}}) {
    auto sampler = WeightedRandomSampler::Create(weights, 60000);
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    const double positive = weights.back() == 0 ? 3 : 2;
    std::vector<int64_t> count(weights.size(), 0);
    for (int64_t p = 0; p < 60000; ++p) {
      ++count[static_cast<size_t>((*sampler)->At(3, 1, p))];
    }
    for (size_t i = 0; i < weights.size(); ++i) {
      const double share = weights[i] >= 1e300 ? 1 / positive : 0;
      if (share == 0) {
        EXPECT_EQ(count[i], 0) << "index " << i;
      } else {
        ExpectBinomial(count[i], 60000, share, "index " + std::to_string(i));
      }
    }
  }
}

TEST(ClassBalancedSampler, DrawsEachClassEquallyOften) {
  // 900 of class 0, 90 of class 7, 10 of class 3.
  std::vector<int64_t> labels(1000, 0);
  for (size_t i = 900; i < 1000; ++i) labels[i] = i < 990 ? 7 : 3;
  auto sampler = ClassBalancedSampler::Create(labels, /*num_samples=*/90000);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  std::vector<int64_t> per_class(8, 0);
  std::vector<int64_t> rare(10, 0);  // class 3's indices 990..999
  for (int64_t p = 0; p < 90000; ++p) {
    const int64_t i = (*sampler)->At(1, 0, p);
    ++per_class[static_cast<size_t>(labels[static_cast<size_t>(i)])];
    if (i >= 990) ++rare[static_cast<size_t>(i - 990)];
  }
  for (int c : {0, 7, 3}) {
    ExpectBinomial(per_class[static_cast<size_t>(c)], 90000, 1.0 / 3,
                   "class " + std::to_string(c));
  }
  for (size_t i = 0; i < rare.size(); ++i) {  // uniform within the class
    ExpectBinomial(rare[i], 90000, 1.0 / 30,
                   "index " + std::to_string(990 + i));
  }
}

TEST(ClassBalancedSampler, RejectsANegativeLabelNamingItsIndex) {
  auto sampler = ClassBalancedSampler::Create(std::vector<int64_t>{0, 1, -4});
  ASSERT_FALSE(sampler.ok());
  EXPECT_THAT(sampler.status().message(), HasSubstr("labels[2] = -4"));
  EXPECT_FALSE(ClassBalancedSampler::Create(std::vector<int64_t>{}).ok());
}

// --- On the loader ---------------------------------------------------------

std::shared_ptr<const IndexSampler> Weighted(int64_t dataset, int64_t draws) {
  std::vector<double> weights(static_cast<size_t>(dataset));
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 + (i % 3);
  return *WeightedRandomSampler::Create(weights, draws);
}

LoaderBuilder Builder(std::shared_ptr<const Dataset> dataset,
                      std::shared_ptr<const IndexSampler> sampler, int rank,
                      int world, int workers = 2) {
  LoaderBuilder builder(std::move(dataset));
  builder.batch_size(4)
      .sampler(std::move(sampler), /*seed=*/21)
      .distributed(rank, world)
      .num_workers(workers)
      .prefetch(3)
      .device(Device::Host());
  return builder;
}

// The indices of the next `batches` batches (an end of epoch is -1).
std::vector<int64_t> Read(Loader& loader, int64_t batches) {
  std::vector<int64_t> out;
  for (int64_t b = 0; b < batches; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) break;
    if (!next->has_value()) {
      out.push_back(-1);
      continue;
    }
    for (int64_t i : (*next)->sample_indices()) out.push_back(i);
  }
  return out;
}

TEST(CustomSampler, TheLoaderDeliversTheSamplersGlobalOrder) {
  auto dataset = std::make_shared<PatternDataset>(40);
  auto sampler = Weighted(40, 50);
  absl::StatusOr<Loader> loader = Builder(dataset, sampler, 0, 1).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->batches_per_epoch(), 13);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    std::vector<int64_t> expected;
    for (int64_t p = 0; p < 50; ++p)
      expected.push_back(sampler->At(21, epoch, p));
    EXPECT_EQ(DrainEpoch(*loader).indices(), expected) << "epoch " << epoch;
  }
}

TEST(CustomSampler, ResumesExactlyAtEveryBatch) {
  auto dataset = std::make_shared<PatternDataset>(30);
  auto sampler = Weighted(30, 37);  // 10 batches of 4, the last short
  for (int rank : {0, 1}) {
    absl::StatusOr<Loader> whole = Builder(dataset, sampler, rank, 2).Build();
    ASSERT_TRUE(whole.ok()) << whole.status();
    const int64_t items = 3 * (whole->batches_per_epoch() + 1);
    const std::vector<int64_t> expected = Read(*whole, items);
    for (int64_t k = 0; k <= whole->batches_per_epoch() + 1; ++k) {
      absl::StatusOr<Loader> first = Builder(dataset, sampler, rank, 2).Build();
      ASSERT_TRUE(first.ok());
      const std::vector<int64_t> before = Read(*first, k);
      absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
      ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
      EXPECT_TRUE(checkpoint->custom_order);
      EXPECT_EQ(checkpoint->ToBytes().size(), 72u);
      auto parsed = LoaderCheckpoint::FromBytes(checkpoint->ToBytes());
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      absl::StatusOr<Loader> second =
          Builder(dataset, sampler, rank, 2, /*workers=*/k % 3)
              .resume(*parsed)
              .Build();
      ASSERT_TRUE(second.ok()) << second.status();
      std::vector<int64_t> all = before;
      const std::vector<int64_t> after = Read(*second, items - k);
      all.insert(all.end(), after.begin(), after.end());
      EXPECT_EQ(all, expected) << "rank " << rank << ", resumed after " << k;
    }
  }
}

// `from` ranks read `batches` batches each and checkpoint; `to` ranks
// resume: together they must read the rest of the epoch's global order,
// sampler->At(seed, 0, p) for p from the checkpoint on, exactly once.
void ExpectElastic(int from, int to, int64_t batches) {
  auto dataset = std::make_shared<PatternDataset>(50);
  auto sampler = Weighted(50, 60);
  std::optional<LoaderCheckpoint> checkpoint;
  for (int rank = 0; rank < from; ++rank) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, sampler, rank, from).Build();
    ASSERT_TRUE(loader.ok());
    Read(*loader, batches);
    absl::StatusOr<LoaderCheckpoint> c = loader->Checkpoint();
    ASSERT_TRUE(c.ok()) << c.status();
    if (checkpoint) {
      EXPECT_EQ(c->position, checkpoint->position);
    } else {
      checkpoint = *c;
    }
  }
  ASSERT_EQ(checkpoint->position, from * batches * 4);
  std::multiset<int64_t> rest;
  for (int rank = 0; rank < to; ++rank) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, sampler, rank, to).resume(*checkpoint).Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int64_t i : DrainEpoch(*loader).indices()) rest.insert(i);
  }
  std::multiset<int64_t> expected;
  for (int64_t p = checkpoint->position; p < 60; ++p) {
    expected.insert(sampler->At(21, 0, p));
  }
  EXPECT_EQ(rest, expected) << from << " -> " << to << " ranks";
}

TEST(CustomSampler, ElasticResumeReadsTheRestOfTheGlobalOrderOnce) {
  ExpectElastic(/*from=*/1, /*to=*/2, /*batches=*/3);  // 48 left, 24 each
  ExpectElastic(/*from=*/2, /*to=*/3, /*batches=*/3);  // 36 left, 12 each
  ExpectElastic(/*from=*/3, /*to=*/1, /*batches=*/2);  // 36 left
}

class ScriptedSampler : public IndexSampler {
 public:
  ScriptedSampler(int64_t size, int64_t bad_position, int64_t bad_value,
                  bool throws)
      : size_(size),
        bad_position_(bad_position),
        bad_value_(bad_value),
        throws_(throws) {}
  int64_t size() const override { return size_; }
  int64_t At(uint64_t, int64_t, int64_t position) const override {
    if (position != bad_position_) return position;
    if (throws_) throw std::runtime_error("sampler broke");
    return bad_value_;
  }

 private:
  int64_t size_, bad_position_, bad_value_;
  bool throws_;
};

TEST(CustomSampler, AnIndexOutOfRangeIsAnErrorNamingPositionAndValue) {
  auto dataset = std::make_shared<PatternDataset>(20);
  for (int64_t bad : {int64_t{20}, int64_t{-3}}) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, std::make_shared<ScriptedSampler>(20, 13, bad, false),
                0, 1)
            .Build();
    ASSERT_TRUE(loader.ok());
    absl::Status status;
    for (int i = 0; i < 6 && status.ok(); ++i) status = loader->Next().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), HasSubstr("global position 13 of epoch 0"));
    EXPECT_THAT(status.message(),
                HasSubstr(absl::StrCat("returned index ", bad)));
  }
}

TEST(CustomSampler, AThrowingSamplerIsAnErrorNamingTheCall) {
  auto dataset = std::make_shared<PatternDataset>(20);
  absl::StatusOr<Loader> loader =
      Builder(dataset, std::make_shared<ScriptedSampler>(20, 2, 0, true), 0, 1)
          .Build();
  ASSERT_TRUE(loader.ok());
  const absl::Status status = loader->Next().status();
  EXPECT_THAT(status.message(), HasSubstr("IndexSampler::At"));
  EXPECT_THAT(status.message(), HasSubstr("sampler broke"));
  EXPECT_THAT(status.message(), HasSubstr("global position 2"));
}

TEST(CustomSampler, BuildRejectsAWrongLengthAShuffleAndAnEmptyOrder) {
  auto dataset = std::make_shared<PatternDataset>(40);
  absl::StatusOr<Loader> wrong =
      Builder(dataset, Weighted(30, 30), 0, 1).Build();
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("made for 30"));
  EXPECT_THAT(wrong.status().message(), HasSubstr("dataset has 40"));
  absl::StatusOr<Loader> shuffled =
      Builder(dataset, Weighted(40, 40), 0, 1).shuffle(3).Build();
  ASSERT_FALSE(shuffled.ok());
  EXPECT_THAT(shuffled.status().message(), HasSubstr("'shuffle'"));
  absl::StatusOr<Loader> empty =
      Builder(dataset, Weighted(40, 0), 0, 1).Build();
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("sampler size 0"));
}

class ManySources : public ScriptedSampler {
 public:
  explicit ManySources(int sources)
      : ScriptedSampler(20, -1, 0, false), sources_(sources) {}
  int num_sources() const override { return sources_; }

 private:
  int sources_;
};

TEST(CustomSampler, BuildRejectsASourceCountOutOfRange) {
  auto dataset = std::make_shared<PatternDataset>(20);
  for (int sources : {-1, IndexSampler::kMaxSources + 1}) {
    absl::StatusOr<Loader> loader =
        Builder(dataset, std::make_shared<ManySources>(sources), 0, 1).Build();
    ASSERT_FALSE(loader.ok()) << sources;
    EXPECT_THAT(loader.status().message(),
                HasSubstr(absl::StrCat("num_sources() = ", sources)));
  }
  EXPECT_TRUE(
      Builder(dataset, std::make_shared<ManySources>(3), 0, 1).Build().ok());
}

TEST(CustomSampler, ResumeRejectsACheckpointOfAnotherOrderNamingTheField) {
  auto dataset = std::make_shared<PatternDataset>(40);
  auto sampler = Weighted(40, 40);
  absl::StatusOr<Loader> loader = Builder(dataset, sampler, 0, 1).Build();
  ASSERT_TRUE(loader.ok());
  Read(*loader, 2);
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  ASSERT_TRUE(checkpoint.ok());
  absl::StatusOr<Loader> builtin = LoaderBuilder(dataset)
                                       .batch_size(4)
                                       .device(Device::Host())
                                       .resume(*checkpoint)
                                       .Build();
  ASSERT_FALSE(builtin.ok());
  EXPECT_THAT(builtin.status().message(), HasSubstr("'sampler'"));
  absl::StatusOr<Loader> reseeded = Builder(dataset, sampler, 0, 1)
                                        .sampler(sampler, /*seed=*/22)
                                        .resume(*checkpoint)
                                        .Build();
  ASSERT_FALSE(reseeded.ok());
  EXPECT_THAT(reseeded.status().message(), HasSubstr("'seed'"));
}

TEST(CustomSampler, TheCheckpointFlagRoundTripsAndIsChecked) {
  LoaderCheckpoint c;
  c.dataset_size = 10;
  c.custom_order = true;
  c.position = 4;
  auto parsed = LoaderCheckpoint::FromBytes(c.ToBytes());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, c);
  c.shuffle = true;  // a custom order is never shuffled
  parsed = LoaderCheckpoint::FromBytes(c.ToBytes());
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("'flags'"));
}

}  // namespace
}  // namespace pinwheel
