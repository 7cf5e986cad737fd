// Note [how auto-tuning decides]
// The objective is the consumer's step, not the loader's rate: a loader
// keeps up when Next() returns at once, and beyond that every extra reading
// thread and pinned slot is waste. So the tuner measures, over windows of
// `window_batches` delivered batches, the consumer's wait in Next() as a
// share of its time (wait / (wait + step)), the reading threads' average
// occupancy (WorkerGate: thread-seconds holding the gate over the window's
// time) and how long the ring's first stage waited for a free slot. Then,
// at most one change per window, none during the `settle_batches` after a
// change, or the ring's depth if deeper (their figures mix both
// configurations: Note [a change settles over the ring's depth] in
// auto_tuner.cc):
//  - grow when the consumer waited more than grow_wait (5 %): the prefetch
//    depth (doubled) when the ring, no deeper than the workers, was full a
//    quarter of the time while threads sat idle (small batches read one per
//    thread need a slot each; both knobs at once while workers may grow),
//    else the workers, straight to what the measure says keeps up: the busy
//    threads times (wait + step) / step, with the margin, at least one more;
//    else (all workers in use) the depth, only if the ring was full a tenth
//    of the time with threads idle: otherwise the reads are the bound at the
//    most workers, and nothing is changed (more pinned memory would buy
//    nothing);
//  - shrink only after shrink_windows (4) windows in a row with the wait at
//    or under zero_wait (1 %): the workers to the busy threads times the
//    shrink margin (Note [a shrink leaves idle threads]), else the depth by
//    a quarter;
//  - in between (1-5 %) nothing: the band is the hysteresis.
// A shrink that makes the consumer wait is undone by the next grow, and the
// value it left becomes a floor no later shrink goes under; a grow after
// which the consumer still waits and its wait a batch did not shorten by
// 10 % is undone, and the value it tried becomes a ceiling (on a host whose
// CPUs are all busy more slots or threads may only add cache misses: before
// this check, on the shared 2-core host, W2 grown to 64 slots delivered 106,624
// samples/s against 220,329 for 8 slots by hand, one repetition each). Floors
// and ceilings hold until the step doubles or halves by 0.5 ms at least in
// two windows in a row (the consumer changed: they are learnt again; one
// window is noise), and a ceiling of one knob holds
// only while the other stays where it was learnt: a grow of the workers
// that paid forgets the prefetch ceiling and one of the prefetch the
// workers'
// (on 2 x H200, W2's prefetch grow with 1 worker did not pay and capped
// the depth at 2 slots, which then held 31 workers to 2 batches at a time:
// 0.75 of the best manual rate). So under a steady consumer the
// changes are bounded: the grows to reach the need, then at most one failed
// shrink per knob and value. A consumer still waiting at the most workers,
// with no slots to add, is a probe's cue: a quarter fewer workers, kept as
// the new ceiling when the next window's wait a batch is no more than 5 %
// longer than the shortest of its walk down so far, else
// undone, the workers it came from becoming the floor; so
// probes walk down to the knee of a read that more threads only contend
// for, once per value. Never above max_workers (the CPU budget unless
// said otherwise) nor max_prefetch (the memory budget): those bound the ring
// and the threads made at Build().
//
// Note [a shrink leaves idle threads]
// Busy threads are an average: the batches a step asks for come in bursts
// (an epoch's start, a consumer that catches up after a slow step), and a
// loader left with its average in threads queues them. With the grow's
// margin (1.25) the sample trainer on one H200 (2 x H200 host, session 22)
// shrank from 7 workers at 1.51-3.21 busy to 2-5, and in 2 of 5 such
// shrinks the consumer then waited 8.7-27 % of a window until the workers
// grew back (an epoch of 37-55 ms waiting 3.9-5.7 %). Idle threads cost
// no CPU, so a shrink keeps twice the busy threads. Measured in one call
// (session 22, call H, 5 runs of 5 epochs each way, alternated): epochs
// over 5 % waiting for data on one GPU 8 of 25 with the grow's margin, 4
// of 25 with this one; on two ranks 0 of 40 and 1 of 40 (5.9 %).
//
// Note [a ring full behind its copies]
// The ring is full for one of two reasons, told apart by where its first
// stage waited (PinnedRingStats::time_waited_on_copy): every slot held by
// the threads filling it, or the oldest slot still being copied out. In the
// first case, with threads idle, a deeper ring lets them start the next
// batches; with every thread busy the reads are the bound, and a slot more
// buys nothing. In the second the copy is the bound (or what follows it;
// unless the threads are busy, Note [busy threads in a ring full behind its
// copies]): neither more slots nor more threads help, and the only change
// worth trying is fewer workers (a probe, judged as above), since threads
// that only wait for the copy are waste. Before this, on one H200 (session
// 13), W1 (a copy-bound 38 MB batch) tried 4 slots and undid it, and W4 (CPU
// decode, every worker busy at the most workers, the ring full because every
// slot was being filled) tried 4 and 8: their pinned peaks were twice the
// best manual configuration's, for trials that could not pay. After it
// (session 15, one H200) both kept 2 slots, at 0.971 and 1.054 of their best
// manual rows. But only a big slot's copy is bound by the link's bandwidth:
// a copy of half a megabyte (W2) lasts about as long as its issue and
// completion (microseconds each), so more copies in flight, a deeper ring,
// raise the rate while the fillers still wait "behind copies" (W2 with the
// rule for every slot size: held at 8 slots, 0.55 of the best manual row, 64
// slots). So the rule holds for slots of 4 MB and more
// (AutoTuneRules::bandwidth_bound_slot_bytes: a copy of 70 us or longer at
// 55 GB/s), smaller ones growing as before. A third bound fills the ring
// with slots held, with threads idle, as W2's too few slots do: the copy
// waiting for a device buffer, which the consumer holds until its own GPU
// work on the batch is done (W3: two GEMMs of 3.2 ms a step on the GPU, a
// host step of 0.1 ms). When the copy waited so more than half the window,
// the loader is ahead and the consumer's GPU is the bound: nothing is
// changed (on one H200, session 15, W3 tried 15 workers and 4 and 8 slots,
// each undone: a pinned peak of 308 MB against the best manual row's 154).
// Treated as a copy bound, with probes of fewer workers, it starved the
// sample trainer on 2 x H200 (MLP steps of 0.13 ms with an all-reduce,
// Next() waiting 5-20 % for GPU work): each probe to 2 workers made the
// consumer wait 27-46 % for a window before it was undone.
//
// Note [busy threads in a ring full behind its copies]
// With two slots, the fill of one and the copy of the other take turns:
// when the fill takes about as long as the copy, the fillers wait for the
// copy much of the window, and the ring reads as copy-bound, while the
// threads are busy most of the rest and the fill is as much the bound.
// W1 on 2 x H200 (session 23, 32 CPUs, 38 MB slots) started at 7 workers
// x 2 slots, 6.48 of 7 busy, the ring full 84 % of the window (64 behind
// copies): read as copy-bound, it probed 5 workers, undid them and stayed
// at 7 (1,119 batches/s) where 14 by hand ran 1,379, 0.96 of the raw copy.
// So with three quarters of the threads busy the workers grow, judged as
// every grow; at most doubled, since the measure's need (busy threads
// times (wait + step) / step) assumes the reads alone are the bound, and
// with a consumer that does no work it asks for every thread the host
// has (W1 at 31 workers ran 0.92 of the rate at 14). With threads idle
// the copy is the bound, and the rule above holds.
//
// Note [more workers held back by a capped ring]
// The two knobs can hold each other down. W2 on one H200 (session 17, a
// trial that grew the ring 4x at a time): at 3 workers 8 slots did not pay
// (the threads were the bound) and 2 became the ceiling; the workers then
// grew to 15, but 2 slots let only 2 of them read, so that grow did not
// pay either, and the loader stayed at 3 x 2, a fifth of the best manual
// rate, in 4 of 6 repetitions. Doubling met it in none of 22, but a grow
// that fails by noise sets the same trap.
// So a grow of the workers that did not pay while the ring, at a ceiling
// learnt with fewer workers, was full more than half the time with threads
// idle is kept, the ceiling forgotten, and a deeper ring tried with them
// (judged as every grow: undone, the ceiling comes back). Not when the copy
// or the consumer's device buffers are the bound (Note [a ring full behind
// its copies]).
//
// Note [busy threads while the copy waits for device buffers]
// The device buffers' wait says the loader was ahead some of the window,
// not all of it: a consumer fed in bursts waits in Next() between them
// while the copy waits for a buffer during them. The sample trainer on one
// H200 (session 18; steps of 0.11 ms, batches read by 3 workers busy
// 2.5-2.7 of 3 of the time) had the copy waiting for device buffers 54-142
// % of every window and Next() waiting 9-32 %, and nothing changed for 5
// epochs (waited 11-21 % an epoch) where 8 workers by hand waited 0.5-0.9
// %; with the 2-slot start a premature shrink to 3 workers met the same
// rule and stayed (16 % in the last epoch). So with the threads busy (at
// least three quarters of them, on average) the workers still grow, judged
// like every grow; the ring does not (its slots would only wait for the
// buffers too), nor are fewer workers probed.
//
// Note [fewer slots than workers: both knobs at once]
// A ring of fewer slots than workers lets at most that many threads read
// (a batch a slot), so when it is full with threads idle the measure says
// two things at once: the slots are too few, and the threads it let read
// show what a batch costs (busy threads times (wait + step) / step, as
// for every grow of the workers). Growing the depth alone and the workers
// a window later took W2 on one H200 (0.5 MB slots, batches of 11-14 us at
// the best rate) five windows from 3 workers x 2 slots: prefetch 2 -> 4 at
// batch 206, workers 3 -> 15 at 453, prefetch 4 -> 8 at 802, 8 -> 16 at
// 1,323 (session 18, traced), the rate of the best manual row only from
// 15 x 8 on. So there both grow in one change: the workers to the need
// (when it is more than they are), the depth to one slot more than the
// readers the need says (at least doubled), judged as one grow: undone
// together if the wait did not shorten, the depth then capped, not the
// workers. (With both capped, the sample trainer on one H200, session 19,
// had its first grow undone by a noisy window; at its ceiling of 3
// workers it probed fewer, down to 1, and waited 27-53 % of every epoch.
// With the depth alone capped the workers grow next, as they did when
// the depth was tried first.) Slots of 4 MB or more are only doubled:
// W1's batches (38 MB, each filled by many threads at once, 2 slots by
// hand its best row) met the rule on 2 x H200 in a slow first window
// (between 4.3 and 5.2 of 7 threads busy, the ring full 71-86 % of it,
// 29-31 behind copies): workers 7 -> 31 and slots 2 -> 32, 1.2 GB
// pinned, and the walk down the workers that followed ended at 17 x 32,
// 0.85 of 14 x 2 (session 24, call D; once in each tree in session 23's
// call E).
//
// Note [a ring deeper than its workers]
// With more slots than workers every thread may hold one; a ring full
// while threads sit idle then holds batches the fill is done with, waiting
// for their copy, a device buffer or the consumer, and more slots only
// queue more of them. So the depth grows only while it is no deeper than
// the workers. W2 on one H200 (session 19, call D, alternated with the
// same tree without this rule): at 15 workers x 16 slots, at the best
// manual row's rate, the ring full 39-56 % of the time, 32 slots were
// tried and undone in every traced repetition, and pinning them cost 6-14
// ms of a 5,000-batch run that lasts 62-70 ms at that rate (a
// cudaHostAlloc of 0.5 MB takes 0.3-0.45 ms on that host, a cudaFreeHost
// waits for the device's queued work). Without the grow: W2 auto 66.0 k
// [63.3-69.8] and 70.0 k [66.5-75.9] batches/s against 57.7 k [50.5-59.7]
// and 60.3 k [53.5-64.4] (14 x 64 x 8: 72.1 k and 75.6 k), the last
// change at batch 983-1,023 instead of 1,271-2,045, 8 MB pinned at the
// most against 32 for the best manual row.
//
// Note [a queue behind the copies]
// Small slots are judged apart from the copy-bound rule (Note [a ring full
// behind its copies]) because more copies in flight raise their rate; but a
// ring already twice as deep as the threads reading holds, beside a slot
// being filled and one queued for each of them, only more batches waiting
// for their copy. So when the ring was full mostly behind its copies and
// is that deep (known only where the workers are tuned: their gate
// measures the busy threads), it grows no deeper, and the consumer's wait leads
// to the probe of fewer workers instead. Measured (session 23, 2 x H200, one
// call, W2, 5,000 timed batches a run, 14 x 64 x 8 at 76-78 k batches/s): auto
// climbed to 30-31 workers x 31 slots (7-8 of them busy, the ring full 50
// % of the time, 47 of it behind copies) and then doubled the ring; runs
// whose ring grew to 56-62 slots delivered 48-63 k, those that stayed at
// 32 or under 64-77 k, and the workers tuned over a fixed 32 slots 73-76 k
// (0.97 of the best row in both rounds). Pinning 30 half-megabyte slots
// costs 9-14 ms (Note [a ring deeper than its workers]) of a run that lasts
// about 70 ms at that rate, and an undone grow frees them again.
//
// Note [a shrink keeps small slots deeper than the workers]
// After four windows without a wait the ring is tried a quarter shallower.
// Taken to the workers or below, a ring of small slots is what the grow
// rules read as starving them (Note [fewer slots than workers: both knobs
// at once]), and the two rules took turns: in the sample trainer (260 KB
// slots, 4-7 workers, session 20, one H200 and 2 x H200) 8 of the 9 shrinks
// to 3 slots were grown back to 5 within 74-461 batches, and one cost its
// two ranks 5.9 / 3.1 and 12.1 / 10.5 % of the epochs between (most cost
// nothing that an epoch's wait shows). A gamble to save two slots, half a
// megabyte; so a no-wait shrink of slots under 4 MB stops at one more
// than the workers. Bigger slots copy at the link's bandwidth (Note [a ring
// full behind its copies]): there 2 slots feed 14 workers (W1's best row)
// and each slot kept costs tens of megabytes.
#include "loader/pipeline/auto_tune_policy.h"

#include <algorithm>
#include <cmath>

namespace pinwheel::internal {

AutoTunePolicy::AutoTunePolicy(const AutoTunePlan& plan,
                               const AutoTuneRules& rules, bool workers_auto,
                               bool prefetch_auto)
    : plan_(plan),
      rules_(rules),
      workers_auto_(workers_auto),
      prefetch_auto_(prefetch_auto),
      cap_workers_(plan.max_workers),
      cap_prefetch_(plan.max_prefetch) {}

std::optional<AutoTuneChange> AutoTunePolicy::Decide(const AutoTuneMeasure& m,
                                                     int workers,
                                                     int prefetch) {
  // A consumer whose step doubled or halved, by half a millisecond at
  // least, in two windows in a row, is a new one (less is noise: a loaded
  // host stretches a 1.5 ms step by a third from one window to the next, a
  // step of a few microseconds, a benchmark's, by several times, and under
  // ThreadSanitizer on the 2-core CI host a consumer with no step at all
  // measured 0.48 ms in one window and 1.02 ms in a later one, which
  // forgot a probe's floor and probed again: 6 changes where 4 settle).
  const bool step_moved =
      floor_step_ > absl::ZeroDuration() &&
      (m.step > floor_step_ * 2 || m.step < floor_step_ / 2) &&
      absl::AbsDuration(m.step - floor_step_) > absl::Microseconds(500);
  step_moved_windows_ = step_moved ? step_moved_windows_ + 1 : 0;
  if (step_moved_windows_ >= 2) {
    step_moved_windows_ = 0;
    floor_workers_ = floor_prefetch_ = 1;
    cap_workers_ = plan_.max_workers;
    cap_prefetch_ = plan_.max_prefetch;
    floor_step_ = absl::ZeroDuration();
    walking_down_ = false;
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
      // Note [more workers held back by a capped ring]
      const bool ring_held_them =
          prefetch_auto_ && workers > from_workers &&
          prefetch == from_prefetch && prefetch >= cap_prefetch_ &&
          prefetch < plan_.max_prefetch && m.slot_wait > 0.5 &&
          m.busy < 0.75 * workers && m.buffer_wait <= 0.5 && !CopyBound(m);
      if (ring_held_them) {
        cap_prefetch_ = plan_.max_prefetch;
        return Record(workers, std::min(plan_.max_prefetch, prefetch * 2),
                      workers, prefetch, m,
                      "the ring, at its ceiling, held the new workers back: "
                      "a deeper ring for them");
      }
      // A grow of both knobs caps the depth alone (Note [fewer slots than
      // workers: both knobs at once]).
      if (from_workers < workers && from_prefetch == prefetch) {
        cap_workers_ = from_workers;
      }
      if (from_prefetch < prefetch) cap_prefetch_ = from_prefetch;
      return Undo(from_workers, from_prefetch, workers, prefetch, m,
                  "undone: the consumer's wait did not shorten by 10 %");
    }
    // It paid: a ceiling of the other knob, learnt where this one stood,
    // holds no longer. (Forgotten at the grow itself, as before, a ceiling
    // was lost to a grow then undone, and to an undone probe, which puts
    // the workers back up: the grow that had failed was tried again, as at
    // the end of W1's log on 2 x H200, 2026-11-27, 0.48 of the best manual
    // rate.)
    if (workers > from_workers) cap_prefetch_ = plan_.max_prefetch;
    if (prefetch > from_prefetch) cap_workers_ = plan_.max_workers;
  }
  // A probe (below) that made the consumer wait longer a batch, by 5 %,
  // than the shortest wait of its walk down (at the most workers or after
  // a probe that stood; judged against the last window alone, a wait 4 %
  // longer at each probe walked all the way down), is undone, the workers it
  // came from becoming the floor; else it stands, and the workers it left
  // become the ceiling (more bought nothing).
  if (probed_from_ > 0) {
    const int from = probed_from_;
    probed_from_ = 0;
    if (m.wait > probe_wait_ * 1.05) {
      floor_workers_ = from;
      return Undo(from, prefetch, workers, prefetch, m,
                  "undone: fewer workers made the consumer wait longer");
    }
    cap_workers_ = workers;
  }
  const bool can_grow_workers =
      workers_auto_ && workers < std::min(plan_.max_workers, cap_workers_);
  const bool can_grow_prefetch =
      prefetch_auto_ && prefetch < std::min(plan_.max_prefetch, cap_prefetch_);
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
    // The workers that keep up by the measure: the busy threads times
    // (wait + step) / step, with the margin (more_workers(): at least one
    // more, at most the ceiling).
    const double need = std::ceil(
        std::max(1.0, m.busy) * absl::ToDoubleSeconds(m.wait + m.step) /
        std::max(1e-9, absl::ToDoubleSeconds(m.step)) * rules_.margin);
    auto more_workers = [&]() {
      const int target = static_cast<int>(
          std::min<double>(std::min(plan_.max_workers, cap_workers_),
                           std::max<double>(workers + 1, need)));
      return std::max(target, shrunk_workers_from_);
    };
    // Note [a ring full behind its copies]
    // The copy waited for device buffers the consumer still holds: the
    // loader is ahead, and what the consumer waits for is its own GPU work.
    // Unless its threads were busy: see Note [busy threads while the copy
    // waits for device buffers].
    if (m.buffer_wait > 0.5) {
      if (threads_idle || !can_grow_workers) return std::nullopt;
      return Record(more_workers(), prefetch, workers, prefetch, m,
                    "the consumer waited and the threads were busy (the copy "
                    "waited for device buffers too)");
    }
    const bool copy_bound = CopyBound(m);
    // Note [busy threads in a ring full behind its copies]
    if (copy_bound && !threads_idle && can_grow_workers) {
      return Record(std::min(more_workers(), 2 * workers), prefetch, workers,
                    prefetch, m,
                    "the ring was full behind its copies with the threads "
                    "busy: more workers");
    }
    // Note [a ring deeper than its workers], Note [a queue behind the
    // copies]
    // (Busy threads are measured only when the workers are tuned.)
    const bool queued_behind_copies =
        workers_auto_ && FullMostlyBehindCopies(m) && prefetch >= 2 * m.busy;
    const bool deeper_helps = can_grow_prefetch && threads_idle &&
                              prefetch <= workers && !queued_behind_copies;
    if (copy_bound) {
      // Neither knob helps: on to the probe below.
    } else if (deeper_helps && m.slot_wait > 0.25) {
      // Note [fewer slots than workers: both knobs at once]
      if (can_grow_workers) {
        const int to_workers = need > workers ? more_workers() : workers;
        const int readers =
            static_cast<int>(std::min<double>(to_workers, need));
        // Slots of 4 MB or more only doubled (Note [fewer slots than
        // workers: both knobs at once]).
        const int to_prefetch =
            BandwidthBoundSlots()
                ? more_prefetch
                : std::min({plan_.max_prefetch, cap_prefetch_,
                            std::max(more_prefetch, readers + 1)});
        return Record(to_workers, to_prefetch, workers, prefetch, m,
                      "the ring, no deeper than the workers, was full while "
                      "threads were idle: slots and workers for the need");
      }
      return Record(workers, more_prefetch, workers, prefetch, m,
                    "the ring was full while threads were idle");
    } else if (can_grow_workers) {
      return Record(more_workers(), prefetch, workers, prefetch, m,
                    "the consumer waited");
    } else if (deeper_helps && m.slot_wait > 0.1) {
      // Every worker that may read is in use: a slot more helps only when
      // the ring held them back, idle (else the reads themselves are the
      // bound, and more pinned memory would buy nothing).
      return Record(workers, more_prefetch, workers, prefetch, m,
                    "the consumer waited at the most workers, the ring full");
    }
    // Waiting at the most workers it may use, with no slots to add: more
    // threads than the host's memory or storage serves only contend (on 2 x
    // H200, W1 at 31 workers ran 0.92 of the rate at 14). Try a quarter
    // fewer; the next window judges it.
    if (workers_auto_ && (copy_bound || !can_grow_workers) &&
        workers > floor_workers_) {
      const int target = std::max(floor_workers_, workers * 3 / 4);
      if (target < workers) {
        probe_wait_ = walking_down_ ? std::min(probe_wait_, m.wait) : m.wait;
        std::optional<AutoTuneChange> probe = Record(
            target, prefetch, workers, prefetch, m,
            copy_bound
                ? "the ring was full behind its copies: trying fewer workers"
                : "the consumer waited at the most workers: trying fewer");
        shrunk_workers_from_ = 0;  // judged as a probe, not a no-wait shrink
        probed_from_ = workers;
        walking_down_ = true;  // Record() ended the walk; this probe goes on
        return probe;
      }
    }
    return std::nullopt;
  }
  if (m.wait_share > rules_.zero_wait) {
    zero_windows_ = 0;
    return std::nullopt;
  }
  if (++zero_windows_ < rules_.shrink_windows) return std::nullopt;
  zero_windows_ = 0;
  if (workers_auto_) {
    const int target =
        std::max({floor_workers_, 1,
                  static_cast<int>(std::ceil(m.busy * rules_.shrink_margin))});
    if (target < workers) {
      return Record(target, prefetch, workers, prefetch, m,
                    "no wait; fewer threads keep up");
    }
  }
  if (prefetch_auto_) {
    // Note [a shrink keeps small slots deeper than the workers]
    const int keep = BandwidthBoundSlots() ? 2 : workers + 1;
    const int target = std::max({floor_prefetch_, keep, prefetch * 3 / 4});
    if (target < prefetch) {
      return Record(workers, target, workers, prefetch, m,
                    "no wait; trying fewer slots");
    }
  }
  return std::nullopt;
}

bool AutoTunePolicy::CopyBound(const AutoTuneMeasure& m) const {
  return m.slot_wait > 0.25 && FullMostlyBehindCopies(m) &&
         BandwidthBoundSlots();
}

std::optional<AutoTuneChange> AutoTunePolicy::Undo(int to_workers,
                                                   int to_prefetch, int workers,
                                                   int prefetch,
                                                   const AutoTuneMeasure& m,
                                                   const char* why) {
  if (floor_step_ == absl::ZeroDuration()) floor_step_ = m.step;
  std::optional<AutoTuneChange> undo =
      Record(to_workers, to_prefetch, workers, prefetch, m, why);
  // An undo is final: no grow to check, no shrink to learn a floor from.
  grew_from_workers_ = grew_from_prefetch_ = 0;
  shrunk_workers_from_ = shrunk_prefetch_from_ = 0;
  return undo;
}

std::optional<AutoTuneChange> AutoTunePolicy::Record(int to_workers,
                                                     int to_prefetch,
                                                     int workers, int prefetch,
                                                     const AutoTuneMeasure& m,
                                                     const char* why) {
  if (to_workers == workers && to_prefetch == prefetch) return std::nullopt;
  walking_down_ = false;  // a probe sets it again
  shrunk_workers_from_ = to_workers < workers ? workers : 0;
  shrunk_prefetch_from_ = to_prefetch < prefetch ? prefetch : 0;
  if (to_workers > workers || to_prefetch > prefetch) {
    grew_from_workers_ = workers;  // checked by the next window
    grew_from_prefetch_ = prefetch;
    wait_before_ = m.wait;
  }
  return AutoTuneChange{
      .workers = to_workers, .prefetch = to_prefetch, .why = why};
}

}  // namespace pinwheel::internal
