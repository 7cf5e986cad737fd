// The one way the pipeline calls user code (a Dataset's Read, an
// IterableDataset's OpenShard, a SampleStream's Next/SaveState/RestoreState,
// worker_init): through CallUser() (pinning/base/call_user.h, shared with
// the device stage), so that whatever it throws becomes a Status naming the
// call. And WorkerInit, which runs LoaderOptions::
// worker_init once per thread and worker number per producer start.
//
// Example:
//   absl::Status status =
//       CallUser("Read", [&] { return dataset.Read(index, view); });
#ifndef PINWHEEL_LOADER_PIPELINE_USER_CODE_H_
#define PINWHEEL_LOADER_PIPELINE_USER_CODE_H_

#include <atomic>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

#include "pinning/base/call_user.h"

namespace pinwheel::internal {

// Runs worker_init where the dataset is called: once per thread and worker
// number in each producer run (see LoaderOptions::worker_init for the
// contract). Thread-safe: EnsureRan() from any worker; StartRun() and
// Quiesce() while no worker runs.
class WorkerInit {
 public:
  // `init` may be empty (nothing to run). `inline_mode`: samples are read on
  // the consumer's thread, worker 0; else a thread's number is its slot in
  // the loader's arena of `workers` threads.
  WorkerInit(std::function<absl::Status(int worker)> init, bool inline_mode,
             int workers);

  // Starts a producer run: worker_init runs again on every thread.
  void StartRun() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs worker_init on this thread if it has not run for this thread and
  // its worker number in this run. Returns its error, or the first error of
  // this run (which every later call returns too).
  absl::Status EnsureRan() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the first error of this run (OK if none).
  absl::Status error() const ABSL_LOCKS_EXCLUDED(mu_);
  // Call after the workers stopped: the workers' last critical sections on
  // mu_ ended before their pipeline returned, through oneTBB's own
  // synchronisation, which ThreadSanitizer does not see (Note
  // [ThreadSanitizer and the system libraries]); taking mu_ once shows it
  // that edge before a later StartRun() or the destructor touches them.
  void Quiesce() ABSL_LOCKS_EXCLUDED(mu_);

  // Returns the calling thread's worker number: its slot in the arena.
  int WorkerNumber() const;
  // Returns how many worker numbers there are (0..workers()-1).
  int workers() const { return workers_; }

 private:
  const std::function<absl::Status(int worker)> init_;
  const bool inline_;
  const int workers_;
  // Identifies the current run across every loader of the process.
  std::atomic<uint64_t> run_id_{0};
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // This run's initialised threads (by a token never reused, unlike
  // std::thread::id) and the worker number each was initialised with.
  absl::flat_hash_map<uint64_t, int> initialized_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_PIPELINE_USER_CODE_H_
