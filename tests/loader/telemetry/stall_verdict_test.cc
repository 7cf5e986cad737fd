// StallVerdictOf (loader/telemetry/stall_verdict.h) on five stalls staged
// on the host backend (slow reads, too few workers, a slow consumer, the
// consumer's own GPU work holding its device buffers, a narrowed CPU set),
// each naming its stage and cause; LoaderStats::latency
// filled by the pipeline; and the verdicts only figures can give (too few
// batches, a slow copy). A suite of its own: oneTBB threads started while
// the mask is narrowed keep it.
#include "loader/telemetry/stall_verdict.h"

#include <cstdio>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/behind_own_step.h"
#include "tests/support/one_cpu.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::OneCpu;
using testing_support::PatternDataset;
using testing_support::RunBehindOwnStep;
using Bound = StallVerdict::Bound;
using Cause = StallVerdict::Cause;

void Spin(absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
  }
}

struct Stall {
  int workers = 1;
  absl::Duration sleep_per_read = absl::ZeroDuration();
  absl::Duration spin_per_read = absl::ZeroDuration();
  absl::Duration step = absl::ZeroDuration();  // the consumer's, slept
};

// Reads 40 batches of 4 samples under `stall`; returns the stats.
LoaderStats RunStalled(const Stall& stall) {
  auto dataset = std::make_shared<PatternDataset>(160);
  dataset->set_hook([stall](int64_t) {
    if (stall.sleep_per_read > absl::ZeroDuration()) {
      absl::SleepFor(stall.sleep_per_read);
    }
    if (stall.spin_per_read > absl::ZeroDuration()) Spin(stall.spin_per_read);
    return absl::OkStatus();
  });
  absl::StatusOr<Loader> loader = LoaderBuilder(dataset)
                                      .batch_size(4)
                                      .num_workers(stall.workers)
                                      .prefetch(4)
                                      .warn_cpu_oversubscription(false)
                                      .device(Device::Host())
                                      .Build();
  EXPECT_TRUE(loader.ok()) << loader.status();
  if (!loader.ok()) return LoaderStats();
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader->Next();
    EXPECT_TRUE(batch.ok() && batch->has_value()) << i;
    if (!batch.ok() || !batch->has_value()) break;
    if (stall.step > absl::ZeroDuration()) absl::SleepFor(stall.step);
    EXPECT_TRUE((*batch)->Release().ok());
  }
  return loader->stats();
}

TEST(StallVerdict, SlowReadsAreNamedWhenKeepingUpNeedsMoreWorkersThanCpus) {
  OneCpu one_cpu;
  if (!one_cpu.narrowed()) GTEST_SKIP() << "cannot narrow the affinity mask";
  // 4 x 3 ms a batch on its one worker against a 1 ms step: 12+ workers.
  const LoaderStats stats = RunStalled({.workers = 1,
                                        .sleep_per_read = absl::Milliseconds(3),
                                        .step = absl::Milliseconds(1)});
  const StallVerdict verdict = StallVerdictOf(stats);
  std::printf("%s\n", verdict.line.c_str());
  EXPECT_EQ(verdict.bound, Bound::kReads) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kSlowReads) << verdict.line;
  EXPECT_GT(verdict.workers_needed, 1) << verdict.line;
  EXPECT_THAT(verdict.line, HasSubstr("reads: p50 "));
  EXPECT_THAT(verdict.line, HasSubstr("make Read faster"));
}

TEST(StallVerdict, TooFewWorkersAreNamedWithTheWorkersThatWouldKeepUp) {
  if (ReadCpuBudget().cpus < 2) GTEST_SKIP() << "needs 2 CPUs";
  // 4 x 2 ms a batch on one worker against a 5 ms step: 2 workers keep up.
  const LoaderStats stats = RunStalled({.workers = 1,
                                        .sleep_per_read = absl::Milliseconds(2),
                                        .step = absl::Milliseconds(5)});
  const StallVerdict verdict = StallVerdictOf(stats);
  std::printf("%s\n", verdict.line.c_str());
  EXPECT_EQ(verdict.bound, Bound::kReads) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kTooFewWorkers) << verdict.line;
  EXPECT_EQ(verdict.workers_needed, 2) << verdict.line;
  EXPECT_THAT(verdict.line, HasSubstr("2 workers would keep up"));
}

TEST(StallVerdict, ASlowConsumerIsNamedAndTheLoaderSaidToKeepUp) {
  // Fast reads, a 5 ms step: Next() finds each batch ready.
  const LoaderStats stats =
      RunStalled({.workers = 2, .step = absl::Milliseconds(5)});
  const StallVerdict verdict = StallVerdictOf(stats);
  std::printf("%s\n", verdict.line.c_str());
  EXPECT_EQ(verdict.bound, Bound::kConsumer) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kSlowConsumer) << verdict.line;
  EXPECT_EQ(verdict.stage(), "consumer");
  EXPECT_THAT(verdict.line, HasSubstr("the loader keeps up"));
}

TEST(StallVerdict, AWaitBehindTheConsumersOwnGpuWorkIsNotTheLoaders) {
  // One device buffer, released behind a 20 ms "step" on the consumer's
  // stream (its GPU work): Next() waits nearly all the time, but for that
  // work, not for data (Note [reading a verdict]).
  const absl::StatusOr<LoaderStats> stats =
      RunBehindOwnStep(12, absl::Milliseconds(20));
  ASSERT_TRUE(stats.ok()) << stats.status();
  const StallVerdict verdict = StallVerdictOf(*stats);
  std::printf("%s\n", verdict.line.c_str());
  EXPECT_EQ(verdict.bound, Bound::kConsumer) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kConsumerGpu) << verdict.line;
  EXPECT_THAT(verdict.line, HasSubstr("behind the device buffers its own GPU "
                                      "work still holds"));
}

TEST(StallVerdict, ANarrowedCpuSetIsNamedWhenWorkersOutnumberTheCpus) {
  OneCpu one_cpu;
  if (!one_cpu.narrowed()) GTEST_SKIP() << "cannot narrow the affinity mask";
  // 3 workers computing 1 ms a read on one CPU, a consumer that waits.
  const LoaderStats stats =
      RunStalled({.workers = 3, .spin_per_read = absl::Milliseconds(1)});
  ASSERT_EQ(stats.cpu_budget.cpus, 1);
  const StallVerdict verdict = StallVerdictOf(stats);
  std::printf("%s\n", verdict.line.c_str());
  EXPECT_EQ(verdict.bound, Bound::kReads) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kNarrowCpuSet) << verdict.line;
  EXPECT_THAT(verdict.line, HasSubstr("3 workers share 1 CPU (set by the "
                                      "affinity mask): give the process 4 "
                                      "CPUs"));
}

TEST(StallVerdict, ThePipelineTimesEveryStageOfEachBatch) {
  const LoaderStats stats =
      RunStalled({.workers = 2,
                  .sleep_per_read = absl::Microseconds(200),
                  .step = absl::Milliseconds(1)});
  const StageLatencies& l = stats.latency;
  EXPECT_EQ(l.consumer_wait.total.count, 40);
  EXPECT_EQ(l.data_wait.total.count, 40);
  EXPECT_LE(l.data_wait.total.sum, l.consumer_wait.total.sum);
  EXPECT_EQ(l.ready_wait.total.count, 40);
  EXPECT_EQ(l.copy.total.count, 40);
  EXPECT_EQ(l.step.total.count, 39);  // between the 40 Next() calls
  // Workers read ahead: at least the 40 delivered, at most the ring more.
  EXPECT_GE(l.read.total.count, 40);
  EXPECT_GE(l.slot_wait.total.count, 40);
  EXPECT_GE(l.read.recent.p50, absl::Microseconds(800));  // 4 x 200 us
  EXPECT_GE(l.step.recent.p50, absl::Milliseconds(1));
  EXPECT_EQ(l.step.recent.count, 39);
}

TEST(StallVerdict, FewerBatchesThanTheMinimumGiveNoVerdict) {
  LoaderStats stats;
  stats.latency.consumer_wait.recent.count = kVerdictMinBatches - 1;
  const StallVerdict verdict = StallVerdictOf(stats);
  EXPECT_EQ(verdict.bound, Bound::kUnknown);
  EXPECT_EQ(verdict.stage(), "unknown");
  EXPECT_THAT(verdict.line, HasSubstr("a verdict needs 8"));
}

TEST(StallVerdict, ACopySlowerThanTheReadsNamesTheDeviceStage) {
  LoaderStats stats;
  stats.num_workers = 4;
  stats.cpu_budget.cpus = 8;
  auto set = [](StageLatency& s, absl::Duration v) {
    s.recent = {.count = 100,
                .p50 = v,
                .p90 = v,
                .p99 = v,
                .max = v,
                .mean = v,
                .sum = v * 100};
  };
  set(stats.latency.consumer_wait, absl::Milliseconds(3));
  set(stats.latency.data_wait, absl::Milliseconds(3));
  set(stats.latency.step, absl::Milliseconds(1));
  set(stats.latency.read, absl::Milliseconds(4));  // 1 ms a batch
  set(stats.latency.copy, absl::Milliseconds(4));
  const StallVerdict verdict = StallVerdictOf(stats);
  EXPECT_EQ(verdict.bound, Bound::kCopy) << verdict.line;
  EXPECT_EQ(verdict.cause, Cause::kSlowCopy) << verdict.line;
  EXPECT_THAT(verdict.line, HasSubstr("copy: p50 4 ms a batch"));
}

}  // namespace
}  // namespace pinwheel
