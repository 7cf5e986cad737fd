#include "samples/bench/report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include "loader/loader_options.h"

namespace pinwheel::bench {
namespace {

constexpr double kMB = 1e6;

double PerBatch(double total, int64_t batches) {
  return batches > 0 ? total / static_cast<double>(batches) : 0;
}

// "-" for a figure that does not apply to the row.
std::string Cell(double v, int decimals, bool applies) {
  if (!applies || !std::isfinite(v)) return "-";
  return absl::StrFormat("%.*f", decimals, v);
}

}  // namespace

double Row::gbps() const {
  const Measurement& m = measurement;
  return m.wall_seconds > 0
             ? static_cast<double>(m.bytes) / m.wall_seconds / 1e9
             : 0;
}

double Row::batches_per_second() const {
  const Measurement& m = measurement;
  return m.wall_seconds > 0 ? static_cast<double>(m.batches) / m.wall_seconds
                            : 0;
}

double Row::ratio_to_raw() const {
  return raw_gbps > 0 ? gbps() / raw_gbps : 0;
}

double Row::ratio_to_w2_raw() const {
  return w2_raw_batches_per_second > 0
             ? batches_per_second() / w2_raw_batches_per_second
             : 0;
}

double Row::cpu_ms_per_batch() const {
  return PerBatch(measurement.cpu_seconds * 1e3, measurement.batches);
}

double Row::cpu_cores() const {
  return measurement.wall_seconds > 0
             ? measurement.cpu_seconds / measurement.wall_seconds
             : 0;
}

double Row::wait_ms_per_batch() const {
  return PerBatch(measurement.consumer_wait_seconds * 1e3, measurement.batches);
}

double Row::step_ms() const {
  return PerBatch(measurement.wall_seconds * 1e3, measurement.batches);
}

double Row::step_overhead() const {
  return compute_ms > 0 && measurement.batches > 0 ? step_ms() / compute_ms - 1
                                                   : 0;
}

std::string Row::Label() const {
  if (method != "pinwheel") return method;
  auto knob = [](int n) {
    return n == LoaderOptions::kAuto ? std::string("auto") : absl::StrCat(n);
  };
  std::string label =
      absl::StrFormat("%s %sx%s", method, knob(workers), knob(prefetch));
  if (device_buffers != 2) absl::StrAppend(&label, "x", device_buffers);
  if (!stores.empty()) absl::StrAppend(&label, " ", stores);
  if (gather) absl::StrAppend(&label, " gather");
  return label;
}

Spread SpreadOf(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(),
                              [](double v) { return !std::isfinite(v); }),
               values.end());
  Spread s;
  s.n = static_cast<int>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.median =
      n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

namespace {

// Returns the spread of `figure` over the measured repetitions of `row`,
// leaving out those where `applies` is false.
template <typename Figure, typename Applies>
Spread SpreadOver(const RepeatedRow& row, Figure figure, Applies applies) {
  std::vector<double> values;
  for (const Row& r : row.reps) {
    if (!r.skipped && r.measurement.batches > 0 && applies(r)) {
      values.push_back(figure(r));
    }
  }
  return SpreadOf(std::move(values));
}

template <typename Figure>
Spread SpreadOver(const RepeatedRow& row, Figure figure) {
  return SpreadOver(row, figure, [](const Row&) { return true; });
}

bool MovesBytes(const Row& r) { return r.measurement.bytes > 0; }

double PerBatchUs(double seconds, const Row& r) {
  return PerBatch(seconds * 1e6, r.measurement.batches);
}

}  // namespace

Spread RepeatedRow::gbps() const {
  return SpreadOver(
      *this, [](const Row& r) { return r.gbps(); }, MovesBytes);
}
Spread RepeatedRow::batches_per_second() const {
  return SpreadOver(*this, [](const Row& r) { return r.batches_per_second(); });
}
Spread RepeatedRow::ratio_to_raw() const {
  return SpreadOver(
      *this, [](const Row& r) { return r.ratio_to_raw(); },
      [](const Row& r) { return MovesBytes(r) && r.raw_gbps > 0; });
}
Spread RepeatedRow::step_overhead() const {
  return SpreadOver(
      *this, [](const Row& r) { return r.step_overhead(); },
      [](const Row& r) {
        return r.compute_ms > 0 && r.method != "compute_alone";
      });
}
Spread RepeatedRow::ratio_to_w2_raw() const {
  return SpreadOver(
      *this, [](const Row& r) { return r.ratio_to_w2_raw(); },
      [](const Row& r) { return r.w2_raw_batches_per_second > 0; });
}
Spread RepeatedRow::cpu_ms_per_batch() const {
  return SpreadOver(*this, [](const Row& r) { return r.cpu_ms_per_batch(); });
}
Spread RepeatedRow::cpu_cores() const {
  return SpreadOver(*this, [](const Row& r) { return r.cpu_cores(); });
}
Spread RepeatedRow::wait_ms_per_batch() const {
  return SpreadOver(*this, [](const Row& r) { return r.wait_ms_per_batch(); });
}
Spread RepeatedRow::step_ms() const {
  return SpreadOver(*this, [](const Row& r) { return r.step_ms(); });
}
Spread RepeatedRow::slot_wait_us() const {
  return SpreadOver(*this, [](const Row& r) {
    return PerBatchUs(r.measurement.slot_wait_seconds, r);
  });
}
Spread RepeatedRow::copy_idle_us() const {
  return SpreadOver(*this, [](const Row& r) {
    return PerBatchUs(r.measurement.copy_idle_seconds, r);
  });
}
Spread RepeatedRow::buffer_wait_us() const {
  return SpreadOver(*this, [](const Row& r) {
    return PerBatchUs(r.measurement.buffer_wait_seconds, r);
  });
}
Spread RepeatedRow::copy_issue_us() const {
  return SpreadOver(*this, [](const Row& r) {
    return PerBatchUs(r.measurement.copy_issue_seconds, r);
  });
}

std::string RateText(double v) {
  if (v >= 1000) {
    const int64_t rounded = static_cast<int64_t>(std::llround(v));
    std::string digits = absl::StrCat(rounded);
    std::string out;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
      out += digits[i];
    }
    return out;
  }
  return absl::StrFormat("%.1f", v);
}

namespace {

std::string Rate(double v) { return RateText(v); }

// "1,110 [916-1,270]"; "-" when there is no value.
std::string RateSpread(const Spread& s) {
  if (s.n == 0) return "-";
  if (s.n == 1) return Rate(s.median);
  return absl::StrFormat("%s [%s-%s]", Rate(s.median), Rate(s.min),
                         Rate(s.max));
}

// The "vs ref" cell: W1/W2 the ratio to raw, W3 the step overhead.
std::string VersusReference(const RepeatedRow& row) {
  const Spread ratio = row.ratio_to_raw();
  if (ratio.n > 0) {
    if (ratio.n == 1) return absl::StrFormat("%.3f", ratio.median);
    return absl::StrFormat("%.3f [%.3f-%.3f]", ratio.median, ratio.min,
                           ratio.max);
  }
  const Spread overhead = row.step_overhead();
  if (overhead.n > 0) {
    if (overhead.n == 1)
      return absl::StrFormat("%+.1f%%", overhead.median * 100);
    return absl::StrFormat("%+.1f%% [%+.1f%%..%+.1f%%]", overhead.median * 100,
                           overhead.min * 100, overhead.max * 100);
  }
  return "-";
}

std::string Median(const Spread& s, int decimals) {
  return s.n > 0 ? absl::StrFormat("%.*f", decimals, s.median) : "-";
}

constexpr absl::string_view kSummaryFormat =
    "%-22s %3s %8s %26s %28s %9s %5s %9s %8s %9s %8s  %s\n";

}  // namespace

void PrintRepetition(const Row& row, int repetitions) {
  const bool measured = !row.skipped && row.measurement.batches > 0;
  if (!measured) return;
  std::string versus;
  if (MovesBytes(row) && row.raw_gbps > 0) {
    versus = absl::StrFormat(", %.3f of raw %.2f GB/s", row.ratio_to_raw(),
                             row.raw_gbps);
  } else if (row.compute_ms > 0 && row.method != "compute_alone") {
    versus = absl::StrFormat(", step %+.1f%% vs compute %.3f ms",
                             row.step_overhead() * 100, row.compute_ms);
  }
  if (row.w2_raw_batches_per_second > 0) {
    absl::StrAppendFormat(&versus, ", %.3f of w2's raw %s batches/s",
                          row.ratio_to_w2_raw(),
                          Rate(row.w2_raw_batches_per_second));
  }
  if (row.workers == LoaderOptions::kAuto ||
      row.prefetch == LoaderOptions::kAuto) {
    const Measurement& m = row.measurement;
    absl::StrAppendFormat(
        &versus,
        "; auto now %dx%d after %d changes, the last at batch %d, "
        "pinned %zu bytes at most",
        m.auto_workers, m.auto_prefetch, m.auto_changes, m.auto_settled_batch,
        m.pinned_bytes_peak);
  }
  absl::PrintF(
      "  rep %d/%d %s %s: %s batches/s, %.2f GB/s%s, cpu %.1f us/b (%.1f "
      "cores)\n",
      row.repetition, repetitions, row.workload, row.Label(),
      Rate(row.batches_per_second()), row.gbps(), versus,
      row.cpu_ms_per_batch() * 1e3, row.cpu_cores());
  std::fflush(stdout);
}

void PrintSummaryHeader(absl::string_view title) {
  absl::PrintF("\n%s\n", title);
  absl::PrintF(kSummaryFormat, "row", "n", "GB/s", "batches/s [min-max]",
               "vs ref [min-max]", "cpu us/b", "cores", "wait us/b", "step ms",
               "pinned MB", "dev MB", "note (medians)");
  std::fflush(stdout);
}

void PrintSummaryRow(const RepeatedRow& row) {
  if (row.skipped()) {
    const Row& c = row.reps.empty() ? Row{} : row.config();
    absl::PrintF(kSummaryFormat, c.Label(), "0", "-", "-", "-", "-", "-", "-",
                 "-", "-", "-", c.note);
    std::fflush(stdout);
    return;
  }
  const Row& c = row.config();
  const bool pinwheel = c.method == "pinwheel";
  std::string note = c.note;
  if (pinwheel) {
    note = absl::StrFormat(
        "per batch: slot wait %.1f us, copy idle %.1f us, buffer wait %.1f "
        "us, copy issue %.1f us, issued by the worker %.0f%%",
        row.slot_wait_us().median, row.copy_idle_us().median,
        row.buffer_wait_us().median, row.copy_issue_us().median,
        100 * SpreadOver(row, [](const Row& r) {
                return r.measurement.copied_by_submitter;
              }).median);
    if (c.measurement.order_on_device) {
      note = "order on the device; " + note;
    }
    for (const Row& r : row.reps) {
      const Measurement& m = r.measurement;
      if (m.pinned_bytes != m.pinned_bytes_first ||
          m.device_bytes != m.device_bytes_first) {
        note = absl::StrFormat(
            "MEMORY GREW in rep %d: pinned %d -> %d, device %d -> %d; %s",
            r.repetition, m.pinned_bytes_first, m.pinned_bytes,
            m.device_bytes_first, m.device_bytes, note);
        break;
      }
    }
  }
  const Spread w2_raw = row.ratio_to_w2_raw();
  if (w2_raw.n > 0) {  // w2w
    note = absl::StrFormat("vs w2's raw copy %.3f [%.3f-%.3f] (batches/s); %s",
                           w2_raw.median, w2_raw.min, w2_raw.max, note);
  }
  const Spread cpu = row.cpu_ms_per_batch();
  const Spread wait = row.wait_ms_per_batch();
  absl::PrintF(
      kSummaryFormat, c.Label(), absl::StrCat(row.reps.size()),
      Median(row.gbps(), 2), RateSpread(row.batches_per_second()),
      VersusReference(row),
      cpu.n > 0 ? absl::StrFormat("%.1f", cpu.median * 1e3) : "-",
      Median(row.cpu_cores(), 1),
      pinwheel && wait.n > 0 ? absl::StrFormat("%.1f", wait.median * 1e3) : "-",
      Median(row.step_ms(), 3), Cell(c.measurement.pinned_bytes / kMB, 1, true),
      Cell(c.measurement.device_bytes / kMB, 1, true), note);
  std::fflush(stdout);
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
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
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  return absl::StrFormat("%.6g", v);
}

std::string JsonObject(
    const std::vector<std::pair<std::string, std::string>>& fields) {
  return absl::StrCat(
      "{",
      absl::StrJoin(
          fields, ",",
          [](std::string* out, const std::pair<std::string, std::string>& f) {
            absl::StrAppend(out, JsonString(f.first), ":", f.second);
          }),
      "}");
}

std::string RowToJson(const Row& row) {
  const Measurement& m = row.measurement;
  auto integer = [](int64_t v) { return absl::StrCat(v); };
  return JsonObject({
      {"kind", JsonString("rep")},
      {"workload", JsonString(row.workload)},
      {"method", JsonString(row.method)},
      {"label", JsonString(row.Label())},
      {"workers", integer(row.workers)},
      {"prefetch", integer(row.prefetch)},
      {"device_buffers", integer(row.device_buffers)},
      {"stores", JsonString(row.stores)},
      {"gather", row.gather ? "true" : "false"},
      {"repetition", integer(row.repetition)},
      {"skipped", row.skipped ? "true" : "false"},
      {"note", JsonString(row.note)},
      {"batches", integer(m.batches)},
      {"bytes", integer(m.bytes)},
      {"bytes_per_batch", integer(m.batches > 0 ? m.bytes / m.batches : 0)},
      {"wall_s", JsonNumber(m.wall_seconds)},
      {"cpu_s", JsonNumber(m.cpu_seconds)},
      {"gbps", JsonNumber(row.gbps())},
      {"batches_per_s", JsonNumber(row.batches_per_second())},
      {"raw_gbps", JsonNumber(row.raw_gbps)},
      {"ratio_to_raw", JsonNumber(row.ratio_to_raw())},
      {"cpu_ms_per_batch", JsonNumber(row.cpu_ms_per_batch())},
      {"cpu_cores", JsonNumber(row.cpu_cores())},
      {"consumer_wait_ms_per_batch", JsonNumber(row.wait_ms_per_batch())},
      {"consumer_wait_p50_us", JsonNumber(m.consumer_wait_p50_us)},
      {"consumer_wait_p99_us", JsonNumber(m.consumer_wait_p99_us)},
      {"consumer_wait_max_us", JsonNumber(m.consumer_wait_max_us)},
      {"slot_wait_us_per_batch",
       JsonNumber(PerBatchUs(m.slot_wait_seconds, row))},
      {"copy_idle_us_per_batch",
       JsonNumber(PerBatchUs(m.copy_idle_seconds, row))},
      {"buffer_wait_us_per_batch",
       JsonNumber(PerBatchUs(m.buffer_wait_seconds, row))},
      {"copy_issue_us_per_batch",
       JsonNumber(PerBatchUs(m.copy_issue_seconds, row))},
      {"copied_by_submitter", JsonNumber(m.copied_by_submitter)},
      {"step_ms", JsonNumber(row.step_ms())},
      {"compute_ms", JsonNumber(row.compute_ms)},
      {"step_overhead", JsonNumber(row.step_overhead())},
      {"pinned_bytes", integer(static_cast<int64_t>(m.pinned_bytes))},
      {"device_bytes", integer(static_cast<int64_t>(m.device_bytes))},
      {"pinned_bytes_first",
       integer(static_cast<int64_t>(m.pinned_bytes_first))},
      {"device_bytes_first",
       integer(static_cast<int64_t>(m.device_bytes_first))},
      {"w2_raw_batches_per_s", JsonNumber(row.w2_raw_batches_per_second)},
      {"ratio_to_w2_raw", JsonNumber(row.ratio_to_w2_raw())},
      {"pinned_bytes_peak", integer(static_cast<int64_t>(m.pinned_bytes_peak))},
      {"auto_workers", integer(m.auto_workers)},
      {"auto_prefetch", integer(m.auto_prefetch)},
      {"auto_changes", integer(m.auto_changes)},
      {"auto_settled_batch", integer(m.auto_settled_batch)},
  });
}

std::string RepeatedRowToJson(const RepeatedRow& row) {
  const Row c = row.reps.empty() ? Row{} : row.config();
  auto integer = [](int64_t v) { return absl::StrCat(v); };
  std::vector<std::pair<std::string, std::string>> fields = {
      {"kind", JsonString("row")},
      {"workload", JsonString(c.workload)},
      {"method", JsonString(c.method)},
      {"label", JsonString(c.Label())},
      {"workers", integer(c.workers)},
      {"prefetch", integer(c.prefetch)},
      {"device_buffers", integer(c.device_buffers)},
      {"stores", JsonString(c.stores)},
      {"gather", c.gather ? "true" : "false"},
      {"skipped", row.skipped() ? "true" : "false"},
      {"note", JsonString(c.note)},
      {"repetitions",
       integer(row.skipped() ? 0 : static_cast<int64_t>(row.reps.size()))},
      {"bytes_per_batch",
       integer(c.measurement.batches > 0
                   ? c.measurement.bytes / c.measurement.batches
                   : 0)},
      {"batches", integer(c.measurement.batches)},
      {"pinned_bytes",
       integer(static_cast<int64_t>(c.measurement.pinned_bytes))},
      {"device_bytes",
       integer(static_cast<int64_t>(c.measurement.device_bytes))},
  };
  // The median under the single-row name; min and max beside where asked.
  auto add = [&fields](const std::string& name, const Spread& s,
                       bool with_range) {
    fields.emplace_back(name, s.n > 0 ? JsonNumber(s.median) : "null");
    if (with_range) {
      fields.emplace_back(name + "_min", s.n > 0 ? JsonNumber(s.min) : "null");
      fields.emplace_back(name + "_max", s.n > 0 ? JsonNumber(s.max) : "null");
    }
  };
  add("gbps", row.gbps(), true);
  add("batches_per_s", row.batches_per_second(), true);
  add("ratio_to_raw", row.ratio_to_raw(), true);
  add("step_overhead", row.step_overhead(), true);
  add("cpu_ms_per_batch", row.cpu_ms_per_batch(), true);
  add("cpu_cores", row.cpu_cores(), false);
  add("consumer_wait_ms_per_batch", row.wait_ms_per_batch(), false);
  add("slot_wait_us_per_batch", row.slot_wait_us(), false);
  add("copy_idle_us_per_batch", row.copy_idle_us(), false);
  add("buffer_wait_us_per_batch", row.buffer_wait_us(), false);
  add("copy_issue_us_per_batch", row.copy_issue_us(), false);
  add("step_ms", row.step_ms(), true);
  std::vector<double> compute;
  for (const Row& r : row.reps) compute.push_back(r.compute_ms);
  add("compute_ms", SpreadOf(compute), false);
  add("ratio_to_w2_raw", row.ratio_to_w2_raw(), true);
  return JsonObject(fields);
}

absl::StatusOr<JsonLinesWriter> JsonLinesWriter::Open(const std::string& path) {
  JsonLinesWriter writer;
  writer.file_ = std::fopen(path.c_str(), "w");
  if (writer.file_ == nullptr) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot open --json=%s for writing", path));
  }
  writer.path_ = path;
  return writer;
}

JsonLinesWriter::JsonLinesWriter(JsonLinesWriter&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      path_(std::move(other.path_)) {}

JsonLinesWriter& JsonLinesWriter::operator=(JsonLinesWriter&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = std::exchange(other.file_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

JsonLinesWriter::~JsonLinesWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status JsonLinesWriter::Write(absl::string_view json) {
  if (file_ == nullptr) return absl::OkStatus();
  if (std::fwrite(json.data(), 1, json.size(), file_) != json.size() ||
      std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("cannot write to --json=%s", path_));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::bench
