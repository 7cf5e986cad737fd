// Exports a LoaderStats for dashboards: one JSON object (for a log line or
// a file per interval) and the Prometheus text exposition format (for a
// scrape endpoint the application serves; the library opens no socket).
//
// Example:
//   const LoaderStats stats = loader.stats();
//   log << StatsToJson(stats) << "\n";
//   // {"batches_delivered":120,...,"latency":{"read":{"total":{"count":
//   //  120,"p50_s":0.0081,...},"recent":{...}},...},"verdict":"reads: ..."}
//   http_body = *StatsToPrometheus(stats, {{"rank", "0"}});
//   // pinwheel_stage_latency_seconds{rank="0",stage="read",quantile="0.99"}
//   //   0.0093
#ifndef PINWHEEL_LOADER_TELEMETRY_STATS_EXPORT_H_
#define PINWHEEL_LOADER_TELEMETRY_STATS_EXPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

#include "loader/loader_stats.h"

namespace pinwheel {

// Returns `stats` as one JSON object on one line: the counters, the CPU
// budget, the latencies of each stage (seconds; "total" since Build(),
// "recent" over the last LatencyHistogram::kRecent batches) and the
// verdict (StallVerdictOf). Thread-safe.
std::string StatsToJson(const LoaderStats& stats);

// Returns `stats` in the Prometheus text exposition format (version 0.0.4):
// a summary pinwheel_stage_latency_seconds per stage (quantiles 0.5, 0.9,
// 0.99, 1 of the recent window; _sum and _count since Build()), counters
// (batches, samples, bytes delivered, buffer waits, skipped samples,
// auto-tuning's changes) and gauges (workers, CPUs, pinned bytes, the
// active workers and prefetch depth auto-tuning set). `labels` (name, value)
// are added to every sample, e.g. {{"rank", "3"}}; values are escaped.
// InvalidArgument naming a label name that is not [a-zA-Z_][a-zA-Z0-9_]* or is
// "stage" or "quantile". Thread-safe.
absl::StatusOr<std::string> StatsToPrometheus(
    const LoaderStats& stats,
    const std::vector<std::pair<std::string, std::string>>& labels = {});

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TELEMETRY_STATS_EXPORT_H_
