// Note [parked threads take no work]
// Under num_workers = kAuto the loader starts the most threads it may use,
// and the WorkerGate lets `active` of them read at once. The others still
// belong to the workers' arena: they take the pipeline's other tasks
// (claiming a batch and its slot, delivering it), steal from the readers,
// and spin and sleep as its work comes and goes. On one H200 (session 25,
// call B, W2, 50,000 batches, 3 repetitions) 11 workers x 16 slots by hand
// ran 76.7-78.2 k batches/s and 15 x 16 by hand 65.4-71.3 k, while auto
// ending at 11 active of 15 threads x 16 slots ran 61.7-72.4 k: the gate
// limited the reads to 11, but the loader ran like the 15 threads it had.
// So the threads beyond `active` are parked: the pipeline's first stage
// starts one task for each into the arena, which sleeps on this sink's
// mutex until the gate lets more threads read (or the epoch ends, or the
// loader stops). But oneTBB's threads serve every arena of the process:
// parking the arena's slots beyond `active`, each for as long as the epoch
// lasted, starved the sample trainer on one H200 (30-69 % of each epoch
// waiting for data, against 0.5-7.4 without parking; session 25, call C).
// Its held-out loader, its ring full, kept its parked threads for the
// whole training epoch, and the training loader's arena, holding fewer
// threads than its slots, had all of them parked. So only the threads the
// arena holds now beyond `active` are parked (ArenaThreads), and a parked
// thread goes back after ThreadSink::kParkAtMost (10 ms) unless the next
// batch parks it again: a loader that reads nothing holds none. A thread inside
// a batch's reads never takes one (those run isolated: Note [gated reads claim
// chunks inside the gate] in batch_filler.cc), and the epoch's end wakes them
// all and waits for their tasks, so none outlives the epoch that started it.
#include "loader/pipeline/thread_sink.h"

#include <algorithm>

#include "absl/time/clock.h"

#include "pinning/base/mutex.h"

namespace pinwheel::internal {

int ThreadSink::Want(int target) {
  MutexLock lock(&mu_);  // its release wakes those parked beyond the target
  target_ = std::max(0, target);
  if (stop_.stopping()) return 0;
  const int more = std::max(0, target_ - started_);
  started_ += more;
  return more;
}

void ThreadSink::Park() {
  MutexLock lock(&mu_);
  auto leave = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_.stopping() || started_ > target_;
  };
  if (!leave()) {
    ++parked_;
    AwaitWithDeadline(mu_, leave, absl::Now() + kParkAtMost);
    --parked_;
  }
  --started_;
}

void ThreadSink::Wake() {
  // Releasing the lock re-evaluates the waiters' conditions.
  MutexLock lock(&mu_);
}

int ThreadSink::parked() const {
  MutexLock lock(&mu_);
  return parked_;
}

int ThreadSink::started() const {
  MutexLock lock(&mu_);
  return started_;
}

ArenaThreads::ArenaThreads(tbb::task_arena& arena)
    : tbb::task_scheduler_observer(arena) {
  observe(true);
}

ArenaThreads::~ArenaThreads() { observe(false); }

void ArenaThreads::on_scheduler_entry(bool /*is_worker*/) {
  count_.fetch_add(1, std::memory_order_relaxed);
}

void ArenaThreads::on_scheduler_exit(bool /*is_worker*/) {
  count_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace pinwheel::internal
