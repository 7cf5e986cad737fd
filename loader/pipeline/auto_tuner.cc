#include "loader/pipeline/auto_tuner.h"

#include <algorithm>
#include <cstdio>
#include <optional>

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

namespace {

AutoTunePlan WithSlotBytes(AutoTunePlan plan, const PinnedRing* ring) {
  if (ring != nullptr) plan.slot_bytes = ring->slot_bytes();
  return plan;
}

// The share of a window of `wall` seconds that a cumulative wait, now
// `waited`, grew by since `*at_start`; moves `*at_start` to `waited` for the
// next window.
double TakeShare(absl::Duration waited, absl::Duration* at_start, double wall) {
  const double share = absl::ToDoubleSeconds(waited - *at_start) / wall;
  *at_start = waited;
  return share;
}

}  // namespace

AutoTuner::AutoTuner(const AutoTunePlan& plan, WorkerGate* gate,
                     PinnedRing* ring, const AutoTuneRules& rules)
    : plan_(plan),
      rules_(rules),
      gate_(gate),
      ring_(ring),
      policy_(WithSlotBytes(plan, ring), rules, plan.workers && gate != nullptr,
              plan.prefetch && ring != nullptr) {
  stats_.workers_auto = plan.workers && gate != nullptr;
  stats_.prefetch_auto = plan.prefetch && ring != nullptr;
  stats_.off_reason = plan.off_reason;
  stats_.max_workers = plan.max_workers;
  stats_.max_prefetch = plan.max_prefetch;
  // Note [where auto starts]
  // A quarter of the most workers (7 of 31 on 32 CPUs, 3 of 15 on 16), not
  // one: from one worker the first windows starve the consumer while the
  // tuner climbs, and with windows of 10 ms the sample trainer's first epoch
  // on one H200 waited 7.5-9.8 % (0.4 % at its manual 8 workers). Four zero
  // windows shrink an overshoot to the busy threads; prefetch starts at 2
  // slots, pinned memory being the costlier of the two.
  stats_.workers =
      stats_.workers_auto
          ? std::max(
                1, plan.max_workers / std::max(1, rules.start_workers_divisor))
          : plan.max_workers;
  stats_.prefetch = stats_.prefetch_auto
                        ? std::min(rules.start_prefetch, plan.max_prefetch)
                        : plan.max_prefetch;
  if (stats_.workers_auto) gate_->SetActive(stats_.workers);
  if (stats_.prefetch_auto) ring_->SetDepth(stats_.prefetch);
  settle_left_ = rules.settle_batches;  // the start-up is not measured
}

// Note [an epoch's start is not measured]
// Between two epochs the consumer does what it does between epochs (an
// evaluation, a checkpoint, a log line), its first Next() of the new epoch
// has no step, and the workers idle and the ring stays full meanwhile. A
// window spanning that pause judged the loader by it: in the sample trainer
// on 2 x H200 (epochs of 195-390 batches), windows ending 10-13 batches
// after an epoch's start read "ring full 96-97 %, 0.3 of 5 workers busy"
// and the consumer waiting 11-54 % of its time, undid a good change and
// grew the ring for nothing. So an epoch's first batch closes the window
// without a decision and opens a fresh one after it. Epochs too short to
// hold two windows and a settle keep their window (else nothing would ever
// be decided), leaving out only that first batch's wait.
//
// Note [a window of 10 ms at least]
// A window is 16 batches and 10 ms, whichever is longer. Judged on 16
// batches alone, a consumer of 130 us a step (the sample trainer on an
// H200) was judged on 2 ms of its life, in which one scheduler hiccup or
// one slow batch moves the wait by tens of percent: its grows were undone
// and its probes kept for noise, the ceilings left held 3 workers and 2
// slots while it waited 38-46 % of two epochs (2 x H200, 2026-11-27).
// Batches of 1 ms or more (W1, W3, a real model's step) are unaffected.
// But 256 batches are a window however short: at W2's 12-45 us a batch a
// window of 10 ms held 200-750 of them, and the tuner's five grows from 3
// workers and 2 slots took until batch 2,300 (the last change, after
// probes, at 4,300-6,000). With windows of at most 256 batches (one H200,
// session 18, same call, 4 repetitions): the last change at batch 2,045-
// 2,622 instead of 4,327-4,525, and measured after 3,000 batches auto ran
// 69.0-78.9 k batches/s against 68.1-71.1 k (the best manual row 75.5-79.3
// k); the sample trainer (0.13 ms steps: 256 batches are 33 ms) is
// unaffected.
//
// Note [a grown ring is judged once its slots are pinned]
// A deeper ring pins its new slots as workers first take them (a
// cudaHostAlloc each, on the worker's thread), so the windows right after a
// prefetch grow measured the pinning, not the depth: on W2 (0.5 MB slots,
// about 30 us a batch) the window after each 8 -> 16 grow waited 124-223
// us a batch against 30 before, the grow was undone, and auto stayed at 8
// slots, 0.66 of the best manual rate (64 slots). So the settle after a
// grow lasts until the ring holds as many slots as its depth, at most
// 4 windows more (a ring that never needs them all never pins them). This
// alone did not lift W2 (0.23 of the best manual rate in the next call,
// where its grows of 2 -> 4 slots at 31 workers still did not pay); with
// windows of 10 ms and the start below it reached 0.87 (samples/bench/
// results/h200x2-2026-11-27-s8-auto.txt), so the pinning is one cause
// among others, not the measured one.
//
// Note [a starved consumer needs no 10 ms]
// The 10 ms guard against one hiccup cost W2 its start: from 3 workers and
// 2 slots (about 20 k batches/s) the first window closed at batch 192-264,
// the grow to 15 x 16 then pinned its 14 new slots (5-6 ms by cudaHostAlloc,
// paid by the byte) inside the benchmark's timed batches, and auto reached
// 0.87-0.89 of the best manual row over 5,000 batches (one H200, session
// 19). A window in which the consumer waited 90 % of the time or more over
// 64 batches or more is no hiccup: one stall of 2 ms among 64 steps of 0.13
// ms (the sample trainer's) is 19 % of the window, and one among W2's 64
// steps of 12 us would have to last 7 ms, itself a loader that falls
// behind. Such a window closes at once; its decision is a grow, judged as
// every grow is, by the window after its settle.
//
// Note [a change settles over the ring's depth]
// The batches in the ring's slots when a change is made were read before
// it, and go first: a window that starts 8 batches after a probe of fewer
// workers over a ring of 64 slots judges the probe partly on what the
// workers it came from read. W2 with prefetch fixed at 64 and workers
// tuned (one H200, session 25, call F) walked 15 -> 11 -> 8 -> 6 workers
// (down to 2 in one repetition: 13.8 k batches/s against 72 k for 11 x 64
// by hand), each probe judged within 5 % of the walk's shortest wait. So a
// change's settle lasts the ring's depth when that is more than
// settle_batches. Measured in one call (call G, 6 repetitions each way,
// alternated): both knobs auto, 0.967 of 11 x 64 by hand against 0.911;
// the workers over 64 fixed slots 77.5 k against 75.3 k, no probe left
// standing under 11 workers (before: 3 of 12 repetitions ended at 8).
bool AutoTuner::Starved() const {
  return batches_ >= rules_.starved_window_batches &&
         wait_ >= rules_.starved_wait * (wait_ + step_);
}

void AutoTuner::StartWindow() {
  batches_ = 0;
  wait_ = step_ = absl::ZeroDuration();
  window_start_ = absl::Now();
  if (gate_ != nullptr) gate_->TakeWindow();
  if (ring_ != nullptr) {
    const PinnedRingStats ring = ring_->stats();
    ring_waited_at_start_ = ring.time_waited;
    ring_copy_waited_at_start_ = ring.time_waited_on_copy;
  }
  if (stage_ != nullptr) {
    buffer_waited_at_start_ = stage_->stats().buffer_wait_time;
  }
}

void AutoTuner::WatchDeviceBuffers(const TransferStage* stage) {
  stage_ = stage;
  if (stage_ != nullptr) {
    buffer_waited_at_start_ = stage_->stats().buffer_wait_time;
  }
}

bool AutoTuner::StillPinning() const {
  return ring_ != nullptr && ring_->slots_pinned() < ring_->depth();
}

void AutoTuner::OnBatch(absl::Duration wait, absl::Duration step,
                        int64_t delivered) {
  if (!stats_.workers_auto && !stats_.prefetch_auto) return;
  const bool epoch_start = step == absl::ZeroDuration();
  if (epoch_start) {
    const absl::Time now = absl::Now();
    const bool long_epochs =
        epoch_batches_ >= 2 * rules_.window_batches + rules_.settle_batches &&
        now - epoch_started_ >= 2 * rules_.min_window;
    epoch_batches_ = 0;
    epoch_started_ = now;
    if (long_epochs && settle_left_ == 0) settle_left_ = 1;
  }
  ++epoch_batches_;
  if (settle_left_ > 0) {
    if (--settle_left_ > 0) return;
    if (pin_grace_left_ > 0 && StillPinning()) {
      --pin_grace_left_;
      settle_left_ = 1;
      return;
    }
    pin_grace_left_ = 0;
    StartWindow();  // the start-up and a change's settle are not measured
    return;
  }
  if (window_start_ == absl::InfinitePast() || epoch_start) return;
  ++batches_;
  wait_ += wait;
  step_ += step;
  if (batches_ < rules_.window_batches) return;
  const absl::Time now = absl::Now();
  if (now - window_start_ < rules_.min_window &&
      batches_ < rules_.window_enough_batches && !Starved()) {
    return;
  }
  const double wall =
      std::max(1e-9, absl::ToDoubleSeconds(now - window_start_));
  AutoTuneMeasure m;
  const double total = absl::ToDoubleSeconds(wait_ + step_);
  m.wait_share = total > 0 ? absl::ToDoubleSeconds(wait_) / total : 0;
  m.batches = batches_;
  m.wait = wait_ / batches_;
  m.step = step_ / batches_;
  if (gate_ != nullptr) {
    const WorkerGate::Window w = gate_->TakeWindow();
    m.busy = absl::ToDoubleSeconds(w.busy) / wall;
    m.parks = w.parks;
  }
  if (ring_ != nullptr) {
    const PinnedRingStats ring = ring_->stats();
    m.slot_wait = TakeShare(ring.time_waited, &ring_waited_at_start_, wall);
    m.copy_wait =
        TakeShare(ring.time_waited_on_copy, &ring_copy_waited_at_start_, wall);
    if (stats_.prefetch_auto) ring_->FreeIdleAboveDepth();
  }
  if (stage_ != nullptr) {
    m.buffer_wait = TakeShare(stage_->stats().buffer_wait_time,
                              &buffer_waited_at_start_, wall);
  }
  batches_ = 0;
  wait_ = step_ = absl::ZeroDuration();
  window_start_ = now;
  if (std::optional<AutoTuneChange> change =
          policy_.Decide(m, stats_.workers, stats_.prefetch)) {
    Apply(*change, m, delivered);
  }
}

void AutoTuner::Apply(const AutoTuneChange& change, const AutoTuneMeasure& m,
                      int64_t delivered) {
  const int workers = change.workers;
  const int prefetch = change.prefetch;
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
      "full %.0f %% of the time (%.0f %% behind copies), copy waiting for a "
      "device buffer %.0f %%, %d reads held back)",
      what, delivered, change.why, 100 * m.wait_share, m.batches,
      absl::FormatDuration(absl::Trunc(m.wait, absl::Microseconds(1))),
      absl::FormatDuration(absl::Trunc(m.step, absl::Microseconds(1))), m.busy,
      stats_.workers, 100 * std::min(1.0, m.slot_wait),
      100 * std::min(1.0, m.copy_wait), 100 * std::min(1.0, m.buffer_wait),
      m.parks);
  if (workers != stats_.workers) gate_->SetActive(workers);
  pin_grace_left_ = prefetch > stats_.prefetch ? 4 * rules_.window_batches : 0;
  if (prefetch != stats_.prefetch) {
    ring_->SetDepth(prefetch);
    // Slots above a lowered depth go now if idle, else at a window's end.
    if (prefetch < stats_.prefetch) ring_->FreeIdleAboveDepth();
  }
  stats_.workers = workers;
  stats_.prefetch = prefetch;
  ++stats_.changes;
  stats_.last_change_batch = delivered;
  // Note [a change settles over the ring's depth]
  settle_left_ = std::max(rules_.settle_batches, prefetch);
  window_start_ = absl::InfinitePast();
  if (plan_.log) {
    std::fprintf(stderr, "pinwheel: auto-tune: %s\n",
                 stats_.last_reason.c_str());
  }
}

}  // namespace pinwheel::internal
