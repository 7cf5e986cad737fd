// Report: what one benchmark row measured, and the two ways it is written
// out: a fixed-width table on stdout and one JSON object a line (JSON Lines)
// for plot.py and for the README's table.
//
// Example:
//   Row row{.workload = "w1", .method = "pinwheel", .workers = 8};
//   row.measurement = ...;
//   PrintRow(row);
//   PINWHEEL_RETURN_IF_ERROR(json.Write(RowToJson(row)));
#ifndef PINWHEEL_SAMPLES_BENCH_REPORT_H_
#define PINWHEEL_SAMPLES_BENCH_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel::bench {

// What one timed loop saw. Every duration is in seconds and covers the timed
// batches only (warm-up excluded).
struct Measurement {
  int64_t batches = 0;      // batches timed
  int64_t bytes = 0;        // bytes those batches moved to the device
  double wall_seconds = 0;  // wall time of the loop, final sync included
  double cpu_seconds = 0;   // getrusage(RUSAGE_SELF) user+sys delta
  double consumer_wait_seconds = 0;  // time blocked in Loader::Next()
  size_t pinned_bytes = 0;           // page-locked bytes held while timing
  size_t device_bytes = 0;           // device bytes held while timing
  // Memory after the first timed batch and at the end: must not change.
  size_t pinned_bytes_first = 0;
  size_t device_bytes_first = 0;
  // Where the pipeline waited while timing (pinwheel rows), seconds in all:
  double slot_wait_seconds = 0;    // workers waiting for a free pinned slot
  double buffer_wait_seconds = 0;  // copy thread waiting for a device buffer
  double copy_idle_seconds = 0;    // copy thread waiting for a filled slot
  double copy_issue_seconds = 0;   // copy thread inside cudaMemcpyAsync+record
};

// One row of the table: a method at one configuration on one workload.
struct Row {
  std::string workload;  // "w1", "w2", "w3"
  std::string method;    // "raw_pinned", "pageable", "naive", "pinwheel",
                         // "compute_alone"
  int workers = 0;       // pinwheel: worker threads; naive: collate threads
  int prefetch = 0;      // pinwheel: pinned slots
  int device_buffers = 0;
  bool skipped = false;  // not measured; `note` says why
  std::string note;
  Measurement measurement;
  // The same workload's raw pinned copy rate in GB/s; 0 when not measured.
  double raw_gbps = 0;
  // W3: milliseconds of the compute step alone (cuda events); 0 otherwise.
  double compute_ms = 0;

  // Derived figures; each returns 0 when the row has no batches.
  double gbps() const;  // bytes / wall time, in 1e9 bytes/s
  double batches_per_second() const;
  double ratio_to_raw() const;  // gbps() / raw_gbps, 0 when unknown
  double cpu_ms_per_batch() const;
  double wait_ms_per_batch() const;  // consumer wait / batches
  double step_ms() const;            // wall time / batches
};

// Writes the table's title line for a workload and its column header.
void PrintTableHeader(absl::string_view title);
// Writes one table line for `row` and flushes stdout.
void PrintRow(const Row& row);

// Returns `row` as one JSON object (no newline). Non-finite numbers become
// null so the line stays valid JSON.
std::string RowToJson(const Row& row);

// Returns a JSON object of `fields` (key, already-encoded JSON value).
std::string JsonObject(
    const std::vector<std::pair<std::string, std::string>>& fields);
// Returns `s` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view s);
// Returns `v` as a JSON number, or null when it is not finite.
std::string JsonNumber(double v);

// Appends JSON lines to a file. Thread-compatible. Move-only.
class JsonLinesWriter {
 public:
  // Returns a writer that discards every line (no --json given).
  JsonLinesWriter() = default;
  // Returns a writer truncating `path`, or NotFound/PermissionDenied-style
  // Internal naming the path and errno's message.
  [[nodiscard]] static absl::StatusOr<JsonLinesWriter> Open(
      const std::string& path);

  JsonLinesWriter(JsonLinesWriter&& other) noexcept;
  JsonLinesWriter& operator=(JsonLinesWriter&& other) noexcept;
  JsonLinesWriter(const JsonLinesWriter&) = delete;
  JsonLinesWriter& operator=(const JsonLinesWriter&) = delete;
  ~JsonLinesWriter();

  // Writes `json` and a newline, flushed at once so a crash keeps the
  // rows measured so far.
  [[nodiscard]] absl::Status Write(absl::string_view json);

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_REPORT_H_
