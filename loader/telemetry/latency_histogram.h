// LatencyHistogram: the distribution of one stage's latencies, cheap enough
// to leave on: a fixed array of log-spaced buckets (HdrHistogram-style: 32
// per power of two, so a bucket is at most 1/32 = 3.1 % wide and a
// percentile read at its midpoint is within 1.6 %) counted with relaxed
// atomics, plus a ring of the last kRecent values for a window's exact
// percentiles. Record() takes no lock and allocates nothing.
//
// Example:
//   LatencyHistogram reads;
//   const absl::Time start = absl::Now();
//   Fill(batch);
//   reads.Record(absl::Now() - start);        // any thread
//   LatencySummary all = reads.Summary();     // since it was made
//   LatencySummary last = reads.Recent();     // the last kRecent values
//
// Note [why not a library]
// Debian packages HdrHistogram_c (libhdr-histogram-dev), but its
// hdr_record_value is not safe from several threads at once (the atomic
// variant, hdr_interval_recorder, swaps whole histograms and allocates);
// prometheus-cpp's Summary takes a mutex per observation and keeps a
// time-window of quantile estimators. Workers record concurrently, per
// batch, so ~100 lines of buckets with fetch_add cost less than either
// and add no dependency to the installed library.
#ifndef PINWHEEL_LOADER_TELEMETRY_LATENCY_HISTOGRAM_H_
#define PINWHEEL_LOADER_TELEMETRY_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace pinwheel {

// Percentiles of a set of latencies; all zero when count is 0. A value;
// thread-compatible.
struct LatencySummary {
  int64_t count = 0;
  absl::Duration p50 = absl::ZeroDuration();
  absl::Duration p90 = absl::ZeroDuration();
  absl::Duration p99 = absl::ZeroDuration();
  absl::Duration max = absl::ZeroDuration();
  absl::Duration mean = absl::ZeroDuration();
  absl::Duration sum = absl::ZeroDuration();
};

// Thread-safe: Record() from any number of threads, Summary() and Recent()
// at any time (a snapshot taken while values arrive may count a value in
// one bucket array but not yet in the ring, never a torn value).
class LatencyHistogram {
 public:
  // Values kept for Recent().
  static constexpr int kRecent = 1024;
  // Buckets per power of two of nanoseconds.
  static constexpr int kSubBuckets = 32;
  // Values from 0 to 2^41 ns (36 minutes); longer ones count in the last
  // bucket (max still says how long).
  static constexpr int kMaxExponent = 41;
  static constexpr int kBuckets = kSubBuckets * (kMaxExponent - 4);

  LatencyHistogram() = default;
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  // Counts `latency` (negative ones as zero).
  void Record(absl::Duration latency);

  // Every value recorded since it was made, percentiles from the buckets.
  LatencySummary Summary() const;
  // The last kRecent values recorded (fewer before that many came), exact.
  LatencySummary Recent() const;

  // Returns the bucket of `nanos` >= 0, and the smallest value in bucket
  // `index` (for tests).
  static int BucketOf(int64_t nanos);
  static int64_t BucketStart(int index);

 private:
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<int64_t> sum_nanos_{0};
  std::atomic<int64_t> max_nanos_{0};
  std::atomic<uint64_t> next_recent_{0};
  std::array<std::atomic<int64_t>, kRecent> recent_{};
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TELEMETRY_LATENCY_HISTOGRAM_H_
