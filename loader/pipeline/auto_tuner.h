// AutoTuner: sizes a loader's active workers and prefetch depth at run time
// (LoaderOptions::kAuto) to keep the consumer's wait in Next() near zero
// with the fewest reading threads and pinned slots. It runs on the
// consumer's thread, fed one batch at a time by LoaderCore::Next(), and acts
// through the WorkerGate (workers) and the PinnedRing's depth (prefetch).
// See Note [how auto-tuning decides].
//
// Example (LoaderCore):
//   AutoTuner tuner(plan, gate.get(), ring.get(), num_workers, prefetch);
//   ... in Next(), after a batch:
//   tuner.OnBatch(wait, step, batches_delivered);
//
// Thread-compatible: one consumer thread calls OnBatch() and stats().
#ifndef PINWHEEL_LOADER_PIPELINE_AUTO_TUNER_H_
#define PINWHEEL_LOADER_PIPELINE_AUTO_TUNER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "loader/auto_tune_stats.h"
#include "loader/loader_options.h"
#include "loader/pipeline/worker_gate.h"
#include "pinning/pinned_ring.h"
#include "transfer/sample_layout.h"

namespace pinwheel::internal {

// What Build() decided for kAuto; a value.
struct AutoTunePlan {
  bool workers = false;    // num_workers was kAuto
  bool prefetch = false;   // prefetch was kAuto
  int max_workers = 0;     // the threads started (the options' num_workers)
  int max_prefetch = 0;    // the ring's slots (the options' prefetch)
  std::string off_reason;  // why nothing is tuned (the gather path)
  bool log = true;         // each change on a line to stderr
};

// The controller's constants (Note [how auto-tuning decides]).
struct AutoTuneRules {
  int window_batches = 16;  // batches measured per decision
  int settle_batches = 8;   // batches ignored after a change
  double grow_wait = 0.05;  // Next()'s share of the step that grows
  double zero_wait = 0.01;  // ... at or under which a window counts as zero
  int shrink_windows = 4;   // zero windows in a row before a shrink
  double margin = 1.25;     // headroom kept over the measured need
  int start_workers = 1;
  int start_prefetch = 2;
};

// Returns the most pinned slots prefetch = kAuto may use for batches laid
// out by `layout`: 64, lowered to options.auto_max_pinned_bytes and to what
// the host memory admits (with the host backend's buffer pool); at least 1
// (LoaderCore then reports a ring that does not fit). InvalidArgument when
// auto_max_pinned_bytes is under one slot.
absl::StatusOr<int> AutoMaxPrefetch(const LoaderOptions& options,
                                    const BatchLayout& layout);

class AutoTuner {
 public:
  // Borrows `gate` (null: workers fixed) and `ring` (null: prefetch fixed or
  // no ring), which must outlive it; sets them to the starting values.
  AutoTuner(const AutoTunePlan& plan, WorkerGate* gate, PinnedRing* ring,
            const AutoTuneRules& rules = {});

  // One delivered batch: the consumer waited `wait` in Next() after a step
  // of `step` (its own time since the previous batch; ZeroDuration for an
  // epoch's first); `delivered` batches so far.
  void OnBatch(absl::Duration wait, absl::Duration step, int64_t delivered);

  AutoTuneStats stats() const { return stats_; }

 private:
  struct Measured {
    double wait_share = 0;  // wait / (wait + step)
    absl::Duration wait;    // per batch
    absl::Duration step;    // per batch
    double busy = 0;        // threads reading, on average
    double slot_wait = 0;   // share of the time the ring was full
    int64_t parks = 0;      // reads held back by the gate
  };
  void Decide(const Measured& m, int64_t delivered);
  // Applies a change and logs it.
  void Change(int workers, int prefetch, const Measured& m, int64_t delivered,
              const char* why);

  const AutoTunePlan plan_;
  const AutoTuneRules rules_;
  WorkerGate* const gate_;
  PinnedRing* const ring_;
  AutoTuneStats stats_;

  // The window being measured.
  int batches_ = 0;
  int settle_left_ = 0;
  absl::Duration wait_;
  absl::Duration step_;
  absl::Time window_start_ = absl::InfinitePast();
  absl::Duration ring_waited_at_start_;
  int zero_windows_ = 0;
  // Hysteresis: the smallest values known to keep up (a shrink below them
  // made the consumer wait), and the step they were learnt at; forgotten
  // when the step doubles or halves.
  int floor_workers_ = 1;
  int floor_prefetch_ = 1;
  absl::Duration floor_step_;
  // The last change shrank workers / prefetch (from these values).
  int shrunk_workers_from_ = 0;
  int shrunk_prefetch_from_ = 0;
  // The last change grew (from these values, at this wait a batch): the
  // next window checks that it paid.
  int grew_from_workers_ = 0;
  int grew_from_prefetch_ = 0;
  absl::Duration wait_before_;
  // Ceilings learnt from grows that did not pay.
  int cap_workers_;
  int cap_prefetch_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_AUTO_TUNER_H_
