// LoaderBuilder::Build() and the CPUs (Note [a loader sizes itself to its
// CPUs], loader/cpu_budget.h): with the calling thread narrowed to one CPU
// (sched_setaffinity, restored after each case), an explicit num_workers
// above it is honoured and said once, on one stderr line that
// LoaderStats::cpu_warning repeats (or only there, when silenced);
// kNumWorkersFromCpus takes the number from the budget; LoaderStats reports
// the budget. Over an IterableDataset, fewer pinned slots than workers are
// said the same way (Note [one worker a streamed batch], loader_builder.cc). A
// suite of its own: oneTBB threads started while the mask is narrowed keep it.
#include <algorithm>
#include <cstdint>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

#include "loader/cpu_budget.h"
#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "tests/support/drain_epoch.h"
#include "tests/support/one_cpu.h"
#include "tests/support/scripted_streams.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_support::OneCpu;
using testing_support::PatternDataset;

LoaderBuilder Builder(int workers) {
  LoaderBuilder builder(std::make_shared<PatternDataset>(100));
  builder.batch_size(10).num_workers(workers).device(Device::Host());
  return builder;
}

// Reads one epoch; returns the samples delivered.
int64_t DrainedSamples(Loader& loader) {
  int64_t samples = 0;
  const testing_support::DrainedEpoch drained = testing_support::DrainEpoch(
      loader,
      {.on_batch = [&](const DeviceBatch& batch) { samples += batch.size(); }});
  EXPECT_TRUE(drained.status.ok()) << drained.status;
  return samples;
}

TEST(LoaderBuilderCpus, WorkersAboveTheMaskAreHonouredAndSaidOnceOnStderr) {
  OneCpu one_cpu;
  ASSERT_TRUE(one_cpu.narrowed());
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Loader> loader = Builder(3).Build();
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(stats.num_workers, 3);
  EXPECT_EQ(stats.cpu_budget.cpus, 1);
  EXPECT_EQ(stats.cpu_budget.affinity_cpus, 1);
  EXPECT_THAT(stats.cpu_warning,
              AllOf(HasSubstr("pinwheel: num_workers = 3 cannot run in "
                              "parallel: this process may use 1 CPU"),
                    HasSubstr("Fix: "), HasSubstr("num_workers <= 1")));
  if (stats.cpu_budget.online_cpus > 1) {
    EXPECT_EQ(stats.cpu_budget.limited_by, kCpuLimitAffinity);
    EXPECT_THAT(stats.cpu_warning, HasSubstr("set by the affinity mask"));
  }
  EXPECT_EQ(said, absl::StrCat(stats.cpu_warning, "\n")) << "one line, once";
  EXPECT_EQ(DrainedSamples(*loader), 100);
  EXPECT_EQ(loader->stats().cpu_warning, stats.cpu_warning);
}

TEST(LoaderBuilderCpus, TheLineCanBeSilencedAndStaysInTheStats) {
  OneCpu one_cpu;
  ASSERT_TRUE(one_cpu.narrowed());
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Loader> loader =
      Builder(2).warn_cpu_oversubscription(false).Build();
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(said, "");
  EXPECT_THAT(loader->stats().cpu_warning, HasSubstr("num_workers = 2"));
}

TEST(LoaderBuilderCpus, NumWorkersFromCpusOnOneCpuStartsOneWorkerQuietly) {
  OneCpu one_cpu;
  ASSERT_TRUE(one_cpu.narrowed());
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Loader> loader =
      Builder(LoaderOptions::kNumWorkersFromCpus).Build();
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(said, "");
  EXPECT_EQ(loader->stats().num_workers, 1);
  EXPECT_EQ(loader->stats().cpu_warning, "");
  EXPECT_EQ(DrainedSamples(*loader), 100);
}

TEST(LoaderBuilderCpus, NumWorkersFromCpusLeavesOneCpuToTheConsumer) {
  const CpuBudget budget = ReadCpuBudget();
  absl::StatusOr<Loader> loader =
      Builder(LoaderOptions::kNumWorkersFromCpus).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats stats = loader->stats();
  // The budget Build() read may be shared with the node's ranks when a
  // launcher's variables say so (ShareAmongRanks); the mask is the same.
  EXPECT_EQ(stats.cpu_budget.affinity_cpus, budget.affinity_cpus);
  EXPECT_LE(stats.cpu_budget.cpus, budget.cpus);
  EXPECT_EQ(stats.num_workers, std::max(1, stats.cpu_budget.cpus - 1));
  EXPECT_EQ(loader->stats().cpu_warning, "");
  EXPECT_EQ(DrainedSamples(*loader), 100);
}

TEST(LoaderBuilderCpus, StatsReportTheBudgetAndWorkersThatFitSayNothing) {
  const CpuBudget budget = ReadCpuBudget();
  ::testing::internal::CaptureStderr();
  absl::StatusOr<Loader> loader = Builder(1).Build();
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loader.ok()) << loader.status();
  const LoaderStats stats = loader->stats();
  EXPECT_EQ(said, "");
  EXPECT_EQ(stats.num_workers, 1);
  EXPECT_EQ(stats.cpu_warning, "");
  // ReadCpuBudget()'s, or its share among the node's ranks when a
  // launcher's variables say they share it.
  EXPECT_EQ(stats.cpu_budget.cpus,
            ShareAmongRanks(budget, stats.cpu_budget.shared_by).cpus);
  EXPECT_EQ(stats.cpu_budget.affinity_list, budget.affinity_list);
  EXPECT_EQ(stats.cpu_budget.limited_by, budget.limited_by);
  EXPECT_EQ(stats.cpu_budget.quota_cpus, budget.quota_cpus);
}

TEST(LoaderBuilderCpus, InlineReadsStartNoWorkerAndSayNothing) {
  OneCpu one_cpu;
  ASSERT_TRUE(one_cpu.narrowed());
  absl::StatusOr<Loader> loader = Builder(0).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(loader->stats().num_workers, 0);
  EXPECT_EQ(loader->stats().cpu_warning, "");
}

// Each streamed batch is read by one worker into a slot of its own: 4
// workers and 2 slots read 2 at a time, said once; as many slots as
// workers, or a map-style dataset, say nothing. (The CPUs are not narrowed:
// on a machine with fewer than 4 the CPU line comes first.)
TEST(LoaderBuilderCpus, StreamsWithFewerSlotsThanWorkersAreSaidOnce) {
  auto streams = testing_support::ScriptedStreams::Strided(64);
  auto build = [&](int prefetch, bool iterable) {
    ::testing::internal::CaptureStderr();
    absl::StatusOr<Loader> loader = iterable
                                        ? LoaderBuilder(streams)
                                              .batch_size(8)
                                              .num_workers(4)
                                              .prefetch(prefetch)
                                              .device(Device::Host())
                                              .Build()
                                        : Builder(4).prefetch(prefetch).Build();
    const std::string said = ::testing::internal::GetCapturedStderr();
    EXPECT_TRUE(loader.ok()) << loader.status();
    const std::string warning = loader.ok() ? loader->stats().cpu_warning : "";
    EXPECT_EQ(said, warning.empty() ? "" : absl::StrCat(warning, "\n"));
    return warning;
  };
  EXPECT_THAT(build(2, /*iterable=*/true),
              AllOf(HasSubstr("pinwheel: num_workers = 4 cannot all read at "
                              "once"),
                    HasSubstr("at most 2 workers read at a time"),
                    HasSubstr("Fix: prefetch(4) or more")));
  EXPECT_THAT(build(4, /*iterable=*/true),
              ::testing::Not(HasSubstr("cannot all read at once")));
  EXPECT_THAT(build(2, /*iterable=*/false),
              ::testing::Not(HasSubstr("cannot all read at once")));
}

}  // namespace
}  // namespace pinwheel
