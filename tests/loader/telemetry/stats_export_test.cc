// StatsToJson and StatsToPrometheus (loader/telemetry/stats_export.h): the
// JSON object Python's json module reads back, and Prometheus text with
// one summary per stage, the counters, and labels escaped.
#include "loader/telemetry/stats_export.h"

#include <cstdio>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

LoaderStats Example() {
  LoaderStats stats;
  stats.batches_delivered = 12;
  stats.samples_delivered = 48;
  stats.bytes_delivered = 4800;
  stats.num_workers = 3;
  stats.cpu_budget.cpus = 2;
  stats.cpu_budget.limited_by = "cgroup \"quota\"";
  stats.consumer_wait = absl::Milliseconds(250);
  stats.consumer_wait_behind_buffers = absl::Milliseconds(100);
  stats.latency.read.recent = {.count = 12,
                               .p50 = absl::Milliseconds(2),
                               .p90 = absl::Milliseconds(3),
                               .p99 = absl::Milliseconds(4),
                               .max = absl::Milliseconds(5)};
  stats.latency.read.total = stats.latency.read.recent;
  stats.latency.read.total.sum = absl::Milliseconds(30);
  stats.pinned_bytes = 1 << 20;
  stats.auto_tune = {.workers_auto = true,
                     .prefetch_auto = true,
                     .workers = 2,
                     .max_workers = 3,
                     .prefetch = 4,
                     .max_prefetch = 64,
                     .changes = 5,
                     .last_change_batch = 80,
                     .last_reason = "workers 3 -> 2 at batch 80: no wait"};
  return stats;
}

TEST(StatsToJson, WritesOneLineThatPythonReadsBackWithEveryStage) {
  const std::string json = StatsToJson(Example());
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_THAT(json, HasSubstr("\"batches_delivered\":12"));
  EXPECT_THAT(json, HasSubstr("\"consumer_wait_behind_buffers_s\":0.1,"));
  EXPECT_THAT(json, HasSubstr("\"cpus_limited_by\":\"cgroup \\\"quota\\\"\""));
  EXPECT_THAT(json, HasSubstr("\"read\":{\"total\":{\"count\":12,\"p50_s\":"
                              "0.002,\"p90_s\":0.003,\"p99_s\":0.004,"
                              "\"max_s\":0.005"));
  EXPECT_THAT(json, HasSubstr("\"verdict\":\"unknown: 0 batches timed"));
  const std::string path =
      ::testing::TempDir() + "/stats_export_test_" +
      std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
      ".json";
  std::ofstream(path) << json;
  // Every stage present, the read's p99 as written.
  const std::string check =
      "python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); "
      "assert sorted(d['latency']) == sorted(['slot_wait','read','copy',"
      "'ready_wait','consumer_wait','data_wait','step']), d; "
      "assert d['latency']['read']['recent']['p99_s'] == 0.004, d; "
      "assert d['auto_tune']['workers'] == 2 and "
      "d['auto_tune']['prefetch'] == 4 and d['auto_tune']['changes'] == 5 "
      "and d['auto_tune']['last_reason'].startswith('workers 3 -> 2'), d\" " +
      path;
  EXPECT_EQ(std::system(check.c_str()), 0) << json;
  std::remove(path.c_str());
}

TEST(StatsToPrometheus, WritesASummaryPerStageCountersAndEscapedLabels) {
  absl::StatusOr<std::string> exported =
      StatsToPrometheus(Example(), {{"rank", "3"}, {"job", "a\"b\\c"}});
  ASSERT_TRUE(exported.ok()) << exported.status();
  const std::string& text = *exported;
  EXPECT_THAT(text, HasSubstr("# TYPE pinwheel_stage_latency_seconds "
                              "summary\n"));
  EXPECT_THAT(text,
              HasSubstr("pinwheel_stage_latency_seconds{rank=\"3\",job=\"a\\\""
                        "b\\\\c\",stage=\"read\",quantile=\"0.99\"} 0.004\n"));
  EXPECT_THAT(text, HasSubstr("pinwheel_stage_latency_seconds_sum{rank=\"3\","
                              "job=\"a\\\"b\\\\c\",stage=\"read\"} 0.03\n"));
  EXPECT_THAT(text, HasSubstr("pinwheel_stage_latency_seconds_count{rank=\"3\","
                              "job=\"a\\\"b\\\\c\",stage=\"read\"} 12\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE pinwheel_batches_delivered_total "
                              "counter\npinwheel_batches_delivered_total{"
                              "rank=\"3\",job=\"a\\\"b\\\\c\"} 12\n"));
  EXPECT_THAT(text, HasSubstr("pinwheel_consumer_wait_seconds_total{rank=\"3\","
                              "job=\"a\\\"b\\\\c\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("pinwheel_consumer_wait_behind_buffers_seconds_"
                              "total{rank=\"3\",job=\"a\\\"b\\\\c\"} 0.1\n"));
  // Each sample line: a name, optional labels, one value.
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (line[0] == '#') continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(line, "} ");
    EXPECT_EQ(parts.size(), 2u) << line;
  }
}

TEST(StatsToPrometheus, WithoutLabelsWritesBareNames) {
  absl::StatusOr<std::string> exported = StatsToPrometheus(Example());
  ASSERT_TRUE(exported.ok()) << exported.status();
  const std::string& text = *exported;
  EXPECT_THAT(text, HasSubstr("\npinwheel_workers 3\n"));
  EXPECT_THAT(text, HasSubstr("\npinwheel_cpus 2\n"));
  EXPECT_THAT(text, HasSubstr("\npinwheel_pinned_bytes 1048576\n"));
  EXPECT_THAT(text, HasSubstr("\npinwheel_active_workers 2\n"));
  EXPECT_THAT(text, HasSubstr("\npinwheel_prefetch_depth 4\n"));
  EXPECT_THAT(text, HasSubstr("\npinwheel_auto_tune_changes_total 5\n"));
  EXPECT_THAT(text, Not(HasSubstr("{}")));
}

TEST(StatsToPrometheus, RefusesALabelNameItCannotWrite) {
  for (const char* name : {"", "3rank", "ra-nk", "stage", "quantile"}) {
    absl::StatusOr<std::string> exported =
        StatsToPrometheus(Example(), {{name, "x"}});
    EXPECT_EQ(exported.status().code(), absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_THAT(exported.status().message(),
                HasSubstr(absl::StrCat("label name '", name, "'")));
  }
}

}  // namespace
}  // namespace pinwheel
