// MixtureDataset: shares within stated bounds (exact per window, every
// prefix within one sample when stratified), source epochs and draws with
// replacement, the weight schedule, per-source stats, exact resume across
// 1 -> 2 -> 3 ranks, and bad inputs named. See Note [stratified mixing].
#include "loader/mixture_dataset.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/loader_checkpoint.h"
#include "tests/support/drain_epoch.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::DrainEpoch;
using testing_support::DrainOptions;

// Sample i of source s: "v" i64 = s * 1000 + i.
class SourceDataset : public Dataset {
 public:
  SourceDataset(int64_t source, int64_t size, DType dtype = DType::kInt64,
                std::string name = "v")
      : source_(source), size_(size) {
    layout_ =
        *SampleLayout::Create({{.name = name, .dtype = dtype, .shape = {}}});
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    if (index < 0 || index >= size_) return absl::OutOfRangeError("index");
    const int64_t v = source_ * 1000 + index;
    std::memcpy(out.field(0).data(), &v,
                std::min<size_t>(8, out.field(0).size()));
    return absl::OkStatus();
  }

 private:
  int64_t source_;
  int64_t size_;
  SampleLayout layout_;
};

std::vector<std::shared_ptr<const Dataset>> Sources(
    const std::vector<int64_t>& sizes) {
  std::vector<std::shared_ptr<const Dataset>> out;
  for (size_t s = 0; s < sizes.size(); ++s) {
    out.push_back(
        std::make_shared<SourceDataset>(static_cast<int64_t>(s), sizes[s]));
  }
  return out;
}

std::shared_ptr<MixtureDataset> Mix(const std::vector<int64_t>& sizes,
                                    MixtureOptions options) {
  absl::StatusOr<std::shared_ptr<MixtureDataset>> mix =
      MixtureDataset::Create(Sources(sizes), std::move(options));
  EXPECT_TRUE(mix.ok()) << mix.status();
  return mix.ok() ? *mix : nullptr;
}

// The sources of `epoch`'s positions.
std::vector<int> SourcesOf(const MixtureDataset& mix, uint64_t seed,
                           int64_t epoch) {
  std::vector<int> out;
  for (int64_t p = 0; p < mix.order()->size(); ++p) {
    out.push_back(mix.SourceOf(mix.order()->At(seed, epoch, p)));
  }
  return out;
}

// Checks every whole window holds exactly the quotas and, stratified, that
// every prefix of the epoch is within one sample of its share; returns the
// largest deviation of any window of `window` consecutive positions.
double CheckShares(const MixtureDataset& mix, const std::vector<int>& sources,
                   int64_t window, const std::vector<int64_t>& quota,
                   bool prefixes) {
  const size_t k_count = quota.size();
  std::vector<int64_t> prefix(k_count, 0);
  for (size_t n = 0; n < sources.size(); ++n) {
    ++prefix[static_cast<size_t>(sources[n])];
    const int64_t in_window = static_cast<int64_t>(n % window) + 1;
    for (size_t k = 0; k < k_count && prefixes; ++k) {
      // Windows are exact, so the deviation within the window is the
      // prefix's.
      const int64_t before = static_cast<int64_t>(n / window) * quota[k];
      const double share = static_cast<double>(in_window * quota[k]) /
                           static_cast<double>(window);
      EXPECT_LT(std::abs(static_cast<double>(prefix[k] - before) - share), 1.0)
          << "source " << k << ", prefix " << n + 1;
    }
  }
  for (size_t w = 0; (w + 1) * window <= sources.size(); ++w) {
    std::vector<int64_t> count(k_count, 0);
    for (size_t i = w * window; i < (w + 1) * window; ++i) {
      ++count[static_cast<size_t>(sources[i])];
    }
    EXPECT_EQ(count, quota) << "window " << w;
  }
  double worst = 0;
  for (size_t start = 0; start + window <= sources.size(); ++start) {
    std::vector<int64_t> count(k_count, 0);
    for (size_t i = start; i < start + window; ++i) {
      ++count[static_cast<size_t>(sources[i])];
    }
    for (size_t k = 0; k < k_count; ++k) {
      worst =
          std::max(worst, std::abs(static_cast<double>(count[k] - quota[k])));
    }
  }
  (void)mix;
  return worst;
}

TEST(MixtureDataset, StratifiedWindowsHoldExactSharesAndPrefixesWithinOne) {
  auto mix = Mix(
      {100, 100, 100},
      {.weights = {0.5, 0.3, 0.2}, .samples_per_epoch = 1000, .window = 10});
  ASSERT_NE(mix, nullptr);
  EXPECT_EQ(mix->Quotas(0), (std::vector<int64_t>{5, 3, 2}));
  const double worst =
      CheckShares(*mix, SourcesOf(*mix, 1, 0), 10, {5, 3, 2}, true);
  EXPECT_LE(worst, 1.0) << "any 10 consecutive positions";
  // Uneven weights, many sources, a window that divides nothing evenly.
  const std::vector<double> weights = {0.31, 0.02, 0.17, 0.4, 0.1};
  auto many =
      Mix({50, 3, 20, 80, 9},
          {.weights = weights, .samples_per_epoch = 97 * 20, .window = 97});
  ASSERT_NE(many, nullptr);
  const std::vector<int64_t> quota = many->Quotas(0);
  int64_t total = 0;
  for (size_t k = 0; k < quota.size(); ++k) {
    EXPECT_LT(std::abs(static_cast<double>(quota[k]) - 97 * weights[k]), 1.0);
    total += quota[k];
  }
  EXPECT_EQ(total, 97);
  CheckShares(*many, SourcesOf(*many, 1, 0), 97, quota, true);
}

TEST(MixtureDataset, RandomModeKeepsTheWindowSharesInAnotherOrderEachWindow) {
  auto mix =
      Mix({100, 100, 100}, {.weights = {0.5, 0.3, 0.2},
                            .samples_per_epoch = 1000,
                            .window = 10,
                            .interleave = MixtureOptions::Interleave::kRandom});
  ASSERT_NE(mix, nullptr);
  const std::vector<int> epoch0 = SourcesOf(*mix, 1, 0);
  CheckShares(*mix, epoch0, 10, {5, 3, 2}, /*prefixes=*/false);
  std::set<std::vector<int>> orders;
  for (size_t w = 0; w < 100; ++w) {
    orders.insert(std::vector<int>(epoch0.begin() + w * 10,
                                   epoch0.begin() + (w + 1) * 10));
  }
  EXPECT_GT(orders.size(), 50u) << "windows in 2520 possible orders";
  EXPECT_NE(SourcesOf(*mix, 1, 1), epoch0);
  EXPECT_NE(SourcesOf(*mix, 2, 0), epoch0);
}

TEST(MixtureDataset, EachSourceIsReadThroughBeforeItRestarts) {
  // Stratified: in stream order.
  auto mix =
      Mix({7, 11, 13},
          {.weights = {0.5, 0.3, 0.2}, .samples_per_epoch = 60, .window = 10});
  ASSERT_NE(mix, nullptr);
  {
    // Each source's draws over 5 mixture epochs, in stream order, cut into
    // its own epochs: each whole one is a permutation of the source.
    std::vector<std::vector<int64_t>> draws(3);
    for (int64_t e = 0; e < 5; ++e) {
      for (int64_t p = 0; p < 60; ++p) {
        const int64_t i = mix->order()->At(4, e, p);
        draws[static_cast<size_t>(mix->SourceOf(i))].push_back(i);
      }
    }
    for (size_t k = 0; k < 3; ++k) {
      const int64_t n = mix->offsets()[k + 1] - mix->offsets()[k];
      std::set<std::vector<int64_t>> orders;
      for (size_t e = 0; (e + 1) * n <= draws[k].size(); ++e) {
        std::vector<int64_t> one(draws[k].begin() + e * n,
                                 draws[k].begin() + (e + 1) * n);
        orders.insert(one);
        std::sort(one.begin(), one.end());

        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(one[static_cast<size_t>(i)], mix->offsets()[k] + i)
              << "source " << k << ", its epoch " << e;
        }
      }
      EXPECT_GT(orders.size(), 1u) << "source " << k << " reshuffles";
    }
  }
}

TEST(MixtureDataset, RandomModeReadsEachSourceEvenlyAtEveryWindowEnd) {
  // kRandom permutes the slots of a window, so a window that straddles two
  // of a source's epochs may mix their order; at every window's end the
  // source's draws so far are still its draw numbers 0..D-1: each sample
  // read floor(D / n) or ceil(D / n) times.
  auto mix =
      Mix({7, 11, 13}, {.weights = {0.5, 0.3, 0.2},
                        .samples_per_epoch = 65,  // a short last window of 5
                        .window = 10,
                        .interleave = MixtureOptions::Interleave::kRandom});
  ASSERT_NE(mix, nullptr);
  std::vector<int64_t> reads(31, 0);
  std::vector<int64_t> drawn(3, 0);
  for (int64_t e = 0; e < 4; ++e) {
    for (int64_t p = 0; p < 65; ++p) {
      const int64_t i = mix->order()->At(4, e, p);
      ++reads[static_cast<size_t>(i)];
      ++drawn[static_cast<size_t>(mix->SourceOf(i))];
      if ((p + 1) % 10 != 0 && p + 1 != 65) continue;
      for (size_t k = 0; k < 3; ++k) {
        const int64_t n = mix->offsets()[k + 1] - mix->offsets()[k];
        for (int64_t i = mix->offsets()[k]; i < mix->offsets()[k + 1]; ++i) {
          const int64_t r = reads[static_cast<size_t>(i)];
          EXPECT_TRUE(r == drawn[k] / n || r == (drawn[k] + n - 1) / n)
              << "sample " << i << " read " << r << " times in " << drawn[k]
              << " draws of source " << k << ", epoch " << e << " position "
              << p;
        }
      }
    }
  }
}

TEST(MixtureDataset, WithReplacementDrawsUniformlyFromTheSource) {
  auto mix = Mix({5, 1000}, {.weights = {1, 0},
                             .samples_per_epoch = 50000,
                             .draw = MixtureOptions::Draw::kWithReplacement});
  ASSERT_NE(mix, nullptr);
  std::vector<int64_t> counts(5, 0);
  for (int64_t p = 0; p < 50000; ++p) {
    const int64_t i = mix->order()->At(8, 0, p);
    ASSERT_LT(i, 5) << "source 1 has weight 0";
    ++counts[static_cast<size_t>(i)];
  }
  for (int64_t c : counts) {  // 5 standard deviations of Binomial(50000, .2)
    EXPECT_LE(std::abs(static_cast<double>(c) - 10000.0),
              5 * std::sqrt(8000.0));
  }
}

TEST(MixtureDataset, TheScheduleChangesTheWeightsFromItsEpoch) {
  auto mix = Mix({20, 20, 20},
                 {.weights = {0.5, 0.3, 0.2},
                  .schedule = {{.first_epoch = 2, .weights = {0.2, 0.2, 0.6}}},
                  .samples_per_epoch = 100,
                  .window = 10});
  ASSERT_NE(mix, nullptr);
  const std::vector<std::vector<int64_t>> expected = {
      {50, 30, 20}, {50, 30, 20}, {20, 20, 60}, {20, 20, 60}};
  std::vector<std::vector<int64_t>> draws(3);
  for (int64_t e = 0; e < 4; ++e) {
    std::vector<int64_t> count(3, 0);
    for (int s : SourcesOf(*mix, 3, e)) ++count[static_cast<size_t>(s)];
    EXPECT_EQ(count, expected[static_cast<size_t>(e)]) << "epoch " << e;
    for (int64_t p = 0; p < 100; ++p) {
      const int64_t i = mix->order()->At(3, e, p);
      draws[static_cast<size_t>(mix->SourceOf(i))].push_back(i);
    }
  }
  // Source epochs run on through the change: source 2's 160 draws are 8
  // whole permutations of its 20 samples.
  ASSERT_EQ(draws[2].size(), 160u);
  for (size_t e = 0; e < 8; ++e) {
    std::set<int64_t> one(draws[2].begin() + e * 20,
                          draws[2].begin() + (e + 1) * 20);
    EXPECT_EQ(one.size(), 20u) << "source 2, its epoch " << e;
  }
}

TEST(MixtureDataset, AStepScheduleChangesTheWeightsMidEpoch) {
  // 105 samples an epoch (a short last window of 5); phases from global
  // sample 155 (epoch 1, position 50) and 385 (epoch 3, position 70): steps
  // 31 and 77 of a global batch of 5.
  auto mix =
      Mix({20, 20, 20},
          {.weights = {0.5, 0.3, 0.2},
           .schedule = {{.weights = {0.2, 0.2, 0.6}, .first_sample = 155},
                        {.weights = {0.1, 0.8, 0.1}, .first_sample = 385}},
           .samples_per_epoch = 105,
           .window = 10});
  ASSERT_NE(mix, nullptr);
  EXPECT_EQ(mix->Quotas(1, 40), (std::vector<int64_t>{5, 3, 2}));
  EXPECT_EQ(mix->Quotas(1, 50), (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(mix->Quotas(3, 60), (std::vector<int64_t>{2, 2, 6}));
  EXPECT_EQ(mix->Quotas(3, 70), (std::vector<int64_t>{1, 8, 1}));
  std::vector<std::vector<int64_t>> draws(3);
  for (int64_t e = 0; e < 6; ++e) {
    const std::vector<int> sources = SourcesOf(*mix, 3, e);
    for (int64_t w = 0; w * 10 < 105; ++w) {
      std::vector<int64_t> count(3, 0);
      for (int64_t p = w * 10; p < std::min<int64_t>(105, (w + 1) * 10); ++p) {
        ++count[static_cast<size_t>(sources[static_cast<size_t>(p)])];
      }
      if (w * 10 + 10 <= 105) {
        EXPECT_EQ(count, mix->Quotas(e, w * 10))
            << "epoch " << e << " window " << w;
      }
    }
    for (int64_t p = 0; p < 105; ++p) {
      const int64_t i = mix->order()->At(3, e, p);
      draws[static_cast<size_t>(mix->SourceOf(i))].push_back(i);
    }
  }
  // The draw numbers run on through every change: each source's draws, in
  // stream order, are whole permutations of its 20 samples.
  for (size_t k = 0; k < 3; ++k) {
    for (size_t e = 0; (e + 1) * 20 <= draws[k].size(); ++e) {
      std::set<int64_t> one(draws[k].begin() + e * 20,
                            draws[k].begin() + (e + 1) * 20);
      EXPECT_EQ(one.size(), 20u) << "source " << k << ", its epoch " << e;
    }
  }
  // A phase must start at a window boundary, after the one before.
  auto misaligned = MixtureDataset::Create(
      Sources({20, 20, 20}),
      {.weights = {1, 1, 1},
       .schedule = {{.weights = {1, 1, 1}, .first_sample = 151}},
       .samples_per_epoch = 105,
       .window = 10});
  ASSERT_FALSE(misaligned.ok());
  EXPECT_THAT(
      misaligned.status().message(),
      HasSubstr("schedule[0].first_sample = 151 is position 46 of epoch 1"));
  auto backwards = MixtureDataset::Create(
      Sources({20, 20, 20}),
      {.weights = {1, 1, 1},
       .schedule = {{.first_epoch = 2, .weights = {1, 1, 1}},
                    {.weights = {1, 1, 1}, .first_sample = 115}},
       .samples_per_epoch = 105,
       .window = 10});
  ASSERT_FALSE(backwards.ok());
  EXPECT_THAT(backwards.status().message(),
              HasSubstr("schedule[1] starts at epoch 1"));
}

LoaderBuilder Builder(const std::shared_ptr<MixtureDataset>& mix, int rank,
                      int world) {
  LoaderBuilder builder(mix);
  builder.batch_size(2)
      .sampler(mix->order(), /*seed=*/5)
      .distributed(rank, world)
      .num_workers(2)
      .prefetch(3)
      .device(Device::Host());
  return builder;
}

TEST(MixtureDataset, TheLoaderReadsEachSourcesSamplesAndCountsThem) {
  auto mix =
      Mix({7, 11, 13},
          {.weights = {0.5, 0.3, 0.2}, .samples_per_epoch = 60, .window = 10});
  ASSERT_NE(mix, nullptr);
  absl::StatusOr<Loader> loader = Builder(mix, 0, 1).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const auto epoch = DrainEpoch(*loader, DrainOptions{.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  std::vector<int64_t> per_source(3, 0);
  for (const auto& batch : epoch.batches) {
    for (size_t s = 0; s < batch.indices.size(); ++s) {
      const int64_t i = batch.indices[s];
      const int k = mix->SourceOf(i);
      ++per_source[static_cast<size_t>(k)];
      int64_t v = 0;
      std::memcpy(&v, batch.fields[0].data() + 8 * s, 8);
      EXPECT_EQ(v, k * 1000 + (i - mix->offsets()[static_cast<size_t>(k)]));
    }
  }
  EXPECT_EQ(per_source, (std::vector<int64_t>{30, 18, 12}));
  EXPECT_EQ(loader->stats().samples_per_source, per_source);
}

// Resume at every batch of a 3-source mixture across 1 -> 2 -> 3 ranks:
// one rank reads k batches and checkpoints, two ranks resume it, read m
// batches each and checkpoint, three ranks resume that to the end of the
// epoch and through the next. Rank r of W resumed at global position g
// reads, as its t-th sample, position g + t * W + r (past the end: wrapped,
// the padding); each must be the uninterrupted stream's sample there, every
// position must be read, and epoch 1 must be the uninterrupted epoch 1.
TEST(MixtureDataset, ResumeAtEveryBatchAcrossOneTwoThreeRanksMatches) {
  auto mix = Mix({7, 11, 13},
                 {.weights = {0.5, 0.3, 0.2},
                  .schedule = {{.weights = {0.2, 0.6, 0.2}, .first_sample = 30},
                               {.first_epoch = 1, .weights = {0.1, 0.1, 0.8}}},
                  .samples_per_epoch = 60,
                  .window = 10,
                  .interleave = MixtureOptions::Interleave::kRandom});
  ASSERT_NE(mix, nullptr);
  EXPECT_EQ(mix->Quotas(0, 30), (std::vector<int64_t>{2, 6, 2}));
  constexpr int64_t kSize = 60;
  absl::StatusOr<Loader> whole = Builder(mix, 0, 1).Build();
  ASSERT_TRUE(whole.ok());
  const std::vector<int64_t> stream0 = DrainEpoch(*whole).indices();
  const std::vector<int64_t> stream1 = DrainEpoch(*whole).indices();
  ASSERT_EQ(stream0.size(), 60u);
  for (int64_t k = 0; k <= 24; ++k) {
    for (int64_t m : {0, 1, 3}) {
      std::vector<int> covered(kSize, 0);
      auto expect_read = [&](const std::vector<int64_t>& got, int64_t start,
                             int world, int rank, const char* phase) {
        for (size_t t = 0; t < got.size(); ++t) {
          const int64_t p = start + static_cast<int64_t>(t) * world + rank;
          EXPECT_EQ(got[t], stream0[static_cast<size_t>(p % kSize)])
              << phase << ", k " << k << ", m " << m << ", rank " << rank
              << " of " << world << ", position " << p;
          if (p < kSize) ++covered[static_cast<size_t>(p)];
        }
      };
      // One rank.
      absl::StatusOr<Loader> one = Builder(mix, 0, 1).Build();
      ASSERT_TRUE(one.ok());
      std::vector<int64_t> got;
      for (int64_t b = 0; b < k; ++b) {
        auto next = one->Next();
        ASSERT_TRUE(next.ok() && next->has_value());
        for (int64_t i : (*next)->sample_indices()) got.push_back(i);
      }
      expect_read(got, 0, 1, 0, "1 rank");
      absl::StatusOr<LoaderCheckpoint> first = one->Checkpoint();
      ASSERT_TRUE(first.ok());
      ASSERT_EQ(first->position, 2 * k);
      auto c1 = LoaderCheckpoint::FromBytes(first->ToBytes());
      ASSERT_TRUE(c1.ok());
      // Two ranks.
      std::optional<LoaderCheckpoint> second;
      for (int rank = 0; rank < 2; ++rank) {
        absl::StatusOr<Loader> two = Builder(mix, rank, 2).resume(*c1).Build();
        ASSERT_TRUE(two.ok()) << two.status();
        got.clear();
        for (int64_t b = 0; b < m; ++b) {
          auto next = two->Next();
          ASSERT_TRUE(next.ok() && next->has_value());
          for (int64_t i : (*next)->sample_indices()) got.push_back(i);
        }
        expect_read(got, c1->position, 2, rank, "2 ranks");
        absl::StatusOr<LoaderCheckpoint> c = two->Checkpoint();
        ASSERT_TRUE(c.ok());
        if (second) {
          EXPECT_EQ(c->position, second->position);
        } else {
          second = *c;
        }
      }
      ASSERT_EQ(second->position, 2 * k + 4 * m);
      // Three ranks, to the end of epoch 0 and through epoch 1.
      for (int rank = 0; rank < 3; ++rank) {
        absl::StatusOr<Loader> three =
            Builder(mix, rank, 3).resume(*second).Build();
        ASSERT_TRUE(three.ok()) << three.status();
        expect_read(DrainEpoch(*three).indices(), second->position, 3, rank,
                    "3 ranks");
        const std::vector<int64_t> next_epoch = DrainEpoch(*three).indices();
        ASSERT_EQ(next_epoch.size(), 20u);
        for (size_t t = 0; t < next_epoch.size(); ++t) {
          EXPECT_EQ(next_epoch[t], stream1[t * 3 + static_cast<size_t>(rank)])
              << "epoch 1, rank " << rank;
        }
      }
      for (int64_t p = 0; p < kSize; ++p) {
        EXPECT_GE(covered[static_cast<size_t>(p)], 1)
            << "position " << p << " never read, k " << k << ", m " << m;
      }
    }
  }
}

TEST(MixtureDataset, ReadsOutOfRangeAsOutOfRange) {
  auto mix = Mix({2, 3}, {.weights = {1, 1}});
  ASSERT_NE(mix, nullptr);
  absl::StatusOr<BatchLayout> layout = BatchLayout::Create(mix->layout(), 1);
  ASSERT_TRUE(layout.ok());
  std::vector<std::byte> slot(layout->slot_bytes());
  for (int64_t index : {int64_t{-1}, int64_t{5}}) {
    SampleView view(*layout, slot.data(), 0, index);
    const absl::Status status = mix->Read(index, view);
    EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
    EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("index ", index)));
  }
  SampleView view(*layout, slot.data(), 0, 4);
  ASSERT_TRUE(mix->Read(4, view).ok());
  EXPECT_EQ(view.field_as<int64_t>(0)[0], 1002);  // source 1's sample 2
}

TEST(MixtureDataset, RejectsALayoutMismatchNamingSourceAndField) {
  std::vector<std::shared_ptr<const Dataset>> sources = Sources({3, 3});
  sources.push_back(std::make_shared<SourceDataset>(2, 3, DType::kFloat32));
  auto mix = MixtureDataset::Create(sources, {.weights = {1, 1, 1}});
  ASSERT_FALSE(mix.ok());
  EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mix.status().message(), HasSubstr("source 2's field 0"));
  EXPECT_THAT(mix.status().message(), HasSubstr("'v'"));
  sources[2] = std::make_shared<SourceDataset>(2, 3, DType::kInt64, "w");
  mix = MixtureDataset::Create(sources, {.weights = {1, 1, 1}});
  ASSERT_FALSE(mix.ok());
  EXPECT_THAT(mix.status().message(), HasSubstr("source 2's field 0 is 'w'"));
}

TEST(MixtureDataset, AcceptsHugeFiniteWeights) {
  // Issue 35: {1e308, 1e308} sums past DBL_MAX; it was refused as "at least
  // one must be > 0". The shares are what the weights say: half and half.
  for (const std::vector<double>& weights :
       {std::vector<double>{1e308, 1e308}, std::vector<double>{8e307, 8e307}}) {
    std::shared_ptr<MixtureDataset> mix =
        Mix({8, 8}, {.weights = weights, .window = 16});
    ASSERT_NE(mix, nullptr);
    const std::vector<int> sources = SourcesOf(*mix, 5, 0);
    int64_t first = 0;
    for (int s : sources) first += s == 0;
    EXPECT_EQ(first * 2, static_cast<int64_t>(sources.size()));
  }
}

TEST(MixtureDataset, RejectsBadWeightsAndOptionsNamingThem) {
  struct Case {
    MixtureOptions options;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{.weights = {1, 1}}, "2 weights for 3 sources"},
      {{.weights = {1, -1, 1}}, "weights[1] (source 1) = -1"},
      {{.weights = {1, NAN, 1}}, "weights[1] (source 1) = nan"},
      {{.weights = {0, 0, 0}}, "sum to 0"},
      {{.weights = {1, 1, 1}, .window = 0}, "window = 0"},
      {{.weights = {1, 1, 1}, .samples_per_epoch = 0}, "samples_per_epoch = 0"},
      {{.weights = {1, 1, 1},
        .schedule = {{.first_epoch = 0, .weights = {1, 1, 1}}}},
       "(first_epoch = 0"},
      {{.weights = {1, 1, 1},
        .schedule = {{.first_epoch = 2, .weights = {1, 1}}}},
       "schedule[0].weights has 2 weights"},
      {{.weights = {1, 1, 1}}, nullptr},
  };
  for (const Case& c : cases) {
    auto mix = MixtureDataset::Create(Sources({4, 0, 4}), c.options);
    if (c.says == nullptr) {
      ASSERT_FALSE(mix.ok());  // source 1 is empty but weighted
      EXPECT_THAT(mix.status().message(), HasSubstr("source 1 has no sample"));
      continue;
    }
    ASSERT_FALSE(mix.ok()) << c.says;
    EXPECT_EQ(mix.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(mix.status().message(), HasSubstr(c.says));
  }
  EXPECT_TRUE(
      MixtureDataset::Create(Sources({4, 0, 4}), {.weights = {1, 0, 1}}).ok());
}

}  // namespace
}  // namespace pinwheel
