// Dataset::StartEpoch and IterableDataset::StartEpoch: the loader tells a
// dataset, before an epoch's reads, the order (map-style) or the shards
// (iterable) this process reads and the checkpoint it resumes from; what
// StartEpoch returns or throws stops the loader naming the epoch.
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/loader_builder.h"
#include "pinning/base/mutex.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using ::pinwheel::testing_support::DrainEpoch;
using ::pinwheel::testing_support::PatternDataset;
using ::pinwheel::testing_support::ScriptedStreams;
using ::testing::HasSubstr;

// What one StartEpoch() call was told, and the reads made before it.
struct Call {
  int64_t epoch = 0;
  int rank = 0;
  int world_size = 0;
  int64_t batch_size = 0;                  // map-style
  bool shuffle = false;                    // map-style
  uint64_t seed = 0;                       // map-style
  bool default_sampler = false;            // map-style
  int shards_per_rank = 0;                 // iterable
  std::optional<int64_t> resume_position;  // map-style: the checkpoint's
  bool resumed = false;
  int64_t reads_before = 0;
};

// Records its StartEpoch() calls; `fail` makes them fail (or throw).
class Calls {
 public:
  void Add(Call call) {
    internal::MutexLock lock(&mu_);
    calls_.push_back(std::move(call));
  }
  std::vector<Call> Get() const {
    internal::MutexLock lock(&mu_);
    return calls_;
  }
  enum class Fail { kNo, kStatus, kThrow };
  Fail fail = Fail::kNo;
  absl::Status Answer() const {
    if (fail == Fail::kThrow) throw std::runtime_error("no plan today");
    if (fail == Fail::kStatus) return absl::UnavailableError("store is down");
    return absl::OkStatus();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Call> calls_;
};

class RecordingDataset final : public PatternDataset {
 public:
  explicit RecordingDataset(int64_t size) : PatternDataset(size) {}
  absl::Status StartEpoch(const EpochSampling& s) const override {
    calls.Add({.epoch = s.epoch,
               .rank = s.rank,
               .world_size = s.world_size,
               .batch_size = s.batch_size,
               .shuffle = s.shuffle,
               .seed = s.seed,
               .default_sampler = s.default_sampler,
               .resume_position = s.resume != nullptr
                                      ? std::optional(s.resume->position)
                                      : std::nullopt,
               .resumed = s.resume != nullptr,
               .reads_before = reads()});
    return calls.Answer();
  }
  mutable Calls calls;
};

class RecordingStreams final : public IterableDataset {
 public:
  RecordingStreams() : streams_(ScriptedStreams::Strided(60)) {}
  const SampleLayout& layout() const override { return streams_->layout(); }
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const override {
    return streams_->OpenShard(shard, num_shards, epoch);
  }
  absl::Status StartEpoch(const EpochShare& s) const override {
    calls.Add({.epoch = s.epoch,
               .rank = s.rank,
               .world_size = s.world_size,
               .shards_per_rank = s.shards_per_rank,
               .resumed = s.resume != nullptr,
               .reads_before = streams_->opens()});
    return calls.Answer();
  }
  mutable Calls calls;

 private:
  std::shared_ptr<ScriptedStreams> streams_;
};

TEST(StartEpoch, AMapStyleDatasetIsToldEachEpochsSamplingBeforeItsReads) {
  auto dataset = std::make_shared<RecordingDataset>(40);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .shuffle(5)
                                      .distributed(1, 2)
                                      .num_workers(2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 2; ++epoch) {
    ASSERT_TRUE(DrainEpoch(*loader).status.ok());
  }
  const std::vector<Call> calls = dataset->calls.Get();
  ASSERT_GE(calls.size(), 2u);
  for (size_t e = 0; e < calls.size(); ++e) {
    EXPECT_EQ(calls[e].epoch, static_cast<int64_t>(e));
    EXPECT_EQ(calls[e].rank, 1);
    EXPECT_EQ(calls[e].world_size, 2);
    EXPECT_EQ(calls[e].batch_size, 4);
    EXPECT_TRUE(calls[e].shuffle && calls[e].default_sampler);
    EXPECT_EQ(calls[e].seed, 5u);
    EXPECT_FALSE(calls[e].resumed);
  }
  EXPECT_EQ(calls[0].reads_before, 0);
  EXPECT_GE(calls[1].reads_before, 20);  // epoch 0's share: 20 samples
}

TEST(StartEpoch, AResumedLoaderTellsTheCheckpointOnItsFirstEpochOnly) {
  auto first = std::make_shared<RecordingDataset>(40);
  absl::StatusOr<Loader> loader = LoaderBuilder(first)
                                      .batch_size(4)
                                      .shuffle(5)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int b = 0; b < 3; ++b) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value());
    ASSERT_TRUE((*batch)->Release().ok());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = loader->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto second = std::make_shared<RecordingDataset>(40);
  absl::StatusOr<Loader> resumed = LoaderBuilder(second)
                                       .batch_size(4)
                                       .shuffle(5)
                                       .device(Device::Host())
                                       .resume(*checkpoint)
                                       .Build();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_TRUE(DrainEpoch(*resumed).status.ok());
  ASSERT_TRUE(DrainEpoch(*resumed).status.ok());
  const std::vector<Call> calls = second->calls.Get();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_TRUE(calls[0].resumed);
  EXPECT_EQ(calls[0].resume_position, 12);  // 3 batches of 4
  EXPECT_FALSE(calls[1].resumed);
}

TEST(StartEpoch, AnIterableDatasetIsToldItsShardsBeforeTheyOpen) {
  auto dataset = std::make_shared<RecordingStreams>();
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(3)
                                      .distributed(0, 2)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE(DrainEpoch(*loader).status.ok());
  const std::vector<Call> calls = dataset->calls.Get();
  ASSERT_GE(calls.size(), 1u);
  EXPECT_EQ(calls[0].epoch, 0);
  EXPECT_EQ(calls[0].rank, 0);
  EXPECT_EQ(calls[0].world_size, 2);
  EXPECT_EQ(calls[0].shards_per_rank, 3);
  EXPECT_EQ(calls[0].reads_before, 0);  // no shard opened yet
  EXPECT_FALSE(calls[0].resumed);
}

TEST(StartEpoch, AnErrorOrAThrowStopsTheLoaderNamingTheEpoch) {
  for (const Calls::Fail fail : {Calls::Fail::kStatus, Calls::Fail::kThrow}) {
    const char* said =
        fail == Calls::Fail::kStatus ? "store is down" : "no plan today";
    for (const int workers : {0, 2}) {  // read inline, and by workers
      auto map_style = std::make_shared<RecordingDataset>(8);
      map_style->calls.fail = fail;
      absl::StatusOr<Loader> a = LoaderBuilder(map_style)
                                     .batch_size(4)
                                     .num_workers(workers)
                                     .device(Device::Host())
                                     .Build();
      ASSERT_TRUE(a.ok()) << a.status();
      const absl::Status status = DrainEpoch(*a).status;
      EXPECT_THAT(status.message(),
                  HasSubstr("starting epoch 0 of the dataset"))
          << status << " with " << workers << " workers";
      EXPECT_THAT(status.message(), HasSubstr(said)) << status;
      EXPECT_EQ(map_style->reads(), 0);
    }

    auto iterable = std::make_shared<RecordingStreams>();
    iterable->calls.fail = fail;
    absl::StatusOr<Loader> b =
        LoaderBuilder(iterable).batch_size(4).device(Device::Host()).Build();
    ASSERT_TRUE(b.ok()) << b.status();
    const absl::Status status = DrainEpoch(*b).status;
    EXPECT_THAT(status.message(), HasSubstr("starting epoch 0 of the dataset"))
        << status;
    EXPECT_THAT(status.message(), HasSubstr(said)) << status;
  }
}

}  // namespace
}  // namespace pinwheel
