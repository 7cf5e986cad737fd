// num_workers / prefetch = kAuto (loader/pipeline/auto_tuner.h) on the host
// backend, under staged conditions: a dataset whose Read sleeps a set time
// and a consumer that sleeps a set step. Sleeps, not spins, so that the
// cases hold on a loaded 2-core machine: a sleeping read needs no CPU, and
// the figures asserted are counts (workers, slots, changes, order), never
// a speed. The tuner's thresholds are the shipped ones.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <sched.h>
#include <set>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/cpu_budget.h"
#include "loader/in_memory_dataset.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "loader/pipeline/auto_tune_policy.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::PatternDataset;
using testing_support::ScriptedStreams;

constexpr int kAuto = LoaderOptions::kAuto;

// A dataset of `size` samples whose every Read sleeps `per_read`.
std::shared_ptr<PatternDataset> SleepyDataset(int64_t size,
                                              absl::Duration per_read) {
  auto dataset = std::make_shared<PatternDataset>(size);
  dataset->set_hook([per_read](int64_t) {
    absl::SleepFor(per_read);
    return absl::OkStatus();
  });
  return dataset;
}

// What a consumer saw over a run of batches.
struct Consumed {
  std::vector<int64_t> indices;  // every sample, in delivery order
  absl::Duration waited;         // in Next()
  absl::Duration elapsed;
  int64_t batches = 0;
  int most_prefetch = 0;  // the deepest auto_tune.prefetch seen
  int most_workers = 0;   // the most auto_tune.workers seen
};

// Takes `batches` batches (across epochs), sleeping `step` after each.
// With `ids_in_field_b` the samples are named by their field "b" (i * 7 +
// 1: a ScriptedStreams sample has no dataset index), and the epoch's end
// ends the run.
Consumed Consume(Loader& loader, int64_t batches, absl::Duration step,
                 bool ids_in_field_b = false) {
  Consumed out;
  const absl::Time start = absl::Now();
  while (out.batches < batches) {
    const absl::Time asked = absl::Now();
    absl::StatusOr<std::optional<DeviceBatch>> next = loader.Next();
    EXPECT_TRUE(next.ok()) << next.status();
    if (!next.ok()) break;
    if (!next->has_value()) {     // an epoch's end
      if (ids_in_field_b) break;  // the iterable cases read one epoch
      continue;
    }
    out.waited += absl::Now() - asked;
    if (ids_in_field_b) {
      EXPECT_TRUE((*next)->WaitOnHost().ok());
      const testing_support::HostBatch host =
          testing_support::ToHost(**next, true);
      for (int64_t p = 0; p < host.size; ++p) {
        int64_t value;
        std::memcpy(&value, host.fields[1].data() + 8 * p, 8);
        out.indices.push_back((value - 1) / 7);
      }
    } else {
      const auto indices = (*next)->sample_indices();
      out.indices.insert(out.indices.end(), indices.begin(), indices.end());
    }
    EXPECT_TRUE((*next)->Release().ok());
    ++out.batches;
    const LoaderStats stats = loader.stats();
    out.most_prefetch = std::max(out.most_prefetch, stats.auto_tune.prefetch);
    out.most_workers = std::max(out.most_workers, stats.auto_tune.workers);
    if (step > absl::ZeroDuration()) absl::SleepFor(step);
  }
  out.elapsed = absl::Now() - start;
  return out;
}

// Reads 4 ms a batch on one thread (4 samples × 1 ms); the consumer's step
// of 1.5 ms needs about 3 workers reading, and 4 slots to read into.
LoaderBuilder StagedBuilder(std::shared_ptr<PatternDataset> dataset) {
  LoaderBuilder builder(std::move(dataset));
  builder.batch_size(4)
      .num_workers(kAuto)
      .prefetch(kAuto)
      .auto_tune(/*max_workers=*/6, /*max_pinned_bytes=*/0, /*log=*/true)
      .device(Device::Host());
  return builder;
}

TEST(AutoTune, GrowsWorkersAndSlotsUntilTheConsumerNoLongerWaits) {
  auto dataset = SleepyDataset(4000, absl::Milliseconds(1));
  absl::StatusOr<Loader> loader = StagedBuilder(dataset).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats before = loader->stats();
  EXPECT_TRUE(before.auto_tune.workers_auto);
  EXPECT_TRUE(before.auto_tune.prefetch_auto);
  EXPECT_EQ(before.auto_tune.workers, 1);
  EXPECT_EQ(before.auto_tune.prefetch, 2);
  EXPECT_EQ(before.auto_tune.max_workers, 6);
  EXPECT_EQ(before.num_workers, 6);  // the threads started

  const Consumed growing = Consume(*loader, 300, absl::Microseconds(1500));
  const LoaderStats grown = loader->stats();
  // One worker reads a batch in 4 ms; the step is 1.5 ms slept, 3-3.5 ms
  // as run under ThreadSanitizer: more than one worker, and the slots to
  // read into (it started at 1 and 2), whatever the host's speed.
  EXPECT_GE(grown.auto_tune.workers, 2) << grown.auto_tune.last_reason;
  EXPECT_GE(growing.most_prefetch, 3) << grown.auto_tune.last_reason;
  EXPECT_GE(grown.auto_tune.changes, 2);
  EXPECT_THAT(grown.auto_tune.last_reason, HasSubstr("at batch"));
  EXPECT_THAT(grown.auto_tune.last_reason, HasSubstr("Next() waited"));

  // Settled: the consumer hardly waits, and the tuner stays put. The
  // oscillation bound: a tuner that flapped would change every 24 batches
  // (8 times in 200); a failed shrink or grow costs two changes and leaves a
  // floor or ceiling, so a loaded host that shifts the reads' time allows a
  // few, not more.
  const Consumed settled = Consume(*loader, 200, absl::Microseconds(1500));
  const LoaderStats after = loader->stats();
  EXPECT_LT(absl::FDivDuration(settled.waited, settled.elapsed), 0.2)
      << "waited " << settled.waited << " of " << settled.elapsed << "; "
      << after.auto_tune.last_reason;
  EXPECT_LE(after.auto_tune.changes - grown.auto_tune.changes, 4)
      << after.auto_tune.last_reason;
  EXPECT_LE(after.auto_tune.changes, 10);
  // Pinned bytes follow the depth, never the ceiling (64 slots here).
  absl::StatusOr<size_t> slot =
      LoaderBuilder(dataset).batch_size(4).device_buffer_bytes();
  ASSERT_TRUE(slot.ok()) << slot.status();
  const size_t stride = (*slot + 4095) / 4096 * 4096;
  EXPECT_EQ(after.auto_tune.max_prefetch, 64);
  const int most = std::max(growing.most_prefetch, settled.most_prefetch);
  EXPECT_LE(after.ring.bytes_pinned_peak, most * stride);
  EXPECT_LE(after.pinned_bytes, most * stride);
  EXPECT_EQ(after.ring.depth, after.auto_tune.prefetch);
}

TEST(AutoTune, ShrinksWhenTheConsumerSlows) {
  auto dataset = SleepyDataset(4000, absl::Milliseconds(1));
  absl::StatusOr<Loader> loader = StagedBuilder(dataset).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  Consume(*loader, 300, absl::Microseconds(1500));
  const LoaderStats fast = loader->stats();
  ASSERT_GE(fast.auto_tune.workers, 2) << fast.auto_tune.last_reason;
  // A step of 20 ms needs a fifth of one worker: after four windows of no
  // wait the tuner lets the extra threads go.
  Consume(*loader, 160, absl::Milliseconds(20));
  const LoaderStats slow = loader->stats();
  EXPECT_LT(slow.auto_tune.workers, fast.auto_tune.workers)
      << slow.auto_tune.last_reason;
  EXPECT_LE(slow.auto_tune.workers, 2) << slow.auto_tune.last_reason;
  EXPECT_THAT(slow.auto_tune.last_reason, HasSubstr("no wait"));
  EXPECT_LE(slow.auto_tune.changes, 10);
}

TEST(AutoTune, NeverExceedsItsWorkersOrPinnedBytes) {
  // A consumer with no step wants all it can get: the tuner climbs to the
  // bounds and no further.
  auto dataset = SleepyDataset(4000, absl::Microseconds(500));
  LoaderBuilder builder(dataset);
  absl::StatusOr<size_t> slot = builder.batch_size(4).device_buffer_bytes();
  ASSERT_TRUE(slot.ok()) << slot.status();
  const size_t stride = (*slot + 4095) / 4096 * 4096;
  absl::StatusOr<Loader> loader =
      builder.num_workers(kAuto)
          .prefetch(kAuto)
          .auto_tune(/*max_workers=*/3, /*max_pinned_bytes=*/3 * stride + 100)
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->stats().auto_tune.max_prefetch, 3);
  const Consumed run = Consume(*loader, 300, absl::ZeroDuration());
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(run.most_workers, 3) << stats.auto_tune.last_reason;
  EXPECT_LE(stats.auto_tune.workers, 3);
  EXPECT_LE(run.most_prefetch, 3);
  EXPECT_LE(stats.ring.bytes_pinned_peak, 3 * stride);
  EXPECT_LE(stats.pinned_bytes, 3 * stride);
  // At the bound the consumer still waits, so the tuner may probe fewer
  // workers, and whether 2 feed as well as 3 is a matter of speed: under
  // ThreadSanitizer on the 2-core CI host this consumer's "step" (its own
  // loop) swung from 0.4 to 1.8 ms between windows and 2 workers sometimes
  // kept up (CI, 2026-11-28); with the CI's build running beside it, the
  // step doubled twice in a row and floors learnt were forgotten, 12
  // changes in one run of six. So this case asserts the bounds, and of the
  // changes only what the windows guarantee whatever the speed: at most one
  // a window and its settle. The tight bound on changes is
  // AutoTunePolicyClosedLoop's, timing-free.
  const internal::AutoTuneRules rules;
  EXPECT_LE(stats.auto_tune.changes,
            300 / (rules.window_batches + rules.settle_batches))
      << stats.auto_tune.last_reason;
}

TEST(AutoTune, TakesItsMostWorkersFromTheCpuSet) {
  // Narrow this thread (Build() reads its mask) to one CPU: one fewer than
  // the CPUs, at least 1, is what kNumWorkersFromCpus would start.
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof(saved), &saved), 0);
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(std::make_shared<PatternDataset>(100))
          .batch_size(4)
          .num_workers(kAuto)
          .device(Device::Host())
          .Build();
  sched_setaffinity(0, sizeof(saved), &saved);
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.auto_tune.max_workers, WorkersFromCpus(stats.cpu_budget));
  EXPECT_EQ(stats.auto_tune.max_workers, 1);
  EXPECT_TRUE(stats.cpu_warning.empty()) << stats.cpu_warning;
  EXPECT_FALSE(stats.auto_tune.prefetch_auto);  // prefetch left at 4
  EXPECT_EQ(stats.auto_tune.prefetch, 4);
}

TEST(AutoTune, DeliversTheOrderOfFixedWorkersExactlyOnceWhileItChanges) {
  auto dataset = SleepyDataset(600, absl::Microseconds(300));
  std::vector<int64_t> fixed;
  {
    absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                        .batch_size(4)
                                        .shuffle(5)
                                        .num_workers(1)
                                        .device(Device::Host())
                                        .Build();
    ASSERT_TRUE(loader.ok()) << loader.status();
    fixed = Consume(*loader, 300, absl::ZeroDuration()).indices;  // 2 epochs
  }
  absl::StatusOr<Loader> loader = StagedBuilder(dataset).shuffle(5).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const Consumed tuned = Consume(*loader, 300, absl::ZeroDuration());
  EXPECT_GE(loader->stats().auto_tune.changes, 1);  // it did change meanwhile
  EXPECT_EQ(tuned.indices, fixed);
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::multiset<int64_t> seen(tuned.indices.begin() + epoch * 600,
                                tuned.indices.begin() + (epoch + 1) * 600);
    for (int64_t i = 0; i < 600; ++i) ASSERT_EQ(seen.count(i), 1u) << i;
  }
}

// Samples of 64 KB, so that a batch of 16 is read in 4 chunks of 4 (a
// chunk is 256 KB): under auto, lanes that hold the gate claim them (Note
// [gated reads claim chunks inside the gate] in pipeline/batch_filler.cc).
// Each Read sleeps, writes its index into the sample's first 8 bytes and
// its low byte everywhere else, and counts itself and the reads at once.
class LargeSampleDataset : public Dataset {
 public:
  static constexpr int64_t kBytes = 64 << 10;
  explicit LargeSampleDataset(int64_t size) : size_(size), reads_(size) {
    layout_ = *SampleLayout::Create(
        {{.name = "x", .dtype = DType::kUInt8, .shape = {kBytes}}});
  }
  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    const int now = in_flight_.fetch_add(1) + 1;
    int most = most_in_flight_.load();
    while (now > most && !most_in_flight_.compare_exchange_weak(most, now)) {
    }
    reads_[index].fetch_add(1);
    absl::SleepFor(absl::Microseconds(200));
    absl::Span<std::byte> bytes = out.field(0);
    std::memset(bytes.data(), static_cast<int>(index & 0xff), bytes.size());
    std::memcpy(bytes.data(), &index, sizeof index);
    in_flight_.fetch_sub(1);
    return absl::OkStatus();
  }
  int most_in_flight() const { return most_in_flight_.load(); }
  int reads(int64_t index) const { return reads_[index].load(); }

 private:
  int64_t size_;
  SampleLayout layout_;
  mutable std::atomic<int> in_flight_{0};
  mutable std::atomic<int> most_in_flight_{0};
  mutable std::vector<std::atomic<int>> reads_;
};

// Reads two epochs of `loader` (DrainEpoch), checking every sample's bytes
// against its index; returns the indices in delivery order.
std::vector<int64_t> DrainTwoEpochsChecked(Loader& loader) {
  constexpr int64_t kBytes = LargeSampleDataset::kBytes;
  std::vector<int64_t> order;
  for (int epoch = 0; epoch < 2; ++epoch) {
    const testing_support::DrainedEpoch drained =
        testing_support::DrainEpoch(loader, {.copy_fields = true});
    EXPECT_TRUE(drained.status.ok()) << drained.status;
    for (const testing_support::HostBatch& host : drained.batches) {
      for (int64_t p = 0; p < host.size; ++p) {
        const std::byte* sample = host.fields[0].data() + p * kBytes;
        int64_t written;
        std::memcpy(&written, sample, sizeof written);
        EXPECT_EQ(written, host.indices[p]) << "sample " << p;
        EXPECT_EQ(sample[kBytes - 1], std::byte(host.indices[p] & 0xff));
      }
    }
    const std::vector<int64_t> indices = drained.indices();
    order.insert(order.end(), indices.begin(), indices.end());
  }
  return order;
}

TEST(AutoTune, ReadsChunkedBatchesExactlyOnceInTheOrderOfFixedWorkers) {
  auto fixed_data = std::make_shared<LargeSampleDataset>(320);
  absl::StatusOr<Loader> fixed = LoaderBuilder(fixed_data)
                                     .batch_size(16)
                                     .shuffle(3)
                                     .num_workers(1)
                                     .device(Device::Host())
                                     .Build();
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  const std::vector<int64_t> expected = DrainTwoEpochsChecked(*fixed);

  auto dataset = std::make_shared<LargeSampleDataset>(320);
  absl::StatusOr<Loader> loader =
      LoaderBuilder(dataset)
          .batch_size(16)
          .shuffle(3)
          .num_workers(kAuto)
          .prefetch(kAuto)
          .auto_tune(/*max_workers=*/3, /*max_pinned_bytes=*/0, /*log=*/false)
          .device(Device::Host())
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const std::vector<int64_t> order = DrainTwoEpochsChecked(*loader);
  EXPECT_EQ(order, expected);
  ASSERT_EQ(order.size(), 640u);
  for (int epoch = 0; epoch < 2; ++epoch) {
    const std::set<int64_t> seen(order.begin() + epoch * 320,
                                 order.begin() + (epoch + 1) * 320);
    EXPECT_EQ(seen.size(), 320u) << "epoch " << epoch;
  }
  // Read once an epoch: twice, or three times where the ring read ahead
  // into a third epoch; a chunk read by two lanes would show more.
  for (int64_t i = 0; i < 320; ++i) {
    EXPECT_GE(dataset->reads(i), 2) << i;
    EXPECT_LE(dataset->reads(i), 3) << i;
  }
  EXPECT_LE(dataset->most_in_flight(), 3);
}

TEST(AutoTune, ResumesFromACheckpointExactly) {
  auto dataset = SleepyDataset(600, absl::Microseconds(300));
  absl::StatusOr<Loader> whole = StagedBuilder(dataset).shuffle(9).Build();
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<int64_t> expected =
      Consume(*whole, 220, absl::ZeroDuration()).indices;

  absl::StatusOr<Loader> first = StagedBuilder(dataset).shuffle(9).Build();
  ASSERT_TRUE(first.ok()) << first.status();
  std::vector<int64_t> got = Consume(*first, 170, absl::ZeroDuration()).indices;
  EXPECT_GE(first->stats().auto_tune.changes, 1);
  absl::StatusOr<LoaderCheckpoint> checkpoint = first->Checkpoint();
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  first->Shutdown();
  absl::StatusOr<Loader> second =
      StagedBuilder(dataset).shuffle(9).resume(*checkpoint).Build();
  ASSERT_TRUE(second.ok()) << second.status();
  const std::vector<int64_t> rest =
      Consume(*second, 50, absl::ZeroDuration()).indices;
  got.insert(got.end(), rest.begin(), rest.end());
  EXPECT_EQ(got, expected);
}

// Returns the sample ids of an iterable run of `batches` batches, and in
// `taken` (when given) its checkpoint after them.
std::vector<int64_t> IterableRun(std::shared_ptr<ScriptedStreams> dataset,
                                 int workers, int64_t batches,
                                 std::optional<LoaderCheckpoint> resume,
                                 std::optional<LoaderCheckpoint>* taken) {
  LoaderBuilder builder(dataset);
  builder.batch_size(4).num_workers(workers).device(Device::Host());
  if (workers == kAuto) builder.prefetch(kAuto).auto_tune(4, 0, false);
  if (resume) builder.resume(*resume);
  absl::StatusOr<Loader> loader = builder.Build();
  EXPECT_TRUE(loader.ok()) << loader.status();
  if (!loader.ok()) return {};
  std::vector<int64_t> ids =
      Consume(*loader, batches, absl::ZeroDuration(), true).indices;
  if (taken != nullptr) {
    absl::StatusOr<LoaderCheckpoint> c = loader->Checkpoint();
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) *taken = *c;
  }
  return ids;
}

TEST(AutoTune, AnIterableDatasetKeepsTheShardsOfItsMostWorkers) {
  // Streams are bound to shards, fixed at Build() for the most workers (4
  // here): the tuner changes how many threads read them, never the split,
  // so the order is that of num_workers = 4, and a checkpoint (of 4 shards,
  // resumable by a loader of 4 workers or kAuto with 4 at most) resumes.
  auto dataset = ScriptedStreams::Strided(503);
  dataset->set_resumable(true);
  dataset->set_next([](int, int64_t) {
    absl::SleepFor(absl::Microseconds(200));
    return absl::OkStatus();
  });
  const std::vector<int64_t> fixed =
      IterableRun(dataset, 4, 1000, {}, nullptr);  // one whole epoch
  ASSERT_EQ(fixed.size(), 503u);
  const std::vector<int64_t> tuned =
      IterableRun(dataset, kAuto, 1000, {}, nullptr);
  EXPECT_EQ(tuned, fixed);
  std::optional<LoaderCheckpoint> checkpoint;
  std::vector<int64_t> resumed =
      IterableRun(dataset, kAuto, 70, {}, &checkpoint);
  ASSERT_TRUE(checkpoint.has_value());
  EXPECT_EQ(checkpoint->num_shards, 4);
  const std::vector<int64_t> rest =
      IterableRun(dataset, kAuto, 1000, checkpoint, nullptr);
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  // Exactly the same samples in the same order: the shards go on in their
  // turn (Note [exact resume]).
  EXPECT_EQ(resumed, fixed);
}

TEST(AutoTune, ChangesNothingOnTheGatherPath) {
  absl::StatusOr<std::shared_ptr<InMemoryDataset>> dataset =
      InMemoryDataset::CreateOwning(
          *SampleLayout::Create({{"x", DType::kFloat32, {8}}}), 64,
          {std::vector<std::byte>(64 * 8 * 4)});
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<Loader> loader = LoaderBuilder(*dataset)
                                      .batch_size(4)
                                      .num_workers(kAuto)
                                      .prefetch(kAuto)
                                      .gather(GatherMode::kOn)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  Consume(*loader, 40, absl::ZeroDuration());
  const LoaderStats stats = loader->stats();
  EXPECT_TRUE(stats.gather);
  EXPECT_FALSE(stats.auto_tune.workers_auto);
  EXPECT_FALSE(stats.auto_tune.prefetch_auto);
  EXPECT_THAT(stats.auto_tune.off_reason, HasSubstr("gather path"));
  EXPECT_EQ(stats.auto_tune.changes, 0);
}

TEST(AutoTune, RefusesBoundsOutOfRangeNamingTheOption) {
  auto dataset = std::make_shared<PatternDataset>(100);
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .num_workers(kAuto)
                                      .auto_tune(300)
                                      .device(Device::Host())
                                      .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(), HasSubstr("'auto_max_workers' = 300"));
  loader = LoaderBuilder(dataset)
               .prefetch(kAuto)
               .auto_tune(0, /*max_pinned_bytes=*/10)
               .device(Device::Host())
               .Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'auto_max_pinned_bytes' = 10: must hold at least one "
                        "slot"));
  loader = LoaderBuilder(dataset).prefetch(-5).device(Device::Host()).Build();
  ASSERT_FALSE(loader.ok());
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'prefetch' = -5: must be in 1..1024, or kAuto (-2)"));
}

}  // namespace
}  // namespace pinwheel
