// ThreadSink: parks the worker threads that an auto-tuned loader does not
// let read (num_workers = kAuto: the threads in its arena beyond
// WorkerGate::active()), each inside a task of the workers' arena that
// sleeps until fewer are to be parked, the loader stops, or a short while
// passes, so that they take no other work of the pipeline either (Note
// [parked threads take no work] in thread_sink.cc).
//
// Example (Producer, in the pipeline's first stage, once a batch):
//   for (int n = sink_.Want(in_arena.count() - gate->active()); n > 0; --n) {
//     tasks.run([this] { sink_.Park(); });
//   }
//
// Thread-safe.
#ifndef PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_
#define PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_

#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "oneapi/tbb/task_arena.h"
#include "oneapi/tbb/task_scheduler_observer.h"

#include "loader/pipeline/stop_flag.h"

namespace pinwheel::internal {

class ThreadSink {
 public:
  // Borrows `stop`, which must outlive it: a stopping loader parks nothing
  // (Wake() after setting it).
  explicit ThreadSink(const StopFlag& stop) : stop_(stop) {}
  ThreadSink(const ThreadSink&) = delete;
  ThreadSink& operator=(const ThreadSink&) = delete;

  // Sets how many threads to park (`target`, at least 0) and wakes those
  // parked beyond it. Returns how many more Park() calls to start for it
  // (those started and not yet returned count); 0 while stopping.
  int Want(int target) ABSL_LOCKS_EXCLUDED(mu_);
  // Parks the calling thread while no more Park() calls are started than
  // the target and the loader does not stop, for `kParkAtMost` at most;
  // returns at once otherwise. Each call must have been counted by Want().
  void Park() ABSL_LOCKS_EXCLUDED(mu_);
  // A parked thread goes back to oneTBB's threads after this long unless
  // parked again (by the next batch's Want()).
  static constexpr absl::Duration kParkAtMost = absl::Milliseconds(10);
  // Wakes every parked thread to look at the stop flag again.
  void Wake() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the threads parked now.
  int parked() const ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the Park() calls counted by Want() and not yet returned.
  int started() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const StopFlag& stop_;
  mutable absl::Mutex mu_;
  int target_ ABSL_GUARDED_BY(mu_) = 0;
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int parked_ ABSL_GUARDED_BY(mu_) = 0;
};

// Counts the threads in a oneTBB arena now (those parked in a ThreadSink's
// tasks included). Thread-safe (oneTBB calls it from each thread that
// enters or leaves the arena).
class ArenaThreads : public tbb::task_scheduler_observer {
 public:
  // Observes `arena` (which must outlive this) from now on.
  explicit ArenaThreads(tbb::task_arena& arena);
  ~ArenaThreads() override;
  ArenaThreads(const ArenaThreads&) = delete;
  ArenaThreads& operator=(const ArenaThreads&) = delete;

  void on_scheduler_entry(bool is_worker) override;
  void on_scheduler_exit(bool is_worker) override;

  // Returns the threads in the arena now.
  int count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int> count_{0};
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_
