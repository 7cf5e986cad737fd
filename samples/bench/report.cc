#include "samples/bench/report.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

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

double Row::cpu_ms_per_batch() const {
  return PerBatch(measurement.cpu_seconds * 1e3, measurement.batches);
}

double Row::wait_ms_per_batch() const {
  return PerBatch(measurement.consumer_wait_seconds * 1e3, measurement.batches);
}

double Row::step_ms() const {
  return PerBatch(measurement.wall_seconds * 1e3, measurement.batches);
}

void PrintTableHeader(absl::string_view title) {
  absl::PrintF("\n%s\n", title);
  absl::PrintF("%-14s %4s %4s %8s %10s %6s %9s %10s %10s %9s %8s  %s\n",
               "method", "wrk", "pre", "GB/s", "batches/s", "xraw", "cpu ms/b",
               "pinned MB", "device MB", "wait ms/b", "step ms", "note");
  std::fflush(stdout);
}

void PrintRow(const Row& row) {
  const bool pinwheel = row.method == "pinwheel";
  const bool measured = !row.skipped && row.measurement.batches > 0;
  const bool moves_bytes = measured && row.measurement.bytes > 0;
  std::string note = row.note;
  if (measured && row.compute_ms > 0 && row.method != "compute_alone") {
    absl::StrAppend(&note, note.empty() ? "" : "; ",
                    absl::StrFormat("step %+.1f%% vs compute %.3f ms",
                                    (row.step_ms() / row.compute_ms - 1) * 100,
                                    row.compute_ms));
  }
  absl::PrintF("%-14s %4s %4s %8s %10s %6s %9s %10s %10s %9s %8s  %s\n",
               row.method, row.workers > 0 ? absl::StrCat(row.workers) : "-",
               row.prefetch > 0 ? absl::StrCat(row.prefetch) : "-",
               Cell(row.gbps(), 2, moves_bytes),
               Cell(row.batches_per_second(), 1, measured),
               Cell(row.ratio_to_raw(), 3, moves_bytes && row.raw_gbps > 0),
               Cell(row.cpu_ms_per_batch(), 3, measured),
               Cell(row.measurement.pinned_bytes / kMB, 1, measured),
               Cell(row.measurement.device_bytes / kMB, 1, measured),
               Cell(row.wait_ms_per_batch(), 3, measured && pinwheel),
               Cell(row.step_ms(), 3, measured), note);
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
      {"kind", JsonString("row")},
      {"workload", JsonString(row.workload)},
      {"method", JsonString(row.method)},
      {"workers", integer(row.workers)},
      {"prefetch", integer(row.prefetch)},
      {"device_buffers", integer(row.device_buffers)},
      {"skipped", row.skipped ? "true" : "false"},
      {"note", JsonString(row.note)},
      {"batches", integer(m.batches)},
      {"bytes", integer(m.bytes)},
      {"bytes_per_batch", integer(m.batches > 0 ? m.bytes / m.batches : 0)},
      {"wall_s", JsonNumber(m.wall_seconds)},
      {"gbps", JsonNumber(row.gbps())},
      {"batches_per_s", JsonNumber(row.batches_per_second())},
      {"raw_gbps", JsonNumber(row.raw_gbps)},
      {"ratio_to_raw", JsonNumber(row.ratio_to_raw())},
      {"cpu_ms_per_batch", JsonNumber(row.cpu_ms_per_batch())},
      {"consumer_wait_ms_per_batch", JsonNumber(row.wait_ms_per_batch())},
      {"step_ms", JsonNumber(row.step_ms())},
      {"compute_ms", JsonNumber(row.compute_ms)},
      {"pinned_bytes", integer(static_cast<int64_t>(m.pinned_bytes))},
      {"device_bytes", integer(static_cast<int64_t>(m.device_bytes))},
      {"pinned_bytes_first",
       integer(static_cast<int64_t>(m.pinned_bytes_first))},
      {"device_bytes_first",
       integer(static_cast<int64_t>(m.device_bytes_first))},
  });
}

absl::StatusOr<JsonLinesWriter> JsonLinesWriter::Open(const std::string& path) {
  JsonLinesWriter writer;
  writer.file_ = std::fopen(path.c_str(), "w");
  if (writer.file_ == nullptr) {
    return absl::InternalError(absl::StrFormat(
        "cannot open --json=%s for writing: %s", path, std::strerror(errno)));
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
    return absl::InternalError(absl::StrFormat("cannot write to --json=%s: %s",
                                               path_, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace pinwheel::bench
