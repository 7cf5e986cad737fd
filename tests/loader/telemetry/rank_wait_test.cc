// RankWait and SlowestRankOf (loader/telemetry/rank_wait.h) on staged
// records: the rank that waits longest for data is named with its bound
// stage, a job no rank of which waits says so, and records that are not
// RankWaits (wrong size, magic, version, repeated ranks) are refused.
#include "loader/telemetry/rank_wait.h"

#include <cstring>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>

#include "loader/telemetry/stall_verdict.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;

// A rank whose consumer waits `wait_ms` a batch beside a `step_ms` step.
RankWait Staged(int rank, double wait_ms, double step_ms,
                StallVerdict::Bound bound = StallVerdict::Bound::kConsumer) {
  RankWait r;
  r.rank = rank;
  r.num_workers = 2;
  r.cpus = 4;
  r.bound = static_cast<int32_t>(bound);
  r.batches = 100;
  r.wait_p50_ns = static_cast<int64_t>(wait_ms * 1e6);
  r.wait_p99_ns = 2 * r.wait_p50_ns;
  r.wait_mean_ns = r.wait_p50_ns;
  r.step_p50_ns = static_cast<int64_t>(step_ms * 1e6);
  r.step_mean_ns = r.step_p50_ns;
  r.read_p50_ns = static_cast<int64_t>((wait_ms + step_ms) * 2e6);
  r.copy_p50_ns = 100000;
  return r;
}

TEST(SlowestRankOf, NamesTheRankThatWaitsLongestAndItsBoundStage) {
  const std::vector<RankWait> ranks = {
      Staged(0, 0.1, 5), Staged(2, 0.2, 5),
      Staged(1, 8, 5, StallVerdict::Bound::kReads), Staged(3, 0.1, 5)};
  absl::StatusOr<SlowestRank> slowest = SlowestRankOf(ranks);
  ASSERT_TRUE(slowest.ok()) << slowest.status();
  EXPECT_EQ(slowest->rank, 1);
  EXPECT_TRUE(slowest->loader_bound);
  EXPECT_EQ(slowest->line,
            "slowest rank 1 of 4: Next() waits for data p50 8 ms, p99 16 ms "
            "a batch (62 % of its time; the other ranks at most p50 0.2 ms); "
            "bound by reads: p50 26 ms a batch over 2 workers (4 CPUs) "
            "against a 5 ms step");
}

TEST(SlowestRankOf, NamesADeviceStageBound) {
  const std::vector<RankWait> ranks = {
      Staged(0, 3, 5, StallVerdict::Bound::kCopy), Staged(1, 0.1, 5)};
  EXPECT_THAT(SlowestRankOf(ranks)->line,
              HasSubstr("bound by the device stage: p50 0.1 ms a batch"));
}

TEST(SlowestRankOf, SaysWhenNoRankWaitsForData) {
  const std::vector<RankWait> ranks = {Staged(0, 0.1, 5), Staged(1, 0.3, 5)};
  absl::StatusOr<SlowestRank> slowest = SlowestRankOf(ranks);
  ASSERT_TRUE(slowest.ok());
  EXPECT_EQ(slowest->rank, 1);
  EXPECT_FALSE(slowest->loader_bound);
  EXPECT_THAT(slowest->line,
              HasSubstr("no rank waits for data: the slowest, rank 1 of 2, "
                        "Next() waits for data p50 0.3 ms"));
}

// A rank that waits long in Next() behind device buffers its own GPU work
// still holds is not held back by data (Note [the slowest rank]); the rank
// that waits less but for data is the slowest, and the time behind the
// buffers counts in its share's denominator.
TEST(SlowestRankOf, LeavesOutTheWaitBehindARanksOwnDeviceBuffers) {
  RankWait own_gpu = Staged(0, 0.5, 5);
  own_gpu.behind_buffers_mean_ns = 20000000;
  RankWait starved = Staged(1, 3, 5, StallVerdict::Bound::kReads);
  starved.behind_buffers_mean_ns = 2000000;
  absl::StatusOr<SlowestRank> slowest = SlowestRankOf({own_gpu, starved});
  ASSERT_TRUE(slowest.ok()) << slowest.status();
  EXPECT_EQ(slowest->rank, 1);
  EXPECT_THAT(slowest->line,
              HasSubstr("Next() waits for data p50 3 ms, p99 6 ms a batch "
                        "(30 % of its time;"));
}

TEST(SlowestRankOf, PicksTheLowestRankOnATie) {
  const std::vector<RankWait> ranks = {Staged(3, 4, 5), Staged(1, 4, 5)};
  EXPECT_EQ(SlowestRankOf(ranks)->rank, 1);
}

TEST(SlowestRankOf, RefusesNoRanksRepeatedRanksAndForeignRecords) {
  EXPECT_THAT(SlowestRankOf({}).status().message(), HasSubstr("no ranks"));
  EXPECT_THAT(
      SlowestRankOf({Staged(0, 1, 1), Staged(0, 1, 1)}).status().message(),
      HasSubstr("record 1 has rank 0, seen before"));
  RankWait foreign = Staged(1, 1, 1);
  foreign.magic = 7;
  EXPECT_THAT(SlowestRankOf({Staged(0, 1, 1), foreign}).status().message(),
              HasSubstr("record 1 is not a RankWait"));
}

TEST(RankWaitFromBytes, ReadsBackWhatAnAllGatherCarries) {
  const RankWait sent = Staged(5, 2, 3, StallVerdict::Bound::kReads);
  std::vector<uint8_t> bytes(sizeof sent);
  std::memcpy(bytes.data(), &sent, sizeof sent);
  absl::StatusOr<RankWait> got = RankWaitFromBytes(bytes);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::memcmp(&*got, &sent, sizeof sent), 0);
  bytes.pop_back();
  EXPECT_THAT(RankWaitFromBytes(bytes).status().message(),
              HasSubstr("95 bytes, expected 96"));
  bytes.assign(sizeof sent, 0);
  EXPECT_THAT(RankWaitFromBytes(bytes).status().message(),
              HasSubstr("not a RankWait record"));
}

TEST(RankWaitOf, TakesTheWindowsPercentilesAndTheVerdictsBound) {
  LoaderStats stats;
  stats.num_workers = 3;
  stats.cpu_budget.cpus = 8;
  stats.latency.consumer_wait.recent = {.count = 20,
                                        .p50 = absl::Milliseconds(7),
                                        .p99 = absl::Milliseconds(10),
                                        .mean = absl::Milliseconds(7)};
  stats.latency.data_wait.recent = {.count = 20,
                                    .p50 = absl::Milliseconds(6),
                                    .p99 = absl::Milliseconds(9),
                                    .mean = absl::Milliseconds(6)};
  stats.latency.step.recent = {
      .count = 20, .p50 = absl::Milliseconds(4), .mean = absl::Milliseconds(4)};
  stats.latency.read.recent = {.count = 20, .p50 = absl::Milliseconds(30)};
  const RankWait r = RankWaitOf(stats, 2);
  EXPECT_EQ(r.rank, 2);
  EXPECT_EQ(r.num_workers, 3);
  EXPECT_EQ(r.cpus, 8);
  EXPECT_EQ(r.batches, 20);
  EXPECT_EQ(r.wait_p99_ns, 9000000);  // data_wait's, not consumer_wait's
  EXPECT_EQ(r.wait_mean_ns, 6000000);
  EXPECT_EQ(r.behind_buffers_mean_ns, 1000000);
  EXPECT_EQ(r.read_p50_ns, 30000000);
  EXPECT_EQ(static_cast<StallVerdict::Bound>(r.bound),
            StallVerdictOf(stats).bound);
  EXPECT_EQ(static_cast<StallVerdict::Bound>(r.bound),
            StallVerdict::Bound::kReads);
}

}  // namespace
}  // namespace pinwheel
