// AutoTunePolicy: what the run-time tuner of num_workers and prefetch
// (LoaderOptions::kAuto) decides from one window's measures, and what it
// remembers between windows (floors, ceilings, the last change to check).
// Pure: AutoTuner measures (the WorkerGate, the PinnedRing, the consumer's
// wait and step) and applies; this decides (Note [how auto-tuning decides]
// in auto_tune_policy.cc), so the decisions can be tested window by window.
//
// Example (AutoTuner, at each window's end):
//   if (std::optional<AutoTuneChange> c = policy_.Decide(m, workers,
//                                                        prefetch)) {
//     Apply(*c);
//   }
//
// Thread-compatible.
#ifndef PINWHEEL_LOADER_PIPELINE_AUTO_TUNE_POLICY_H_
#define PINWHEEL_LOADER_PIPELINE_AUTO_TUNE_POLICY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"

namespace pinwheel::internal {

// What Build() decided for kAuto; a value.
struct AutoTunePlan {
  bool workers = false;    // num_workers was kAuto
  bool prefetch = false;   // prefetch was kAuto
  int max_workers = 0;     // the threads started (the options' num_workers)
  int max_prefetch = 0;    // the ring's slots (the options' prefetch)
  std::string off_reason;  // why nothing is tuned (the gather path)
  size_t slot_bytes = 0;   // a ring slot's (AutoTuner sets it from the ring)
  bool log = true;         // each change on a line to stderr
};

// The controller's constants (Note [how auto-tuning decides]).
struct AutoTuneRules {
  int window_batches = 16;  // batches measured per decision, at least
  // ... and at least this long, unless it holds window_enough_batches
  // (Note [a window of 10 ms at least] in auto_tuner.cc)
  absl::Duration min_window = absl::Milliseconds(10);
  int window_enough_batches = 256;
  // ... or when the consumer waited starved_wait of the window or more over
  // starved_window_batches (Note [a starved consumer needs no 10 ms])
  int starved_window_batches = 64;
  double starved_wait = 0.9;
  int settle_batches = 8;   // batches ignored after a change
  double grow_wait = 0.05;  // Next()'s share of the step that grows
  double zero_wait = 0.01;  // ... at or under which a window counts as zero
  int shrink_windows = 4;   // zero windows in a row before a shrink
  double margin = 1.25;     // headroom kept over the measured need
  // ... and over the busy threads by a shrink (Note [a shrink leaves idle
  // threads] in auto_tune_policy.cc)
  double shrink_margin = 2.0;
  // The workers at the start: a quarter of the most (Note [where auto
  // starts] in auto_tuner.cc), at least 1.
  int start_workers_divisor = 4;
  int start_prefetch = 2;
  // Slots this big or bigger copy at the link's bandwidth, not its latency
  // (Note [a ring full behind its copies] in auto_tune_policy.cc).
  size_t bandwidth_bound_slot_bytes = size_t{4} << 20;
};

// One window's measures.
struct AutoTuneMeasure {
  double wait_share = 0;  // wait / (wait + step)
  absl::Duration wait;    // per batch
  absl::Duration step;    // per batch
  double busy = 0;        // threads reading, on average
  double slot_wait = 0;   // share of the time the ring was full
  double copy_wait = 0;   // ... behind a slot's copy (else: slots held)
  // share of the time the copy waited for a free device buffer (held by
  // the consumer until its GPU work on the batch is done)
  double buffer_wait = 0;
  int64_t parks = 0;  // reads held back by the gate
  int batches = 0;    // in the window
};

// A change to make: the new values, and why (a constant string).
struct AutoTuneChange {
  int workers = 0;
  int prefetch = 0;
  const char* why = "";
};

class AutoTunePolicy {
 public:
  // `workers_auto` / `prefetch_auto`: whether each knob may change.
  AutoTunePolicy(const AutoTunePlan& plan, const AutoTuneRules& rules,
                 bool workers_auto, bool prefetch_auto);

  // Returns the change to make after a window measured `m` at `workers`
  // and `prefetch`, or nullopt; remembers it as made (the caller applies
  // every change it returns).
  std::optional<AutoTuneChange> Decide(const AutoTuneMeasure& m, int workers,
                                       int prefetch);

 private:
  // Returns whether the ring was full a quarter of `m`'s window or more,
  // mostly behind copies of slots that copy at the link's bandwidth (Note
  // [a ring full behind its copies] in auto_tune_policy.cc).
  bool CopyBound(const AutoTuneMeasure& m) const;
  // Returns whether the ring's first stage, in `m`'s window, waited for a
  // slot more behind the copies out of the oldest slots than behind the
  // threads filling them (PinnedRingStats::time_waited_on_copy).
  static bool FullMostlyBehindCopies(const AutoTuneMeasure& m) {
    return m.copy_wait > 0.5 * m.slot_wait;
  }
  // Returns whether the slots are big enough to copy at the link's
  // bandwidth (AutoTuneRules::bandwidth_bound_slot_bytes).
  bool BandwidthBoundSlots() const {
    return plan_.slot_bytes >= rules_.bandwidth_bound_slot_bytes;
  }

  // Remembers a change from (workers, prefetch) and returns it; nullopt
  // when it changes nothing.
  std::optional<AutoTuneChange> Record(int to_workers, int to_prefetch,
                                       int workers, int prefetch,
                                       const AutoTuneMeasure& m,
                                       const char* why);

  // Record()s a change back from a grow or probe that did not pay, as
  // final: the step it was learnt at kept, nothing left to check.
  std::optional<AutoTuneChange> Undo(int to_workers, int to_prefetch,
                                     int workers, int prefetch,
                                     const AutoTuneMeasure& m, const char* why);

  const AutoTunePlan plan_;
  const AutoTuneRules rules_;
  const bool workers_auto_;
  const bool prefetch_auto_;
  int zero_windows_ = 0;
  // Hysteresis: the smallest values known to keep up (a shrink below them
  // made the consumer wait), and the step they were learnt at; forgotten
  // when the step doubles or halves (in two windows in a row: one is noise).
  int floor_workers_ = 1;
  int floor_prefetch_ = 1;
  absl::Duration floor_step_;
  int step_moved_windows_ = 0;  // windows in a row with the step moved
  // The last change shrank workers / prefetch (from these values).
  int shrunk_workers_from_ = 0;
  int shrunk_prefetch_from_ = 0;
  // The last change grew (from these values, at this wait a batch): the
  // next window checks that it paid.
  int grew_from_workers_ = 0;
  int grew_from_prefetch_ = 0;
  absl::Duration wait_before_;
  // The last change probed fewer workers (from this value): the next
  // window judges it against the shortest wait a batch of the walk down.
  int probed_from_ = 0;
  absl::Duration probe_wait_;
  // The probes since the most workers all stood: the next one keeps the
  // shortest wait of the walk. Any other change ends the walk.
  bool walking_down_ = false;
  // Ceilings learnt from grows that did not pay and probes that did.
  int cap_workers_;
  int cap_prefetch_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_AUTO_TUNE_POLICY_H_
