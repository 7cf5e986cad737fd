// StallVerdictOf: one line that names the stage a loader is bound by and
// what to do about it, computed from LoaderStats' latencies (the last
// LatencyHistogram::kRecent batches) and its CPU budget.
//
// Example:
//   std::printf("%s\n", StallVerdictOf(loader.stats()).line.c_str());
//   // "reads: p50 8.1 ms a batch of 4 samples over 1 worker = 8.1 ms a
//   // batch against a 5.1 ms step (Next() waits 37 % of the time):
//   // loader-bound; 2 workers would keep up, 16 CPUs allowed"
//
// Note [reading a verdict]
// The consumer's share of time waiting in Next() (consumer_wait against
// consumer_wait + step, means over the window) decides whether the loader
// is the bound at all: under kLoaderBoundShare the training step is
// (kConsumer), and tuning the loader gains nothing. Otherwise the slower
// of the two supply rates is the bound: the reads, one batch per read p50
// over num_workers workers reading in parallel (a worker's read time
// already includes any contention for the CPUs), or the device stage's
// write, one batch per copy p50 (serial). Reads that bind are told apart by
// the action they need: more workers than CPUs (kNarrowCpuSet: the workers
// take turns, give the process CPUs), enough CPUs for the workers that
// would keep up with the step (read p50 / step p50, rounded up:
// kTooFewWorkers), or not (kSlowReads: Read itself must get faster, or,
// when it waits on storage rather than computing, more workers than CPUs).
// A wait behind the consumer's own device buffers (its GPU work still
// holding them: LoaderStats::consumer_wait_behind_buffers) is not the
// loader's: the wait share is the data's alone (the data_wait latency,
// each batch's wait less that part), and when only the part behind the
// buffers put the consumer over kLoaderBoundShare the verdict is
// kConsumerGpu.
#ifndef PINWHEEL_LOADER_TELEMETRY_STALL_VERDICT_H_
#define PINWHEEL_LOADER_TELEMETRY_STALL_VERDICT_H_

#include <string>

#include "absl/strings/string_view.h"

#include "loader/loader_stats.h"

namespace pinwheel {

// A value; thread-compatible.
struct StallVerdict {
  enum class Bound { kUnknown, kConsumer, kReads, kCopy };
  enum class Cause {
    kTooFewBatches,  // kUnknown: not enough batches in the window
    kSlowConsumer,   // kConsumer: the loader keeps up
    kConsumerGpu,    // kConsumer: Next() waits behind the consumer's own
                     // GPU work (its device buffers), not for data
    kSlowReads,      // kReads: more workers than CPUs would be needed
    kTooFewWorkers,  // kReads: workers_needed fit the CPUs allowed
    kNarrowCpuSet,   // kReads: more workers than CPUs
    kSlowCopy,       // kCopy
  };
  Bound bound = Bound::kUnknown;
  Cause cause = Cause::kTooFewBatches;
  // kReads: the workers that would keep up with the step (0 otherwise).
  int workers_needed = 0;
  // The verdict, one line: "<stage>: <figures>: <action>".
  std::string line;

  // "unknown", "consumer", "reads" or "copy".
  absl::string_view stage() const;
};

// Below this share of the consumer's time waiting in Next(), the consumer
// is the bound.
inline constexpr double kLoaderBoundShare = 0.10;
// The batches the window needs before a verdict is given.
inline constexpr int64_t kVerdictMinBatches = 8;

StallVerdict StallVerdictOf(const LoaderStats& stats);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_TELEMETRY_STALL_VERDICT_H_
