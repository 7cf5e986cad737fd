// AutoTuner: sizes a loader's active workers and prefetch depth at run time
// (LoaderOptions::kAuto) to keep the consumer's wait in Next() near zero
// with the fewest reading threads and pinned slots. It runs on the
// consumer's thread, fed one batch at a time by LoaderCore::Next(), and acts
// through the WorkerGate (workers) and the PinnedRing's depth (prefetch).
// What it decides is AutoTunePolicy's (Note [how auto-tuning decides]).
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
#include "loader/pipeline/auto_tune_policy.h"
#include "loader/pipeline/worker_gate.h"
#include "pinning/pinned_ring.h"
#include "transfer/sample_layout.h"
#include "transfer/transfer_stage.h"

namespace pinwheel::internal {

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
  // epoch's first, which is not measured: Note [an epoch's start is not
  // measured]); `delivered` batches so far.
  void OnBatch(absl::Duration wait, absl::Duration step, int64_t delivered);

  // Borrows `stage` (which must outlive it): each window also measures the
  // copy's wait for a free device buffer (Note [a ring full behind its
  // copies] in auto_tune_policy.cc).
  void WatchDeviceBuffers(const TransferStage* stage);

  AutoTuneStats stats() const { return stats_; }

 private:
  // Applies a change and logs it.
  void Apply(const AutoTuneChange& change, const AutoTuneMeasure& m,
             int64_t delivered);

  // Opens a fresh window from now.
  void StartWindow();

  // Whether the window so far is long enough and starved enough to close
  // before min_window (Note [a starved consumer needs no 10 ms]).
  bool Starved() const;

  // Whether the ring still pins slots a grown depth added (Note [a grown
  // ring is judged once its slots are pinned]).
  bool StillPinning() const;

  const AutoTunePlan plan_;
  const AutoTuneRules rules_;
  WorkerGate* const gate_;
  PinnedRing* const ring_;
  AutoTuneStats stats_;
  AutoTunePolicy policy_;

  // The window being measured.
  int batches_ = 0;
  int settle_left_ = 0;
  int pin_grace_left_ = 0;     // batches the settle may still wait for pinning
  int64_t epoch_batches_ = 0;  // batches of the epoch delivered so far
  absl::Time epoch_started_ = absl::InfinitePast();
  absl::Duration wait_;
  absl::Duration step_;
  absl::Time window_start_ = absl::InfinitePast();
  absl::Duration ring_waited_at_start_;
  absl::Duration ring_copy_waited_at_start_;
  const TransferStage* stage_ = nullptr;
  absl::Duration buffer_waited_at_start_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_AUTO_TUNER_H_
