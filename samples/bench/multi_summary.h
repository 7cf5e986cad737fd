// pinwheel_multi_bench's arithmetic: every rank's share of each repetition
// of a row turned into per-rank and aggregate rates, each as median
// [min-max] over the repetitions, and the lines it prints and writes.
//
// The aggregate of one repetition is every rank's bytes over the time until
// the last one finished (all started together); its ratio to the raw copy
// is against the aggregate raw copy measured in the same repetition, and
// the ratio's median is the median of those per-repetition ratios.
//
// Example:
//   MultiRow row{.workload = "w1", .path = "workers",
//                .batch_bytes = 38535168};
//   row.reps.push_back(shares_of_every_rank);  // one entry a repetition
//   row.raw_gbps.push_back(raw_aggregate_of_that_repetition);
//   for (const MultiLine& line : Summarize(row)) PrintMultiLine(row, line);
#ifndef PINWHEEL_SAMPLES_BENCH_MULTI_SUMMARY_H_
#define PINWHEEL_SAMPLES_BENCH_MULTI_SUMMARY_H_

#include <string>
#include <vector>

#include "samples/bench/report.h"

namespace pinwheel::bench {

// One rank's share of one repetition.
struct RankShare {
  double batches = 0;      // units moved (batches; bytes for memcpy)
  double seconds = 0;      // from the common start to its end
  double cpu_seconds = 0;  // its process CPU time over that span; 0: unknown
};

// A row measured several times on every rank. Thread-compatible.
struct MultiRow {
  std::string workload;    // "w1", "w2", "host"
  std::string path;        // "raw", "workers", "gather", "memcpy"
  double batch_bytes = 0;  // bytes a unit of `batches` moves
  // reps[r][rank]: every rank's share of repetition r.
  std::vector<std::vector<RankShare>> reps;
  // The aggregate raw copy (GB/s) of each repetition; empty: none measured.
  std::vector<double> raw_gbps;
};

// One printed line: a rank's, or "all" (the aggregate).
struct MultiLine {
  std::string who;  // "rank 0", ..., "all"
  Spread gbps;
  Spread batches_per_second;
  Spread ratio_to_raw;  // n == 0 without a raw copy
  Spread cores;         // CPU time / wall; summed over ranks for "all"
};

// Returns the aggregate GB/s of one repetition (every rank's bytes over the
// longest rank's time); 0 when no rank has time.
double AggregateGbps(const std::vector<RankShare>& ranks, double batch_bytes);

// Returns one line per rank (when there are several) and the "all" line.
std::vector<MultiLine> Summarize(const MultiRow& row);

// Returns the line that sets a loader row's aggregate beside its limits:
// "w1 workers: 59.3 GB/s, 0.540 of the raw copy, 1.32x the host memcpy rate
// (45.0 GB/s), 0.97 of the staged copy (61.1 GB/s)" (medians; the raw part
// only when a raw copy was measured, the staged part when staged_gbps > 0).
std::string BesideLimits(const MultiRow& row, double memcpy_gbps,
                         double staged_gbps = 0);

// Writes the header of the summary table.
void PrintMultiHeader();
// Writes one line of the table ("w1 workers  rank 0  ...").
void PrintMultiLine(const MultiRow& row, const MultiLine& line);
// Returns the line as a JSON object (kind "multi_row"), with `context`
// (already-encoded JSON fields: launcher, processes, cpus, ...) appended.
std::string MultiLineToJson(
    const MultiRow& row, const MultiLine& line,
    const std::vector<std::pair<std::string, std::string>>& context);

}  // namespace pinwheel::bench

#endif  // PINWHEEL_SAMPLES_BENCH_MULTI_SUMMARY_H_
