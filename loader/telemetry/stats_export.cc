#include "loader/telemetry/stats_export.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

#include "loader/telemetry/stall_verdict.h"

namespace pinwheel {
namespace {

// `text` as a JSON string, quotes included.
std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%.9g", absl::ToDoubleSeconds(d));
}

std::string JsonSummary(const LatencySummary& s) {
  return absl::StrCat(
      "{\"count\":", s.count, ",\"p50_s\":", Seconds(s.p50),
      ",\"p90_s\":", Seconds(s.p90), ",\"p99_s\":", Seconds(s.p99),
      ",\"max_s\":", Seconds(s.max), ",\"mean_s\":", Seconds(s.mean),
      ",\"sum_s\":", Seconds(s.sum), "}");
}

// A Prometheus label value: backslash, quote and newline escaped.
std::string LabelValue(absl::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string StatsToJson(const LoaderStats& stats) {
  std::string out = absl::StrCat(
      "{\"batches_delivered\":", stats.batches_delivered,
      ",\"samples_delivered\":", stats.samples_delivered,
      ",\"bytes_delivered\":", stats.bytes_delivered,
      ",\"samples_skipped\":", stats.samples_skipped,
      ",\"samples_replaced\":", stats.samples_replaced,
      ",\"epochs_completed\":", stats.epochs_completed,
      ",\"consumer_wait_s\":", Seconds(stats.consumer_wait),
      ",\"consumer_wait_behind_buffers_s\":",
      Seconds(stats.consumer_wait_behind_buffers),
      ",\"buffer_waits\":", stats.transfer.buffer_waits,
      ",\"num_workers\":", stats.num_workers,
      ",\"cpus\":", stats.cpu_budget.cpus,
      ",\"cpus_limited_by\":", JsonString(stats.cpu_budget.limited_by),
      ",\"worker_cpus\":", JsonString(stats.cpu_budget.worker_cpu_list),
      ",\"pinned_bytes\":", stats.pinned_bytes,
      ",\"device_bytes\":", stats.device_bytes, ",\"latency\":{");
  bool first = true;
  stats.latency.ForEach([&](absl::string_view name, const StageLatency& stage) {
    absl::StrAppend(&out, first ? "" : ",", JsonString(name),
                    ":{\"total\":", JsonSummary(stage.total),
                    ",\"recent\":", JsonSummary(stage.recent), "}");
    first = false;
  });
  const AutoTuneStats& tune = stats.auto_tune;
  absl::StrAppend(
      &out, "},\"auto_tune\":{\"workers_auto\":",
      tune.workers_auto ? "true" : "false",
      ",\"prefetch_auto\":", tune.prefetch_auto ? "true" : "false",
      ",\"workers\":", tune.workers, ",\"max_workers\":", tune.max_workers,
      ",\"prefetch\":", tune.prefetch, ",\"max_prefetch\":", tune.max_prefetch,
      ",\"changes\":", tune.changes,
      ",\"last_change_batch\":", tune.last_change_batch,
      ",\"last_reason\":", JsonString(tune.last_reason),
      ",\"off_reason\":", JsonString(tune.off_reason), "}");
  absl::StrAppend(&out, ",\"verdict\":", JsonString(StallVerdictOf(stats).line),
                  "}");
  return out;
}

absl::StatusOr<std::string> StatsToPrometheus(
    const LoaderStats& stats,
    const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string common;
  for (const auto& [name, value] : labels) {
    const bool valid = !name.empty() && !absl::ascii_isdigit(name[0]) &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return absl::ascii_isalnum(c) || c == '_';
                       });
    if (!valid || name == "stage" || name == "quantile") {
      return absl::InvalidArgumentError(absl::StrCat(
          "StatsToPrometheus: label name '", name,
          valid ? "' is one the export sets itself (stage, quantile)"
                : "' is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"));
    }
    absl::StrAppend(&common, name, "=\"", LabelValue(value), "\",");
  }
  // `extra`: more labels, each `name="value",`.
  auto sample = [&](std::string& out, absl::string_view metric,
                    absl::string_view extra, absl::string_view value) {
    std::string all = absl::StrCat(common, extra);
    if (!all.empty()) all.pop_back();  // the last comma
    absl::StrAppend(&out, metric, all.empty() ? "" : "{", all,
                    all.empty() ? "" : "}", " ", value, "\n");
  };
  std::string out =
      "# HELP pinwheel_stage_latency_seconds Latency of each stage of a "
      "batch; quantiles over the last batches, sum and count since Build().\n"
      "# TYPE pinwheel_stage_latency_seconds summary\n";
  stats.latency.ForEach([&](absl::string_view name, const StageLatency& stage) {
    const std::string label = absl::StrCat("stage=\"", name, "\",");
    const LatencySummary& r = stage.recent;
    for (const auto& [q, v] :
         {std::pair<const char*, absl::Duration>{"0.5", r.p50},
          {"0.9", r.p90},
          {"0.99", r.p99},
          {"1", r.max}}) {
      sample(out, "pinwheel_stage_latency_seconds",
             absl::StrCat(label, "quantile=\"", q, "\","), Seconds(v));
    }
    sample(out, "pinwheel_stage_latency_seconds_sum", label,
           Seconds(stage.total.sum));
    sample(out, "pinwheel_stage_latency_seconds_count", label,
           absl::StrCat(stage.total.count));
  });
  auto metric = [&](absl::string_view name, absl::string_view type,
                    absl::string_view help, absl::string_view value) {
    absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
    sample(out, name, "", value);
  };
  metric("pinwheel_batches_delivered_total", "counter",
         "Batches Next() delivered.", absl::StrCat(stats.batches_delivered));
  metric("pinwheel_samples_delivered_total", "counter",
         "Samples Next() delivered.", absl::StrCat(stats.samples_delivered));
  metric("pinwheel_bytes_delivered_total", "counter",
         "Bytes copied for delivered batches.",
         absl::StrCat(stats.bytes_delivered));
  metric("pinwheel_samples_skipped_total", "counter",
         "Samples left out under kSkipSample.",
         absl::StrCat(stats.samples_skipped));
  metric("pinwheel_buffer_waits_total", "counter",
         "Writes that waited for a free device buffer.",
         absl::StrCat(stats.transfer.buffer_waits));
  metric("pinwheel_consumer_wait_seconds_total", "counter",
         "Time the consumer was blocked in Next().",
         Seconds(stats.consumer_wait));
  metric("pinwheel_consumer_wait_behind_buffers_seconds_total", "counter",
         "Of that, time the copy waited for device buffers the consumer held "
         "or had released behind its own unfinished work.",
         Seconds(stats.consumer_wait_behind_buffers));
  metric("pinwheel_workers", "gauge", "Worker threads reading.",
         absl::StrCat(stats.num_workers));
  metric("pinwheel_cpus", "gauge", "CPUs this process may keep busy.",
         absl::StrCat(stats.cpu_budget.cpus));
  metric("pinwheel_pinned_bytes", "gauge",
         "Page-locked host bytes the loader holds.",
         absl::StrCat(stats.pinned_bytes));
  // Auto-tuning (num_workers / prefetch = auto): the values now; without
  // it, the fixed ones.
  const AutoTuneStats& tune = stats.auto_tune;
  metric("pinwheel_active_workers", "gauge",
         "Workers allowed to read now (auto-tuned or num_workers).",
         absl::StrCat(tune.workers_auto ? tune.workers : stats.num_workers));
  metric("pinwheel_prefetch_depth", "gauge",
         "Pinned slots usable now (auto-tuned or prefetch).",
         absl::StrCat(tune.prefetch));
  metric("pinwheel_auto_tune_changes_total", "counter",
         "Changes auto-tuning made to workers or prefetch.",
         absl::StrCat(tune.changes));
  return out;
}

}  // namespace pinwheel
