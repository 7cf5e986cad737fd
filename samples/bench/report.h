// Report: what one benchmark row measured, once (a Row: one repetition) and
// over its repetitions (a RepeatedRow: median, min and max), and the two ways
// it is written out: a fixed-width table on stdout and one JSON object a line
// (JSON Lines) for plot.py and for the README's table.
//
// Example:
//   RepeatedRow repeated;
//   for (int r = 1; r <= 5; ++r) {
//     Row row{.workload = "w1", .method = "pinwheel", .workers = 8,
//             .repetition = r};
//     row.measurement = ...;
//     row.raw_gbps = ...;  // the raw copy measured next to this repetition
//     PrintRepetition(row, 5);
//     PINWHEEL_RETURN_IF_ERROR(json.Write(RowToJson(row)));
//     repeated.reps.push_back(row);
//   }
//   PrintSummaryHeader("w1 ...");
//   PrintSummaryRow(repeated);
//   PINWHEEL_RETURN_IF_ERROR(json.Write(RepeatedRowToJson(repeated)));
#ifndef PINWHEEL_SAMPLES_BENCH_REPORT_H_
#define PINWHEEL_SAMPLES_BENCH_REPORT_H_

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
  // Memory as the timed batches start and at their end: must not change.
  size_t pinned_bytes_first = 0;
  size_t device_bytes_first = 0;
  // Where the pipeline waited while timing (pinwheel rows), seconds in all:
  double slot_wait_seconds = 0;    // workers waiting for a free pinned slot
  double buffer_wait_seconds = 0;  // copy thread waiting for a device buffer
  double copy_idle_seconds = 0;    // copy thread waiting for a filled slot
  double copy_issue_seconds = 0;   // copy thread inside cudaMemcpyAsync+record
  // Share of the copies the submitting worker issued itself instead of the
  // copy thread (TransferStats::inline_copies over batches_copied).
  double copied_by_submitter = 0;
  // Gather rows: whether the loader computed the order on the device
  // (LoaderStats::gather_order_on_device).
  bool order_on_device = false;
  // Rows with workers or prefetch = auto (LoaderStats::auto_tune), at the
  // end of the timed loop: the values reached, the changes made, and the
  // batch (warm-up included) of the last change, i.e. when it settled.
  int auto_workers = 0;
  int auto_prefetch = 0;
  int64_t auto_changes = 0;
  int64_t auto_settled_batch = 0;
  size_t pinned_bytes_peak = 0;  // the most page-locked bytes held
  // Pinwheel rows: the consumer's wait in Next() per batch, since Build()
  // (warm-up included; LoaderStats::latency.consumer_wait.total), in us:
  // where the mean above comes from (a wait spread evenly, or a few long
  // ones, an epoch's start say).
  double consumer_wait_p50_us = 0;
  double consumer_wait_p99_us = 0;
  double consumer_wait_max_us = 0;
};

// One row of the table: a method at one configuration on one workload.
struct Row {
  std::string workload;  // "w1", "w2", "w3", "w2w"
  std::string method;    // "raw_pinned", "pageable", "naive", "pinwheel",
                         // "compute_alone"
  int workers = 0;       // pinwheel: worker threads; naive: collate threads
  int prefetch = 0;      // pinwheel: pinned slots
  int device_buffers = 0;
  // W1/W3 pinwheel rows: "nt" when the dataset writes samples with
  // non-temporal (streaming) stores, "" for memcpy (the library's
  // InMemoryDataset).
  std::string stores;
  // Pinwheel rows on the gather path (LoaderOptions::gather = kOn): keys
  // uploaded, the batch gathered by the device from registered memory.
  bool gather = false;
  int repetition = 0;    // 1-based; 0: not repeated (the memory check)
  bool skipped = false;  // not measured; `note` says why
  std::string note;
  Measurement measurement;
  // The same workload's raw pinned copy rate in GB/s, measured next to this
  // repetition (the mean of the raw rows just before and just after it); 0
  // when not measured.
  double raw_gbps = 0;
  // W3: milliseconds of the compute step alone (cuda events), measured next
  // to this repetition likewise; 0 otherwise.
  double compute_ms = 0;
  // w2w: batches/s of the raw pinned copy of W2's batch (the same tokens as
  // i64 input and target, 8x the bytes), measured next to this repetition
  // likewise: w2w's rate over it compares with W2's ratio to raw, since both
  // end with the same tensors on the device. 0 otherwise.
  double w2_raw_batches_per_second = 0;

  // Derived figures; each returns 0 when the row has no batches.
  double gbps() const;  // bytes / wall time, in 1e9 bytes/s
  double batches_per_second() const;
  double ratio_to_raw() const;  // gbps() / raw_gbps, 0 when unknown
  // batches_per_second() / w2_raw_batches_per_second, 0 when unknown.
  double ratio_to_w2_raw() const;
  double cpu_ms_per_batch() const;
  double cpu_cores() const;          // CPU seconds / wall seconds
  double wait_ms_per_batch() const;  // consumer wait / batches
  double step_ms() const;            // wall time / batches
  // W3: step_ms() / compute_ms - 1 (0.014 is 1.4 % slower than the compute
  // alone); 0 when compute_ms is unknown.
  double step_overhead() const;
  // e.g. "pinwheel 8x2", "pinwheel 8x4x4 nt" or "pinwheel 1x32x4 gather"
  // (workers x prefetch [x device buffers when not 2] [stores] [gather];
  // "auto" for LoaderOptions::kAuto); the method alone otherwise.
  std::string Label() const;
};

// One figure over repetitions. n == 0: no value.
struct Spread {
  int n = 0;
  double median = 0;  // the middle value; the mean of the two middle ones
  double min = 0;
  double max = 0;
};
// Returns the spread of the finite values among `values`.
Spread SpreadOf(std::vector<double> values);

// One row measured several times; each repetition is a Row with its own
// adjacent reference (raw_gbps or compute_ms). Thread-compatible.
struct RepeatedRow {
  std::vector<Row> reps;

  // The first repetition: the row's workload, method and configuration.
  const Row& config() const { return reps.front(); }
  bool skipped() const { return reps.empty() || reps.front().skipped; }
  // Spreads over the repetitions; figures that do not apply are n == 0.
  Spread gbps() const;
  Spread batches_per_second() const;
  // Per-repetition ratio to its adjacent raw copy: the ratio's median is
  // the median of these, not a ratio of medians.
  Spread ratio_to_raw() const;
  Spread step_overhead() const;    // W3, per repetition likewise
  Spread ratio_to_w2_raw() const;  // w2w, per repetition likewise
  Spread cpu_ms_per_batch() const;
  Spread cpu_cores() const;
  Spread wait_ms_per_batch() const;
  Spread step_ms() const;
  // The pipeline's waits per batch, in microseconds (pinwheel rows).
  Spread slot_wait_us() const;
  Spread copy_idle_us() const;
  Spread buffer_wait_us() const;
  Spread copy_issue_us() const;
};

// Returns a rate with the precision it needs: "1110.3", "41,230".
std::string RateText(double v);

// Writes one progress line for a repetition (indented, "rep r/n") and
// flushes stdout.
void PrintRepetition(const Row& row, int repetitions);

// Writes the summary table's title line and its column header.
void PrintSummaryHeader(absl::string_view title);
// Writes one summary line: medians, with [min-max] for the rate and the
// ratio to raw (or W3's step overhead), and flushes stdout.
void PrintSummaryRow(const RepeatedRow& row);

// Returns one repetition as a JSON object (no newline), kind "rep".
// Non-finite numbers become null so the line stays valid JSON.
std::string RowToJson(const Row& row);
// Returns a repeated row as a JSON object, kind "row": the medians under the
// single-row names (gbps, batches_per_s, ratio_to_raw, ...) with _min and
// _max beside the rate and the ratio, and "repetitions".
std::string RepeatedRowToJson(const RepeatedRow& row);

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
