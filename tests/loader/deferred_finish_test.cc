// A SampleStream that leaves its samples' writing to a SampleFinish (Note [a
// streamed sample finished elsewhere] in loader/iterable_dataset.h): the
// batches are those of the same stream writing in Next(), idle workers run
// the finishes, a skipped sample's place is taken by the next one, and a
// failed finish is named like a failed read.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"

namespace pinwheel {
namespace {

using FinishResult = SampleStream::FinishResult;
using ::testing::HasSubstr;
using testing_support::DrainedEpoch;
using testing_support::DrainEpoch;
using testing_support::HostBatch;
using testing_support::ScriptedStreams;

// Every sample's identity (field "b" is index * 7 + 1), in delivery order.
std::vector<int64_t> IdsOf(const std::vector<HostBatch>& batches) {
  std::vector<int64_t> ids;
  for (const HostBatch& b : batches) {
    for (size_t p = 0; p < b.fields[1].size() / 8; ++p) {
      int64_t value;
      std::memcpy(&value, b.fields[1].data() + 8 * p, 8);
      ids.push_back((value - 1) / 7);
    }
  }
  return ids;
}

// Checks that each sample of `batches` holds all of PatternDataset's
// contents for the index it names (so compaction moved every field).
void ExpectWholeSamples(const std::vector<HostBatch>& batches) {
  const testing_support::PatternDataset pattern(1);
  for (const HostBatch& b : batches) {
    for (int64_t p = 0; p < b.size; ++p) {
      int64_t value;
      std::memcpy(&value, b.fields[1].data() + 8 * p, 8);
      const std::vector<std::vector<std::byte>> expected =
          pattern.Expected((value - 1) / 7);
      for (size_t f = 0; f < 3; ++f) {
        const size_t bytes = expected[f].size();
        ASSERT_EQ(std::memcmp(b.fields[f].data() + bytes * p,
                              expected[f].data(), bytes),
                  0)
            << "field " << f << " of sample " << p << " of batch " << b.index;
      }
    }
  }
}

absl::StatusOr<Loader> Build(std::shared_ptr<ScriptedStreams> streams,
                             int workers, int prefetch, int batch_size = 16) {
  return LoaderBuilder(std::static_pointer_cast<const IterableDataset>(streams))
      .batch_size(batch_size)
      .num_workers(workers)
      .prefetch(prefetch)
      .device(Device::Host())
      .Build();
}

TEST(DeferredFinish, BatchesAreThoseOfTheSameStreamsWritingInNext) {
  for (int workers : {0, 1, 3, 8}) {
    for (int prefetch : {1, 4}) {
      auto direct = ScriptedStreams::Strided(203);
      auto deferred = ScriptedStreams::Strided(203);
      deferred->set_deferred(
          [](int, int64_t) { return FinishResult::kWritten; });
      absl::StatusOr<Loader> a = Build(direct, workers, prefetch);
      absl::StatusOr<Loader> b = Build(deferred, workers, prefetch);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      for (int epoch = 0; epoch < 2; ++epoch) {
        const DrainedEpoch want = DrainEpoch(*a, {.copy_fields = true});
        const DrainedEpoch got = DrainEpoch(*b, {.copy_fields = true});
        ASSERT_TRUE(want.status.ok()) << want.status;
        ASSERT_TRUE(got.status.ok()) << got.status;
        ASSERT_EQ(got.batches.size(), want.batches.size());
        for (size_t i = 0; i < want.batches.size(); ++i) {
          EXPECT_EQ(got.batches[i].size, want.batches[i].size);
          EXPECT_EQ(got.batches[i].fields, want.batches[i].fields)
              << "batch " << i << ", workers " << workers << ", prefetch "
              << prefetch;
        }
        EXPECT_EQ(IdsOf(got.batches).size(), 203u);
      }
    }
  }
}

// One slot, so one batch is read at a time: the finishes of its samples
// still run on more than one thread. The first finish waits (up to 20 s)
// for a finish on another thread to begin; with no help it would wait out
// the 20 s and the check below fails.
TEST(DeferredFinish, WorkersWithoutASlotFinishTheBatchBeingRead) {
  auto streams = ScriptedStreams::EachShard(64);
  std::mutex mu;
  std::condition_variable helped;
  std::set<std::thread::id> threads;
  bool first = true;
  streams->set_deferred([&](int, int64_t) -> absl::StatusOr<FinishResult> {
    std::unique_lock<std::mutex> lock(mu);
    threads.insert(std::this_thread::get_id());
    helped.notify_all();
    if (first) {
      first = false;
      helped.wait_for(lock, std::chrono::seconds(20),
                      [&] { return threads.size() > 1; });
    }
    return FinishResult::kWritten;
  });
  // One shard (EachShard with one worker would be one reader anyway): 4
  // workers read 4 shards, but prefetch 1 lets one batch be in flight.
  absl::StatusOr<Loader> loader = Build(streams, 4, 1, /*batch_size=*/32);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
  ASSERT_TRUE(epoch.status.ok()) << epoch.status;
  EXPECT_EQ(IdsOf(epoch.batches).size(), 4u * 64u);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GT(threads.size(), 1u) << "every finish ran on one thread";
}

TEST(DeferredFinish, ASkippedSampleIsReplacedByTheNextSoBatchesStayFull) {
  auto streams = ScriptedStreams::Strided(100);
  streams->set_deferred([](int, int64_t index) {
    return index % 5 == 0 ? FinishResult::kSkipped : FinishResult::kWritten;
  });
  for (int workers : {0, 1}) {  // one shard: the samples in order
    absl::StatusOr<Loader> loader = Build(streams, workers, 2, 8);
    ASSERT_TRUE(loader.ok()) << loader.status();
    const DrainedEpoch epoch = DrainEpoch(*loader, {.copy_fields = true});
    ASSERT_TRUE(epoch.status.ok()) << epoch.status;
    std::vector<int64_t> want;
    for (int64_t i = 0; i < 100; ++i) {
      if (i % 5 != 0) want.push_back(i);
    }
    EXPECT_EQ(IdsOf(epoch.batches), want) << "workers " << workers;
    ASSERT_EQ(epoch.batches.size(), 10u);
    for (const HostBatch& b : epoch.batches) EXPECT_EQ(b.size, 8);
    ExpectWholeSamples(epoch.batches);
  }
}

TEST(DeferredFinish, ACheckpointAfterSkipsResumesWhereTheEpochWentOn) {
  auto streams = ScriptedStreams::Strided(120);
  streams->set_resumable(true);
  streams->set_deferred([](int, int64_t index) {
    return index % 7 == 3 ? FinishResult::kSkipped : FinishResult::kWritten;
  });
  auto build = [&](std::optional<LoaderCheckpoint> from) {
    LoaderBuilder builder(
        std::static_pointer_cast<const IterableDataset>(streams));
    builder.batch_size(6).num_workers(2).prefetch(1).device(Device::Host());
    if (from) builder.resume(*from);
    return builder.Build();
  };
  absl::StatusOr<Loader> straight = build(std::nullopt);
  ASSERT_TRUE(straight.ok()) << straight.status();
  const DrainedEpoch whole = DrainEpoch(*straight, {.copy_fields = true});
  ASSERT_TRUE(whole.status.ok()) << whole.status;
  const std::vector<int64_t> want = IdsOf(whole.batches);

  absl::StatusOr<Loader> first = build(std::nullopt);
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<HostBatch> before;
  for (int k = 0; k < 5; ++k) {
    absl::StatusOr<std::optional<DeviceBatch>> next = first->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    ASSERT_TRUE((*next)->WaitOnHost().ok());
    before.push_back(testing_support::ToHost(**next, true));
    ASSERT_TRUE((*next)->Release().ok());
  }
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<Loader> resumed = build(*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const DrainedEpoch rest = DrainEpoch(*resumed, {.copy_fields = true});
  ASSERT_TRUE(rest.status.ok()) << rest.status;
  std::vector<int64_t> got = IdsOf(before);
  const std::vector<int64_t> after = IdsOf(rest.batches);
  got.insert(got.end(), after.begin(), after.end());
  // The same batches in the same order (Note [exact resume]).
  EXPECT_EQ(got, want);
}

TEST(DeferredFinish, AFailedFinishStopsTheLoaderNamingShardAndSample) {
  auto streams = ScriptedStreams::Strided(64);
  streams->set_deferred([](int, int64_t index) -> absl::StatusOr<FinishResult> {
    if (index == 13) return absl::DataLossError("sample 13 is corrupt");
    return FinishResult::kWritten;
  });
  absl::StatusOr<Loader> loader = Build(streams, 1, 2, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  EXPECT_EQ(epoch.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(epoch.status.message(),
              HasSubstr("shard 0 failed at sample 5 of batch 1, epoch 0: "
                        "sample 13 is corrupt"));
  EXPECT_EQ(epoch.batches.size(), 1u);
}

TEST(DeferredFinish, AFinishThatThrowsIsNamed) {
  auto streams = ScriptedStreams::Strided(64);
  streams->set_deferred([](int, int64_t index) -> absl::StatusOr<FinishResult> {
    if (index == 2) throw std::runtime_error("decoder exploded");
    return FinishResult::kWritten;
  });
  absl::StatusOr<Loader> loader = Build(streams, 2, 1, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  EXPECT_EQ(epoch.status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(epoch.status.message(),
              HasSubstr("SampleFinish threw decoder exploded"));
}

// Sample 2's finish fails and the read of sample 5 fails too (the reader
// gets there before the finish has run): the batch names the first.
TEST(DeferredFinish, TheFirstFailureOfABatchIsTheOneNamed) {
  auto streams = ScriptedStreams::Strided(64);
  streams->set_next([](int, int64_t index) {
    return index == 5 ? absl::UnavailableError("read 5 failed")
                      : absl::OkStatus();
  });
  streams->set_deferred([](int, int64_t index) -> absl::StatusOr<FinishResult> {
    if (index == 2) return absl::DataLossError("finish 2 failed");
    return FinishResult::kWritten;
  });
  absl::StatusOr<Loader> loader = Build(streams, 1, 1, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const DrainedEpoch epoch = DrainEpoch(*loader);
  EXPECT_EQ(epoch.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(epoch.status.message(),
              HasSubstr("failed at sample 2 of batch 0, epoch 0: finish 2"));
}

// A loader destroyed while finishes run (each takes 2 ms) returns, having
// waited for the ones started: nothing writes a slot after it is freed
// (ASan and TSan run this suite).
TEST(DeferredFinish, ALoaderStoppedMidBatchWaitsForItsFinishes) {
  auto streams = ScriptedStreams::EachShard(400);
  streams->set_deferred([](int, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return FinishResult::kWritten;
  });
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<Loader> loader = Build(streams, 3, 2, 32);
    ASSERT_TRUE(loader.ok()) << loader.status();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status();
    ASSERT_TRUE((*next)->Release().ok());
  }
}

// Auto-tuned workers read and finish through the worker gate: the reader
// holds it while it reads, each finish while it runs.
TEST(DeferredFinish, AutoTunedWorkersDeliverEverySampleOnce) {
  auto streams = ScriptedStreams::Strided(203);
  streams->set_deferred([](int, int64_t) { return FinishResult::kWritten; });
  absl::StatusOr<Loader> loader =
      Build(streams, LoaderOptions::kAuto, LoaderOptions::kAuto, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  for (int epoch = 0; epoch < 3; ++epoch) {
    const DrainedEpoch drained = DrainEpoch(*loader, {.copy_fields = true});
    ASSERT_TRUE(drained.status.ok()) << drained.status;
    std::vector<int64_t> ids = IdsOf(drained.batches);
    std::sort(ids.begin(), ids.end());
    ASSERT_EQ(ids.size(), 203u);
    for (int64_t i = 0; i < 203; ++i) ASSERT_EQ(ids[i], i);
    ExpectWholeSamples(drained.batches);
  }
}

TEST(DeferredFinish, BuildDoesNotSayWorkersIdleWhenTheStreamsDefer) {
  auto streams = ScriptedStreams::Strided(64);
  streams->set_deferred([](int, int64_t) { return FinishResult::kWritten; });
  absl::StatusOr<Loader> loader = Build(streams, 4, 2, 8);
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_THAT(loader->stats().cpu_warning,
              ::testing::Not(HasSubstr("cannot all read at once")));
}

}  // namespace
}  // namespace pinwheel
