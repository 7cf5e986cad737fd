// LatencyHistogram (loader/telemetry/latency_histogram.h): buckets at most
// 1/32 wide, percentiles within the bucket resolution since it was made and
// exact over the recent window, concurrent records all counted.
#include "loader/telemetry/latency_histogram.h"

#include <gtest/gtest.h>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace pinwheel {
namespace {

// Whether `got` is within `fraction` of `want`.
::testing::AssertionResult Near(absl::Duration got, absl::Duration want,
                                double fraction) {
  const double g = absl::ToDoubleNanoseconds(got);
  const double w = absl::ToDoubleNanoseconds(want);
  if (g >= w * (1 - fraction) && g <= w * (1 + fraction)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << absl::FormatDuration(got) << " is not within " << fraction * 100
         << " % of " << absl::FormatDuration(want);
}

TEST(LatencyHistogram, EveryValueFallsInABucketAtMostOneThirtySecondWide) {
  for (int64_t v = 0; v < (int64_t{1} << 41); v = v < 64 ? v + 1 : v * 9 / 8) {
    const int b = LatencyHistogram::BucketOf(v);
    ASSERT_GE(b, 0);
    ASSERT_LT(b + 1, LatencyHistogram::kBuckets) << v;
    const int64_t start = LatencyHistogram::BucketStart(b);
    const int64_t end = LatencyHistogram::BucketStart(b + 1);
    ASSERT_LE(start, v) << "bucket " << b;
    ASSERT_LT(v, end) << "bucket " << b;
    ASSERT_LE(end - start, std::max<int64_t>(1, start / 32)) << v;
  }
}

TEST(LatencyHistogram, AnEmptyOneSummarizesToZeros) {
  LatencyHistogram h;
  EXPECT_EQ(h.Summary().count, 0);
  EXPECT_EQ(h.Summary().p99, absl::ZeroDuration());
  EXPECT_EQ(h.Recent().count, 0);
  EXPECT_EQ(h.Recent().max, absl::ZeroDuration());
}

TEST(LatencyHistogram, PercentilesSinceCreationAreWithinTheBucketResolution) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Record(absl::Microseconds(i));
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.count, 1000);
  EXPECT_TRUE(Near(s.p50, absl::Microseconds(500), 0.02));
  EXPECT_TRUE(Near(s.p90, absl::Microseconds(900), 0.02));
  EXPECT_TRUE(Near(s.p99, absl::Microseconds(990), 0.02));
  EXPECT_EQ(s.max, absl::Microseconds(1000));
  EXPECT_EQ(s.sum, absl::Microseconds(500500));
  EXPECT_EQ(s.mean, absl::Nanoseconds(500500));
}

TEST(LatencyHistogram, TheRecentWindowHoldsOnlyTheLastValuesExactly) {
  LatencyHistogram h;
  for (int i = 0; i < 3000; ++i) h.Record(absl::Milliseconds(1));
  for (int i = 1; i <= LatencyHistogram::kRecent; ++i) {
    h.Record(absl::Microseconds(5000 + i));
  }
  const LatencySummary recent = h.Recent();
  EXPECT_EQ(recent.count, LatencyHistogram::kRecent);
  EXPECT_EQ(recent.p50,
            absl::Microseconds(5000 + LatencyHistogram::kRecent / 2));
  EXPECT_EQ(recent.max, absl::Microseconds(5000 + LatencyHistogram::kRecent));
  EXPECT_TRUE(Near(h.Summary().p50, absl::Milliseconds(1), 0.02));
  EXPECT_EQ(h.Summary().count, 3000 + LatencyHistogram::kRecent);
}

TEST(LatencyHistogram, NegativeAndHugeValuesAreClampedNotLost) {
  LatencyHistogram h;
  h.Record(-absl::Seconds(1));
  h.Record(absl::InfiniteDuration());
  h.Record(absl::Hours(24 * 365));
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.p50 >= absl::Hours(1), true) << s.p50;
  EXPECT_GT(s.max, absl::Hours(24 * 12));
  EXPECT_EQ(h.Recent().count, 3);
}

TEST(LatencyHistogram, RecordsFromManyThreadsAreAllCounted) {
  LatencyHistogram h;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 5000; ++i) h.Record(absl::Microseconds(t + 1));
    });
  }
  LatencySummary during = h.Recent();  // a snapshot while they record
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(during.count, LatencyHistogram::kRecent);
  const LatencySummary s = h.Summary();
  EXPECT_EQ(s.count, 20000);
  EXPECT_EQ(s.sum, absl::Microseconds(5000 * (1 + 2 + 3 + 4)));
  EXPECT_EQ(s.max, absl::Microseconds(4));
}

}  // namespace
}  // namespace pinwheel
