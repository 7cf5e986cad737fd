// Tests of pinwheel_multi_bench's parts: the ranks meet through a folder
// (each rank's values come back in rank order; a missing rank times out
// and a failed one aborts the wait, naming it; a folder of an earlier run
// is refused), the host memcpy probe (copies, counts its threads, refuses
// bad options) and the arithmetic of the summary (the aggregate is every
// rank's bytes over the slowest rank's time; the ratio's median is the
// median of the per-repetition ratios).
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "samples/bench/host_memory_bandwidth.h"
#include "samples/bench/multi_summary.h"
#include "samples/bench/rendezvous.h"

namespace pinwheel::bench {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) /
      (name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

TEST(FileRendezvous, EveryRankGetsEveryRanksValuesInRankOrder) {
  const std::string dir = FreshDir("rendezvous_order");
  std::vector<std::vector<std::vector<double>>> seen(3);
  std::vector<absl::Status> errors(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Rendezvous>> me =
          FileRendezvous::Open(dir, r, 3);
      if (!me.ok()) {
        errors[r] = me.status();
        return;
      }
      errors[r] = (*me)->Barrier("start");
      if (!errors[r].ok()) return;
      absl::StatusOr<std::vector<std::vector<double>>> all =
          (*me)->AllGather("values", {r * 10.0, 0.125 + r});
      if (all.ok()) {
        seen[r] = *all;
      } else {
        errors[r] = all.status();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_TRUE(errors[r].ok()) << errors[r];
    EXPECT_THAT(seen[r],
                ElementsAre(ElementsAre(0.0, 0.125), ElementsAre(10.0, 1.125),
                            ElementsAre(20.0, 2.125)));
  }
}

TEST(FileRendezvous, AMissingRankTimesOutNamingItAndTheStep) {
  const std::string dir = FreshDir("rendezvous_missing");
  absl::StatusOr<std::unique_ptr<Rendezvous>> rank0 =
      FileRendezvous::Open(dir, 0, 2, absl::Milliseconds(50));
  ASSERT_TRUE(rank0.ok()) << rank0.status();
  const absl::Status status = (*rank0)->Barrier("lonely");
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.message(), HasSubstr("(lonely)"));
  EXPECT_THAT(status.message(), HasSubstr("rank(s) 1 did not arrive"));
}

TEST(FileRendezvous, ARankThatFailedAbortsTheOthersWaitWithItsError) {
  const std::string dir = FreshDir("rendezvous_failed");
  absl::StatusOr<std::unique_ptr<Rendezvous>> rank0 =
      FileRendezvous::Open(dir, 0, 2, absl::Seconds(60));
  absl::StatusOr<std::unique_ptr<Rendezvous>> rank1 =
      FileRendezvous::Open(dir, 1, 2, absl::Seconds(60));
  ASSERT_TRUE(rank0.ok() && rank1.ok());
  (*rank1)->Abandon(absl::InvalidArgumentError("--workers=0: bad"));
  const absl::Status status = (*rank0)->Barrier("start");
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(status.message(), HasSubstr("rank 1 failed"));
  EXPECT_THAT(status.message(), HasSubstr("--workers=0: bad"));
}

TEST(FileRendezvous, RefusesAFolderHoldingAnEarlierRunOfThisRank) {
  const std::string dir = FreshDir("rendezvous_stale");
  {
    absl::StatusOr<std::unique_ptr<Rendezvous>> first =
        FileRendezvous::Open(dir, 0, 1);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->Barrier("only").ok());
  }
  absl::StatusOr<std::unique_ptr<Rendezvous>> again =
      FileRendezvous::Open(dir, 0, 1);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.status().message(), HasSubstr("an earlier run"));
  // Another rank's files do not make this one stale.
  EXPECT_TRUE(FileRendezvous::Open(dir, 1, 2).ok());
}

TEST(FileRendezvous, RefusesARankOutOfRangeAndATagThatIsNoFileName) {
  const std::string dir = FreshDir("rendezvous_arguments");
  EXPECT_EQ(FileRendezvous::Open(dir, 2, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Rendezvous>> me =
      FileRendezvous::Open(dir, 0, 1);
  ASSERT_TRUE(me.ok());
  EXPECT_EQ((*me)->Barrier("../x").code(), absl::StatusCode::kInvalidArgument);
}

TEST(MemcpyBandwidth, CopiesOnEveryThreadForAboutTheTimeAsked) {
  int ready_calls = 0;
  absl::StatusOr<MemoryBandwidth> b =
      MeasureMemcpyBandwidth({.threads = 2,
                              .bytes_per_thread = size_t{1} << 20,
                              .seconds = 0.05,
                              .ready = [&] {
                                ++ready_calls;
                                return absl::OkStatus();
                              }});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->threads, 2);
  EXPECT_EQ(ready_calls, 1);
  EXPECT_GE(b->bytes_copied, 2.0 * (1 << 20));  // at least a chunk each
  EXPECT_GE(b->seconds, 0.05);
  EXPECT_GT(b->gbps(), 0);
}

TEST(MemcpyBandwidth, AnErrorFromReadyStopsItAndIsReturned) {
  absl::StatusOr<MemoryBandwidth> b = MeasureMemcpyBandwidth(
      {.threads = 2, .bytes_per_thread = size_t{1} << 20, .ready = [] {
         return absl::AbortedError("rank 1 failed");
       }});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kAborted);
}

TEST(MemcpyBandwidth, RefusesOptionsOutOfRangeNamingThem) {
  EXPECT_THAT(MeasureMemcpyBandwidth({.threads = 0}).status().message(),
              HasSubstr("threads = 0"));
  EXPECT_THAT(
      MeasureMemcpyBandwidth({.bytes_per_thread = 1000}).status().message(),
      HasSubstr("bytes_per_thread = 1000"));
  EXPECT_THAT(MeasureMemcpyBandwidth({.seconds = 0}).status().message(),
              HasSubstr("seconds = 0"));
}

TEST(AllowedCpus, CountsTheAffinityMaskAndListsIt) {
  absl::StatusOr<CpuAllowance> cpus = AllowedCpus();
  ASSERT_TRUE(cpus.ok()) << cpus.status();
  EXPECT_GE(cpus->count, 1);
  EXPECT_LE(cpus->count, cpus->online);
  EXPECT_FALSE(cpus->list.empty());
}

TEST(MultiSummary, TheAggregateIsEveryRanksBytesOverTheSlowestRanksTime) {
  // 100 batches in 1 s and 100 in 2 s: 200 batches over 2 s.
  EXPECT_DOUBLE_EQ(AggregateGbps({{.batches = 100, .seconds = 1},
                                  {.batches = 100, .seconds = 2}},
                                 1e9),
                   100.0);
  EXPECT_EQ(AggregateGbps({}, 1e9), 0);
}

TEST(MultiSummary, GivesEachRanksLineThenAllWithTheMedianOfPerRepRatios) {
  MultiRow row{.workload = "w1", .path = "workers", .batch_bytes = 1e9};
  // Three repetitions of two ranks (batches, seconds, cpu seconds).
  row.reps = {{{10, 1, 2}, {10, 1, 4}},
              {{20, 1, 2}, {10, 2, 4}},
              {{30, 1, 1}, {30, 1, 1}}};
  row.raw_gbps = {40, 20, 30};
  const std::vector<MultiLine> lines = Summarize(row);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].who, "rank 0");
  EXPECT_EQ(lines[1].who, "rank 1");
  EXPECT_EQ(lines[2].who, "all");
  // rank 0: 10, 20, 30 GB/s; rank 1: 10, 5, 30.
  EXPECT_DOUBLE_EQ(lines[0].gbps.median, 20);
  EXPECT_DOUBLE_EQ(lines[1].gbps.median, 10);
  EXPECT_DOUBLE_EQ(lines[1].gbps.min, 5);
  // all: 20/1, 30/2, 60/1 GB/s; ratios 0.5, 0.75, 2: median 0.75 (not
  // median rate / median raw = 20 / 30).
  EXPECT_DOUBLE_EQ(lines[2].gbps.median, 20);
  EXPECT_DOUBLE_EQ(lines[2].ratio_to_raw.median, 0.75);
  EXPECT_DOUBLE_EQ(lines[2].ratio_to_raw.max, 2);
  // Cores: CPU / wall summed over ranks: 2+4, 2+2, 1+1.
  EXPECT_DOUBLE_EQ(lines[2].cores.median, 4);
  EXPECT_DOUBLE_EQ(lines[0].cores.median, 2);
}

TEST(MultiSummary, OneRankGivesOnlyTheAllLineAndNoRatioWithoutARawCopy) {
  MultiRow row{.workload = "w2", .path = "gather", .batch_bytes = 1e6};
  row.reps = {{{1000, 1, 0}}};
  const std::vector<MultiLine> lines = Summarize(row);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].who, "all");
  EXPECT_DOUBLE_EQ(lines[0].gbps.median, 1);
  EXPECT_DOUBLE_EQ(lines[0].batches_per_second.median, 1000);
  EXPECT_EQ(lines[0].ratio_to_raw.n, 0);
  EXPECT_EQ(lines[0].cores.n, 0);  // CPU time unknown
}

TEST(MultiSummary, SetsTheAggregateBesideTheRawCopyAndTheHostMemcpyRate) {
  MultiRow row{.workload = "w1", .path = "workers", .batch_bytes = 1e9};
  row.reps = {{{60, 1, 0}}};
  row.raw_gbps = {100};
  EXPECT_EQ(BesideLimits(row, 40),
            "w1 workers: 60.0 GB/s, 0.600 of the raw copy, 1.50x the host "
            "memcpy rate (40.0 GB/s)");
  row.raw_gbps.clear();  // the host backend: no raw copy
  EXPECT_EQ(BesideLimits(row, 40),
            "w1 workers: 60.0 GB/s, 1.50x the host memcpy rate (40.0 GB/s)");
  EXPECT_EQ(BesideLimits(row, 40, 75),
            "w1 workers: 60.0 GB/s, 1.50x the host memcpy rate (40.0 GB/s), "
            "0.80 of the staged copy (75.0 GB/s)");
}

}  // namespace
}  // namespace pinwheel::bench
