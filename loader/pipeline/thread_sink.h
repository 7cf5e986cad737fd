// ThreadSink: parks the worker threads that an auto-tuned loader does not
// let read (num_workers = kAuto: the threads started beyond
// WorkerGate::active()), each inside a task of the workers' arena that
// sleeps until fewer are to be parked or the loader stops, so that they
// take no other work of the pipeline either (Note [parked threads take no
// work] in thread_sink.cc).
//
// Example (Producer, in the pipeline's first stage):
//   for (int n = sink_.Want(threads - gate->active()); n > 0; --n) {
//     tasks.run([this] { sink_.Park(); });
//   }
//
// Thread-safe.
#ifndef PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_
#define PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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
  // the target and the loader does not stop; returns at once otherwise.
  // Each call must have been counted by Want().
  void Park() ABSL_LOCKS_EXCLUDED(mu_);
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

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_THREAD_SINK_H_
