// Note [how auto-tuning decides]
// The objective is the consumer's step, not the loader's rate: a loader
// keeps up when Next() returns at once, and beyond that every extra reading
// thread and pinned slot is waste. So the tuner measures, over windows of
// `window_batches` delivered batches, the consumer's wait in Next() as a
// share of its time (wait / (wait + step)), the reading threads' average
// occupancy (WorkerGate: thread-seconds holding the gate over the window's
// time) and how long the ring's first stage waited for a free slot. Then,
// at most one change per window, none during the `settle_batches` after a
// change (their figures mix both configurations):
//  - grow when the consumer waited more than grow_wait (5 %): the prefetch
//    depth (doubled) when the ring was full a quarter of the time while
//    threads sat idle (small batches read one per thread need a slot each),
//    else the workers, straight to what the measure says keeps up: the busy
//    threads times (wait + step) / step, with the margin, at least one more;
//    else (all workers in use) the depth, only if the ring was full a tenth
//    of the time: otherwise the reads are the bound at the most workers, and
//    nothing is changed (more pinned memory would buy nothing);
//  - shrink only after shrink_windows (4) windows in a row with the wait at
//    or under zero_wait (1 %): the workers to the busy threads times the
//    margin, else the depth by a quarter;
//  - in between (1-5 %) nothing: the band is the hysteresis.
// A shrink that makes the consumer wait is undone by the next grow, and the
// value it left becomes a floor no later shrink goes under; a grow after
// which the consumer still waits and its wait a batch did not shorten by
// 10 % is undone, and the value it tried becomes a ceiling (on a host whose
// CPUs are all busy more slots or threads may only add cache misses: before
// this check, on the shared 2-core host, W2 grown to 64 slots delivered 106,624
// samples/s against 220,329 for 8 slots by hand, one repetition each). Floors
// and ceilings hold until the step doubles or halves by 0.5 ms at least (the
// consumer changed: they are learnt again). So under a steady consumer the
// changes are bounded: the grows to reach the need, then at most one failed
// shrink per knob and value. Never above max_workers (the CPU budget unless
// said otherwise) nor max_prefetch (the memory budget): those bound the ring
// and the threads made at Build().
#include "loader/pipeline/auto_tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

#include "loader/pipeline/memory_admission.h"

namespace pinwheel::internal {

absl::StatusOr<int> AutoMaxPrefetch(const LoaderOptions& options,
                                    const BatchLayout& layout) {
  constexpr int kMostSlots = 64;
  const size_t slot = layout.slot_bytes();
  const size_t stride = (slot + 4095) / 4096 * 4096;
  int most = kMostSlots;
  if (options.auto_max_pinned_bytes > 0) {
    if (options.auto_max_pinned_bytes < stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          "LoaderBuilder: option 'auto_max_pinned_bytes' = ",
          options.auto_max_pinned_bytes, ": must hold at least one slot (",
          stride, " bytes: batch_size ", options.batch_size, " × ",
          layout.sample().sample_bytes(), " bytes per sample, page-rounded)"));
    }
    most = static_cast<int>(
        std::min<size_t>(kMostSlots, options.auto_max_pinned_bytes / stride));
  }
  const MemoryLimits limits = ReadMemoryLimits();
  while (most > 1 && !AdmitHostMemory({.ring_slots = most,
                                       .slot_bytes = slot,
                                       .pool_buffers = options.device_buffers,
                                       .pool_buffer_bytes = slot},
                                      limits)
                          .ok()) {
    --most;
  }
  return most;
}

AutoTuner::AutoTuner(const AutoTunePlan& plan, WorkerGate* gate,
                     PinnedRing* ring, const AutoTuneRules& rules)
    : plan_(plan),
      rules_(rules),
      gate_(gate),
      ring_(ring),
      cap_workers_(plan.max_workers),
      cap_prefetch_(plan.max_prefetch) {
  stats_.workers_auto = plan.workers && gate != nullptr;
  stats_.prefetch_auto = plan.prefetch && ring != nullptr;
  stats_.off_reason = plan.off_reason;
  stats_.max_workers = plan.max_workers;
  stats_.max_prefetch = plan.max_prefetch;
  stats_.workers = stats_.workers_auto
                       ? std::min(rules.start_workers, plan.max_workers)
                       : plan.max_workers;
  stats_.prefetch = stats_.prefetch_auto
                        ? std::min(rules.start_prefetch, plan.max_prefetch)
                        : plan.max_prefetch;
  if (stats_.workers_auto) gate_->SetActive(stats_.workers);
  if (stats_.prefetch_auto) ring_->SetDepth(stats_.prefetch);
  settle_left_ = rules.settle_batches;  // the start-up is not measured
}

void AutoTuner::OnBatch(absl::Duration wait, absl::Duration step,
                        int64_t delivered) {
  if (!stats_.workers_auto && !stats_.prefetch_auto) return;
  if (settle_left_ > 0) {
    if (--settle_left_ == 0) {
      // A fresh window from here.
      batches_ = 0;
      wait_ = step_ = absl::ZeroDuration();
      window_start_ = absl::Now();
      if (gate_ != nullptr) gate_->TakeWindow();
      if (ring_ != nullptr) ring_waited_at_start_ = ring_->stats().time_waited;
    }
    return;
  }
  if (window_start_ == absl::InfinitePast()) return;
  ++batches_;
  wait_ += wait;
  step_ += step;
  if (batches_ < rules_.window_batches) return;
  const absl::Time now = absl::Now();
  const double wall =
      std::max(1e-9, absl::ToDoubleSeconds(now - window_start_));
  Measured m;
  const double total = absl::ToDoubleSeconds(wait_ + step_);
  m.wait_share = total > 0 ? absl::ToDoubleSeconds(wait_) / total : 0;
  m.wait = wait_ / batches_;
  m.step = step_ / batches_;
  if (gate_ != nullptr) {
    const WorkerGate::Window w = gate_->TakeWindow();
    m.busy = absl::ToDoubleSeconds(w.busy) / wall;
    m.parks = w.parks;
  }
  if (ring_ != nullptr) {
    const absl::Duration waited = ring_->stats().time_waited;
    m.slot_wait = absl::ToDoubleSeconds(waited - ring_waited_at_start_) / wall;
    ring_waited_at_start_ = waited;
    if (stats_.prefetch_auto) ring_->FreeIdleAboveDepth();
  }
  batches_ = 0;
  wait_ = step_ = absl::ZeroDuration();
  window_start_ = now;
  Decide(m, delivered);
}

void AutoTuner::Decide(const Measured& m, int64_t delivered) {
  const int workers = stats_.workers;
  const int prefetch = stats_.prefetch;
  // A consumer whose step doubled or halved, by half a millisecond at
  // least, is a new one (less is noise: a loaded host stretches a 1.5 ms
  // step by a third from one window to the next, and a step of a few
  // microseconds, a benchmark's, by several times).
  if (floor_step_ > absl::ZeroDuration() &&
      (m.step > floor_step_ * 2 || m.step < floor_step_ / 2) &&
      absl::AbsDuration(m.step - floor_step_) > absl::Microseconds(500)) {
    floor_workers_ = floor_prefetch_ = 1;
    cap_workers_ = plan_.max_workers;
    cap_prefetch_ = plan_.max_prefetch;
    floor_step_ = absl::ZeroDuration();
  }
  // A grow must pay: the consumer waits no more, or its wait a batch
  // shortened by 10 %; else it is undone and what it tried becomes a
  // ceiling. (The wait, not the consumer's whole cycle: its step moves on
  // its own, by several times from one window to the next on a loaded
  // host, and would pass or fail a grow for nothing the loader did.)
  if (grew_from_workers_ > 0) {
    const int from_workers = grew_from_workers_;
    const int from_prefetch = grew_from_prefetch_;
    grew_from_workers_ = grew_from_prefetch_ = 0;
    if (m.wait_share > rules_.zero_wait && m.wait > wait_before_ * 0.9) {
      if (from_workers < workers) cap_workers_ = from_workers;
      if (from_prefetch < prefetch) cap_prefetch_ = from_prefetch;
      if (floor_step_ == absl::ZeroDuration()) floor_step_ = m.step;
      Change(from_workers, from_prefetch, m, delivered,
             "undone: the consumer's wait did not shorten by 10 %");
      // An undo is final, and no shrink to learn a floor from.
      grew_from_workers_ = grew_from_prefetch_ = 0;
      shrunk_workers_from_ = shrunk_prefetch_from_ = 0;
      return;
    }
  }
  const bool can_grow_workers =
      stats_.workers_auto &&
      workers < std::min(plan_.max_workers, cap_workers_);
  const bool can_grow_prefetch =
      stats_.prefetch_auto &&
      prefetch < std::min(plan_.max_prefetch, cap_prefetch_);
  if (m.wait_share > rules_.grow_wait) {
    zero_windows_ = 0;
    // A shrink that made the consumer wait: what it left is too little.
    if (shrunk_workers_from_ > 0) {
      floor_workers_ = shrunk_workers_from_;
      floor_step_ = m.step;
    }
    if (shrunk_prefetch_from_ > 0) {
      floor_prefetch_ = shrunk_prefetch_from_;
      floor_step_ = m.step;
    }
    const bool threads_idle = m.busy < 0.75 * workers;
    // Back to what kept up before a failed shrink, else doubled.
    const int more_prefetch =
        shrunk_prefetch_from_ > prefetch
            ? shrunk_prefetch_from_
            : std::min({plan_.max_prefetch, cap_prefetch_, prefetch * 2});
    if (can_grow_prefetch && m.slot_wait > 0.25 &&
        (threads_idle || !can_grow_workers)) {
      Change(workers, more_prefetch, m, delivered,
             "the ring was full while threads were idle");
    } else if (can_grow_workers) {
      const double step = std::max(1e-9, absl::ToDoubleSeconds(m.step));
      const double need = std::max(1.0, m.busy) *
                          absl::ToDoubleSeconds(m.wait + m.step) / step *
                          rules_.margin;
      const int target = static_cast<int>(
          std::min<double>(std::min(plan_.max_workers, cap_workers_),
                           std::max<double>(workers + 1, std::ceil(need))));
      Change(std::max(target, shrunk_workers_from_), prefetch, m, delivered,
             "the consumer waited");
    } else if (can_grow_prefetch && m.slot_wait > 0.1) {
      // Every worker that may read is in use: a slot more helps only when
      // the ring held them back (else the reads themselves are the bound,
      // and more pinned memory would buy nothing).
      Change(workers, more_prefetch, m, delivered,
             "the consumer waited at the most workers, the ring full");
    }
    return;
  }
  if (m.wait_share > rules_.zero_wait) {
    zero_windows_ = 0;
    return;
  }
  if (++zero_windows_ < rules_.shrink_windows) return;
  zero_windows_ = 0;
  if (stats_.workers_auto) {
    const int target =
        std::max({floor_workers_, 1,
                  static_cast<int>(std::ceil(m.busy * rules_.margin))});
    if (target < workers) {
      Change(target, prefetch, m, delivered, "no wait; fewer threads keep up");
      return;
    }
  }
  if (stats_.prefetch_auto) {
    const int target = std::max({floor_prefetch_, 2, prefetch * 3 / 4});
    if (target < prefetch) {
      Change(workers, target, m, delivered, "no wait; trying fewer slots");
    }
  }
}

void AutoTuner::Change(int workers, int prefetch, const Measured& m,
                       int64_t delivered, const char* why) {
  if (workers == stats_.workers && prefetch == stats_.prefetch) return;
  shrunk_workers_from_ = workers < stats_.workers ? stats_.workers : 0;
  shrunk_prefetch_from_ = prefetch < stats_.prefetch ? stats_.prefetch : 0;
  if (workers > stats_.workers || prefetch > stats_.prefetch) {
    grew_from_workers_ = stats_.workers;  // checked by the next window
    grew_from_prefetch_ = stats_.prefetch;
    wait_before_ = m.wait;
  }
  std::string what;
  if (workers != stats_.workers) {
    what = absl::StrFormat("workers %d -> %d", stats_.workers, workers);
  }
  if (prefetch != stats_.prefetch) {
    absl::StrAppendFormat(&what, "%sprefetch %d -> %d",
                          what.empty() ? "" : ", ", stats_.prefetch, prefetch);
  }
  stats_.last_reason = absl::StrFormat(
      "%s at batch %d: %s (Next() waited %.1f %% of the time over %d "
      "batches: %s a batch against a %s step; %.2f of %d workers busy, ring "
      "full %.0f %% of the time, %d reads held back)",
      what, delivered, why, 100 * m.wait_share, rules_.window_batches,
      absl::FormatDuration(absl::Trunc(m.wait, absl::Microseconds(1))),
      absl::FormatDuration(absl::Trunc(m.step, absl::Microseconds(1))), m.busy,
      stats_.workers, 100 * std::min(1.0, m.slot_wait), m.parks);
  if (workers != stats_.workers) gate_->SetActive(workers);
  if (prefetch != stats_.prefetch) {
    ring_->SetDepth(prefetch);
    // Slots above a lowered depth go now if idle, else at a window's end.
    if (prefetch < stats_.prefetch) ring_->FreeIdleAboveDepth();
  }
  stats_.workers = workers;
  stats_.prefetch = prefetch;
  ++stats_.changes;
  stats_.last_change_batch = delivered;
  settle_left_ = rules_.settle_batches;
  window_start_ = absl::InfinitePast();
  if (plan_.log) {
    std::fprintf(stderr, "pinwheel: auto-tune: %s\n",
                 stats_.last_reason.c_str());
  }
}

}  // namespace pinwheel::internal
