// StatsReporter: the thread behind LoaderOptions::stats_report. It turns a
// loader's stats into one JSON object per interval (StatsToJson, with the
// report's time and number in front) and hands it to the user's callback
// and/or appends it to a JSON Lines file.
//
// Example (what Loader does):
//   PINWHEEL_ASSIGN_OR_RETURN(auto reporter,
//       StatsReporter::Start(options.stats_report, complete));
//   // the consumer, after each Next():
//   reporter->AfterNext(delivered, [&] { return core.ConsumerStats(); });
//   // at shutdown, before the loader goes:
//   reporter->Stop(core.ConsumerStats());
//
// Note [periodic stats]
// Reports must cost the consumer nothing measurable and never run user
// code under a loader lock, yet the consumer's counters (batches, samples,
// time waited) are plain fields only the consumer's thread may read. So
// the work is split: the consumer, after a Next(), checks one relaxed flag
// (and, with every_batches, a counter of its own); only when a report is
// due does it copy its counters (a few integers: LoaderCore::
// ConsumerStats()) and hand them over under the reporter's own mutex. The
// report thread then adds what is safe to read from any thread (the
// latency histograms, the ring's and the copy stage's counters: the
// `complete` function), formats the line and calls the sinks, holding no
// lock. Hand-overs queue (up to kMaxQueued; past that, while a sink is
// slower than the interval, they are dropped and the next line counts them
// in "reports_dropped"), so every_batches = 1 gets a line per batch. A
// time trigger raises the flag; when the consumer does not come
// back within the next interval (a step longer than the interval, or a
// consumer stuck in Next() on a stalled loader: exactly when a report
// matters), the report goes out anyway with the consumer's counters as of
// its last hand-over and fresh latencies. A failing sink (an error
// returned, an exception, a failed or short write) stops the reports:
// the first failure is kept for status() and said once on stderr, never
// thrown into the training loop.
#ifndef PINWHEEL_LOADER_TELEMETRY_STATS_REPORTER_H_
#define PINWHEEL_LOADER_TELEMETRY_STATS_REPORTER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "loader/loader_options.h"
#include "loader/loader_stats.h"

namespace pinwheel::internal {

// Thread-safe as documented per method: AfterNext() and Stop() from the
// consumer's thread, status() from any.
class StatsReporter {
 public:
  // Fills the parts of a LoaderStats that any thread may read (latencies,
  // ring, transfer stage) into the consumer's counters. Must be
  // thread-safe; called on the report thread.
  using Complete = std::function<void(LoaderStats* stats)>;
  // Hand-overs waiting for the report thread at most.
  static constexpr size_t kMaxQueued = 256;

  // Returns a running reporter, nullptr when `options` has no sink, or
  // InvalidArgument naming the option (an interval without a sink, a sink
  // without an interval, a negative interval) or the file that cannot be
  // opened (with errno's message). `complete` must outlive the reporter's
  // Stop().
  static absl::StatusOr<std::unique_ptr<StatsReporter>> Start(
      const StatsReportOptions& options, Complete complete);
  // Stops without a final report when Stop() was not called.
  ~StatsReporter();
  StatsReporter(const StatsReporter&) = delete;
  StatsReporter& operator=(const StatsReporter&) = delete;

  // The consumer's thread, after each Next(); `delivered`: it returned a
  // batch. Calls consumer_stats() only when a report is due.
  void AfterNext(bool delivered,
                 absl::FunctionRef<LoaderStats()> consumer_stats) {
    if (delivered && every_batches_ > 0 &&
        ++batches_since_report_ >= every_batches_) {
      batches_since_report_ = 0;
      HandOver(consumer_stats());
    } else if (wanted_.load(std::memory_order_relaxed)) {
      HandOver(consumer_stats());
    }
  }

  // Writes a last report of `final_stats` (unless a sink failed) and joins
  // the report thread. Idempotent. The consumer's thread.
  void Stop(LoaderStats final_stats);

  // OK, or the first failure of a sink (which stopped the reports).
  absl::Status status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reports written so far (for tests).
  int64_t reports() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  StatsReporter(const StatsReportOptions& options, Complete complete, int fd);
  void HandOver(LoaderStats consumer) ABSL_LOCKS_EXCLUDED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Formats and writes one report; returns the sinks' first failure.
  absl::Status Report(LoaderStats stats, bool final_report, int64_t number,
                      int64_t dropped);

  const absl::Duration every_;
  const int64_t every_batches_;
  const std::function<absl::Status(const std::string&)> callback_;
  const std::string path_;
  const int fd_;  // -1: no file
  const Complete complete_;

  // Set by the report thread when a timed report is due; cleared by a
  // hand-over.
  std::atomic<bool> wanted_{false};
  int64_t batches_since_report_ = 0;  // the consumer's thread only
  bool stopped_ = false;              // the consumer's thread only

  mutable absl::Mutex mu_;
  // The consumer's counters handed over and not reported yet, oldest
  // first; the last one is the final report once final_ is set.
  std::deque<LoaderStats> queued_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool final_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The consumer's counters reported last (for a report without it).
  LoaderStats consumer_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  int64_t reports_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_TELEMETRY_STATS_REPORTER_H_
