// WorkerGate: how many of a loader's worker threads may read at once, set at
// run time by the auto-tuner (LoaderOptions::kAuto). The loader starts the
// most threads it may use; each takes the gate before a run of reads (a
// chunk of a batch's samples, or a shard's batch) and gives it back after,
// so that at most `active` threads read while the others wait on its
// condition, parked: they hold no CPU. The gate also measures what the
// tuner needs: the time threads spent holding it (the reading work, in
// thread-seconds) and the time they waited for it (reads held back).
//
// Example (BatchFiller):
//   const WorkerGate::Ticket ticket = gate->Enter();
//   ... read samples ...
//   gate->Exit(ticket);
//
// Thread-safe.
#ifndef PINWHEEL_LOADER_PIPELINE_WORKER_GATE_H_
#define PINWHEEL_LOADER_PIPELINE_WORKER_GATE_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#include "loader/pipeline/stop_flag.h"

namespace pinwheel::internal {

class WorkerGate {
 public:
  // What Enter() hands to Exit().
  struct Ticket {
    absl::Time entered;
  };
  // What the gate measured since the last TakeWindow().
  struct Window {
    absl::Duration busy;    // summed over threads: time holding the gate
    absl::Duration parked;  // summed over threads: time waiting for it
    int64_t parks = 0;      // entries that had to wait
  };

  // Borrows `stop`, which must outlive it: a stopping loader passes every
  // thread through (Wake() after setting it). REQUIRES: active >= 1.
  WorkerGate(int active, const StopFlag& stop);
  WorkerGate(const WorkerGate&) = delete;
  WorkerGate& operator=(const WorkerGate&) = delete;

  // Returns once fewer than `active` threads hold the gate (or the loader
  // stops), holding it.
  Ticket Enter() ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back what Enter() took.
  void Exit(const Ticket& ticket) ABSL_LOCKS_EXCLUDED(mu_);

  // Lets `active` threads (>= 1) read at once; a lower number takes effect
  // as holders exit.
  void SetActive(int active) ABSL_LOCKS_EXCLUDED(mu_);
  int active() const { return active_.load(std::memory_order_acquire); }
  // Wakes every waiter to look at the stop flag again.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the measures since the last call, and starts a new window.
  Window TakeWindow() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Takes a place when fewer than active_ hold one; false otherwise.
  bool TryTake();

  const StopFlag& stop_;
  // The fast path is two atomic operations; the mutex only parks and wakes
  // (see Note [a gate without a lock on its fast path] in worker_gate.cc).
  std::atomic<int> active_;
  std::atomic<int> holders_{0};
  std::atomic<int> waiting_{0};  // threads parked (or about to be)
  std::atomic<int64_t> busy_ns_{0};
  std::atomic<int64_t> parked_ns_{0};
  std::atomic<int64_t> parks_{0};
  absl::Mutex mu_;
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_WORKER_GATE_H_
