// End-to-end tests of Loader on the host backend (and the cuda backend when
// a GPU is present): batches are bit-exact against reading the dataset
// sequentially, for every sampler, worker count and delivery order.
#include "loader/loader.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "loader/loader_builder.h"
#include "loader/sampler.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/skip_without_gpu.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using ::testing::ElementsAreArray;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;
using testing_support::ScriptedStreams;
using testing_support::ToHost;

// Reads one epoch, its batches copied back to the host.
DrainedEpoch ReadEpoch(Loader& loader) {
  DrainedEpoch epoch = DrainEpoch(loader, {.copy_fields = true});
  EXPECT_TRUE(epoch.status.ok()) << epoch.status;
  return epoch;
}

// Checks every batch against the dataset read sequentially.
void ExpectBitExact(const testing_support::PatternDataset& dataset,
                    const std::vector<HostBatch>& batches) {
  for (const HostBatch& batch : batches) {
    for (size_t p = 0; p < batch.indices.size(); ++p) {
      const std::vector<std::vector<std::byte>> expected =
          dataset.Expected(batch.indices[p]);
      for (size_t f = 0; f < expected.size(); ++f) {
        const size_t bytes = expected[f].size();
        ASSERT_EQ(0, std::memcmp(batch.fields[f].data() + p * bytes,
                                 expected[f].data(), bytes))
            << "batch " << batch.index << " sample " << p << " field " << f;
      }
    }
  }
}

struct Config {
  int workers;
  bool in_order;
  bool shuffle;
  bool cuda;
};

class LoaderOrderTest : public ::testing::TestWithParam<Config> {};

TEST_P(LoaderOrderTest, DeliversEveryIndexOnceBitExact) {
  const Config config = GetParam();
  if (config.cuda) {
    SKIP_WITHOUT_GPU("cuda backend case");
  }
  auto dataset = std::make_shared<testing_support::PatternDataset>(1000);
  LoaderBuilder builder(dataset);
  const bool tuned = config.workers == LoaderOptions::kAuto;
  builder.batch_size(64)
      .num_workers(config.workers)
      .in_order(config.in_order)
      .prefetch(tuned ? LoaderOptions::kAuto : 3)
      .device(config.cuda ? *Device::Cuda(0) : Device::Host());
  if (tuned) builder.auto_tune(/*max_workers=*/4, 0, /*log=*/false);
  if (config.shuffle) builder.shuffle(11);
  absl::StatusOr<Loader> loader = builder.Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {
    const DrainedEpoch read = ReadEpoch(*loader);
    ASSERT_EQ(read.batches.size(), 16u);  // 15 full + 1 of 40
    ExpectBitExact(*dataset, read.batches);
    std::vector<int64_t> all = read.indices();
    std::multiset<int64_t> seen(all.begin(), all.end());
    ASSERT_EQ(seen.size(), 1000u);
    for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(seen.count(i), 1u) << i;
    if (config.in_order) {
      const std::unique_ptr<Sampler> sampler =
          config.shuffle
              ? std::unique_ptr<Sampler>(new RandomSampler(1000, 11))
              : std::unique_ptr<Sampler>(new SequentialSampler(1000));
      EXPECT_THAT(all, ElementsAreArray(sampler->Indices(epoch)));
      for (size_t b = 0; b < read.batches.size(); ++b) {
        EXPECT_EQ(read.batches[b].index, static_cast<int64_t>(b));
      }
    }
  }
  EXPECT_EQ(loader->stats().epochs_completed, 2);
}

std::vector<Config> AllConfigs() {
  std::vector<Config> configs;
  for (bool cuda : {false, true}) {
    for (int workers : {0, 1, 2, 8, LoaderOptions::kAuto}) {
      for (bool in_order : {true, false}) {
        for (bool shuffle : {false, true}) {
          if (workers == 0 && !in_order) continue;  // inline is in order
          configs.push_back({workers, in_order, shuffle, cuda});
        }
      }
    }
  }
  return configs;
}

INSTANTIATE_TEST_SUITE_P(AllBackends, LoaderOrderTest,
                         ::testing::ValuesIn(AllConfigs()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return absl::StrCat(
                               "Workers",
                               info.param.workers == LoaderOptions::kAuto
                                   ? std::string("Auto")
                                   : absl::StrCat(info.param.workers),
                               info.param.in_order ? "InOrder" : "OutOfOrder",
                               info.param.shuffle ? "Shuffled" : "Sequential",
                               info.param.cuda ? "_CUDA" : "_Host");
                         });

TEST(Loader, SameSeedGivesSameOrderWithOneAndEightWorkers) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(777);
  std::vector<std::vector<int64_t>> orders;
  for (int workers : {1, 8}) {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(50)
                                        .shuffle(3)
                                        .num_workers(workers)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    std::vector<int64_t> order;
    for (int epoch = 0; epoch < 3; ++epoch) {
      std::vector<int64_t> epoch_order = ReadEpoch(*loader).indices();
      order.insert(order.end(), epoch_order.begin(), epoch_order.end());
    }
    orders.push_back(order);
  }
  EXPECT_EQ(orders[0], orders[1]);
}

TEST(Loader, DropLastDropsTheShortBatch) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(30)
                                      .drop_last(true)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->batches_per_epoch(), 3);
  std::vector<HostBatch> batches = ReadEpoch(*loader).batches;
  ASSERT_EQ(batches.size(), 3u);
  for (const HostBatch& b : batches) EXPECT_EQ(b.indices.size(), 30u);
}

TEST(Loader, DistributedRanksSplitTheEpoch) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(103);
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(8)
                                        .shuffle(5)
                                        .distributed(rank, 4)
                                        .num_workers(2)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    const DrainedEpoch read = ReadEpoch(*loader);
    ExpectBitExact(*dataset, read.batches);
    std::vector<int64_t> all = read.indices();
    EXPECT_EQ(all.size(), 26u);  // ceil(103 / 4)
    seen.insert(all.begin(), all.end());
  }
  for (int64_t i = 0; i < 103; ++i) EXPECT_GE(seen.count(i), 1u) << i;
  EXPECT_EQ(seen.size(), 104u);  // one index repeated as padding
}

TEST(Loader, RangeForIteratesOneEpoch) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(90);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  int count = 0;
  for (absl::StatusOr<DeviceBatch>& batch : *loader) {
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(batch->size(), 10);
    ++count;
  }
  EXPECT_EQ(count, 9);
  EXPECT_EQ(loader->epoch(), 1);
}

// Regression: the range held the batch it had yielded while fetching the
// next, so with one device buffer the second batch failed.
TEST(Loader, RangeForWorksWithOneDeviceBuffer) {
  for (int workers : {0, 2}) {
    auto dataset = std::make_shared<testing_support::PatternDataset>(90);
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(10)
                                        .num_workers(workers)
                                        .device_buffers(1)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<int64_t> indices;
      for (absl::StatusOr<DeviceBatch>& batch : *loader) {
        ASSERT_TRUE(batch.ok())
            << "workers " << workers << ": " << batch.status();
        EXPECT_TRUE(batch->WaitOnHost().ok());
        indices.insert(indices.end(), batch->sample_indices().begin(),
                       batch->sample_indices().end());
      }
      EXPECT_EQ(indices.size(), 90u) << "workers " << workers;
    }
  }
}

// A batch moved out of the range stays valid while the range goes on.
TEST(Loader, RangeForLetsABatchBeMovedOut) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(30);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .num_workers(1)
                                      .device_buffers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  std::optional<DeviceBatch> kept;
  int count = 0;
  for (absl::StatusOr<DeviceBatch>& batch : *loader) {
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (count == 0) kept = std::move(*batch);
    ++count;
  }
  EXPECT_EQ(count, 3);
  ASSERT_TRUE(kept.has_value());
  EXPECT_FALSE(kept->released());
  EXPECT_EQ(kept->index(), 0);
  ASSERT_TRUE(kept->WaitOnHost().ok());
  ExpectBitExact(*dataset, {ToHost(*kept, /*copy_fields=*/true)});
}

TEST(Loader, StartEpochRestartsFromTheFirstBatch) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(200);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(10)
                                      .shuffle(9)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  {
    absl::StatusOr<std::optional<DeviceBatch>> first = loader->Next();
    ASSERT_TRUE(first.ok() && first->has_value());
  }
  ASSERT_TRUE(loader->StartEpoch(5).ok());
  std::vector<int64_t> all = ReadEpoch(*loader).indices();
  EXPECT_EQ(all, RandomSampler(200, 9).Indices(5));
  EXPECT_EQ(loader->epoch(), 6);
}

TEST(Loader, MemoryIsConstantAcrossEpochs) {
  auto dataset = std::make_shared<testing_support::PatternDataset>(64);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(16)
                                      .shuffle(1)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  ReadEpoch(*loader);
  const LoaderStats first = loader->stats();
  for (int epoch = 1; epoch < 50; ++epoch) ReadEpoch(*loader);
  const LoaderStats last = loader->stats();
  EXPECT_EQ(first.pinned_bytes, last.pinned_bytes);
  EXPECT_EQ(first.device_bytes, last.device_bytes);
  EXPECT_EQ(last.epochs_completed, 50);
}

std::vector<int64_t> IdsOf(const std::vector<HostBatch>& batches) {
  std::vector<int64_t> ids;
  for (const HostBatch& b : batches) {
    const size_t n = b.fields[1].size() / 8;
    for (size_t p = 0; p < n; ++p) {
      int64_t value;
      std::memcpy(&value, b.fields[1].data() + 8 * p, 8);
      ids.push_back((value - 1) / 7);  // field "b" is i * 7 + 1
    }
  }
  return ids;
}

TEST(Loader, IterableDatasetReadsEverySampleOnceInADeterministicOrder) {
  auto dataset = ScriptedStreams::Strided(503);
  for (int workers : {0, 1, 2, 8}) {
    std::vector<int64_t> first_order;
    for (int run = 0; run < 2; ++run) {
      absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                          .batch_size(16)
                                          .num_workers(workers)
                                          .device(Device::Host())
                                          .Build();
      ASSERT_TRUE(loader.ok()) << loader.status();
      for (int epoch = 0; epoch < 2; ++epoch) {
        std::vector<int64_t> ids = IdsOf(ReadEpoch(*loader).batches);
        std::multiset<int64_t> seen(ids.begin(), ids.end());
        ASSERT_EQ(ids.size(), 503u) << "workers " << workers;
        for (int64_t i = 0; i < 503; ++i) ASSERT_EQ(seen.count(i), 1u) << i;
        if (run == 0 && epoch == 0) first_order = ids;
        if (epoch == 0) {
          EXPECT_EQ(ids, first_order) << "workers " << workers;
        }
      }
    }
  }
}

// Regression: drop_last(true) was silently ignored for an IterableDataset.
// Each shard's stream is cut into batches on its own: 503 samples in 2
// shards are 252 + 251 = (15 × 16 + 12) + (15 × 16 + 11).
TEST(Loader, IterableDatasetDropLastDropsEachShardsShortLastBatch) {
  auto dataset = ScriptedStreams::Strided(503);
  for (bool drop_last : {false, true}) {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(16)
                                        .num_workers(2)
                                        .drop_last(drop_last)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int epoch = 0; epoch < 2; ++epoch) {
      std::vector<HostBatch> batches = ReadEpoch(*loader).batches;
      std::map<size_t, int> sizes;
      for (const HostBatch& b : batches) ++sizes[b.indices.size()];
      std::vector<int64_t> ids = IdsOf(batches);
      std::set<int64_t> distinct(ids.begin(), ids.end());
      EXPECT_EQ(distinct.size(), ids.size()) << "a sample read twice";
      if (drop_last) {
        EXPECT_EQ(ids.size(), 480u);
        EXPECT_EQ(sizes, (std::map<size_t, int>{{16, 30}}));
      } else {
        EXPECT_EQ(ids.size(), 503u);
        EXPECT_EQ(sizes, (std::map<size_t, int>{{11, 1}, {12, 1}, {16, 30}}));
      }
    }
  }
}

TEST(Loader, IterableDatasetShardsAcrossRanksWithoutOverlap) {
  auto dataset = ScriptedStreams::Strided(300);
  std::multiset<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(7)
                                        .num_workers(2)
                                        .distributed(rank, 3)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    std::vector<int64_t> ids = IdsOf(ReadEpoch(*loader).batches);
    seen.insert(ids.begin(), ids.end());
  }
  ASSERT_EQ(seen.size(), 300u);
  for (int64_t i = 0; i < 300; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
}

}  // namespace
}  // namespace pinwheel
