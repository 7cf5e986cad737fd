#include "loader/storage/cache/planned_tar_shards.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/loader_builder.h"
#include "loader/storage/cache/read_plan.h"
#include "tests/loader/image/test_jpegs.h"
#include "tests/loader/image/test_tars.h"
#include "tests/loader/storage/cache/counting_store.h"
#include "tests/loader/storage/cache/offline_minimum.h"
#include "tests/support/case_dir.h"
#include "tests/support/drain_epoch.h"

namespace pinwheel {
namespace {

namespace fs = std::filesystem;
using ::pinwheel::testing::CountingStore;
using ::pinwheel::testing::OfflineMinimumFetches;
using ::pinwheel::testing::SeededJpeg;
using ::pinwheel::testing::TarBuilder;
using ::pinwheel::testing::WriteFile;
using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::HostBatch;
using ::testing::HasSubstr;

constexpr int kSize = 8;
constexpr int64_t kBlock = 4096;

class PlannedTarShardsTest : public ::testing::Test {
 protected:
  // Writes `count` shards of `per_shard` samples, each padded with zeros
  // (past the archive's end) to whole cache blocks, so that Belady's MIN
  // counted in blocks is exact in bytes. Sample s is labelled s.
  std::vector<std::string> WriteShards(int count, int per_shard) {
    std::vector<std::string> paths;
    for (int shard = 0; shard < count; ++shard) {
      TarBuilder tar;
      for (int i = 0; i < per_shard; ++i) {
        const int s = shard * per_shard + i;
        const std::string key = absl::StrCat("s", s);
        tar.Add(key + ".jpg", SeededJpeg(64 + s % 7, 48 + s % 5, s));
        tar.Add(key + ".cls", std::to_string(s) + "\n");
      }
      std::vector<std::byte> bytes = tar.Finish();
      bytes.resize((bytes.size() + kBlock - 1) / kBlock * kBlock);
      paths.push_back(
          (dir_ / ("shard-" + std::to_string(shard) + ".tar")).string());
      WriteFile(paths.back(), bytes);
      total_bytes_ += static_cast<int64_t>(bytes.size());
    }
    return paths;
  }

  struct Job {
    std::shared_ptr<CountingStore> remote;
    std::shared_ptr<CachedStore> cache;
    std::shared_ptr<PlannedTarShards> dataset;
  };
  Job Open(const std::vector<std::string>& shards, CacheOptions cache_options) {
    Job job;
    job.remote = std::make_shared<CountingStore>();
    cache_options.block_bytes = kBlock;
    auto cache = CachedStore::Open(job.remote, cache_options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    if (!cache.ok()) return job;
    job.cache = *cache;
    TarShardOptions options;
    options.transform.size = kSize;
    options.seed = 5;
    options.shuffle_shards = true;
    options.store = job.cache;
    options.read_chunk_bytes = kBlock;
    auto tars = TarShardDataset::Open(shards, options);
    EXPECT_TRUE(tars.ok()) << tars.status();
    if (!tars.ok()) return job;
    auto planned = PlannedTarShards::Create(*tars, job.cache);
    EXPECT_TRUE(planned.ok()) << planned.status();
    if (planned.ok()) job.dataset = *planned;
    return job;
  }

  const testing_support::CaseDir case_dir_{"planned_tar_shards_"};
  const fs::path dir_ = case_dir_.path();
  int64_t total_bytes_ = 0;
};

// The labels of the samples in `batches`.
std::vector<int64_t> Labels(const std::vector<HostBatch>& batches) {
  std::vector<int64_t> labels;
  for (const HostBatch& batch : batches) {
    for (int64_t p = 0; p < batch.size; ++p) {
      int64_t label = 0;
      std::memcpy(&label, batch.fields[1].data() + p * 8, 8);
      labels.push_back(label);
    }
  }
  return labels;
}

// Belady's MIN, in bytes, over the blocks `plan` reads in its order.
int64_t MinimumBytes(const ReadPlan& plan, int64_t budget) {
  std::map<std::pair<int32_t, int64_t>, int> ids;
  std::vector<int> sequence;
  for (const PlannedRead& read : plan.reads) {
    for (int64_t b = read.offset / kBlock;
         b <= (read.offset + read.length - 1) / kBlock; ++b) {
      const int id =
          ids.emplace(std::pair(read.url, b), ids.size()).first->second;
      if (sequence.empty() || sequence.back() != id) sequence.push_back(id);
    }
  }
  return OfflineMinimumFetches(sequence, static_cast<size_t>(budget / kBlock)) *
         kBlock;
}

TEST_F(PlannedTarShardsTest,
       TheLoaderPlansEveryEpochAndTheCacheFetchesTheMinimumAndLessThanLru) {
  const std::vector<std::string> shards = WriteShards(8, 6);
  const int64_t budget = total_bytes_ / 2 / kBlock * kBlock;
  constexpr int kEpochs = 3;
  std::map<CachePolicy, int64_t> fetched;
  for (const CachePolicy policy : {CachePolicy::kBelady, CachePolicy::kLru}) {
    Job job = Open(shards, {.budget_bytes = budget, .policy = policy});
    ASSERT_NE(job.dataset, nullptr);
    {  // the loader reads ahead into the next epoch: stop it first
      absl::StatusOr<Loader> loader = LoaderBuilder(job.dataset)
                                          .batch_size(4)
                                          .num_workers(1)
                                          .device(Device::Host())
                                          .Build();
      ASSERT_TRUE(loader.ok()) << loader.status();
      for (int epoch = 0; epoch < kEpochs; ++epoch) {
        const auto drained = DrainEpoch(*loader, {.copy_fields = true});
        ASSERT_TRUE(drained.status.ok()) << drained.status;
        const std::vector<int64_t> labels = Labels(drained.batches);
        EXPECT_EQ(labels.size(), 48u) << "epoch " << epoch;
        EXPECT_EQ(std::set<int64_t>(labels.begin(), labels.end()).size(), 48u)
            << "epoch " << epoch << ": a sample twice";
      }
    }
    const CacheStats stats = job.cache->Stats();
    EXPECT_EQ(stats.bytes_fetched, job.remote->bytes());
    std::string by_epoch;
    for (const auto& [epoch, bytes] : stats.bytes_fetched_by_epoch) {
      absl::StrAppend(&by_epoch, " epoch ", epoch, ": ", bytes);
    }
    // No block fetched twice in an epoch: a tar stream has several reads
    // in flight, and a block one of them waited for was once evicted
    // before that reader copied it (Note [a block a reader waits for] in
    // cached_store.h; 1 run in 40 before the fix).
    EXPECT_EQ(stats.bytes_fetched_again, 0)
        << "a block fetched twice an epoch, policy "
        << (policy == CachePolicy::kLru ? "LRU" : "Belady") << "; fetched"
        << by_epoch << "; unplanned reads " << stats.unplanned_reads;
    EXPECT_LE(stats.peak_bytes, budget);
    // The bytes fetched for the planned epochs (the loader's read-ahead
    // into the next one is not the minimum's).
    for (const auto& [epoch, bytes] : stats.bytes_fetched_by_epoch) {
      if (epoch < kEpochs) fetched[policy] += bytes;
    }
  }
  // The offline minimum of the same three epochs, one stream.
  CountingStore sizes;
  TarShardOptions options;
  options.seed = 5;
  options.shuffle_shards = true;
  absl::StatusOr<ReadPlan> plan =
      PlanTarShards(shards, options, sizes, {.workers = 1},
                    {.first_epoch = 0, .epochs = kEpochs}, kBlock);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const int64_t minimum = MinimumBytes(*plan, budget);
  EXPECT_GT(minimum, total_bytes_);
  EXPECT_LE(fetched[CachePolicy::kBelady], minimum * 105 / 100)
      << "minimum " << minimum;
  EXPECT_LT(fetched[CachePolicy::kBelady], fetched[CachePolicy::kLru]);
}

TEST_F(PlannedTarShardsTest,
       TwoWorkersOverASmallCacheReadEverySampleOnceAnEpoch) {
  const std::vector<std::string> shards = WriteShards(8, 5);
  Job job = Open(shards, {.budget_bytes = total_bytes_ / 4 / kBlock * kBlock});
  ASSERT_NE(job.dataset, nullptr);
  absl::StatusOr<Loader> loader = LoaderBuilder(job.dataset)
                                      .batch_size(3)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {
    const auto drained = DrainEpoch(*loader, {.copy_fields = true});
    ASSERT_TRUE(drained.status.ok()) << drained.status;
    std::vector<int64_t> labels = Labels(drained.batches);
    std::sort(labels.begin(), labels.end());
    std::vector<int64_t> all(40);
    for (int64_t i = 0; i < 40; ++i) all[static_cast<size_t>(i)] = i;
    EXPECT_EQ(labels, all) << "epoch " << epoch;
  }
  EXPECT_EQ(job.cache->Stats().fetch_errors, 0);
}

TEST_F(PlannedTarShardsTest,
       AResumedJobWithTheSameDirectoryFetchesOnlyWhatItsCacheDidNotHold) {
  const std::vector<std::string> shards = WriteShards(6, 6);
  const CacheOptions on_disk{.budget_bytes = int64_t{64} << 20,
                             .directory = (dir_ / "cache").string()};
  std::vector<int64_t> before;
  std::optional<LoaderCheckpoint> checkpoint;
  {
    Job job = Open(shards, on_disk);
    ASSERT_NE(job.dataset, nullptr);
    absl::StatusOr<Loader> loader = LoaderBuilder(job.dataset)
                                        .batch_size(3)
                                        .num_workers(2)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    for (int b = 0; b < 4; ++b) {
      absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
      ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
      ASSERT_TRUE((*next)->WaitOnHost().ok());
      const HostBatch batch = testing_support::ToHost(**next, true);
      const std::vector<int64_t> labels = Labels({batch});
      before.insert(before.end(), labels.begin(), labels.end());
      ASSERT_TRUE((*next)->Release().ok());
    }
    absl::StatusOr<LoaderCheckpoint> saved = loader->Checkpoint();
    ASSERT_TRUE(saved.ok()) << saved.status();
    checkpoint = *saved;
  }  // the job ends here, its cache directory left as it is
  Job resumed = Open(shards, on_disk);
  ASSERT_NE(resumed.dataset, nullptr);
  const CacheStats warm = resumed.cache->Stats();
  EXPECT_GT(warm.warm_bytes, 0);
  absl::StatusOr<Loader> loader = LoaderBuilder(resumed.dataset)
                                      .batch_size(3)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .resume(*checkpoint)
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const auto rest = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  std::vector<int64_t> epoch0 = Labels(rest.batches);
  epoch0.insert(epoch0.end(), before.begin(), before.end());
  std::sort(epoch0.begin(), epoch0.end());
  std::vector<int64_t> all(36);
  for (int64_t i = 0; i < 36; ++i) all[static_cast<size_t>(i)] = i;
  EXPECT_EQ(epoch0, all) << "the resumed epoch lost or repeated a sample";
  const auto next_epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(next_epoch.status.ok()) << next_epoch.status;
  EXPECT_EQ(Labels(next_epoch.batches).size(), 36u);
  // Epoch 1 reads every block, and the budget holds them all: whatever the
  // cache held when the first job ended is never fetched again.
  EXPECT_EQ(resumed.remote->bytes(), total_bytes_ - warm.warm_bytes);
  EXPECT_EQ(resumed.cache->Stats().bytes_fetched_again, 0);
}

TEST_F(PlannedTarShardsTest, RefusesADatasetThatDoesNotReadThroughTheCache) {
  const std::vector<std::string> shards = WriteShards(1, 1);
  Job job = Open(shards, {});
  ASSERT_NE(job.dataset, nullptr);
  auto other = CachedStore::Open(std::make_shared<CountingStore>(), {});
  ASSERT_TRUE(other.ok());
  auto tars = std::static_pointer_cast<const TarShardDataset>(
      std::shared_ptr<const TarShardDataset>(job.dataset,
                                             &job.dataset->dataset()));
  EXPECT_THAT(PlannedTarShards::Create(tars, *other).status().message(),
              HasSubstr("does not read through this cache"));
  EXPECT_THAT(PlannedTarShards::Create(nullptr, *other).status().message(),
              HasSubstr("the dataset is null"));
  EXPECT_THAT(PlannedTarShards::Create(tars, nullptr).status().message(),
              HasSubstr("the cache is null"));
}

}  // namespace
}  // namespace pinwheel
