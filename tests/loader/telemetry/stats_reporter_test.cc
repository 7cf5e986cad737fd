// LoaderOptions::stats_report (loader/telemetry/stats_reporter.h): one JSON
// object per interval of batches or of time, to a callback and to a JSON
// Lines file appended whole, a report while the consumer is away, a last
// report at shutdown, failing sinks as a Status, and the options Build()
// refuses.
#include "loader/telemetry/stats_reporter.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "loader/loader.h"
#include "loader/loader_builder.h"
#include "pinning/base/mutex.h"
#include "tests/support/test_datasets.h"
#include "transfer/device.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing_support::PatternDataset;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/stats_reporter_test_" +
         std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + name + ".jsonl";
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

LoaderBuilder Builder(int64_t samples = 80) {
  LoaderBuilder builder(std::make_shared<PatternDataset>(samples));
  builder.batch_size(4).num_workers(1).device(Device::Host());
  return builder;
}

// Takes every batch of one epoch, sleeping `step` after each.
int DrainEpoch(Loader& loader, absl::Duration step = absl::ZeroDuration()) {
  int batches = 0;
  while (true) {
    absl::StatusOr<std::optional<DeviceBatch>> batch = loader.Next();
    EXPECT_TRUE(batch.ok()) << batch.status();
    if (!batch.ok() || !batch->has_value()) return batches;
    ++batches;
    if (step > absl::ZeroDuration()) absl::SleepFor(step);
  }
}

// Collects the callback's lines. Thread-safe (internal::MutexLock: TSan
// cannot see inside Debian's Abseil).
struct Collected {
  absl::Mutex mu;
  std::vector<std::string> lines;
  std::function<absl::Status(const std::string&)> Callback() {
    return [this](const std::string& json) {
      internal::MutexLock lock(&mu);
      lines.push_back(json);
      return absl::OkStatus();
    };
  }
  std::vector<std::string> Get() {
    internal::MutexLock lock(&mu);
    return lines;
  }
};

TEST(StatsReport, AppendsOneLinePerNBatchesAndALastOneAtShutdown) {
  const std::string path = TempPath("batches");
  std::remove(path.c_str());
  absl::StatusOr<Loader> loader =
      Builder().stats_report({.every_batches = 5, .path = path}).Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(DrainEpoch(*loader), 20);
  loader->Shutdown();
  ASSERT_TRUE(loader->stats_report_status().ok());
  const std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 5u);  // after batches 5, 10, 15, 20, and the last
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_THAT(lines[i], StartsWith("{\"unix_time_s\":"));
    EXPECT_THAT(lines[i], HasSubstr(absl::StrCat("\"report\":", i + 1, ",")));
    EXPECT_EQ(lines[i].back(), '}');
  }
  EXPECT_THAT(lines[0], HasSubstr("\"batches_delivered\":5,"));
  EXPECT_THAT(lines[3], HasSubstr("\"batches_delivered\":20,"));
  EXPECT_THAT(lines[4], HasSubstr("\"final\":true"));
  EXPECT_THAT(lines[4], HasSubstr("\"latency\":{\"slot_wait\""));
  EXPECT_THAT(lines[4], HasSubstr("\"verdict\":"));
  // Python's json module reads every line back.
  const std::string check =
      "python3 -c \"import json,sys; "
      "r=[json.loads(l) for l in open(sys.argv[1])]; "
      "assert [x['report'] for x in r] == [1,2,3,4,5], r; "
      "assert r[-1]['latency']['read']['total']['count'] >= 20, r[-1]\" " +
      path;
  EXPECT_EQ(std::system(check.c_str()), 0) << check;
}

TEST(StatsReport, CallsTheCallbackEveryIntervalWithGrowingCounts) {
  Collected collected;
  absl::StatusOr<Loader> loader =
      Builder(200)
          .stats_report({.every = absl::Milliseconds(30),
                         .callback = collected.Callback()})
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  DrainEpoch(*loader, absl::Milliseconds(4));  // 50 batches, >= 200 ms
  loader->Shutdown();
  const std::vector<std::string> lines = collected.Get();
  ASSERT_GE(lines.size(), 4u);
  EXPECT_THAT(lines.back(), HasSubstr("\"final\":true"));
  EXPECT_THAT(lines.back(), HasSubstr("\"batches_delivered\":50,"));
  EXPECT_THAT(lines.front(), HasSubstr("\"final\":false"));
  EXPECT_THAT(lines.front(), Not(HasSubstr("\"batches_delivered\":50,")));
}

TEST(StatsReport, ReportsWhileTheConsumerIsAway) {
  Collected collected;
  absl::StatusOr<Loader> loader =
      Builder()
          .stats_report({.every = absl::Milliseconds(10),
                         .callback = collected.Callback()})
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE(loader->Next().ok());
  // No Next() for 20 intervals: the reports go on, with the consumer's
  // counters as of its last hand-over.
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_GE(collected.Get().size(), 3u);
  for (const std::string& line : collected.Get()) {
    EXPECT_THAT(line, HasSubstr("\"batches_delivered\":"));
  }
}

TEST(StatsReport, AThrowingCallbackBecomesAStatusAndStopsTheReports) {
  std::atomic<int> calls{0};
  absl::StatusOr<Loader> loader =
      Builder()
          .stats_report({.every_batches = 2,
                         .callback = [&](const std::string&) -> absl::Status {
                           ++calls;
                           throw std::runtime_error("dashboard is down");
                         }})
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  EXPECT_EQ(DrainEpoch(*loader), 20);  // training goes on
  loader->Shutdown();
  EXPECT_EQ(calls.load(), 1);
  const absl::Status status = loader->stats_report_status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("stats_report.callback threw"));
  EXPECT_THAT(status.message(), HasSubstr("dashboard is down (report 1)"));
}

TEST(StatsReport, ACallbackErrorIsKeptWithTheReportItFailedOn) {
  std::atomic<int> calls{0};
  absl::StatusOr<Loader> loader =
      Builder()
          .stats_report({.every_batches = 3,
                         .callback =
                             [&](const std::string&) {
                               return ++calls == 2
                                          ? absl::UnavailableError("disk full")
                                          : absl::OkStatus();
                             }})
          .Build();
  ASSERT_TRUE(loader.ok()) << loader.status();
  DrainEpoch(*loader);
  loader->Shutdown();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(loader->stats_report_status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_THAT(loader->stats_report_status().message(),
              HasSubstr("returned an error on report 2: disk full"));
}

TEST(StatsReport, TwoLoadersAppendingToOneFileWriteWholeLines) {
  const std::string path = TempPath("shared");
  std::remove(path.c_str());
  {
    absl::StatusOr<Loader> a =
        Builder().stats_report({.every_batches = 1, .path = path}).Build();
    absl::StatusOr<Loader> b =
        Builder().stats_report({.every_batches = 1, .path = path}).Build();
    ASSERT_TRUE(a.ok() && b.ok());
    std::thread other([&] { DrainEpoch(*b); });
    DrainEpoch(*a);
    other.join();
  }  // destruction writes the last reports
  const std::vector<std::string> lines = Lines(path);
  EXPECT_EQ(lines.size(), 42u);  // 2 × (20 batches + the last)
  for (const std::string& line : lines) {
    EXPECT_THAT(line, StartsWith("{\"unix_time_s\":"));
    EXPECT_EQ(line.back(), '}');
  }
}

TEST(StatsReport, MovingALoaderKeepsItsReports) {
  Collected collected;
  absl::StatusOr<Loader> built =
      Builder()
          .stats_report({.every_batches = 10, .callback = collected.Callback()})
          .Build();
  ASSERT_TRUE(built.ok());
  Loader loader = *std::move(built);
  Loader other = std::move(loader);
  DrainEpoch(other);
  other = *Builder().Build();  // stops the first one's reporter first
  EXPECT_EQ(collected.Get().size(), 3u);
}

TEST(StatsReport, BuildRefusesAFileItCannotOpen) {
  absl::StatusOr<Loader> loader =
      Builder()
          .stats_report({.every = absl::Seconds(1),
                         .path = "/nonexistent-dir/stats.jsonl"})
          .Build();
  EXPECT_EQ(loader.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(loader.status().message(),
              HasSubstr("'stats_report.path' = /nonexistent-dir/stats.jsonl: "
                        "cannot be opened for appending: No such file"));
}

TEST(StatsReport, BuildRefusesAnIntervalWithoutASinkAndTheReverse) {
  absl::StatusOr<Loader> no_sink =
      Builder().stats_report({.every = absl::Seconds(1)}).Build();
  EXPECT_EQ(no_sink.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_sink.status().message(),
              HasSubstr("an interval without a sink"));
  absl::StatusOr<Loader> no_interval =
      Builder().stats_report({.path = TempPath("never")}).Build();
  EXPECT_THAT(no_interval.status().message(),
              HasSubstr("a sink without an interval"));
  absl::StatusOr<Loader> negative =
      Builder()
          .stats_report({.every = absl::Seconds(-1), .path = TempPath("neg")})
          .Build();
  EXPECT_THAT(negative.status().message(),
              HasSubstr("'stats_report.every' = -1s: must be > 0"));
  absl::StatusOr<Loader> batches =
      Builder()
          .stats_report({.every_batches = -2, .path = TempPath("neg")})
          .Build();
  EXPECT_THAT(batches.status().message(),
              HasSubstr("'stats_report.every_batches' = -2: must be >= 0"));
}

}  // namespace
}  // namespace pinwheel
